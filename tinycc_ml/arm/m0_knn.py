"""kNN's fused distances + vote (sqdist_kvote) on the Cortex-M0's mat-vec kernel, 9 prototypes a call
(the shared part: tinycc_ml.target's knn_* helpers)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m0_fused import MAX_ROWS, m0_image, mac_asm, prepare_x
from tinycc_ml.target import Node, knn_distance_expr, knn_fusable, knn_kernel_rows, knn_tail


def m0_sqdist_kvote(em, node: Node) -> list[str] | None:
    if not knn_fusable(em, node) or em.graph.type(node.inputs[0]).shape[0] >= 4096:
        return None
    rows = knn_kernel_rows(em, node, min_split_shift=1)  # the M0 kernel adds every row's constant
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
    buf, prep = prepare_x(em, x_name, "sqdist")
    acc = em.sym("knn_acc")
    em.scratch(acc, "uint32_t", MAX_ROWS)
    v = "(sx << 15) - xx" if wbits == 16 else "sx << 7"

    def value(q: str) -> str:
        d = f"(int32_t){acc}[{q}]" if wbits == 16 else f"(int32_t)(xx + ({acc}[{q}] << {kk + 1}))"
        return knn_distance_expr(em, bits, d, out_shift)

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
    return knn_tail(em, node, f"int{bits}_t", "uint16_t", segments, [*prep, f"const uint32_t v = {v};"])
