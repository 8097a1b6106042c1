"""TFLite's int8 arithmetic, exactly as TFLite (and TFLite Micro's reference kernels) define it:
gemmlowp's fixed-point primitives and the quantised multipliers computed from the tensors' scales.

Values are numpy int64 arrays holding int32 values; each function gives the int32 result C gives
(C's truncating division and arithmetic right shifts, written out). Sources: TFLite's
``kernels/internal/common.h``, ``quantization_util.cc``, ``kernel_util.cc`` and gemmlowp's
``fixedpoint.h`` (TFLITE_SINGLE_ROUNDING off, the default: the double rounding below).
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
ACTIVATIONS = ("none", "relu", "relu6")


def round_half_away(x: float) -> int:
    """std::round: halves away from zero (numpy's round goes to even)."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: ``real`` as a Q31 multiplier in [2^30, 2^31) and a power-of-two shift
    (left when positive), real ~= multiplier * 2^(shift - 31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round_half_away(q * 2.0**31)
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:  # every bit would be shifted out: TFLite flushes the multiplier to zero
        return 0, 0
    return q_fixed, shift


def truncating_div_pot(v, bits: int):
    """C's ``v / 2^bits`` on int64: rounds towards zero."""
    v = np.asarray(v, dtype=np.int64)
    return (v + ((v >> 63) & ((1 << bits) - 1))) >> bits  # a negative v biased by 2^bits - 1: rounds up


def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul: the high 32 bits of 2ab, rounded to nearest."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = (1 << 30) - ((ab >> 63) & ((1 << 31) - 1))  # 2^30, or 1 - 2^30 when ab < 0
    high = truncating_div_pot(ab + nudge, 31)
    if not (np.any(a == INT32_MIN) and np.any(b == INT32_MIN)):  # the one overflow: INT32_MIN squared
        return high
    return np.where((a == b) & (a == INT32_MIN), INT32_MAX, high)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, halves away from zero."""
    x, exponent = np.asarray(x, dtype=np.int64), np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_rounding_multiply_by_pot(x, exponent: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT: a saturating left shift, or RoundingDivideByPOT."""
    x = np.asarray(x, dtype=np.int64)
    if exponent <= 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def wrap32(v):
    """An int32 result in C: two's complement wrap (gemmlowp's raw additions)."""
    v = np.asarray(v, dtype=np.int64)
    return ((v + 2**31) & 0xFFFFFFFF) - 2**31


def multiply_by_quantized_multiplier(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier: x * multiplier * 2^(shift - 31), rounded twice as TFLite does;
    ``multiplier`` and ``shift`` broadcast (per channel on the last axis)."""
    shift = np.asarray(shift, dtype=np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    x = wrap32(np.asarray(x, dtype=np.int64) << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), right)


ACC64_BITS = 47  # a 16x8 layer's int64 sum: TFLite's MultiplyByQuantizedMultiplier assumes |sum| < 2^47


def multiply_by_quantized_multiplier_64(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier of an int64 sum (16x8 layers with int64 biases): the multiplier rounded to
    16 bits, one rounding shift, the result cut to int32 as TFLite's static_cast does."""
    m = np.asarray(multiplier, dtype=np.int64)
    total = 15 - np.asarray(shift, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    result = (np.asarray(x, dtype=np.int64) * reduced + np.left_shift(np.int64(1), total - 1)) >> total
    return wrap32(result)


def activation_range(activation: str, scale: float, zero_point: int, bits: int = 8) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation as an int clamp of the output
    (0 and 6 quantised in float32, as TFLite does)."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def quantise(real: float) -> int:
        with np.errstate(over="ignore"):
            steps = float(np.float32(real) / np.float32(scale))
        if not math.isfinite(steps):  # a tiny (denormal) scale: 6 is beyond float32, so beyond the int range
            return hi
        return zero_point + round_half_away(steps)

    if activation == "relu":
        return max(lo, quantise(0.0)), hi
    if activation == "relu6":
        return max(lo, quantise(0.0)), min(hi, quantise(6.0))
    return lo, hi


def apply_activation(values: np.ndarray, activation: str) -> np.ndarray:
    """The fused activations in real arithmetic."""
    if activation == "relu":
        return np.maximum(values, 0.0)
    if activation == "relu6":
        return np.clip(values, 0.0, 6.0)
    return values


def channel_multipliers(input_scale: float, filter_scales, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """PopulateConvolutionQuantizationParams: per output channel, in_scale * filter_scale / out_scale
    in double, quantised."""
    pairs = [quantize_multiplier(float(input_scale) * float(s) / float(output_scale)) for s in filter_scales]
    return np.array([m for m, _ in pairs], dtype=np.int64), np.array([s for _, s in pairs], dtype=np.int64)


# ---------------------------------------------------------------- softmax (int8 in, int8 out)

SOFTMAX_DIFF_INTEGER_BITS = 5  # kScaledDiffIntegerBits
SOFTMAX_ACCUMULATION_INTEGER_BITS = 12  # kAccumulationIntegerBits


def softmax_parameters(beta: float, input_scale: float) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling and CalculateInputRadius: (input multiplier, its left shift, diff_min)."""
    real = min(float(beta) * float(input_scale) * (1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    radius = ((1 << SOFTMAX_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)) / (1 << left_shift)
    return multiplier, left_shift, -math.floor(radius)


def fixed_mul(a, b):
    """The product of two gemmlowp FixedPoint values (any integer bits): SaturatingRoundingDoublingHighMul."""
    return saturating_rounding_doubling_high_mul(a, b)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """gemmlowp: exp(a) for a in [-1/4, 0), Q0.31 in and out."""
    constant_term, one_third = 1895147668, 715827883
    x = wrap32(a + (1 << 28))  # a + 1/8: the Taylor expansion's centre
    x2 = fixed_mul(x, x)
    x3 = fixed_mul(x2, x)
    x4 = fixed_mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrap32(fixed_mul(wrap32(x4_over_4 + x3), one_third) + x2), 1)
    return wrap32(constant_term + fixed_mul(constant_term, wrap32(x + poly)))


EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
              (4, 242))


def exp_on_negative_values(a, integer_bits: int = SOFTMAX_DIFF_INTEGER_BITS):
    """gemmlowp's exp_on_negative_values: a (Q integer_bits) <= 0 to exp(a) in Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = wrap32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, fixed_mul(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp: 1 / (1 + a) for a in [0, 1), Q0.31 in and out (Newton-Raphson, three steps)."""
    a = np.asarray(a, dtype=np.int64)
    total = a + INT32_MAX
    half_denominator = truncating_div_pot(total + np.where(total >= 0, 1, -1), 1)  # RoundingHalfSum(a, One)
    x = wrap32(1515870810 + fixed_mul(half_denominator, -1010580540))  # Q2.29: 48/17 - 32/17 d
    for _ in range(3):
        one_minus = wrap32((1 << 29) - fixed_mul(half_denominator, x))
        x = wrap32(x + saturating_rounding_multiply_by_pot(fixed_mul(x, one_minus), 2))
    return saturating_rounding_multiply_by_pot(x, 1)


def count_leading_zeros32(x):
    """CountLeadingZeros of the uint32 x (32 for 0): frexp's exponent is the bit length, exactly."""
    _, bit_length = np.frexp((np.asarray(x, dtype=np.int64) & 0xFFFFFFFF).astype(np.float64))
    return 32 - bit_length.astype(np.int64)


def get_reciprocal(x, integer_digits: int):
    """TFLite's GetReciprocal: (1 / x as Q0.31 of x scaled into [1, 2), bits of x above one)."""
    x = np.asarray(x, dtype=np.int64)
    headroom_plus_one = count_leading_zeros32(x)
    bits_over_unit = integer_digits - headroom_plus_one
    shifted = (((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    return one_over_one_plus_x_for_x_in_0_1(wrap32(shifted)), bits_over_unit


def softmax_int8(q: np.ndarray, beta: float, input_scale: float, out_bits: int = 8) -> np.ndarray:
    """reference_ops::Softmax for int8 input, along the last axis: int8 output (scale 1/256, zero point -128) or,
    ``out_bits`` 16, int16 (scale 1/65536, zero point -32768)."""
    multiplier, left_shift, diff_min = softmax_parameters(beta, input_scale)
    q = np.asarray(q, dtype=np.int64)
    diff = q - q.max(axis=-1, keepdims=True)
    used = diff >= diff_min
    rescaled = saturating_rounding_doubling_high_mul(wrap32(diff << left_shift), multiplier)
    exps = exp_on_negative_values(rescaled)
    terms = np.where(used, rounding_divide_by_pot(exps, SOFTMAX_ACCUMULATION_INTEGER_BITS), 0)
    sum_of_exps = wrap32(np.sum(terms, axis=-1, keepdims=True))
    shifted_scale, bits_over_unit = get_reciprocal(sum_of_exps, SOFTMAX_ACCUMULATION_INTEGER_BITS)
    unsaturated = rounding_divide_by_pot(fixed_mul(shifted_scale, exps), bits_over_unit + 31 - out_bits)
    low, high = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    return np.where(used, np.clip(unsaturated + low, low, high), low)


# ---------------------------------------------------------------- AffineQuantize

AFFINE_CODES = (-128, 127)  # an affine-quantised (TFLite) input's int8 codes


def quantise_affine(X, scale: float, zero_point: int, bits: int = 8) -> np.ndarray:
    """Real rows to the int8 (``bits`` 16: int16) codes of an affine-quantised input, as TFLite's QUANTIZE
    (AffineQuantize) computes them: q = round(x / scale) + zero_point, the float32 value divided in float32,
    halves away from zero, saturated to the width; NaN gives the least code. The C's
    ``<prefix>_quantise_feature`` gives the same int8 codes by comparing x with ``affine_thresholds``."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.asarray(X, dtype=np.float64).astype(np.float32)
        steps = (x / np.float32(scale)).astype(np.float64)
        q = np.copysign(np.floor(np.abs(steps) + 0.5), steps) + int(zero_point)
        codes = AFFINE_CODES if bits == 8 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        q = np.clip(np.nan_to_num(q, nan=codes[0]), *codes)
    return q.astype(np.int64)


# ---------------------------------------------------------------- log(x) for x >= 1 (LOG_SOFTMAX's int8 kernel)

LOG_2, SQRT_SQRT_HALF, SQRT_HALF, ONE_QUARTER = 1488522236, 1805811301, 1518500250, 536870912  # Q0.31
LOG_ALPHAS = (117049297, 127690142, 1057819769, 638450708)  # alpha_n, alpha_d, alpha_i, alpha_f (Q0.31)


def multiply_by_pot_param(x, exponent):
    """TFLite's SaturatingRoundingMultiplyByPOTParam for exponents >= 0 (one per element): a saturating left
    shift."""
    x, exponent = np.asarray(x, dtype=np.int64), np.asarray(exponent, dtype=np.int64)
    threshold = (np.int64(1) << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, wrap32(x << exponent)))


def saturating_add(a, b):
    """SaturatingAddNonGemmlowp / SaturatingSub of int32 (b negated): the int64 sum clamped to int32."""
    return np.clip(np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64), INT32_MIN, INT32_MAX)


def rounding_half_sum(a, b):
    """gemmlowp's RoundingHalfSum: (a + b) / 2, halves away from zero, in int64."""
    total = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    return truncating_div_pot(total + np.where(total >= 0, 1, -1), 1)


def log_x_for_x_greater_than_or_equal_to_1(raw, input_integer_bits: int, output_integer_bits: int):
    """TFLite's log_x_for_x_greater_than_or_equal_to_1 (common.h): log(x) of x >= 1 in Q``input_integer_bits``,
    in Q``output_integer_bits``: x's power of two from its leading zeros, the mantissa's log by a rational
    approximation around 2^-1/4, accumulated with one more integer bit."""
    accum_bits = output_integer_bits + 1
    alpha_n, alpha_d, alpha_i, alpha_f = LOG_ALPHAS
    shifted_quarter = int(rounding_divide_by_pot(ONE_QUARTER, accum_bits))
    z_a = np.asarray(raw, dtype=np.int64)
    headroom_a = count_leading_zeros32(z_a)
    r_a = multiply_by_pot_param(fixed_mul(multiply_by_pot_param(z_a, headroom_a - 1), SQRT_HALF), 1)
    pow_a = saturating_add(multiply_by_pot_param(input_integer_bits - headroom_a, 31 - accum_bits), shifted_quarter)
    headroom_b = count_leading_zeros32(fixed_mul(z_a, SQRT_HALF)) - 1
    r_b = multiply_by_pot_param(z_a, headroom_b)
    pow_b = saturating_add(multiply_by_pot_param(input_integer_bits - headroom_b, 31 - accum_bits), -shifted_quarter)
    r, z_pow = np.minimum(r_a, r_b), np.maximum(pow_a, pow_b)
    p = rounding_half_sum(r, SQRT_SQRT_HALF)
    q = wrap32(r - SQRT_SQRT_HALF)
    q = wrap32(q + q)
    common_sq = fixed_mul(q, q)
    num = wrap32(fixed_mul(q, r) + fixed_mul(fixed_mul(q, common_sq), alpha_n))
    denominator_minus_one = wrap32(fixed_mul(p, wrap32(wrap32(alpha_i + q) + fixed_mul(alpha_d, common_sq)))
                                   + fixed_mul(alpha_f, q))
    reciprocal = one_over_one_plus_x_for_x_in_0_1(denominator_minus_one)
    total = wrap32(fixed_mul(z_pow, LOG_2) + fixed_mul(rounding_divide_by_pot(num, accum_bits), reciprocal))
    return saturating_rounding_multiply_by_pot(total, accum_bits - output_integer_bits)
