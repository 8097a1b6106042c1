"""The batched float interpreter (used for calibration and references) equals the op definitions
applied row by row, on random graphs mixing every op family."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.backends.test_fixed_ops import build_graph
from tinycc_ml.ir.interp import evaluate_all, run_float


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), D=st.integers(1, 9), H=st.integers(1, 6), L=st.integers(2, 4),
       ops=st.sets(st.sampled_from(["tanh", "mul", "add", "sub", "clip", "sqdist", "tree", "nearest"])))
def test_batched_equals_row_by_row(seed, D, H, L, ops):
    rng = np.random.default_rng(seed)
    graph = build_graph(rng, D, H, L, ops, 1.0)
    X = rng.normal(size=(17, D))
    batched = run_float(graph, X)
    for r, x in enumerate(X):
        single = evaluate_all(graph, {"x": x})
        for label, node in graph.outputs:
            np.testing.assert_allclose(batched[label][r], single[node], rtol=1e-12, atol=1e-12)
