"""RESIZE_BILINEAR: an NHWC tensor's height and width resized by linear interpolation between the four nearest inputs,
as TFLite's reference kernels compute it (the attributes: the output ``size``, ``align_corners``,
``half_pixel_centers``).

Float: ResizeBilinear in float32: each output row's source position (y + 0.5) scale - 0.5 (half pixel centres) or
y scale, its floor (at least 0) and ceiling (at most the last row), the four products added in the kernel's order.
int8: ResizeBilinearInteger: the scales in 10-bit fixed point (rounded integer divisions), positions at 2^-10, the
four weighted values summed in int64 at 2^-20, rounded half away from zero by a truncating division, stored as int8
(the integers, so the result keeps the input's quantisation). Both tables (sources and weights per output row and
column) are computed at compile time. The project's fixed point (fx8 / fx16): the same integer kernel on the
stored integers, the result at the input's type (a weighted mean of four integers, rounded: never out of their
range); against the float kernel the positions' rounding to 2^-10 of a pixel (at most 2^-11 times the index's
distance from the origin, TFLite's rounded scale) times the neighbours' difference, plus half a step.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

RESIZE_BILINEAR_OPTIONS = 15  # schema.fbs' BuiltinOptions: ResizeBilinearOptions
F32 = np.float32


def float_axis(in_size: int, out_size: int, align: bool, half: bool):
    """Per output index: (source position as float32, lower index, upper index)."""
    scale = F32(in_size) / F32(out_size)
    if align and out_size > 1:
        scale = F32(in_size - 1) / F32(out_size - 1)
    rows = []
    for k in range(out_size):
        position = (F32(k) + F32(0.5)) * scale - F32(0.5) if half else F32(k) * scale
        rows.append((position, max(int(math.floor(position)), 0), min(int(math.ceil(position)), in_size - 1)))
    return rows


def integer_axis(in_size: int, out_size: int, align: bool, half: bool):
    """Per output index: (source position at 2^-10, lower index, upper index), in TFLite's integer arithmetic."""
    scale = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    rows = []
    for k in range(out_size):
        position = k * scale + scale // 2 - (1 << 9) if half else k * scale
        lower = max(int(position / (1 << 10)), 0)  # C's division: towards zero
        upper = min(int((position + (1 << 10) - 1) / (1 << 10)), in_size - 1)
        rows.append((position, lower, upper))
    return rows


def _axes(x_shape, attrs, integer: bool):
    align, half = bool(int(attrs["align_corners"])), bool(int(attrs["half_pixel_centers"]))
    make = integer_axis if integer else float_axis
    oh, ow = (int(v) for v in attrs["size"])
    return make(x_shape[1], oh, align, half), make(x_shape[2], ow, align, half)


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.rank == 4, f"input must be NHWC, got shape {list(x.shape)}")
    oh, ow = (int(v) for v in attrs["size"])
    need(oh >= 1 and ow >= 1, f"size {attrs['size']}: two positive sizes")
    need(not (int(attrs["align_corners"]) and int(attrs["half_pixel_centers"])),
         "align_corners and half_pixel_centers exclude each other (TFLite Micro refuses both)")
    if x.dtype.is_quantised or x.dtype.is_fixed:
        need(x.dtype.bits in ((8, 16) if x.dtype.is_fixed else (8,)) and x.dtype.axis == PER_TENSOR,
             f"input must be per-tensor qi8, fx8 or fx16, got {x.dtype}")
        need(declared is None or declared.dtype == x.dtype,
             f"the integer kernel interpolates the stored integers: the result keeps {x.dtype}")
    else:
        need(x.dtype.is_float, f"operand must be f32, qi8, fx8 or fx16, got {x.dtype}")
    return TensorType((x.shape[0], oh, ow, x.shape[3]), x.dtype, "NHWC")


def _float(values, attrs) -> np.ndarray:
    values = np.asarray(values, F32)
    rows, cols = _axes(values.shape[-4:], attrs, integer=False)
    one = F32(1)
    out = np.empty((*values.shape[:-3], len(rows), len(cols), values.shape[-1]), F32)
    for y, (iy, y0, y1) in enumerate(rows):
        dy = iy - F32(y0)
        for x, (ix, x0, x1) in enumerate(cols):
            dx = ix - F32(x0)
            v = values[..., y0, x0, :] * (one - dy) * (one - dx) + values[..., y1, x0, :] * dy * (one - dx)
            v = v + values[..., y0, x1, :] * (one - dy) * dx
            out[..., y, x, :] = v + values[..., y1, x1, :] * dy * dx
    return out


def _fixed(call) -> np.ndarray:
    values = np.asarray(call.ins[0], np.int64)
    bits = call.in_types[0].dtype.bits
    rows, cols = _axes(call.in_types[0].shape, call.attrs, integer=True)
    unit = 1 << 10
    out = np.empty((*values.shape[:-3], len(rows), len(cols), values.shape[-1]), np.int64)
    for y, (iy, y0, y1) in enumerate(rows):
        wy = iy - unit * y0
        for x, (ix, x0, x1) in enumerate(cols):
            wx = ix - unit * x0
            total = (values[..., y0, x0, :] * (unit - wy) * (unit - wx) + values[..., y1, x0, :] * wy * (unit - wx)
                     + values[..., y0, x1, :] * (unit - wy) * wx + values[..., y1, x1, :] * wy * wx)
            nudged = total + np.where(total > 0, 1 << 19, -(1 << 19))
            rounded = np.where(nudged >= 0, nudged >> 20, -((-nudged) >> 20))  # C's division: towards zero
            half = 1 << (bits - 1)
            out[..., y, x, :] = ((rounded + half) & (2 * half - 1)) - half  # static_cast<int8_t> (int16_t)
    return out


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    _, height, width, depth = x.shape
    integer = not x.dtype.is_float
    rows, cols = _axes(x.shape, node.attrs, integer)
    tables = {}
    for axis, entries in (("rows", rows), ("cols", cols)):
        bounds = np.asarray([(lo, hi) for _, lo, hi in entries], np.int16).reshape(-1)
        tables[f"{axis}_bounds"] = em.add_const_array(em.sym(f"{node.name}_{axis}_bounds"), bounds, "int16_t",
                                                      f"%{node.name}: each output {axis[:-1]}'s two sources")
        positions = np.asarray([p for p, _, _ in entries], np.int32 if integer else F32)
        tables[f"{axis}_at"] = em.add_const_array(em.sym(f"{node.name}_{axis}_at"), positions,
                                                  "int32_t" if integer else "float",
                                                  f"%{node.name}: each output {axis[:-1]}'s source position")
    rd = em.target.read_const

    def at(y, x_) -> str:
        return em.at(x_name, f"((long)nb * {height} + {y}) * {width * depth} + (long){x_} * {depth} + oc")

    lines = [f"for (int nb = 0; nb < {x.shape[0]}; ++nb)",
             f"for (int oy = 0; oy < {len(rows)}; ++oy) {{",
             f"    const int y0 = {rd(tables['rows_bounds'], '2 * oy', 'int16_t')}, "
             f"y1 = {rd(tables['rows_bounds'], '2 * oy + 1', 'int16_t')};",
             f"    for (int ox = 0; ox < {len(cols)}; ++ox) {{",
             f"        const int x0 = {rd(tables['cols_bounds'], '2 * ox', 'int16_t')}, "
             f"x1 = {rd(tables['cols_bounds'], '2 * ox + 1', 'int16_t')};",
             f"        const long to = (((long)nb * {len(rows)} + oy) * {len(cols)} + ox) * {depth};"]
    if integer:
        lines += [f"        const int64_t wy = (int64_t){rd(tables['rows_at'], 'oy', 'int32_t')} - 1024 * (int64_t)y0;",
                  f"        const int64_t wx = (int64_t){rd(tables['cols_at'], 'ox', 'int32_t')} - 1024 * (int64_t)x0;",
                  f"        for (int oc = 0; oc < {depth}; ++oc) {{",
                  f"            const int64_t total = (int64_t){at('y0', 'x0')} * (1024 - wy) * (1024 - wx) + "
                  f"(int64_t){at('y1', 'x0')} * wy * (1024 - wx) + (int64_t){at('y0', 'x1')} * (1024 - wy) * wx + "
                  f"(int64_t){at('y1', 'x1')} * wy * wx;",
                  "            const int64_t nudged = total + (total > 0 ? INT64_C(524288) : -INT64_C(524288));",
                  f"            {em.var(node.name)}[to + oc] = (int{x.dtype.bits}_t)(nudged / INT64_C(1048576));",
                  "        }"]
    else:
        lines += [f"        const float dy = {rd(tables['rows_at'], 'oy', 'float')} - (float)y0;",
                  f"        const float dx = {rd(tables['cols_at'], 'ox', 'float')} - (float)x0;",
                  f"        for (int oc = 0; oc < {depth}; ++oc)",
                  f"            {em.var(node.name)}[to + oc] = {at('y0', 'x0')} * (1.0f - dy) * (1.0f - dx) + "
                  f"{at('y1', 'x0')} * dy * (1.0f - dx) + {at('y0', 'x1')} * (1.0f - dy) * dx + "
                  f"{at('y1', 'x1')} * dy * dx;"]
    return lines + ["    }", "}"]


register_op(OpDef(
    "resize_bilinear", 1, _infer, lambda xs, attrs: _float(xs[0], attrs),
    {"size": "ints", "align_corners": "int", "half_pixel_centers": "int"},
    "TFLite's RESIZE_BILINEAR of an NHWC tensor to ``size``; int8, fx8, fx16: its 10-bit fixed-point kernel",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float(ins[0], attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("RESIZE_BILINEAR", 23, options=RESIZE_BILINEAR_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    need(len(x.shape) == 4, f"RESIZE_BILINEAR: an input of {len(x.shape)} dimensions (TFLite Micro takes 4)")
    need(x.type_name in ("float32", "int8"),
         f"RESIZE_BILINEAR: {x.type_name} tensors (TFLite Micro takes float32, int8)")
    size = low.ints(ins[1], "RESIZE_BILINEAR", "size").ravel().tolist()
    need(len(size) == 2 and min(size) >= 1, f"RESIZE_BILINEAR: size {size}: two positive sizes")
    align = int(bool(options.scalar(2, "B", 0, "align_corners"))) if options is not None else 0
    half = int(bool(options.scalar(3, "B", 0, "half_pixel_centers"))) if options is not None else 0
    low.add("resize_bilinear", [low.value(ins[0])], {"size": size, "align_corners": align, "half_pixel_centers": half},
            low.tensors[outs[0]])
