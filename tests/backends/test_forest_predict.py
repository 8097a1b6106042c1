"""A forest's predict takes the argmax of its leaf sums directly (codegen/trees.forest_sums / forest_predict): the
sums in a function the scores share, int16 where the leaves' bound proves it, the first maximum of the op's
rounded sums (no store, no saturation). Checked against the interpreters (predictions and scores bit for bit:
testing.check_model) on the host, the simulated AVR, Cortex-M0 and Cortex-M4, for forests of several shapes:
multi-class, binary, imbalanced (leaves of skewed and pure probabilities), ExtraTrees, tied probabilities,
missing values; both kernels (straight-line leaves of constants, the table walk); and against scikit-learn on the
digits test rows (on the input grid: every decision is exact)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, RandomForestRegressor

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def data():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    Xr = rng.uniform(-2, 18, (60, 64))
    Xr[rng.random(Xr.shape) < 0.05] = np.nan  # missing values go to each node's default side
    return X[:1000], y[:1000], X[1000:], Xr


def forests(data) -> dict:
    X, y, _, _ = data
    rare = (y == 3).astype(int)  # 1 in 10 rows: imbalanced leaves, many of them pure
    Xt = np.repeat(X[:300], 2, axis=0)  # each row twice with two labels: tied class probabilities
    yt = np.stack([y[:300], (y[:300] + 3) % 10], axis=1).ravel()
    return {"multi": RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(X, y),
            "binary": RandomForestClassifier(n_estimators=5, max_depth=5, random_state=1).fit(X, y % 2),
            "imbalanced": RandomForestClassifier(n_estimators=4, max_depth=7, random_state=2).fit(X, rare),
            "extra": ExtraTreesClassifier(n_estimators=4, max_depth=6, random_state=3).fit(X, y),
            "ties": RandomForestClassifier(n_estimators=3, max_depth=5, bootstrap=False, random_state=4).fit(Xt, yt),
            "stumps": RandomForestClassifier(n_estimators=3, max_depth=1, random_state=5).fit(X, y % 2)}


def sums_kernels(result) -> set:
    return {k["kernel"] for k in result.report["kernels"] if str(k.get("leaves", "")).startswith("sums")}


@pytest.mark.parametrize("precision", ["float", "int16", "int8"])
def test_host_predict_is_the_argmax_of_the_scores(data, precision):
    X, _, X_te, Xr = data
    rows = np.vstack([X_te, Xr])
    for name, clf in forests(data).items():
        r = tinycc_ml.compile(clf, precision=precision, calibration=None if precision == "float" else X)
        assert sums_kernels(r), name  # the forest's own predict
        p = r.load()
        if precision == "float":
            assert np.array_equal(p.predict(X_te), clf.predict(X_te)), name
            continue
        want = run_fixed(r.graph, quantise(rows, r.output.input_scale, 16).astype(np.int16))
        assert np.array_equal(p.predict_index(rows), want["prediction"]), name
        assert np.array_equal(p.scores(rows), want["scores"]), name
        if precision == "int16":  # digits lie on the input grid: every decision is scikit-learn's
            assert np.array_equal(p.predict(X_te), clf.predict(X_te)), name


def test_ties_resolve_as_the_op_does(data):
    """Tied rounded sums: the first class wins, in C as in the interpreter (rows tied in the float sums too)."""
    X = data[0]
    clf = forests(data)["ties"]
    r = tinycc_ml.compile(clf, precision="int16", calibration=X)
    rows = X[:300]
    scores = run_fixed(r.graph, quantise(rows, r.output.input_scale, 16).astype(np.int16))["scores"]
    top = np.sort(scores, axis=1)
    assert np.any(top[:, -1] == top[:, -2])  # the data have ties
    assert np.array_equal(r.load().predict_index(rows), np.argmax(scores, axis=1))


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_forests_on_the_simulators(data, target, tmp_path):
    """The kernels the cost model picks: assembly on the AVR and the Cortex-M4, straight-line code on the
    Cortex-M0 (whose budget for straight-line code holds these forests)."""
    require_target(target)
    X, _, X_te, Xr = data
    rows = np.vstack([X_te[:60], Xr[:20]])
    kernels = set()
    for name, clf in forests(data).items():
        check_model(target, clf, rows, "int16", tmp_path / name, case=f"{target} {name}", calibration=X)
        kernels |= sums_kernels(tinycc_ml.compile(clf, target=target, precision="int16", calibration=X))
    if target in ("avr", "cortex-m4"):  # every one of these forests in assembly
        assert kernels == {"trees-asm"}
        return
    assert "trees-straight" in kernels
    assert not any(k.startswith("trees-top") for k in kernels)  # their budgets hold every one straight-line


@pytest.mark.parametrize("kernel", ["table", "straight", "top1", "top3", "asm"])
def test_every_kernel_on_the_avr(data, kernel, tmp_path, monkeypatch):
    """Each kernel, whichever the cost model would pick, is the op's computation (the node stream's missing
    values and always-right nodes included)."""
    from tinycc_ml.codegen import trees as trees_c

    require_target("avr")
    X, _, X_te, Xr = data
    rows = np.vstack([X_te[:40], Xr[:30]])
    monkeypatch.setattr(trees_c, "choose_forest", lambda cands, *_: kernel if kernel in cands else "straight")
    monkeypatch.setattr(trees_c, "use_asm", lambda cands, budget: kernel == "asm" and "asm" in cands)
    for name, clf in forests(data).items():
        check_model("avr", clf, rows, "int16", tmp_path / name, case=f"{kernel} {name}", calibration=X)
    for name, clf in forests(data).items():
        check_model("avr", clf, rows, "int8", tmp_path / f"{name}8", case=f"{kernel} {name} int8", calibration=X)


def test_forest_on_every_digits_test_row_matches_scikit_learn(data, tmp_path):
    """The issue's forest (10 trees, depth 8) on the AVR: every test row's class is scikit-learn's."""
    require_target("avr")
    X, y, X_te, _ = data
    clf = RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y)
    from tinycc_ml.runtime.simulate import run_on_target

    r = tinycc_ml.compile(clf, target="avr", precision="int16", name="rf", out_dir=tmp_path, calibration=X)
    o = r.output
    run = run_on_target("avr", [str(tmp_path / "rf.c")], str(tmp_path / "rf.h"), "rf",
                        quantise(X_te, o.input_scale, 16).astype(np.int16), o.n_scores, o.input_ctype, o.score_ctype)
    assert np.array_equal(clf.classes_[run.predictions], clf.predict(X_te))


def test_int16_sums_where_the_bound_allows(data):
    """int_fast16_t sums only where every tree's largest leaf, summed, and the rounding add fit 16 bits."""
    X, y, _, _ = data
    few = RandomForestClassifier(n_estimators=2, max_depth=4, random_state=0).fit(X, y)
    many = RandomForestClassifier(n_estimators=12, max_depth=4, random_state=0).fit(X, y)
    for clf, ctype in ((few, "int_fast16_t"), (many, "int32_t")):
        source = tinycc_ml.compile(clf, precision="int16", calibration=X, name="f").files["f.c"]
        assert f"static void f_trees_sums(const int16_t *x, {ctype} *acc)" in source


def test_regression_forests_keep_their_code(data, monkeypatch):
    """One output: no argmax to take, the scores' code is what it was without the forest path."""
    from tinycc_ml.codegen import trees as trees_c

    X, y, _, _ = data
    reg = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y.astype(float))
    files = tinycc_ml.compile(reg, precision="int16", calibration=X).files
    monkeypatch.setattr(trees_c, "forest_sums", lambda *a: None)
    assert tinycc_ml.compile(reg, precision="int16", calibration=X).files == files


def test_features_beyond_the_node_streams_14_bits(data):
    """A feature past byte offset 16,383 (int16: index 8,191) does not fit a node-stream word: the node table
    walks the forest."""
    rng = np.random.default_rng(9)
    X = np.zeros((200, 16500))
    X[:, 16400:16410] = rng.integers(0, 8, (200, 10))
    y = (X[:, 16400] + X[:, 16405] > 7).astype(int) + (X[:, 16409] > 5)
    clf = RandomForestClassifier(n_estimators=3, max_depth=4, max_features=None, random_state=0).fit(X, y)
    assert clf.estimators_[0].tree_.feature.max() >= 1 << 14
    r = tinycc_ml.compile(clf, precision="int16", calibration=X)
    assert sums_kernels(r) == {"trees-table"}
    want = run_fixed(r.graph, quantise(X, r.output.input_scale, 16).astype(np.int16))
    p = r.load()
    assert np.array_equal(p.predict_index(X), want["prediction"])
    assert np.array_equal(p.scores(X), want["scores"])
    assert np.array_equal(p.predict(X), clf.predict(X))
