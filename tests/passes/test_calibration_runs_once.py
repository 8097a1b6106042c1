"""An integer build runs the fixed-point interpreter over its calibration rows once (ir.fixed.run_fixed_once):
the agreement with the float model and the probabilities' error read the same run. Counted through an
injected counter around ir.fixed.run_fixed, not timed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tinycc_ml
import tinycc_ml.ir.fixed as fixed
from tinycc_ml.ir.fixed import quantise


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_calibration_rows_run_once(monkeypatch, precision):
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X = X + np.random.default_rng(0).uniform(0, 0.5, X.shape)  # every feature spreads: no widened rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MLPClassifier((16,), max_iter=30, random_state=0).fit(X, y)
    runs: list[tuple[object, np.ndarray]] = []
    real = fixed.run_fixed

    def counted(graph, Xq):
        runs.append((graph, np.atleast_2d(np.asarray(Xq))))
        return real(graph, Xq)

    monkeypatch.setattr(fixed, "run_fixed", counted)
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")  # the scale search and its agreement run (no cached figures)
    rows = X[:300]
    result = tinycc_ml.compile(model, target="host", precision=precision, calibration=rows, name="hb")
    assert "calibration_max_abs_error" in result.report["proba"]  # the probabilities' error was measured
    on_build = [Xq for graph, Xq in runs if graph is result.graph]
    assert len(on_build) >= 1
    ran = np.concatenate(on_build)
    # every calibration row through the build's graph, each once
    assert len(ran) == len({row.tobytes() for row in ran})
    want = quantise(rows, result.output.input_scale, 16)
    assert {row.tobytes() for row in ran} == {row.astype(ran.dtype).tobytes() for row in want}
    # the memoised rows give the interpreter's own outputs
    again = fixed.run_fixed_once(result.graph, want)
    np.testing.assert_array_equal(again["scores"], real(result.graph, want)["scores"])


def test_rows_found_among_earlier_runs_give_the_interpreters_outputs(monkeypatch):
    """run_fixed_once on other rows than an earlier call's (a subset, repeats, rows changed by one unit, new rows,
    int16 copies of int64 rows): each row's outputs are run_fixed's, and only rows not run before are run, each
    distinct row once."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=200).fit(X, y)
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    result = tinycc_ml.compile(model, target="host", precision="int16", calibration=X[:300], name="hb")
    graph = result.graph
    graph.analyses.rows_run = None
    real = fixed.run_fixed
    ran: list[np.ndarray] = []
    monkeypatch.setattr(fixed, "run_fixed", lambda g, Xq: ran.append(np.asarray(Xq)) or real(g, Xq))
    Q = quantise(X, result.output.input_scale, 16)
    rng = np.random.default_rng(0)
    seen: set[bytes] = set()
    for trial in range(12):
        rows = Q[rng.integers(0, len(Q), size=int(rng.integers(1, 400)))].copy()
        if trial % 3 == 1:
            rows[0, int(rng.integers(0, rows.shape[1]))] += 1
        del ran[:]
        got = fixed.run_fixed_once(graph, rows)
        want = real(graph, rows)
        for label in want:
            np.testing.assert_array_equal(got[label], want[label])
        new = {row.tobytes() for row in rows} - seen
        run_now = [row.tobytes() for part in ran for row in part]
        assert len(run_now) == len(set(run_now)) and set(run_now) == new
        seen |= new
    small = Q[:50].astype(np.int16)  # another dtype: its own rows
    np.testing.assert_array_equal(fixed.run_fixed_once(graph, small)["scores"], real(graph, small)["scores"])
