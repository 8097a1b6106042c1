"""PRELU: x where x >= 0, else alpha x, alpha a constant broadcast against x (one slope per channel: PyTorch's
nn.PReLU). Float: the float32 product. Fixed point (fx, the project's dialect): alpha at fx8 / fx16 of its own
scale sa, a negative x's product rounded right by sa back to x's scale (halves up), saturated; the input's type
kept. TFLite's int8 and int16 PRELU (TFLite Micro's BroadcastPrelu4DSlow): the input less its zero point,
requantised by input scale / output scale where it is >= 0, else its product with the slope less the slope's zero
point requantised by input scale x slope scale / output scale; plus the output's zero point, clamped. The slope is
int8 (TFLite Micro requires it for int16 inputs too).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, with_rows
from tinycc_ml.ir.ops.pow2_arith import MAX_SHIFT
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier
from tinycc_ml.ir.ops.windows import check_requantisation, network_result, quantised_operand


def multipliers(x_dtype, alpha_dtype, out_dtype) -> tuple[tuple[int, int], tuple[int, int]]:
    """TFLite Micro's CalculatePreluParams: input / output and input x slope / output scales, in double."""
    x, a, y = (float(d.qscales[0]) for d in (x_dtype, alpha_dtype, out_dtype))
    return quantize_multiplier(x / y), quantize_multiplier(x * a / y)


def _infer(ts, attrs, declared):
    x, alpha = ts
    if x.dtype.is_quantised:
        need(broadcast_shape(x.shape, alpha.shape, "prelu") == x.shape, f"a slope of shape {list(alpha.shape)} for "
             f"an input of shape {list(x.shape)}")
        need(x.dtype.bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
        quantised_operand(x, "input", x.dtype.bits)
        quantised_operand(alpha, "slope", 8)
        result = network_result(x, declared, x.shape, x.layout, x.dtype.bits)
        quantised_operand(result, "result", x.dtype.bits)
        check_requantisation([x.dtype.qscales[0] / result.dtype.qscales[0],
                              x.dtype.qscales[0] * alpha.dtype.qscales[0] / result.dtype.qscales[0]], "prelu")
        return result
    need(broadcast_shape(x.shape, alpha.shape, "prelu") == x.shape, f"a slope of shape {list(alpha.shape)} for an "
                                                                     f"input of shape {list(x.shape)}")
    need(x.dtype.kind == alpha.dtype.kind, f"operands mix {x.dtype} and {alpha.dtype}")
    if x.dtype.is_fixed:
        need(alpha.dtype.bits == x.dtype.bits and 0 <= alpha.dtype.scale <= MAX_SHIFT,
             f"the slope must be fx{x.dtype.bits} at a scale in [0, {MAX_SHIFT}], got {alpha.dtype}")
        return network_result(x, declared if declared is not None else x, x.shape, x.layout)
    return network_result(x, declared, x.shape, x.layout)


def _evaluate(xs, attrs):
    x = np.asarray(xs[0], dtype=np.float32)
    return np.where(x >= 0, x, x * np.asarray(xs[1], dtype=np.float32))


def _fixed(call: FixedCall):
    x, alpha = with_rows([np.asarray(v, dtype=np.int64) for v in call.ins], call.in_types)
    if call.in_types[0].dtype.is_quantised:
        xt, at, out = call.in_types[0].dtype, call.in_types[1].dtype, call.type.dtype
        (m1, s1), (m2, s2) = multipliers(xt, at, out)
        v = x - xt.zero_point
        y = np.where(v >= 0, multiply_by_quantized_multiplier(v, m1, s1),
                     multiply_by_quantized_multiplier(v * (alpha - at.zero_point), m2, s2))
        return np.clip(y + out.zero_point, *out.integer_range)
    negative = saturate(rshift(check32(x * alpha, call.where), call.in_types[1].dtype.scale), call.bits)
    return np.where(x >= 0, x, negative)


def _c_quantised(em, node) -> list[str]:
    xt, at = (em.graph.type(n).dtype for n in node.inputs)
    out = node.type.dtype
    (m1, s1), (m2, s2) = multipliers(xt, at, out)
    req, clamp = requantise(em), clamp_to(em, out.bits)
    lo, hi = out.integer_range

    def element(x, alpha):
        v = f"((int32_t){x} - {xt.zero_point})"
        below = f"{req}({v} * ((int32_t){alpha} - {at.zero_point}), {m2}, {s2})"
        return f"{clamp}(({v} >= 0 ? {req}({v}, {m1}, {s1}) : {below}) + {out.zero_point}, {lo}, {hi})"

    return c_loop(em, node, element)


def _c_fixed(em, node) -> list[str]:
    if node.type.dtype.is_quantised:
        return _c_quantised(em, node)
    shift = em.graph.type(node.inputs[1]).dtype.scale
    bits = node.type.dtype.bits
    top = 2 ** (bits - 1) - 1
    clamp = clamp_to(em, bits)

    def element(x, alpha):
        product = f"((int32_t){x} * (int32_t){alpha})"
        # arith.rshift, halves up: |x alpha| <= 2^30, so the rounding constant cannot overflow
        shifted = f"(({product} + INT32_C({1 << (shift - 1)})) >> {shift})" if shift else product
        return f"({x} >= 0 ? {x} : {clamp}({shifted}, INT32_C({-top - 1}), INT32_C({top})))"

    return c_loop(em, node, element)


register_op(OpDef(
    "prelu", 2, _infer, _evaluate, {},
    "TFLite's PRELU: x >= 0 ? x : alpha x, the slope broadcast (PyTorch's nn.PReLU); fixed point: the product "
    "rounded back to the input's scale, saturated, the input's type kept",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs),
    fixed=_fixed,
    c={"fixed": _c_fixed, "float": lambda em, node: c_loop(em, node, lambda x, a: f"({x} >= 0.0f ? {x} : {x} * {a})")},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("PRELU", 54, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    x, alpha = low.tensors[ins[0]], low.tensors[ins[1]]
    need(x.type_name in ("float32", "int8", "int16"), f"PRELU: {x.type_name} tensors")
    need(x.type_name == "float32" or alpha.type_name == "int8",
         f"PRELU: a {alpha.type_name} slope for {x.type_name} inputs (TFLite Micro takes int8 slopes)")
    need(len(alpha.shape) <= 4 and len(x.shape) <= 4, "PRELU: tensors of at most 4 dimensions (TFLite Micro's)")
    low.add("prelu", [low.value(ins[0]), low.value(ins[1], "")], {}, low.tensors[outs[0]])
