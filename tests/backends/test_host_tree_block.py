"""The host batch kernel of tree ensembles (tinycc_ml/host/tree_block.py: a block of rows walks each tree
level by level, branch-free) on the rows where a decision is closest to going wrong: missing values (NaN in
float builds, the missing code in integer ones) on features whose nodes send them left and right, and
features equal to a node's threshold, just below it and just above it. Every score and prediction equals the
single-row C's to the bit, and the float build's label equals the library's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.backends.test_host_predict_batch import single_rows

pytestmark = pytest.mark.usefixtures("host_target")


def edge_rows(model_thresholds: list[tuple[int, float]], X: np.ndarray, seed: int) -> np.ndarray:
    """Rows of X with a tested feature set to a threshold, its float32 neighbours, or NaN."""
    rng = np.random.default_rng(seed)
    rows = []
    for feature, t in model_thresholds:
        t32 = np.float32(t)
        for value in (t32, np.nextafter(t32, np.float32(-np.inf)), np.nextafter(t32, np.float32(np.inf)), np.nan):
            if np.isinf(value):  # a threshold at float32's largest: its neighbour is infinite, which no library takes
                continue
            row = X[rng.integers(len(X))].copy()
            row[feature] = value
            rows.append(row)
    return np.array(rows, dtype=np.float64)


def xgboost_splits(model) -> list[tuple[int, float]]:
    frame = model.get_booster().trees_to_dataframe()
    splits = frame[frame.Feature != "Leaf"]
    return [(int(f[1:]), float(s)) for f, s in zip(splits.Feature, splits.Split)]


def forest_splits(model) -> list[tuple[int, float]]:
    return [(int(f), float(t)) for est in model.estimators_ for f, t in zip(est.tree_.feature, est.tree_.threshold)
            if f >= 0]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(("xgboost", "forest")), seed=st.integers(0, 2**16), n_extra=st.integers(0, 11))
def test_tree_block_edges(kind, seed, n_extra):
    from sklearn.datasets import make_classification

    X, y = make_classification(300, 8, n_informative=5, n_classes=3, random_state=seed % 1000)
    rng = np.random.default_rng(seed)
    X[rng.random(X.shape) < 0.1] = np.nan  # missing values in training: both default sides occur
    if kind == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        model = xgboost.XGBClassifier(n_estimators=5, max_depth=1 + seed % 5, n_jobs=1).fit(X, y)
        splits = xgboost_splits(model)
    else:
        from sklearn.ensemble import RandomForestClassifier

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = RandomForestClassifier(4, max_depth=1 + seed % 7, random_state=0).fit(X, y)
        splits = forest_splits(model)
    rows = np.concatenate([edge_rows(splits[:40], X, seed), X[:n_extra]])
    for precision in ("float", "int16"):
        result = tinycc_ml.compile(model, target="host", precision=precision, name="hb",
                                   calibration=np.nan_to_num(X))
        assert "hb_trees_level_nodes" in result.files["hb.c"]  # the branch-free block walk
        pred = result.load()
        Xq = pred.quantise(rows) if pred.input_ctype != "float" else rows.astype(np.float32)
        scores, preds = pred.run_raw(Xq)
        want_scores, want_preds = single_rows(pred, Xq)
        assert scores.tobytes() == want_scores.tobytes()
        np.testing.assert_array_equal(preds, want_preds)
        if precision == "float":  # exact: the library's label on every edge row
            np.testing.assert_array_equal(np.asarray(pred.predict(rows)), model.predict(rows))
