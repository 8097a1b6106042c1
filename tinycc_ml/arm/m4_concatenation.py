"""Cortex-M4 / M33 kernel for CONCATENATION of two computed tensors of one integer type (TFLite's int8 and int16
copies; the readers chain more operands, an LSTM's sequence output among them), byte for byte the shared C's
(codegen/c_network.py): per slice before the axis the first operand's run of bytes, then the second's, each
by ``m4_pad``'s copy (16 bytes per LDM / STM pair where both pointers are word aligned, else unaligned words,
then bytes) where the shared C moves one element per iteration.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_pad import copy_helpers
from tinycc_ml.target import Node


def _copied(em, name: str) -> bool:
    """A value the kernel reads through its storage: computed, in memory (not a constant, not a fused chain's
    local, not the input clamp applied on read)."""
    return em.graph.op(name) not in ("const", "sparse_const") and name not in em.inline_values \
        and name != em.read_clamp


def concatenation_claims(em, node: Node) -> bool:
    """Two computed operands of the result's type (no rescaling: a fixed-point operand at the result's scale),
    whole bytes per element."""
    g = em.graph
    dtype = node.type.dtype
    return (not dtype.is_float and dtype.bits in (8, 16, 32) and len(node.inputs) == 2
            and all(_copied(em, n) and g.type(n).dtype == dtype for n in node.inputs))


def concatenation(em, node: Node) -> list[str]:
    g = em.graph
    a_name, b_name = node.inputs
    a, b = g.type(a_name), g.type(b_name)
    axis = int(node.attrs["axis"])
    outer = int(np.prod(a.shape[:axis], dtype=np.int64))
    size = node.type.dtype.bits // 8
    a_run, b_run = size * a.size // outer, size * b.size // outer
    copy, _ = copy_helpers(em)
    y, xa, xb = (f"(int8_t *){em.var(node.name)}", f"(const int8_t *){em.var(a_name)}",
                 f"(const int8_t *){em.var(b_name)}")
    comment = f"/* %{node.name}: the operands' bytes copied (arm.m4_concatenation) */"
    if outer == 1:
        return [comment, f"{copy}({y}, {xa}, {a_run});", f"{copy}({y} + {a_run}, {xb}, {b_run});"]
    return [comment, f"for (int32_t o = 0; o < {outer}; ++o) {{",
            f"    {copy}({y} + o * {a_run + b_run}, {xa} + o * {a_run}, {a_run});",
            f"    {copy}({y} + o * {a_run + b_run} + {a_run}, {xb} + o * {b_run}, {b_run});", "}"]
