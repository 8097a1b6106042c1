"""The one plug-in mechanism (tinycc_ml.plugins.Registry) behind backends, model families, passes and
simulators: lazy built-ins, entry points, run-time registration; and what it buys: a new backend with
a ``simulate`` is measured by ``target_report`` with no target name written in target_report.py."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from tinycc_ml import plugins
from tinycc_ml.codegen.backend import BACKENDS, BUILTIN_BACKENDS, Backend, get_backend, register_backend
from tinycc_ml.errors import CompileError
from tinycc_ml.host.backend import HostBackend
from tinycc_ml.models.base import BUILTIN_FAMILIES, MODEL_FAMILIES
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.passes.manager import BUILTIN_PASSES, PASSES, Pass
from tinycc_ml.plugins import PluginError, Registry
from tinycc_ml.runtime.simulate import SIMULATORS, TargetRun
from tinycc_ml.target_report import target_report


def write_module(tmp_path, monkeypatch, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_builtins_are_imported_only_when_asked_for(tmp_path, monkeypatch):
    write_module(tmp_path, monkeypatch, "tcm_lazy_plugin", "VALUE = 41\n")
    reg = Registry("widget", "tinycc_ml.test_widgets", {"lazy": "tcm_lazy_plugin:VALUE"})
    assert "lazy" in reg and reg.names() == ["lazy"]
    assert "tcm_lazy_plugin" not in sys.modules
    assert reg["lazy"] == 41 and "tcm_lazy_plugin" in sys.modules


def fake_entry_points(monkeypatch, group: str, **specs) -> None:
    real = plugins.entry_points

    def fake(group_asked=None, **kwargs):
        group_asked = kwargs.pop("group", group_asked)
        if group_asked == group:
            return [EntryPoint(name=name, value=value, group=group) for name, value in specs.items()]
        return real(group=group_asked, **kwargs)

    monkeypatch.setattr(plugins, "entry_points", fake)


def test_entry_points_add_names_and_registrations_override_builtins(tmp_path, monkeypatch, caplog):
    """Issue 36, item 10: an installed plug-in with a built-in's name silently replaced it; the built-in
    now wins and a warning names both. A run-time registration still wins (it is asked for)."""
    write_module(tmp_path, monkeypatch, "tcm_ep_plugin", "A = 'from entry point'\nB = 'new'\n")
    fake_entry_points(monkeypatch, "tinycc_ml.test_widgets", w="tcm_ep_plugin:A", fresh="tcm_ep_plugin:B")
    reg = Registry("widget", "tinycc_ml.test_widgets", {"w": "json:dumps", "other": "json:loads"})
    with caplog.at_level("WARNING", logger="tinycc_ml.plugins"):
        assert reg["w"] is __import__("json").dumps and reg["other"] is __import__("json").loads
    assert reg["fresh"] == "new"
    assert "tcm_ep_plugin:A" in caplog.text and "json:dumps" in caplog.text and "built-in is used" in caplog.text
    reg.register("w", "registered")
    assert reg["w"] == "registered"


@pytest.mark.parametrize("source, words", [
    ("import sys\nsys.exit(3)\n", ["exited while loading", "SystemExit(3)"]),
    ("def Backend():\n    return 1\n", ["is a function, not a Backend subclass"]),
    ("Backend = 42\n", ["is a int, not a Backend subclass"]),
    ("class Backend:\n    pass\n", ["is the class Backend, not a Backend subclass"]),
])
def test_target_plug_ins_that_exit_or_are_not_backends_are_one_line(tmp_path, monkeypatch, capsys, source, words):
    """Issue 36, item 10: a plug-in raising SystemExit on import silenced `targets` and `compile`; one that
    is not a Backend gave tracebacks. Each is a PluginError; `targets` lists it as broken."""
    from tinycc_ml.cli import main

    module = f"tcm_bad_target_{abs(hash(source)) % 10**6}"
    write_module(tmp_path, monkeypatch, module, source)
    fake_entry_points(monkeypatch, "tinycc_ml.backends", oddity=f"{module}:Backend")
    with pytest.raises(PluginError) as err:
        get_backend("oddity")
    assert all(w in str(err.value) for w in words)
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "host" in out and "oddity" in out and "failed to load" in out
    from tinycc_ml.models.linear import LinearModel

    LinearModel(np.eye(2), np.zeros(2)).save(tmp_path / "m.npz")
    assert main(["compile", str(tmp_path / "m.npz"), "-o", str(tmp_path / "o"), "--target", "oddity"]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and "oddity" in err_lines[0]


def test_unknown_and_broken_entries_are_one_clear_error():
    reg = Registry("widget", "tinycc_ml.test_widgets", {"ok": "json:dumps", "bad": "no_such_module_q:X"})
    with pytest.raises(PluginError, match=r"unknown widget 'nope'; available: bad, ok"):
        reg.load("nope")
    with pytest.raises(PluginError, match=r"widget bad: plug-in no_such_module_q:X failed to load"):
        reg.load("bad")
    assert isinstance(PluginError("x"), CompileError)
    assert "nope" not in reg
    with pytest.raises(KeyError):
        reg["nope"]
    assert isinstance(reg.load_all()["bad"], PluginError) and reg.load_all()["ok"] is __import__("json").dumps


@pytest.mark.parametrize("registry, builtins, attribute", [
    (BACKENDS, BUILTIN_BACKENDS, "name"), (MODEL_FAMILIES, BUILTIN_FAMILIES, "family"),
    (PASSES, BUILTIN_PASSES, "name"), (SIMULATORS, None, None)])
def test_every_builtin_loads_under_its_own_name(registry, builtins, attribute):
    for name in builtins or registry.names():
        obj = registry.load(name)
        if attribute:
            assert getattr(obj, attribute) == name
    if registry is PASSES:
        assert all(issubclass(PASSES[name], Pass) for name in BUILTIN_PASSES)
    if registry is SIMULATORS:
        assert {"avr", "cortex-m0"} <= set(registry.names())
        assert all(registry.load(n).unit in ("cycles", "instructions") for n in registry.names())


class TwinBackend(HostBackend):
    """A new target, reportable through simulate() only (the host's, with a made-up cost)."""

    name = "twin"

    def simulate(self, out_dir, output, X):
        run = super().simulate(out_dir, output, X)
        return TargetRun(target=self.name, predictions=run.predictions, scores=run.scores,
                         cycles=np.full(len(X), 1000), instructions=None, stack_bytes=12, flash_bytes=345,
                         ram_bytes=67, method="twin")


def test_report_works_for_any_backend_with_simulate(monkeypatch):
    monkeypatch.setitem(BACKENDS, "twin", TwinBackend)
    rng = np.random.default_rng(0)
    model = ProtoNNModel(rng.normal(size=(3, 6)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), 0.7)
    X = rng.normal(size=(30, 6))
    y = model.predict(X)
    rep = target_report(model, "twin", X, y, precision="int16")
    assert rep["method"] == "twin" and rep["cycles_mean"] == 1000 and rep["flash_bytes"] == 345
    assert rep["agreement_with_float"] > 0.8 and rep["per_mac"] == 1000 / rep["macs"]


def test_a_backend_without_simulate_is_refused_by_report(monkeypatch):
    class Mute(HostBackend):
        name = "mute"
        simulate = Backend.simulate  # the base class's: no simulator

    register_backend(Mute)
    try:
        rng = np.random.default_rng(0)
        model = ProtoNNModel(rng.normal(size=(2, 4)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), 0.7)
        with pytest.raises(CompileError, match=r"target mute \(.*\) cannot run its builds in a simulator"):
            target_report(model, "mute", rng.normal(size=(20, 4)), precision="float")
        assert get_backend("mute").name == "mute"
    finally:
        del BACKENDS["mute"]
