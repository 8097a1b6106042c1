"""Convolutions of NHWC tensors, as TFLite defines them: CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED (a convolution whose window is the whole input row).

Float semantics: real arithmetic. Integer semantics: fixed-point operands (fx, the project's power-of-two
dialect for float networks) as ``pow2_arith`` says; quantised operands: TFLite's int8 kernels
(``reference_integer_ops``): sum of filter * (input - input zero point), plus the int32 bias, requantised
per output channel by MultiplyByQuantizedMultiplier, plus the output zero point, clamped to the fused
activation's range. Products are summed in float64, exact (|sum| < 2^53 for any realistic window).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, check_range
from tinycc_ml.ir.ops.pow2_arith import channel_bounds, check_fixed_layer, check_shift, layer_result, layer_shift
from tinycc_ml.ir.ops.registry import BoundCall, FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACC64_BITS,
    activation_range,
    apply_activation,
    channel_multipliers,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_64,
)
from tinycc_ml.ir.ops.windows import (
    as_batch,
    channel_scales,
    check_channel_requantisation,
    check_window_attrs,
    network_result,
    quantised_operand,
    window_lead,
    window_shape,
    window_taps,
)

WINDOW_ATTRS = {"stride": "ints", "dilation": "ints", "padding": "str", "activation": "str", "pads": "ints?"}
NO_RANGES = ("a network's values take their ranges from calibration rows (passes/network_scales.py, "
             "models/network_quantise.py) or from their TFLite types: no interval rule")
NO_ACCUMULATOR = "no accumulator: the op copies, compares or clamps its input's integers"


def check_quantised_layer(x, w, b, filter_axis: int | None, bias_bits: tuple[int, ...],
                          offsets: bool = True) -> None:
    """TFLite's quantised layers: int8 input (int32 bias), or int16 input (the 16x8 kernels: a bias of one of
    ``bias_bits``); int8 filters. ``offsets`` False: the 16x8 kernel ignores zero points, so they must be 0."""
    bits = x.dtype.bits if x.dtype.is_quantised else 0
    need(bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
    quantised_operand(x, "input", bits, zero_point=offsets or bits == 8)
    quantised_operand(w, "filter", 8, axis=filter_axis, zero_point=False)
    widths = (32,) if bits == 8 else bias_bits
    need(b.dtype.is_quantised and b.dtype.bits in widths,
         f"bias must be {' or '.join(f'qi{n}' for n in widths)} for a qi{bits} input, got {b.dtype}")
    quantised_operand(b, "bias", b.dtype.bits, axis=0 if filter_axis is not None else None, zero_point=False)


def check_operands(ts, filter_axis: int, weights_layout: str, bias_bits: tuple[int, ...] = (32, 64)) -> None:
    x, w, b = ts
    need(x.rank == 4 and x.layout == "NHWC", f"input must be an NHWC tensor, got {x}")
    need(w.rank == 4 and w.layout == weights_layout, f"filter must be a {weights_layout} tensor, got {w}")
    need(b.rank == 1 and b.shape[0] == w.shape[filter_axis], f"bias has shape {b.shape}, expected ({w.shape[0]},)")
    if x.dtype.is_quantised:
        check_quantised_layer(x, w, b, filter_axis, bias_bits, offsets=False)
    elif x.dtype.is_fixed:
        check_fixed_layer(x, w, b)
    else:
        need(w.dtype.is_float and b.dtype.is_float, f"a float convolution needs f32 filter and bias, got {w}, {b}")


def requantise_channels(acc: np.ndarray, call: FixedCall, filter_axis: int) -> np.ndarray:
    """acc (..., channels), the sums with the bias: to the output's int8 (int16). The accumulator is the bias's
    width: int32 (requantised by the int32 MultiplyByQuantizedMultiplier) or int64 (16x8 layers: the int64
    one, whose sums TFLite assumes within +-2^47)."""
    x, w, b = call.in_types
    out = call.type.dtype
    channels = acc.shape[-1]
    multipliers, shifts = channel_multipliers(x.dtype.qscales[0], channel_scales(w, channels), out.qscales[0])
    if b.dtype.bits == 64:
        acc = check_range(acc, ACC64_BITS, call.where)
        scaled = multiply_by_quantized_multiplier_64(acc, multipliers, shifts) + out.zero_point
    else:
        acc = check32(acc, call.where)
        scaled = multiply_by_quantized_multiplier(acc, multipliers, shifts) + out.zero_point
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    return np.clip(scaled, lo, hi)


def check_symmetric_output(x, result) -> None:
    """TFLite's 16x8 convolutions add no output zero point: the file's must be 0."""
    if x.dtype.is_quantised and x.dtype.bits == 16:
        need(result.dtype.zero_point == 0, f"a qi16 convolution's output must have zero point 0, got "
                                           f"{result.dtype.zero_point} (TFLite's 16x8 kernel adds none)")


def layer_bits(x) -> int:
    """A quantised layer's output width: its input's (TFLite's int8 and 16x8 kernels)."""
    return x.dtype.bits if x.dtype.is_quantised else 8


def check_fixed_shift(x, w, result) -> None:
    if x.dtype.is_fixed:
        check_shift(layer_shift(x, w, result), "output")


def layer_bound(call: BoundCall, weights_by_channel: np.ndarray) -> tuple[int, int]:
    """A layer's overflow proof: its largest |acc| (bias included) at the input's plus the weights' scale."""
    return channel_bounds(weights_by_channel, call.consts[2], call.bounds[0]), call.scales[0] + call.scales[1]


def layer_output_shift(ts, out, attrs) -> int:
    return layer_shift(ts[0], ts[1], out)


def offset_input(call: FixedCall) -> np.ndarray:
    return call.ins[0].astype(np.float64) - call.in_types[0].dtype.zero_point


def exact_sums(sums: np.ndarray) -> np.ndarray:
    return np.rint(sums).astype(np.int64)


# ---------------------------------------------------------------- conv2d

def _infer_conv2d(ts, attrs, declared):
    need(len(ts) == 3, "conv2d takes input, filter and bias")
    check_operands(ts, 0, "OHWI")
    x, w, _ = ts
    check_window_attrs(attrs)
    need(w.shape[3] == x.shape[3], f"filter {w.shape} reads {w.shape[3]} channels, the input has {x.shape[3]}")
    oh, ow = window_shape(x, w.shape[1:3], attrs)
    result = network_result(x, declared, (x.shape[0], oh, ow, w.shape[0]), "NHWC", layer_bits(x))
    check_channel_requantisation(x, w, result, w.shape[0])
    check_symmetric_output(x, result)
    check_fixed_shift(x, w, result)
    return result


def conv2d_sums(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """x (..., N, H, W, C) by filters (O, KH, KW, C): the window sums (..., N, OH, OW, O), float64."""
    batch, lead = as_batch(x, 4)
    w = w.astype(np.float64)
    sums = None
    for ky, kx, tap in window_taps(batch, w.shape[1:3], attrs):  # tap by tap: no copy of the patches
        term = tap @ w[:, ky, kx, :].T
        sums = term if sums is None else sums + term
    return sums.reshape(*lead, x.shape[-4], *sums.shape[1:3], w.shape[0])


def _fixed_conv2d(call: FixedCall):
    if call.type.dtype.is_fixed:
        return layer_result(exact_sums(conv2d_sums(call.ins[0], call.ins[1], call.attrs)) + call.ins[2], call)
    w = call.ins[1].astype(np.float64) - call.in_types[1].dtype.zero_point
    acc = exact_sums(conv2d_sums(offset_input(call), w, call.attrs)) + call.ins[2]
    return requantise_channels(acc, call, 0)


def _float_conv2d(xs, attrs):
    return apply_activation(conv2d_sums(xs[0], xs[1], attrs) + xs[2], attrs.get("activation", "none"))


def rows_only_first(f):
    """The vectorised form of semantics that take any leading axes: when only the input carries rows."""
    return lambda ins, batched, attrs, n, rank: f(ins, attrs) if batched[0] and not any(batched[1:]) else None


register_op(OpDef(
    "conv2d", 3, _infer_conv2d, _float_conv2d, WINDOW_ATTRS,
    "TFLite's CONV_2D: NHWC input, OHWI filter, a bias per output channel; stride, dilation, padding "
    "(same/valid as TFLite pads) and a fused activation (none/relu/relu6); quantised: TFLite's int8 kernel, "
    "per-channel requantisation",
    evaluate_rows=rows_only_first(_float_conv2d), fixed=_fixed_conv2d,
    acc_bound=lambda call: layer_bound(call, call.consts[1].reshape(call.consts[1].shape[0], -1)),
    output_shift=layer_output_shift, unsupported={"interval": NO_RANGES},
    macs=lambda ts, stored, out: out.size * ts[1].size // ts[1].shape[0],  # each output: a filter's taps
    alias=lambda g, node: window_lead(g, node, g.type(node.inputs[1]).shape[1:3])))


# ---------------------------------------------------------------- depthwise_conv2d

def _infer_depthwise(ts, attrs, declared):
    need(len(ts) == 3, "depthwise_conv2d takes input, filter and bias")
    check_operands(ts, 3, "IHWO", bias_bits=(64,))  # TFLite's 16x8 depthwise kernel reads int64 biases only
    x, w, _ = ts
    check_window_attrs(attrs)
    multiplier = int(attrs["depth_multiplier"])
    need(w.shape[0] == 1 and w.shape[3] == x.shape[3] * multiplier,
         f"filter {w.shape} must be (1, KH, KW, {x.shape[3]} x depth multiplier {multiplier})")
    oh, ow = window_shape(x, w.shape[1:3], attrs)
    result = network_result(x, declared, (x.shape[0], oh, ow, w.shape[3]), "NHWC", layer_bits(x))
    check_channel_requantisation(x, w, result, w.shape[3])
    check_symmetric_output(x, result)
    check_fixed_shift(x, w, result)
    return result


def depthwise_sums(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """x (..., N, H, W, C) by filters (1, KH, KW, C * M): output channel c * M + m reads input channel c."""
    batch, lead = as_batch(x, 4)
    multiplier = int(attrs["depth_multiplier"])
    sums = None
    for ky, kx, tap in window_taps(batch, w.shape[1:3], attrs):  # tap by tap: no copy of the patches
        term = (np.repeat(tap, multiplier, axis=-1) if multiplier > 1 else tap) * w[0, ky, kx].astype(np.float64)
        sums = term if sums is None else sums + term
    return sums.reshape(*lead, x.shape[-4], *sums.shape[1:])


def _fixed_depthwise(call: FixedCall):
    if call.type.dtype.is_fixed:
        return layer_result(exact_sums(depthwise_sums(call.ins[0], call.ins[1], call.attrs)) + call.ins[2], call)
    w = call.ins[1].astype(np.float64) - call.in_types[1].dtype.zero_point
    acc = exact_sums(depthwise_sums(offset_input(call), w, call.attrs)) + call.ins[2]
    return requantise_channels(acc, call, 3)


def _float_depthwise(xs, attrs):
    return apply_activation(depthwise_sums(xs[0], xs[1], attrs) + xs[2], attrs.get("activation", "none"))


register_op(OpDef(
    "depthwise_conv2d", 3, _infer_depthwise, _float_depthwise, {**WINDOW_ATTRS, "depth_multiplier": "int"},
    "TFLite's DEPTHWISE_CONV_2D: NHWC input, a (1, KH, KW, C x M) filter, output channel c M + m filtering "
    "input channel c; stride, dilation, padding, fused activation as conv2d; quantised: TFLite's int8 kernel",
    evaluate_rows=rows_only_first(_float_depthwise), fixed=_fixed_depthwise,
    acc_bound=lambda call: layer_bound(call, call.consts[1].reshape(-1, call.consts[1].shape[3]).T),
    output_shift=layer_output_shift, unsupported={"interval": NO_RANGES},
    macs=lambda ts, stored, out: out.size * ts[1].shape[1] * ts[1].shape[2],  # each output: its window
    alias=lambda g, node: window_lead(g, node, g.type(node.inputs[1]).shape[1:3])))


# ---------------------------------------------------------------- fully_connected

def _infer_fully_connected(ts, attrs, declared):
    need(len(ts) == 3, "fully_connected takes input, weights and bias")
    x, w, b = ts
    need(w.rank == 2 and w.layout == "OI", f"weights must be an OI matrix, got {w}")
    need(b.rank == 1 and b.shape[0] == w.shape[0], f"bias has shape {b.shape}, expected ({w.shape[0]},)")
    need(x.size % w.shape[1] == 0, f"input {x.shape} does not split into rows of {w.shape[1]}")
    need(attrs.get("activation", "none") in ("none", "relu", "relu6"), f"unknown activation {attrs.get('activation')}")
    if x.dtype.is_quantised:  # per-channel weights on the output axis, as recent converters write them
        check_quantised_layer(x, w, b, 0, (32, 64))
    elif x.dtype.is_fixed:
        check_fixed_layer(x, w, b)
    else:
        need(w.dtype.is_float and b.dtype.is_float, f"a float fully_connected needs f32 weights and bias, got {w}, {b}")
    result = network_result(x, declared, (x.size // w.shape[1], w.shape[0]), "NC", layer_bits(x))
    check_channel_requantisation(x, w, result, w.shape[0])
    check_fixed_shift(x, w, result)
    return result


def fully_connected_sums(x: np.ndarray, w: np.ndarray, rank: int) -> np.ndarray:
    lead = x.shape[:x.ndim - rank]
    return (x.reshape(-1, w.shape[1]) @ w.T.astype(np.float64)).reshape(*lead, -1, w.shape[0])


def _fixed_fully_connected(call: FixedCall):
    if call.type.dtype.is_fixed:
        sums = fully_connected_sums(call.ins[0].astype(np.float64), call.ins[1], call.in_types[0].rank)
        return layer_result(exact_sums(sums) + call.ins[2], call)
    w = call.ins[1].astype(np.float64) - call.in_types[1].dtype.zero_point
    acc = exact_sums(fully_connected_sums(offset_input(call), w, call.in_types[0].rank)) + call.ins[2]
    return requantise_channels(acc, call, 0)


def _float_fully_connected(xs, attrs):
    return apply_activation(fully_connected_sums(xs[0], xs[1], np.ndim(xs[0])) + xs[2], attrs.get("activation", "none"))


def _rows_fully_connected(ins, batched, attrs, n, rank):
    if not batched[0] or any(batched[1:]):
        return None
    sums = ins[0].reshape(n, -1, ins[1].shape[1]) @ ins[1].T.astype(np.float64)
    return apply_activation(sums + ins[2], attrs.get("activation", "none"))


register_op(OpDef(
    "fully_connected", 3, _infer_fully_connected, _float_fully_connected, {"activation": "str"},
    "TFLite's FULLY_CONNECTED: the input read as rows of the weights' width (O, I), times the weights, plus the "
    "bias, a fused activation; quantised: TFLite's int8 / 16x8 kernel (requantised per tensor or per output "
    "channel)",
    evaluate_rows=_rows_fully_connected, fixed=_fixed_fully_connected,
    acc_bound=lambda call: layer_bound(call, call.consts[1]), output_shift=layer_output_shift,
    unsupported={"interval": NO_RANGES},
    macs=lambda ts, stored, out: (ts[0].size // ts[1].shape[1]) * ts[1].size))
