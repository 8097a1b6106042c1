"""The ATmega328P's cost model for a mat-vec by a constant matrix: predicted cycles and flash of the sparse
asm kernel, the dense asm kernel and the shared C CSC loop, decided once per node (see
``tinycc_ml.target``'s kernel-choice helpers)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import (
    PAGE_COLS,
    KernelChoice,
    KernelCost,
    Node,
    SparseDecision,
    choose_kernel,
    csc_flash,
    run_lengths,
    sparse_flash,
    sparse_matvec_plan,
    storage_clip_bounds,
)

MAX_SIGN_PER_ROW = 256  # entries of one sign in a row: 24-bit sums of 8x8-bit products


MAX_ROWS = 256  # a byte counts the rows (0 = 256)


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


def avr_candidates(A: np.ndarray, wbits: int, offset: bool, clamp: str | None = None) -> dict[str, KernelCost]:
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
        out["avr-sparse-asm"] = KernelCost(unavailable=why)
    else:
        driver = driver_calls(run_counts(A)) <= DRIVER_MAX_CALLS
        s = c["driver" if driver else "sparse"][wbits]
        if clamp == "all" and used < cols:
            clamp = "list"
        prep = {"all": c["clamp_all"] * cols, "list": c["clamp_list"] * used + 10 * pages,
                "c": c["clamp_c"] * used, None: c["copy_col"] * cols}[clamp]
        flash = (sparse_flash(A, wbits, offset, counts=not driver) + (used + pages if clamp == "list" else 0)
                 + avr_sparse_code(A, wbits, driver))
        out["avr-sparse-asm"] = KernelCost(
            round(s["call"] + s["nnz"] * nnz + s["run"] * runs + s["empty_run"] * (2 * rows * pages - runs)
                  + s["row"] * rows + prep), flash)
    d = c["dense"][wbits]
    out["avr-dense-asm"] = (KernelCost(round(d["call"] + d["mac"] * rows * cols + d["block"] * -(-rows // 5)
                                            + dense_prep), rows * cols * wbits // 8 + 4 * rows
                                  + avr_dense_code(rows, wbits))
                            if cols < 65536 else KernelCost(unavailable=f"{cols} columns"))
    k = c["csc_c"][wbits]
    out["csc-c"] = KernelCost(round(k["nnz"] * nnz + k["col"] * cols + c["clamp_c"] * cols),
                             csc_flash(nnz, rows, cols, wbits))
    return out


AVR_MAC_WORDS = {16: 20, 8: 12}  # flash words of one entry of the sparse kernels (avr.sparse._mac)


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
    """Bytes of the dense kernel's code (avr.kernels.mac_asm): four unrolled columns of up to 5 rows (10 or
    18 words per row and column), for the full blocks and the remainder's."""
    per_row = 2 * 4 * (18 if wbits == 16 else 10)
    sizes = {min(5, rows)} | ({rows % 5} if rows % 5 else set())
    return sum(n * per_row + 2 * 4 * 3 + 300 for n in sizes)  # + the column's x load, entry and exit


CHAIN = 32  # entries of one call into a chain of the driver kernel (longer runs take several calls)


DRIVER_MAX_CALLS = 1024  # calls the driver kernel may emit (its code grows with them), else the loop kernel


def run_counts(A: np.ndarray) -> list[list[tuple[int, int]]]:
    """Per row, per page of 128 columns: (positive weights, negative weights)."""
    return [[(len(p), len(n)) for p, n in pages] for pages in run_lengths(A)]


def driver_calls(counts: list[list[tuple[int, int]]]) -> int:
    """Calls the driver kernel makes: one per CHAIN entries of each run, one per row."""
    return sum(-(-n // CHAIN) for pages in counts for pn in pages for n in pn) + len(counts)


def x_may_be_negative(em, x_name: str, clamp: str | None) -> bool:
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
    offset = x_may_be_negative(em, node.inputs[1], clamp)
    kind = None
    if clamp:
        cl = em.graph.node(clamp)
        lo, _ = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], em.graph.type(cl.inputs[0]).dtype)
        kind = "all" if np.ndim(lo) == 0 else "c"
    cands = avr_candidates(A, wbits, offset, kind)
    if not plan.stored_sparse:  # the shared C of a dense constant is no CSC loop
        del cands["csc-c"]
    if cands["avr-sparse-asm"].usable and not em.own_x_pages and not arena_page(em, clamp):
        cands["avr-sparse-asm"] = KernelCost(unavailable="its 256-byte aligned x buffer would not fit the chip's RAM")
    chosen = choose_kernel(cands, "csc-c" if plan.stored_sparse else "avr-dense-asm")
    note = ""
    if not cands["avr-sparse-asm"].usable:
        note = f"sparse kernel not used: {cands['avr-sparse-asm'].unavailable}"
    choice = KernelChoice(node.inputs[0], A.shape, int(np.count_nonzero(A)), chosen, cands, note, node.name)
    em.kernel_report.append(choice.as_dict())
    memo[node.name] = SparseDecision(chosen, clamp, choice, offset)
    return memo[node.name]


def arena_page(em, clamp: str | None) -> bool:
    """The fused clamp's arena slot starts a 256-byte page of an arena the emitter can align."""
    plan = em.graph.analyses.memory_plan
    if clamp and clamp in plan and em.aligns_arenas:
        key, offset, _ = plan[clamp]
        return key == "i16" and (2 * offset) % 256 == 0
    return False


def avr_dense_takes(em, node: Node) -> bool:
    """May the ATmega328P's dense kernel take this mat-vec (and its producer store x offset for it)?
    Not when the cost model sends it elsewhere."""
    return sparse_matvec_plan(em, node) is None or avr_decision(em, node).kernel == "avr-dense-asm"
