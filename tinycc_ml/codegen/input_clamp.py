"""The 16-bit input clamp every microcontroller target shares: 16-bit compares in place of c_fixed's
int32 ones (the same expression, so the same result); per-feature bounds interleaved (lo, hi) in flash
and walked by one pointer (layouts.InterleavedBounds, which streaming reads back). Targets fuse more
into the same loop (avr.kernels.kernel_clip); arm.m0_kernels and plug-ins take it as it is."""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen.emitter import CEmitter
from tinycc_ml.codegen.layouts import InterleavedBounds
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.arith import storage_clip_bounds


def clip_ok(em: CEmitter, node: Node) -> bool:
    """A clamp of a computed int16 vector to bounds int16 storage can hold, at the same scale."""
    (a,) = node.inputs
    dtype = em.graph.type(a).dtype
    return (em.graph.op(a) not in ("const", "sparse_const") and dtype.bits == 16 and node.type.dtype.bits == 16
            and dtype.scale == node.type.dtype.scale and node.type.rank == 1
            and storage_clip_bounds(node.attrs["lo"], node.attrs["hi"], dtype) is not None)


def clip_loop_head(em: CEmitter, node: Node) -> tuple[list[str], list[str], object, object]:
    """(lines before the loop, per-element lines defining lo and hi, lo, hi) of the clamp's loop."""
    (a,) = node.inputs
    lo, hi = storage_clip_bounds(node.attrs["lo"], node.attrs["hi"], em.graph.type(a).dtype)
    if np.ndim(lo) == 0:
        return ["{"], [f"const int16_t lo = {int(lo)}, hi = {int(hi)};"], lo, hi
    sym = em.add_const_array(em.sym(f"{node.name}_bounds"), np.stack([lo, hi], axis=1), "int16_t",
                             f"%{node.name}: (lower, upper) bound of each element")
    em.kernel_layout[node.name] = InterleavedBounds(sym, "int16_t")
    rd = em.target.read_const
    return (["{", f"    const int16_t *b = {sym};"],
            [f"const int16_t lo = {rd('b', '0', 'int16_t')}, hi = {rd('b', '1', 'int16_t')};", "b += 2;"], lo, hi)


def clip_loop_start(em: CEmitter, node: Node, bounds: list[str]) -> list[str]:
    """The loop's opening lines, up to the clamped value c."""
    (a,) = node.inputs
    return [f"    for (uint16_t i = 0; i < {node.type.size}; ++i) {{", f"        const int16_t v = {em.var(a)}[i];",
            *("        " + line for line in bounds), "        const int16_t c = v < lo ? lo : (v > hi ? hi : v);"]


def kernel_clip16(em: CEmitter, node: Node) -> list[str] | None:
    """The clamp alone (None: not a 16-bit clamp; the portable C takes it)."""
    if not clip_ok(em, node):
        return None
    head, bounds, _, _ = clip_loop_head(em, node)
    return head + clip_loop_start(em, node, bounds) + [f"        {em.var(node.name)}[i] = c;", "    }", "}"]
