"""fuse_nearest: kvote(sqdist(x, M)) -> sqdist_kvote, the same votes bit for bit (fixed point) and
value for value (float), whatever the distance's type, shift and ties."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.types import TensorType, fixed
from tinycc_ml.passes import PassContext, run_passes


def graph_pair(M, labels, k, n_classes, sx, h, dist_bits, dist_scale, out_scale):
    g = Graph("knn")
    r = M.shape[0]
    if sx is None:  # float
        x = g.add("input", [], {"name": "x"}, type=TensorType((r,)), name="x")
        P = g.add("const", [], {"value": M.astype(np.float32)}, name="P")
        d = g.add("sqdist", [x, P], name="d")
        s = g.add("kvote", [d], {"k": k, "n_classes": n_classes, "labels": labels}, name="scores")
    else:
        x = g.add("input", [], {"name": "x"}, type=TensorType((r,), fixed(16, sx)), name="x")
        P = g.add("const", [], {"value": M.astype(np.int16)}, type=TensorType(M.shape, fixed(16, sx)), name="P")
        d = g.add("sqdist", [x, P], {"shift": h}, type=TensorType((M.shape[1],), fixed(dist_bits, dist_scale)),
                  name="d")
        s = g.add("kvote", [d], {"k": k, "n_classes": n_classes, "labels": labels},
                  type=TensorType((n_classes,), fixed(16, out_scale)), name="scores")
    g.set_output("scores", s)
    g.set_output("prediction", g.add("argmax", [s], name="prediction"))
    ctx = PassContext()
    fused = run_passes(g.copy(), ["fuse_nearest", "dce"], ctx)
    return g, fused, ctx


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fused_votes_equal_the_two_ops_bit_for_bit(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    r, m = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 12))
    n_classes = data.draw(st.integers(1, 4))
    labels = np.sort(rng.integers(0, n_classes, m)).astype(np.int32)
    k = data.draw(st.integers(1, m))
    mag = 2 ** data.draw(st.integers(1, 11))  # small magnitudes tie, large ones saturate the distances
    M = rng.integers(-mag, mag, (r, m))
    X = rng.integers(-mag, mag, (6, r))
    X[0] = M[:, 0]  # a reference point itself: distance 0
    h = data.draw(st.integers(0, 3))
    sx = data.draw(st.integers(-2, 8))
    dist_bits = data.draw(st.sampled_from([8, 16, 32]))
    dist_scale = 2 * (sx - h) - data.draw(st.integers(0, 12))
    out_scale = data.draw(st.integers(-1, 4))
    g, fused, ctx = graph_pair(M, labels, k, n_classes, sx, h, dist_bits, dist_scale, out_scale)
    assert [n.op for n in fused.nodes()].count("sqdist_kvote") == 1
    assert not any(n.op in ("sqdist", "kvote") for n in fused.nodes())
    assert any("fuse_nearest" in line for line in ctx.log)
    want, got = run_fixed(g, X), run_fixed(fused, X)
    np.testing.assert_array_equal(got["scores"], want["scores"])
    np.testing.assert_array_equal(got["prediction"], want["prediction"])


def test_float_graphs_fuse_to_the_same_votes():
    rng = np.random.default_rng(1)
    M = rng.integers(-3, 3, (4, 20)).astype(np.float64)  # integer values: many equal distances
    labels = np.sort(rng.integers(0, 3, 20)).astype(np.int32)
    g, fused, _ = graph_pair(M, labels, 5, 3, None, 0, 0, 0, 0)
    X = rng.integers(-3, 3, (50, 4)).astype(np.float64)
    np.testing.assert_array_equal(run_float(fused, X)["scores"], run_float(g, X)["scores"])


def test_a_distance_read_elsewhere_is_not_fused():
    M = np.arange(12).reshape(3, 4)
    labels = np.array([0, 0, 1, 1], np.int32)
    g, _, _ = graph_pair(M, labels, 3, 2, 4, 0, 16, 4, 0)
    g.set_output("distances", "d")
    fused = run_passes(g.copy(), ["fuse_nearest"], PassContext())
    assert [n.op for n in fused.nodes()] == [n.op for n in g.nodes()]
