"""TFLite's int8 arithmetic (tinycc_ml.ir.ops.tflite_arith) on hand-computed values: the rounding of each
primitive at its edges. The networks built from them equal tflite-micro bit for bit (tests/importers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinycc_ml.ir.ops.tflite_arith import (
    INT32_MAX,
    INT32_MIN,
    activation_range,
    count_leading_zeros32,
    exp_on_negative_values,
    multiply_by_quantized_multiplier,
    one_over_one_plus_x_for_x_in_0_1,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    saturating_rounding_multiply_by_pot,
    softmax_int8,
    softmax_parameters,
)


@pytest.mark.parametrize("real, expected", [
    (0.0, (0, 0)),
    (0.5, (2**30, 0)),           # frexp(0.5) = 0.5 * 2^0
    (1.0, (2**30, 1)),
    (0.75, (3 * 2**29, 0)),
    (0.1, (1717986918, -3)),     # 0.8 * 2^31 = 1717986918.4, rounded down
    (1 - 2**-40, (2**30, 1)),    # the significand rounds up to 2^31: halved, shift + 1
    (2.0**-40, (0, 0)),          # below 2^-31: flushed to zero, as TFLite does
])
def test_quantize_multiplier(real, expected):
    assert quantize_multiplier(real) == expected


def test_quantize_multiplier_rounds_halves_away_from_zero():
    # q * 2^31 = 2^30 + 0.5 exactly: std::round gives 2^30 + 1 (numpy's round would give 2^30)
    real = (2**30 + 0.5) / 2**31
    assert quantize_multiplier(real) == (2**30 + 1, 0)


@pytest.mark.parametrize("a, b, expected", [
    (2**30, 2**30, 2**29),               # 0.5 * 0.5 in Q31 = 0.25
    (INT32_MIN, INT32_MIN, INT32_MAX),   # the one overflow: saturates
    (-1, 2**30, 0),                      # -0.5 units rounds towards zero... to nearest: 0
    (3, 2**30, 2),                       # 1.5 rounds up
    (-3, 2**30, -1),                     # -1.5: the nudge 1 - 2^30 then truncation gives -1
    (INT32_MAX, INT32_MAX, INT32_MAX - 1),
])
def test_saturating_rounding_doubling_high_mul(a, b, expected):
    assert int(saturating_rounding_doubling_high_mul(a, b)) == expected


@pytest.mark.parametrize("x, exponent, expected", [
    (5, 1, 3), (-5, 1, -3), (4, 1, 2), (-3, 1, -2), (-2, 1, -1), (7, 0, 7), (-6, 2, -2), (6, 2, 2), (-10, 2, -3),
    (INT32_MAX, 31, 1), (INT32_MIN, 31, -1),
])
def test_rounding_divide_by_pot_rounds_halves_away_from_zero(x, exponent, expected):
    assert int(rounding_divide_by_pot(x, exponent)) == expected


def test_multiply_by_quantized_multiplier_per_channel():
    multipliers = np.array([2**30, 2**30, 3 * 2**29])
    shifts = np.array([0, 2, -1])  # 0.5, 2.0, 0.375
    got = multiply_by_quantized_multiplier(np.array([[100, 3, 8], [3, -3, -8]]), multipliers, shifts)
    assert got.tolist() == [[50, 6, 3], [2, -6, -3]]


def test_saturating_rounding_multiply_by_pot_saturates():
    assert saturating_rounding_multiply_by_pot(np.array([2**28, 2**28 - 1, -(2**28), -(2**28) + 1]), 3).tolist() == \
        [INT32_MAX, (2**28 - 1) * 8, INT32_MIN, (-(2**28) + 1) * 8]


def test_activation_range_quantises_zero_and_six_in_float32():
    assert activation_range("none", 0.1, 3) == (-128, 127)
    assert activation_range("relu", 0.1, -5) == (-5, 127)
    assert activation_range("relu6", 0.05, -128) == (-128, -8)  # 6 / 0.05 = 120
    assert activation_range("relu6", 0.01, 0) == (0, 127)


def test_count_leading_zeros():
    values = np.array([0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1])
    assert count_leading_zeros32(values).tolist() == [32, 31, 30, 30, 1, 0, 0]


def test_fixed_point_exp_and_reciprocal_are_close_to_the_real_functions():
    a = -np.arange(0, 2**31 - 1, 2**23, dtype=np.int64)  # Q5.26 values in (-32, 0]
    got = exp_on_negative_values(a) / 2.0**31
    assert np.max(np.abs(got - np.exp(a / 2.0**26))) < 1e-6  # gemmlowp: a polynomial on [-1/4, 0)
    assert exp_on_negative_values(np.array([0])).tolist() == [INT32_MAX]
    x = np.arange(0, 2**31 - 1, 2**24, dtype=np.int64)  # Q0.31 in [0, 1)
    assert np.max(np.abs(one_over_one_plus_x_for_x_in_0_1(x) / 2.0**31 - 1 / (1 + x / 2.0**31))) < 1e-8


def test_softmax_parameters_of_a_typical_input_scale():
    multiplier, shift, diff_min = softmax_parameters(1.0, 1 / 16)
    assert (multiplier, shift) == (2**30, 23)  # 1/16 * 2^26 = 2^22 = 0.5 * 2^23
    assert diff_min == -math.floor(31 * 2**26 / 2**23)  # -248


def test_softmax_int8_is_close_to_softmax_and_sums_to_about_one():
    rng = np.random.default_rng(1)
    q = rng.integers(-128, 128, size=(200, 10))
    for scale in (1 / 16, 0.1, 0.25):
        got = (softmax_int8(q, 1.0, scale) + 128) / 256
        z = q * scale
        want = np.exp(z - z.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        assert np.max(np.abs(got - np.minimum(want, 255 / 256))) <= 1.5 / 256
