"""A single classification tree's predict returns its leaf's class (codegen/trees.predict_code): equal to the
argmax of the scores as the interpreters define it (ties included), on the host and the simulated AVR
(forests: tests/backends/test_forest_predict.py)."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.tree import DecisionTreeClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def data():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    Xr = rng.uniform(-2, 18, (150, 64))
    Xr[rng.random(Xr.shape) < 0.05] = np.nan  # missing values go to each node's default side
    Xt = np.repeat(X[:300], 2, axis=0)  # each row twice with two labels: leaves of tied probabilities
    yt = np.stack([y[:300], (y[:300] + 3) % 10], axis=1).ravel()
    return X[:1000], y[:1000], X[1000:], Xr, Xt, yt


def trees(data):
    X, y, _, _, Xt, yt = data
    return {"impure": DecisionTreeClassifier(max_depth=8, random_state=0).fit(X, y),
            "pure": DecisionTreeClassifier(random_state=0).fit(X, y),
            "ties": DecisionTreeClassifier(random_state=0).fit(Xt, yt),
            "ties-straight": DecisionTreeClassifier(max_depth=3, random_state=0).fit(Xt, yt)}


@pytest.mark.parametrize("precision", ["float", "int16", "int8"])
def test_single_tree_predict_is_the_argmax(data, precision):
    X, _, X_te, Xr, _, _ = data
    kinds = set()
    for name, clf in trees(data).items():
        r = tinycc_ml.compile(clf, precision=precision, calibration=None if precision == "float" else X)
        kinds |= {k["kernel"] for k in r.report["kernels"] if k.get("entry") == "predict"}
        p = r.load()
        assert np.array_equal(p.predict_index(X_te), np.argmax(p.scores(X_te), axis=1)), name
        if precision == "float":
            assert np.array_equal(p.predict(X_te), clf.predict(X_te)), name
        else:
            rows = np.vstack([X_te, Xr])
            want = run_fixed(r.graph, quantise(rows, r.output.input_scale, 16).astype(np.int16))
            assert np.array_equal(p.predict_index(rows), want["prediction"]), name
    assert kinds == {"trees-table-class", "trees-straight-class"}


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_single_tree_predict_on_avr(data, precision, tmp_path):
    require_target("avr")
    X, _, X_te, Xr, _, _ = data
    rows = np.vstack([X_te[:40], Xr[:20]])
    for name, clf in trees(data).items():
        check_model("avr", clf, rows, precision, tmp_path / name, case=name, calibration=X)
