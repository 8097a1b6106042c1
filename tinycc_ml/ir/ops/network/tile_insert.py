"""tile_insert: a patch's result written into the whole tensor it is a tile of (patch-based execution,
``passes/patch_stages.py``): the whole (the previous insert's result; absent for the first patch: the zero point
elsewhere) with the NHWC ``tile`` at rows ``at[0]`` and columns ``at[1]`` on.

The result is written over the whole (``alias``: lead 0), so the planner keeps one copy of the whole tensor
while its patches are computed one after the other; then the C copies only the tile's elements.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType


def _infer(ts, attrs, declared):
    tile, *whole = ts
    shape = tuple(int(d) for d in attrs["shape"])
    y0, x0 = (int(a) for a in attrs["at"])
    need(tile.rank == 4 and len(shape) == 4, f"tile {list(tile.shape)} and whole {list(shape)} must be NHWC")
    need(tile.shape[0] == shape[0] and tile.shape[3] == shape[3],
         f"tile {list(tile.shape)} and whole {list(shape)} differ in batch or channels")
    need(0 <= y0 and y0 + tile.shape[1] <= shape[1] and 0 <= x0 and x0 + tile.shape[2] <= shape[2],
         f"a tile {list(tile.shape)} at {[y0, x0]} leaves the whole {list(shape)}")
    need(not whole or (whole[0].shape == shape and whole[0].dtype == tile.dtype),
         f"the whole operand must be {list(shape)} of {tile.dtype}, got {whole[0] if whole else None}")
    return TensorType(shape, tile.dtype, tile.layout)


def fill_value(dtype) -> int:
    """What the first patch's whole holds outside its tile (its later patches write it): the zero point."""
    return int(dtype.zero_point) if dtype.is_quantised else 0


def inserted(ins: list[np.ndarray], attrs: dict, lead: int, fill) -> np.ndarray:
    """The whole (or ``fill``) with the tile at ``at`` (``lead`` row axes before the NHWC axes)."""
    tile = np.asarray(ins[0])
    shape = tuple(int(d) for d in attrs["shape"])
    whole = np.array(ins[1]) if len(ins) > 1 else np.full((*tile.shape[:lead], *shape), fill, dtype=tile.dtype)
    y0, x0 = (int(a) for a in attrs["at"])
    _, th, tw, _ = tile.shape[lead:]
    whole[(..., slice(None), slice(y0, y0 + th), slice(x0, x0 + tw), slice(None))] = tile
    return whole


def _c(em, node) -> list[str]:
    tile_name, *whole = node.inputs
    tile = em.graph.type(tile_name)
    batch, height, width, channels = node.type.shape
    _, th, tw, _ = tile.shape
    y0, x0 = (int(a) for a in node.attrs["at"])
    y = em.var(node.name)
    lines = ["{"]
    plan = em.graph.analyses.memory_plan
    if not whole:
        lines += [f"    for (long i = 0; i < {node.type.size}; ++i)",
                  f"        {y}[i] = {fill_value(node.type.dtype)};"]
    elif plan.get(whole[0]) != plan.get(node.name):  # the planner put it elsewhere: copy the whole first
        lines += [f"    for (long i = 0; i < {node.type.size}; ++i)",
                  f"        {y}[i] = {em.at(whole[0], 'i')};"]
    lines += [f"    for (int b = 0; b < {batch}; ++b)",
              f"    for (int r = 0; r < {th}; ++r) {{",
              f"        const long to = ((long)(b * {height} + {y0} + r) * {width} + {x0}) * {channels};",
              f"        const long from = ((long)(b * {th} + r) * {tw}) * {channels};",
              f"        for (int i = 0; i < {tw * channels}; ++i)",
              f"            {y}[to + i] = {em.at(tile_name, 'from + i')};",
              "    }",
              "}"]
    return lines


register_op(OpDef(
    "tile_insert", (1, 2), _infer,
    lambda xs, a: inserted(xs, a, 0, 0.0),  # float: real 0 elsewhere
    {"at": "ints", "shape": "ints"},
    "a patch's NHWC tile written into the whole tensor (the previous insert's result, or the zero point for the "
    "first patch) at rows at[0], columns at[1] on: patch-based execution (passes/patch_stages.py)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: None,
    fixed=lambda call: inserted(call.ins, call.attrs, np.ndim(call.ins[0]) - 4, fill_value(call.type.dtype)),
    c={"fixed": _c, "float": _c},
    alias=lambda graph, node: {node.inputs[1]: 0} if len(node.inputs) > 1 else {},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

