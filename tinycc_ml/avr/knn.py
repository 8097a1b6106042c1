"""kNN's fused distances + vote (sqdist_kvote) on the ATmega328P's mat-vec kernel, 4 blocks of 5
prototypes a call (the shared part: tinycc_ml.target's knn_* helpers)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.avr.kernels import BLOCK, kernel_weights, mac_asm, mulu16_avr, rshift_avr, rss_avr, rss_small_avr
from tinycc_ml.target import Node, knn_distance_expr, knn_fusable, knn_kernel_rows, knn_tail, saturate_bits_c

AVR_BLOCKS_PER_CALL = 4  # 5-row blocks per kernel call: 20 distances of scratch


def avr_sqdist_kvote(em, node: Node) -> list[str] | None:
    rows = knn_kernel_rows(em, node, min_split_shift=0) if knn_fusable(em, node) else None
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
        return knn_distance_expr(em, bits, d, out_shift, rss)

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
    return knn_tail(em, node, dtype, itype, segments, head)
