"""RESIZE_NEAREST_NEIGHBOR: each output position copies the input position nearest to it (an NHWC tensor's height and
width resized; upsampling in U-Nets and segmentation heads).

The op, ``resize_nearest``, takes the source row of every output row and the source column of every output column
(``rows``, ``cols``); the TFLite lowering computes them as TFLite Micro's GetNearestNeighbor does, in float32: scale
input / output size (align_corners: (input - 1) / (output - 1)), the position (plus 0.5 with half_pixel_centers)
times the scale, floored (align_corners: rounded, halves away from zero), at most the last index (at least 0 with
half_pixel_centers). The elements are copied: a quantised result keeps its input's quantisation.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

RESIZE_NEAREST_OPTIONS = 74  # schema.fbs' BuiltinOptions: ResizeNearestNeighborOptions


def _infer(ts, attrs, declared):
    (x,) = ts
    rows, cols = [int(r) for r in attrs["rows"]], [int(c) for c in attrs["cols"]]
    need(x.rank == 4, f"input must be NHWC, got shape {list(x.shape)}")
    need(rows and cols, "no output rows or columns")
    need(all(0 <= r < x.shape[1] for r in rows) and all(0 <= c < x.shape[2] for c in cols),
         f"source rows {rows} / columns {cols} leave the input's {x.shape[1]} x {x.shape[2]}")
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be resized")
    need(declared is None or declared.dtype == x.dtype,
         f"a resize copies its input's elements: the result keeps {x.dtype}, not "
         f"{declared.dtype if declared is not None else None}")
    return TensorType((x.shape[0], len(rows), len(cols), x.shape[3]), x.dtype, "NHWC")


def _resized(value, attrs) -> np.ndarray:
    """Rows of NHWC tensors (any leading axes kept)."""
    value = np.asarray(value)
    rows, cols = np.asarray(attrs["rows"], np.int64), np.asarray(attrs["cols"], np.int64)
    return np.take(np.take(value, rows, axis=-3), cols, axis=-2)


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    _, height, width, depth = x.shape
    _, out_h, out_w, _ = node.type.shape
    rows = em.add_const_array(em.sym(f"{node.name}_rows"), np.asarray(node.attrs["rows"], np.int16), "int16_t",
                              f"%{node.name}: the input row each output row copies")
    cols = em.add_const_array(em.sym(f"{node.name}_cols"), np.asarray(node.attrs["cols"], np.int16), "int16_t",
                              f"%{node.name}: the input column each output column copies")
    read = em.target.read_const
    return [f"for (int nb = 0; nb < {x.shape[0]}; ++nb)",
            f"for (int oy = 0; oy < {out_h}; ++oy) {{",
            f"    const long row = ((long)nb * {height} + {read(rows, 'oy', 'int16_t')}) * {width};",
            f"    for (int ox = 0; ox < {out_w}; ++ox) {{",
            f"        const long from = (row + {read(cols, 'ox', 'int16_t')}) * {depth};",
            f"        const long to = (((long)nb * {out_h} + oy) * {out_w} + ox) * {depth};",
            f"        for (int oc = 0; oc < {depth}; ++oc)",
            f"            {em.var(node.name)}[to + oc] = {em.at(x_name, 'from + oc')};",
            "    }",
            "}"]


register_op(OpDef(
    "resize_nearest", 1, _infer, lambda xs, a: _resized(xs[0], a), {"rows": "ints", "cols": "ints"},
    "TFLite's RESIZE_NEAREST_NEIGHBOR: output (y, x) copies input (rows[y], cols[x]) of an NHWC tensor; quantised: "
    "the same integers",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _resized(ins[0], attrs),
    fixed=lambda call: _resized(call.ins[0], call.attrs), c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def nearest_sources(input_size: int, output_size: int, align_corners: bool, half_pixel_centers: bool) -> list[int]:
    """TFLite Micro's GetNearestNeighbor of every output index, in its float32 arithmetic."""
    f32 = np.float32
    if align_corners and output_size > 1:
        scale = f32(input_size - 1) / f32(output_size - 1)
    else:
        scale = f32(input_size) / f32(output_size)
    offset = f32(0.5) if half_pixel_centers else f32(0.0)
    sources = []
    for k in range(output_size):
        position = (f32(k) + offset) * scale
        if align_corners:  # TfLiteRound: halves away from zero (the position is not negative; float64 adds exactly)
            index = math.floor(float(position) + 0.5)
        else:
            index = math.floor(float(position))
        index = min(index, input_size - 1)
        sources.append(max(0, index) if half_pixel_centers else index)
    return sources


@tflite_builtin("RESIZE_NEAREST_NEIGHBOR", 97, options=RESIZE_NEAREST_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(len(x.shape) == 4, f"RESIZE_NEAREST_NEIGHBOR: an input of {len(x.shape)} dimensions (TFLite Micro takes 4)")
    size = low.ints(ins[1], "RESIZE_NEAREST_NEIGHBOR", "size").ravel().tolist()
    need(len(size) == 2 and min(size) >= 1, f"RESIZE_NEAREST_NEIGHBOR: size {size}: two positive sizes")
    align = bool(options.scalar(0, "B", 0, "align_corners")) if options is not None else False
    half = bool(options.scalar(1, "B", 0, "half_pixel_centers")) if options is not None else False
    attrs = {"rows": nearest_sources(int(x.shape[1]), size[0], align, half),
             "cols": nearest_sources(int(x.shape[2]), size[1], align, half)}
    low.add("resize_nearest", [low.value(ins[0])], attrs, out)
