"""SELECT_V2: elementwise ``condition ? x : y`` over three broadcast tensors (``condition`` bool).

TFLite Micro's kernel (select.cc) copies the stored values of x or y whatever their quantisation (x and y of one
element type: float32, int8 or int16; the output takes x's type), broadcasting up to 5 dimensions. Operands of
different quantisations would mix codes of different meanings: the converter writes one; here they must agree with
the output's, else refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, rows_aligned, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType

BROADCAST_RANK = 5  # BroadcastSelect5DSlow


def _infer(ts, attrs, declared):
    condition, x, y = ts
    need(condition.dtype.kind == "bool", f"the condition must be bool, got {condition.dtype}")
    need(x.dtype == y.dtype, f"x and y must be of one element type and quantisation, got {x.dtype} and {y.dtype}")
    need(x.dtype.is_float or (x.dtype.is_quantised and x.dtype.bits in (8, 16) and x.dtype.axis < 0),
         f"x and y must be float32, int8 or int16 (TFLite Micro's kernel), got {x.dtype}")
    shape = broadcast_shape(broadcast_shape(condition.shape, x.shape, "select"), y.shape, "select")
    need(len(shape) <= BROADCAST_RANK or condition.shape == x.shape == y.shape,
         f"select: broadcasting over {len(shape)} dimensions (TFLite Micro broadcasts up to {BROADCAST_RANK})")
    need(declared is None or declared.dtype == x.dtype,
         f"the result copies x's and y's values: it must be {x.dtype}, not {declared.dtype if declared else None}")
    widest = max(ts, key=lambda t: t.rank)
    return TensorType(shape, x.dtype, widest.layout)


def _evaluate(xs, attrs):
    condition, x, y = (np.asarray(v) for v in xs)
    return np.where(condition != 0, x, y)


def _fixed(call):
    condition, x, y = with_rows_aligned(call.ins, call.in_types)
    return np.where(condition != 0, x, y)


def _c(em, node) -> list[str]:
    # through a function, whose arguments are read before the choice: gcc 12 -O3 -march=native vectorises
    # "c ? x[i] : y[j]" in these loops with masked loads that give 0.0 where the mask is set (measured)
    ctype = "float" if node.type.dtype.is_float else f"int{node.type.dtype.bits}_t"
    pick = c_helper(em, f"select_{ctype.replace('_t', '')}", f"""\
static inline {ctype} @select_{ctype.replace('_t', '')}(uint8_t condition, {ctype} x, {ctype} y)
{{
    return condition ? x : y;
}}
""")
    return c_loop(em, node, lambda condition, x, y: f"{pick}({condition}, {x}, {y})")


register_op(OpDef(
    "select", 3, _infer, _evaluate, {},
    "TFLite's SELECT_V2: condition ? x : y elementwise over three broadcast tensors (the stored values copied)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("SELECT_V2", 123, inputs=(3, 3))
def lower_tflite(low, options, ins, outs) -> None:
    low.add("select", [low.value(i) for i in ins], {}, low.tensors[outs[0]])
