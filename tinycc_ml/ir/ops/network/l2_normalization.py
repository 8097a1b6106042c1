"""L2_NORMALIZATION along the last axis (embeddings: face, speaker and keyword-similarity models).

TFLite Micro's kernel (l2norm.cc): float32: the squares summed in float32 in order, sqrt, at least 1e-6, each value
divided by it. int8 (reference_integer_ops::L2Normalization): the squares of (q - zero point) summed in int32, its
inverse square root as GetInvSqrtQuantizedMultiplierExp computes it (gemmlowp's Newton-Raphson, reverse shift -1),
each (q - zero point) requantised by it with 7 more bits, saturated: the output is in steps of 1/128 around 0 whatever
its tensor says (the converter writes scale 1/128, zero point 0). A fused activation is refused, as Prepare does.
The float form's least norm is the attribute ``epsilon`` where given (ONNX's F.normalize: x / max(||x||, 1e-12),
read from ReduceL2, Clip, Expand and Div), else TFLite's 1e-6; the int8 kernel has none.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper, high_mul, multiply_pot, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import last_axis_rows
from tinycc_ml.ir.ops.network.quantised_unary import inv_sqrt_multiplier
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier
from tinycc_ml.ir.ops.windows import network_result

EPSILON = np.float32(1e-6)
OUTPUT_BITS = 7  # kOutputScale: steps of 1/128
MAX_RANK = 4


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.rank <= MAX_RANK, f"L2_NORMALIZATION of a {x.rank}-dimensional tensor (TFLite Micro takes up to {MAX_RANK})")
    need(x.dtype.is_float or (x.dtype.is_quantised and x.dtype.bits == 8),
         f"L2_NORMALIZATION takes float32 or int8 tensors (TFLite Micro's kernel), got {x.dtype}")
    need(np.isfinite(_epsilon(attrs)) and _epsilon(attrs) >= 0, f"epsilon {attrs.get('epsilon')}: a finite number "
         "of at least 0")
    return network_result(x, declared, x.shape, x.layout)


def _epsilon(attrs: dict) -> float:
    return float(np.float32(attrs.get("epsilon", EPSILON)))


def _evaluate(xs, attrs):
    x = np.asarray(xs[0], dtype=np.float64)
    norm = np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), _epsilon(attrs))
    return x / norm


def _fixed(call):
    zero_point = call.in_types[0].dtype.zero_point
    v = np.asarray(call.ins[0], dtype=np.int64) - zero_point
    sums = np.sum(v * v, axis=-1, keepdims=True)
    multipliers, shifts = np.zeros_like(sums), np.zeros_like(sums)
    for index in np.ndindex(sums.shape):  # one inverse square root per row
        multipliers[index], shifts[index] = inv_sqrt_multiplier(int(sums[index]))
    return np.clip(multiply_by_quantized_multiplier(v, multipliers, shifts + OUTPUT_BITS), -128, 127)


def _c_float(em, node) -> list[str]:
    epsilon = f"{_epsilon(node.attrs)!r}f"
    return last_axis_rows(em, node, "float", [
        "float sum = 0.0f, norm;",
        "for (int i = 0; i < {depth}; ++i)",
        "    sum += in[i] * in[i];",
        "norm = sqrtf(sum);",
        f"if (norm < {epsilon}) norm = {epsilon};",
        "for (int i = 0; i < {depth}; ++i)",
        "    out[i] = in[i] / norm;"])


def inv_sqrt(em) -> str:
    """GetInvSqrtQuantizedMultiplierExp(value, -1) in C: the multiplier, the left shift through ``shift``."""
    high, mpot = high_mul(em), multiply_pot(em)
    return c_helper(em, "tfl_inv_sqrt", f"""\
static int32_t @tfl_inv_sqrt(int32_t value, int *shift)
{{
    /* 1 / sqrt(value): gemmlowp's Newton-Raphson in Q3.28, five steps from 1 */
    int right = 11, zeros = 0, pairs, i;
    int32_t half_input, x = (int32_t)1 << 28;
    if (value <= 1) {{
        *shift = 0;
        return INT32_MAX;
    }}
    while (value >= ((int32_t)1 << 29)) {{
        value /= 4;
        ++right;
    }}
    while (!((uint32_t)value & (0x80000000u >> zeros)))
        ++zeros;
    pairs = (zeros - 1) / 2 - 1;
    right -= pairs;
    value <<= 2 * pairs;
    half_input = (value >> 1) / 2 + (((value >> 1) & 1) ? 1 : 0);
    for (i = 0; i < 5; ++i) {{
        const int32_t cube = {mpot}({high}({high}(x, x), x), 6);
        x = {mpot}((int32_t)((uint32_t){high}({(1 << 28) + (1 << 27)}, x) - (uint32_t){high}(half_input, cube)), 3);
    }}
    x = {high}(x, 1518500250);
    if (right < 0) {{
        x = (int32_t)((uint32_t)x << -right);
        right = 0;
    }}
    *shift = -right;
    return x;
}}
""")


def _c_int8(em, node) -> list[str]:
    zero_point = em.graph.type(node.inputs[0]).dtype.zero_point
    root, req = inv_sqrt(em), requantise(em)
    return last_axis_rows(em, node, "int8_t", [
        "int32_t sum = 0, multiplier;",
        "int shift;",
        "for (int i = 0; i < {depth}; ++i)",
        f"    sum += ((int32_t)in[i] - {zero_point}) * ((int32_t)in[i] - {zero_point});",
        f"multiplier = {root}(sum, &shift);",
        "for (int i = 0; i < {depth}; ++i) {{",
        f"    const int32_t v = {req}((int32_t)in[i] - {zero_point}, multiplier, shift + {OUTPUT_BITS});",
        "    out[i] = (int8_t)(v > 127 ? 127 : (v < -128 ? -128 : v));",
        "}}"])


register_op(OpDef(
    "l2_normalization", 1, _infer, _evaluate, {"epsilon": "float?"},
    "TFLite's L2_NORMALIZATION along the last axis: float32 (x / max(sqrt(sum x^2), epsilon: 1e-6 unless given)) and "
    "TFLite Micro's int8 kernel (an integer inverse square root per row; output steps of 1/128)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs) if batched[0] else None,
    fixed=_fixed, c={"float": _c_float, "fixed": _c_int8},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("L2_NORMALIZATION", 11, options=12)
def lower_tflite(low, options, ins, outs) -> None:
    need(low.activation(options, 0, "L2_NORMALIZATION") == "none",
         "L2_NORMALIZATION: a fused activation (TFLite Micro's Prepare refuses it)")
    low.add("l2_normalization", [low.value(ins[0])], {}, low.tensors[outs[0]])
