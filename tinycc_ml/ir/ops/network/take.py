"""take: the elements at constant indices along one axis (numpy's take), the other axes kept; the integers copied, a
quantised result keeps its input's quantisation.

TFLite's MIRROR_PAD lowers onto it, one take per padded axis, the indices TFLite Micro's GetInputDimension gives each
output position (REFLECT: the edge not repeated; SYMMETRIC: repeated; paddings wider than the axis clamped as it
clamps them).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType

MIRROR_PAD_OPTIONS = 77  # schema.fbs' BuiltinOptions: MirrorPadOptions { mode: REFLECT 0, SYMMETRIC 1 }


def _infer(ts, attrs, declared):
    (x,) = ts
    axis = int(attrs["axis"])
    indices = [int(i) for i in attrs["indices"]]
    need(0 <= axis < x.rank, f"axis {axis} of a {x.rank}-dimensional tensor")
    need(indices and all(0 <= i < x.shape[axis] for i in indices),
         f"indices {indices[:8]} leave axis {axis} of {x.shape[axis]}")
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be gathered")
    need(declared is None or declared.dtype == x.dtype,
         f"take copies its input's elements: the result keeps {x.dtype}, not "
         f"{declared.dtype if declared is not None else None}")
    shape = tuple(len(indices) if k == axis else d for k, d in enumerate(x.shape))
    return TensorType(shape, x.dtype, declared.layout if declared is not None else x.layout)


def _taken(value, attrs, rank: int) -> np.ndarray:
    value = np.asarray(value)
    return np.take(value, np.asarray(attrs["indices"], np.int64), axis=value.ndim - rank + int(attrs["axis"]))


def regular_blocks(indices) -> tuple[int, int, int, int] | None:
    """(start, blocks, length, step) when the indices are ``blocks`` runs of ``length`` consecutive positions whose
    starts are ``start + b * step`` (a Framer's frames; a copy; a strided or reversed axis: runs of one), else
    None: the C then computes the positions instead of reading a table of them."""
    indices = np.asarray(indices, np.int64)
    if indices.size < 2:
        return None
    steps = np.diff(indices)
    if np.all(steps == steps[0]) and steps[0] != 1:  # one position a run, a constant step
        return int(indices[0]), int(indices.size), 1, int(steps[0])
    length = int(np.argmax(steps != 1)) + 1 if np.any(steps != 1) else int(indices.size)
    if indices.size % length:
        return None
    blocks = indices.size // length
    starts = indices[::length]
    step = int(starts[1] - starts[0]) if blocks > 1 else length
    expected = (starts[0] + np.arange(blocks)[:, None] * step + np.arange(length)[None, :]).ravel()
    return (int(indices[0]), blocks, length, step) if np.array_equal(indices, expected) else None


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    axis = int(node.attrs["axis"])
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    count = len(node.attrs["indices"])
    regular = regular_blocks(node.attrs["indices"])
    if regular is not None:
        start, blocks, length, step = regular
        return [f"for (long o = 0; o < {outer}; ++o)",
                f"for (long b = 0; b < {blocks}; ++b)",
                f"for (long t = 0; t < {length}; ++t) {{ /* runs of {length} from {start} + {step} b */",
                f"    const long from = (o * {x.shape[axis]} + {start} + b * {step} + t) * {inner};",
                f"    const long to = (o * {count} + b * {length} + t) * {inner};",
                f"    for (long e = 0; e < {inner}; ++e)",
                f"        {em.var(node.name)}[to + e] = {em.at(x_name, 'from + e')};",
                "}"]
    indices = np.asarray(node.attrs["indices"], np.int16 if x.shape[axis] < 32768 else np.int32)
    ctype = "int16_t" if indices.dtype == np.int16 else "int32_t"
    table = em.add_const_array(em.sym(f"{node.name}_indices"), indices, ctype,
                               f"%{node.name}: the input position each output position copies")
    source = em.target.read_const(table, "t", ctype)
    return [f"for (long o = 0; o < {outer}; ++o)",
            f"for (long t = 0; t < {count}; ++t) {{",
            f"    const long from = (o * {x.shape[axis]} + (long){source}) * {inner};",
            f"    const long to = (o * {count} + t) * {inner};",
            f"    for (long e = 0; e < {inner}; ++e)",
            f"        {em.var(node.name)}[to + e] = {em.at(x_name, 'from + e')};",
            "}"]


register_op(OpDef(
    "take", 1, _infer, lambda xs, attrs: _taken(xs[0], attrs, np.ndim(xs[0])), {"axis": "int", "indices": "ints"},
    "the elements at constant indices along an axis (numpy's take); quantised: the integers copied",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _taken(ins[0], attrs, rank),
    fixed=lambda call: _taken(call.ins[0], call.attrs, call.in_types[0].rank), c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def mirror_sources(size: int, before: int, after: int, offset: int) -> list[int]:
    """TFLite Micro's GetInputDimension for every position of an axis padded by (before, after); ``offset`` 1 for
    REFLECT, 0 for SYMMETRIC."""
    sources = []
    for position in range(before + size + after):
        if position < before:
            original = before + offset - 1
            sources.append(original - min(position, original - offset))
        elif position - before >= size:
            beyond = position - before - size
            original = size - (1 + offset)
            sources.append(original - min(beyond, original))
        else:
            sources.append(position - before)
    return sources


@tflite_builtin("MIRROR_PAD", 100, options=MIRROR_PAD_OPTIONS, inputs=(2, 2))
def lower_mirror_pad(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(x.type_name in ("float32", "int8"), f"MIRROR_PAD: {x.type_name} tensors (TFLite Micro takes float32, int8)")
    mode = int(options.scalar(0, "b", 0, "mode")) if options is not None else 0
    need(mode in (0, 1), f"MIRROR_PAD: mode {mode} (REFLECT 0 or SYMMETRIC 1)")
    pads = low.ints(ins[1], "MIRROR_PAD", "paddings")
    rank = len(x.shape)
    need(pads.shape == (rank, 2) and int(pads.min(initial=0)) >= 0,
         f"MIRROR_PAD: paddings {pads.tolist()} for {rank} dimensions")
    offset = 1 if mode == 0 else 0
    for k, (before, after) in enumerate(pads.tolist()):  # sources TFLite Micro would read outside the axis
        need(before <= x.shape[k] - offset and (after == 0 or x.shape[k] >= 1 + offset),
             f"MIRROR_PAD: padding ({before}, {after}) of axis {k} of {x.shape[k]} reads outside it")
    value, shape = low.value(ins[0]), list(x.shape)
    padded = [k for k in range(rank) if pads[k].any()]
    name = low.name_of(out)
    for n, k in enumerate(padded):
        indices = mirror_sources(x.shape[k], int(pads[k][0]), int(pads[k][1]), offset)
        shape[k] = len(indices)
        attrs = {"axis": k, "indices": indices}
        if n < len(padded) - 1:
            value = low.step("take", [value], attrs, shape, out, f"{name}_axis{k}")
        else:
            low.add("take", [value], attrs, out)
    if not padded:  # nothing to pad: a copy (the output is a value of its own)
        low.add("take", [value], {"axis": 0, "indices": list(range(x.shape[0]))}, out)
