"""quantised_div: TFLite's int8 DIV of two broadcast tensors (TFLite Micro's DivElementwise).

Each operand less its zero point; a negative divisor flips both signs; the divisor's reciprocal as GetReciprocal
computes it (31 integer digits), the dividend shifted left by its leading sign bits and multiplied by it, then
requantised by input1 scale / (input2 scale x output scale) with the total shift (output shift - reciprocal's bits -
the dividend's headroom), plus the output zero point, clamped by the fused activation.

Where that total shift passes 31 bits (a small dividend over a large divisor: a quotient below one output step),
TFLite Micro's RoundingDivideByPOT shifts an int32 by 32 or more: undefined behaviour in C++ (tflite-micro on x86
gives values far from the quotient; an Arm build others). There the quotient is rounded as the same formula with an
exact shift gives (the output's zero point, or one step from it): documented and tested apart. A divisor equal to
its zero point (zero; a debug check in TFLite Micro) gives the dividend's saturated sign.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper, high_mul, reciprocal
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.network.broadcast import binary_result, c_loop, rows_aligned, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    activation_range,
    apply_activation,
    count_leading_zeros32,
    get_reciprocal,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap32,
)

RECIPROCAL_DIGITS = 31
LARGEST_SHIFT = 32  # any exact shift of an int32 by 32 or more gives what 32 gives
LARGEST_OUTPUT_SHIFT = 23  # a dividend's headroom is at least 23: keeps the total shift a right shift


def multiplier(a, b, out) -> tuple[int, int]:
    """input1 scale / (input2 scale x output scale) in double (what tflite-micro computes: measured on every code
    pair; its source of 2026-08 divides the float32 scales), as QuantizeMultiplier gives it."""
    return quantize_multiplier(float(np.float32(a.qscales[0])) / (float(np.float32(b.qscales[0]))
                                                                    * float(np.float32(out.qscales[0]))))


def _infer(ts, attrs, declared):
    a, b = ts
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    need(a.dtype.is_quantised and b.dtype.is_quantised and a.dtype.bits == b.dtype.bits == 8,
         f"quantised_div takes int8 tensors (TFLite Micro's quantised DIV), got {a.dtype} and {b.dtype}")
    result = binary_result(ts, declared, "quantised_div")
    need(multiplier(a.dtype, b.dtype, result.dtype)[1] <= LARGEST_OUTPUT_SHIFT,
         "the scales' ratio input1 / (input2 x output) needs a multiplier above 2^23: out of TFLite's range")
    return result


def _evaluate(xs, attrs):
    with np.errstate(divide="ignore", invalid="ignore"):
        return apply_activation(np.asarray(xs[0], np.float64) / np.asarray(xs[1], np.float64),
                                attrs.get("activation", "none"))


def leading_sign_bits(x):
    """CountLeadingSignBits of int32 values (31 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    return np.where(x == 0, 31, np.where(x >= 0, count_leading_zeros32(x) - 1, count_leading_zeros32(2 * -x - 1)))


def _fixed(call):
    (ta, tb), out = call.in_types, call.type.dtype
    a, b = with_rows_aligned(call.ins, call.in_types)
    m, shift = multiplier(ta.dtype, tb.dtype, out)
    x1, x2 = np.broadcast_arrays(a - ta.dtype.zero_point, b - tb.dtype.zero_point)
    x1, x2 = np.where(x2 < 0, -x1, x1), np.abs(x2)
    inverse, reciprocal_bits = get_reciprocal(np.maximum(x2, 1), RECIPROCAL_DIGITS)
    headroom = leading_sign_bits(x1)
    quotient = saturating_rounding_doubling_high_mul(wrap32(x1 << headroom), inverse)
    total = np.minimum(headroom + reciprocal_bits - shift, LARGEST_SHIFT)
    value = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(quotient, m), total) + out.zero_point
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point)
    zero_divisor = np.where(x1 > 0, hi, np.where(x1 < 0, lo, out.zero_point))
    return np.where(x2 == 0, zero_divisor, np.clip(value, lo, hi))


def _c(em, node) -> list[str]:
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    out = node.type.dtype
    m, shift = multiplier(ta, tb, out)
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point)
    high, recip = high_mul(em), reciprocal(em)
    helper = c_helper(em, f"quantised_div_{node.name}", f"""\
static int8_t @quantised_div_{node.name}(int32_t x1, int32_t x2)
{{
    /* TFLite Micro's DivElementwise (shifts past 31 bits exact: see quantised_div.py) */
    int bits, headroom = 0, total;
    int32_t quotient, value;
    int64_t mask;
    x1 -= {ta.zero_point};
    x2 -= {tb.zero_point};
    if (x2 == 0)
        return (int8_t)(x1 > 0 ? {hi} : (x1 < 0 ? {lo} : {out.zero_point}));
    if (x2 < 0) {{
        x1 = -x1;
        x2 = -x2;
    }}
    quotient = {recip}(x2, &bits);
    bits += {RECIPROCAL_DIGITS - SOFTMAX_ACCUMULATION_INTEGER_BITS};
    while (headroom < 31 && ((int32_t)((uint32_t)x1 << (headroom + 1)) >> (headroom + 1)) == x1)
        ++headroom;  /* CountLeadingSignBits */
    quotient = {high}((int32_t)((uint32_t)x1 << headroom), quotient);
    total = headroom + bits - ({shift});
    if (total > {LARGEST_SHIFT})
        total = {LARGEST_SHIFT};
    value = {high}(quotient, {m});
    mask = ((int64_t)1 << total) - 1;
    value = (int32_t)(((int64_t)value >> total) + ((((int64_t)value & mask) > ((mask >> 1) + (value < 0))) ? 1 : 0))
            + {out.zero_point};
    return (int8_t)(value < {lo} ? {lo} : (value > {hi} ? {hi} : value));
}}
""")
    return c_loop(em, node, lambda a, b: f"{helper}((int32_t){a}, (int32_t){b})")


register_op(OpDef(
    "quantised_div", 2, _infer, _evaluate, {"activation": "str?"},
    "TFLite's int8 DIV of two broadcast tensors (TFLite Micro's DivElementwise; its shifts past 31 bits exact)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "c_float": "a quantised division"}))
