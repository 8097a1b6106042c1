"""Cortex-M0 kernels.

matvec (dense int16/int8 weights, product shift 0): Thumb-1 asm, up to 7 rows per pass over x
(accumulators in r6, r7, r8-r12), so each x[k] is loaded once for all of them: per MAC one
LDRH/LDRB with an immediate offset, one MULS, one ADD (~3.7 instructions/MAC). LDRSH has no
immediate form, so weights are stored offset-binary (w' = w + 2^15, or + 2^7) and loaded
zero-extended: sum(w x) = sum(w' x) - 2^15 sum(x) (mod 2^32), the correction preloading the
accumulators. Weights are laid out block by block, column-major inside a block.
sqdist (constant prototypes): C, 4 prototypes per pass over the point.
Both are exact: the int32 sums of tinycc_ml.ir.fixed (proven to fit) in wrapping arithmetic.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import Block, BlockedLayout, CEmitter, Node, ctype_of, node_output_shift, rshift_c, shift_c, store

BLOCK = 7
SQD_BLOCK = 4
ACC_REGS = ("r6", "r7", "r8", "r9", "r10", "r11", "r12")


def blocks(rows: int, size: int = BLOCK) -> list[tuple[int, int]]:
    return [(r, min(size, rows - r)) for r in range(0, rows, size)]


def mac_asm(name: str, rows: int, wbits: int) -> str:
    """void name(const void *w, const int16_t *x, uint32_t *acc, uint32_t n): acc[0..rows) += w'.x."""
    acc = ACC_REGS[:rows]
    step = rows * wbits // 8
    load = "ldrh" if wbits == 16 else "ldrb"
    body = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
            f".local {name}", ".thumb_func", f".type {name}, %function", f"{name}:",
            "push {r4-r7, lr}", "mov r4, r8", "mov r5, r9", "mov r6, r10", "mov r7, r11", "push {r4-r7}", "push {r2}"]
    for q, r in enumerate(acc):
        body += [f"ldr {r}, [r2, #{4 * q}]"] if r in ("r6", "r7") else [f"ldr r4, [r2, #{4 * q}]", f"mov {r}, r4"]
    body += ["lsls r3, r3, #1", "movs r2, #0", "1:", "ldrsh r5, [r1, r2]"]
    for q, r in enumerate(acc):
        body += [f"{load} r4, [r0, #{q * wbits // 8}]", "muls r4, r5, r4",
                 f"adds {r}, {r}, r4" if r in ("r6", "r7") else f"add {r}, r4"]
    body += [f"adds r0, #{step}", "adds r2, #2", "cmp r2, r3", "bne 1b", "pop {r0}"]
    for q, r in enumerate(acc):
        body += [f"str {r}, [r0, #{4 * q}]"] if r in ("r6", "r7") else [f"mov r4, {r}", f"str r4, [r0, #{4 * q}]"]
    body += ["pop {r4-r7}", "mov r8, r4", "mov r9, r5", "mov r10, r6", "mov r11, r7", "pop {r4-r7, pc}",
             f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in body)
    return f"void {name}(const void *w, const int16_t *x, uint32_t *acc, uint32_t n);\n__asm__(\n{text});\n"


def kernel_matvec(em: CEmitter, node: Node) -> list[str] | None:
    a_name, x_name = node.inputs
    g = em.graph
    wbits = g.type(a_name).dtype.bits
    if g.op(a_name) != "const" or g.op(x_name) in ("const", "sparse_const") or int(node.attrs.get("shift", 0)) \
            or wbits not in (8, 16) or g.type(x_name).dtype.bits != 16:
        return None
    A = g.node(a_name).attrs["value"].astype(np.int64)
    rows, cols = A.shape
    wt = "uint16_t" if wbits == 16 else "uint8_t"
    off = (A + (1 << (wbits - 1))).astype(np.uint16 if wbits == 16 else np.uint8)
    laid = np.concatenate([off[r:r + n].T.reshape(-1) for r, n in blocks(rows)])
    sym = em.add_const_array(em.sym(f"{a_name}_off"), laid, wt,
                             f"%{a_name}: {g.type(a_name)} + {1 << (wbits - 1)}, {BLOCK}-row blocks, column-major")
    decode = (lambda e: f"(int16_t)({e} ^ 0x8000u)") if wbits == 16 else (lambda e: f"(int8_t)({e} ^ 0x80u)")
    em.kernel_layout[a_name] = BlockedLayout(sym, wt, tuple(Block(r, n, r * cols, n, 1) for r, n in blocks(rows)),
                                             decode)
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    x = em.var(x_name)
    out_shift = node_output_shift(g, node.name)
    lines = ["{", "    uint32_t sx = 0;",
             f"    for (int k = 0; k < {cols}; ++k) sx += (uint32_t)(int32_t){x}[k];",
             f"    sx <<= {wbits - 1};",
             f"    for (int r = 0; r < {rows}; ++r) {acc}[r] = 0u - sx;"]
    for r, n in blocks(rows):
        name = em.sym(f"mac{n}w{wbits}")
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits)
        lines.append(f"    {name}({sym} + {r * cols}, {x}, {acc} + {r}, {cols});")
    return lines + [f"    for (int r = 0; r < {rows}; ++r)",
                    "        " + store(em, node, "r", shift_c(em, f"(int32_t){acc}[r]", out_shift)), "}"]


def kernel_sqdist(em: CEmitter, node: Node) -> list[str] | None:
    x_name, m_name = node.inputs
    g = em.graph
    if g.op(m_name) != "const" or g.op(x_name) in ("const", "sparse_const"):
        return None
    M = g.node(m_name).attrs["value"]
    k, m = M.shape
    mt = ctype_of(g.type(m_name).dtype)
    laid = np.concatenate([M[:, j:j + n].reshape(-1) for j, n in blocks(m, SQD_BLOCK)])
    sym = em.add_const_array(em.sym(f"{m_name}_blk"), laid, mt,
                             f"%{m_name}: {g.type(m_name)}, {SQD_BLOCK}-prototype blocks, row-major in a block")
    em.kernel_layout[m_name] = BlockedLayout(sym, mt, tuple(Block(j, n, j * k, n, 1) for j, n in blocks(m, SQD_BLOCK)))
    h = int(node.attrs.get("shift", 0))
    x = em.var(x_name)
    out_shift = node_output_shift(g, node.name)
    lines = ["{", f"    const {mt} *p = {sym};"]
    for j, n in blocks(m, SQD_BLOCK):
        accs = [f"a{q}" for q in range(n)]
        lines += ["    {", f"        int32_t {', '.join(a + ' = 0' for a in accs)};",
                  f"        for (int k = 0; k < {k}; ++k) {{", f"            const int32_t xk = {x}[k];"]
        for q, a in enumerate(accs):
            lines += [f"            const int32_t d{q} = {rshift_c(f'p[{q}] - xk', h)};",
                      f"            {a} += d{q} * d{q};"]
        lines += [f"            p += {n};", "        }"]
        lines += ["        " + store(em, node, str(j + q), shift_c(em, a, out_shift)) for q, a in enumerate(accs)]
        lines.append("    }")
    return lines + ["}"]
