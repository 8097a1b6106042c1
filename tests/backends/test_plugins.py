"""Backends are plug-ins: one defined outside tinycc_ml is found through the entry-point group
``tinycc_ml.backends``, listed by ``tinycc-ml targets`` and used by ``compile(target=...)``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml import cli, plugins
from tinycc_ml.codegen import backend as base
from tinycc_ml.codegen.backend import ENTRY_POINT_GROUP, Backend, BuildOutput
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.models.protonn import ProtoNNModel

REPO = Path(__file__).resolve().parents[2]


class IRTextBackend(Backend):
    """A toy target: writes the optimised graph as IR text."""

    name = "irtext"
    description = "the optimised IR as text (test plug-in)"
    precisions = ("float",)

    def emit(self, graph, prefix, model_description):
        return BuildOutput(files={f"{prefix}.ir": print_graph(graph)}, prefix=prefix, input_ctype="float",
                           score_ctype="float", input_dim=graph.type(graph.inputs()[0]).shape[0],
                           n_scores=graph.type(graph.output("scores")).size)


def model() -> ProtoNNModel:
    rng = np.random.default_rng(0)
    return ProtoNNModel(rng.normal(size=(2, 5)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), 0.8,
                        rng.normal(size=5), rng.uniform(1, 2, size=5))


@pytest.fixture
def plugin_entry_points(monkeypatch):
    """Make the entry-point look-up see this module's backend (and a broken one) besides the real ones."""
    real = plugins.entry_points
    module = IRTextBackend.__module__

    def fake(group=None, **kwargs):
        found = list(real(group=group, **kwargs))
        if group == ENTRY_POINT_GROUP:
            found.append(EntryPoint(name="irtext", value=f"{module}:IRTextBackend", group=ENTRY_POINT_GROUP))
            found.append(EntryPoint(name="broken", value="no_such_module_xyz:Backend", group=ENTRY_POINT_GROUP))
        return found

    monkeypatch.setattr(plugins, "entry_points", fake)


def test_plugin_is_found_and_compiles(plugin_entry_points, tmp_path):
    backends = base.available_backends()
    assert backends["irtext"] is IRTextBackend
    assert "host" in backends
    result = tinycc_ml.compile(model(), target="irtext", out_dir=tmp_path / "out", name="toy")
    assert [p.name for p in result.paths] == ["toy.ir"]
    graph = parse_graph((tmp_path / "out" / "toy.ir").read_text())
    assert graph.structurally_equal(result.graph)
    names = [n.name for n in graph.nodes()]
    assert "normalised" not in names and "inv_std" not in names  # it got the optimised graph


def test_plugin_is_listed_by_targets(plugin_entry_points, capsys):
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "the optimised IR as text (test plug-in)" in lines["irtext"]
    assert "host" in lines
    assert "failed to load" in lines["broken"]


def test_a_broken_plugin_fails_only_when_used(plugin_entry_points, capsys, tmp_path):
    tinycc_ml.compile(model(), target="host")  # the others still work
    with pytest.raises(CompileError, match="broken"):
        tinycc_ml.compile(model(), target="broken")
    path = model().save(tmp_path / "m.npz")
    assert cli.main(["compile", str(path), "--target", "broken", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tinycc-ml: error: ") and "broken" in err
    assert not (tmp_path / "out").exists()


def test_plugin_precisions_are_respected(plugin_entry_points):
    with pytest.raises(CompileError, match="int16"):
        tinycc_ml.compile(model(), target="irtext", precision="int16", calibration=np.zeros((20, 5)))


def test_installed_distribution_entry_point_end_to_end(tmp_path):
    """A real dist-info with entry_points.txt on sys.path, seen by a fresh interpreter."""
    site = tmp_path / "site"
    (site / "tcm_toy_backend-1.0.dist-info").mkdir(parents=True)
    (site / "tcm_toy_backend-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tcm-toy-backend\nVersion: 1.0\n")
    (site / "tcm_toy_backend-1.0.dist-info" / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntoy = tcm_toy_backend:ToyBackend\n")
    (site / "tcm_toy_backend.py").write_text(textwrap.dedent('''
        from tinycc_ml.codegen.backend import Backend, BuildOutput
        from tinycc_ml.ir.text import print_graph

        class ToyBackend(Backend):
            name = "toy"
            description = "toy plug-in from an installed distribution"

            def emit(self, graph, prefix, model_description):
                return BuildOutput(files={prefix + ".ir": print_graph(graph)}, prefix=prefix,
                                   input_ctype="float", score_ctype="float", input_dim=1, n_scores=1)
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    listed = subprocess.run([sys.executable, "-m", "tinycc_ml", "targets"], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert any(line.startswith("toy ") and "toy plug-in from an installed distribution" in line
               for line in listed.splitlines()), listed
    path = model().save(tmp_path / "m.npz")
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(path), "--target", "toy",
                          "-o", str(tmp_path / "out"), "--name", "toy_model"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert parse_graph((tmp_path / "out" / "toy_model.ir").read_text()).name == "protonn"
