"""ADD_N: the elementwise sum of N tensors of one shape and type.

TFLite Micro's kernel (add_n.cc): float32 summed from 0 in input order. int8 (every input of one quantisation, as
Prepare requires): each input less its zero point, shifted left 20 bits, times input scale / (2 x input scale) (a Q31
multiplier), summed in int32, requantised by 2 x input scale / (2^20 x output scale), plus the output's zero point,
saturated. The reference kernel starts its sum from the scaled zero-point offset (its "x = 0" is the offset, not 0),
so the sum holds one extra term of -zero point: reproduced, since it is what tflite-micro computes.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier, wrap32
from tinycc_ml.ir.types import PER_TENSOR, TensorType

LEFT_SHIFT = 20  # kAddNIntegerShift
MAX_INPUTS = 64


def parameters(x, out) -> tuple[tuple[int, int], tuple[int, int]]:
    """(multiplier, shift) of each input and of the sum, as Prepare computes them (in double)."""
    twice = 2.0 * float(np.float32(x.qscales[0]))
    return (quantize_multiplier(float(np.float32(x.qscales[0])) / twice),
            quantize_multiplier(twice / ((1 << LEFT_SHIFT) * float(np.float32(out.qscales[0])))))


def _infer(ts, attrs, declared):
    first = ts[0]
    need(all(t.shape == first.shape for t in ts),
         f"ADD_N's inputs must have one shape, got {[list(t.shape) for t in ts]}")
    need(all(t.dtype == first.dtype for t in ts),
         f"ADD_N's inputs must have one type, got {[str(t.dtype) for t in ts]}")
    return float_or_int8_result(first, declared, "ADD_N")


def float_or_int8_result(x, declared, op: str):
    """The result of a sum TFLite Micro computes in float32 or per-tensor int8 (ADD_N, CUMSUM): x's shape, its
    type or the declared int8 quantisation."""
    if x.dtype.is_float:
        return TensorType(x.shape, x.dtype, x.layout)
    need(x.dtype.is_quantised and x.dtype.bits == 8 and x.dtype.axis == PER_TENSOR,
         f"{op} takes float32 or per-tensor int8 tensors (TFLite Micro's kernel), got {x.dtype}")
    need(declared is not None and declared.dtype.is_quantised and declared.dtype.bits == 8
         and declared.dtype.axis == PER_TENSOR, "the result needs a declared per-tensor qi8 type")
    return TensorType(x.shape, declared.dtype, x.layout)


def _evaluate(xs, attrs):
    total = np.zeros(np.shape(xs[0]), dtype=np.float32)
    for x in xs:
        total = (total + np.asarray(x, dtype=np.float32)).astype(np.float32)
    return total.astype(np.float64)


def _fixed(call):
    x, out = call.in_types[0].dtype, call.type.dtype
    (mi, si), (mo, so) = parameters(x, out)
    offset = -int(x.zero_point)
    values = [np.asarray(v, dtype=np.int64) for v in call.ins]
    total = multiply_by_quantized_multiplier(np.int64(offset << LEFT_SHIFT), mi, si)
    for v in values:
        total = wrap32(total + multiply_by_quantized_multiplier((v + offset) << LEFT_SHIFT, mi, si))
    return np.clip(multiply_by_quantized_multiplier(total, mo, so) + out.zero_point, -128, 127)


def _c(em, node) -> list[str]:
    y, at = em.var(node.name), [em.at(name, "i") for name in node.inputs]
    if node.type.dtype.is_float:
        return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
                "    float sum = 0.0f;",
                *[f"    sum += {v};" for v in at],
                f"    {y}[i] = sum;",
                "}"]
    x, out = em.graph.type(node.inputs[0]).dtype, node.type.dtype
    (mi, si), (mo, so) = parameters(x, out)
    req, offset = requantise(em), -int(x.zero_point)
    start = int(multiply_by_quantized_multiplier(np.int64(offset << LEFT_SHIFT), mi, si))
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    uint32_t sum = (uint32_t){start};",
            *[f"    sum += (uint32_t){req}(((int32_t){v} + {offset}) * {1 << LEFT_SHIFT}, {mi}, {si});" for v in at],
            f"    {y}[i] = {clamp_to(em, 8)}({req}((int32_t)sum, {mo}, {so}) + {out.zero_point}, -128, 127);",
            "}"]


register_op(OpDef(
    "add_n", (2, MAX_INPUTS), _infer, _evaluate, {},
    "TFLite's ADD_N: the sum of N tensors of one shape (float32 in order; int8 as TFLite Micro's kernel)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs) if all(batched) else None,
    fixed=_fixed, c={"float": _c, "fixed": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("ADD_N", 106, inputs=(2, MAX_INPUTS))
def lower_tflite(low, options, ins, outs) -> None:
    low.add("add_n", [low.value(i) for i in ins], {}, low.tensors[outs[0]])
