"""Cortex-M4 kernels: dense mat-vecs and distances on the DSP extension's dual 16-bit multiply-accumulate.

matvec (int16 or int8 weights, int16 x, product shift 0): Thumb-2 asm, up to 5 rows per pass over x
(int8: 4). SMLAD a, w, x, a adds w.lo x.lo + w.hi x.hi to a, so the weights are stored in flash in
words of two int16 (columns 2p, 2p + 1 of one row), per block of rows word-interleaved: pair p of
row 0, of row 1, ... of the block's last row, then pair p + 1. One LDR of x (a pair, post-increment;
x needs only 2-byte alignment: Thumb-2 LDR allows unaligned addresses) and one LDM of the block's
words serve 2 x rows MACs:
    ldr lr, [r1], #4 ; ldm r0!, {r8-r12} ; smlad r3, r8, lr, r3 ; ... (5 rows: 7 instructions, 10 MACs)
int8 weights: words of four int8 stored as (w0, w2, w1, w3), so that SXTB16 w = (w0, w1) and
SXTB16 w, ROR #8 = (w2, w3) line up with the x pairs (x0, x1), (x2, x3): per row and 4 columns one
word, 2 SXTB16, 2 SMLAD. A last odd column (int16) or 1-3 columns (int8) are zero-padded weights
with x read by halfwords (LDRH: the upper half is 0), never past the end of x.

sqdist (shift 0): ||x - M_j||^2 = |x|^2 + |M_j|^2 - 2 M_j.x with M_j.x on the same kernel (M^T as the
matrix), |M_j|^2 in a flash table, |x|^2 in C. Prototypes of 8 significant bits (M = M8 2^k, what int8
builds keep) are stored as int8: M_j.x = (M8_j.x) 2^k.
All exact: int32 sums that wrap (SMLAD's result is the low 32 bits; it only sets the Q flag), and the
results are proven to fit in int32 (tinycc_ml.ir.fixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.target import Block, BlockedLayout, Node, node_output_shift, shift_c, split8, store

MAX_ROWS = {16: 5, 8: 4}  # rows per pass: accumulators + weight words + x + pointers fill r0-r12, lr
GROUP = {16: 2, 8: 4}  # columns per stored word


def row_blocks(rows: int, size: int) -> list[tuple[int, int]]:
    """(first row, rows) of each pass: as few passes as possible, sizes as equal as possible."""
    n = -(-rows // size)
    sizes = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    starts = np.cumsum([0] + sizes[:-1])
    return [(int(s), z) for s, z in zip(starts, sizes)]


BYTE_ORDER = (0, 2, 1, 3)  # int8: column t of a group of 4 is stored at byte BYTE_ORDER[t] of the word


def m4_image(A: np.ndarray, wbits: int) -> tuple[np.ndarray, list[int]]:
    """The flash image as uint32 words (see the module docstring) and the first word of each block."""
    rows, cols = A.shape
    g = GROUP[wbits]
    groups = -(-cols // g)
    parts, starts, pos = [], [], 0
    for r, n in row_blocks(rows, MAX_ROWS[wbits]):
        blk = np.zeros((n, groups * g), np.int64)
        blk[:, :cols] = A[r:r + n]
        blk = blk.reshape(n, groups, g)
        if wbits == 8:
            blk = blk[:, :, np.argsort(BYTE_ORDER)]
        words = blk.transpose(1, 0, 2).reshape(-1).astype("<i2" if wbits == 16 else "i1").view("<u4")
        starts.append(pos)
        parts.append(words)
        pos += len(words)
    return np.concatenate(parts), starts


@dataclass(frozen=True)
class GroupedLayout(BlockedLayout):
    """arm.m4_kernels's image read back element by element: Block.stride_col is the elements of one group of
    ``group`` columns of the block (group x rows), stride_row the group."""

    group: int = 2

    def element(self, read, block: Block) -> str:
        g = self.group
        within = "(i & 1)" if g == 2 else "(((i & 1) << 1) | ((i >> 1) & 1))"  # BYTE_ORDER
        index = f"{block.base} + (i / {g}) * {block.stride_col} + q * {block.stride_row} + {within}"
        return self.decode(read(self.symbol, index, self.stored_ctype))


def mac_asm(name: str, rows: int, wbits: int, cols: int) -> str:
    """void name(const uint32_t *w, const int16_t *x, uint32_t *acc): acc[q] = sum_k w[q][k] x[k] (mod 2^32)
    for the ``rows`` rows of one block of the image."""
    g = GROUP[wbits]
    acc = [f"r{3 + q}" for q in range(rows)]
    wr0 = 3 + MAX_ROWS[wbits]  # first weight register: r8 (int16), r7 (int8)
    wr = [f"r{wr0 + q}" for q in range(rows)]
    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:", "push {r4-r11, lr}", "push {r2}"]
    b += [f"movs {a}, #0" for a in acc]

    def load_w() -> list[str]:
        return [f"ldm r0!, {{{wr[0]}-{wr[-1]}}}"] if rows > 1 else [f"ldr {wr[0]}, [r0], #4"]

    def group(part: int) -> list[str]:
        """One group of columns; ``part``: how many of its columns exist (the last group may be partial)."""
        if wbits == 16:
            out = ["ldr lr, [r1], #4" if part == 2 else "ldrh lr, [r1]", *load_w()]
            return out + [f"smlad {a}, {w}, lr, {a}" for a, w in zip(acc, wr)]
        x0 = "ldr r11, [r1], #4" if part >= 2 else "ldrh r11, [r1]"
        out = [x0] + (["ldr r12, [r1], #4" if part == 4 else "ldrh r12, [r1]"] if part > 2 else []) + load_w()
        for a, w in zip(acc, wr):
            out += [f"sxtb16 lr, {w}", f"smlad {a}, lr, r11, {a}"]
            if part > 2:
                out += [f"sxtb16 lr, {w}, ror #8", f"smlad {a}, lr, r12, {a}"]
        return out

    full, part = divmod(cols, g)
    unroll = 4 if wbits == 16 else 2
    for _ in range(full % unroll):  # leftover groups first, then whole iterations
        b += group(g)
    if full >= unroll:
        end = 2 * g * (full // unroll) * unroll
        b += [f"add r2, r1, #{end}" if end < 4096 else f"ldr r2, ={end}"] + ([] if end < 4096 else ["add r2, r1"])
        b += ["1:", *[line for _ in range(unroll) for line in group(g)], "cmp r1, r2", "bne 1b"]
    if part:
        b += group(part)
    b += ["pop {r2}", f"stm r2, {{{acc[0]}-{acc[-1]}}}" if rows > 1 else f"str {acc[0]}, [r2]",
          "pop {r4-r11, pc}", ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    # not .global: local to the object file (the C call resolves within it)
    return f"void {name}(const uint32_t *w, const int16_t *x, uint32_t *acc);\n__asm__(\n{text});\n"


# ---------------------------------------------------------------- graph side

def _dense_ok(em, a_name: str, x_name: str) -> bool:
    g = em.graph
    return (g.op(a_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and g.type(x_name).dtype.bits == 16 and g.type(x_name).rank == 1 and g.type(a_name).shape[1] > 0)


def matvec_ok(em, node: Node) -> bool:
    a_name, x_name = node.inputs
    return (node.op == "matvec" and _dense_ok(em, a_name, x_name) and int(node.attrs.get("shift", 0)) == 0
            and em.graph.type(a_name).dtype.bits in (8, 16))


def sqdist_ok(em, node: Node) -> bool:
    if node.op != "sqdist" or int(node.attrs.get("shift", 0)) != 0:
        return False
    x_name, m_name = node.inputs
    return _dense_ok(em, m_name, x_name) and em.graph.type(m_name).dtype.bits in (8, 16)


def _mac_calls(em, A: np.ndarray, wbits: int, label: str, x: str, acc: str, layout_key: str,
               decode=None) -> list[str]:
    """The kernel calls leaving acc = A x (mod 2^32); streaming's feed() reads ``layout_key`` back from the
    image (``decode``: stored element -> the constant's element; default: A itself)."""
    rows, cols = A.shape
    image, starts = m4_image(A, wbits)
    g = GROUP[wbits]
    sym = em.add_const_array(em.sym(f"{label}_m4"), image.view("<i4"), "int32_t",
                             f"%{label}: {rows}x{cols}, per block of <= {MAX_ROWS[wbits]} rows: words of {g} "
                             f"int{wbits} columns of one row, the block's rows interleaved")
    ctype = f"int{wbits}_t"
    blocks = row_blocks(rows, MAX_ROWS[wbits])
    em.kernel_layout[layout_key] = GroupedLayout(
        f"((const {ctype} *){sym})", ctype,
        tuple(Block(r, n, s * g, g * n, g) for (r, n), s in zip(blocks, starts)),
        *(() if decode is None else (decode,)), group=g)
    out = []
    for (r, n), s in zip(blocks, starts):
        name = em.sym(f"mac{n}w{wbits}_{cols}")
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, cols)
        out.append(f"{name}((const uint32_t *){sym} + {s}, {x}, {acc} + {r});")
    return out


def kernel_matvec(em, node: Node) -> list[str] | None:
    if not matvec_ok(em, node):
        return None
    a_name, x_name = node.inputs
    g = em.graph
    A = g.node(a_name).attrs["value"].astype(np.int64)
    rows = A.shape[0]
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    out_shift = node_output_shift(g, node.name)
    calls = _mac_calls(em, A, g.type(a_name).dtype.bits, a_name, em.var(x_name), acc, a_name)
    return ["{", *("    " + c for c in calls), f"    for (int r = 0; r < {rows}; ++r)",
            "        " + store(em, node, "r", shift_c(em, f"(int32_t){acc}[r]", out_shift)), "}"]


def kernel_sqdist(em, node: Node) -> list[str] | None:
    if not sqdist_ok(em, node):
        return None
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    k, m = M.shape
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", m)
    norms = em.add_const_array(em.sym(f"{m_name}_sq_m4"), ((M * M).sum(axis=0) % (1 << 32)).astype("<u4").view("<i4"),
                               "int32_t", f"%{m_name}: squared norm of each prototype (mod 2^32)")
    x = em.var(x_name)
    out_shift = node_output_shift(g, node.name)
    m8 = split8(M) if g.type(m_name).dtype.bits == 16 else None
    if m8 is not None:  # 8 significant bits (int8 builds): M = M8 2^k, stored in 8 bits, M.x = (M8.x) 2^k
        k8 = m8[1]
        calls = _mac_calls(em, m8[0].T.copy(), 8, f"{m_name}_i8", x, acc, m_name,
                           decode=lambda e: f"(int16_t)({e} * {1 << k8})")
        mx = f"({acc}[j] << {k8 + 1})"
    else:
        calls = _mac_calls(em, M.T.copy(), g.type(m_name).dtype.bits, m_name, x, acc, m_name)
        mx = f"2u * {acc}[j]"
    d = f"(int32_t)(xx + (uint32_t){em.target.read_const(norms, 'j', 'int32_t')} - {mx})"
    return ["{", "    uint32_t xx = 0;",
            f"    for (int k = 0; k < {k}; ++k) xx += (uint32_t)((int32_t){x}[k] * {x}[k]);",
            *("    " + c for c in calls), f"    for (int j = 0; j < {m}; ++j)",
            "        " + store(em, node, "j", shift_c(em, d, out_shift)), "}"]

