"""LOGICAL_NOT of a bool tensor (TFLite Micro's elementwise.cc: ``!x`` element by element)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import BOOL, TensorType


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.dtype == BOOL, f"logical not takes a bool operand, got {x.dtype}")
    need(declared is None or declared.dtype == BOOL, f"logical not gives bool, not {declared}")
    return TensorType(x.shape, BOOL, x.layout)


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    return [f"for (long i = 0; i < {node.type.size}; ++i)", f"    {em.var(node.name)}[i] = !{em.at(x, 'i')};"]


register_op(OpDef(
    "logical_not", 1, _infer, lambda xs, attrs: (np.asarray(xs[0]) == 0).astype(np.float64), {},
    "TFLite's LOGICAL_NOT of a bool tensor",
    evaluate_rows=lambda ins, batched, attrs, n, rank: (np.asarray(ins[0]) == 0).astype(np.float64),
    fixed=lambda call: (np.asarray(call.ins[0]) == 0).astype(np.int64), c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("LOGICAL_NOT", 87, inputs=(1, 1))
def lower_tflite(low, options, ins, outs) -> None:
    low.add("logical_not", [low.value(ins[0])], {}, low.tensors[outs[0]])
