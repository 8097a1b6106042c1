"""kNN's fused distances + vote (sqdist_kvote) on the ATmega328P and Cortex-M0 mat-vec kernels, in blocks.

The prototypes are stored as the targets' mat-vec kernels store a matrix (one row per prototype, the
distance in dot-product form, as avr.kernels / avr.distance / arm.m0_fused do for sqdist):
    ||x - M_j||^2 = |M_j|^2 + |x|^2 - 2 M_j.x                 (mod 2^32, exact: proven to fit int32)
but the kernel is called on one block of prototypes at a time (AVR: 4 blocks of 5 = 20 rows per call,
M0: 9 rows), leaving that block's distances in a small scratch buffer; each is then rounded and
saturated to the distance type the scale choice gave the (fused) sqdist and inserted into the k best.
The RAM is the block buffer plus the k best: nothing grows with the number of prototypes.

AVR: prototypes with 8 significant bits (M = M8 2^k, |M8| <= 127: every int8 build, and int16 builds of
small-integer data such as letter-26) use 8-bit weights (15 cycles per MAC, half the flash); otherwise
16-bit weights -2 M (|M| < 2^14) with the kernel rounding and saturating the distances itself when it can.
M0: 16-bit weights -2 M, or 8-bit ones -M8 (a byte per value of flash).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen import c_float
from tinycc_ml.codegen.c_fixed import rshift_c, saturate_bits_c, saturate_c, shift_c
from tinycc_ml.codegen.matvec_plan import split8
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.registry import node_output_shift


def knn_fusable(em, node: Node) -> bool:
    if node.op != "sqdist_kvote" or int(node.attrs.get("shift", 0)) != 0:
        return False
    x_name, m_name = node.inputs
    g = em.graph
    return (g.op(m_name) == "const" and g.type(m_name).dtype.bits == 16 and g.type(x_name).dtype.bits == 16
            and g.op(x_name) not in ("const", "sparse_const") and 0 < g.type(m_name).shape[0] < 256
            and g.type(m_name).shape[1] < 65536)


def knn_kernel_rows(em, node: Node, min_split_shift: int):
    """The fused node's prototypes as mat-vec kernel rows: (x, M's name, M, distance bits, output shift, A,
    weight bits, per-row constants, kk). 8-bit rows -M8^T when M = M8 2^kk with kk >= ``min_split_shift``
    (row constants |M8|^2 2^(kk-1), or None at kk = 0), else 16-bit rows -2 M^T with |M|^2; None when neither
    fits the kernels."""
    x_name, m_name = node.inputs
    M = em.graph.node(m_name).attrs["value"].astype(np.int64)
    head = (x_name, m_name, M, int(node.attrs["dist_bits"]), node_output_shift(em.graph, node.name))
    split = split8(M)
    if split is not None and split[1] >= min_split_shift:
        m8, kk = split
        return (*head, (-m8).T.copy(), 8, (m8 * m8).sum(axis=0) << (kk - 1) if kk >= 1 else None, kk)
    if np.abs(M).max() <= 16383:
        return (*head, -2 * M.T, 16, (M * M).sum(axis=0), None)
    return None


def knn_vote_store(em, node: Node):
    vote = rshift_c("votes[c]", -node.type.dtype.scale)
    return lambda out: f"{out}[c] = {saturate_c(em, node, vote)};"


def knn_tail(em, node: Node, dtype: str, itype: str, segments: list, head: list[str]) -> list[str]:
    """The k best over the segments (call lines, distance expression of q, rows, first index expression, a
    loop wrapping the segment or None): each kernel call fills the block buffer, then its rows are
    inserted in index order."""
    k = int(node.attrs["k"])
    lines = ["{", *("    " + ln for ln in head), *("    " + ln for ln in c_float.kbest_start(dtype, k, itype))]
    for calls, dist, rows, first, loop in segments:
        body = [*calls, f"for (uint8_t q = 0; q < {rows}; ++q) {{", f"    const {dtype} dj = {dist};",
                *("    " + ln for ln in c_float.kbest_insert(k, "dj", f"({itype})({first} + q)")), "}"]
        lines += ["    " + ln for ln in (loop(body) if loop else body)]
    lines += ["    " + ln for ln in c_float.kbest_votes(em, node, knn_vote_store(em, node))]
    return lines + ["}"]


def knn_distance_expr(em, bits: int, expr: str, out_shift: int, rss=None) -> str:
    """sat_bits(rshift(expr, out_shift)) of an int32 distance: the fixed semantics of the fused sqdist."""
    if rss is not None:
        return rss(expr, out_shift)
    return saturate_bits_c(em, bits, shift_c(em, expr, out_shift))
