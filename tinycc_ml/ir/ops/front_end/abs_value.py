"""abs: |x| of every element. Fixed point: |q| brought to the result's scale (rounding right shift or left shift),
saturated to 16 bits (|-32768| saturates)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.front_end.common import infer_same_shape
from tinycc_ml.ir.ops.registry import OpDef, register_op


def _interval(attrs, ivs, shape):
    lo, hi = ivs[0]
    top = np.maximum(np.abs(lo), np.abs(hi))
    return np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi))), top


def _fixed(call):
    return saturate(rshift(np.abs(call.ins[0]), call.in_scale(0) - call.scale), call.bits)


register_op(OpDef(
    "abs", 1, infer_same_shape, lambda xs, attrs: np.abs(xs[0]), {},
    "|x| of every element; fixed point: |q| at the result's scale, saturated",
    evaluate_rows=lambda ins, batched, attrs, n, rank: np.abs(ins[0]),
    fixed=_fixed, interval=_interval,
    acc_bound=lambda call: (call.bounds[0], call.scales[0])))
