"""STRIDED_SLICE and SLICE: a box of a tensor, every ``stride``-th element per axis from ``begin`` (``count`` of them),
the axes a mask shrinks dropped: one op, ``strided_slice``, with the indices resolved at compile time.

The indices are TFLite's: for STRIDED_SLICE, TFLite Micro's Eval (``StridedSliceStartForAxis`` / ``EndForAxis``: a
negative index counts from the end, clamped to the axis, the begin and end masks take the whole axis, a shrunk axis
is one element) and its Prepare's output shape (``StartForAxis`` / ``StopForAxis``) must agree with the file's
declared shape; the masks TFLite Micro ignores (ellipsis, new axis, offset) are refused rather than ignored. For
SLICE: ``begin`` and ``size`` (-1: to the end). The elements are copied as stored, so a quantised result keeps its
input's quantisation (another one is refused, as for RESHAPE).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

STRIDED_SLICE_OPTIONS = 32  # schema.fbs' BuiltinOptions: StridedSliceOptions
MAX_RANK = 4  # TFLite Micro's StridedSlice takes 1 to 4 dimensions
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)


def _axes(attrs: dict, rank: int) -> list[tuple[int, int, int]]:
    begin, stride, count = (list(map(int, attrs[k])) for k in ("begin", "stride", "count"))
    need(len(begin) == len(stride) == len(count) == rank,
         f"begin, stride and count need one entry per axis ({rank}), got {len(begin)}, {len(stride)}, {len(count)}")
    return list(zip(begin, stride, count))


def _infer(ts, attrs, declared):
    (x,) = ts
    shape = tuple(int(d) for d in attrs["shape"])
    axes = _axes(attrs, x.rank)
    for k, (b, s, c) in enumerate(axes):
        need(s != 0 and c >= 0, f"axis {k}: stride {s}, count {c}")
        need(c == 0 or (0 <= b < x.shape[k] and 0 <= b + (c - 1) * s < x.shape[k]),
             f"axis {k}: {c} elements from {b} by {s} leave the axis of {x.shape[k]}")
    need(math.prod(shape) == math.prod(c for *_, c in axes) and all(d >= 1 for d in shape),
         f"shape {list(shape)} does not hold the {math.prod(c for *_, c in axes)} elements sliced")
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be sliced")
    need(not x.dtype.is_quantised or declared is None or declared.dtype == x.dtype,
         f"a slice keeps its input's quantisation {x.dtype} (TFLite copies the integers), the result declares "
         f"{declared.dtype if declared is not None else None}")
    return TensorType(shape, x.dtype, declared.layout if declared is not None else "")


def sliced(value: np.ndarray, attrs: dict) -> np.ndarray:
    """The slice of ``value`` (any leading row axes kept)."""
    rank = len(attrs["begin"])
    lead = value.ndim - rank
    for k, (b, s, c) in enumerate(_axes(attrs, rank)):
        value = np.take(value, b + s * np.arange(c), axis=lead + k)
    return value.reshape(*value.shape[:lead], *(int(d) for d in attrs["shape"]))


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    axes = _axes(node.attrs, x.rank)
    steps = [math.prod(x.shape[k + 1:]) for k in range(x.rank)]
    lines, indent = ["{", "    long o = 0;"], "    "
    for k, (_, _, c) in enumerate(axes):
        lines.append(f"{indent}for (long d{k} = 0; d{k} < {c}; ++d{k})")
        indent += "    "
    base = sum(b * step for (b, _, _), step in zip(axes, steps))
    offset = " + ".join([str(base)] + [f"d{k} * {s * step}" for k, ((_, s, _), step) in enumerate(zip(axes, steps))])
    lines += [f"{indent}{em.var(node.name)}[o++] = {em.at(x_name, offset)};", "}"]
    return lines


register_op(OpDef(
    "strided_slice", 1, _infer, lambda xs, a: sliced(np.asarray(xs[0]), a),
    {"begin": "ints", "stride": "ints", "count": "ints", "shape": "ints"},
    "TFLite's STRIDED_SLICE and SLICE: per axis ``count`` elements from ``begin`` by ``stride`` (indices resolved at "
    "compile time), in ``shape``; quantised: the same integers",
    evaluate_rows=lambda ins, batched, attrs, n, rank: sliced(ins[0], attrs),
    fixed=lambda call: sliced(call.ins[0], call.attrs), c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def _clamp(v: int, lo: int, hi: int) -> int:
    return hi if hi < v else (lo if v < lo else v)


def _eval_bounds(size: int, begin: int, end: int, stride: int, begin_mask: bool, end_mask: bool, shrink: bool):
    """TFLite Micro's Eval: StridedSliceStartForAxis and StridedSliceEndForAxis."""
    start = begin + size if begin < 0 else begin
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if begin_mask:
        start = 0 if stride > 0 else size - 1
    if shrink:
        return start, (start if start >= size else start + 1)
    stop = end + size if end < 0 else end
    stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    if end_mask:
        stop = size if stride > 0 else -1
    return start, stop


def _prepare_count(size: int, begin: int, end: int, stride: int, begin_mask: bool, end_mask: bool,
                   shrink: bool) -> int:
    """TFLite Micro's Prepare: StartForAxis and StopForAxis, then ceil((stop - start) / stride)."""
    if size == 0:
        return 0
    start = (INT_MIN if stride > 0 else INT_MAX) if begin_mask else begin
    start = start + size if start < 0 else start
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if shrink:
        stop = start + 1
    else:
        stop = (INT_MAX if stride > 0 else INT_MIN) if end_mask else end
        stop = stop + size if stop < 0 else stop
        stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    return max(0, math.ceil((stop - start) / stride))


@tflite_builtin("STRIDED_SLICE", 45, options=STRIDED_SLICE_OPTIONS, inputs=(4, 4))
def lower_strided_slice(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    rank = len(x.shape)
    need(1 <= rank <= MAX_RANK, f"STRIDED_SLICE: an input of {rank} dimensions (TFLite Micro takes 1 to {MAX_RANK})")
    begin, end, strides = (low.ints(i, "STRIDED_SLICE", what).ravel().tolist()
                           for i, what in zip(ins[1:], ("begin", "end", "strides")))
    need(len(begin) == len(end) == len(strides) == rank,
         f"STRIDED_SLICE: begin, end and strides of {len(begin)}, {len(end)}, {len(strides)} values for {rank} axes")
    fields = {name: (options.scalar(i, "i", 0, name) if options is not None else 0)
              for i, name in enumerate(("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                        "shrink_axis_mask"))}
    offset = bool(options.scalar(5, "B", 0, "offset")) if options is not None else False
    need(not fields["ellipsis_mask"] and not fields["new_axis_mask"] and not offset,
         "STRIDED_SLICE: ellipsis_mask, new_axis_mask and offset are ignored by TFLite Micro: a file that sets them "
         "is refused")
    axes, prepared = [], []
    for k in range(rank):
        need(strides[k] != 0, f"STRIDED_SLICE: stride 0 on axis {k}")
        masks = [bool(fields[m] >> k & 1) for m in ("begin_mask", "end_mask", "shrink_axis_mask")]
        start, stop = _eval_bounds(int(x.shape[k]), begin[k], end[k], strides[k], *masks)
        count = len(range(start, stop, strides[k]))
        axes.append((start if count else 0, strides[k], count))
        if not masks[2]:
            prepared.append(_prepare_count(int(x.shape[k]), begin[k], end[k], strides[k], *masks))
    kept = [c for k, (_, _, c) in enumerate(axes) if not fields["shrink_axis_mask"] >> k & 1]
    need(prepared == kept, f"STRIDED_SLICE: TFLite Micro's Prepare computes shape {prepared}, its Eval {kept}")
    need(list(out.shape) == kept, f"STRIDED_SLICE: the output declares shape {list(out.shape)}, the slice is {kept}")
    _add_slice(low, ins[0], out, axes)


def _add_slice(low, x_index: int, out, axes) -> None:
    attrs = {"begin": [b for b, _, _ in axes], "stride": [s for _, s, _ in axes], "count": [c for *_, c in axes],
             "shape": [int(d) for d in out.shape]}
    low.add("strided_slice", [low.value(x_index)], attrs, out)


@tflite_builtin("SLICE", 65, inputs=(3, 3))
def lower_slice(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    rank = len(x.shape)
    need(1 <= rank <= 5, f"SLICE: an input of {rank} dimensions (TFLite Micro takes 1 to 5)")
    begin = low.ints(ins[1], "SLICE", "begin").ravel().tolist()
    size = low.ints(ins[2], "SLICE", "size").ravel().tolist()
    need(len(begin) == len(size) == rank, f"SLICE: begin and size of {len(begin)} and {len(size)} values for {rank} "
                                          "axes")
    axes = []
    for k, (b, s) in enumerate(zip(begin, size)):
        count = int(x.shape[k]) - b if s == -1 else s
        need(0 <= b and 0 <= count and b + count <= x.shape[k],
             f"SLICE: axis {k} of {x.shape[k]}: begin {b}, size {s} leave it")
        axes.append((b, 1, count))
    need(list(out.shape) == [c for *_, c in axes],
         f"SLICE: the output declares shape {list(out.shape)}, the slice is {[c for *_, c in axes]}")
    _add_slice(low, ins[0], out, axes)
