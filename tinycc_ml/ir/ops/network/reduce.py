"""SUM and REDUCE_MAX: a tensor summed (its largest element taken) over some of its axes, ``keep_dims`` 1 keeping
them as axes of 1 (ONNX's ReduceSum / ReduceMax; ReduceMean over axes other than a global pool's is a sum and a
product by 1 / count).

Float: the float32 sum in the input's element order (or the largest element; a NaN is kept, as ``(v > m) ? v : m``
keeps one only when it comes first: the float C matches numpy's maximum only without NaNs, which the network's
inputs do not hold). Fixed point (fx, the project's dialect): the largest integer, the input's type kept; the sum
of the integers in int32 (the overflow proof bounds it by count x the input's largest |int|), shifted right with
rounding to the result's scale (no finer than the input's), saturated. TFLite's int8: REDUCE_MAX of the stored
integers, the quantisation kept; SUM at int8 and int16 as TFLite Micro's QuantizedMeanOrSum: the int32 sum of the
integers less count x the input's zero point, requantised by input scale / output scale (QuantizeMultiplier,
MultiplyByQuantizedMultiplier), plus the output's zero point, clamped (sums that could wrap int32 are refused).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.pooling import mean_parameters
from tinycc_ml.ir.ops.pow2_arith import check_shift
from tinycc_ml.ir.ops.registry import BoundCall, FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier
from tinycc_ml.ir.ops.windows import check_requantisation, keeps_type, network_result
from tinycc_ml.ir.types import PER_TENSOR


def reduced_axes(attrs: dict, rank: int) -> list[int]:
    axes = sorted({int(a) for a in attrs["axes"]})
    need(axes and all(0 <= a < rank for a in axes), f"axes {list(attrs['axes'])} for a tensor of {rank} axes")
    return axes


def reduced_shape(shape: tuple[int, ...], attrs: dict) -> tuple[int, ...]:
    axes = reduced_axes(attrs, len(shape))
    keep = int(attrs["keep_dims"])
    need(keep in (0, 1), f"keep_dims must be 0 or 1, got {keep}")
    return tuple(1 if k in axes else d for k, d in enumerate(shape) if keep or k not in axes)


def _infer(name: str):
    def infer(ts, attrs, declared):
        (x,) = ts
        bits = x.dtype.bits if x.dtype.is_quantised else 8
        result = network_result(x, declared, reduced_shape(x.shape, attrs), x.layout if int(attrs["keep_dims"]) else "",
                                bits)
        need(not int(attrs.get("mean", 0)) or not x.dtype.is_fixed,
             "a mean over any axes has no form in the project's fixed point (over height and width: the mean op)")
        if name == "reduce_sum" and x.dtype.is_quantised:
            need(bits in (8, 16) and x.dtype.axis == PER_TENSOR, f"input must be per-tensor qi8 or qi16, got {x.dtype}")
            count = math.prod(x.shape[a] for a in reduced_axes(attrs, x.rank))
            need(count * (1 << bits) < (1 << 31), f"a sum of {count} int{bits} values: TFLite's int32 sums can wrap")
            check_requantisation(x.dtype.qscales[0] / result.dtype.qscales[0], name)
            return result
        if name in ("reduce_max", "reduce_min"):
            keeps_type(x, result, name)
            need(not x.dtype.is_quantised or (result.dtype == x.dtype and x.dtype.axis == PER_TENSOR),
                 f"TFLite's int8 {name.upper()} compares the stored integers: the result keeps the input's "
                 f"quantisation {x.dtype}, declares {result.dtype}")
        elif x.dtype.is_fixed:
            check_shift(x.dtype.scale - result.dtype.scale, "the sum")
        return result
    return infer


def _reduce(values: np.ndarray, rank: int, attrs: dict, how) -> np.ndarray:
    """Any leading (row) axes kept; ``rank``: the input's."""
    lead = values.ndim - rank
    axes = tuple(lead + a for a in reduced_axes(attrs, rank))
    return how(values, axis=axes, keepdims=bool(int(attrs["keep_dims"])))


def _float_sum(values, axis, keepdims) -> np.ndarray:
    """The float32 sum of each output's elements one after the other in memory order, as TFLite Micro's
    ReduceSumImpl and the C add them (numpy's pairwise sum rounds otherwise)."""
    values = np.asarray(values, dtype=np.float32)
    moved = np.moveaxis(values, axis, range(values.ndim - len(axis), values.ndim))
    flat = moved.reshape(*moved.shape[:values.ndim - len(axis)], -1)
    acc = np.zeros(flat.shape[:-1], dtype=np.float32)
    for k in range(flat.shape[-1]):
        acc = acc + flat[..., k]
    return np.expand_dims(acc, axis) if keepdims else acc


def _count(shape, attrs) -> int:
    return math.prod(shape[a] for a in reduced_axes(attrs, len(shape)))


def _float_reduced_sum(values, rank: int, attrs: dict) -> np.ndarray:
    """SUM, or MEAN (``mean`` 1): the float32 sum divided by the count in float32, as TFLite Micro's Mean."""
    sums = _reduce(np.asarray(values), rank, attrs, _float_sum)
    if not int(attrs.get("mean", 0)):
        return sums
    shape = np.shape(values)[np.ndim(values) - rank:]
    return (np.asarray(sums, np.float32) / np.float32(_count(shape, attrs))).astype(np.float32)


def _sum_multiplier(x, out, attrs) -> tuple[int, int]:
    """QuantizedMeanOrSum's multiplier: input / output scale, with 1 / count folded in for a mean."""
    if int(attrs.get("mean", 0)):
        return mean_parameters(x.dtype.qscales[0], out.qscales[0], _count(x.shape, attrs))
    return quantize_multiplier(float(x.dtype.qscales[0]) / float(out.qscales[0]))


def _input_rank(ins, batched) -> int:
    return np.ndim(ins[0]) - (1 if batched[0] else 0)


def _quantised_sum(call: FixedCall) -> np.ndarray:
    x, out = call.in_types[0], call.type.dtype
    count = math.prod(x.shape[a] for a in reduced_axes(call.attrs, x.rank))
    sums = _reduce(np.asarray(call.ins[0], dtype=np.int64), x.rank, call.attrs, np.sum) - x.dtype.zero_point * count
    multiplier, shift = _sum_multiplier(x, out, call.attrs)
    return np.clip(multiply_by_quantized_multiplier(sums, multiplier, shift) + out.zero_point, *out.integer_range)


def _fixed_sum(call: FixedCall) -> np.ndarray:
    x = call.in_types[0]
    if x.dtype.is_quantised:
        return _quantised_sum(call)
    sums = check32(_reduce(np.asarray(call.ins[0], dtype=np.int64), x.rank, call.attrs, np.sum), call.where)
    return saturate(rshift(sums, x.dtype.scale - call.scale), call.bits)


def _bound_sum(call: BoundCall) -> tuple[int, int]:
    x = call.in_types[0]
    count = math.prod(x.shape[a] for a in reduced_axes(call.attrs, x.rank))
    return count * call.bounds[0], call.scales[0]


def _loops(em, node, start: str, step, store) -> list[str]:
    """C over the result's elements in order: for each, ``start`` (declaring ``acc`` from ``first``, the element's
    first input), then ``step(v)`` for every input element ``v`` reduced into it, then ``store(acc)``."""
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    axes = reduced_axes(node.attrs, x.rank)
    strides = [math.prod(x.shape[k + 1:]) for k in range(x.rank)]

    def offset(index) -> str:
        return " + ".join(f"{index(k)} * {s}" if s != 1 else index(k) for k, s in enumerate(strides)
                          if x.shape[k] > 1) or "0"

    lines, indent = ["{", "    long o = 0;" if node.type.rank else "    /* one result */"], "    "
    for k in range(x.rank):
        if k not in axes:
            lines.append(f"{indent}for (long d{k} = 0; d{k} < {x.shape[k]}; ++d{k}) {{")
            indent += "    "
    first = em.at(x_name, offset(lambda k: "0" if k in axes else f"d{k}"))
    lines.append(f"{indent}{start.format(first=first)}")
    inner = indent
    for k in axes:
        lines.append(f"{inner}for (long r{k} = 0; r{k} < {x.shape[k]}; ++r{k})")
        inner += "    "
    lines.append(f"{inner}{step(em.at(x_name, offset(lambda k: f'r{k}' if k in axes else f'd{k}')))}")
    lines.append(f"{indent}{em.at(node.name, 'o++' if node.type.rank else '0')} = {store('acc')};")
    for k in reversed(range(x.rank)):
        if k not in axes:
            indent = indent[:-4]
            lines.append(f"{indent}}}")
    return lines + ["}"]


def _c_float_sum(em, node) -> list[str]:
    count = _count(em.graph.type(node.inputs[0]).shape, node.attrs)
    divide = (lambda acc: f"{acc} / {count}.0f") if int(node.attrs.get("mean", 0)) else (lambda acc: acc)
    return _loops(em, node, "float acc = 0.0f;", lambda v: f"acc += {v};", divide)


def _c_quantised_sum(em, node) -> list[str]:
    x, out = em.graph.type(node.inputs[0]), node.type.dtype
    count = math.prod(x.shape[a] for a in reduced_axes(node.attrs, x.rank))
    multiplier, shift = _sum_multiplier(x, out, node.attrs)
    lo, hi = out.integer_range
    less = f"{{}} - INT32_C({x.dtype.zero_point * count})"
    return _loops(em, node, "int32_t acc = 0;", lambda v: f"acc += (int32_t){v};",
                  lambda acc: f"{clamp_to(em, out.bits)}({requantise(em)}({less.format(acc)}, {multiplier}, {shift}) "
                              f"+ {out.zero_point}, {lo}, {hi})")


def _c_fixed_sum(em, node) -> list[str]:
    if em.graph.type(node.inputs[0]).dtype.is_quantised:
        return _c_quantised_sum(em, node)
    shift = em.graph.type(node.inputs[0]).dtype.scale - node.type.dtype.scale
    bits = node.type.dtype.bits
    top = 2 ** (bits - 1) - 1
    # arith.rshift: halves up (the proof keeps |acc| <= 2^30, so adding the rounding constant cannot overflow)
    shifted = f"((acc + INT32_C({1 << (shift - 1)})) >> {shift})" if shift else "acc"
    return _loops(em, node, "int32_t acc = 0;", lambda v: f"acc += (int32_t){v};",
                  lambda acc: f"{clamp_to(em, bits)}({shifted}, INT32_C({-top - 1}), INT32_C({top}))")


def _c_extreme(ctype: str, compare: str):
    def c(em, node) -> list[str]:
        ctype_ = ctype or f"int{node.type.dtype.bits}_t"
        return _loops(em, node, ctype_ + " acc = {first};", lambda v: f"acc = ({v} {compare} acc) ? {v} : acc;",
                      lambda acc: acc)
    return c


register_op(OpDef(
    "reduce_sum", 1, _infer("reduce_sum"),
    lambda xs, attrs: _float_reduced_sum(xs[0], np.ndim(xs[0]), attrs),
    {"axes": "ints", "keep_dims": "int", "mean": "int?"},
    "TFLite's SUM over axes (keep_dims 1: they stay as 1s), or MEAN (mean 1: divided by the count; quantised: 1 / "
    "count folded into the multiplier, as QuantizedMeanOrSum); fixed point: the int32 sum of the integers shifted "
    "to the result's scale with rounding, saturated",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float_reduced_sum(ins[0], _input_rank(ins, batched), attrs),
    fixed=_fixed_sum, acc_bound=_bound_sum,
    c={"fixed": _c_fixed_sum, "float": _c_float_sum},
    unsupported={"interval": NO_RANGES}))

for _name, _how, _compare, _what in (("reduce_max", np.max, ">", "largest"), ("reduce_min", np.min, "<", "smallest")):
    register_op(OpDef(
        _name, 1, _infer(_name),
        lambda xs, attrs, how=_how: _reduce(np.asarray(xs[0], dtype=np.float64), np.ndim(xs[0]), attrs, how),
        {"axes": "ints", "keep_dims": "int"},
        f"TFLite's {_name.upper()} over axes (keep_dims 1: they stay as 1s); fixed point: the {_what} integer, the "
        "type kept",
        evaluate_rows=lambda ins, batched, attrs, n, rank, how=_how: _reduce(np.asarray(ins[0]),
                                                                             _input_rank(ins, batched), attrs, how),
        fixed=lambda call, how=_how: _reduce(np.asarray(call.ins[0], dtype=np.int64), call.in_types[0].rank,
                                             call.attrs, how),
        c={"fixed": _c_extreme("", _compare), "float": _c_extreme("float", _compare)},
        unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


REDUCER_OPTIONS = 27  # schema.fbs' BuiltinOptions: ReducerOptions { keep_dims: bool }


def _lower_reducer(low, op: str, ir_op: str, options, ins, outs, types: tuple[str, ...]) -> None:
    x = low.tensors[ins[0]]
    need(x.type_name in types, f"{op}: {x.type_name} tensors (TFLite Micro takes {' and '.join(types)})")
    rank = len(x.shape)
    given = low.ints(ins[1], op, "axis").ravel().tolist()
    need(given and all(-rank <= a < rank for a in given), f"{op}: axes {given} of a {rank}-dimensional input")
    keep = int(bool(options.scalar(0, "B", 0, "keep_dims"))) if options is not None else 0
    low.add(ir_op, [low.value(ins[0])], {"axes": sorted({int(a) % rank for a in given}), "keep_dims": keep},
            low.tensors[outs[0]])


@tflite_builtin("SUM", 74, options=REDUCER_OPTIONS, inputs=(2, 2))
def lower_sum(low, options, ins, outs) -> None:
    _lower_reducer(low, "SUM", "reduce_sum", options, ins, outs, ("float32", "int8", "int16"))


@tflite_builtin("REDUCE_MAX", 82, options=REDUCER_OPTIONS, inputs=(2, 2))
def lower_reduce_max(low, options, ins, outs) -> None:
    _lower_reducer(low, "REDUCE_MAX", "reduce_max", options, ins, outs, ("float32", "int8"))


@tflite_builtin("REDUCE_MIN", 89, options=REDUCER_OPTIONS, inputs=(2, 2))
def lower_reduce_min(low, options, ins, outs) -> None:
    _lower_reducer(low, "REDUCE_MIN", "reduce_min", options, ins, outs, ("float32", "int8"))
