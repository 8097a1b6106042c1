"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (3-D or 4-D tensors, float32 and int8): data movement lowered onto
existing ops, the source of every output element computed at compile time as TFLite Micro's reference loops walk
them: the input read flat (``reshape``), one zero element appended where padding is written (``pad``), the elements
picked (``take``) and shaped (``reshape``).

TFLite Micro's SpaceToBatchND writes its padding with a ``pad_value`` its Prepare never sets (a persistent buffer left
as the arena holds it: measured 38 in one run), so its padded elements are undefined; here they are TensorFlow's
meaning, real 0: the output's zero point (float 0.0). Every other element is TFLite Micro's.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import need


def _extended(shape) -> tuple[int, int, int, int]:
    """3-D NHC as 4-D NH1C, as TFLite's ExtendShapeSpaceToBatch."""
    return tuple(shape) if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])


def space_to_batch_sources(in_shape, out_shape, block, pads) -> np.ndarray:
    """The flat input index of each output element, -1 where padding is written."""
    n, h, w, c = _extended(in_shape)
    on, oh, ow, _ = _extended(out_shape)
    bh, bw = block
    top, left = pads
    sources = np.full((on, oh, ow, c), -1, dtype=np.int64)
    for out_b in range(on):
        batch, shift = out_b % n, out_b // n
        shift_w, shift_h = shift % bw, shift // bw
        for y in range(oh):
            iy = y * bh + shift_h - top
            for x in range(ow):
                ix = x * bw + shift_w - left
                if 0 <= iy < h and 0 <= ix < w:
                    sources[out_b, y, x] = ((batch * h + iy) * w + ix) * c + np.arange(c)
    return sources.reshape(-1)


def batch_to_space_sources(in_shape, out_shape, block, crops) -> np.ndarray:
    """The flat input index of each output element (-1 where no input element lands: TFLite Micro leaves it)."""
    n, h, w, c = _extended(in_shape)
    on, oh, ow, _ = _extended(out_shape)
    bh, bw = block
    top, left = crops
    sources = np.full((on, oh, ow, c), -1, dtype=np.int64)
    for in_b in range(n):
        out_b, offset = in_b % on, in_b // on
        for y in range(h):
            oy = y * bh + offset // bw - top
            if not 0 <= oy < oh:
                continue
            for x in range(w):
                ox = x * bw + offset % bw - left
                if 0 <= ox < ow:
                    sources[out_b, oy, ox] = ((in_b * h + y) * w + x) * c + np.arange(c)
    return sources.reshape(-1)


def _lower(low, op: str, ins, outs, sources_of) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(x.type_name in ("float32", "int8") and out.type_name == x.type_name,
         f"{op}: {x.type_name} to {out.type_name} (TFLite Micro takes float32 and int8, kept)")
    need(len(x.shape) in (3, 4) and len(out.shape) == len(x.shape),
         f"{op}: tensors of {len(x.shape)} and {len(out.shape)} dimensions (3 or 4, the same)")
    spatial = len(x.shape) - 2
    block = low.ints(ins[1], op, "block shape").ravel().tolist()
    edges = low.ints(ins[2], op, "paddings" if op.startswith("SPACE") else "crops").reshape(-1).tolist()
    need(len(block) == spatial and all(b >= 1 for b in block), f"{op}: block shape {block} for {spatial} spatial "
                                                               "dimensions (each at least 1)")
    need(len(edges) == 2 * spatial and all(e >= 0 for e in edges), f"{op}: {edges} must be {spatial} pairs >= 0")
    block = block + [1] * (2 - spatial)
    before = [edges[0], edges[2] if spatial == 2 else 0]
    size = math.prod(x.shape)
    sources = sources_of(x.shape, out.shape, block, before)
    need(sources.size == math.prod(out.shape), f"{op}: the output {list(out.shape)} does not hold the moved elements")
    if op.startswith("BATCH"):
        need(np.all(sources >= 0), f"{op}: crops {edges} leave output elements no input element lands on")
    name = low.name_of(out)
    flat = low.step("reshape", [low.value(ins[0])], {"shape": [size]}, (size,), x, f"{name}_flat")
    if np.any(sources < 0):  # padding: one element of real 0 after the input's, which the padded positions take
        flat = low.step("pad", [flat], {"pads": [0, 1]}, (size + 1,), x, f"{name}_zero")
        sources = np.where(sources < 0, size, sources)
    taken = low.step("take", [flat], {"axis": 0, "indices": sources.tolist()}, (sources.size,), out,
                     f"{name}_moved")
    low.add("reshape", [taken], {"shape": list(out.shape)}, out)


@tflite_builtin("SPACE_TO_BATCH_ND", 38, inputs=(3, 3))
def lower_space_to_batch(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    pads = low.ints(ins[2], "SPACE_TO_BATCH_ND", "paddings").reshape(-1).tolist()
    block = low.ints(ins[1], "SPACE_TO_BATCH_ND", "block shape").ravel().tolist()
    spatial = len(x.shape) - 2
    if len(pads) == 2 * spatial and len(block) == spatial and all(b >= 1 for b in block):
        padded = [x.shape[1 + k] + pads[2 * k] + pads[2 * k + 1] for k in range(spatial)]
        need(all(p % b == 0 for p, b in zip(padded, block)),
             f"SPACE_TO_BATCH_ND: padded sizes {padded} are not multiples of the block {block}")
        need(out.shape[0] == x.shape[0] * math.prod(block), f"SPACE_TO_BATCH_ND: output batch {out.shape[0]}, the "
                                                           f"block makes {x.shape[0] * math.prod(block)}")
    _lower(low, "SPACE_TO_BATCH_ND", ins, outs, space_to_batch_sources)


@tflite_builtin("BATCH_TO_SPACE_ND", 37, inputs=(3, 3))
def lower_batch_to_space(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    block = low.ints(ins[1], "BATCH_TO_SPACE_ND", "block shape").ravel().tolist()
    if block and all(b >= 1 for b in block):
        need(x.shape[0] % math.prod(block) == 0 and out.shape[0] == x.shape[0] // math.prod(block),
             f"BATCH_TO_SPACE_ND: input batch {x.shape[0]} over the block {block} gives output batch "
             f"{out.shape[0]}")
    _lower(low, "BATCH_TO_SPACE_ND", ins, outs, batch_to_space_sources)
