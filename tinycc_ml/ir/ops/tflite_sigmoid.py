"""TFLite Micro's integer LOGISTIC, TANH and HARD_SWISH, as its reference kernels compute them (read from
tensorflow/lite/kernels/internal/reference/integer_ops/{logistic,tanh}.h and the kernels' Prepare).

int8: the input less its zero point, rescaled by a quantised multiplier into gemmlowp's Q4.27, then gemmlowp's
fixed-point logistic or tanh (exp on negative values and a Newton-Raphson reciprocal, all in int32), rounded into
the output (logistic: steps of 1/256 from -128; tanh: 1/128 around 0); inputs beyond the radius saturate. A
function of the int8 input alone: the C reads a 256-entry table this module computes.

int16 (zero points 0, output scale 2^-15): the input rescaled to steps of 1/4096 scaled by 3/4 (a power-of-two
input scale by 3 << shift, any other by a truncated 15-bit multiplier), then linear interpolation in a table of
sigmoid(i / 24) in 0.16 (256 entries); tanh reads the same table at twice the argument. The C does the same
integer steps (``c_int16``).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.ops.tflite_arith import (
    INT32_MAX,
    exp_on_negative_values,
    fixed_mul,
    multiply_by_quantized_multiplier,
    one_over_one_plus_x_for_x_in_0_1,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_multiply_by_pot,
    truncating_div_pot,
    wrap32,
)

INPUT_INTEGER_BITS_8 = 4  # gemmlowp FixedPoint<int32, 4> holds the rescaled int8 input
LOGISTIC_TOP = "16.619047164916992188"  # TFLite's float logistic is 1 above this and exp(x) below -9
# sigmoid(i / 24) in 0.16 as TFLite's int16 kernels interpolate it: within 1.1 of 65536 sigmoid(i / 24) but not
# a rounding of it, so measured from tflite-micro's int16 TANH (tests/ops/test_logistic_tanh.py measures it again)
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
], dtype=np.int64)


def int8_parameters(input_scale: float) -> tuple[int, int, int]:
    """(multiplier, left shift, input radius) as the kernels' Prepare derives them from the input scale."""
    real = float(input_scale) * float(1 << (31 - INPUT_INTEGER_BITS_8))
    q, shift = math.frexp(real)
    need(0 <= shift <= 31, f"input scale {input_scale:g}: TFLite's int8 logistic/tanh rescales it by 2^{shift}, "
         "outside the int32 shifts its kernel can do")
    multiplier = int(math.floor(q * (1 << 31) + 0.5))  # TfLiteRound: halves away from zero (q > 0)
    need(multiplier < (1 << 31), f"input scale {input_scale:g}: its quantised multiplier does not fit an int32")
    radius = math.floor(((1 << INPUT_INTEGER_BITS_8) - 1) * float(1 << (31 - INPUT_INTEGER_BITS_8)) / (1 << shift))
    return multiplier, shift, radius


def _select(mask, a, b):
    return np.where(mask, a, b)


def gemmlowp_logistic(a, integer_bits: int):
    """gemmlowp's logistic of FixedPoint<int32, integer_bits> raw ``a``: Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    magnitude = _select(positive, a, wrap32(-a))
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(wrap32(-magnitude), integer_bits))
    if_negative = wrap32(INT32_MAX - if_positive)
    return _select(a == 0, 1 << 30, _select(positive, if_positive, if_negative))


def _one_minus_x_over_one_plus_x(a):
    """gemmlowp: (1 - a) / (1 + a) for a in [0, 1), Q0.31 in and out (Newton-Raphson, three steps)."""
    total = np.asarray(a, dtype=np.int64) + INT32_MAX
    half_denominator = truncating_div_pot(total + np.where(total >= 0, 1, -1), 1)  # RoundingHalfSum(a, One)
    x = wrap32(1515870810 + fixed_mul(half_denominator, -1010580540))  # Q2.29: 48/17 - 32/17 d
    for _ in range(3):
        one_minus = wrap32((1 << 29) - fixed_mul(half_denominator, x))
        x = wrap32(x + saturating_rounding_multiply_by_pot(fixed_mul(x, one_minus), 2))
    return saturating_rounding_multiply_by_pot(wrap32(x - (1 << 29)), 2)


def gemmlowp_tanh(a, integer_bits: int):
    """gemmlowp's tanh of FixedPoint<int32, integer_bits> raw ``a``: Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = _select(negative, a, wrap32(-a))  # -|a|
    t = _one_minus_x_over_one_plus_x(exp_on_negative_values(n, integer_bits + 1))  # exp(2n): the same raw, Q+1
    return _select(a == 0, 0, _select(negative, wrap32(-t), t))


def logistic_int8(q, input_scale: float, input_zero_point: int) -> np.ndarray:
    """TFLite Micro's int8 LOGISTIC of the int8 values ``q`` (output zero point -128, steps of 1/256)."""
    return _int8(q, input_scale, input_zero_point, gemmlowp_logistic, 31 - 8, -128)


def tanh_int8(q, input_scale: float, input_zero_point: int) -> np.ndarray:
    """TFLite Micro's int8 TANH of the int8 values ``q`` (steps of 1/128 around 0)."""
    return _int8(q, input_scale, input_zero_point, gemmlowp_tanh, 31 - 7, 0)


def _int8(q, input_scale, input_zero_point, function, output_shift: int, output_zero_point: int) -> np.ndarray:
    multiplier, shift, radius = int8_parameters(input_scale)
    v = np.asarray(q, dtype=np.int64) - int(input_zero_point)
    inside = np.clip(v, -radius + 1, radius - 1)  # the saturated ones are selected below
    raw = function(multiply_by_quantized_multiplier(inside, multiplier, shift), INPUT_INTEGER_BITS_8)
    y = np.clip(rounding_divide_by_pot(raw, output_shift) + output_zero_point, -128, 127)
    return np.where(v <= -radius, -128, np.where(v >= radius, 127, y)).astype(np.int64)


def _checked_log2(scale: float) -> int | None:
    """TFLite's CheckedLog2: the rounded log2 of ``scale`` where it is within 1e-3 of an integer, else None."""
    log = math.log2(scale)
    rounded = round(log)
    return int(rounded) if abs(log - rounded) < 1e-3 else None


def int16_parameters(op: str, input_scale: float, output_scale: float) -> tuple[int, int]:
    """(multiplier, right shift) of the int16 kernels' input rescaling, as their Prepare derives them; the output
    scale must be 2^-15 (TFLite refuses any other)."""
    need(_checked_log2(output_scale) == -15, f"an int16 {op} writes steps of 2^-15; the output scale is "
         f"{output_scale:g}")
    need(input_scale > 0 and math.isfinite(input_scale), f"input scale {input_scale:g} is not a positive number")
    log2 = _checked_log2(input_scale)
    shift = (15 - 3) + log2 if log2 is not None else None
    if shift is not None and (shift == 0 or (op == "tanh" and shift == 1)):
        return 3 << shift, 0  # a power-of-two scale: the kernel multiplies by 3 exactly
    multiplier, shift = float(input_scale) * 4096.0 * 3.0, 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    need(multiplier <= 32767.0, f"input scale {input_scale:g}: TFLite's int16 {op} rescales inputs by "
         f"{multiplier:.6g}, more than its 15-bit multiplier holds")
    return int(multiplier), shift


def _rescaled(q, multiplier: int, shift: int) -> np.ndarray:
    v = np.asarray(q, dtype=np.int64) * multiplier
    return (v + (1 << (shift - 1))) >> shift if shift > 0 else v


def _interpolated(magnitude, fraction_bits: int) -> np.ndarray:
    """The table read at ``magnitude`` (steps of 2^-fraction_bits of a table step), interpolated; saturated at
    the table's end as the kernels do (0xFFFF at 0.16, shifted)."""
    high = magnitude >> fraction_bits
    low = magnitude & ((1 << fraction_bits) - 1)
    inside = np.minimum(high, 254)
    a, b = SIGMOID_TABLE[inside], SIGMOID_TABLE[inside + 1]
    return high, (a << fraction_bits) + low * (b - a)


def logistic_int16(q, multiplier: int, shift: int) -> np.ndarray:
    v = _rescaled(q, multiplier, shift)
    high, value = _interpolated(np.abs(v), 9)
    value = np.where(high >= 255, 0x7FFF << 10, value)
    value = np.where(v >= 0, value + (1 << 9), (1 << 25) - value + (1 << 9) - 1)
    return (value >> 10).astype(np.int64)


def tanh_int16(q, multiplier: int, shift: int) -> np.ndarray:
    v = _rescaled(q, multiplier, shift)
    high, value = _interpolated(np.abs(v), 8)
    value = np.where(high >= 255, 0xFFFF << 8, value)
    value = np.where(v >= 0, value - (1 << 23) + (1 << 7), -value + (1 << 23) + (1 << 7) - 1)
    return (value >> 8).astype(np.int64)


def c_int16(op: str, x: str, multiplier: int, shift: int, table: str, read) -> list[str]:
    """C statements setting int16 ``y`` from int16 ``x`` (an expression) as ``logistic_int16``/``tanh_int16`` do;
    ``read(index)`` reads the uint16 table ``table``. All arithmetic in 32 bits (int is 16 bits on the AVR)."""
    rounding = f" + INT32_C({1 << (shift - 1)})" if shift else ""
    bits, top = (9, "UINT32_C(0x7FFF) << 10") if op == "logistic" else (8, "UINT32_C(0xFFFF) << 8")
    lines = [f"const int32_t v = ((int32_t){x} * INT32_C({multiplier}){rounding}) >> {shift};",
             "const uint32_t m = (uint32_t)(v < 0 ? -v : v);",
             f"const uint32_t h = m >> {bits};",
             "uint32_t r;",
             f"if (h >= 255u) r = {top};",
             "else {",
             f"    const uint32_t a = {read('h')}, b = {read('h + 1u')};",
             f"    r = (a << {bits}) + (m & UINT32_C({(1 << bits) - 1})) * (b - a);",
             "}"]
    if op == "logistic":
        lines += ["r = v >= 0 ? r + UINT32_C(512) : (UINT32_C(1) << 25) - r + UINT32_C(511);",
                  "const int16_t y = (int16_t)(r >> 10);"]
    else:
        lines += ["const int32_t s = v >= 0 ? (int32_t)r - (INT32_C(1) << 23) + INT32_C(128)",
                  "                         : -(int32_t)r + (INT32_C(1) << 23) + INT32_C(127);",
                  "const int16_t y = (int16_t)(s >> 8);"]
    return lines


# ---- HARD_SWISH at int8: TFLite's reference kernel, in int16 steps (reference_ops::HardSwish and its Prepare)

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def _down_to_int16(multiplier: int) -> int:
    """DownScaleInt32ToInt16Multiplier: a Q31 multiplier rounded to Q15 (saturated at the top)."""
    return INT16_MAX if multiplier >= (1 << 31) - 1 - (1 << 15) else (multiplier + (1 << 15)) >> 16


def hard_swish_parameters(input_scale: float, output_scale: float) -> tuple[int, int, int, int]:
    """(output multiplier Q15, its exponent, reluish multiplier Q15, its exponent), as Prepare computes them: the
    scales' quotients in float32, QuantizeMultiplier, then rounded to 16 bits."""
    f32 = np.float32
    hires = f32(1.0 / 128.0) * f32(input_scale)
    out_multiplier, out_exponent = quantize_multiplier(float(hires / f32(output_scale)))
    relu_multiplier, relu_exponent = quantize_multiplier(float(hires / (f32(3.0) / f32(32768.0))))
    need(out_exponent <= 0, f"input scale {input_scale:g} over output scale {output_scale:g}: TFLite's int8 "
         "hard_swish needs the output's scale at least 1/128 of the input's")
    return _down_to_int16(out_multiplier), out_exponent, _down_to_int16(relu_multiplier), relu_exponent


def _wrap16(v):
    return ((np.asarray(v, dtype=np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _high_mul16(a, b, rounding: bool):
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul (``rounding``) or TFLite's SaturatingDoublingHighMul
    (C's truncating division), INT16_MIN squared saturating."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    ab = a * b
    if rounding:
        ab = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))  # C's division by 2^15: towards zero
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def _saturating_left_shift16(v, amount: int):
    return np.clip(np.asarray(v, dtype=np.int64) << amount, INT16_MIN, INT16_MAX)


def hard_swish_int8(q, input_scale: float, input_zero_point: int, output_scale: float,
                    output_zero_point: int) -> np.ndarray:
    """TFLite Micro's int8 HARD_SWISH of the int8 values ``q``."""
    out_mult, out_exp, relu_mult, relu_exp = hard_swish_parameters(input_scale, output_scale)
    value = np.asarray(q, dtype=np.int64) - int(input_zero_point)
    hires = value * 128
    preshift = _high_mul16(hires, out_mult, rounding=True)
    reluish = hires
    if relu_exp > 0:
        reluish = _saturating_left_shift16(reluish, relu_exp - 1)
    reluish = _high_mul16(reluish, relu_mult, rounding=True)
    if relu_exp > 0:
        reluish = _saturating_left_shift16(reluish, 1)
    if relu_exp < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_exp)
    reluish = (reluish + (1 << 15)) >> 1
    output = rounding_divide_by_pot(_high_mul16(reluish, preshift, rounding=False), -out_exp)
    return np.clip(_wrap16(output + int(output_zero_point)), -128, 127).astype(np.int64)


def logistic_float(x) -> np.ndarray:
    """TFLite's float LOGISTIC (reference_ops::Logistic: its cut-offs), in float64 (rounded once by the caller)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(x > float(LOGISTIC_TOP), 1.0, np.where(x < -9.0, np.exp(x), 0.5 * (1.0 + np.tanh(0.5 * x))))


def c_logistic_float(v: str) -> str:
    """TFLite's float LOGISTIC of the C float expression ``v`` (a variable: it is read three times)."""
    return f"({v} > {LOGISTIC_TOP}f ? 1.0f : ({v} < -9.0f ? expf({v}) : 1.0f / (1.0f + expf(-{v}))))"


def c_int16_block(em, op: str, x: str, out: str, multiplier: int, shift: int) -> list[str]:
    """A C block setting the int16 ``out`` to TFLite's int16 ``op`` ("logistic" or "tanh") of ``x``: the
    interpolation table stored once per model (flash on the microcontrollers)."""
    symbol = em.add_const_array(em.sym("tflite_sigmoid_table"), SIGMOID_TABLE.astype(np.uint16), "uint16_t",
                                "sigmoid(i / 24) in 0.16: TFLite's int16 logistic and tanh interpolate it")
    body = c_int16(op, x, multiplier, shift, symbol,
                   lambda index: f"(uint32_t){em.target.read_const(symbol, index, 'uint16_t')}")
    return ["{"] + [f"    {line}" for line in body] + [f"    {out} = y;", "}"]
