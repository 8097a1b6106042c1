"""Pooling of NHWC tensors, as TFLite defines it: AVERAGE_POOL_2D, MAX_POOL_2D and MEAN over height and width
(global average pooling).

The average is over the window's elements inside the input (padding is not counted). Integer
semantics (``reference_integer_ops::AveragePool``, int8 and int16): the values summed, divided by the count
rounding half away from zero, clamped to the fused activation's range; input and output share their
quantisation (TFLite requires it), so nothing is requantised. Fixed point (fx, the project's dialect): the
same integer steps (sum, rounded division, clamp) on the input's integers, its type kept.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.pow2_arith import clamp_activation, rounded_division
from tinycc_ml.ir.ops.registry import BoundCall, FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    activation_range,
    apply_activation,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap32,
)
from tinycc_ml.ir.ops.windows import (
    as_batch,
    axis_geometry,
    check_requantisation,
    check_window_attrs,
    keeps_type,
    network_result,
    quantised_operand,
    window_lead,
    window_shape,
    window_taps,
)


def pool_type_rule(kind: str):
    """The type rule of a pooling op (``kind``: "average", "max"): an NHWC window over each channel, whose int8
    form keeps the input's quantisation."""
    def infer(ts, attrs, declared):
        (x,) = ts
        need(x.rank == 4 and x.layout == "NHWC", f"input must be an NHWC tensor, got {x}")
        check_window_attrs(attrs, keys=("stride", "filter"))
        oh, ow = window_shape(x, tuple(int(k) for k in attrs["filter"]), attrs)
        bits = x.dtype.bits if x.dtype.is_quantised else 8
        result = network_result(x, declared, (x.shape[0], oh, ow, x.shape[3]), "NHWC", bits)
        keeps_type(x, result, f"{kind} pool")
        if x.dtype.is_quantised:
            need(bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
            quantised_operand(x, "input", bits)
            need(result.dtype == x.dtype, f"TFLite's int8 {kind} pool keeps the input's quantisation {x.dtype}, "
                                          f"the result declares {result.dtype}")
        return result
    return infer


def _clamped(values: np.ndarray, call: FixedCall) -> np.ndarray:
    """``values`` clamped to the fused activation's int8 range at the result's quantisation (fixed point: at its
    scale)."""
    out = call.type.dtype
    if out.is_fixed:
        return clamp_activation(values, call.attrs.get("activation", "none"), out)
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    return np.clip(values, lo, hi)


def _window_sums_and_counts(x: np.ndarray, attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    batch, lead = as_batch(x, 4)
    window = tuple(int(k) for k in attrs["filter"])
    sums = sum(tap.astype(np.float64 if batch.dtype.kind == "f" else np.int64)
               for _, _, tap in window_taps(batch, window, attrs))
    counts = sum(tap for _, _, tap in window_taps(np.ones_like(batch[:1, :, :, :1], dtype=np.int64), window, attrs))
    shape = (*lead, x.shape[-4], *sums.shape[1:])
    return sums.reshape(shape), np.broadcast_to(counts[0], sums.shape[1:])


def _float_average_pool(xs, attrs):
    sums, counts = _window_sums_and_counts(xs[0], attrs)
    return apply_activation(sums / counts, attrs.get("activation", "none"))


def _fixed_average_pool(call: FixedCall):
    sums, counts = _window_sums_and_counts(call.ins[0], call.attrs)
    return _clamped(rounded_division(check32(sums, call.where), counts), call)


def _bound_average_pool(call: BoundCall) -> tuple[int, int]:
    """The int32 sum of a window's integers (the average is within the input's range)."""
    window = [int(k) for k in call.attrs["filter"]]
    return window[0] * window[1] * call.bounds[0], call.scales[0]


def pool_lead(graph, node) -> dict[str, int]:
    """A pool's in place rule (``OpDef.alias``): TFLite's quantised kernels by ``window_lead``; the float and
    power-of-two dialects' C, channel by channel at each position, reads for output element k only input elements
    at k or beyond where no padding comes before the windows: there lead 0."""
    window = tuple(int(k) for k in node.attrs["filter"])
    if node.type.dtype.is_quantised:
        return window_lead(graph, node, window)
    x = graph.type(node.inputs[0])
    stride = [int(s) for s in node.attrs["stride"]]
    if any(axis_geometry(x.shape[1 + a], window[a], stride[a], 1, node.attrs, a)[1] for a in range(2)):
        return {}
    return {node.inputs[0]: 0}


register_op(OpDef(
    "average_pool2d", 1, pool_type_rule("average"), _float_average_pool,
    {"filter": "ints", "stride": "ints", "padding": "str", "activation": "str", "pads": "ints?"},
    "TFLite's AVERAGE_POOL_2D: the mean of each window's elements inside the input (filter: height, width); "
    "quantised: TFLite's int8 kernel (sum, rounded division by the count, activation clamp)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float_average_pool(ins, attrs),
    fixed=_fixed_average_pool, acc_bound=_bound_average_pool, alias=pool_lead,
    unsupported={"interval": NO_RANGES}))


# ---------------------------------------------------------------- max_pool2d

def window_max(x: np.ndarray, attrs: dict, below) -> np.ndarray:
    """The largest element of each window inside the input (``below``, less than any element, fills the
    padding so that it is never chosen); tap by tap, without copying the windows."""
    batch, lead = as_batch(x, 4)
    window = tuple(int(k) for k in attrs["filter"])
    largest = None
    for _, _, tap in window_taps(batch, window, attrs, fill=below):
        largest = tap if largest is None else np.maximum(largest, tap)
    return largest.reshape(*lead, x.shape[-4], *largest.shape[1:])


def _float_max_pool(xs, attrs):
    return apply_activation(window_max(np.asarray(xs[0], dtype=np.float64), attrs, -np.inf),
                            attrs.get("activation", "none"))


def _fixed_max_pool(call: FixedCall):
    return _clamped(window_max(np.asarray(call.ins[0], dtype=np.int64), call.attrs, np.iinfo(np.int64).min), call)


register_op(OpDef(
    "max_pool2d", 1, pool_type_rule("max"), _float_max_pool,
    {"filter": "ints", "stride": "ints", "padding": "str", "activation": "str", "pads": "ints?"},
    "TFLite's MAX_POOL_2D: the largest of each window's elements inside the input (filter: height, width); "
    "quantised: TFLite's int8 kernel (the largest int8, the activation clamp; the input's quantisation kept)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float_max_pool(ins, attrs),
    fixed=_fixed_max_pool, alias=pool_lead,
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


# ---------------------------------------------------------------- mean over height and width

def _infer_mean(ts, attrs, declared):
    (x,) = ts
    need(x.rank == 4 and x.layout == "NHWC", f"input must be an NHWC tensor, got {x}")
    need(sorted(int(a) for a in attrs["axes"]) == [1, 2], f"the mean is over axes [1, 2] (H, W), got {attrs['axes']}")
    keep = int(attrs["keep_dims"])
    need(keep in (0, 1), f"keep_dims must be 0 or 1, got {keep}")
    shape = (x.shape[0], 1, 1, x.shape[3]) if keep else (x.shape[0], x.shape[3])
    bits = x.dtype.bits if x.dtype.is_quantised else 8
    result = network_result(x, declared, shape, "NHWC" if keep else "NC", bits)
    keeps_type(x, result, "mean")
    if x.dtype.is_quantised:
        need(bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
        quantised_operand(x, "input", bits)
        check_requantisation(x.dtype.qscales[0] / result.dtype.qscales[0], "mean")
        count = x.shape[1] * x.shape[2]
        need(count * (1 << bits) < (1 << 31), f"a mean of {count} int{bits} values: TFLite's int32 sums can wrap")
    return result


def mean_parameters(input_scale: float, output_scale: float, count: int) -> tuple[int, int]:
    """TFLite's QuantizedMeanOrSum: the multiplier of input/output scale with 1/count folded in (the
    multiplier shifted left by floor(log2 count), at most 32 and at most 31 + its shift, then divided by count)."""
    multiplier, shift = quantize_multiplier(float(input_scale) / float(output_scale))
    fold = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << fold) // count, shift - fold


def _fixed_mean(call: FixedCall):
    x, out = call.in_types[0], call.type.dtype
    values = call.ins[0].astype(np.int64)
    count = x.shape[1] * x.shape[2]
    if out.is_fixed:  # the project's dialect: the rounded average of the integers, the input's type kept
        result = rounded_division(check32(values.sum(axis=(-3, -2)), call.where), count)
        return result.reshape(*result.shape[:-1], 1, 1, result.shape[-1]) if int(call.attrs["keep_dims"]) else result
    sums = check32(values.sum(axis=(-3, -2)), call.where)  # (..., N, C): int32 sums, as TFLite's
    multiplier, shift = mean_parameters(x.dtype.qscales[0], out.qscales[0], count)
    scaled = multiply_by_quantized_multiplier(wrap32(sums - x.dtype.zero_point * count), multiplier, shift)
    result = np.clip(scaled + out.zero_point, *out.integer_range)
    return result.reshape(*result.shape[:-1], 1, 1, result.shape[-1]) if int(call.attrs["keep_dims"]) else result


def _float_mean(xs, attrs):
    means = np.mean(xs[0], axis=(-3, -2))
    return means.reshape(*means.shape[:-1], 1, 1, means.shape[-1]) if int(attrs["keep_dims"]) else means


register_op(OpDef(
    "mean", 1, _infer_mean, _float_mean, {"axes": "ints", "keep_dims": "int"},
    "TFLite's MEAN over an NHWC tensor's height and width (Keras' GlobalAveragePooling2D), keep_dims 1 keeping "
    "them as 1x1; quantised: TFLite's int8 kernel (int32 sums less the zero point, requantised by input/output "
    "scale with 1/count folded into the multiplier)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float_mean(ins, attrs),
    fixed=_fixed_mean,
    acc_bound=lambda call: (call.in_types[0].shape[1] * call.in_types[0].shape[2] * call.bounds[0], call.scales[0]),
    # the float and power-of-two dialects' C reads a channel's elements before storing its mean (TFLite's int8 C:
    # not shown, none)
    alias=lambda g, node: {} if node.type.dtype.is_quantised else {node.inputs[0]: 0},
    unsupported={"interval": NO_RANGES}))
