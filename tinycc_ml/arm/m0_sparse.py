"""Sparse mat-vec on the Cortex-M0: per row and 128-column page a count byte and each entry's byte offset
into x's page, the weights in the same order; signed loads, so no correction terms. Chosen per matrix by
the M0 cost model (m0_cost) against the dense kernel and the shared C CSC loop."""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m0_cost import m0_decision
from tinycc_ml.arm.m0_fused import kernel_matvec
from tinycc_ml.target import (
    PAGE_COLS,
    Node,
    clamp_lines,
    csc_function,
    fusable_clamp,
    node_output_shift,
    shift_c,
    sparse_matvec_plan,
    storage_clip_bounds,
    store,
    used_list,
)


def m0_format(A: np.ndarray, wbits: int) -> tuple[np.ndarray, np.ndarray]:
    """(column stream, weights) of the M0 kernel: per row, per page of 128 columns, a count byte then each
    entry's byte offset into the page of x; the weights (int16 / int8) in the same order."""
    rows, cols = A.shape
    stream: list[int] = []
    weights: list[int] = []
    for r in range(rows):
        for p0 in range(0, cols, PAGE_COLS):
            nz = np.nonzero(A[r, p0:p0 + PAGE_COLS])[0]
            stream += [len(nz), *(2 * nz).tolist()]
            weights += A[r, p0 + nz].tolist()
    return np.asarray(stream, np.uint8), np.asarray(weights, np.int16 if wbits == 16 else np.int8)


def m0_sparse_asm(name: str, wbits: int, rows: int, pages: int) -> str:
    """void name(const uint8_t *cols, const int16_t *x, const void *w, int32_t *out): out[r] = sum A[r][c] x[c]
    over the m0_format stream; x and w are loaded signed (LDRSH/LDRSB with register offsets), so no
    correction terms. Four entries per loop iteration after the count's remainder."""
    wb = wbits // 8
    lw = "ldrsh" if wbits == 16 else "ldrsb"

    def entry(i: int) -> list[str]:
        return [f"ldrb r4, [r0, #{i}]", "ldrsh r5, [r1, r4]", f"{lw} r6, [r2, r7]", f"adds r7, #{wb}",
                "muls r5, r6, r5", "adds r3, r3, r5"]

    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:",
         "push {r4-r7, lr}", "mov r4, r8", "mov r5, r9", "mov r6, r10", "mov r7, r11", "push {r4-r7}",
         "mov r8, r1", "mov r9, r3", "movs r7, #0", f"ldr r4, ={rows}", "mov r10, r4",
         "1:", "movs r3, #0", "mov r1, r8", f"movs r4, #{pages}", "mov r11, r4",
         "2:", "ldrb r6, [r0]", "adds r0, #1", "movs r5, #3", "ands r5, r6",
         *(["lsls r6, r6, #1", "lsls r5, r5, #1"] if wb == 2 else []),
         "adds r6, r6, r7", "mov r12, r6", "adds r5, r5, r7", "mov lr, r5", "cmp r7, lr", "beq 3f",
         "6:", *entry(0), "adds r0, #1", "cmp r7, lr", "bne 6b",
         "3:", "cmp r7, r12", "beq 5f",
         "4:", *(line for i in range(4) for line in entry(i)), "adds r0, #4", "cmp r7, r12", "bne 4b",
         "5:", "adds r1, #128", "adds r1, #128", "mov r6, r11", "subs r6, #1", "mov r11, r6", "bne 2b",
         "mov r4, r9", "stmia r4!, {r3}", "mov r9, r4", "mov r6, r10", "subs r6, #1", "mov r10, r6", "bne 1b",
         "pop {r4-r7}", "mov r8, r4", "mov r9, r5", "mov r10, r6", "mov r11, r7", "pop {r4-r7, pc}",
         ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    # not .global: local to the object file (the C call resolves within it)
    return f"void {name}(const uint8_t *cols, const int16_t *x, const void *w, int32_t *out);\n__asm__(\n{text});\n"


def m0_clamp_asm(name: str, pages: int, lo: int, hi: int) -> str:
    """void name(const uint8_t *list /*used_list*/, const int16_t *x, int16_t *out): out[c] = clamp(x[c])
    for the columns in the list; with lo = 0 one unsigned compare settles the common case."""
    one = ["ldrb r4, [r0]", "adds r0, #1"]
    if lo == 0:
        one += ["ldrh r5, [r1, r4]", "cmp r5, r6", "bls 5f", "sxth r5, r5", "asrs r5, r5, #31", "bics r6, r5",
                "mov r5, r6", "ldr r6, =" + str(hi), "5:"]
    else:
        one += ["ldrsh r5, [r1, r4]", "cmp r5, r6", "ble 4f", "mov r5, r6", "4:", "cmp r5, r7", "bge 5f",
                "mov r5, r7", "5:"]
    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:", "push {r4-r7, lr}",
         f"ldr r6, ={hi}", f"ldr r7, ={lo}", f"movs r3, #{pages}",
         "1:", "ldrb r4, [r0]", "adds r0, #1", "adds r4, r4, r0", "mov lr, r4", "cmp r0, lr", "beq 3f",
         "2:", *one, "strh r5, [r2, r4]", "cmp r0, lr", "bne 2b",
         "3:", "adds r1, #128", "adds r1, #128", "adds r2, #128", "adds r2, #128", "subs r3, #1", "bne 1b",
         "pop {r4-r7, pc}", ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    return f"void {name}(const uint8_t *list, const int16_t *x, int16_t *out);\n__asm__(\n{text});\n"


def m0_sparse_kernel(em, node: Node) -> list[str] | None:
    """Cortex-M0: [] for an input clamp fused into the sparse mat-vec reading it, the kernel for the
    mat-vec; None when another kernel (or c_fixed) takes the node."""
    if node.op == "clip":
        if not fusable_clamp(em, node.name):
            return None
        user = em.graph.node(em.graph.users(node.name)[0])
        if sparse_matvec_plan(em, user) is None or m0_decision(em, user).kernel != "m0-sparse-asm":
            return None
        return []
    plan = sparse_matvec_plan(em, node)
    if plan is None:
        return None
    decision = m0_decision(em, node)
    chosen, clamp = decision.kernel, decision.clamp
    A, wbits = plan.A, plan.wbits
    if chosen == "m0-dense-asm":
        return kernel_matvec(em, node)
    if chosen != "m0-sparse-asm":
        return csc_function(em, node)
    a_name, x_name = node.inputs
    rows, cols = A.shape
    pages = -(-cols // PAGE_COLS)
    stream, weights = m0_format(A, wbits)
    csym = em.add_const_array(em.sym(f"{a_name}_cols"), stream, "uint8_t",
                              f"%{a_name}: {rows}x{cols}, per row and 128-column page: count, byte offsets")
    wsym = em.add_const_array(em.sym(f"{a_name}_w"), weights, "int16_t" if wbits == 16 else "int8_t",
                              f"%{a_name}: the non-zeros in the order of {csym}")
    name = em.sym(f"spmv{wbits}_{rows}x{pages}")
    if name not in em.helpers:
        em.helpers[name] = m0_sparse_asm(name, wbits, rows, pages)
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    out_shift = node_output_shift(em.graph, node.name)
    lines = ["{"]
    if clamp:
        used = np.nonzero(np.any(A != 0, axis=0))[0]
        cl = em.graph.node(clamp)
        lo, hi = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], em.graph.type(cl.inputs[0]).dtype)
        if np.ndim(lo) == 0 and pages < 256:
            lsym = em.add_const_array(em.sym(f"{clamp}_read"), used_list(used, cols), "uint8_t",
                                      f"%{clamp}: per 128-column page, the byte offsets of the columns read")
            cname = em.sym(f"clamp{pages}_{int(lo)}_{int(hi)}".replace("-", "m"))
            if cname not in em.helpers:
                em.helpers[cname] = m0_clamp_asm(cname, pages, int(lo), int(hi))
            lines.append(f"    {cname}({lsym}, {em.var(cl.inputs[0])}, {em.var(clamp)});")
        else:
            lines += clamp_lines(em, clamp, em.var(clamp), used, offset=False)

    return lines + [f"    {name}({csym}, {em.var(x_name)}, {wsym}, (int32_t *){acc});",
                    f"    for (int r = 0; r < {rows}; ++r)",
                    "        " + store(em, node, "r", shift_c(em, f"(int32_t){acc}[r]", out_shift)), "}"]
