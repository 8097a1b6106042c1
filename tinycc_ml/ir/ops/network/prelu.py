"""PRELU: x where x >= 0, else alpha x, alpha a constant broadcast against x (one slope per channel: PyTorch's
nn.PReLU). Float: the float32 product. Fixed point (fx, the project's dialect): alpha at fx8 / fx16 of its own
scale sa, a negative x's product rounded right by sa back to x's scale (halves up), saturated; the input's type
kept. TFLite's int8 PRELU (its two requantisations) is not implemented: a quantised operand is refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.c_primitives import clamp_to
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, with_rows
from tinycc_ml.ir.ops.pow2_arith import MAX_SHIFT
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.windows import network_result


def _infer(ts, attrs, declared):
    x, alpha = ts
    need(not x.dtype.is_quantised, "prelu has no form for TFLite's quantised tensors here: compile the network at "
                                   "float or in the project's fixed point")
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
    negative = saturate(rshift(check32(x * alpha, call.where), call.in_types[1].dtype.scale), call.bits)
    return np.where(x >= 0, x, negative)


def _c_fixed(em, node) -> list[str]:
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
