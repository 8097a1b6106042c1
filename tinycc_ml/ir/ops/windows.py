"""What the network ops share: window geometry (TFLite's SAME/VALID padding, or explicit pads: ONNX's,
``pads`` = [top, left, bottom, right] with padding "explicit"), patches of NHWC
tensors, and the type rule of a network op's result (f32, or TFLite's per-tensor quantised int8)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.ops.tflite_arith import ACTIVATIONS, quantize_multiplier
from tinycc_ml.ir.types import F32, PER_TENSOR, TensorType

PADDINGS = ("same", "valid", "explicit")
MAX_LEFT_SHIFT = 31  # a requantisation's left shift of an int32 (C shifts a uint32 by at most 31)


def check_window_attrs(attrs: dict, keys=("stride", "dilation")) -> None:
    for key in keys:
        if key in attrs:
            value = list(attrs[key])
            need(len(value) == 2 and all(int(v) >= 1 for v in value), f"{key} must be two integers >= 1, got {value}")
    need(attrs.get("padding") in PADDINGS,
         f"padding must be one of {', '.join(PADDINGS)}, got {attrs.get('padding')!r}")
    if attrs["padding"] == "explicit":
        pads = list(attrs.get("pads", []))
        need(len(pads) == 4 and all(int(p) >= 0 for p in pads),
             f"explicit padding needs pads [top, left, bottom, right] >= 0, got {pads}")
    need(attrs.get("activation", "none") in ACTIVATIONS,
         f"activation must be one of {', '.join(ACTIVATIONS)}, got {attrs.get('activation')!r}")


def out_size(size: int, window: int, stride: int, dilation: int, padding: str) -> int:
    """TFLite's ComputeOutSize."""
    effective = (window - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == "same" else (size - effective + stride) // stride


def pad_before(size: int, window: int, stride: int, dilation: int, out: int) -> int:
    """TFLite's ComputePadding: the padding above / left of the input (any odd one goes below / right)."""
    effective = (window - 1) * dilation + 1
    return max(0, ((out - 1) * stride + effective - size) // 2)


def axis_geometry(size: int, window: int, stride: int, dilation: int, attrs: dict, axis: int) -> tuple[int, int]:
    """(output size, padding before) along ``axis`` (0: height, 1: width)."""
    if attrs["padding"] == "explicit":
        pads = [int(p) for p in attrs["pads"]]
        effective = (window - 1) * dilation + 1
        return (size + pads[axis] + pads[axis + 2] - effective) // stride + 1, pads[axis]
    out = out_size(size, window, stride, dilation, attrs["padding"])
    return out, pad_before(size, window, stride, dilation, out)


WINDOW_BLOCK = 2  # output positions an implementation may compute at once (the Cortex-M4's pairs)


def window_lead(graph, node, window: tuple[int, int]) -> dict[str, int]:
    """The in-place rule of TFLite's windowed ops (``OpDef.alias``) in their quantised kernels, NHWC: every
    implementation computes the output positions in raster order (batch, row, column), at most ``WINDOW_BLOCK``
    at once with their reads and writes interleaved, and reads for a position only its window's taps inside the
    input; so while position q is read, the writes reach at most position q + WINDOW_BLOCK - 1, and they stay
    below the lowest element q reads when the output starts at most the returned lead after the input. (The
    float and power-of-two dialects' kernels keep their own orders: none.)"""
    x_name = node.inputs[0]
    x = graph.type(x_name)
    if not (x.dtype.is_quantised and node.type.dtype.is_quantised) or x.rank != 4 or node.type.rank != 4:
        return {}
    stride = [int(s) for s in node.attrs.get("stride", [1, 1])]
    dilation = [int(d) for d in node.attrs.get("dilation", [1, 1])]
    pads = [axis_geometry(n, int(k), s, d, node.attrs, a)[1]
            for a, (n, k, s, d) in enumerate(zip(x.shape[1:3], window, stride, dilation))]
    return {x_name: raster_lead(x.shape, node.type.shape, stride, pads)}


def raster_lead(x_shape, out_shape, stride, pads, block: int = WINDOW_BLOCK) -> int:
    """``window_lead``'s bound for NHWC shapes, the windows' strides and padding before them: the least, over the
    output positions q, of the lowest input element q reads less the output elements up to position q + block."""
    batch, height, width, channels = x_shape
    _, out_h, out_w, out_c = out_shape
    b, oy, ox = np.meshgrid(np.arange(batch), np.arange(out_h), np.arange(out_w), indexing="ij")
    lowest_read = ((b * height + np.maximum(oy * stride[0] - pads[0], 0)) * width
                   + np.maximum(ox * stride[1] - pads[1], 0)).reshape(-1) * channels
    positions = lowest_read.size
    written = np.minimum(np.arange(positions) + block, positions) * out_c
    return int(np.min(lowest_read - written))


def element_lead(graph, node) -> dict[str, int]:
    """The in-place rule of an element-wise op (``OpDef.alias``): each element's result is written after its
    operands' elements at the same index are read, and no other: over any operand of the result's size, lead 0."""
    return {i: 0 for i in node.inputs if graph.type(i).size == node.type.size}


def window_shape(x: TensorType, window: tuple[int, int], attrs: dict) -> tuple[int, int]:
    stride = attrs.get("stride", [1, 1])
    dilation = attrs.get("dilation", [1, 1])
    sizes = tuple(axis_geometry(x.shape[1 + i], int(window[i]), int(stride[i]), int(dilation[i]), attrs, i)[0]
                  for i in range(2))
    need(all(s >= 1 for s in sizes), f"a {window[0]}x{window[1]} window leaves no output of input {x.shape}")
    if attrs["padding"] == "explicit":  # a window wholly in the padding would average or maximise nothing
        need(all(int(attrs["pads"][a + 2 * side]) < (int(window[a]) - 1) * int(dilation[a]) + 1
                 for a in range(2) for side in range(2)),
             f"pads {list(attrs['pads'])} reach past a {window[0]}x{window[1]} window")
    return sizes


def window_taps(x: np.ndarray, window: tuple[int, int], attrs: dict, fill: float = 0.0):
    """(batch, H, W, C): for each tap (ky, kx) of the window, the (batch, OH, OW, C) view of the elements it reads at
    every output position, ``fill`` outside the input (to accumulate tap by tap without copying the patches)."""
    _, height, width, _ = x.shape
    stride = [int(s) for s in attrs.get("stride", [1, 1])]
    dilation = [int(d) for d in attrs.get("dilation", [1, 1])]
    geometry = [axis_geometry(n, int(k), st, d, attrs, a)
                for a, (n, k, st, d) in enumerate(zip((height, width), window, stride, dilation))]
    outs, before = [g[0] for g in geometry], [g[1] for g in geometry]
    after = [max(0, (o - 1) * st + (int(k) - 1) * d + 1 - n - b)
             for n, k, st, d, o, b in zip((height, width), window, stride, dilation, outs, before)]
    padded = np.pad(x, ((0, 0), (before[0], after[0]), (before[1], after[1]), (0, 0)), constant_values=fill)
    for ky in range(int(window[0])):
        for kx in range(int(window[1])):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            yield ky, kx, padded[:, y0:y0 + (outs[0] - 1) * stride[0] + 1:stride[0],
                                 x0:x0 + (outs[1] - 1) * stride[1] + 1:stride[1], :]


def patches(x: np.ndarray, window: tuple[int, int], attrs: dict, fill: float = 0.0) -> np.ndarray:
    """(batch, H, W, C) -> (batch, OH, OW, KH, KW, C): every window's elements, ``fill`` outside the input."""
    _, height, width, _ = x.shape
    stride = [int(s) for s in attrs.get("stride", [1, 1])]
    dilation = [int(d) for d in attrs.get("dilation", [1, 1])]
    geometry = [axis_geometry(n, int(k), s, d, attrs, a)
                for a, (n, k, s, d) in enumerate(zip((height, width), window, stride, dilation))]
    outs, before = [g[0] for g in geometry], [g[1] for g in geometry]
    after = [max(0, (o - 1) * s + (int(k) - 1) * d + 1 - n - b)
             for n, k, s, d, o, b in zip((height, width), window, stride, dilation, outs, before)]
    padded = np.pad(x, ((0, 0), (before[0], after[0]), (before[1], after[1]), (0, 0)), constant_values=fill)
    rows = []
    for ky in range(int(window[0])):
        cols = []
        for kx in range(int(window[1])):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            cols.append(padded[:, y0:y0 + (outs[0] - 1) * stride[0] + 1:stride[0],
                               x0:x0 + (outs[1] - 1) * stride[1] + 1:stride[1], :])
        rows.append(np.stack(cols, axis=3))
    return np.stack(rows, axis=3)


def as_batch(value: np.ndarray, rank: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """A value with leading (row) axes before its ``rank`` own axes: those and its own first (batch) axis
    merged into one, and the leading axes (to shape the result back)."""
    lead = value.shape[:value.ndim - rank]
    return value.reshape((-1, *value.shape[value.ndim - rank + 1:])), lead


def network_result(x: TensorType, declared: TensorType | None, shape: tuple[int, ...], layout: str,
                   bits: int = 8) -> TensorType:
    """f32 in, f32 out; a quantised input gives the declared per-tensor quantised result; a fixed-point input
    (the project's dialect) the declared fixed-point result of its width."""
    if x.dtype.is_fixed:
        need(declared is not None and declared.dtype.is_fixed and declared.dtype.bits == x.dtype.bits,
             f"a fixed-point result needs a declared fx{x.dtype.bits} type, got {declared}")
        return TensorType(shape, declared.dtype, layout)
    if x.dtype.is_quantised:
        need(declared is not None and declared.dtype.is_quantised and declared.dtype.axis == PER_TENSOR
             and declared.dtype.bits == bits,
             f"a quantised result needs a declared per-tensor qi{bits} type, got {declared}")
        return TensorType(shape, declared.dtype, layout)
    if x.dtype.is_integer:  # a plain integer: the op computes in its type
        need(declared is None or declared.dtype == x.dtype, f"a {x.dtype} operand gives {x.dtype}, not {declared}")
        return TensorType(shape, x.dtype, layout)
    need(x.dtype.is_float, f"operand must be f32, fixed point, quantised or a plain integer, got {x.dtype}")
    return TensorType(shape, F32, layout)


def keeps_type(x: TensorType, result: TensorType, what: str) -> None:
    """A fixed-point op that copies, compares or averages its input's integers keeps its type."""
    if x.dtype.is_fixed:
        need(result.dtype == x.dtype, f"a fixed-point {what} keeps its input's type {x.dtype}, the result declares "
                                      f"{result.dtype}")


def quantised_operand(t: TensorType, what: str, bits: int, axis: int | None = None, zero_point: bool = True) -> None:
    """A quantised operand: its width, its axis of per-channel scales (None: per tensor only), and
    zero_point=False for operands TFLite requires symmetric (filters, biases)."""
    need(t.dtype.is_quantised and t.dtype.bits == bits, f"{what} must be qi{bits}, got {t.dtype}")
    allowed = (PER_TENSOR,) if axis is None else (PER_TENSOR, axis)
    need(t.dtype.axis in allowed, f"{what} is quantised on axis {t.dtype.axis}, expected one of {list(allowed)}")
    need(zero_point or t.dtype.zero_point == 0, f"{what} must have zero point 0, got {t.dtype.zero_point}")


def channel_scales(t: TensorType, channels: int) -> np.ndarray:
    """One scale per output channel (a per-tensor scale repeated)."""
    scales = np.asarray(t.dtype.qscales, dtype=np.float64)
    return np.broadcast_to(scales, (channels,)) if len(scales) == 1 else scales


def check_requantisation(reals, what: str) -> None:
    """Each real multiplier (input scale x filter scale / output scale) as TFLite quantises it: its left shift
    within C's shifts of an int32 (scales far apart, such as a denormal output scale, are refused)."""
    worst = max(float(r) for r in np.atleast_1d(reals))
    need(np.isfinite(worst) and quantize_multiplier(worst)[1] <= MAX_LEFT_SHIFT,
         f"{what}: the requantisation multiplier {worst:.3g} needs a left shift over {MAX_LEFT_SHIFT} bits "
         "(the scales are too far apart)")


def check_channel_requantisation(x: TensorType, w: TensorType, result: TensorType, channels: int) -> None:
    if x.dtype.is_quantised:
        reals = [x.dtype.qscales[0] * s / result.dtype.qscales[0] for s in channel_scales(w, channels)]
        check_requantisation(reals, "output")
