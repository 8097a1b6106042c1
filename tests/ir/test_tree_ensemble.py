"""The tree_ensemble op's contracts (hypothesis):
- the integer threshold rule: a decision on a quantised input x_q equals the float decision on its
  real value x_q * 2^-S, for every float32 threshold, scale and int16 input ("le" and "lt");
- float32 thresholds of float64 ones decide as the float64 ones on every float32 input;
- whole ensembles: the integer walk reaches the same leaves as the float walk on the real values, and
  the missing code (-2^15, what the quantiser gives a NaN) the leaves a NaN reaches (default sides);
- the quantiser gives NaN the missing code and no real value that code."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ir.test_op_oracle import random_forest_attrs
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.ir.ops.ensembles import NodeDecisions, default_left, missing_code, threshold_ints, walk
from tinycc_ml.models.trees import float32_threshold

FLOAT32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
PROPERTY = settings(max_examples=300, deadline=None)


def one_node(t: float, compare: str) -> dict:
    return {"feature": np.array([0], dtype=np.int32), "threshold": np.array([t], dtype=np.float32),
            "compare": compare}


@PROPERTY
@given(t=FLOAT32, scale=st.integers(-16, 24), xq=st.lists(st.integers(-2**15 + 1, 2**15 - 1), min_size=1, max_size=8),
       compare=st.sampled_from(["le", "lt"]), near=st.booleans())
def test_integer_threshold_decides_as_the_float_threshold_on_the_quantised_value(t, scale, xq, compare, near):
    if near:  # inputs right at the threshold's grid point and its neighbours
        centre = int(np.clip(np.floor(np.float64(t) * 2.0**scale), -2**15 + 1, 2**15 - 1))
        xq = [int(np.clip(centre + d, -2**15 + 1, 2**15 - 1)) for d in (-1, 0, 1, 2)]
    x = np.asarray(xq, dtype=np.int64)
    T = threshold_ints(one_node(t, compare), scale, 16)[0]
    real = x * 2.0**-scale
    t64 = float(np.float32(t))
    expected = real < t64 if compare == "lt" else real <= t64
    np.testing.assert_array_equal(x <= T, expected)
    assert -(2**15) <= T <= 2**15 - 1  # fits int16: the missing code -2^15 <= T, so x <= T sends it left


@PROPERTY
@given(t=st.floats(-1e30, 1e30, allow_nan=False), steps=st.lists(st.integers(-3, 3), min_size=1, max_size=7),
       compare=st.sampled_from(["le", "lt"]))
def test_float32_threshold_decides_as_the_float64_threshold_on_float32_inputs(t, steps, compare):
    t32 = float32_threshold(t, compare)
    assert t32.dtype == np.float32
    x = np.float32(t)
    for step in steps:  # float32 neighbours of t on both sides
        y = x
        for _ in range(abs(step)):
            y = np.nextafter(y, np.float32(np.inf if step > 0 else -np.inf))
        y64 = float(y)
        if compare == "le":
            assert (y64 <= t) == (y <= t32)
        else:
            assert (y64 < t) == (y < t32)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), scale=st.integers(-4, 15))
def test_integer_walk_reaches_the_float_walks_leaves(data, n, scale):
    attrs = data.draw(random_forest_attrs(n, scale))
    M = missing_code(16)
    X = np.asarray(data.draw(st.lists(st.lists(st.one_of(st.integers(M + 1, 2**15 - 1), st.just(M)),
                                               min_size=n, max_size=n), min_size=1, max_size=6)), dtype=np.int64)
    T = threshold_ints(attrs, scale, 16)
    dl = default_left(attrs)
    fixed_leaves = walk(attrs, NodeDecisions(X, T, attrs["feature"], False, dl, M))
    real = np.where(X == M, np.nan, X * 2.0**-scale)  # the missing code stands for a NaN
    float_leaves = walk(attrs, NodeDecisions(real, attrs["threshold"].astype(np.float64), attrs["feature"],
                                       attrs["compare"] == "lt", dl))
    np.testing.assert_array_equal(fixed_leaves, float_leaves)


@PROPERTY
@given(x=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=8),
       scale=st.integers(-8, 20), bits=st.sampled_from([8, 16]))
def test_quantiser_gives_nan_the_missing_code_and_no_real_value_that_code(x, scale, bits):
    x = np.asarray(x, dtype=np.float64)
    q = quantise(x, scale, bits)
    M = missing_code(bits)
    np.testing.assert_array_equal(q == M, np.isnan(x))
    assert np.all(q <= 2 ** (bits - 1) - 1)
