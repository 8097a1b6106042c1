"""Shape ops: RESHAPE, free (the elements keep their order and their quantisation: a result declared with
another is refused, as TFLite's kernel would reinterpret the integers), PAD (the elements
copied into a larger tensor, the rest zero: the zero point of a quantised tensor) and CONCATENATION (two
tensors' elements interleaved along an axis)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, rshift_bound
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.pow2_arith import MAX_SHIFT
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

MAX_PAD = 1 << 16  # per side of an axis (the padded tensor's size is checked by the verifier's element limit)


def _infer_reshape(ts, attrs, declared):
    (x,) = ts
    shape = tuple(int(d) for d in attrs["shape"])
    need(all(d >= 1 for d in shape), f"shape {list(shape)} has a dimension below 1")
    need(int(np.prod(shape)) == x.size, f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be reshaped")
    # TFLite's RESHAPE copies the integers: a result quantised otherwise would reinterpret them, not requantise
    need(not x.dtype.is_quantised or declared is None or declared.dtype == x.dtype,
         f"a reshape keeps its input's quantisation {x.dtype} (TFLite copies the integers), the result declares "
         f"{declared.dtype if declared is not None else None}")
    return TensorType(shape, x.dtype, declared.layout if declared is not None else "")


def _reshape_rows(value: np.ndarray, in_rank: int, shape) -> np.ndarray:
    """Any leading (row) axes kept."""
    return value.reshape(*value.shape[:value.ndim - in_rank], *(int(d) for d in shape))


register_op(OpDef(
    "reshape", 1, _infer_reshape, lambda xs, a: np.reshape(xs[0], [int(d) for d in a["shape"]]), {"shape": "ints"},
    "TFLite's RESHAPE: the same elements in the same order in a new shape (and the declared layout): free",
    evaluate_rows=lambda ins, batched, attrs, n, rank: (ins[0].reshape(n, *(int(d) for d in attrs["shape"]))
                                                        if batched[0] else None),  # a constant's: row by row
    fixed=lambda call: _reshape_rows(call.ins[0], call.in_types[0].rank, call.attrs["shape"]),
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


SQUEEZE_OPTIONS = 30  # schema.fbs' BuiltinOptions: SqueezeOptions { squeeze_dims: [int] }


def _lower_as_reshape(low, op: str, ins, outs, shape: list[int]) -> None:
    """SQUEEZE and EXPAND_DIMS: a RESHAPE to the shape the operator computes, which the file's output must
    declare."""
    out = low.tensors[outs[0]]
    need(list(out.shape) == shape, f"{op}: the output declares shape {list(out.shape)}, the operator computes {shape}")
    low.add("reshape", [low.value(ins[0])], {"shape": shape}, out)


@tflite_builtin("SQUEEZE", 43, options=SQUEEZE_OPTIONS)
def lower_squeeze(low, options, ins, outs) -> None:
    shape = [int(d) for d in low.tensors[ins[0]].shape]
    dims = options.array(0, "squeeze_dims", np.int32).tolist() if options is not None else []
    need(all(-len(shape) <= d < len(shape) for d in dims),
         f"SQUEEZE: squeeze_dims {dims} outside the input's {len(shape)} axes")
    axes = {d % len(shape) for d in dims} if dims else {i for i, d in enumerate(shape) if d == 1}
    need(all(shape[a] == 1 for a in axes), f"SQUEEZE: axes {sorted(axes)} of shape {shape} are not all 1")
    _lower_as_reshape(low, "SQUEEZE", ins, outs, [d for i, d in enumerate(shape) if i not in axes])


@tflite_builtin("EXPAND_DIMS", 70, inputs=(2, 2))
def lower_expand_dims(low, options, ins, outs) -> None:
    shape = [int(d) for d in low.tensors[ins[0]].shape]
    axis = low.ints(ins[1], "EXPAND_DIMS", "axis").ravel()
    need(axis.size == 1 and -len(shape) - 1 <= int(axis[0]) <= len(shape),
         f"EXPAND_DIMS: axis {axis.tolist()} for an input of {len(shape)} axes")
    at = int(axis[0]) % (len(shape) + 1)
    _lower_as_reshape(low, "EXPAND_DIMS", ins, outs, shape[:at] + [1] + shape[at:])


# ---------------------------------------------------------------- pad

def _pads(attrs: dict, rank: int) -> list[tuple[int, int]]:
    pads = [int(p) for p in attrs["pads"]]
    need(len(pads) == 2 * rank and all(0 <= p <= MAX_PAD for p in pads),
         f"pads must be {2 * rank} integers in [0, {MAX_PAD}] (before and after each axis), got {pads}")
    return [(pads[2 * i], pads[2 * i + 1]) for i in range(rank)]


def pad_fill(dtype, attrs: dict):
    """The padding's stored value: ``fill`` where given (PADV2's constant: an integer of a quantised type, a float
    otherwise), else real 0 (the zero point)."""
    if "fill" not in attrs:
        return dtype.zero_point if dtype.is_quantised else 0
    return int(attrs["fill"]) if dtype.is_quantised else float(np.float32(attrs["fill"]))


def _infer_pad(ts, attrs, declared):
    (x,) = ts
    shape = tuple(d + before + after for d, (before, after) in zip(x.shape, _pads(attrs, x.rank)))
    if "fill" in attrs:
        fill = float(attrs["fill"])
        if x.dtype.is_quantised:
            lo, hi = x.dtype.integer_range
            need(fill == int(fill) and lo <= fill <= hi, f"fill {attrs['fill']} is not a {x.dtype} integer")
        else:
            need(x.dtype.is_float, f"a fill value takes f32 or quantised tensors, got {x.dtype}")
    if x.dtype.is_quantised:
        need(declared is not None and declared.dtype == x.dtype,
             f"TFLite's int8 pad copies the input's integers: the result keeps its quantisation {x.dtype}, "
             f"declares {declared.dtype if declared is not None else None}")
        need(x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be padded")
    else:
        need(x.dtype.kind in ("f32", "fx"), f"operand must be f32, fixed point or quantised, got {x.dtype}")
    return TensorType(shape, x.dtype, x.layout)


def _padded(value: np.ndarray, rank: int, attrs: dict, fill) -> np.ndarray:
    """Any leading (row) axes kept, unpadded."""
    lead = [(0, 0)] * (value.ndim - rank)
    return np.pad(value, lead + _pads(attrs, rank), constant_values=fill)


register_op(OpDef(
    "pad", 1, _infer_pad, lambda xs, a: _padded(np.asarray(xs[0]), np.ndim(xs[0]), a, float(a.get("fill", 0.0))),
    {"pads": "ints", "fill": "float?"},
    "TFLite's PAD and PADV2 (pads: before and after each axis; fill: PADV2's constant, as stored); quantised: the "
    "input's integers copied, the padding its zero point (real 0) or the fill",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _padded(ins[0], rank, attrs, float(attrs.get("fill", 0.0))),
    fixed=lambda call: _padded(call.ins[0], call.in_types[0].rank, call.attrs,
                               pad_fill(call.in_types[0].dtype, call.attrs)),
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


# ---------------------------------------------------------------- concatenation (of two: the reader chains more)

def _infer_concatenation(ts, attrs, declared):
    a, b = ts
    axis = int(attrs["axis"])
    need(a.rank == b.rank and 0 <= axis < a.rank, f"concatenation of ranks {a.rank} and {b.rank} on axis {axis}")
    need(all(da == db for k, (da, db) in enumerate(zip(a.shape, b.shape)) if k != axis),
         f"concatenation on axis {axis} of shapes {a.shape} and {b.shape}: the other axes differ")
    shape = tuple(da + db if k == axis else da for k, (da, db) in enumerate(zip(a.shape, b.shape)))
    if a.dtype.is_quantised:
        need(a.dtype == b.dtype and a.dtype.axis == PER_TENSOR and declared is not None and declared.dtype == a.dtype,
             f"TFLite's int8 concatenation copies integers: its operands and result share one per-tensor "
             f"quantisation, got {a.dtype}, {b.dtype} -> {declared.dtype if declared is not None else None}")
    elif a.dtype.is_fixed and b.dtype.is_fixed:
        # the project's fixed point: each operand rounded right to the result's scale (no finer than either)
        need(a.dtype.bits == b.dtype.bits and declared is not None and declared.dtype.is_fixed
             and declared.dtype.bits == a.dtype.bits
             and all(0 <= t.dtype.scale - declared.dtype.scale <= MAX_SHIFT for t in (a, b)),
             f"a fixed-point concatenation of {a.dtype} and {b.dtype} rounds both to the declared result's scale, "
             f"no finer than either, got {declared.dtype if declared is not None else None}")
    elif a.dtype.is_fixed or a.dtype.is_integer:
        need(a.dtype == b.dtype and (declared is None or declared.dtype == a.dtype),
             f"a fixed-point or integer concatenation copies integers: its operands and result share one type, got "
             f"{a.dtype}, "
             f"{b.dtype} -> {declared.dtype if declared is not None else None}")
    else:
        need(a.dtype.is_float and b.dtype.is_float, f"operands must be f32 or quantised, got {a.dtype}, {b.dtype}")
    dtype = declared.dtype if a.dtype.is_fixed and declared is not None else a.dtype
    return TensorType(shape, dtype, declared.layout if declared is not None else a.layout)


def concatenated_operand(value: np.ndarray, operand: TensorType, result: TensorType) -> np.ndarray:
    """An operand's integers at the result's scale (fx: rounded right, halves up; else as they are)."""
    if not result.dtype.is_fixed:
        return value
    return rshift(value, operand.dtype.scale - result.dtype.scale)


def _concatenated(values, ranks, axis: int) -> np.ndarray:
    """Leading (row) axes kept: a constant operand (without them) is repeated over the other's rows."""
    lead = max((v.shape[:v.ndim - r] for v, r in zip(values, ranks)), key=len)
    values = [np.broadcast_to(v, (*lead, *v.shape[v.ndim - r:])) for v, r in zip(values, ranks)]
    return np.concatenate(values, axis=len(lead) + axis)


register_op(OpDef(
    "concatenation", 2, _infer_concatenation,
    lambda xs, a: _concatenated([np.asarray(x) for x in xs], [np.ndim(x) for x in xs], int(a["axis"])),
    {"axis": "int"},
    "TFLite's CONCATENATION of two tensors along an axis (the reader chains more); quantised: the integers "
    "copied, operands and result of one quantisation (TFLite's int8 kernel requires it)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _concatenated([np.asarray(v) for v in ins], [rank, rank],
                                                                     int(attrs["axis"])),
    fixed=lambda call: _concatenated([concatenated_operand(v, t, call.type) for v, t in zip(call.ins, call.in_types)],
                                     [t.rank for t in call.in_types], int(call.attrs["axis"])),
    acc_bound=lambda call: (max(rshift_bound(b, s - call.out_scale) for b, s in zip(call.bounds, call.scales)),
                            call.out_scale),
    unsupported={"interval": NO_RANGES}))


PACK_OPTIONS = 59  # schema.fbs' BuiltinOptions: PackOptions { values_count, axis }
MAX_PACKED = 64


@tflite_builtin("PACK", 83, options=PACK_OPTIONS, inputs=(1, MAX_PACKED))
def lower_pack(low, options, ins, outs) -> None:
    """The inputs stacked along a new axis: each reshaped to hold it (size 1), then concatenated along it."""
    out = low.tensors[outs[0]]
    x = low.tensors[ins[0]]
    rank = len(x.shape) + 1
    axis = int(options.scalar(1, "i", 0, "axis")) if options is not None else 0
    need(-rank <= axis < rank, f"PACK: axis {axis} of a {rank}-dimensional output")
    axis %= rank
    count = int(options.scalar(0, "i", 0, "values_count")) if options is not None else 0
    need(count == len(ins), f"PACK: values_count {count} for {len(ins)} inputs")
    need(all(low.tensors[i].shape == x.shape for i in ins), "PACK: inputs of different shapes")
    one = list(x.shape[:axis]) + [1] + list(x.shape[axis:])
    name = low.name_of(out)
    parts = [low.step("reshape", [low.value(i)], {"shape": one}, one, low.tensors[i], f"{name}_in{k}")
             for k, i in enumerate(ins)]
    if len(parts) == 1:
        low.add("reshape", parts, {"shape": one}, out)
        return
    joined = parts[0]
    for k, part in enumerate(parts[1:], start=1):
        shape = list(one)
        shape[axis] = k + 1
        if k < len(parts) - 1:
            joined = low.step("concatenation", [joined, part], {"axis": axis}, shape, out, f"{name}_part{k}")
        else:
            low.add("concatenation", [joined, part], {"axis": axis}, out)
