"""Sparse mat-vec on the ATmega328P: a row-major run format walked by an asm kernel, chosen per
matrix by the cost model (avr/cost.py) against the dense kernel and the C CSC loop.

Format (flash, per row): for each page of 128 columns, a run of positive weights then a run of
negative ones, each a count byte followed by (column byte, |w| little endian) entries; then K_r
(4 bytes, only when x is stored offset). The column byte is 2 (col - 128 page): the byte offset of
x[col] inside its 256-byte page of the (256-byte aligned) x buffer, so the gather is one LPM into
Y's low byte and two loads, with no address arithmetic. Magnitudes are unsigned (|w| <= 2^15 or
2^7), so every partial product is an unsigned MUL; negative runs subtract. With x' = x + 2^15
(when x may be negative) sum(w x') = sum(w x) + 2^15 sum(w): K_r = -2^15 sum_r(w) mod 2^32 in front
of the row cancels it. All sums are mod 2^32, exact because tinycc_ml.ir.fixed proves they fit.

Two kernels walk the format. The driver kernel (sparse_driver_asm, the default) is generated for one
matrix: the counts live in its code, each run is one call into a chain of unrolled entries at the entry
that leaves the run's length, so the flash holds no count bytes and an empty run costs nothing. The
loop kernel (sparse_asm) reads the counts from flash; it takes matrices whose driver would need more
than DRIVER_MAX_CALLS calls (code size). A kernel whose x is not the fused clamp's arena slot copies x
into a 256-byte aligned buffer of its own; a build that then does not fit the chip's RAM is emitted
again without such buffers (McuBackend.emit), and the report says why.

The input clamp feeding a sparse first layer is fused here: only the columns the matrix reads are
clamped and stored (in the kernel's layout), the others are never loaded.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.avr import cost
from tinycc_ml.avr.cost import CHAIN, arena_page, avr_decision, driver_calls, run_counts
from tinycc_ml.avr.kernels import asm_words, kernel_matvec, store_rows, store_rs
from tinycc_ml.target import (
    PAGE_COLS,
    Node,
    clamp_lines,
    csc_function,
    fusable_clamp,
    node_output_shift,
    run_lengths,
    sparse_matvec_plan,
    storage_clip_bounds,
    used_list,
)


def sparse_image(A: np.ndarray, wbits: int, offset: bool, counts: bool = True) -> np.ndarray:
    """The flash bytes of the run format (see the module docstring); without the runs' count bytes for
    the driver kernel (sparse_driver_asm), whose code holds them."""
    out: list[int] = []
    k_row = (-(A.astype(np.int64).sum(axis=1) << 15)) % (1 << 32)
    for r, pages in enumerate(run_lengths(A)):
        for p, (pos, neg) in enumerate(pages):
            for cols in (pos, neg):
                if counts:
                    out.append(len(cols))
                for col in cols:
                    mag = abs(int(A[r, col]))
                    out.append(2 * (int(col) - PAGE_COLS * p))
                    out += [mag & 0xFF, mag >> 8] if wbits == 16 else [mag]
        if offset:
            out += [int(k_row[r] >> (8 * b)) & 0xFF for b in range(4)]
    return np.asarray(out, np.uint8)


# registers of sparse_asm: r2..r5 the row's result, r6 zero, r7 the x buffer's page, r8..r10 sum of the low
# products of positive entries, r11..r13 of negative ones (24 bits each: no row has more than 256
# entries), r14, r15, r18 bits 8..31 of the other products (wrapping), r16/r17 |w|, r22/r23 x'
L_POS, L_NEG, MID = ("r8", "r9", "r10"), ("r11", "r12", "r13"), ("r14", "r15", "r18")


UNROLL = 8  # entries per loop iteration (a power of 2)


def _mac(wbits: int, add: bool) -> list[str]:
    """One entry: column byte -> Y low, x' from the page, |w| from flash; low product into L_POS or
    L_NEG (added: no wrap), the others into MID (added or subtracted)."""
    a, c = ("add", "adc") if add else ("sub", "sbc")
    lo = L_POS if add else L_NEG
    m0, m1, m2 = MID
    body = ["lpm r28, Z+", "ld r22, Y", "ldd r23, Y+1", "lpm r16, Z+"]
    if wbits == 16:
        body.append("lpm r17, Z+")
    body += ["mul r16, r22", f"add {lo[0]}, r0", f"adc {lo[1]}, r1", f"adc {lo[2]}, r6",
             "mul r16, r23", f"{a} {m0}, r0", f"{c} {m1}, r1", f"{c} {m2}, r6"]
    if wbits == 16:
        body += ["mul r17, r22", f"{a} {m0}, r0", f"{c} {m1}, r1", f"{c} {m2}, r6",
                 "mul r17, r23", f"{a} {m1}, r0", f"{c} {m2}, r1"]
    return body


def _clamp_one(lo: int, hi: int) -> list[str]:
    """clamp(r23:r22) to [lo, hi] (r20:r21 = lo, r16:r17 = hi, r14:r15 = 0), the clip's semantics."""
    out = []
    if hi < 32767:
        out += ["cp r16, r22", "cpc r17, r23", "brge 1f", "movw r22, r16", "1:"]
    if lo == 0:
        out += ["sbrc r23, 7", "movw r22, r14"]
    elif lo > -32768:
        out += ["cp r22, r20", "cpc r23, r21", "brge 1f", "movw r22, r20", "1:"]
    return out


def _clamp_asm(clamp: tuple, offset: bool) -> list[str]:
    """Prologue of sparse_asm: clamp the input (src, r19:r18) into the page-aligned buffer (Y), as the clip
    does (scalar bounds), storing x + 2^15 when offset. clamp = ("all", cols, lo, hi): every column, in
    order; ("list", pages, lo, hi): per page of 128 columns a count byte and the byte offsets of the
    columns the matrix reads, from flash (Z) in front of the run format. With lo = 0, a high byte in
    [0, hi >> 8) needs no clamping: one compare, the full clamp out of line."""
    kind, n, lo, hi = clamp
    full = _clamp_one(lo, hi)
    fast = lo == 0 and hi >> 8 >= 1
    store = (["subi r23, 0x80"] if offset else [])
    out = ["movw r28, r22", "clr r14", "clr r15", f"ldi r16, lo8({hi})", f"ldi r17, hi8({hi})",
           f"ldi r20, lo8({lo})", f"ldi r21, hi8({lo})"]
    if kind == "all":
        unroll = 4 if n % 4 == 0 else (2 if n % 2 == 0 else 1)
        body, slow = [], []
        for e in range(unroll):
            body += ["ld r22, X+", "ld r23, X+"]
            if fast:
                body += [f"cpi r23, {hi >> 8}", f"brsh 2{e}f", f"3{e}:"]
                slow += [f"2{e}:", *full, f"rjmp 3{e}b"]
            else:
                body += full
            body += store + ["st Y+, r22", "st Y+, r23"]
        iters = n // unroll
        if iters <= 256 and len(body) < 60:  # a byte counts the iterations, brne reaches back
            return out + ["movw r26, r18", f"ldi r24, {iters & 0xFF}", "8:", *body, "dec r24", "brne 8b",
                          "rjmp 9f", *slow, "9:"]
        return out + ["movw r26, r18", f"ldi r24, lo8({iters})", f"ldi r25, hi8({iters})", "8:", *body,
                      "sbiw r24, 1", "breq 9f", "rjmp 8b", *slow, "9:"]
    # list: r12:r13 = this page of src; per entry the byte offset goes to Y's low byte and is added to it
    body = ["lpm r28, Z+", "movw r26, r12", "add r26, r28", "adc r27, r14", "ld r22, X+", "ld r23, X"]
    if fast:
        body += [f"cpi r23, {hi >> 8}", "brsh 2f", "3:"]
    else:
        body += full
    body += store + ["st Y, r22", "std Y+1, r23", "dec r24", "brne 8b"]
    slow = ["2:", *full, "rjmp 3b"] if fast else []
    return out + ["movw r12, r18", f"ldi r25, {n}", "7:", "lpm r24, Z+", "tst r24", "breq 6f", "8:", *body,
                  "6:", "inc r13", "inc r29", "dec r25", "brne 7b", "rjmp 9f", *slow, "9:"]


SAVED = [f"r{r}" for r in range(2, 18)] + ["r28", "r29"]  # the call-saved registers both kernels use


def _entry(name: str, clamp: tuple | None, offset: bool) -> list[str]:
    """Both sparse kernels' entry: save registers, Z = fmt, r7 = x's page, r11:r10 = out; the input
    clamp (clamp) fills x from src first."""
    b = [f".section .text.{name},\\\"ax\\\",@progbits", f".type {name}, @function", f"{name}:"]
    b += [f"push {r}" for r in SAVED]
    b += ["movw r30, r24", "mov r7, r23", "movw r10, r20"]
    return b + (_clamp_asm(clamp, offset) if clamp else [])


def _exit() -> list[str]:
    return [f"pop {r}" for r in reversed(SAVED)] + ["ret"]


def sparse_asm(name: str, wbits: int, rows: int, pages: int, offset: bool, out_shift: int | None,
               clamp: tuple[int, int, int] | None) -> str:
    """void name(const uint8_t *fmt /*flash*/, int16_t *x /*256-byte aligned*/, void *out, const int16_t *src):
    out[r] = sum_c A[r][c] x[c] (mod 2^32, uint32) for the run format of sparse_image, or with out_shift
    (8..16) the int16 sat16(rshift(., out_shift)). With clamp (see _clamp_asm), x is first filled from src."""

    b = _entry(name, clamp, offset)
    b += ["movw r26, r10", "clr r6", f"ldi r25, {rows & 0xFF}", "1:"]
    # zero the partial sums (r2:r3 is a zero pair for movw; r2..r5 take K or L_POS at the end)
    b += ["clr r2", "clr r3", "movw r8, r2", "movw r10, r2", "movw r12, r2", "movw r14, r2", "clr r18",
          "mov r29, r7"]
    for page in range(pages):  # unrolled: the pages' runs one after the other
        for sign, add in (("1", True), ("2", False)):  # local labels 3x..7x per sign
            mac = _mac(wbits, add)
            body = mac * UNROLL
            tail = (["dec r24", f"brne 4{sign}b"] if len(body) < 60 else
                    ["dec r24", f"breq 5{sign}f", f"rjmp 4{sign}b"])
            b += ["lpm r24, Z+"]
            for bit, label in enumerate(("3", "6", "7")[:UNROLL.bit_length() - 1]):  # the count's low bits first
                b += [f"sbrs r24, {bit}", f"rjmp {label}{sign}f", *(mac * (1 << bit)), f"{label}{sign}:"]
            b += ["lsr r24"] * (UNROLL.bit_length() - 1)
            b += [f"brne 4{sign}f", f"rjmp 5{sign}f", f"4{sign}:", *body, *tail, f"5{sign}:"]
        if page + 1 < pages:
            b += ["inc r29"]
    # the row: K + L_POS - L_NEG + MID * 2^8
    b += _row_end(offset, out_shift)
    b += ["dec r25", "breq 9f", "rjmp 1b", "9:", "clr r1"]
    b += _exit() + [f".size {name}, .-{name}", ".text"]
    # not .global: the symbol stays local to the object file (the C call resolves within it)
    return (f"void {name}(const uint8_t *fmt, int16_t *x, void *out, const int16_t *src);\n"
            f"__asm__(\n{asm_words(b)});\n")


def _row_end(offset: bool, out_shift: int | None) -> list[str]:
    """A row's result, K + L_POS - L_NEG + MID * 2^8 (K from flash with ``offset``), stored at X+ as
    int32, or as int16 shifted right by ``out_shift``."""
    if offset:
        b = ["lpm r2, Z+", "lpm r3, Z+", "lpm r4, Z+", "lpm r5, Z+",
             f"add r2, {L_POS[0]}", f"adc r3, {L_POS[1]}", f"adc r4, {L_POS[2]}", "adc r5, r6"]
    else:
        b = [f"movw r2, {L_POS[0]}", f"mov r4, {L_POS[2]}", "clr r5"]
    b += [f"sub r2, {L_NEG[0]}", f"sbc r3, {L_NEG[1]}", f"sbc r4, {L_NEG[2]}", "sbc r5, r6",
          f"add r3, {MID[0]}", f"adc r4, {MID[1]}", f"adc r5, {MID[2]}"]
    if out_shift is None:
        return b + ["st X+, r2", "st X+, r3", "st X+, r4", "st X+, r5"]
    return b + store_rows(["r2", "r3", "r4", "r5"], 1, out_shift, "r6", "r24")


def sparse_driver_asm(name: str, wbits: int, counts: list[list[tuple[int, int]]], offset: bool,
                      out_shift: int | None, clamp: tuple | None) -> str:
    """sparse_asm's contract for one matrix whose run lengths are known when compiling: the rows are straight
    code calling into two chains of CHAIN entries (add, subtract) at the entry that leaves the run's count,
    so no count bytes, no remainder dispatch and no loop counter; an empty run costs nothing. The format is
    sparse_image without the count bytes (sparse_image(..., counts=False))."""

    pages = len(counts[0])
    longest = max((n for row in counts for pn in row for n in pn), default=1)
    chain = max(1, min(CHAIN, longest))
    lab = f".L{name}_"
    per_mac = len(_mac(wbits, True))
    words = driver_calls(counts) * 2 + 2 * chain * per_mac + 200
    call = "rcall" if words < 1900 else "call"  # rcall reaches 2K words either way
    b = _entry(name, clamp, offset)
    b += ["movw r26, r10", "clr r6", f"{call} {lab}clear"]
    for row in counts:
        for page, pn in enumerate(row):
            for sign, n in zip("pn", pn):
                while n > 0:
                    m = min(n, chain)
                    b.append(f"{call} {lab}{sign}{m}")
                    n -= m
            if page + 1 < pages:
                b.append("inc r29")
        b.append(f"{call} {lab}row")
    b += ["clr r1", *_exit()]
    # the row's end: K + L_POS - L_NEG + MID * 2^8 stored, then the partial sums cleared for the next row
    b += [f"{lab}row:"]
    b += _row_end(offset, out_shift)
    b += [f"{lab}clear:", "clr r8", "clr r9", "movw r10, r8", "movw r12, r8", "movw r14, r8", "clr r18",
          "mov r29, r7", "ret"]
    for sign, add in (("p", True), ("n", False)):
        mac = _mac(wbits, add)
        for n in range(chain, 0, -1):
            b += [f"{lab}{sign}{n}:", *mac]
        b += ["ret"]
    b += [f".size {name}, .-{name}", ".text"]
    return (f"void {name}(const uint8_t *fmt, int16_t *x, void *out, const int16_t *src);\n"
            f"__asm__(\n{asm_words(b)});\n")


def fused_clamp_user(em, node: Node) -> bool:
    """True when ``node`` (a clip) is emitted by the sparse mat-vec that alone reads it."""
    if node.op != "clip" or not fusable_clamp(em, node.name):
        return False
    user = em.graph.node(em.graph.users(node.name)[0])
    plan = sparse_matvec_plan(em, user)
    return plan is not None and plan.clamp == node.name and avr_decision(em, user).kernel == "avr-sparse-asm"


def avr_sparse_kernel(em, node: Node) -> list[str] | None:
    """Lines for ``node`` when the sparse path takes it: [] for a clamp fused into its mat-vec, the
    kernel call for the mat-vec; None otherwise (the dense kernels or c_fixed handle it)."""
    if node.op == "clip":
        return [] if fused_clamp_user(em, node) else None
    plan = sparse_matvec_plan(em, node)
    if plan is None:
        return None
    decision = avr_decision(em, node)
    chosen = decision.kernel
    A, wbits, clamp = plan.A, plan.wbits, plan.clamp
    a_name, x_name = node.inputs
    if chosen == "csc-c":
        return csc_function(em, node)
    if chosen == "avr-dense-asm":  # the dense kernel, its producer fused (avr.kernels.matvec_ok agrees)
        return kernel_matvec(em, node)
    rows, cols = A.shape
    offset = decision.offset
    pages = -(-cols // PAGE_COLS)
    xbuf = _x_buffer(em, clamp, cols)
    unused = [f"    (void){em.var(clamp)};"] if clamp and xbuf != em.var(clamp) else []
    out_shift = node_output_shift(em.graph, node.name)
    direct = node.type.dtype.bits == 16 and 8 <= out_shift <= 16  # the kernel shifts, saturates, stores
    counts = run_counts(A)
    driver = driver_calls(counts) <= cost.DRIVER_MAX_CALLS
    lines, asm_clamp, src, image = [], None, "0", sparse_image(A, wbits, offset, counts=not driver)
    if clamp:
        cl = em.graph.node(clamp)
        lo, hi = storage_clip_bounds(cl.attrs["lo"], cl.attrs["hi"], em.graph.type(cl.inputs[0]).dtype)
        used = np.nonzero(np.any(A != 0, axis=0))[0]
        if np.ndim(lo) == 0:
            src = em.var(cl.inputs[0])
            if len(used) == cols:
                asm_clamp = ("all", cols, int(lo), int(hi))
            else:
                asm_clamp = ("list", pages, int(lo), int(hi))
                image = np.concatenate([used_list(used, cols), image])
        else:
            lines = clamp_lines(em, clamp, xbuf, used, offset)
    else:
        x = em.var(x_name)
        lines = [f"for (uint16_t c = 0; c < {cols}; ++c) {xbuf}[c] = (int16_t)((uint16_t){x}[c] ^ 0x8000u);"]
    sym = em.add_const_array(em.sym(f"{a_name}_runs"), image, "uint8_t",
                             f"%{a_name}: {rows}x{cols}, {int(np.count_nonzero(A))} non-zeros, row runs "
                             "(kernels_sparse format" + (", counts in the kernel's code" if driver else "") + ")"
                             + (", after the columns read" if asm_clamp and asm_clamp[0] == "list" else ""))
    key = (f"spmv{wbits}_{a_name}" if driver else f"spmv{wbits}_{rows}x{pages}") + ("o" if offset else "")
    key += f"s{out_shift}" if direct else ""
    if asm_clamp:
        key += f"_{asm_clamp[0]}{asm_clamp[1]}_{asm_clamp[2]}_{asm_clamp[3]}".replace("-", "m")
    name = em.sym(key)
    if name not in em.helpers:
        shift = out_shift if direct else None
        em.helpers[name] = (sparse_driver_asm(name, wbits, counts, offset, shift, asm_clamp) if driver else
                            sparse_asm(name, wbits, rows, pages, offset, shift, asm_clamp))
    if direct:
        return ["{", *unused, *lines, f"    {name}({sym}, {xbuf}, {em.var(node.name)}, {src});", "}"]
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    return ["{", *unused, *lines, f"    {name}({sym}, {xbuf}, {acc}, {src});",
            f"    for (uint8_t r = 0; r < {rows}; ++r)",
            "        " + store_rs(em, node, "r", f"(int32_t){acc}[r]", out_shift), "}"]


def _x_buffer(em, clamp: str | None, cols: int) -> str:
    """Where the kernel's x goes: the fused clamp's own arena slot when it starts a 256-byte page of
    an arena the emitter can align, else a static aligned buffer."""
    if arena_page(em, clamp):
        em.arena_align[em.graph.analyses.memory_plan[clamp][0]] = 256
        return em.var(clamp)
    xbuf = em.sym("xpage")
    sizes = em.x_pages
    n = sizes[xbuf] = max(cols, sizes.get(xbuf, 0))
    em.helpers[xbuf] = ("/* x for the sparse kernel: 256-byte aligned, so a column byte addresses it */\n"
                        f"static int16_t {xbuf}[{n}] __attribute__((aligned(256)));\n")
    return xbuf
