"""The public backend API (tinycc_ml.target): capabilities instead of target names, the layering it
promises (passes import no backend, plug-ins need no private name), the portable harness' protocol,
and one clear error for a broken or incomplete plug-in."""

from __future__ import annotations

import ast
import re
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
import tinycc_ml.target as target_api
from tinycc_ml import cli, plugins
from tinycc_ml.codegen.backend import Backend
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.runtime.simulate import make_spec
from tinycc_ml.target import (
    CapabilityError,
    Chip,
    CTarget,
    McuBackend,
    PluginError,
    ToolchainError,
    get_backend,
    parse_harness_output,
    register_backend,
)

REPO = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = {"riscv": REPO / "examples" / "tinycc-ml-riscv", "esp8266": REPO / "examples" / "tinycc-ml-esp8266"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_pass_imports_a_backend():
    code_generation = ("tinycc_ml.codegen", "tinycc_ml.target", "tinycc_ml.avr", "tinycc_ml.arm", "tinycc_ml.host",
                       "tinycc_ml.buildsys")
    for path in sorted((REPO / "tinycc_ml" / "passes").glob("*.py")):
        bad = [m for m in imported_modules(path) if m.startswith(code_generation)]
        assert not bad, f"{path.name} imports {bad}"


def test_no_target_name_outside_the_backends():
    """Logic outside a target's own package never branches on a target's name."""
    names = re.compile(r"""(==|!=|\bin)\s*\(?["'](avr|cortex-m0|cortex-m4|cortex-m33|host|riscv)["']""")
    offenders = []
    for path in sorted((REPO / "tinycc_ml").rglob("*.py")):
        if path.parent.name in ("avr", "arm", "host") and path.parent.parent.name == "tinycc_ml":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if names.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("plugin", sorted(PLUGIN_PACKAGES))
def test_the_example_plugins_use_only_the_public_api(plugin):
    used = set()
    for path in sorted(PLUGIN_PACKAGES[plugin].rglob("*.py")):
        used |= {m for m in imported_modules(path) if m == "tinycc_ml" or m.startswith("tinycc_ml.")}
    assert used <= {"tinycc_ml", "tinycc_ml.target", "tinycc_ml.testing"}, used
    for path in sorted(PLUGIN_PACKAGES[plugin].rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "tinycc_ml.target":
                assert {a.name for a in node.names} <= set(target_api.__all__), path


def test_every_public_name_is_there():
    for name in target_api.__all__:
        assert getattr(target_api, name) is not None, name


def test_builtin_capabilities():
    assert get_backend("avr").capabilities() == {"simulate", "profile", "project_files", "arduino_library"}
    assert get_backend("cortex-m0").capabilities() == {"simulate", "profile", "project_files"}
    assert get_backend("cortex-m4").capabilities() == {"simulate", "profile", "project_files"}
    assert get_backend("cortex-m33").capabilities() == {"simulate", "profile", "project_files"}
    assert get_backend("host").capabilities() == {"load", "simulate"}
    assert get_backend("avr").target_attributes().prototype_bits == 8
    with pytest.raises(ValueError, match="unknown capability"):
        get_backend("host").supports("teleport")


def test_a_missing_capability_names_the_target_and_what_it_lacks(tmp_path, capsys):
    with pytest.raises(CapabilityError, match=r"target host \(.*HostBackend\) cannot write a standalone firmware"):
        get_backend("host").project_files(None, None)
    path = ProtoNNModel(np.eye(2), np.ones((2, 2)), np.ones((2, 2)), 1.0).save(tmp_path / "m.npz")
    assert cli.main(["compile", str(path), "--target", "host", "--project", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--project needs a target that writes one (avr, cortex-m0" in err
    assert not (tmp_path / "o").exists()


class GhostMcu(McuBackend):
    """An MCU plug-in whose simulator plug-in does not import."""

    name = "ghost"
    description = "test: a chip whose simulator is broken"
    chip = Chip("ghost chip", "cortex-m0", 256 * 1024, 16 * 1024, 16_000_000, (), (), code_estimate=4000,
                stack_estimate=256)
    simulator = "ghost-sim"

    def c_target(self, graph):
        return CTarget("ghost")


@pytest.fixture
def ghost(monkeypatch):
    real = plugins.entry_points

    def fake(group=None, **kwargs):
        found = list(real(group=group, **kwargs))
        if group == "tinycc_ml.simulators":
            found.append(EntryPoint(name="ghost-sim", value="no_such_simulator_xyz:SIM", group=group))
        return found

    monkeypatch.setattr(plugins, "entry_points", fake)
    register_backend(GhostMcu)
    yield
    del target_api.BACKENDS["ghost"]


def test_a_broken_simulator_plugin_is_never_a_misfit(ghost, tmp_path, capsys):
    rng = np.random.default_rng(0)
    model = ProtoNNModel(rng.normal(size=(2, 4)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), 0.7)
    with pytest.raises(PluginError) as info:
        tinycc_ml.compile(model, target="ghost")
    text = str(info.value)
    assert "target ghost" in text and "ghost-sim" in text and "no_such_simulator_xyz" in text
    assert "does not fit" not in text
    path = model.save(tmp_path / "m.npz")
    assert cli.main(["compile", str(path), "--target", "ghost", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ghost-sim" in err and "does not fit" not in err
    with pytest.raises(ToolchainError, match="ghost-sim"):
        tinycc_ml.runtime.toolchains.require_target("ghost")


def test_a_backend_with_emit_only_is_a_backend():
    class EmitOnly(Backend):
        name = "emit-only"

    assert EmitOnly.capabilities() == frozenset()


def _spec(tmp_path, task=None, n_scores=2):
    (tmp_path / "m.c").write_text("")
    (tmp_path / "m.h").write_text("")
    return make_spec([tmp_path / "m.c"], tmp_path / "m.h", "m", 3, n_scores, "int16_t", "int32_t", task=task)


def test_harness_protocol_round_trip(tmp_path):
    spec = _spec(tmp_path, task="regression")
    rows = []
    for pred, count, stack, scores, value in [(1, 110, 24, (5, -7), 9), (0, 112, 28, (-1, 3), -2)]:
        raw = (np.array([pred], "<i4").tobytes() + np.array([count, stack], "<u4").tobytes()
               + np.array(scores, "<i4").tobytes() + np.array([value], "<i4").tobytes())
        rows.append("R" + raw.hex())
    text = "\n".join(["boot noise", "C" + np.array([10], "<u4").tobytes().hex(), *rows, "E", ""])
    out = parse_harness_output(text, spec, 2)
    assert out.predictions.tolist() == [1, 0] and out.counts.tolist() == [100, 102] and out.stack_bytes == 28
    assert out.scores.tolist() == [[5, -7], [-1, 3]] and out.task["values"].tolist() == [9, -2]


@pytest.mark.parametrize("damage", ["drop_end", "drop_row", "short_row", "no_calibration"])
def test_harness_protocol_refuses_damaged_output(tmp_path, damage):
    spec = _spec(tmp_path)
    row = "R" + (np.array([1, 5, 4, 7, 8], "<i4").tobytes()).hex()
    lines = ["C" + "00000000", row, row, "E"]
    if damage == "drop_end":
        lines.pop()
    elif damage == "drop_row":
        lines.pop(1)
    elif damage == "short_row":
        lines[1] = lines[1][:-2]
    else:
        lines.pop(0)
    with pytest.raises(ToolchainError):
        parse_harness_output("\n".join(lines), spec, 2)


def test_conformance_checks_pass_on_the_host(tmp_path):
    from tinycc_ml.testing import FAMILIES, check_target

    report = check_target("host", tmp_path, seeds=(0,))
    assert len(report.cases) == len(FAMILIES) * 3 + 1
    assert report.not_applicable == ["size limit: the target has no chip"]


def test_conformance_checks_catch_a_wrong_target(tmp_path):
    """A target whose C is wrong by one unit in the last score fails the bit-exact check."""
    from tinycc_ml.host.backend import HostBackend
    from tinycc_ml.testing import check_model, random_inputs, random_model

    class OffByOne(HostBackend):
        name = "off-by-one"

        def emit(self, graph, prefix, model_description):
            out = super().emit(graph, prefix, model_description)
            src = out.files[f"{prefix}.c"]
            marker = f"int {prefix}_predict("
            assert marker in src
            out.files[f"{prefix}.c"] = src.replace(
                f"void {prefix}_scores(", f"static void {prefix}_scores_real(", 1).replace(
                marker, f"int {prefix}_predict(") + (
                f"\nvoid {prefix}_scores(const int16_t *x, {out.score_ctype} *scores)\n"
                f"{{\n    {prefix}_scores_real(x, scores);\n    scores[{out.n_scores - 1}] += 1;\n}}\n")
            # the loaded build runs rows through <prefix>_predict_batch where the header declares it (the host's
            # batch kernels, which do not call _scores): hidden here, so the single-row entry points run
            out.files[f"{prefix}.h"] = out.files[f"{prefix}.h"].replace(f"void {prefix}_predict_batch(",
                                                                      f"void {prefix}_predict_batch_hidden(")
            return out

    register_backend(OffByOne)
    try:
        rng = np.random.default_rng(2)
        model = random_model("linear", rng)
        X = random_inputs(model, rng, 24)
        with pytest.raises(AssertionError, match="scores differ"):
            check_model("off-by-one", model, X, "int16", tmp_path)
    finally:
        del target_api.BACKENDS["off-by-one"]
