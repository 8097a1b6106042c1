"""The fixed-point reference semantics, checked against hand-worked integers and real arithmetic."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.fixed import FixedOverflow, align_shifts, clip_bounds, quantise, rshift, run_fixed, saturate
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.arith import storage_clip_bounds
from tinycc_ml.ir.types import TensorType, fixed


def test_rshift_rounds_halves_up_and_left_shifts_multiply():
    assert rshift(np.array([5, 6, 7, -5, -6, -7]), 2).tolist() == [1, 2, 2, -1, -1, -2]  # 1.25 1.5 1.75 ...
    assert rshift(np.array([3, -3]), -4).tolist() == [48, -48]
    assert rshift(np.array([9]), 0).tolist() == [9]


@given(st.integers(-(2**30), 2**30), st.integers(1, 20))
def test_rshift_is_round_to_nearest(v, k):
    assert abs(int(rshift(v, k)) - v / 2**k) <= 0.5


def test_saturate_and_quantise():
    assert saturate(np.array([40000, -40000, 12]), 16).tolist() == [32767, -32768, 12]
    assert saturate(np.array([200, -200]), 8).tolist() == [127, -128]
    assert quantise(np.array([0.5, -0.5, 1.0, 100.0]), 4, 8).tolist() == [8, -8, 16, 127]


def test_align_shifts_caps_left_shift():
    assert align_shifts(3, 10) == (10, 7, 0)
    c, la, lb = align_shifts(0, 30)
    assert (c, la, lb) == (15, 15, -15)


def test_clip_bounds_scalars_exact_per_element_bounds_in_storage():
    # a scalar bound beyond the operand's range still binds: 1.0 at scale 15 is 32768
    assert clip_bounds(0.0, 1.0, fixed(16, 15)) == (0, 32768)
    assert clip_bounds(-1.0, 1.0, fixed(16, 4)) == (-16, 16)
    assert clip_bounds(33.0, 40.0, fixed(16, 10)) == (33792, 40960)
    lo, hi = clip_bounds(np.array([0.0, 33.0]), np.array([1.0, 40.0]), fixed(16, 15))
    assert lo.tolist() == [0, 32767] and hi.tolist() == [32767, 32767]  # stored as int16
    # bounds between two grid points: both forms of the clamp give lo
    assert clip_bounds(0.3, 0.4, fixed(16, 0)) == (1, 1)


def test_storage_clip_bounds_refuse_a_bound_past_the_far_end():
    assert storage_clip_bounds(0.0, 1.0, fixed(16, 15)) == (0, 32767)  # same effect on any int16
    assert storage_clip_bounds(33.0, 40.0, fixed(16, 10)) is None  # the result is 33, not storable
    assert storage_clip_bounds(-40.0, -33.0, fixed(16, 10)) is None


def _matvec_graph(A_q, sa, sx, so, shift=0):
    g = Graph("t")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((A_q.shape[1],), fixed(16, sx)), name="x")
    a = g.add("const", attrs={"value": A_q.astype(np.int16)}, type=TensorType(A_q.shape, fixed(16, sa)), name="A")
    attrs = {"shift": shift} if shift else {}
    y = g.add("matvec", [a, x], attrs, type=TensorType((A_q.shape[0],), fixed(16, so)), name="y")
    g.set_output("scores", y)
    g.set_output("prediction", g.add("argmax", [y], name="p"))
    return g


def test_matvec_hand_worked():
    # A = [[1.5, -0.25]] at scale 2, x = [2, 3] at scale 1: 1.5*2 - 0.25*3 = 2.25 -> at scale 3: 18
    g = _matvec_graph(np.array([[6, -1]]), sa=2, sx=1, so=3)
    out = run_fixed(g, np.array([[4, 6]]))
    assert out["scores"].tolist() == [[18]]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_matvec_matches_real_arithmetic_within_rounding(rows, cols, seed):
    rng = np.random.default_rng(seed)
    A = rng.integers(-3000, 3000, (rows, cols))
    x = rng.integers(-3000, 3000, (3, cols))
    g = _matvec_graph(A, sa=10, sx=8, so=4)
    got = run_fixed(g, x)["scores"]
    real = (x * 2.0**-8) @ (A * 2.0**-10).T
    expect = np.clip(real * 2**4, -32768, 32767)
    assert np.all(np.abs(got - expect) <= 0.5)


def test_overflow_of_an_int32_intermediate_is_detected():
    g = _matvec_graph(np.full((1, 4), 32767), sa=0, sx=0, so=0)
    with pytest.raises(FixedOverflow):
        run_fixed(g, np.full((1, 4), 32767))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fixed_matvec_of_a_mostly_zero_matrix_sums_what_the_dense_form_sums(data):
    """The fixed mat-vec skips a mostly-zero constant matrix's zero entries (GaussianNB's diagonals): its result
    is the dense form's, each product rounded by ``shift`` then summed, written here on every entry; products
    or sums beyond int32 are refused as before."""
    from tinycc_ml.ir.ops import OPS, FixedCall

    rows, cols, n = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    reach = data.draw(st.sampled_from([3000, 2**20]))  # 2^20 x 2^15 products overflow int32
    A = rng.integers(-reach, reach, (rows, cols)) * (rng.random((rows, cols)) < 0.15)
    x = rng.integers(-2**15, 2**15, (n, cols))
    shift = data.draw(st.integers(0, 6))
    # scales 8 + 8 - shift = the result's: no shift after the sum, only the 16-bit saturation
    call = FixedCall([A, x], [TensorType((rows, cols), fixed(16, 8)), TensorType((cols,), fixed(16, 8))],
                     TensorType((rows,), fixed(16, 16 - shift)), {"shift": shift}, "%m (matvec)")
    products = A[None] * x[:, None]
    rounded = (products + ((1 << shift) >> 1)) >> shift
    partial = np.cumsum(rounded, axis=2)  # the int32 accumulator's values, entry by entry
    if np.any(np.abs(products) > 2**31 - 1) or np.any(np.abs(partial[..., -1]) > 2**31 - 1):
        with pytest.raises(FixedOverflow):
            OPS["matvec"].fixed(call)
        return
    assume(not np.any(np.abs(partial) > 2**31 - 1))  # a partial sum past int32 that returns inside: not drawn
    np.testing.assert_array_equal(OPS["matvec"].fixed(call), np.clip(rounded.sum(axis=2), -2**15, 2**15 - 1))


def test_integer_matvec_through_float64_is_the_exact_integer_product():
    """The interpreter's unshifted mat-vec takes float64's product where every partial sum is below 2^53: the
    same integers as numpy's int64 product, with a product near 2^30 and sums near the int32 limit, for int8 and
    int16 matrices with their most negative entries; a sum past int32 still raises FixedOverflow."""
    from tinycc_ml.ir.ops import OPS, FixedCall

    rng = np.random.default_rng(0)
    for dtype, cols in ((np.int8, 64), (np.int16, 300), (np.int16, 4096)):
        info = np.iinfo(dtype)
        A = rng.integers(info.min, info.max + 1, (7, cols)).astype(dtype)
        A[:, 0] = info.min
        small = 2**30 // (cols * int(info.max) + 1)
        x = rng.integers(-small, small + 1, (33, cols)).astype(np.int64)
        x[:, 0] = -(2**30 // abs(int(info.min)))  # A[:, 0] x[:, 0] near 2^30
        types = [TensorType(A.shape, fixed(8 if dtype == np.int8 else 16, 10)), TensorType((cols,), fixed(32, 0))]
        call = FixedCall([A, x], types, TensorType((7,), fixed(32, 10)), {}, "%m (matvec)")
        want = x @ A.astype(np.int64).T
        assert np.abs(want).max() > 2**30
        np.testing.assert_array_equal(OPS["matvec"].fixed(call), want)
        x[:, 1:] = np.sign(A[0, 1:]).astype(np.int64) * (2**31 // int(np.abs(A[0, 1:].astype(np.int64)).sum()) + 1)
        assert int(x[0] @ A[0].astype(np.int64)) > 2**31 - 1  # row 0's sum past int32
        with pytest.raises(FixedOverflow):
            OPS["matvec"].fixed(FixedCall([A, x], types, TensorType((7,), fixed(32, 10)), {}, "%m (matvec)"))
