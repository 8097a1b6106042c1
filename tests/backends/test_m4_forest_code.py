"""Forests on the Cortex-M4 as straight-line C where a quarter of the chip's flash holds it (the budget was 64 KB:
digits' RF(50, depth 6) walked its top 5 levels as code and the rest from a table, 4,264 instructions; now 1,518),
the sums in locals (registers where they fit), a node sending missing values right one unsigned compare; bit for
bit the interpreters' in QEMU on rows at every threshold, the missing value and the extremes."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier

import tinycc_ml
from tests.backends.test_forest_asm import edge_rows, kernels
from tests.conftest import require_target
from tinycc_ml.testing import check_model


def test_fifty_trees_are_code_on_the_cortex_m4(tmp_path):
    require_target("cortex-m4")
    X, y = load_digits(return_X_y=True)
    clf = RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0).fit(X[:1200], y[:1200])
    r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=X[:1200], name="m")
    assert kernels(r) == {"trees-straight"}
    text = r.files["m.c"]
    assert "a9 += " in text and "(uint32_t)(x[" in text and "!= -32768" not in text
    rows = np.vstack([X[1200:1260], edge_rows(clf, X[:1200], np.random.default_rng(7), 60)])
    check_model("cortex-m4", clf, rows, "int16", tmp_path, calibration=X[:1200])
