"""LEAKY_RELU: x where x > 0, alpha x elsewhere.

Float: TFLite's ``reference_ops::LeakyRelu`` (float32: ``x > 0 ? x : x * alpha``). int8: TFLite Micro's
``QuantizeLeakyRelu``: the input less its zero point, requantised by the identity multiplier (input scale /
output scale) where it is >= 0 and by the alpha multiplier (input scale x alpha / output scale, in double as the
tflite-micro package computes them: ``multipliers``) elsewhere, plus the output's zero point, clamped to int8 (int16
for 16x8 models). A negative alpha requantises by its magnitude and negates, as TFLite Micro does.

The project's fixed point (fx8 / fx16, the result at the input's type): x where x >= 0, else x times alpha as a
multiplier of 15 significant bits (``pow2_alpha``: alpha_q 2^-k, |alpha_q| < 2^15, k <= 30), shifted right with
rounding (halves up) and saturated to the width. The product stays within int32 (|x alpha_q| <= 2^30); the error
is at most |alpha - alpha_q 2^-k| |x| (relative 2^-15 of alpha x) plus half a step.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier
from tinycc_ml.ir.ops.windows import check_requantisation, network_result, quantised_operand


def _alpha(attrs: dict) -> float:
    return float(np.float32(attrs["alpha"]))


def _infer(ts, attrs, declared):
    (x,) = ts
    need(np.isfinite(attrs["alpha"]), f"alpha {attrs['alpha']} is not a finite number")
    bits = x.dtype.bits if x.dtype.is_quantised else 8
    result = network_result(x, declared, x.shape, x.layout, bits)
    if x.dtype.is_fixed:
        need(result.dtype == x.dtype, f"a fixed-point leaky_relu keeps its input's type {x.dtype}, not {result.dtype}")
        pow2_alpha(_alpha(attrs))
    if x.dtype.is_quantised:
        need(bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
        quantised_operand(x, "input", bits)
        identity, alpha = multipliers(x.dtype.qscales[0], result.dtype.qscales[0], _alpha(attrs))
        check_requantisation([identity, abs(alpha)], "leaky_relu")
    return result


def multipliers(input_scale: float, output_scale: float, alpha: float) -> tuple[float, float]:
    """The identity and alpha multipliers as tflite-micro computes them: the float32 scales and alpha multiplied and
    divided in double (its source reads as float32 arithmetic cast to double, but the package's kernels agree with
    the double quotients on every int16 value of the 23 LEAKY_RELU models of its integration tests, and with the
    float32 ones on 17 of them: benchmarks/tflite_corpus.py)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x, y, a = float(np.float32(input_scale)), float(np.float32(output_scale)), float(np.float32(alpha))
        return x / y, x * a / y


def parameters(in_dtype, out_dtype, alpha: float) -> tuple[tuple[int, int], tuple[int, int], bool]:
    """((identity multiplier, shift), (|alpha| multiplier, shift), alpha is negative)."""
    identity, scaled_alpha = multipliers(in_dtype.qscales[0], out_dtype.qscales[0], alpha)
    return quantize_multiplier(identity), quantize_multiplier(abs(scaled_alpha)), scaled_alpha < 0


def pow2_alpha(alpha: float) -> tuple[int, int]:
    """(alpha_q, k): alpha as alpha_q 2^-k with |alpha_q| in [2^14, 2^15] (fewer bits where k would pass 30)."""
    if alpha == 0:
        return 0, 0
    k = min(30, 14 - math.floor(math.log2(abs(alpha))))
    need(k >= 0, f"alpha {alpha}: a fixed-point leaky_relu takes |alpha| < 2^15")
    return int(np.floor(alpha * 2.0**k + 0.5)), k


def _evaluate(xs, attrs):
    x = np.asarray(xs[0], dtype=np.float32)
    return np.where(x > 0, x, x * np.float32(_alpha(attrs)))


def _fixed(call: FixedCall):
    x, out = call.in_types[0].dtype, call.type.dtype
    if out.is_fixed:
        alpha_q, k = pow2_alpha(_alpha(call.attrs))
        v = np.asarray(call.ins[0], dtype=np.int64)
        return np.where(v >= 0, v, saturate(rshift(v * alpha_q, k), out.bits))
    (m_id, s_id), (m_a, s_a), negative = parameters(x, out, _alpha(call.attrs))
    v = call.ins[0] - x.zero_point
    scaled_alpha = multiply_by_quantized_multiplier(v, m_a, s_a)
    y = np.where(v >= 0, multiply_by_quantized_multiplier(v, m_id, s_id), -scaled_alpha if negative else scaled_alpha)
    return np.clip(y + out.zero_point, *out.integer_range)


def _c_pow2(em, node) -> list[str]:
    (x_name,) = node.inputs
    bits = node.type.dtype.bits
    alpha_q, k = pow2_alpha(_alpha(node.attrs))
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    scaled = f"(v * INT32_C({alpha_q}) + INT32_C({1 << (k - 1)})) >> {k}" if k else f"v * INT32_C({alpha_q})"
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const int32_t v = {em.at(x_name, 'i')};",
            f"    const int32_t r = v >= 0 ? v : ({scaled});",
            f"    {em.var(node.name)}[i] = (int{bits}_t)(r < INT32_C({lo}) ? INT32_C({lo}) : (r > INT32_C({hi}) ? "
            f"INT32_C({hi}) : r));",
            "}"]


def _c_fixed(em, node) -> list[str]:
    if node.type.dtype.is_fixed:
        return _c_pow2(em, node)
    (x_name,) = node.inputs
    x, out = em.graph.type(x_name).dtype, node.type.dtype
    (m_id, s_id), (m_a, s_a), negative = parameters(x, out, _alpha(node.attrs))
    req, clamp = requantise(em), clamp_to(em, out.bits)
    lo, hi = out.integer_range
    below = f"{req}(v, {m_a}, {s_a})"
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const int32_t v = (int32_t){em.at(x_name, 'i')} - {x.zero_point};",
            f"    const int32_t r = v >= 0 ? {req}(v, {m_id}, {s_id}) : {'-' if negative else ''}{below};",
            f"    {em.var(node.name)}[i] = {clamp}(r + {out.zero_point}, {lo}, {hi});",
            "}"]


def _c_float(em, node) -> list[str]:
    (x_name,) = node.inputs
    alpha = repr(_alpha(node.attrs))
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float v = {em.at(x_name, 'i')};",
            f"    {em.var(node.name)}[i] = v > 0.0f ? v : v * {alpha}f;",
            "}"]


register_op(OpDef(
    "leaky_relu", 1, _infer, _evaluate, {"alpha": "float"},
    "TFLite's LEAKY_RELU: x > 0 ? x : alpha x; quantised: TFLite Micro's int8 kernel (identity and alpha "
    "multipliers, the output's zero point, clamped); fixed point: alpha as a 15-bit multiplier, the input's type",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs),
    fixed=_fixed, c={"fixed": _c_fixed, "float": _c_float},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

LEAKY_RELU_OPTIONS = 75  # schema.fbs' BuiltinOptions: LeakyReluOptions { alpha: float }


@tflite_builtin("LEAKY_RELU", 98, options=LEAKY_RELU_OPTIONS)
def lower_tflite(low, options, ins, outs) -> None:
    alpha = options.scalar(0, "f", 0.0, "alpha") if options is not None else 0.0
    low.add("leaky_relu", [low.value(ins[0])], {"alpha": float(alpha)}, low.tensors[outs[0]])
