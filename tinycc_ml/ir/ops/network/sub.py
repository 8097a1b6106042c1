"""SUB: the elementwise difference of two broadcast tensors (``broadcast``) and a fused activation.

Float: TFLite's float32 difference, clamped by the activation. int8: TFLite Micro's quantised SUB: each operand
less its zero point, shifted left 20 bits (int16: 15), rescaled by its multiplier (its scale over twice the larger input
scale), the difference rescaled to the output's scale, plus its zero point, clamped: ADD's arithmetic and
multipliers (``tensor_elementwise``), the second operand subtracted. A ratio of scales that makes the output
multiplier 1 or more stops TFLite Micro (QuantizeMultiplierSmallerThanOneExp's check): refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import rshift_bound
from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import (
    binary_result,
    c_float_arithmetic,
    c_loop,
    c_pow2,
    pow2_fixed,
    pow2_shifts,
    rows_aligned,
    with_rows_aligned,
)
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tensor_elementwise import add_left_shift, add_multipliers, add_reals
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    activation_range,
    apply_activation,
    multiply_by_quantized_multiplier,
    wrap32,
)

SUB_OPTIONS = 28  # schema.fbs' BuiltinOptions: SubOptions { fused_activation_function, pot_scale_int16 }


def _infer(ts, attrs, declared):
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    result = binary_result(ts, declared, "tensor_sub")
    if result.dtype.is_quantised:
        # ADD's multipliers, in double (what tflite-micro computes; the sources' float32 arithmetic for SUB is not
        # what its package runs)
        reals = add_reals(ts[0].dtype.qscales[0], ts[1].dtype.qscales[0], result.dtype.qscales[0],
                          add_left_shift(result.dtype.bits))
        shown = ", ".join(f"{r:.3g}" for r in reals)
        need(all(0.0 < r < 1.0 for r in reals), f"the scales give SUB multipliers {shown}; TFLite Micro needs each "
                                                "in (0, 1) (the output's scale is too fine)")
    return result


def parameters(a, b, out) -> list[tuple[int, int]]:
    return add_multipliers(a.qscales[0], b.qscales[0], out.qscales[0], add_left_shift(out.bits))


def _evaluate(xs, attrs):
    difference = np.asarray(xs[0], dtype=np.float32) - np.asarray(xs[1], dtype=np.float32)
    return apply_activation(difference, attrs.get("activation", "none"))


def _fixed(call: FixedCall):
    if call.type.dtype.is_fixed:
        return pow2_fixed(call, "tensor_sub", lambda a, b: a - b)
    (ta, tb), out = call.in_types, call.type.dtype
    a, b = with_rows_aligned(call.ins, call.in_types)  # a constant of more axes than the rows aligned
    (ma, sa), (mb, sb), (mo, so) = parameters(ta.dtype, tb.dtype, out)
    left_shift = add_left_shift(out.bits)
    scaled_a = multiply_by_quantized_multiplier((a - ta.dtype.zero_point) << left_shift, ma, sa)
    scaled_b = multiply_by_quantized_multiplier((b - tb.dtype.zero_point) << left_shift, mb, sb)
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    raw = multiply_by_quantized_multiplier(wrap32(scaled_a - scaled_b), mo, so) + out.zero_point
    return np.clip(raw, lo, hi)


def _c_fixed(em, node) -> list[str]:
    if node.type.dtype.is_fixed:
        return c_pow2(em, node, lambda a, b: f"({a} - {b})")
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    out = node.type.dtype
    (ma, sa), (mb, sb), (mo, so) = parameters(ta, tb, out)
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    req, clamp = requantise(em), clamp_to(em, out.bits)
    unit = 1 << add_left_shift(out.bits)

    def element(a, b):
        scaled_a = f"{req}(((int32_t){a} - {ta.zero_point}) * {unit}, {ma}, {sa})"
        scaled_b = f"{req}(((int32_t){b} - {tb.zero_point}) * {unit}, {mb}, {sb})"
        return f"{clamp}({req}({scaled_a} - {scaled_b}, {mo}, {so}) + {out.zero_point}, {lo}, {hi})"

    return c_loop(em, node, element)


def _bound(call):
    """The project's fixed point: both operands rounded to the result's scale, then subtracted."""
    shifts = pow2_shifts("tensor_sub", call.scales, call.out_scale)
    return sum(rshift_bound(b, k) for b, k in zip(call.bounds, shifts)), call.out_scale


register_op(OpDef(
    "tensor_sub", 2, _infer, _evaluate, {"activation": "str?"},
    "TFLite's SUB of two broadcast tensors and a fused activation; quantised: TFLite Micro's int8 kernel (each "
    "operand rescaled to a common scale, the difference rescaled to the output's)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c_fixed, "float": c_float_arithmetic("-")},
    acc_bound=_bound, unsupported={"interval": NO_RANGES}))


@tflite_builtin("SUB", 41, options=SUB_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    low.add("tensor_sub", [low.value(ins[0]), low.value(ins[1])], {"activation": low.activation(options, 0, "SUB")},
            low.tensors[outs[0]])
