"""The scale search stops where it cannot help: a trial that builds what an earlier trial built is not scored
again (same choice, fewer scoring runs), and a search whose build already makes no more disagreements and no
more score error than the input's own rounding makes does not run at all."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.passes import fixed_pipeline


@pytest.fixture
def scored(monkeypatch):
    """Counts the scoring runs (each runs the integer interpreter on every held-out row)."""
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    calls = []
    real = fixed_pipeline._score
    monkeypatch.setattr(fixed_pipeline, "_score", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_a_trial_that_builds_an_earlier_build_is_not_scored_again_and_the_choice_is_unchanged(scored, monkeypatch):
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    skipping = tinycc_ml.compile(model, precision="int16", calibration=X[:400])
    with_skips = len(scored)
    del scored[:]
    fresh = iter(range(10**9))  # every build looks new: the search as it was, scoring every trial
    monkeypatch.setattr(fixed_pipeline, "build_fingerprint", lambda graph: next(fresh))
    scoring_all = tinycc_ml.compile(model, precision="int16", calibration=X[:400])
    assert len(scored) > with_skips
    assert skipping.files == scoring_all.files
    assert skipping.report["scale_adjustments"] == scoring_all.report["scale_adjustments"]


def test_the_fingerprint_tells_builds_apart_by_any_scale():
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    graph = tinycc_ml.compile(model, precision="int16", calibration=X[:400]).graph
    same = graph.copy()
    assert fixed_pipeline.build_fingerprint(same) == fixed_pipeline.build_fingerprint(graph)
    const = next(n for n in same.nodes() if isinstance(n.attrs.get("value"), np.ndarray))
    const.attrs["value"] = const.attrs["value"].copy()
    const.attrs["value"].flat[-1] += 1  # one element past what repr would show
    assert fixed_pipeline.build_fingerprint(same) != fixed_pipeline.build_fingerprint(graph)


def test_a_build_at_the_input_rounding_floor_is_not_searched(scored):
    # scores (x, -x): the integer build computes them exactly from the rounded input, so its only
    # disagreements with the float model are rows within half an input step of the boundary at 0
    model = LinearModel(np.array([[1.0], [-1.0]]), np.zeros(2))
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(-1, 1, 200), rng.uniform(-1e-7, 1e-7, 40)])[:, None]
    out = tinycc_ml.compile(model, precision="int16", calibration=X)
    assert out.report["held_out_disagreements"] > 0  # the near-boundary rows: no scale can resolve them
    assert len(scored) == 1  # the static choice scored once, the search not run
    assert out.report["scale_adjustments"] == {}
