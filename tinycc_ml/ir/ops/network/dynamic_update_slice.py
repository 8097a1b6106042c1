"""dynamic_update_slice: ``operand`` with the block ``update`` written at ``start`` (TFLite's DYNAMIC_UPDATE_SLICE:
a stream's buffer written at a computed position, a KV cache).

TFLite Micro's kernel (dynamic_update_slice.cc): the start (int32 or int64, one per axis) clamped into [0, operand
axis - update axis] axis by axis; stored values copied whatever the quantisation says (types must match); an update
as large as the operand replaces it whole.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType


def _infer(ts, attrs, declared):
    operand, update, start = ts
    need(operand.dtype.kind == update.dtype.kind and operand.dtype.bits == update.dtype.bits,
         f"operand and update must have one element type, got {operand.dtype} and {update.dtype}")
    need(operand.dtype.is_float or operand.dtype.is_quantised or operand.dtype.is_integer,
         f"operand must be float32 or integers, got {operand.dtype}")
    need(update.rank == operand.rank and all(u <= o for u, o in zip(update.shape, operand.shape)),
         f"an update of shape {list(update.shape)} for an operand of shape {list(operand.shape)}")
    need(start.dtype.is_integer and start.dtype.bits in (32, 64) and start.shape == (operand.rank,),
         f"start must hold {operand.rank} int32 or int64 values, got {start}")
    return TensorType(operand.shape, operand.dtype, operand.layout)


def _updated(operand, update, start) -> np.ndarray:
    """Over rows: each operand with a leading row axis (length 1 for a constant)."""
    rows = max(len(operand), len(update), len(start))
    out = []
    for r in range(rows):
        o = np.array(operand[r if len(operand) > 1 else 0])
        u = np.asarray(update[r if len(update) > 1 else 0])
        s = np.asarray(start[r if len(start) > 1 else 0]).astype(np.int64)
        at = [int(min(max(0, s[d]), o.shape[d] - u.shape[d])) for d in range(o.ndim)]
        o[tuple(slice(a, a + n) for a, n in zip(at, u.shape))] = u
        out.append(o)
    return np.stack(out)


def _rows(ins, batched) -> list[np.ndarray]:
    return [np.asarray(v) if b else np.asarray(v)[None] for v, b in zip(ins, batched)]


def _evaluate(xs, attrs):
    return _updated(*(np.asarray(v)[None] for v in xs))[0]


def _fixed(call):
    batched = [np.ndim(v) == t.rank + 1 for v, t in zip(call.ins, call.in_types)]
    return _updated(*_rows(call.ins, batched))


def _c(em, node) -> list[str]:
    operand_name, update_name, start_name = node.inputs
    operand, update = em.graph.type(operand_name), em.graph.type(update_name)
    y = em.var(node.name)
    if operand.size == update.size:  # TFLite Micro copies the update whole (the operand unread)
        return [f"(void)({em.var(operand_name)});", f"for (long i = 0; i < {update.size}; ++i)",
                f"    {y}[i] = {em.at(update_name, 'i')};"]
    lines = ["{", f"    long start[{operand.rank}];",
             f"    for (long i = 0; i < {operand.size}; ++i)",  # in place (the alias rule): copies onto itself
             f"        {y}[i] = {em.at(operand_name, 'i')};"]
    for d in range(operand.rank):
        top = operand.shape[d] - update.shape[d]
        lines += [f"    start[{d}] = (long){em.at(start_name, str(d))};",
                  f"    if (start[{d}] < 0) start[{d}] = 0;",
                  f"    if (start[{d}] > {top}) start[{d}] = {top};"]
    steps = [int(np.prod(operand.shape[d + 1:])) for d in range(operand.rank)]
    ustep = [int(np.prod(update.shape[d + 1:])) for d in range(update.rank)]
    loops = [f"    for (long k{d} = 0; k{d} < {update.shape[d]}; ++k{d})" for d in range(update.rank)]
    to = " + ".join(f"(start[{d}] + k{d}) * {steps[d]}" for d in range(operand.rank))
    source = " + ".join(f"k{d} * {ustep[d]}" for d in range(update.rank))
    return [*lines, *loops, f"        {y}[{to}] = {em.at(update_name, source)};", "}"]


def _alias(graph, node) -> dict[str, int]:
    """The result may be written over the operand it copies (the update lands where it is read from nowhere else)."""
    return {node.inputs[0]: 0}


register_op(OpDef(
    "dynamic_update_slice", 3, _infer, _evaluate, {},
    "TFLite's DYNAMIC_UPDATE_SLICE: the operand with the update written at the start (clamped axis by axis into the "
    "operand), stored values copied",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _updated(*_rows(ins, batched)), alias=_alias,
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("DYNAMIC_UPDATE_SLICE", 151, inputs=(3, 3))
def lower_tflite(low, options, ins, outs) -> None:
    start = low.tensors[ins[2]]
    need(start.type_name in ("int32", "int64"), f"DYNAMIC_UPDATE_SLICE: {start.type_name} start indices (TFLite Micro "
                                                "takes int32 and int64)")
    low.add("dynamic_update_slice", [low.value(i) for i in ins], {}, low.tensors[outs[0]])
