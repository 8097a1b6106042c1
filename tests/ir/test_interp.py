"""The float interpreter against numpy written out directly, op by op, on random data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tinycc_ml.errors import DataError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_all, run_float
from tinycc_ml.ir.ops import dense_to_sparse_attrs
from tinycc_ml.ir.types import F32, TensorType

FLOATS = st.floats(-100, 100, width=32)
SMALL = settings(max_examples=30, deadline=None)


def vec(n):
    return arrays(np.float32, n, elements=FLOATS)


def mat(r, c):
    return arrays(np.float32, (r, c), elements=FLOATS)


def one_input_graph(n):
    g = Graph("t")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((n,), F32), name="x")
    return g, x


def run(g: Graph, node: str, x) -> np.ndarray:
    return evaluate_all(g, {"x": np.asarray(x)})[node]


def const(g, value, name="c"):
    return g.add("const", attrs={"value": np.asarray(value, dtype=np.float32)}, name=name)


@SMALL
@given(st.data(), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_matvec_dense_and_sparse(data, rows, cols, sparse):
    A = data.draw(mat(rows, cols))
    if sparse:
        A[data.draw(arrays(bool, A.shape))] = 0
    x = data.draw(vec(cols))
    g, xn = one_input_graph(cols)
    a = (g.add("sparse_const", attrs=dense_to_sparse_attrs(A), name="A") if sparse else const(g, A, "A"))
    out = g.add("matvec", [a, xn])
    expected = [sum(float(A[i, k]) * float(x[k]) for k in range(cols)) for i in range(rows)]
    np.testing.assert_allclose(run(g, out, x), expected, rtol=1e-12, atol=1e-9)


@SMALL
@given(st.data(), st.integers(1, 5), st.integers(1, 6))
def test_sqdist(data, k, m):
    M = data.draw(mat(k, m))
    x = data.draw(vec(k))
    g, xn = one_input_graph(k)
    out = g.add("sqdist", [xn, const(g, M)])
    expected = [sum((float(M[i, j]) - float(x[i])) ** 2 for i in range(k)) for j in range(m)]
    np.testing.assert_allclose(run(g, out, x), expected, rtol=1e-12, atol=1e-9)


@SMALL
@given(st.data(), st.integers(1, 6), st.sampled_from(["add", "sub", "mul"]), st.booleans())
def test_binary_ops_and_scalar_broadcast(data, n, op, scalar):
    x = data.draw(vec(n))
    c = np.float32(data.draw(FLOATS)) if scalar else data.draw(vec(n))
    g, xn = one_input_graph(n)
    out = g.add(op, [xn, const(g, c)])
    x64, c64 = x.astype(np.float64), np.asarray(c, dtype=np.float64)
    expected = {"add": x64 + c64, "sub": x64 - c64, "mul": x64 * c64}[op]
    np.testing.assert_array_equal(run(g, out, x), expected)
    g2, xn2 = one_input_graph(n)
    out2 = g2.add(op, [const(g2, c), xn2])  # scalar on the left too
    expected2 = {"add": c64 + x64, "sub": c64 - x64, "mul": c64 * x64}[op]
    np.testing.assert_array_equal(run(g2, out2, x), expected2)


@SMALL
@given(st.data(), st.integers(1, 6))
def test_unary_ops(data, n):
    x = data.draw(vec(n)).astype(np.float64)
    factor = data.draw(st.floats(-10, 10))
    lo, hi = sorted([data.draw(FLOATS), data.draw(FLOATS)])
    g, xn = one_input_graph(n)
    nodes = {
        "scale": g.add("scale", [xn], {"factor": factor}),
        "exp": g.add("exp", [xn]),
        "tanh": g.add("tanh", [xn]),
        "clip": g.add("clip", [xn], {"lo": lo, "hi": hi}),
        "sum": g.add("sum", [xn]),
    }
    values = evaluate_all(g, {"x": x})
    import math

    np.testing.assert_allclose(values[nodes["scale"]], [v * factor for v in x], rtol=1e-15)
    np.testing.assert_allclose(values[nodes["exp"]], [math.exp(v) for v in x], rtol=1e-13)
    np.testing.assert_allclose(values[nodes["tanh"]], [math.tanh(v) for v in x], rtol=1e-13, atol=1e-300)
    np.testing.assert_array_equal(values[nodes["clip"]], [min(max(v, lo), hi) for v in x])
    np.testing.assert_allclose(values[nodes["sum"]], math.fsum(x), rtol=1e-12, atol=1e-9)
    assert values[nodes["sum"]].shape == ()


@SMALL
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=8))
def test_argmax_takes_the_first_on_ties(ints):
    x = np.array(ints, dtype=np.float64)  # small integers: ties are common
    g, xn = one_input_graph(len(x))
    amax = g.add("argmax", [xn])
    values = evaluate_all(g, {"x": x})
    assert int(values[amax]) == ints.index(max(ints))


def test_run_float_stacks_rows_and_checks_inputs():
    g, xn = one_input_graph(3)
    s = g.add("sum", [xn])
    g.set_output("total", s)
    g.set_output("double", g.add("scale", [xn], {"factor": 2.0}))
    X = np.arange(12.0).reshape(4, 3)
    out = run_float(g, X)
    np.testing.assert_array_equal(out["total"], X.sum(axis=1))
    np.testing.assert_array_equal(out["double"], 2 * X)
    assert list(out) == ["total", "double"]
    with pytest.raises(DataError, match="%x"):
        evaluate_all(g, {"x": np.zeros(4)})
    with pytest.raises(DataError, match="%x"):
        evaluate_all(g, {})
