"""Which kernel runs a mat-vec by a constant matrix on the microcontrollers: the backends' cost model.

The lowering keeps a matrix's structure (stored dense, or sparse in CSC below
tinycc_ml.models.lowering.SPARSE_DENSITY); the kernel is chosen here, per mat-vec and per target, from
predicted cycles and flash bytes: the sparse asm kernel (kernels_sparse), the dense asm kernel
(kernels_avr / kernels_m0_fused, with the input clamp and offset fused in asm) or the shared C CSC loop.
A dense constant with enough zeros that its sparse form is no bigger is a candidate for the sparse
kernel too, so there is no cliff at SPARSE_DENSITY: the decision sees every density.

Decisions are made once per node (kept in the emitter's ``sparse_choices``) and recorded in
``emitter.kernel_report``. This module imports no kernel module, so that the dense kernels (which must
not take a mat-vec the sparse kernel takes, nor fuse its producer) and the sparse ones can both ask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops import sparse_to_dense
from tinycc_ml.ir.ops.arith import storage_clip_bounds

PAGE_COLS = 128  # columns addressed by one byte offset (2 bytes per int16 element)
MAX_SIGN_PER_ROW = 256  # entries of one sign in a row: 24-bit sums of 8x8-bit products
MAX_ROWS = 256  # a byte counts the rows (0 = 256)

@dataclass(frozen=True)
class Candidate:
    """One way to run a mat-vec, as the cost model sees it: predicted cycles and flash bytes, or why not."""

    cycles: int | None = None
    flash: int | None = None
    unavailable: str | None = None

    @property
    def usable(self) -> bool:
        return self.unavailable is None

    def as_dict(self) -> dict:
        return {"unavailable": self.unavailable} if self.unavailable else {"cycles": self.cycles, "flash": self.flash}


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
    candidates: dict[str, Candidate]
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


# ATmega328P cycle costs, fitted on simavr runs of the kernels (see benchmarks/sparse_kernels.py)
AVR_COSTS = {
    "sparse": {16: {"nnz": 33.0, "run": 11.0, "empty_run": 8.0, "row": 60.0, "call": 80.0},
               8: {"nnz": 20.75, "run": 11.0, "empty_run": 8.0, "row": 60.0, "call": 80.0}},
    # the driver kernel: a call per run (empty runs cost nothing), the row's end a call too
    "driver": {16: {"nnz": 32.0, "run": 7.0, "empty_run": 0.0, "row": 55.0, "call": 70.0},
               8: {"nnz": 20.0, "run": 7.0, "empty_run": 0.0, "row": 55.0, "call": 70.0}},
    "dense": {16: {"mac": 27.1, "block": 300.0, "call": 60.0}, 8: {"mac": 16.0, "block": 300.0, "call": 60.0}},
    "csc_c": {16: {"nnz": 118.0, "col": 40.0}, 8: {"nnz": 105.0, "col": 40.0}},
    "clamp_all": 11.0, "clamp_list": 19.5, "clamp_c": 30.0, "copy_col": 20.0,
    # the dense kernel's input pass: the fused asm clamp storing x + 2^15 and summing it (scalar bounds),
    # the C clamp with per-feature bounds, or the C sum of x + 2^15 of an intermediate
    "dense_prep": {"all": 17.0, "c": 30.0, None: 14.0},
}

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


def sparse_format_ok(A: np.ndarray, wbits: int) -> str | None:
    """Why the run format / kernel cannot hold A (None when it can)."""
    rows, _ = A.shape
    if rows > MAX_ROWS:
        return f"{rows} rows: the kernel counts rows in a byte (at most {MAX_ROWS})"
    for sign, counts in (("positive", (A > 0).sum(axis=1)), ("negative", (A < 0).sum(axis=1))):
        if counts.max(initial=0) > MAX_SIGN_PER_ROW:
            r = int(np.argmax(counts))
            return (f"row {r} has {int(counts[r])} {sign} weights: the kernel's 24-bit partial sums hold "
                    f"at most {MAX_SIGN_PER_ROW}")
    if np.abs(A).max(initial=0) > (1 << (wbits - 1)):
        return f"a weight is beyond int{wbits}"
    return None


def sparse_flash(A: np.ndarray, wbits: int, offset: bool, counts: bool = True) -> int:
    """Bytes of sparse_image (with or without the runs' count bytes)."""
    rows, cols = A.shape
    pages = -(-cols // PAGE_COLS)
    return int(np.count_nonzero(A)) * (1 + wbits // 8) + rows * ((2 * pages if counts else 0) + (4 if offset else 0))


def csc_flash(nnz: int, rows: int, cols: int, wbits: int) -> int:
    return nnz * (wbits // 8 + (1 if rows <= 256 else 2)) + 2 * (cols + 1)


def avr_candidates(A: np.ndarray, wbits: int, offset: bool, clamp: str | None = None) -> dict[str, Candidate]:
    """Predicted cycles and flash of each way to run x -> A x on the ATmega328P (A: ints). clamp: how an
    input clamp fused into the sparse kernel runs ("all" columns or a "list" of the read ones in asm,
    "c" with per-feature bounds), None when x is not a fused clamp (then the kernel copies x offset)."""
    rows, cols = A.shape
    nnz = int(np.count_nonzero(A))
    used = int(np.count_nonzero(np.any(A != 0, axis=0)))
    dense_prep = AVR_COSTS["dense_prep"][clamp] * cols
    runs = sum(int(len(p) > 0) + int(len(n) > 0) for pages in run_lengths(A) for p, n in pages)
    pages = -(-cols // PAGE_COLS)
    c = AVR_COSTS
    out = {}
    why = sparse_format_ok(A, wbits)
    if why:
        out["avr-sparse-asm"] = Candidate(unavailable=why)
    else:
        driver = driver_calls(run_counts(A)) <= DRIVER_MAX_CALLS
        s = c["driver" if driver else "sparse"][wbits]
        if clamp == "all" and used < cols:
            clamp = "list"
        prep = {"all": c["clamp_all"] * cols, "list": c["clamp_list"] * used + 10 * pages,
                "c": c["clamp_c"] * used, None: c["copy_col"] * cols}[clamp]
        flash = (sparse_flash(A, wbits, offset, counts=not driver) + (used + pages if clamp == "list" else 0)
                 + avr_sparse_code(A, wbits, driver))
        out["avr-sparse-asm"] = Candidate(
            round(s["call"] + s["nnz"] * nnz + s["run"] * runs + s["empty_run"] * (2 * rows * pages - runs)
                  + s["row"] * rows + prep), flash)
    d = c["dense"][wbits]
    out["avr-dense-asm"] = (Candidate(round(d["call"] + d["mac"] * rows * cols + d["block"] * -(-rows // 5)
                                            + dense_prep), rows * cols * wbits // 8 + 4 * rows
                                  + avr_dense_code(rows, wbits))
                            if cols < 65536 else Candidate(unavailable=f"{cols} columns"))
    k = c["csc_c"][wbits]
    out["csc-c"] = Candidate(round(k["nnz"] * nnz + k["col"] * cols + c["clamp_c"] * cols),
                             csc_flash(nnz, rows, cols, wbits))
    return out


AVR_MAC_WORDS = {16: 20, 8: 12}  # flash words of one entry of the sparse kernels (kernels_sparse._mac)


def avr_sparse_code(A: np.ndarray, wbits: int, driver: bool) -> int:
    """Bytes of the sparse kernel's code for A (it is generated per matrix): the driver kernel's calls and
    its two chains of unrolled entries, or the loop kernel's unrolled runs per page."""
    mac = 2 * AVR_MAC_WORDS[wbits]
    pages = -(-A.shape[1] // PAGE_COLS)
    if not driver:
        return 2 * pages * 11 * mac + 300  # per page and sign: 8 + 4 + 2 + 1 entries (UNROLL = 8)
    counts = run_counts(A)
    longest = max((n for row in counts for pn in row for n in pn), default=1)
    calls = driver_calls(counts)
    return 2 * max(1, min(CHAIN, longest)) * mac + calls * (2 if calls < 1500 else 4) + 150


def avr_dense_code(rows: int, wbits: int) -> int:
    """Bytes of the dense kernel's code (kernels_avr.mac_asm): four unrolled columns of up to 5 rows (10 or
    18 words per row and column), for the full blocks and the remainder's."""
    per_row = 2 * 4 * (18 if wbits == 16 else 10)
    sizes = {min(5, rows)} | ({rows % 5} if rows % 5 else set())
    return sum(n * per_row + 2 * 4 * 3 + 300 for n in sizes)  # + the column's x load, entry and exit


def choose(cands: dict[str, Candidate], stored: str = "csc-c") -> str:
    """The fastest candidate whose flash is at most the larger of the stored form's (CSC for a sparse
    constant, the size the model was trained to) and the dense kernel's image (what the same matrix costs
    stored dense): a sparse matrix may run dense where that is faster, never bigger than a dense one."""
    dense = [v.flash for k, v in cands.items() if k.endswith("dense-asm") and v.usable]
    limit = max([cands[stored].flash, *dense])
    ok = [k for k, v in cands.items() if v.usable and v.flash <= limit]
    return min(ok, key=lambda k: cands[k].cycles)


CHAIN = 32  # entries of one call into a chain of the driver kernel (longer runs take several calls)
DRIVER_MAX_CALLS = 1024  # calls the driver kernel may emit (its code grows with them), else the loop kernel


def run_counts(A: np.ndarray) -> list[list[tuple[int, int]]]:
    """Per row, per page of 128 columns: (positive weights, negative weights)."""
    return [[(len(p), len(n)) for p, n in pages] for pages in run_lengths(A)]


def driver_calls(counts: list[list[tuple[int, int]]]) -> int:
    """Calls the driver kernel makes: one per CHAIN entries of each run, one per row."""
    return sum(-(-n // CHAIN) for pages in counts for pn in pages for n in pn) + len(counts)


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
    clamp = x_name if _fusable_clamp(em, x_name) else None
    return SparsePlan(A, wbits, clamp, op == "sparse_const")


def _fusable_clamp(em, name: str) -> bool:
    from tinycc_ml.backends.kernels_clip import clip_ok

    g = em.graph
    if g.op(name) != "clip" or any(name == n for _, n in g.outputs) or len(g.users(name)) != 1:
        return False
    return clip_ok(em, g.node(name))


def _x_may_be_negative(em, x_name: str, clamp: str | None) -> bool:
    if clamp is None:
        return True
    cl = em.graph.node(clamp)
    lo, _ = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], em.graph.type(cl.inputs[0]).dtype)
    return bool(np.min(lo) < 0)


def avr_decision(em, node: Node) -> SparseDecision:
    """The ATmega328P's kernel for a mat-vec with a plan (sparse_matvec_plan), decided once."""
    memo = em.sparse_choices
    if node.name in memo:
        return memo[node.name]
    plan = sparse_matvec_plan(em, node)
    A, wbits, clamp = plan.A, plan.wbits, plan.clamp
    offset = _x_may_be_negative(em, node.inputs[1], clamp)
    kind = None
    if clamp:
        cl = em.graph.node(clamp)
        lo, _ = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], em.graph.type(cl.inputs[0]).dtype)
        kind = "all" if np.ndim(lo) == 0 else "c"
    cands = avr_candidates(A, wbits, offset, kind)
    if not plan.stored_sparse:  # the shared C of a dense constant is no CSC loop
        del cands["csc-c"]
    if cands["avr-sparse-asm"].usable and not em.own_x_pages and not _arena_page(em, clamp):
        cands["avr-sparse-asm"] = Candidate(unavailable="its 256-byte aligned x buffer would not fit the chip's RAM")
    chosen = choose(cands, "csc-c" if plan.stored_sparse else "avr-dense-asm")
    note = ""
    if not cands["avr-sparse-asm"].usable:
        note = f"sparse kernel not used: {cands['avr-sparse-asm'].unavailable}"
    choice = KernelChoice(node.inputs[0], A.shape, int(np.count_nonzero(A)), chosen, cands, note, node.name)
    em.kernel_report.append(choice.as_dict())
    memo[node.name] = SparseDecision(chosen, clamp, choice, offset)
    return memo[node.name]


def _arena_page(em, clamp: str | None) -> bool:
    """The fused clamp's arena slot starts a 256-byte page of an arena the emitter can align."""
    plan = em.graph.analyses.memory_plan
    if clamp and clamp in plan and em.aligns_arenas:
        key, offset, _ = plan[clamp]
        return key == "i16" and (2 * offset) % 256 == 0
    return False


# instructions (unicorn/QEMU counts), fitted on runs of the kernels
M0_COSTS = {
    "sparse": {"nnz": 6.75, "run": 14.0, "row": 12.0, "call": 40.0},
    "dense": {"mac": 3.4, "block": 70.0},
    "csc_c": {"nnz": 11.0, "col": 9.0},
    "clamp_col": 7.0, "clamp_list": 12.0, "copy_col": 8.0,  # copy: the dense kernel's x + 2^15 of an intermediate
}


def m0_candidates(A: np.ndarray, wbits: int, clamp_used: int | None) -> dict[str, Candidate]:
    rows, cols = A.shape
    nnz = int(np.count_nonzero(A))
    pages = -(-cols // PAGE_COLS)
    c = M0_COSTS
    s = c["sparse"]
    clamp = 0 if clamp_used is None else c["clamp_list"] * clamp_used
    out = {"m0-sparse-asm": Candidate(round(s["call"] + s["nnz"] * nnz + s["run"] * rows * pages + s["row"] * rows
                                            + clamp), nnz * (1 + wbits // 8) + rows * pages),
           "m0-dense-asm": Candidate(round(c["dense"]["mac"] * rows * cols + c["dense"]["block"] * -(-rows // 9)
                                           + c["copy_col" if clamp_used is None else "clamp_col"] * cols),
                                     rows * cols * wbits // 8 + 4 * rows),
           "csc-c": Candidate(round(c["csc_c"]["nnz"] * nnz + c["csc_c"]["col"] * cols
                                    + (0 if clamp_used is None else c["clamp_col"] * cols)),
                              csc_flash(nnz, rows, cols, wbits))}
    if rows > 65535:
        out["m0-sparse-asm"] = Candidate(unavailable=f"{rows} rows")
    if cols >= 4096:
        out["m0-dense-asm"] = Candidate(unavailable=f"{cols} columns")
    return out


def avr_dense_takes(em, node: Node) -> bool:
    """May the ATmega328P's dense kernel take this mat-vec (and its producer store x offset for it)?
    Not when the cost model sends it elsewhere."""
    return sparse_matvec_plan(em, node) is None or avr_decision(em, node).kernel == "avr-dense-asm"


def m0_dense_takes(em, node: Node) -> bool:
    """The same for the Cortex-M0's dense kernel."""
    return sparse_matvec_plan(em, node) is None or m0_decision(em, node).kernel == "m0-dense-asm"


def m0_decision(em, node: Node) -> SparseDecision:
    """The Cortex-M0's kernel for a mat-vec with a plan (sparse_matvec_plan), decided once."""
    memo = em.sparse_choices
    if node.name in memo:
        return memo[node.name]
    plan = sparse_matvec_plan(em, node)
    A, wbits, clamp = plan.A, plan.wbits, plan.clamp
    used = int(np.count_nonzero(np.any(A != 0, axis=0))) if clamp else None
    cands = m0_candidates(A, wbits, used)
    if not plan.stored_sparse:
        del cands["csc-c"]
    chosen = choose(cands, "csc-c" if plan.stored_sparse else "m0-dense-asm")
    choice = KernelChoice(node.inputs[0], A.shape, int(np.count_nonzero(A)), chosen, cands, node=node.name)
    em.kernel_report.append(choice.as_dict())
    memo[node.name] = SparseDecision(chosen, clamp, choice)
    return memo[node.name]

