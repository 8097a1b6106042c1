"""LOGICAL_AND and LOGICAL_OR of two broadcast bool tensors (TFLite Micro's logical.cc: BinaryFunction, or
BroadcastBinaryFunction4DSlow where the shapes differ: at most 4 dimensions)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, rows_aligned, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import BOOL, TensorType

OPERATIONS = {"and": (np.logical_and, "&&"), "or": (np.logical_or, "||")}
BROADCAST_RANK = 4


def _infer(ts, attrs, declared):
    which = attrs["which"]
    need(which in OPERATIONS, f"which {which!r}: and or or")
    a, b = ts
    need(a.dtype == b.dtype == BOOL, f"logical {which} takes bool operands, got {a.dtype} and {b.dtype}")
    shape = broadcast_shape(a.shape, b.shape, f"logical {which}")
    need(a.shape == b.shape or len(shape) <= BROADCAST_RANK,
         f"logical {which}: broadcasting over {len(shape)} dimensions (TFLite Micro broadcasts up to {BROADCAST_RANK})")
    need(declared is None or declared.dtype == BOOL, f"logical {which} gives bool, not {declared}")
    return TensorType(shape, BOOL, a.layout if a.rank >= b.rank else b.layout)


def _evaluate(xs, attrs):
    return OPERATIONS[attrs["which"]][0](np.asarray(xs[0]) != 0, np.asarray(xs[1]) != 0).astype(np.float64)


def _fixed(call):
    a, b = with_rows_aligned(call.ins, call.in_types)
    return OPERATIONS[call.attrs["which"]][0](a != 0, b != 0).astype(np.int64)


def _c(em, node) -> list[str]:
    symbol = OPERATIONS[node.attrs["which"]][1]
    return c_loop(em, node, lambda a, b: f"({a} {symbol} {b})")


register_op(OpDef(
    "logical", 2, _infer, _evaluate, {"which": "str"},
    "TFLite's LOGICAL_AND / LOGICAL_OR (which: and, or) of two broadcast bool tensors",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("LOGICAL_AND", 86, inputs=(2, 2))
def lower_and(low, options, ins, outs) -> None:
    low.add("logical", [low.value(ins[0]), low.value(ins[1])], {"which": "and"}, low.tensors[outs[0]])


@tflite_builtin("LOGICAL_OR", 84, inputs=(2, 2))
def lower_or(low, options, ins, outs) -> None:
    low.add("logical", [low.value(ins[0]), low.value(ins[1])], {"which": "or"}, low.tensors[outs[0]])
