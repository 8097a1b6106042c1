"""The Cortex-M0's cost model for a mat-vec by a constant matrix: predicted instructions and flash of the
sparse asm kernel, the dense asm kernel and the shared C CSC loop, decided once per node."""

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
    sparse_matvec_plan,
)

# instructions (unicorn/QEMU counts), fitted on runs of the kernels
M0_COSTS = {
    "sparse": {"nnz": 6.75, "run": 14.0, "row": 12.0, "call": 40.0},
    "dense": {"mac": 3.4, "block": 70.0},
    "csc_c": {"nnz": 11.0, "col": 9.0},
    "clamp_col": 7.0, "clamp_list": 12.0, "copy_col": 8.0,  # copy: the dense kernel's x + 2^15 of an intermediate
}


def m0_candidates(A: np.ndarray, wbits: int, clamp_used: int | None) -> dict[str, KernelCost]:
    rows, cols = A.shape
    nnz = int(np.count_nonzero(A))
    pages = -(-cols // PAGE_COLS)
    c = M0_COSTS
    s = c["sparse"]
    clamp = 0 if clamp_used is None else c["clamp_list"] * clamp_used
    out = {"m0-sparse-asm": KernelCost(round(s["call"] + s["nnz"] * nnz + s["run"] * rows * pages + s["row"] * rows
                                            + clamp), nnz * (1 + wbits // 8) + rows * pages),
           "m0-dense-asm": KernelCost(round(c["dense"]["mac"] * rows * cols + c["dense"]["block"] * -(-rows // 9)
                                           + c["copy_col" if clamp_used is None else "clamp_col"] * cols),
                                     rows * cols * wbits // 8 + 4 * rows),
           "csc-c": KernelCost(round(c["csc_c"]["nnz"] * nnz + c["csc_c"]["col"] * cols
                                    + (0 if clamp_used is None else c["clamp_col"] * cols)),
                              csc_flash(nnz, rows, cols, wbits))}
    if rows > 65535:
        out["m0-sparse-asm"] = KernelCost(unavailable=f"{rows} rows")
    if cols >= 4096:
        out["m0-dense-asm"] = KernelCost(unavailable=f"{cols} columns")
    return out


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
    chosen = choose_kernel(cands, "csc-c" if plan.stored_sparse else "m0-dense-asm")
    choice = KernelChoice(node.inputs[0], A.shape, int(np.count_nonzero(A)), chosen, cands, node=node.name)
    em.kernel_report.append(choice.as_dict())
    memo[node.name] = SparseDecision(chosen, clamp, choice)
    return memo[node.name]
