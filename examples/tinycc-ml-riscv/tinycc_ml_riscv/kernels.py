"""An RV32IMC kernel of this package's own, on tinycc-ml's public kernel API: dense mat-vec by a constant matrix.

The shared C computes one row at a time, so every row loads x[k] again: at -Os gcc spends 8 instructions per
multiply-accumulate (two address adds, load w, load x, mul, add, the index step, the branch). Here up to 16
rows share each x[k], their sums in registers: per column one load of x and the loop's 3 instructions, per row
a load of w, mul, add, i.e. 3 + 4 / rows instructions per multiply-accumulate (16 rows: 3.25).

The weights are stored block by block (up to 16 rows), column-major inside a block: one pointer and small
immediate offsets whatever the matrix width. Streaming (<prefix>_begin/feed) reads them back through the
``BlockedLayout`` the kernel registers.

Exact: an int16 x times an int16 or int8 weight fits in int32, and the sums wrap in uint32, as the shared C's
int32 sums (which tinycc-ml proves to fit) never need to; the output shift and saturation are the shared
helpers' (``shift_c``, ``store``).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import Block, BlockedLayout, CEmitter, Kernel, KernelCost, Node, node_output_shift, shift_c, store

# rows per pass: 16 sums, x, w, the end pointer, x[k] and a product take 21 of the 31 registers (gcc -Os keeps
# them all there; the 7 callee-saved ones among them cost 14 instructions a call, 0.2 a column at 64 columns)
MAX_ROWS = 16


def row_blocks(rows: int) -> list[tuple[int, int]]:
    """(first row, rows) of each pass over x: as few passes as possible, sizes as equal as possible."""
    passes = -(-rows // MAX_ROWS)
    sizes = [rows // passes + (i < rows % passes) for i in range(passes)]
    return [(sum(sizes[:i]), n) for i, n in enumerate(sizes)]


def claims_matvec(em: CEmitter, node: Node) -> bool:
    """A constant dense int16/int8 matrix times a computed int16 vector, with no product shift."""
    g = em.graph
    a_name, x_name = node.inputs
    return (g.op(a_name) == "const" and g.type(a_name).dtype.bits in (8, 16) and g.type(a_name).shape[1] > 0
            and g.op(x_name) not in ("const", "sparse_const") and g.type(x_name).rank == 1
            and g.type(x_name).dtype.bits == 16 and int(node.attrs.get("shift", 0)) == 0)


def mac_function(name: str, rows: int, wtype: str) -> str:
    """C of ``name(w, x, x_end, acc)``: acc[q] = sum_k w[k * rows + q] x[k] (mod 2^32) for q < rows."""
    accs = [f"a{q}" for q in range(rows)]
    return "\n".join([
        f"static void {name}(const {wtype} *w, const int16_t *x, const int16_t *x_end, uint32_t *acc)",
        "{",
        f"    uint32_t {', '.join(a + ' = 0' for a in accs)};",
        "    do {  /* not for (): gcc -Os would test at the top and jump back, one more instruction a column */",
        "        const int32_t xk = *x++;",
        *(f"        {a} += (uint32_t)(w[{q}] * xk);" for q, a in enumerate(accs)),
        f"        w += {rows};",
        "    } while (x != x_end);",
        *(f"    acc[{q}] = {a};" for q, a in enumerate(accs)),
        "}",
        ""])


def emit_matvec(em: CEmitter, node: Node) -> list[str]:
    a_name, x_name = node.inputs
    g = em.graph
    A = g.node(a_name).attrs["value"]
    rows, cols = A.shape
    wtype = f"int{g.type(a_name).dtype.bits}_t"
    blocks = row_blocks(rows)
    image = np.concatenate([A[r:r + n].T.reshape(-1) for r, n in blocks])
    w = em.add_const_array(em.sym(f"{a_name}_rv"), image, wtype,
                           f"%{a_name}: {g.type(a_name)}, blocks of <= {MAX_ROWS} rows, column-major in a block")
    em.kernel_layout[a_name] = BlockedLayout(w, wtype, tuple(Block(r, n, r * cols, n, 1) for r, n in blocks))
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    x = em.var(x_name)
    lines = ["{"]
    for r, n in blocks:
        mac = em.sym(f"mac{n}_int{g.type(a_name).dtype.bits}")  # one function per block size and weight type
        em.helpers.setdefault(mac, mac_function(mac, n, wtype))
        lines.append(f"    {mac}({w} + {r * cols}, {x}, {x} + {cols}, {acc} + {r});")
    out = shift_c(em, f"(int32_t){acc}[r]", node_output_shift(g, node.name))
    return lines + [f"    for (int r = 0; r < {rows}; ++r)", "        " + store(em, node, "r", out), "}"]


def matvec_cost(em: CEmitter, node: Node) -> KernelCost:
    """Instructions: per block, the loop (3 per row and 4 per column), ~2 a row to set and store its
    accumulator, and the call's ~4; the output loop ~12 a row. Flash: the weights and ~4 bytes an instruction
    of each block size's function (compressed instructions are 2: the estimate is high)."""
    a_name = node.inputs[0]
    rows, cols = em.graph.type(a_name).shape
    blocks = row_blocks(rows)
    instructions = sum(cols * (3 * n + 4) + 2 * n + 4 for _, n in blocks) + 12 * rows
    code = sum(4 * (5 * n + 8) for n in {n for _, n in blocks})
    return KernelCost(cycles=instructions, flash=rows * cols * em.graph.type(a_name).dtype.bits // 8 + code)


RV32_KERNELS = (Kernel("matvec", emit_matvec, claims=claims_matvec, cost=matvec_cost, name="rv32-matvec-rows"),)
