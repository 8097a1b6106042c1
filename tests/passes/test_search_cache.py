"""The scale search's results are cached per input: an unchanged rebuild skips the search and gives
the same files and figures; any change of the inputs, a shared cache folder or a damaged entry does not
reuse a result."""

import json
import os

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.passes import fixed_pipeline


@pytest.fixture(scope="module")
def case():
    X, y = load_digits(return_X_y=True)
    return init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2), X[:300]


@pytest.fixture
def searches(monkeypatch, tmp_path):
    """The cache in a fresh private folder; counts the searches run."""
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("TINYCC_ML_CACHE", str(root))
    calls = []
    real = fixed_pipeline.search_scales

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fixed_pipeline, "search_scales", counted)
    return root, calls


FIGURES = ("agreement_with_float", "score_error", "held_out_disagreements", "scale_adjustments")


def test_an_unchanged_rebuild_skips_the_search_and_gives_the_same_output(case, searches):
    model, X = case
    root, calls = searches
    first = tinycc_ml.compile(model, precision="int16", calibration=X)
    second = tinycc_ml.compile(model, precision="int16", calibration=X)
    assert len(calls) == 1
    assert second.files == first.files
    assert {k: second.report[k] for k in FIGURES} == {k: first.report[k] for k in FIGURES}
    assert list((root / fixed_pipeline.SEARCH_CACHE).glob("*.json"))


@pytest.mark.parametrize("change", [
    lambda m, X: (m, np.vstack([X[:-1], X[-1:] + 1.0]), {}),  # one calibration value
    lambda m, X: (m, X, {"precision": "int8"}),
    lambda m, X: (m, X, {"input_clamp": "per_feature"}),
    lambda m, X: (m, X, {"target": "cortex-m0"}),  # another target's attributes
])
def test_any_changed_input_searches_again(case, searches, change):
    model, X = case
    _, calls = searches
    tinycc_ml.compile(model, precision="int16", calibration=X, target="host")
    model2, X2, options = change(model, X)
    tinycc_ml.compile(model2, **{"precision": "int16", "calibration": X2, "target": "host", **options})
    assert len(calls) == 2


def test_a_folder_others_can_write_to_is_not_trusted(case, searches):
    model, X = case
    root, calls = searches
    tinycc_ml.compile(model, precision="int16", calibration=X)
    os.chmod(root, 0o777)
    tinycc_ml.compile(model, precision="int16", calibration=X)
    assert len(calls) == 2


def test_a_damaged_entry_is_ignored_and_the_cache_can_be_turned_off(case, searches, monkeypatch):
    model, X = case
    root, calls = searches
    first = tinycc_ml.compile(model, precision="int16", calibration=X)
    (entry,) = (root / fixed_pipeline.SEARCH_CACHE).glob("*.json")
    good = json.loads(entry.read_text())
    damaged = [json.dumps(good)[:-5],  # cut short: not JSON
               json.dumps({**good, "adjust": {"no such value": 3}}),
               json.dumps({**good, "best": "0"}),
               json.dumps({"adjust": good["adjust"]})]
    for n, text in enumerate(damaged):
        entry.write_text(text)
        again = tinycc_ml.compile(model, precision="int16", calibration=X)
        assert len(calls) == 2 + n and again.files == first.files
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    tinycc_ml.compile(model, precision="int16", calibration=X)
    assert len(calls) == 2 + len(damaged)


def test_the_final_build_going_on_from_the_search_is_the_build_made_anew(case, searches, capsys):
    """The search's build of its choice goes on to the last passes; asking for the IR after choose_scales makes
    the final build choose every scale again (so the dump shows it): files, pass log and figures are the same."""
    model, X = case
    root, calls = searches
    kept = tinycc_ml.compile(model, precision="int16", calibration=X)
    for entry in (root / fixed_pipeline.SEARCH_CACHE).glob("*.json"):
        entry.unlink()  # the second build searches too, rather than take the first's choice
    anew = tinycc_ml.compile(model, precision="int16", calibration=X, dump_ir_after=("choose_scales",))
    assert len(calls) == 2
    assert "// IR after choose_scales" in capsys.readouterr().err
    assert anew.files == kept.files
    assert anew.report["passes"] == kept.report["passes"]
    assert any(line.startswith("choose_scales:") for line in kept.report["passes"])
    assert {k: anew.report[k] for k in FIGURES} == {k: kept.report[k] for k in FIGURES}
