"""SQUARED_DIFFERENCE: (a - b)^2 elementwise over two broadcast tensors (Keras' LayerNormalization writes it for the
variance).

TFLite Micro's kernel (squared_difference.cc): float32 (the difference rounded, then squared) and plain int32
(wrapping); int8 and int16 (zero points 0) as ADD rescales: each operand less its zero point, shifted left (int8: 7
bits; int16: none), times its scale over twice the larger input scale (a Q31 multiplier), the difference squared in
int32, requantised by (twice the larger scale)^2 / (2^(2 x shift) x output scale), plus the output's zero point,
saturated. That last divisor is an int times a float: multiplied in float32, as the C++ does.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, rows_aligned, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import wrap
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier
from tinycc_ml.ir.ops.windows import check_requantisation
from tinycc_ml.ir.types import PER_TENSOR, TensorType

LEFT_SHIFT = {8: 7, 16: 0}
BROADCAST_RANK = 4  # BroadcastBinaryFunction4DSlow


def parameters(a, b, out) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(multiplier, shift) of each operand and of the squared difference, as PrepareQuantized computes them."""
    twice_max = 2.0 * float(max(np.float32(a.qscales[0]), np.float32(b.qscales[0])))
    shift = LEFT_SHIFT[out.bits]
    divisor = float(np.float32(1 << (2 * shift)) * np.float32(out.qscales[0]))  # int x float: in float32
    return (quantize_multiplier(float(a.qscales[0]) / twice_max), quantize_multiplier(float(b.qscales[0]) / twice_max),
            quantize_multiplier(twice_max * twice_max / divisor))


def _infer(ts, attrs, declared):
    a, b = ts
    need(a.dtype.kind == b.dtype.kind and a.dtype.bits == b.dtype.bits,
         f"operands of one element type, got {a.dtype} and {b.dtype}")
    kind = a.dtype.kind
    need(kind == "f32" or (kind == "int" and a.dtype.bits == 32) or (kind == "qi" and a.dtype.bits in (8, 16)),
         f"operands must be float32, int32, int8 or int16 (TFLite Micro's kernel), got {a.dtype}")
    shape = broadcast_shape(a.shape, b.shape, "squared_difference")
    need(a.shape == b.shape or len(shape) <= BROADCAST_RANK,
         f"broadcasting over {len(shape)} dimensions (TFLite Micro broadcasts up to {BROADCAST_RANK})")
    layout = a.layout if a.rank >= b.rank else b.layout
    if kind != "qi":
        need(declared is None or declared.dtype == a.dtype, f"the result is {a.dtype}, not {declared}")
        return TensorType(shape, a.dtype, layout)
    need(declared is not None and declared.dtype.kind == "qi" and declared.dtype.bits == a.dtype.bits
         and declared.dtype.axis == PER_TENSOR, f"the result needs a declared per-tensor qi{a.dtype.bits} type")
    need(a.dtype.axis == b.dtype.axis == PER_TENSOR, "operands must be quantised per tensor")
    if a.dtype.bits == 16:
        need(a.dtype.zero_point == b.dtype.zero_point == declared.dtype.zero_point == 0,
             "int16 operands and result need zero point 0 (TFLite Micro's Prepare)")
    check_requantisation(4.0 * max(a.dtype.qscales[0], b.dtype.qscales[0]) ** 2
                         / (2.0 ** (2 * LEFT_SHIFT[a.dtype.bits]) * declared.dtype.qscales[0]), "squared difference")
    return TensorType(shape, declared.dtype, layout)


def _evaluate(xs, attrs):
    a, b = (np.asarray(v, np.float32) for v in xs)
    d = (a - b).astype(np.float32)
    return (d * d).astype(np.float32).astype(np.float64)


def _fixed(call):
    (ta, tb), out = call.in_types, call.type.dtype
    a, b = with_rows_aligned(call.ins, call.in_types)
    if out.kind == "int":
        d = wrap(a - b, 32, True)
        return wrap(d * d, 32, True)
    (ma, sa), (mb, sb), (mo, so) = parameters(ta.dtype, tb.dtype, out)
    shift = LEFT_SHIFT[out.bits]
    scaled_a = multiply_by_quantized_multiplier((a - ta.dtype.zero_point) << shift, ma, sa)
    scaled_b = multiply_by_quantized_multiplier((b - tb.dtype.zero_point) << shift, mb, sb)
    d = scaled_a - scaled_b
    raw = multiply_by_quantized_multiplier(d * d, mo, so) + out.zero_point
    return np.clip(raw, *out.integer_range)


def _c(em, node) -> list[str]:
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    out = node.type.dtype
    if out.is_float:
        helper = em.sym("squared_difference_f")
        em.helpers.setdefault(helper, f"static inline float {helper}(float a, float b)\n{{\n"
                                      "    const float d = a - b;\n    return d * d;\n}\n")
        return c_loop(em, node, lambda a, b: f"{helper}({a}, {b})")
    if out.kind == "int":
        helper = em.sym("squared_difference_i32")
        em.helpers.setdefault(helper, f"static inline int32_t {helper}(int32_t a, int32_t b)\n{{\n"
                                      "    const uint32_t d = (uint32_t)a - (uint32_t)b;\n"
                                      "    return (int32_t)(d * d);\n}\n")
        return c_loop(em, node, lambda a, b: f"{helper}({a}, {b})")
    (ma, sa), (mb, sb), (mo, so) = parameters(ta, tb, out)
    unit = 1 << LEFT_SHIFT[out.bits]
    req, lo, hi = requantise(em), *out.integer_range
    helper = em.sym(f"squared_difference_{node.name}")
    em.helpers[helper] = (
        f"static inline int32_t {helper}(int32_t a, int32_t b)\n{{\n"
        f"    const int32_t d = {req}((a - {ta.zero_point}) * {unit}, {ma}, {sa}) - "
        f"{req}((b - {tb.zero_point}) * {unit}, {mb}, {sb});\n"
        f"    return {clamp_to(em, out.bits)}({req}(d * d, {mo}, {so}) + {out.zero_point}, {lo}, {hi});\n}}\n")
    return c_loop(em, node, lambda a, b: f"{helper}((int32_t){a}, (int32_t){b})")


register_op(OpDef(
    "squared_difference", 2, _infer, _evaluate, {},
    "TFLite's SQUARED_DIFFERENCE of two broadcast tensors; int8 / int16 rescaled as TFLite Micro's kernel (each "
    "operand to twice the larger scale, the difference squared in int32, requantised)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("SQUARED_DIFFERENCE", 99, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    low.add("squared_difference", [low.value(ins[0]), low.value(ins[1])], {}, low.tensors[outs[0]])
