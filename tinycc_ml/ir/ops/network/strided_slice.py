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


# ---- operators that cut a tensor into several: each output one strided_slice of the input

SPLIT_OPTIONS, SPLIT_V_OPTIONS, UNPACK_OPTIONS = 35, 79, 64  # schema.fbs' BuiltinOptions
MAX_OUTPUTS = 64


def _axis(low, index: int, op: str, rank: int) -> int:
    """A constant axis operand (negative counts from the end), as TFLite Micro's Prepare requires it."""
    values = low.ints(index, op, "axis").ravel()
    need(values.size == 1, f"{op}: the axis operand holds {values.size} values, not one")
    axis = int(values[0])
    need(-rank <= axis < rank, f"{op}: axis {axis} of a {rank}-dimensional input")
    return axis % rank


def _add_parts(low, x_index: int, outs, axis: int, sizes: list[int], keep_axis: bool) -> None:
    """Output k: the input's elements ``sizes[k]`` along ``axis`` after the previous outputs' (the axis dropped
    where not ``keep_axis``), each checked against its declared shape."""
    x = low.tensors[x_index]
    begin = 0
    for out_index, size in zip(outs, sizes):
        out = low.tensors[out_index]
        axes = [(begin if k == axis else 0, 1, size if k == axis else int(d)) for k, d in enumerate(x.shape)]
        kept = [c for k, (_, _, c) in enumerate(axes) if keep_axis or k != axis]
        need(list(out.shape) == kept, f"{low.where}: output {out.name!r} declares shape {list(out.shape)}, the part "
             f"is {kept}")
        _add_slice(low, x_index, out, axes)
        begin += size


@tflite_builtin("SPLIT", 49, options=SPLIT_OPTIONS, inputs=(2, 2), outputs=(1, MAX_OUTPUTS))
def lower_split(low, options, ins, outs) -> None:
    x = low.tensors[ins[1]]
    axis = _axis(low, ins[0], "SPLIT", len(x.shape))
    declared = int(options.scalar(0, "i", 0, "num_splits")) if options is not None else 0
    need(declared == len(outs), f"SPLIT: num_splits {declared} for {len(outs)} outputs")
    need(x.shape[axis] % len(outs) == 0, f"SPLIT: axis {axis} of {x.shape[axis]} does not split into "
         f"{len(outs)} equal parts")
    _add_parts(low, ins[1], outs, axis, [x.shape[axis] // len(outs)] * len(outs), keep_axis=True)


@tflite_builtin("SPLIT_V", 102, options=SPLIT_V_OPTIONS, inputs=(3, 3), outputs=(1, MAX_OUTPUTS))
def lower_split_v(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    axis = _axis(low, ins[2], "SPLIT_V", len(x.shape))
    sizes = [int(s) for s in low.ints(ins[1], "SPLIT_V", "size_splits").ravel()]
    need(len(sizes) == len(outs), f"SPLIT_V: {len(sizes)} sizes for {len(outs)} outputs")
    if sizes.count(-1) == 1:  # the one size left to infer: what the others leave
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    need(all(s >= 0 for s in sizes) and sum(sizes) == x.shape[axis],
         f"SPLIT_V: sizes {sizes} do not cut axis {axis} of {x.shape[axis]}")
    _add_parts(low, ins[0], outs, axis, sizes, keep_axis=True)


@tflite_builtin("UNPACK", 88, options=UNPACK_OPTIONS, outputs=(1, MAX_OUTPUTS))
def lower_unpack(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    rank = len(x.shape)
    axis = int(options.scalar(1, "i", 0, "axis")) if options is not None else 0
    need(-rank <= axis < rank, f"UNPACK: axis {axis} of a {rank}-dimensional input")
    axis %= rank
    count = int(options.scalar(0, "i", 0, "num")) if options is not None else 0
    need(count == len(outs) == x.shape[axis], f"UNPACK: num {count} and {len(outs)} outputs for axis {axis} of "
         f"{x.shape[axis]}")
    _add_parts(low, ins[0], outs, axis, [1] * count, keep_axis=False)


REVERSE_MAX_RANK = 5


@tflite_builtin("REVERSE_V2", 105, inputs=(2, 2))
def lower_reverse(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    rank = len(x.shape)
    need(1 <= rank <= REVERSE_MAX_RANK, f"REVERSE_V2: an input of {rank} dimensions")
    given = low.ints(ins[1], "REVERSE_V2", "axis").ravel().tolist()
    need(len(given) <= 8 and all(-rank <= a < rank for a in given),
         f"REVERSE_V2: axes {given} of a {rank}-dimensional input")
    axes = sorted(int(a) % rank for a in given)
    need(all(b == a + 1 for a, b in zip(axes, axes[1:])),  # TFLite Micro's kernel refuses others when it runs
         f"REVERSE_V2: axes {given} are not contiguous (TFLite Micro reverses contiguous axes only)")
    need(list(out.shape) == list(x.shape), f"REVERSE_V2: the output declares shape {list(out.shape)}, the input's "
         f"is {list(x.shape)}")
    _add_slice(low, ins[0], out, [(int(d) - 1, -1, int(d)) if k in axes else (0, 1, int(d))
                                  for k, d in enumerate(x.shape)])
