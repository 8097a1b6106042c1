"""MUL: the elementwise product of two tensors, broadcast (``broadcast``), and a fused activation.

Float: TFLite's float32 product, clamped by the activation. int8: TFLite Micro's ``MulElementwise``: (a - za)
(b - zb) requantised by the multiplier sa sb / so (in double, as TFLite Micro's Prepare computes it), plus the
output's zero point, clamped to the activation's range.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import (
    binary_result,
    c_float_arithmetic,
    c_loop,
    c_pow2,
    pow2_fixed,
    rows_aligned,
    with_rows_aligned,
)
from tinycc_ml.ir.ops.network.integer_arith import lower_integer
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    activation_range,
    apply_activation,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)
from tinycc_ml.ir.ops.windows import check_requantisation

MUL_OPTIONS = 21  # schema.fbs' BuiltinOptions: MulOptions { fused_activation_function }


def _infer(ts, attrs, declared):
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    result = binary_result(ts, declared, "tensor_mul")
    if result.dtype.is_quantised:
        check_requantisation(multiplier(ts[0].dtype, ts[1].dtype, result.dtype), "product")
        if result.dtype.bits == 16:  # TFLite Micro's Prepare
            need(ts[0].dtype.zero_point == ts[1].dtype.zero_point == result.dtype.zero_point == 0,
                 f"TFLite's int16 MUL needs zero points 0, got {ts[0].dtype}, {ts[1].dtype} -> {result.dtype}")
    return result


def multiplier(a, b, out) -> float:
    return float(a.qscales[0]) * float(b.qscales[0]) / float(out.qscales[0])


def _evaluate(xs, attrs):
    product = np.asarray(xs[0], dtype=np.float32) * np.asarray(xs[1], dtype=np.float32)
    return apply_activation(product, attrs.get("activation", "none"))


def _fixed(call: FixedCall):
    if call.type.dtype.is_fixed:
        return pow2_fixed(call, "tensor_mul", None)
    (ta, tb), out = call.in_types, call.type.dtype
    a, b = with_rows_aligned(call.ins, call.in_types)  # a constant of more axes than the rows aligned
    m, s = quantize_multiplier(multiplier(ta.dtype, tb.dtype, out))
    product = (a - ta.dtype.zero_point) * (b - tb.dtype.zero_point)
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    return np.clip(multiply_by_quantized_multiplier(product, m, s) + out.zero_point, lo, hi)


def _c_fixed(em, node) -> list[str]:
    if node.type.dtype.is_fixed:
        return c_pow2(em, node, None)
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    out = node.type.dtype
    m, s = quantize_multiplier(multiplier(ta, tb, out))
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    req, clamp = requantise(em), clamp_to(em, out.bits)
    return c_loop(em, node, lambda a, b: f"{clamp}({req}(((int32_t){a} - {ta.zero_point}) * ((int32_t){b} - "
                                         f"{tb.zero_point}), {m}, {s}) + {out.zero_point}, {lo}, {hi})")


def _bound(call):
    """The project's fixed point: the product before its rounding shift."""
    return call.bounds[0] * call.bounds[1], call.scales[0] + call.scales[1]


register_op(OpDef(
    "tensor_mul", 2, _infer, _evaluate, {"activation": "str?"},
    "TFLite's MUL of two broadcast tensors and a fused activation; quantised: TFLite Micro's int8 kernel (the "
    "product of the operands less their zero points requantised by sa sb / so)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c_fixed, "float": c_float_arithmetic("*")},
    acc_bound=_bound, unsupported={"interval": NO_RANGES}))


@tflite_builtin("MUL", 18, options=MUL_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    if low.graph.type(low.value(ins[0])).dtype.is_integer:  # unquantised integers: in their own type
        lower_integer(low, "integer_mul", options, ins, outs, 0, "MUL")
        return
    low.add("tensor_mul", [low.value(ins[0]), low.value(ins[1])], {"activation": low.activation(options, 0, "MUL")},
            low.tensors[outs[0]])
