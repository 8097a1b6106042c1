"""tinycc_ml.fit / tinycc-ml fit: the search respects the limits by measurement, is deterministic,
refuses bad input and impossible limits clearly, and writes its outputs all or nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import DataError, InfeasibleError, TinyccError
from tinycc_ml.search.candidates import FAMILIES, Ladder
from tinycc_ml.search.limits import M0_CYCLES_PER_INSTRUCTION, Limits

QUICK = {"families": "linear,protonn", "sizes_per_family": 2, "time_budget": None}


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def host_fit(iris, tmp_path_factory):
    require_target("host")
    X, Xt, y, yt = iris
    out = tmp_path_factory.mktemp("fit") / "out"
    return tinycc_ml.fit(X, y, target="host", max_flash=600, X_test=Xt, y_test=yt, out_dir=out, name="iris",
                         **QUICK), out


def _without_times(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    data.pop("seconds")
    for c in data["candidates"]:
        c.pop("train_seconds")
    return data


# ---------------------------------------------------------------- results


def test_host_fit_meets_the_flash_limit_and_writes_everything(host_fit, iris):
    res, out = host_fit
    assert res.chosen.feasible and res.chosen.flash_bytes <= 600
    assert sorted(p.name for p in out.iterdir()) == sorted(["iris.npz", "iris.h", "iris.c", "pareto.json",
                                                            "pareto.txt", "pareto.png"])
    # the written model, compiled again on its own, takes what the search measured
    model = tinycc_ml.load_model(out / "iris.npz")
    X, Xt, y, yt = iris
    again = tinycc_ml.compile(model, target="host", precision=res.chosen.precision,
                              calibration=None if res.chosen.precision == "float" else X, name="iris")
    assert again.output.const_bytes <= 600
    assert (out / "iris.c").read_text() == res.compiled.files["iris.c"]
    # its test accuracy is what the verification says
    assert res.verification["accuracy"] == pytest.approx(np.mean(res.compiled.load().predict(Xt) == yt))
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_candidate_is_judged_by_its_own_figures(host_fit):
    res, out = host_fit
    data = json.loads((out / "pareto.json").read_text())
    assert data["format"] == "tinycc-ml-fit" and data["target"] == "host" and data["limits"]["max_flash"] == 600
    search = data["search"]
    assert search["train_rows"] + search["validation_rows"] == 105 and search["test_rows"] == 45
    assert search["classes"] == [0, 1, 2] and search["families"] == ["protonn", "linear"]
    ids = [c["id"] for c in data["candidates"]]
    assert ids == list(range(len(ids)))
    for c in data["candidates"]:
        assert c["family"] in FAMILIES and c["precision"] in ("float", "int16", "int8")
        assert c["status"] in ("measured", "pruned", "skipped", "failed")
        if c["status"] == "measured":
            assert 0 <= c["val_accuracy"] <= 1 and c["flash_bytes"] > 0 and c["ram_bytes"] > 0
            assert ("flash" in c["failed"]) == (c["flash_bytes"] > 600)
            assert c["feasible"] == (not c["failed"])
        else:
            assert not c["feasible"]
    measured = [c for c in data["candidates"] if c["status"] == "measured"]
    front = {c["id"] for c in data["candidates"] if c["on_front"]}
    assert front == set(data["front"])
    for c in measured:  # the front is exactly the undominated measured candidates (accuracy up, flash down)
        beaten = any(o["val_accuracy"] >= c["val_accuracy"] and o["flash_bytes"] <= c["flash_bytes"]
                     and (o["val_accuracy"], o["flash_bytes"]) != (c["val_accuracy"], c["flash_bytes"])
                     for o in measured)
        assert (c["id"] in front) == (not beaten)
    chosen = data["candidates"][data["chosen"]["id"]]
    assert chosen["feasible"]
    # the one-standard-error rule: the smallest flash within one SE of the most accurate feasible candidate
    best = max((c for c in measured if c["feasible"]), key=lambda c: c["val_accuracy"])
    near = [c for c in measured if c["feasible"]
            and c["val_accuracy"] >= best["val_accuracy"] - best["val_accuracy_se"] - 1e-9]
    assert chosen["val_accuracy"] >= best["val_accuracy"] - best["val_accuracy_se"] - 1e-9
    assert chosen["flash_bytes"] == min(c["flash_bytes"] for c in near)
    assert data["chosen"]["verification"]["rows"] == 45


def test_fit_is_deterministic_for_a_random_state(host_fit, iris):
    res, _ = host_fit
    X, Xt, y, yt = iris
    again = tinycc_ml.fit(X, y, target="host", max_flash=600, X_test=Xt, y_test=yt, name="iris", **QUICK)
    assert _without_times(again.as_json()) == _without_times(res.as_json())
    assert again.files["iris.c"] == res.files["iris.c"]


def test_a_spent_time_budget_still_gives_a_result_and_says_so(iris, monkeypatch):
    require_target("host")
    from tests.fake_clock import SpentClock
    from tinycc_ml.search import fit as fit_module

    X, _, y, _ = iris
    monkeypatch.setattr(fit_module, "clock", SpentClock(60.0))
    res = tinycc_ml.fit(X, y, target="host", families="linear,protonn", sizes_per_family=2, time_budget=30.0,
                        refit=False)
    assert not res.complete and "stopped early" in res.report()
    assert [c.status for c in res.candidates if c.status != "skipped"]
    assert any(c.status == "skipped" and c.note == "time budget reached" for c in res.candidates)


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_mcu_fit_meets_every_limit_measured_again_in_the_simulator(target, iris, tmp_path):
    require_target(target)
    from tinycc_ml.target_report import target_report

    X, Xt, y, yt = iris
    res = tinycc_ml.fit(X, y, target=target, max_flash=1400, max_ram=400, max_ms=1.0, X_test=Xt, y_test=yt,
                        out_dir=tmp_path, **QUICK)
    assert res.chosen.feasible and res.verification["failed"] == []
    # an independent measurement of the written model (its own compile and simulator run)
    report = target_report(tmp_path / "model.npz", target, Xt, yt, precision=res.chosen.precision,
                           calibration=X)
    count = report["cycles_max"] if target == "avr" else report["instructions_max"]
    per = 1.0 if target == "avr" else M0_CYCLES_PER_INSTRUCTION
    assert count * per / 16e6 * 1e3 <= 1.0
    assert report["model_flash_bytes"] <= 1400
    assert report["model_ram_bytes"] + report["stack_bytes"] <= 400
    assert report["target_accuracy"] == pytest.approx(res.verification["accuracy"])


# ---------------------------------------------------------------- limits and ladders


def test_limits_judge_flash_ram_and_latency():
    from tinycc_ml.codegen.backend import get_backend

    limits = Limits.make("avr", get_backend("avr"), max_flash=1000, max_ram=200, max_ms=2.0)
    assert limits.count_unit == "cycles" and limits.ms(32000) == pytest.approx(2.0)
    assert limits.failed(1000, 200, 32000) == []
    assert limits.failed(1001, 201, 32001) == ["flash", "ram", "latency"]
    m0 = Limits.make("cortex-m0", get_backend("cortex-m0"), max_ms=1.0, clock_hz=48e6)
    assert m0.ms(32000) == pytest.approx(32000 * M0_CYCLES_PER_INSTRUCTION / 48e3)


def test_ladder_sizes_are_predicted_to_fit_each_precision():
    ladder = Ladder(FAMILIES["protonn"], ("int16", "int8"), 16384, 1024, 256, 10, 5000, 4)
    (first,) = ladder.sizes
    ladder.learn("int16", first, const_bytes=first // 2, flash_bytes=first // 2 + 1500)
    ladder.learn("int8", first, const_bytes=first // 4 + 300, flash_bytes=first // 4 + 300 + 1500)
    ladder.extend()
    sizes = ladder.sizes
    assert sizes == sorted(sizes) and len(sizes) <= 4 and sizes[0] == first
    for p in ("int16", "int8"):
        fitting = [s for s in sizes if ladder.predicted_flash(p, s) <= 16384]
        assert fitting and max(ladder.predicted_flash(p, s) for s in fitting) > 0.9 * 16384  # fills the flash
    assert max(ladder.predicted_flash("int8", s) for s in sizes) <= 16384


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("change, message", [
    ({"y": None}, "no labels"),
    ({"y": "one class"}, "single class"),
    ({"X": "nan"}, "NaN"),
    ({"y": "continuous"}, "class labels"),
    ({"max_flash": 0}, "max_flash"),
    ({"max_ram": -5}, "max_ram"),
    ({"max_ms": float("nan")}, "max_ms"),
    ({"families": "protonn,forest"}, "unknown model family 'forest'"),
    ({"target": "pdp11"}, "pdp11"),
    ({"precision": "int4"}, "int4"),
    ({"X_test": "only"}, "X_test and y_test"),
    ({"max_ms": 5, "target": "host"}, "max_ms"),
    ({"max_flash": 10 ** 6}, "ATmega328P"),
    ({"name": "not an identifier"}, "identifier"),
])
def test_bad_input_is_refused_before_any_work(change, message, iris, monkeypatch):
    from tinycc_ml.search import fit as fit_module

    def no_search(*args, **kwargs):
        raise AssertionError("the search started")

    monkeypatch.setattr(fit_module._Search, "run", no_search)
    X, Xt, y, _ = iris
    kwargs = {"X": X, "y": y, "target": "avr"}
    for key, value in change.items():
        if value == "continuous":
            value = np.linspace(0, 1, len(y))
        elif value == "one class":
            value = np.zeros(len(y), dtype=int)
        elif value == "nan":
            value = X.copy()
            value[3, 1] = np.nan
        elif value == "only":
            value = Xt
        kwargs[key] = value
    with pytest.raises(TinyccError, match=message):
        tinycc_ml.fit(**kwargs)


def test_impossible_limits_name_the_closest_candidates(iris, tmp_path):
    require_target("avr")
    X, _, y, _ = iris
    with pytest.raises(InfeasibleError) as info:
        tinycc_ml.fit(X, y, target="avr", max_flash=300, out_dir=tmp_path / "out", **QUICK)
    assert isinstance(info.value, ValueError)
    assert "closest:" in str(info.value) and "linear logistic" in str(info.value)
    assert info.value.closest and all(c["flash_bytes"] > 300 for c in info.value.closest)
    assert not (tmp_path / "out").exists()


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "tinycc_ml", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def iris_file(iris, tmp_path_factory):
    X, Xt, y, yt = iris
    path = tmp_path_factory.mktemp("data") / "iris.npz"
    np.savez(path, X_train=X, y_train=y, X_test=Xt, y_test=yt)
    return path


def test_cli_fit_prints_the_front_and_writes_the_files(iris_file, tmp_path):
    require_target("host")
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "host", "--max-flash", "1K", "--families", "linear",
                "--time-budget", "120", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Pareto front" in proc.stdout and "chose linear" in proc.stdout and "verified on 45 test rows" in proc.stdout
    data = json.loads((out / "pareto.json").read_text())
    assert data["limits"]["max_flash"] == 1024
    assert (out / "model.npz").is_file() and (out / "model.h").is_file()


def test_cli_fit_impossible_limits_exit_2_with_one_line(iris_file, tmp_path):
    require_target("avr")
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "avr", "--max-flash", "300", "--families", "linear",
                "-o", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinycc-ml: error: no candidate meets") and "closest" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--max-flash", "lots"], "not a byte count"),
    (["--max-flash", "0"], "max_flash is 0"),
    (["--families", "tree"], "unknown model family"),
])
def test_cli_fit_bad_options_exit_2(iris_file, tmp_path, args, message):
    proc = _cli("fit", str(iris_file), "-o", str(tmp_path / "out"), *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_fit_needs_labels(tmp_path):
    path = tmp_path / "rows.npz"
    np.savez(path, X_train=np.zeros((10, 3)))
    proc = _cli("fit", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and "y_train" in proc.stderr


def test_without_matplotlib_there_is_json_and_a_note(iris, monkeypatch, caplog):
    require_target("host")
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    X, _, y, _ = iris
    with caplog.at_level("WARNING", logger="tinycc_ml"):
        res = tinycc_ml.fit(X, y, target="host", families="linear", time_budget=None, refit=False)
    assert "pareto.png" not in res.files and "pareto.json" in res.files
    assert "matplotlib is not installed" in json.loads(res.files["pareto.json"])["plot"]
    assert any("matplotlib" in r.getMessage() for r in caplog.records)


def test_data_error_is_a_value_error():
    assert issubclass(InfeasibleError, ValueError) and issubclass(DataError, ValueError)


def test_refinement_fills_the_flash_between_what_fits_and_what_does_not():
    ladder = Ladder(FAMILIES["protonn"], ("int8",), 16384, 1024, 256, 10, 5000, 3)
    ladder.sizes = [10240, 20480, 40960]
    ladder.learn("int8", 10240, 4000, 6000)
    ladder.learn("int8", 20480, 6000, 8000)
    ladder.block("int8", 40960)  # could not be built at all (did not fit the chip)
    assert ladder.refine()
    new = ladder.sizes[-1]
    assert 1.1 * 20480 <= new <= 0.9 * 40960
    ladder.learn("int8", new, 20000, 22000)  # overshoots: the next try lies between by the secant
    assert ladder.refine()
    secant = ladder.sizes[-1]
    assert 20480 < secant < new
    assert abs(8000 + (secant - 20480) * (22000 - 8000) / (new - 20480) - 0.97 * 16384) < 0.02 * 16384
    assert not ladder.refine()  # at most MAX_REFINEMENTS per family


def test_a_build_the_linker_cannot_place_is_refused_not_estimated():
    """Constants within the chip's estimate, firmware beyond its flash: the linker's word wins (a search
    must never take such a build for one that fits)."""
    require_target("avr")
    from tinycc_ml.errors import CompileError
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(0)
    D, d = 256, 50
    model = ProtoNNModel(rng.normal(size=(d, D)), rng.normal(size=(d, 30)), rng.normal(size=(5, 30)), 0.1)
    with pytest.raises(CompileError, match="does not fit the ATmega328P: the linker (finds|cannot)") as info:
        tinycc_ml.compile(model, target="avr", precision="int16", calibration=rng.normal(size=(64, D)), name="big")
    assert "ld:" not in str(info.value) and "`" not in str(info.value)  # said in words, not the tool's output


def test_candidate_labels_count_parameters_not_flash():
    """The trainers' budget is float32 parameters (4 B each): a label in bytes read as the build's flash."""
    from tinycc_ml.search.candidates import describe_settings

    assert describe_settings("bonsai", {"budget_bytes": 8192}) == "<= 2,048 params"
    label = describe_settings("protonn", {"budget_bytes": 23808, "projection_dim": 30, "n_prototypes": 100})
    assert label == "5,952 params, d=30, m=100" and " B" not in label


def test_a_search_can_start_from_the_users_estimator(iris):
    """fit(start_from=RandomForestClassifier(max_depth=3, min_samples_leaf=2, criterion="entropy")): only the
    random-forest ladder is climbed, every candidate keeps the user's settings (not the size), and the chosen
    model is such a forest; estimators no family trains, or settings that cannot be kept, are refused."""
    require_target("host")
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.svm import SVC

    X, Xt, y, yt = iris
    mine = RandomForestClassifier(n_estimators=500, max_depth=3, min_samples_leaf=2, criterion="entropy")
    res = tinycc_ml.fit(X, y, target="host", max_flash=3000, X_test=Xt, y_test=yt, sizes_per_family=2,
                        time_budget=None, start_from=mine)
    assert {c.family for c in res.candidates} == {"random-forest"}
    for c in res.candidates:
        assert {k: c.settings[k] for k in ("max_depth", "min_samples_leaf", "criterion")} == \
            {"max_depth": 3, "min_samples_leaf": 2, "criterion": "entropy"}
        assert c.settings["n_estimators"] != 500  # the ladder's sizes, under the flash limit
    chosen = res.estimator
    assert (chosen.max_depth, chosen.min_samples_leaf, chosen.criterion) == (3, 2, "entropy")
    assert res.chosen.flash_bytes <= 3000
    with pytest.raises(DataError, match="a SVC cannot start a search"):
        tinycc_ml.fit(X, y, target="host", start_from=SVC())
    with pytest.raises(DataError, match="class_weight=.* cannot be kept"):
        tinycc_ml.fit(X, y, target="host", start_from=RandomForestClassifier(class_weight={0: 1.0, 1: 2.0, 2: 1.0}))
    with pytest.raises(DataError, match="leave it out"):
        tinycc_ml.fit(X, y, target="host", families="linear", start_from=mine)
