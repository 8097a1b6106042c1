"""gather: slices of ``params`` along ``axis`` picked by computed int32 indices (TFLite's GATHER with ``batch_dims``,
and EMBEDDING_LOOKUP); the elements copied, a quantised result keeping its input's quantisation.

Shape (TFLite Micro's GatherPrepare): params' axes before ``axis``, the indices' axes from ``batch_dims`` on, params'
axes after ``axis``; the first ``batch_dims`` axes of both index the same batch. An index outside the axis: TFLite
Micro's Invoke stops with kTfLiteError (GATHER and EMBEDDING_LOOKUP). The interpreter raises DataError (a ValueError)
naming the node and the index; the C clamps it into the axis (never a read outside the array), finishes the call and
sets its run-time fault flag, which ``int <prefix>_status(void)`` returns and clears (``run_status``).

Indices that are constants lower onto ``take`` (ir/ops/network/take.py) where ``batch_dims`` is 0.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType, integer

GATHER_OPTIONS = 23  # schema.fbs' BuiltinOptions: GatherOptions { axis, batch_dims }
INDEX = integer(32)


def _geometry(params: tuple[int, ...], indices: tuple[int, ...], axis: int, batch_dims: int):
    """(batch, outer, axis size, coordinates per batch, inner) of TFLite Micro's Gather loops."""
    return (math.prod(params[:batch_dims]), math.prod(params[batch_dims:axis]), params[axis],
            math.prod(indices[batch_dims:]), math.prod(params[axis + 1:]))


def _infer(ts, attrs, declared):
    params, indices = ts
    axis, batch_dims = int(attrs["axis"]), int(attrs["batch_dims"])
    need(0 <= axis < params.rank, f"axis {axis} of a {params.rank}-dimensional tensor")
    need(0 <= batch_dims <= axis and batch_dims < params.rank and batch_dims <= indices.rank,
         f"batch_dims {batch_dims} with axis {axis}, params of {params.rank} and indices of {indices.rank} dimensions")
    need(params.shape[:batch_dims] == indices.shape[:batch_dims],
         f"the first {batch_dims} axes of params {list(params.shape)} and indices {list(indices.shape)} differ")
    need(indices.dtype == INDEX, f"indices must be int32, got {indices.dtype}")
    need(params.dtype.is_float or (params.dtype.is_quantised and params.dtype.axis == PER_TENSOR)
         or params.dtype.is_integer, f"params must be float32 or per-tensor quantised, got {params.dtype}")
    need(declared is None or declared.dtype == params.dtype,
         f"gather copies elements: the result keeps {params.dtype}, not {declared.dtype if declared else None}")
    shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]
    return TensorType(shape, params.dtype, declared.layout if declared is not None and declared.rank == len(shape)
                      else "")


def _gathered(params, indices, attrs, where: str = "gather") -> np.ndarray:
    """Over rows: ``params`` and ``indices`` each with a leading row axis (length 1 for a constant)."""
    axis, batch_dims = int(attrs["axis"]), int(attrs["batch_dims"])
    params, indices = np.asarray(params), np.asarray(indices).astype(np.int64)
    rows = max(len(params), len(indices))
    out = []
    for r in range(rows):
        p = params[r if len(params) > 1 else 0]
        i = indices[r if len(indices) > 1 else 0]
        if attrs.get("negative"):  # ONNX's Gather: -s..-1 count from the axis's end
            i = np.where((i < 0) & (i >= -p.shape[axis]), i + p.shape[axis], i)
        outside = (i < 0) | (i >= p.shape[axis])
        if outside.any():  # TFLite Micro's Invoke returns kTfLiteError
            at = tuple(int(k) for k in np.argwhere(outside)[0])
            raise DataError(f"{where}: row {r}: index {int(i[at])} (at {list(at)} of the indices) is outside axis "
                            f"{axis} of {p.shape[axis]}: TFLite Micro's Invoke (and onnxruntime) stop with an error "
                            "there")
        batch, outer, size, coords, inner = _geometry(p.shape, i.shape, axis, batch_dims)
        source = p.reshape(batch, outer, size, inner)
        picked = np.take_along_axis(source, i.reshape(batch, 1, coords, 1), axis=2) if batch_dims else \
            source[:, :, i.reshape(-1), :]
        out.append(picked.reshape(p.shape[:axis] + i.shape[batch_dims:] + p.shape[axis + 1:]))
    return np.stack(out)


def _rows(ins, batched) -> list[np.ndarray]:
    """Each operand with a leading row axis (a constant's of length 1)."""
    return [np.asarray(v) if b else np.asarray(v)[None] for v, b in zip(ins, batched)]


def _evaluate(xs, attrs):
    params, indices = (np.asarray(v) for v in xs)
    return _gathered(params[None], indices[None], attrs)[0]


def _fixed(call):
    batched = [np.ndim(v) == t.rank + 1 for v, t in zip(call.ins, call.in_types)]
    return _gathered(*_rows(call.ins, batched), call.attrs, call.where)


def fault_flag(em) -> str:
    """The C's run-time fault flag (declared once): a node sets it where TFLite Micro's Invoke would return an
    error; ``<prefix>_status()`` returns it and clears it (the header's declaration: codegen/run_status.py)."""
    flag, status = em.sym("fault"), em.sym("status")
    em.helpers.setdefault(flag, "\n".join([
        "/* set where TFLite Micro's Invoke would stop with an error (an index outside its axis: clamped here) */",
        f"static uint8_t {flag};", "", f"int {status}(void)", "{", f"    const int fault = {flag};",
        f"    {flag} = 0;", "    return fault;", "}", ""]))
    return flag


def _c(em, node) -> list[str]:
    params_name, indices_name = node.inputs
    params, indices = em.graph.type(params_name), em.graph.type(indices_name)
    axis, batch_dims = int(node.attrs["axis"]), int(node.attrs["batch_dims"])
    batch, outer, size, coords, inner = _geometry(params.shape, indices.shape, axis, batch_dims)
    return ["{",
            f"    for (long b = 0; b < {batch}; ++b)",
            f"    for (long o = 0; o < {outer}; ++o)",
            f"    for (long c = 0; c < {coords}; ++c) {{",
            f"        int32_t at = {em.at(indices_name, f'b * {coords} + c')};",
            *([f"        if (at < 0 && at >= -{size}) at += {size};  /* ONNX: counted from the end */"]
              if node.attrs.get("negative") else []),
            f"        if (at < 0 || at > {size - 1}) {{  /* TFLite Micro stops with an error: clamped, reported */",
            f"            {fault_flag(em)} = 1;",
            f"            at = at < 0 ? 0 : {size - 1};",
            "        }",
            f"        const long from = ((b * {outer} + o) * {size} + at) * {inner};",
            f"        const long to = ((b * {outer} + o) * {coords} + c) * {inner};",
            f"        for (long e = 0; e < {inner}; ++e)",
            f"            {em.var(node.name)}[to + e] = {em.at(params_name, 'from + e')};",
            "    }",
            "}"]


register_op(OpDef(
    "gather", 2, _infer, _evaluate, {"axis": "int", "batch_dims": "int", "negative": "int?"},
    "TFLite's GATHER / EMBEDDING_LOOKUP: slices of params along axis picked by computed int32 indices (batch_dims "
    "leading axes shared; negative 1: -s..-1 count from the end, as ONNX's Gather); an index out of range an error "
    "(the C clamps it and sets its fault flag)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _gathered(*_rows(ins, batched), attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def _lower(low, params_index: int, indices_index: int, axis: int, batch_dims: int, out) -> None:
    """GATHER's nodes: constant indices with no batch axes as ``take`` (and a reshape to the indices' shape), else
    ``gather``."""
    params, indices = low.tensors[params_index], low.tensors[indices_index]
    need(indices.type_name == "int32", f"GATHER: {indices.type_name} indices (TFLite Micro takes int32)")
    if indices.data is not None:
        flat = indices.data.astype(np.int64).ravel()
        need(flat.size and int(flat.min()) >= 0 and int(flat.max()) < params.shape[axis],
             f"GATHER: indices {flat[:8].tolist()} leave axis {axis} of {params.shape[axis]} (TFLite Micro would read "
             "outside the tensor)")
    if indices.data is not None and batch_dims == 0:
        flat_shape = params.shape[:axis] + (int(flat.size),) + params.shape[axis + 1:]
        attrs = {"axis": axis, "indices": flat.tolist()}
        if flat_shape == out.shape:
            low.add("take", [low.value(params_index)], attrs, out)
            return
        taken = low.step("take", [low.value(params_index)], attrs, flat_shape, out, f"{low.name_of(out)}_taken")
        low.add("reshape", [taken], {"shape": list(out.shape)}, out)
        return
    low.add("gather", [low.value(params_index), low.value(indices_index)], {"axis": axis, "batch_dims": batch_dims},
            out)


@tflite_builtin("GATHER", 36, options=GATHER_OPTIONS, inputs=(2, 2))
def lower_gather(low, options, ins, outs) -> None:
    params = low.tensors[ins[0]]
    need(params.type_name in ("float32", "int8"), f"GATHER: {params.type_name} tensors (TFLite Micro takes float32 "
                                                  "and int8)")
    rank, index_rank = len(params.shape), len(low.tensors[ins[1]].shape)
    axis = int(options.scalar(0, "i", 0, "axis")) if options is not None else 0
    batch_dims = int(options.scalar(1, "i", 0, "batch_dims")) if options is not None else 0
    need(-rank <= axis < rank, f"GATHER: axis {axis} of a {rank}-dimensional tensor")
    need(-index_rank <= batch_dims <= index_rank, f"GATHER: batch_dims {batch_dims} of {index_rank}-dimensional "
                                                  "indices")
    _lower(low, ins[0], ins[1], axis % rank, batch_dims + index_rank if batch_dims < 0 else batch_dims,
           low.tensors[outs[0]])


@tflite_builtin("EMBEDDING_LOOKUP", 7, inputs=(2, 2))
def lower_embedding_lookup(low, options, ins, outs) -> None:
    lookup, value, out = low.tensors[ins[0]], low.tensors[ins[1]], low.tensors[outs[0]]
    need(len(lookup.shape) == 1 and lookup.type_name == "int32",
         f"EMBEDDING_LOOKUP: ids {lookup.type_name}{list(lookup.shape)} (TFLite Micro takes a 1-D int32 tensor)")
    need(len(value.shape) >= 2 and value.type_name in ("float32", "int8"),
         f"EMBEDDING_LOOKUP: a {value.type_name} table of {len(value.shape)} dimensions (float32 or int8, at least 2)")
    hybrid = value.type_name == "int8" and out.type_name == "float32"
    need(out.type_name == value.type_name or hybrid,
         f"EMBEDDING_LOOKUP: a {value.type_name} table gives {out.type_name} (float32, or int8 and float32)")
    if not hybrid:
        _lower(low, ins[1], ins[0], 0, 0, out)
        return
    need(value.zero_points.size and int(value.zero_points[0]) == 0,
         "EMBEDDING_LOOKUP: an int8 table read as float32 needs zero point 0 (TFLite Micro's Prepare)")
    shape = (lookup.shape[0],) + value.shape[1:]
    name = low.name_of(out)
    if lookup.data is not None:
        flat = lookup.data.astype(np.int64).ravel()
        need(int(flat.min(initial=0)) >= 0 and int(flat.max(initial=0)) < value.shape[0],
             f"EMBEDDING_LOOKUP: ids {flat[:8].tolist()} leave the table's {value.shape[0]} rows")
        rows = low.step("take", [low.value(ins[1])], {"axis": 0, "indices": flat.tolist()}, shape, value,
                        f"{name}_rows")
    else:
        rows = low.step("gather", [low.value(ins[1]), low.value(ins[0])], {"axis": 0, "batch_dims": 0}, shape, value,
                        f"{name}_rows")
    low.add("dequantize", [rows], {}, out)
