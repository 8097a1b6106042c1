"""The AVR's forest in assembly (avr/forest_asm.py): predictions and scores bit for bit the interpreters' on rows
at every threshold of the forest (T - 1, T, T + 1 in the input's integer domain), the missing code, the extremes;
forests whose sums carry past 16 bits many times (wide carry fields), saturated results, tied sums; the C
kernels where it does not apply (more than 10 outputs, inputs beyond LDD's reach) or does not fit; the same
text for the same model."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.avr import forest_asm
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:1000], y[:1000], X[1000:]


def kernels(result) -> set:
    return {k["kernel"] for k in result.report["kernels"] if k.get("op") == "tree_ensemble"}


def edge_rows(clf, X, rng, n: int = 120) -> np.ndarray:
    """Rows of X with features set to T - 1, T, T + 1 of random nodes (as the int16 build quantises them),
    the missing value, and the saturating extremes."""
    r = tinycc_ml.compile(clf, precision="int16", calibration=X)
    (node,) = [nd for nd in r.graph.nodes() if nd.op == "tree_ensemble"]
    scale = np.asarray(r.output.input_scale, dtype=np.float64)
    feature = node.attrs["feature"]
    inner = np.flatnonzero(feature >= 0)
    rows = X[rng.integers(0, len(X), n)].astype(np.float64)
    for row in rows:
        for i in rng.choice(inner, size=12, replace=False):
            f = int(feature[i])
            T = int(np.floor(float(node.attrs["threshold"][i]) * 2.0 ** scale[f]))
            row[f] = (T + int(rng.integers(-1, 2))) / 2.0 ** scale[f]
        special = rng.choice(len(row), size=3, replace=False)
        row[special] = [np.nan, 1e9, -1e9]
    return rows


def test_rows_at_every_threshold_on_the_avr(digits, tmp_path):
    require_target("avr")
    X, y, X_te = digits
    rng = np.random.default_rng(1)
    models = {"forest": RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y),
              "extra": ExtraTreesClassifier(n_estimators=4, max_depth=6, random_state=3).fit(X, y),  # saturates
              "binary": RandomForestClassifier(n_estimators=3, max_depth=6, random_state=2).fit(X, y % 2)}
    for name, clf in models.items():
        assert kernels(tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X)) == {"trees-asm"}
        rows = np.vstack([X_te[:40], edge_rows(clf, X, rng)])
        check_model("avr", clf, rows, "int16", tmp_path / name, case=name, calibration=X)


def test_wide_carry_fields(digits, tmp_path):
    """40 trees: each sum carries past 16 bits up to 10 times (4-bit fields over r16-r18)."""
    require_target("avr")
    X, y, X_te = digits
    clf = RandomForestClassifier(n_estimators=40, max_depth=3, random_state=0).fit(X, y % 5)
    r = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X)
    assert kernels(r) == {"trees-asm"}
    check_model("avr", clf, np.vstack([X_te[:60], edge_rows(clf, X, np.random.default_rng(2), 40)]), "int16",
                tmp_path, calibration=X)


def test_plan_of_the_carry_fields():
    assert forest_asm.plan(2, np.array([60000, 70000])) == [(-1, 0, 0), (16, 0, 1)]
    assert forest_asm.plan(3, np.array([3 << 16, 4 << 16, 1 << 16])) == [(16, 0, 2), (16, 2, 3), (16, 5, 1)]
    assert forest_asm.plan(10, np.full(10, 255 << 16)) is None  # 80 bits of fields


def test_c_kernels_where_it_does_not_apply(digits):
    X, y, _ = digits
    many = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(
        np.hstack([X, X]), (y + 10 * (X[:, 20] > 8)))  # 20 classes
    wide = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(np.hstack([X, X]), y)
    assert "trees-asm" not in kernels(tinycc_ml.compile(many, target="avr", precision="int16",
                                                       calibration=np.hstack([X, X])))
    r = tinycc_ml.compile(wide, target="avr", precision="int16", calibration=np.hstack([X, X]))
    assert "trees-asm" not in kernels(r)  # 128 features: beyond LDD's reach from Y and Z
    int8 = tinycc_ml.compile(RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(X, y),
                             target="avr", precision="int8", calibration=X)
    assert "trees-asm" in kernels(int8)  # int8 builds take int16 inputs too


def test_over_the_budget_the_c_kernels(digits, monkeypatch):
    from tinycc_ml.avr.backend import AvrBackend, AvrTarget
    from tinycc_ml.avr.kernel_table import AVR_KERNELS

    X, y, _ = digits
    clf = RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(X, y)
    monkeypatch.setattr(AvrBackend, "c_target", lambda self, graph: AvrTarget(kernels=AVR_KERNELS,
                                                                              forest_asm_budget=100))
    assert "trees-asm" not in kernels(tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X))


def test_same_text_for_the_same_model(digits):
    X, y, _ = digits
    clf = RandomForestClassifier(n_estimators=4, max_depth=6, random_state=0).fit(X, y)
    a = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X, name="m").files
    b = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X, name="m").files
    assert a == b and "m_trees_sums:" in a["m.c"]


def test_trees_beyond_rjmps_reach(digits, tmp_path):
    """Fully grown trees: a tree's code passes RJMP's 4 KB, so some jumps are JMPs (and conditional branches skip
    them)."""
    require_target("avr")
    X, y, X_te = digits
    noise = np.random.default_rng(5).integers(0, 10, 700)  # labels to memorise: about 450 leaves a tree
    clf = RandomForestClassifier(n_estimators=2, bootstrap=False, random_state=0).fit(X[:700], noise)
    r = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X, name="m")
    assert kernels(r) == {"trees-asm"} and '"jmp ' in r.files["m.c"] and '.+4\\n"' in r.files["m.c"]
    check_model("avr", clf, np.vstack([X_te[:80], edge_rows(clf, X, np.random.default_rng(4), 40)]), "int16",
                tmp_path, calibration=X)
