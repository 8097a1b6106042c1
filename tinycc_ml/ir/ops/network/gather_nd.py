"""gather_nd: slices of ``params`` picked by int32 coordinate tuples (TFLite's GATHER_ND).

TFLite Micro's kernel (gather_nd.cc): the indices' last axis holds ``nd`` (<= 5, <= params' rank) coordinates; the
output is the indices' other axes then params' axes from ``nd`` on. Each slice starts at the flat position
sum(index[j] x product of params' axes after j), so a coordinate may pass its own axis as long as the flat slice stays
inside params; where it does not, TFLite Micro's Invoke stops with an error: here the interpreter raises DataError
naming the node and the slice's start, and the C clamps the start into params and reports it in ``<prefix>_status()``
(gather.py's ``fault_flag``). Constant indices are checked when the model is read.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.gather import INDEX, fault_flag
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

MAX_ND = 5  # MAX_INDICES_ND


def geometry(params: tuple[int, ...], indices: tuple[int, ...]) -> tuple[int, int, list[int], int]:
    """(slices, coordinates per slice, the flat step of each coordinate, slice size)."""
    nd = indices[-1]
    steps = [math.prod(params[j + 1:]) for j in range(nd)]
    return math.prod(indices[:-1]), nd, steps, math.prod(params[nd:])


def _infer(ts, attrs, declared):
    params, indices = ts
    need(params.rank >= 1 and indices.rank >= 1, "params and indices must be at least vectors")
    need(indices.dtype == INDEX, f"indices must be int32 (TFLite Micro's kernel), got {indices.dtype}")
    nd = indices.shape[-1]
    need(nd <= params.rank, f"{nd} coordinates per index for params of {params.rank} dimensions")
    need(nd <= MAX_ND, f"{nd} coordinates per index (TFLite Micro takes at most {MAX_ND})")
    need(params.dtype.is_float or (params.dtype.is_quantised and params.dtype.bits == 8
                                   and params.dtype.axis == PER_TENSOR),
         f"params must be float32 or per-tensor int8 (TFLite Micro's kernel), got {params.dtype}")
    shape = indices.shape[:-1] + params.shape[nd:]
    return TensorType(shape, params.dtype, "")


def _gathered(params, indices, where: str = "gather_nd (GATHER_ND)") -> np.ndarray:
    """Over rows: ``params`` and ``indices`` each with a leading row axis (length 1 for a constant)."""
    rows = max(len(params), len(indices))
    out = []
    for r in range(rows):
        p = np.asarray(params[r if len(params) > 1 else 0])
        i = np.asarray(indices[r if len(indices) > 1 else 0]).astype(np.int64)
        slices, nd, steps, size = geometry(p.shape, i.shape)
        starts = i.reshape(slices, nd) @ np.asarray(steps, dtype=np.int64) if nd else np.zeros(slices, np.int64)
        outside = (starts < 0) | (starts > p.size - size)
        if outside.any():  # TFLite Micro's Invoke returns kTfLiteError
            k = int(np.argmax(outside))
            raise DataError(f"{where}: row {r}: index {i.reshape(slices, nd)[k].tolist()} (slice {k}) starts at "
                            f"{int(starts[k])}, outside params' {p.size} elements for a slice of {size}: TFLite "
                            "Micro's Invoke stops with an error there")
        flat = p.reshape(-1)
        out.append(np.stack([flat[s:s + size] for s in starts]).reshape(i.shape[:-1] + p.shape[nd:]))
    return np.stack(out)


def _rows(ins, batched) -> list[np.ndarray]:
    return [np.asarray(v) if b else np.asarray(v)[None] for v, b in zip(ins, batched)]


def _evaluate(xs, attrs):
    return _gathered(np.asarray(xs[0])[None], np.asarray(xs[1])[None])[0]


def _fixed(call):
    batched = [np.ndim(v) == t.rank + 1 for v, t in zip(call.ins, call.in_types)]
    return _gathered(*_rows(call.ins, batched), call.where)


def _c(em, node) -> list[str]:
    params_name, indices_name = node.inputs
    params, indices = em.graph.type(params_name), em.graph.type(indices_name)
    slices, nd, steps, size = geometry(params.shape, indices.shape)
    start = " + ".join(f"(long){em.at(indices_name, f's * {nd} + {j}')} * {step}" for j, step in enumerate(steps))
    return ["{",
            f"    for (long s = 0; s < {slices}; ++s) {{",
            f"        long from = {start or '0'};",
            f"        if (from < 0 || from > {params.size - size}) {{  /* TFLite Micro stops with an error: clamped, "
            "reported */",
            f"            {fault_flag(em)} = 1;",
            f"            from = from < 0 ? 0 : {params.size - size};",
            "        }",
            f"        for (long e = 0; e < {size}; ++e)",
            f"            {em.var(node.name)}[s * {size} + e] = {em.at(params_name, 'from + e')};",
            "    }",
            "}"]


register_op(OpDef(
    "gather_nd", 2, _infer, _evaluate, {},
    "TFLite's GATHER_ND: slices of params picked by int32 coordinate tuples (the indices' last axis); a slice "
    "outside params an error (the C clamps it and sets its fault flag)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _gathered(*_rows(ins, batched)),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("GATHER_ND", 107, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    params, indices = low.tensors[ins[0]], low.tensors[ins[1]]
    need(indices.type_name == "int32", f"GATHER_ND: {indices.type_name} indices (TFLite Micro takes int32)")
    if indices.data is not None and indices.shape:
        _, nd, steps, size = geometry(params.shape, indices.shape)
        starts = indices.data.astype(np.int64).reshape(-1, max(nd, 1))[:, :nd] @ np.asarray(steps, dtype=np.int64)
        bad = [int(s) for s in np.atleast_1d(starts) if not 0 <= s <= math.prod(params.shape) - size]
        need(not bad, f"GATHER_ND: a slice at flat position {bad[:1]} leaves params of shape {list(params.shape)} "
                      "(TFLite Micro stops with an error)")
    low.add("gather_nd", [low.value(ins[0]), low.value(ins[1])], {}, low.tensors[outs[0]])
