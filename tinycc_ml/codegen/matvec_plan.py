"""Which kernel runs a mat-vec by a constant matrix on the microcontrollers: the backends' cost model.

The lowering keeps a matrix's structure (stored dense, or sparse in CSC below
tinycc_ml.models.lowering.SPARSE_DENSITY); the kernel is chosen here, per mat-vec and per target, from
predicted cycles and flash bytes: the sparse asm kernel (avr.sparse), the dense asm kernel
(avr.kernels / arm.m0_fused, with the input clamp and offset fused in asm) or the shared C CSC loop.
A dense constant with enough zeros that its sparse form is no bigger is a candidate for the sparse
kernel too, so there is no cliff at SPARSE_DENSITY: the decision sees every density.

Decisions are made once per node (kept in the emitter's ``sparse_choices``) and recorded in
``emitter.kernel_report``. This module imports no kernel module, so that the dense kernels (which must
not take a mat-vec the sparse kernel takes, nor fuse its producer) and the sparse ones can both ask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.codegen.emitter import C_CODE, ctype_of
from tinycc_ml.codegen.input_clamp import clip_ok
from tinycc_ml.codegen.kernels import KernelCost
from tinycc_ml.codegen.layouts import InterleavedBounds
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops import sparse_to_dense
from tinycc_ml.ir.ops.arith import storage_clip_bounds

PAGE_COLS = 128  # columns addressed by one byte offset (2 bytes per int16 element)


@dataclass(frozen=True)
class SparsePlan:
    """A mat-vec the sparse kernels can take: the matrix (ints), its width, the fused clamp, its storage."""

    A: np.ndarray
    wbits: int
    clamp: str | None
    stored_sparse: bool = True  # a sparse_const (else a dense const the sparse kernels may take)


@dataclass
class KernelChoice:
    """One mat-vec's kernel: what was chosen, the candidates' predicted cycles and flash bytes."""

    matrix: str
    shape: tuple[int, int]
    nonzeros: int
    chosen: str
    candidates: dict[str, KernelCost]
    note: str = ""
    node: str = ""  # the mat-vec

    def as_dict(self) -> dict:
        best = self.candidates[self.chosen]
        return {"node": self.node, "matrix": self.matrix, "shape": list(self.shape), "nonzeros": self.nonzeros,
                "kernel": self.chosen, "predicted_cycles": best.cycles, "flash_bytes": best.flash,
                "candidates": {k: c.as_dict() for k, c in self.candidates.items()},
                **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class SparseDecision:
    """What the cost model decided for one sparse mat-vec (made once per node, kept by the emitter)."""

    kernel: str
    clamp: str | None
    choice: KernelChoice
    offset: bool = False  # AVR: x may be negative, so the kernel offsets it


def run_lengths(A: np.ndarray) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per row, per page: (columns of the positive weights, columns of the negative ones)."""
    rows, cols = A.shape
    out = []
    for r in range(rows):
        pages = []
        for p0 in range(0, cols, PAGE_COLS):
            seg = A[r, p0:p0 + PAGE_COLS]
            pages.append((np.nonzero(seg > 0)[0] + p0, np.nonzero(seg < 0)[0] + p0))
        out.append(pages)
    return out


def sparse_flash(A: np.ndarray, wbits: int, offset: bool, counts: bool = True) -> int:
    """Bytes of sparse_image (with or without the runs' count bytes)."""
    rows, cols = A.shape
    pages = -(-cols // PAGE_COLS)
    return int(np.count_nonzero(A)) * (1 + wbits // 8) + rows * ((2 * pages if counts else 0) + (4 if offset else 0))


def csc_flash(nnz: int, rows: int, cols: int, wbits: int) -> int:
    return nnz * (wbits // 8 + (1 if rows <= 256 else 2)) + 2 * (cols + 1)


def int_matrix(graph, a_name: str) -> np.ndarray:
    """The integer matrix of a constant, whether stored dense or sparse."""
    a = graph.node(a_name)
    if a.op == "sparse_const":
        return sparse_to_dense(a.attrs).astype(np.int64)
    return np.asarray(a.attrs["value"]).astype(np.int64)


def sparse_may_pay(A: np.ndarray, wbits: int) -> bool:
    """A dense constant is a candidate for the sparse kernels when its sparse form (a value and a column
    byte per non-zero) is smaller than the dense one: below 2/3 non-zeros for int16, 1/2 for int8."""
    return int(np.count_nonzero(A)) * (1 + wbits // 8) < A.size * (wbits // 8)


def sparse_matvec_plan(em, node: Node) -> SparsePlan | None:
    """The plan when node is a matvec by a constant the sparse kernels can take and the cost model must
    weigh (a sparse constant, or a dense one with enough zeros), else None."""
    g = em.graph
    if node.op != "matvec":
        return None
    a_name, x_name = node.inputs
    op = g.op(a_name)
    if op not in ("const", "sparse_const") or g.op(x_name) in ("const", "sparse_const"):
        return None
    if int(node.attrs.get("shift", 0)) != 0 or g.type(x_name).dtype.bits != 16 or node.type.rank != 1:
        return None
    if g.type(a_name).rank != 2:
        return None
    wbits = g.type(a_name).dtype.bits
    if wbits not in (8, 16):
        return None
    A = int_matrix(g, a_name)
    if op == "const" and not sparse_may_pay(A, wbits):
        return None
    clamp = x_name if fusable_clamp(em, x_name) else None
    return SparsePlan(A, wbits, clamp, op == "sparse_const")


def fusable_clamp(em, name: str) -> bool:
    g = em.graph
    if g.op(name) != "clip" or any(name == n for _, n in g.outputs) or len(g.users(name)) != 1:
        return False
    return clip_ok(em, g.node(name))


PROTO_BITS = 8


def split8(M: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(M8, k) with M = M8 2^k and |M8| <= 127, the largest such k; None when M has no such form."""
    M = np.asarray(M, np.int64)
    nz = M[M != 0]
    if nz.size == 0:
        return np.zeros_like(M), 0
    k = int(min((int(v) & -int(v)).bit_length() - 1 for v in np.unique(np.abs(nz))))
    m8 = M >> k
    if np.abs(m8).max() > 127:
        return None
    return m8, k


def used_list(used: np.ndarray, cols: int) -> np.ndarray:
    """The clamp's column list: per page of 128 columns, a count byte then each column's byte offset."""
    out: list[int] = []
    for p0 in range(0, cols, PAGE_COLS):
        mine = used[(used >= p0) & (used < p0 + PAGE_COLS)]
        out += [len(mine), *(2 * (mine - p0)).tolist()]
    return np.asarray(out, np.uint8)


def clamp_lines(em, clamp: str, xbuf: str, cols: np.ndarray, offset: bool) -> list[str]:
    """Clamp the used columns of the input into xbuf (x + 2^15 when offset), as the clip would."""
    g = em.graph
    cl = g.node(clamp)
    (src,) = cl.inputs
    dtype = g.type(src).dtype
    lo, hi = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], dtype)
    x = em.var(src)
    flip = " ^ 0x8000u" if offset else ""
    rd = em.target.read_const
    lines = ["{"]
    every = len(cols) == g.type(src).shape[0]
    if not every:
        ct = "uint8_t" if cols.max() < 256 else "uint16_t"
        csym = em.add_const_array(em.sym(f"{clamp}_cols"), cols, ct, f"%{clamp}: the columns the next layer reads")
    if np.ndim(lo) == 0:
        bounds = [f"const int16_t lo = {int(lo)}, hi = {int(hi)};"]
    else:  # interleaved (lo, hi) per feature, read by streaming's feed() too
        sym = em.add_const_array(em.sym(f"{clamp}_bounds"), np.stack([lo, hi], axis=1), "int16_t",
                                 f"%{clamp}: (lower, upper) bound of each element")
        em.kernel_layout[clamp] = InterleavedBounds(sym, "int16_t")
        bounds = [f"const int16_t lo = {rd(sym, '2 * c', 'int16_t')}, hi = {rd(sym, '2 * c + 1', 'int16_t')};"]
    n = len(cols)
    lines += [f"    for (uint16_t i = 0; i < {n}; ++i) {{",
              "        const uint16_t c = " + ("i;" if every else f"{rd(csym, 'i', ct)};"),
              f"        const int16_t v = {x}[c];",
              *("        " + b for b in bounds),
              "        const int16_t q = v < lo ? lo : (v > hi ? hi : v);",
              f"        {xbuf}[c] = (int16_t)((uint16_t)q{flip});",
              "    }", "}"]
    return lines


def csc_function(em, node: Node) -> list[str]:
    """The shared CSC loop (c_fixed) in a function of its own, so a profile can tell its cost apart."""
    x_name = node.inputs[1]
    body = C_CODE["fixed"]["matvec"](em, node)
    name = em.sym(f"csc_{node.name}")
    xv, ov = em.var(x_name), em.var(node.name)
    xt, ot = ctype_of(em.graph.type(x_name).dtype), ctype_of(node.type.dtype)
    em.helpers[name] = (f"static void __attribute__((noinline)) {name}(const {xt} *{xv}, {ot} *{ov})\n{{\n"
                        + "".join(f"    {line}\n" for line in body) + "}\n")
    return [f"{name}({xv}, {ov});"]
