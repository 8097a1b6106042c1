"""An integer forest build walks its calibration rows down the trees once: the range profile, the agreement
with the float model, the scale search's held-out rows, the fixed-point interpreter (on the rows' grid values)
and the probabilities' error (the model's own walk, before the input's per-feature scales) share the walk
(ir/ops/ensembles.py: walk keeps the leaves per row under a canonical decision rule). Counted through an
injected counter around the walk's work, not timed; the shared leaves are checked against the library's own
(scikit-learn's apply)."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.ir.ops import ensembles


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_a_forest_build_walks_its_calibration_rows_once(monkeypatch, precision):
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier

    X, y = load_digits(return_X_y=True)  # integer features: every row lies on the integer input's grid
    forest = RandomForestClassifier(8, max_depth=6, random_state=0).fit(X, y)
    walked: list[int] = []
    real = ensembles._walk

    def counted(attrs, goes_left):
        walked.append(goes_left.rows)
        leaves = real(attrs, goes_left)
        return leaves

    monkeypatch.setattr(ensembles, "_walk", counted)
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")  # the scale search and its agreement run (no cached figures)
    ensembles.RECENT_WALKS.clear()
    rows = X[:400]
    result = tinycc_ml.compile(forest, target="host", precision=precision, calibration=rows, name="wo")
    assert "calibration_max_abs_error" in result.report["proba"]  # the probabilities' error was measured
    assert sum(walked) == len({row.tobytes() for row in rows})  # each distinct row walked once
    # the kept leaves are the library's: scikit-learn's apply, node for node
    model = tinycc_ml.api.as_model(forest)
    leaves = model.leaves(rows)
    starts = np.asarray(model.roots)
    for t, tree in enumerate(forest.estimators_):
        np.testing.assert_array_equal(leaves[:, t] - starts[t], tree.apply(rows.astype(np.float32)))
    assert sum(walked) == len({row.tobytes() for row in rows})  # and that was a kept walk too
