"""kNN's fused distances + vote (sqdist_kvote) on the ATmega328P and Cortex-M0 mat-vec kernels, in blocks.

The prototypes are stored as the targets' mat-vec kernels store a matrix (one row per prototype, the
distance in dot-product form, as kernels_avr / kernels_distance / kernels_m0_fused do for sqdist):
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

from tinycc_ml.backends import c_float
from tinycc_ml.backends.c_fixed import rshift_c, saturate_bits_c, saturate_c, shift_c
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.registry import node_output_shift

AVR_BLOCKS_PER_CALL = 4  # 5-row blocks per kernel call: 20 distances of scratch


def _fused_ok(em, node: Node) -> bool:
    if node.op != "sqdist_kvote" or int(node.attrs.get("shift", 0)) != 0:
        return False
    x_name, m_name = node.inputs
    g = em.graph
    return (g.op(m_name) == "const" and g.type(m_name).dtype.bits == 16 and g.type(x_name).dtype.bits == 16
            and g.op(x_name) not in ("const", "sparse_const") and 0 < g.type(m_name).shape[0] < 256
            and g.type(m_name).shape[1] < 65536)


def _kernel_rows(em, node: Node, min_split_shift: int):
    """The fused node's prototypes as mat-vec kernel rows: (x, M's name, M, distance bits, output shift, A,
    weight bits, per-row constants, kk). 8-bit rows -M8^T when M = M8 2^kk with kk >= ``min_split_shift``
    (row constants |M8|^2 2^(kk-1), or None at kk = 0), else 16-bit rows -2 M^T with |M|^2; None when neither
    fits the kernels."""
    from tinycc_ml.backends.kernels_distance import split8

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


def _vote_store(em, node: Node):
    vote = rshift_c("votes[c]", -node.type.dtype.scale)
    return lambda out: f"{out}[c] = {saturate_c(em, node, vote)};"


def _tail(em, node: Node, dtype: str, itype: str, segments: list, head: list[str]) -> list[str]:
    """The k best over the segments (call lines, distance expression of q, rows, first index expression, a
    loop wrapping the segment or None): each kernel call fills the block buffer, then its rows are
    inserted in index order."""
    k = int(node.attrs["k"])
    lines = ["{", *("    " + ln for ln in head), *("    " + ln for ln in c_float.kbest_start(dtype, k, itype))]
    for calls, dist, rows, first, loop in segments:
        body = [*calls, f"for (uint8_t q = 0; q < {rows}; ++q) {{", f"    const {dtype} dj = {dist};",
                *("    " + ln for ln in c_float.kbest_insert(k, "dj", f"({itype})({first} + q)")), "}"]
        lines += ["    " + ln for ln in (loop(body) if loop else body)]
    lines += ["    " + ln for ln in c_float.kbest_votes(em, node, _vote_store(em, node))]
    return lines + ["}"]


def _distance_expr(em, bits: int, expr: str, out_shift: int, rss=None) -> str:
    """sat_bits(rshift(expr, out_shift)) of an int32 distance: the fixed semantics of the fused sqdist."""
    if rss is not None:
        return rss(expr, out_shift)
    return saturate_bits_c(em, bits, shift_c(em, expr, out_shift))


# ---------------------------------------------------------------- ATmega328P


def avr_sqdist_kvote(em, node: Node) -> list[str] | None:
    from tinycc_ml.backends.kernels_avr import (
        BLOCK,
        kernel_weights,
        mac_asm,
        mulu16_avr,
        rshift_avr,
        rss_avr,
        rss_small_avr,
    )

    rows = _kernel_rows(em, node, min_split_shift=0) if _fused_ok(em, node) else None
    if rows is None:
        return None
    x_name, m_name, M, bits, out_shift, A, wbits, extra, kk = rows
    r, m = M.shape
    image, layout = kernel_weights(A, wbits, extra)
    wtype = "uint16_t" if wbits == 16 else "uint8_t"
    sym = em.add_const_array(em.sym(f"{m_name}_knn{wbits}"), image, wtype,
                             f"%{m_name}: prototypes as {m} kernel rows of {r} ({wbits}-bit), per 5-row block: "
                             "32-bit row constants, then the block column-major")
    x = em.var(x_name)
    head = ["uint32_t xx = 0, sx = 0;",
            f"for (uint8_t i = 0; i < {r}; ++i) {{",
            f"    const uint16_t a = {x}[i] < 0 ? -(uint16_t){x}[i] : (uint16_t){x}[i];",
            f"    xx += {mulu16_avr(em)}(a, a);",
            f"    sx += (uint16_t)((uint16_t){x}[i] ^ 0x8000u);",
            "}",
            f"sx <<= {15 if wbits == 16 else 7};"]
    norms = None
    direct = wbits == 16 and bits == 16 and 8 <= out_shift <= 16  # the kernel rounds, saturates, stores int16
    if wbits == 16:
        head.append("sx -= xx;")  # acc = |M_j|^2 + xx - 2 M_j.x: the distance itself

        def dist(q):
            return f"(int32_t){buf}[{q}]"
    else:
        if extra is None:
            norms = em.add_const_array(em.sym(f"{m_name}_sq"), (M * M).sum(axis=0).astype(np.int32), "int32_t",
                                       f"%{m_name}: squared norm of each prototype")

        def dist(q, first="0"):
            norm = f"(uint32_t){em.target.read_const(norms, f'{first} + {q}', 'int32_t')} + " if norms else ""
            return f"(int32_t)({norm}xx + ({buf}[{q}] << {kk + 1}))"
    buf = em.sym("knn_acc")
    per_call = BLOCK * AVR_BLOCKS_PER_CALL
    em.scratch(buf, "int16_t" if direct else "uint32_t", per_call)

    def rss(expr, s):
        if bits == 16 and 8 <= s <= 16:
            return rss_avr(em, expr, s)
        if bits == 16 and 1 <= s <= 7:
            return rss_small_avr(em, expr, s)
        return saturate_bits_c(em, bits, rshift_avr(em, expr, s))

    itype = "uint16_t"
    dtype = f"int{bits}_t"
    block_len = (4 if wbits == 8 else 2) * BLOCK + BLOCK * r  # elements of one full 5-row block
    full = m // BLOCK
    chunks, rest = divmod(full, AVR_BLOCKS_PER_CALL)

    def call(rows: int, nblocks: int, at: str) -> str:
        name = em.sym(f"mac{rows}w{wbits}_{r}x{nblocks}" + (f"s{out_shift}" if direct else ""))
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, rows, wbits, False, r, nblocks, out_shift if direct else None)
        return f"{name}({sym} + {at}, (const int16_t *){x}, {buf}, sx);"

    folded = wbits == 8 and norms is None and out_shift >= kk + 1
    if folded:  # rshift(xx + a 2^(k+1), s) = (a + ((xx + 2^(s-1)) >> (k+1))) >> (s-k-1), a floor: no C shift of a
        head.append(f"const uint32_t c0 = (xx + UINT32_C({1 << (out_shift - 1)})) >> {kk + 1};")

    def value(q: str, first: str) -> str:
        if direct:
            return f"{buf}[{q}]"
        if folded:  # the distance is >= 0: only the upper saturation applies
            t = f"(({buf}[{q}] + c0) >> {out_shift - kk - 1})"
            top = (1 << (bits - 1)) - 1
            return t if bits == 32 else f"({dtype})({t} > {top}u ? {top}u : {t})"
        d = dist(q) if wbits == 16 else dist(q, first)
        return _distance_expr(em, bits, d, out_shift, rss)

    segments = []
    if chunks:
        step = AVR_BLOCKS_PER_CALL * block_len
        segments.append(([call(BLOCK, AVR_BLOCKS_PER_CALL, f"(uint32_t)c * {step}u")], value("q", "j0"),
                         per_call, "j0",
                         lambda body: [f"for (uint16_t c = 0, j0 = 0; c < {chunks}; ++c, j0 += {per_call}) {{",
                                       *("    " + ln for ln in body), "}"]))
    if rest:
        j0 = chunks * per_call
        segments.append(([call(BLOCK, rest, f"{chunks * AVR_BLOCKS_PER_CALL * block_len}")],
                         value("q", str(j0)), rest * BLOCK, str(j0), None))
    if m % BLOCK:
        j0 = full * BLOCK
        base = layout[-1].base - (4 if wbits == 8 else 2) * (m % BLOCK)
        segments.append(([call(m % BLOCK, 1, str(base))], value("q", str(j0)), m % BLOCK, str(j0), None))
    return _tail(em, node, dtype, itype, segments, head)


# ---------------------------------------------------------------- Cortex-M0


def m0_sqdist_kvote(em, node: Node) -> list[str] | None:
    from tinycc_ml.backends.kernels_m0_fused import MAX_ROWS, _prepare, m0_image, mac_asm

    if not _fused_ok(em, node) or em.graph.type(node.inputs[0]).shape[0] >= 4096:
        return None
    rows = _kernel_rows(em, node, min_split_shift=1)  # the M0 kernel adds every row's constant
    if rows is None:
        return None
    x_name, m_name, M, bits, out_shift, A, wbits, extra, kk = rows
    r, m = M.shape
    full = m // MAX_ROWS
    parts, starts = [], []
    if full:
        image, s = m0_image(A[: full * MAX_ROWS], wbits, extra[: full * MAX_ROWS])
        parts.append(image)
        starts.append(s)
    if m % MAX_ROWS:
        image, s = m0_image(A[full * MAX_ROWS:], wbits, extra[full * MAX_ROWS:])
        parts.append(image)
    image = np.concatenate(parts)
    sym = em.add_const_array(em.sym(f"{m_name}_knn{wbits}"), image.view("<i4"), "int32_t",
                             f"%{m_name}: prototypes as {m} kernel rows of {r} ({wbits}-bit), per block of "
                             f"{MAX_ROWS}: 32-bit row constants, then the block column-major")
    buf, prep = _prepare(em, x_name, "sqdist")
    acc = em.sym("knn_acc")
    em.scratch(acc, "uint32_t", MAX_ROWS)
    v = "(sx << 15) - xx" if wbits == 16 else "sx << 7"

    def value(q: str) -> str:
        d = f"(int32_t){acc}[{q}]" if wbits == 16 else f"(int32_t)(xx + ({acc}[{q}] << {kk + 1}))"
        return _distance_expr(em, bits, d, out_shift)

    def call(rows: int, at: str) -> str:
        name = em.sym(f"mac{rows}w{wbits}_{r}")
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, rows, wbits, r)
        return f"{name}((const uint16_t *)({sym} + {at}), {buf}, {acc}, v);"

    segments = []
    words = (len(parts[0]) // 2 // full) if full else 0  # int32 words per full block
    if full:
        segments.append(([call(MAX_ROWS, f"(uint32_t)c * {words}u")], value("q"), MAX_ROWS, "j0",
                         lambda body: [f"for (uint32_t c = 0, j0 = 0; c < {full}; ++c, j0 += {MAX_ROWS}) {{",
                                       *("    " + ln for ln in body), "}"]))
    if m % MAX_ROWS:
        segments.append(([call(m % MAX_ROWS, str(full * words))], value("q"), m % MAX_ROWS,
                         str(full * MAX_ROWS), None))
    return _tail(em, node, f"int{bits}_t", "uint16_t", segments, [*prep, f"const uint32_t v = {v};"])
