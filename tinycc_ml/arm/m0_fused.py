"""Cortex-M0 mat-vec and distance kernels with the input pass fused: up to 9 rows per pass over x.

Both operands are stored offset-binary and loaded zero-extended with LDRH/LDRB immediate offsets
(Thumb-1 has no immediate LDRSH): w' = w + a (a = 2^15, or 2^7 for int8) in flash, x' = x + 2^15 in
RAM. Then, mod 2^32,
    sum(w x) = sum(w' x') - 2^15 sum(w') - a sum(x') + n 2^15 a
The per-row part K_r = -2^15 sum_r(w') + n 2^15 a sits in flash in front of each block's weights
(per block: the rows' K, then the weights column-major), the per-input part v = a sum(x') is
passed in. Nine accumulators (r2, r6, r7, r8-r12, lr): one LDRH of x serves nine rows; per MAC one
LDRH, one MULS, one ADD, plus about 0.15 for the loop (as many columns per iteration as the LDRH
offsets reach).

The producer of x stores x' and sum(x') in the same loop: the input clamp (only user: this kernel),
or a short copy loop for an intermediate, or the mat-vec kernel before it when its epilogue runs the
chain (a layer's fused bias and relu, and a network's scores' bias, run in the kernel where
folded_epilogue proves the fold). Distances ||x - M_j||^2 = |M_j|^2 + |x|^2 - 2 M_j.x run on the
same kernel with weights -2 M^T (|M| < 2^14), |M_j|^2 folded into K and |x|^2 into v (the producer
sums x^2 too), as on the AVR. All sums wrap exactly: tinycc_ml.ir.fixed proves the results fit in
int32.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m0_cost import m0_dense_takes
from tinycc_ml.target import (
    Block,
    BlockedLayout,
    InterleavedBounds,
    Node,
    chain_last,
    chain_shift,
    chain_sum_loop,
    clip_ok,
    exp_lut_lines,
    fold,
    int_matrix,
    node_kernels_only,
    node_output_shift,
    output_bias,
    saturate_c,
    shared_x_readers,
    shift_c,
    sole_vector_user,
    sparse_matvec_plan,
    split8,
    storage_clip_bounds,
    store,
)

ACC = ("r2", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr")
LOW = ("r2", "r6", "r7")
MAX_ROWS = len(ACC)


def row_blocks(rows: int) -> list[tuple[int, int]]:
    """(first row, rows) of each pass: as few passes as possible, sizes as equal as possible."""
    n = -(-rows // MAX_ROWS)
    sizes = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    starts = np.cumsum([0] + sizes[:-1])
    return [(int(s), z) for s, z in zip(starts, sizes)]


def m0_image(A: np.ndarray, wbits: int, k_extra=None) -> tuple[np.ndarray, list[int]]:
    """uint16 flash image: per block, the rows' K (two halves each) then w' column-major, padded to 4 bytes;
    and the offset (in uint16) of each block."""
    a = 1 << (wbits - 1)
    rows, cols = A.shape
    w_off = A.astype(np.int64) + a
    k_row = -(w_off.sum(axis=1) << 15) + cols * (a << 15)
    if k_extra is not None:
        k_row = k_row + np.asarray(k_extra, np.int64)
    k_row = (k_row % (1 << 32)).astype("<u4")
    parts, starts, pos = [], [], 0
    for r, n in row_blocks(rows):
        k = k_row[r:r + n].view("<u2")
        if wbits == 16:
            w = w_off[r:r + n].T.reshape(-1).astype("<u2")
        else:  # bytes, two per uint16
            b = w_off[r:r + n].T.reshape(-1).astype(np.uint8)
            w = np.concatenate([b, np.zeros(len(b) % 2, np.uint8)]).view("<u2")
        pad = np.zeros(len(w) % 2, "<u2")
        starts.append(pos)
        parts += [k, w, pad]
        pos += len(k) + len(w) + len(pad)
    return np.concatenate(parts), starts


def mac_asm(name: str, rows: int, wbits: int, cols: int, out_shift: int | None = None, post: int = 0,
            nblocks: int = 1, tail: int = 0, rounded: bool = False, ntail: int = 1,
            epilogue: tuple[int, int, bool, bool] | None = None) -> str:
    """void name(const uint16_t *blk /*flash: K[rows], w' column-major*/, const uint16_t *x /*x'*/,
    uint32_t *acc, uint32_t v): acc[q] = K[q] - v + sum_k w'[k][q] x'[k] (mod 2^32); with out_shift (1..31)
    acc is an int16_t * and the kernel stores sat16(rshift(acc[q], out_shift)) there (no C loop after), then
    shifted by ``post`` (c_fixed.chain_shift: a rounding right shift by 1..8, or left by 1..14 saturated);
    ``rounded``: K holds the rounding constant already. ``nblocks`` blocks of ``rows`` rows, then ``ntail`` of
    ``tail`` rows (m0_image's blocks one after the other): x, the output and v wait on the stack between blocks.
    With ``epilogue`` = (s, n, relu, offset) (folded_epilogue.Epilogue, its rounding and bias in K; one block)
    acc is an int16_t * too and the kernel stores E(acc[q] >> s): relu: 0 below 0, else min(y 2^n, 32767) (y 2^n
    compared, which stays in int32 as n <= s); else y 2^n saturated to int16; with offset as E + 2^15,
    returning the sum of what it stored (for the next mat-vec kernel: chain_offset_store)."""
    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:",
         "push {r4-r7, lr}", "mov r4, r8", "mov r5, r9", "mov r6, r10", "mov r7, r11", "push {r4-r7}"]
    lean = nblocks == 1 and not tail  # one block: x and v stay in r1 and r3, the output waits on the stack
    if epilogue is not None:  # one block, its epilogue folded
        b += ["push {r2}", *_mac_block(rows, wbits, cols, None, 0, False, lean=True, epilogue=epilogue)]
    elif lean:
        b += ["push {r2}", *_mac_block(rows, wbits, cols, out_shift, post, rounded, lean=True)]
    else:  # frame: sp+0 blocks left, sp+4 x, sp+8 out, sp+12 v
        b += ["push {r1, r2, r3}", f"movs r4, #{nblocks}", "push {r4}"]
        b += ["5:", *_mac_block(rows, wbits, cols, out_shift, post, rounded)]
        if nblocks > 1:
            b += ["ldr r4, [sp]", "subs r4, #1", "str r4, [sp]", "beq 4f", "b 5b", "4:"]  # bne reaches 256 bytes
        if tail:
            b += ([f"movs r4, #{ntail}", "str r4, [sp]", "6:"] if ntail > 1 else [])
            b += _mac_block(tail, wbits, cols, out_shift, post, rounded)
            if ntail > 1:
                b += ["ldr r4, [sp]", "subs r4, #1", "str r4, [sp]", "beq 4f", "b 6b", "4:"]
        b += ["add sp, #16"]
    b += ["pop {r4-r7}", "mov r8, r4", "mov r9, r5", "mov r10, r6", "mov r11, r7", "pop {r4-r7, pc}",
          ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    # not .global: local to the object file (the C call resolves within it)
    out = "uint32_t *acc" if out_shift is None and epilogue is None else "int16_t *out"
    ret = "uint32_t" if epilogue is not None and epilogue[3] else "void"
    return f"{ret} {name}(const uint16_t *blk, const uint16_t *x, {out}, uint32_t v);\n__asm__(\n{text});\n"


def _epilogue_rows(acc: tuple[str, ...], s: int, n: int, relu: bool, offset: bool) -> list[str]:
    """mac_asm's folded epilogue (r0: out, r3 = 0x7FFF, r5 = 0x8000, r1: the sum; r4 the value)."""
    out = ["movs r3, #128", "lsls r3, r3, #8", "movs r5, #128", "lsls r5, r5, #8", "subs r3, #1", "movs r1, #0"]
    for q, r in enumerate(acc):
        out += [f"asrs r4, {r}, #{s}"] if r in LOW else [f"mov r4, {r}", f"asrs r4, r4, #{s}"]
        out += [f"lsls r4, r4, #{n}"] if n else []
        if relu:  # y < 0: 0; y 2^n above 0x7FFF: 0x7FFF
            out += ["bpl 4f", "movs r4, #0", "b 5f", "4:", "cmp r4, r3", "ble 5f", "mov r4, r3", "5:"]
            out += ["adds r4, r4, r5"] if offset else []
        else:  # above 0x7FFF: 0x7FFF; y 2^n + 0x8000 negative: below -0x8000
            out += ["cmp r4, r3", "ble 4f", "mov r4, r3", "4:", "adds r4, r4, r5", "bpl 5f", "movs r4, #0", "5:"]
            out += [] if offset else ["subs r4, r4, r5"]
        out += [f"strh r4, [r0, #{2 * q}]"] + (["adds r1, r1, r4"] if offset else [])
    return out + (["mov r0, r1"] if offset else [])


def _mac_block(rows: int, wbits: int, cols: int, out_shift: int | None, post: int, rounded: bool,
               lean: bool = False, epilogue: tuple[int, int, bool, bool] | None = None) -> list[str]:
    """One block of mac_asm: r0 at its row constants on entry, at the next block's after (``lean``: the only
    block, v in r3 and x in r1 on entry, the output pointer the one word pushed)."""
    acc = ACC[:rows]
    wb = wbits // 8
    load = "ldrh" if wbits == 16 else "ldrb"
    b = [] if lean else ["ldr r3, [sp, #12]"]
    for q, r in enumerate(acc):
        b += [f"ldr r4, [r0, #{4 * q}]", "subs r4, r4, r3"]
        b += [f"mov {r}, r4"] if r != "r4" else []
    b += [f"adds r0, #{4 * rows}"] + ([] if lean else ["ldr r1, [sp, #4]"])
    end = 2 * cols
    b += ([f"movs r3, #{end}"] if end < 256 else [f"ldr r3, ={end}"]) + ["adds r3, r3, r1"]

    def column(c: int) -> list[str]:
        out = [f"ldrh r5, [r1, #{2 * c}]"]
        for q, r in enumerate(acc):
            out += [f"{load} r4, [r0, #{(c * rows + q) * wb}]", "muls r4, r5, r4",
                    f"adds {r}, {r}, r4" if r in LOW else f"add {r}, r4"]
        return out

    unroll = max(u for u in (1, 2, 3, 4) if (u * rows - 1) * wb <= (62 if wbits == 16 else 31))
    for c in range(cols % unroll):  # leftover columns first, then whole iterations
        b += column(c)
    if cols % unroll:
        b += [f"adds r0, #{(cols % unroll) * rows * wb}", f"adds r1, #{2 * (cols % unroll)}"]
    if cols >= unroll:
        body = [line for c in range(unroll) for line in column(c)]
        b += ["1:", *body, f"adds r0, #{unroll * rows * wb}", f"adds r1, #{2 * unroll}", "cmp r1, r3", "bne 1b"]
    pad = (-(rows * cols * wb)) % 4  # m0_image pads each block to 4 bytes
    if pad and not lean:
        b += [f"adds r0, #{pad}"]
    b += ["pop {r0}"] if lean else ["push {r0}", "ldr r0, [sp, #12]"]  # the output (the frame 4 bytes further)
    if epilogue is not None:  # lean: one block
        return b + _epilogue_rows(acc, *epilogue)
    if out_shift is None:
        for q, r in enumerate(acc):
            b += [f"str {r}, [r0, #{4 * q}]"] if r in LOW else [f"mov r4, {r}", f"str r4, [r0, #{4 * q}]"]
        if lean:
            return b
        b += [f"adds r0, #{4 * rows}"]
    else:  # r5 = 2^(k-1), r3 = 0x7FFF; in range when sxth leaves the value, else 0x7FFF or 0x8000 by its sign
        b += ([] if rounded else ["movs r5, #1", f"lsls r5, r5, #{out_shift - 1}"]) + [
            "movs r3, #128", "lsls r3, r3, #8", "subs r3, #1"]
        for q, r in enumerate(acc):
            if rounded:
                b += [f"asrs r4, {r}, #{out_shift}"] if r in LOW else [f"mov r4, {r}", f"asrs r4, r4, #{out_shift}"]
            else:
                b += [f"adds r4, {r}, r5"] if r in LOW else [f"mov r4, {r}", "adds r4, r4, r5"]
                b += [f"asrs r4, r4, #{out_shift}"]
            b += ["sxth r1, r4", "cmp r1, r4", "beq 2f", "asrs r1, r4, #31", "eors r1, r3", "2:"]
            if post > 0:  # |r1| <= 2^15: the rounding addition cannot overflow, the result fits int16
                b += [f"adds r1, #{1 << (post - 1)}", f"asrs r1, r1, #{post}"]
            elif post < 0:
                b += [f"lsls r1, r1, #{-post}", "sxth r4, r1", "cmp r4, r1", "beq 3f", "asrs r1, r1, #31",
                      "eors r1, r3", "3:"]
            b += [f"strh r1, [r0, #{2 * q}]"]
        if lean:
            return b
        b += [f"adds r0, #{2 * rows}"]
    return b + ["str r0, [sp, #12]", "pop {r0}"]


# ---------------------------------------------------------------- graph side

def _dense_ok(em, a_name: str, x_name: str) -> bool:
    g = em.graph
    return (g.op(a_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and g.type(x_name).dtype.bits == 16 and g.type(x_name).rank == 1 and 0 < g.type(a_name).shape[1] < 4096)


def matvec_ok(em, node: Node) -> bool:
    """The 9-row kernel takes the mat-vec: a constant matrix (dense, or sparse when the cost model of
    the cost model (avr.cost, arm.m0_cost) chose this kernel for it), not one the sparse kernel takes."""
    if node.op != "matvec" or int(node.attrs.get("shift", 0)) != 0:
        return False
    a_name, x_name = node.inputs
    g = em.graph
    if g.type(a_name).dtype.bits not in (8, 16):
        return False
    if g.op(a_name) == "sparse_const":
        if sparse_matvec_plan(em, node) is None or g.type(a_name).shape[1] >= 4096:
            return False
    elif not _dense_ok(em, a_name, x_name):
        return False
    return m0_dense_takes(em, node)


def sqdist_ok(em, node: Node) -> bool:
    if node.op != "sqdist":
        return False
    x_name, m_name = node.inputs
    g = em.graph
    return (_dense_ok(em, m_name, x_name) and int(node.attrs.get("shift", 0)) == 0
            and g.type(m_name).dtype.bits == 16 and np.abs(g.node(m_name).attrs["value"]).max() <= 16383)


def sqdist8_ok(em, node: Node) -> bool:
    """Prototypes of 8 significant bits (M = M8 2^k, |M8| <= 127, what int8 builds keep): 8-bit storage."""

    if node.op != "sqdist" or int(node.attrs.get("shift", 0)) != 0:
        return False
    x_name, m_name = node.inputs
    return _dense_ok(em, m_name, x_name) and split8(em.graph.node(m_name).attrs["value"]) is not None


def kernel_user(em, name: str) -> str | None:
    """"matvec" / "sqdist" when the only use of ``name`` is as x of one of these kernels."""

    return sole_vector_user(em, name, matvec_ok, lambda e, n: sqdist8_ok(e, n) or sqdist_ok(e, n))


def chain_offset_store(em, name: str) -> str | None:
    """M0Target.offset_store: the last value of a fused element-wise chain whose only reader is the 9-row
    mat-vec kernel is stored as x' = x + 2^15 and summed (the kernel's input pass, done by the stores)."""

    if not chain_last(em, name) or kernel_user(em, name) != "matvec":
        return None
    sym = _sums(em, name)
    em.scratch(sym, "uint32_t", 1)
    return sym


def _fused_clip(em, node: Node) -> bool:

    return node.op == "clip" and clip_ok(em, node) and (kernel_user(em, node.name) is not None
                                                        or node_kernels_only(em, node.name, _node_kernel_ok))


def _sums(em, name: str) -> str:
    """Scratch: sum(x') of the x the kernel reads (and sum(x^2) for a distance)."""
    return em.sym(f"sum_{em.var(name)}")


def prepare_x(em, x_name: str, kind: str) -> tuple[str, list[str]]:
    """The x' buffer the kernel reads and the lines leaving v (uint32) for it: the fused clip already
    stored x' and its sums; otherwise one loop here."""
    g = em.graph
    n = g.type(x_name).size
    if (g.op(x_name) == "clip" and _fused_clip(em, g.node(x_name))) or (
            g.op(x_name) == "exp_lut" and fused_exp(em, g.node(x_name))):
        sym = _sums(em, x_name)
        buf = f"(const uint16_t *){em.var(x_name)}"
        sums = [f"const uint32_t sx = {sym}[0];"] + ([f"const uint32_t xx = {sym}[1];"] if kind == "sqdist" else [])
        return buf, sums
    if kind == "matvec" and em.target.offset_store(em, x_name):  # the chain's stores left x' and its sum
        sym = _sums(em, x_name)
        return f"(const uint16_t *){em.var(x_name)}", [f"const uint32_t sx = {sym}[0];", f"{sym}[0] = 0;"]
    buf = em.sym(f"xo_{em.var(x_name)}")
    em.scratch(buf, "uint16_t", n)
    x = em.var(x_name)
    lines = ["uint32_t sx = 0;" + (" uint32_t xx = 0;" if kind == "sqdist" else ""),
             f"for (int k = 0; k < {n}; ++k) {{", f"    const int32_t v = {x}[k];",
             "    const uint32_t u = (uint32_t)(v + 32768);", f"    {buf}[k] = (uint16_t)u;", "    sx += u;",
             *(["    xx += (uint32_t)(v * v);"] if kind == "sqdist" else []), "}"]
    return f"{buf}", lines


def folded(em, node: Node):
    """The folded epilogue (folded_epilogue.fold) of a mat-vec with a fused chain on this kernel, else None."""

    g = em.graph
    if g.op(node.inputs[0]) != "const":
        return None
    if g.analyses.fused.get(node.name):
        return fold(em, node.name)
    bias = output_bias(em, node)  # the scores' bias: the kernel stores the scores themselves
    if not bias:
        return None
    ep = fold(em, node.name, [bias])
    if ep is not None:
        em.kernel_stored.add(bias)
        return ep
    return fold(em, node.name, [])  # where the head may saturate first: the kernel stores it, the add stays C


def _mac_calls(em, A: np.ndarray, wbits: int, label: str, x_buf: str, acc: str, v: str, k_extra=None,
               layout_key: str | None = None, decode=None, epilogue=None) -> list[str]:
    """The kernel calls for acc = A x' (+ row constants); with ``layout_key`` streaming's feed() reads
    that constant back from the kernel's image (``decode``: stored element -> the constant's element;
    default: A itself). With ``epilogue`` (folded_epilogue.Epilogue; its bias in k_extra) the kernels store
    the epilogue's values into ``acc`` (an int16 vector, the head's slot), offset-binary with their sum
    when the next mat-vec kernel reads them (M0Target.offset_store)."""
    rows, cols = A.shape
    image, starts = m0_image(A, wbits, k_extra)
    # int32 words: LDR of the row constants needs 4-byte alignment (blocks start on words)
    sym = em.add_const_array(em.sym(f"{label}_m0"), image.view("<i4"), "int32_t",
                             f"%{label}: {rows}x{cols} + {1 << (wbits - 1)}, per block of <= {MAX_ROWS} rows: "
                             "32-bit row constants, then the block column-major (16/8-bit)")
    if layout_key:  # streaming's feed() reads the weights back from here
        unit = wbits // 8  # element size; block starts and row constants are counted in uint16
        ctype = "uint16_t" if wbits == 16 else "uint8_t"
        plain = (lambda e: f"(int16_t)({e} ^ 0x8000u)") if wbits == 16 else (lambda e: f"(int8_t)({e} ^ 0x80u)")
        em.kernel_layout[layout_key] = BlockedLayout(
            f"((const {ctype} *){sym})", ctype,
            tuple(Block(r, n, (s + 2 * n) * 2 // unit, n, 1) for (r, n), s in zip(row_blocks(rows), starts)),
            plain if decode is None else (lambda e: decode(plain(e))))
    out = []
    spec, sums = None, None
    if epilogue is not None:
        em.stored_heads.add(epilogue.head)
        sums = em.target.offset_store(em, epilogue.last)
        spec = (epilogue.shift, epilogue.n, epilogue.relu, bool(sums))
    for (r, n), s in zip(row_blocks(rows), starts):
        tag = "" if spec is None else f"e{spec[0]}n{spec[1]}{'r' if spec[2] else ''}{'o' if spec[3] else ''}"
        name = em.sym(f"mac{n}w{wbits}_{cols}{tag}")
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, cols, epilogue=spec)
        call = f"{name}((const uint16_t *)({sym} + {s // 2}), {x_buf}, {acc} + {r}, {v});"
        out.append(f"{sums}[0] += {call}" if sums else call)
    return out


def clamp_asm(name: str, n: int, lo: int, hi: int, squares: bool) -> str:
    """void name(const int16_t *x, uint16_t *out, uint32_t *sums): out[i] = clamp(x[i], lo, hi) + 2^15,
    sums[0] = sum(out), with squares sums[1] = sum(clamp(x[i])^2). One unsigned compare settles the common case
    (in range), the clamp itself is out of line: with lo = 0 of the zero-extended x; otherwise (no squares) of
    u - (lo + 2^15) against hi - lo, u = x + 2^15 (x zero-extended, then EOR 2^15)."""
    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:", "push {r4-r7, lr}", "push {r2}",
         "movs r2, #0", "movs r3, #0", "movs r7, #1", "lsls r7, r7, #15", f"ldr r6, ={hi}", f"ldr r5, ={lo}",
         "mov r12, r5", "lsls r5, r0, #0", f"ldr r4, ={2 * n}", "adds r4, r0, r4", "mov lr, r4"]
    unroll = 4 if n % 4 == 0 else (2 if n % 2 == 0 else 1)
    fast = lo == 0
    body, slow = [], []
    if not fast and not squares:  # u = x + 2^15 (zero-extended, then EOR): in range iff u - lo' <= hi - lo unsigned
        b += [f"ldr r3, ={lo + 32768}", f"ldr r6, ={hi - lo}"]
    for e in range(unroll):
        if not fast and not squares:
            body += [f"ldrh r4, [r5, #{2 * e}]", "eors r4, r7", "subs r0, r4, r3", "cmp r0, r6", f"bhi 2{e}f", f"3{e}:"]
            # out of range: below lo when u - lo' is negative, else above hi
            slow += [f"2{e}:", "mov r4, r3", "cmp r0, #0", "blt 4f", "adds r4, r4, r6", "4:", f"b 3{e}b"]
            body += [f"strh r4, [r1, #{2 * e}]", "adds r2, r2, r4"]
            continue
        if fast:
            body += [f"ldrh r4, [r5, #{2 * e}]", "cmp r4, r6", f"bhi 2{e}f", f"3{e}:"]
            slow += [f"2{e}:", "sxth r4, r4", "cmp r4, r6", "ble 4f", "mov r4, r6", "4:", "cmp r4, #0", "bge 5f",
                     "movs r4, #0", "5:", f"b 3{e}b"]
        else:
            body += [f"ldrh r4, [r5, #{2 * e}]", "sxth r4, r4", "cmp r4, r6", "ble 4f", "mov r4, r6", "4:",
                     "mov r0, r12", "cmp r4, r0", "bge 5f", "mov r4, r0", "5:"]
        if squares:
            body += ["mov r0, r4", "muls r0, r4, r0", "adds r3, r3, r0"]
        body += ["adds r4, r4, r7", f"strh r4, [r1, #{2 * e}]", "adds r2, r2, r4"]
    b += ["1:", *body, f"adds r5, #{2 * unroll}", f"adds r1, #{2 * unroll}", "cmp r5, lr", "bne 1b", "b 9f", *slow,
          "9:", "pop {r0}", "str r2, [r0, #0]"] + (["str r3, [r0, #4]"] if squares else [])
    b += ["pop {r4-r7, pc}", ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    return f"void {name}(const int16_t *x, uint16_t *out, uint32_t *sums);\n__asm__(\n{text});\n"


def fused_exp(em, node: Node) -> bool:
    """An int16 exp_lut (ProtoNN's similarities) whose only use is x of a mat-vec on the 9-row kernel: it stores
    x + 2^15 and its sum itself (no input pass before the kernel), at any scale."""
    return node.op == "exp_lut" and node.type.dtype.bits == 16 and node.type.rank == 1 and \
        kernel_user(em, node.name) == "matvec"


def kernel_exp_lut(em, node: Node) -> list[str] | None:
    """exp_lut storing what the kernel reading it needs (fused_exp): e + 2^15 in its own slot, the sum in _sums."""

    if not fused_exp(em, node):
        return None
    sym = _sums(em, node.name)
    em.scratch(sym, "uint32_t", 1)
    out = em.var(node.name)

    def final(value: str) -> str:
        return (f"{{ const uint32_t u = (uint32_t)((int32_t){saturate_c(em, node, value)} + 32768); "
                f"{out}[i] = (int16_t)(uint16_t)u; sx += u; }}")
    return ["{", "    uint32_t sx = 0;", *("    " + ln for ln in exp_lut_lines(em, node, final)),
            f"    {sym}[0] = sx;", "}"]


def kernel_clip(em, node: Node) -> list[str] | None:
    """The input clamp feeding a kernel: stores clamp(x) + 2^15 and sums it (and its squares)."""
    if not _fused_clip(em, node):
        return None
    (a,) = node.inputs
    g = em.graph
    kind = kernel_user(em, node.name) or "matvec"  # or node kernels only: x + 2^15 and its sum
    lo, hi = storage_clip_bounds(node.attrs["lo"], node.attrs["hi"], g.type(a).dtype)
    n = node.type.size
    sym = _sums(em, node.name)
    em.scratch(sym, "uint32_t", 2 if kind == "sqdist" else 1)
    x, out = em.var(a), em.var(node.name)
    if np.ndim(lo) == 0:
        name = em.sym(f"clamp{n}_{int(lo)}_{int(hi)}{'_sq' if kind == 'sqdist' else ''}".replace("-", "m"))
        if name not in em.helpers:
            em.helpers[name] = clamp_asm(name, n, int(lo), int(hi), kind == "sqdist")
        return [f"{name}({x}, (uint16_t *){out}, {sym});"]
    bsym = em.add_const_array(em.sym(f"{node.name}_bounds"), np.stack([lo, hi], axis=1), "int16_t",
                              f"%{node.name}: (lower, upper) bound of each element")
    em.kernel_layout[node.name] = InterleavedBounds(bsym, "int16_t")
    return ["{", "    uint32_t sx = 0;" + (" uint32_t xx = 0;" if kind == "sqdist" else ""),
            f"    for (int i = 0; i < {n}; ++i) {{", f"        int32_t v = {x}[i];",
            f"        const int32_t lo = {bsym}[2 * i], hi = {bsym}[2 * i + 1];",
            "        v = v < lo ? lo : (v > hi ? hi : v);",
            "        const uint32_t u = (uint32_t)(v + 32768);",
            f"        {out}[i] = (int16_t)(uint16_t)u;", "        sx += u;",
            *(["        xx += (uint32_t)(v * v);"] if kind == "sqdist" else []), "    }",
            f"    {sym}[0] = sx;", *([f"    {sym}[1] = xx;"] if kind == "sqdist" else []), "}"]


def kernel_matvec(em, node: Node) -> list[str] | None:
    """The mat-vec on the 9-row kernel (a dense constant, or a sparse one the cost model sent here)."""
    if not matvec_ok(em, node):
        return None
    a_name, x_name = node.inputs
    g = em.graph
    A = int_matrix(g, a_name)
    wbits = g.type(a_name).dtype.bits
    buf, prep = prepare_x(em, x_name, "matvec")
    out_shift = node_output_shift(g, node.name)
    sparse = g.op(a_name) == "sparse_const"  # feed() keeps reading its CSC arrays
    ep = folded(em, node)
    if ep is not None:  # the store and its fused chain in the kernel: no C loop after the calls
        scores = ep.last == em.scores_node  # then the head's own slot is never written
        calls = _mac_calls(em, A, wbits, a_name, buf, em.var(ep.last if scores else node.name), "v",
                           k_extra=ep.bias, layout_key=a_name, epilogue=ep)
        return ["{", *("    " + ln for ln in prep), f"    const uint32_t v = sx << {wbits - 1};",
                *("    " + c for c in calls), *([f"    (void){em.var(node.name)};"] if scores else []), "}"]
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", A.shape[0])
    calls = _mac_calls(em, A, wbits, a_name, buf, acc, "v", layout_key=None if sparse else a_name)
    stores = chain_sum_loop(em, node, f"for (int r = 0; r < {A.shape[0]}; ++r) ",
                            lambda: [store(em, node, "r", shift_c(em, f"(int32_t){acc}[r]", out_shift))])
    return ["{", *("    " + ln for ln in prep), f"    const uint32_t v = sx << {wbits - 1};",
            *("    " + c for c in calls), *("    " + ln for ln in stores), "}"]


def kernel_sqdist(em, node: Node) -> list[str] | None:
    if not sqdist_ok(em, node):
        return None
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    k, m = M.shape
    buf, prep = prepare_x(em, x_name, "sqdist")
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", m)
    out_shift = 2 * g.type(x_name).dtype.scale - node.type.dtype.scale
    calls = _mac_calls(em, -2 * M.T, 16, f"{m_name}_t2", buf, acc, "v", k_extra=(M * M).sum(axis=0),
                       layout_key=m_name, decode=lambda w: f"(int16_t)(-{w} / 2)")  # w = -2 M
    return ["{", *("    " + ln for ln in prep), "    const uint32_t v = (sx << 15) - xx;",
            *("    " + c for c in calls),
            f"    for (int j = 0; j < {m}; ++j)",
            "        " + store(em, node, "j", shift_c(em, f"(int32_t){acc}[j]", out_shift)), "}"]


def kernel_sqdist8(em, node: Node) -> list[str] | None:
    """Distances to prototypes stored in 8 bits (half the flash of kernel_sqdist, the same loop):
        ||x - M_j||^2 = |x|^2 + 2^(k+1) (sum_i (-M8_ij) x_i + |M_j|^2 / 2^(k+1))      (mod 2^32, exact)
    with |M_j|^2 / 2^(k+1) = sum(M8^2) 2^(k-1) in the row constants when k >= 1, else in a flash table."""

    if not sqdist8_ok(em, node):
        return None
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    m8, k = split8(M)
    m = M.shape[1]
    buf, prep = prepare_x(em, x_name, "sqdist")
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", m)
    out_shift = 2 * g.type(x_name).dtype.scale - node.type.dtype.scale
    norms = None
    if k >= 1:
        extra = (m8 * m8).sum(axis=0) << (k - 1)
    else:
        extra = None
        norms = em.add_const_array(em.sym(f"{m_name}_sq"), (M * M).sum(axis=0).astype(np.int32), "int32_t",
                                   f"%{m_name}: squared norm of each prototype")
    calls = _mac_calls(em, (-m8).T.copy(), 8, f"{m_name}_i8", buf, acc, "v", k_extra=extra, layout_key=m_name,
                       decode=lambda w: f"(int16_t)(-{w} * {1 << k})")  # w = -M8
    norm = f"(uint32_t){em.target.read_const(norms, 'j', 'int32_t')} + " if norms else ""
    return ["{", *("    " + ln for ln in prep), "    const uint32_t v = sx << 7;",
            *("    " + c for c in calls),
            f"    for (int j = 0; j < {m}; ++j) {{",
            f"        const uint32_t d = {norm}xx + ({acc}[j] << {k + 1});",
            "        " + store(em, node, "j", shift_c(em, "(int32_t)d", out_shift)), "    }", "}"]


def _node_kernel_ok(em, node: Node) -> bool:
    """matvec_at_ok but for the number of rows."""
    m_name, _, x_name = node.inputs
    g = em.graph
    t, xt = g.type(m_name), g.type(x_name)
    return not (g.op(m_name) != "const" or g.op(x_name) in ("const", "sparse_const") or int(node.attrs.get("shift", 0))
                or t.rank != 3 or t.dtype.bits not in (8, 16) or xt.dtype.bits != 16 or xt.rank != 1
                or not 0 < t.shape[2] < 4096)


def matvec_at_ok(em, node: Node) -> bool:
    """matvec_at on the 9-row kernel: a constant (n, rows, cols) of 8/16-bit weights by an int16 vector, 4 rows
    or more (under 4 rows the C loop is cheaper than the kernel's input pass and call), or any number when the
    input clamp prepares x + 2^15 for every node kernel (then the kernel's call is all it costs)."""
    if not _node_kernel_ok(em, node):
        return False
    x_name = node.inputs[2]
    return em.graph.type(node.inputs[0]).shape[1] >= 4 or (em.graph.op(x_name) == "clip"
                                                          and node_kernels_only(em, x_name, _node_kernel_ok))


def kernel_matvec_at(em, node: Node) -> list[str] | None:
    """matvec_at (row block k of a constant (n, rows, cols), as Bonsai's node scores) on the 9-row kernel:
    every block's image (m0_image) one after the other in flash, the call moved to block k at run time."""
    m_name, k_name, x_name = node.inputs
    g = em.graph
    t = g.type(m_name)
    if not matvec_at_ok(em, node):
        return None
    M = g.node(m_name).attrs["value"].astype(np.int64)
    n, rows, cols = M.shape
    wbits = t.dtype.bits
    bias = node.attrs.get("bias_q")  # each block's bias joins its rows' constants: no run-time cost
    extra = np.zeros((n, rows), np.int64) if bias is None else np.asarray(bias, np.int64).reshape(n, rows)
    out_shift = node_output_shift(g, node.name)
    direct = node.type.dtype.bits == 16 and 1 <= out_shift <= 31  # the kernel shifts, saturates and stores
    # the stores' rounding constant joins the sum where no sum can then pass int32 (|x| <= 2^15): subtracted
    # from v at the call (the image stays the same for every node reading it: a matrix shared by levels)
    rounded = direct and int((np.abs(M).sum(axis=2) * 32768 + np.abs(extra)).max()) + (1 << (out_shift - 1)) \
        <= 2**31 - 1
    images = [m0_image(M[k], wbits, extra[k]) for k in range(n)]
    stride = len(images[0][0]) // 2  # int32 words per block (m0_image pads blocks to 4 bytes)
    sym = em.add_const_array(em.sym(f"{m_name}_m0"), np.concatenate([im for im, _ in images]).view("<i4"), "int32_t",
                             f"%{m_name}: {n} blocks of {rows}x{cols} + {1 << (wbits - 1)}, each as the 9-row "
                             "kernel stores a matrix")
    buf, prep = prepare_x(em, x_name, "matvec")
    readers = shared_x_readers(em, x_name, matvec_at_ok)
    if len(readers) > 1 and not prep[0].startswith("const"):  # x' and its sum prepared once for every node
        memo = em.sym(f"sum_at_{em.var(x_name)}")
        em.scratch(memo, "uint32_t", 1)
        prep = prep + [f"{memo}[0] = sx;"] if readers[0] == node.name else [f"const uint32_t sx = {memo}[0];"]
    acc = em.var(node.name) if direct else em.sym("acc")
    if not direct:
        em.scratch(acc, "uint32_t", rows)
    # the fused chain (sigma's scale) in the stores too, where its loop costs more than the kernel copy it
    # may add (each post shift is its own kernel): from 4 rows
    post = chain_shift(em, node) if direct and rows >= 4 else None
    if post is not None and -15 < post <= 8:
        em.stored_heads.add(node.name)
    else:
        post = 0
    # one call for every block (row_blocks: sizes s + 1, then s)
    sizes = [nr for _, nr in row_blocks(rows)]
    nr, nb = sizes[0], sizes.count(sizes[0])
    tail, ntail = (sizes[-1], len(sizes) - nb) if len(sizes) > nb else (0, 0)
    name = em.sym(f"mac{nr}w{wbits}_{cols}" + (f"x{nb}" if nb > 1 else "") + (f"t{tail}x{ntail}" if tail else "")
                  + (f"s{out_shift}" if direct else "") + ("r" if rounded else "")
                  + (f"p{post}" if post > 0 else f"l{-post}" if post else ""))
    if name not in em.helpers:
        em.helpers[name] = mac_asm(name, nr, wbits, cols, out_shift if direct else None, post, nblocks=nb,
                                   tail=tail, rounded=rounded, ntail=ntail)
    v = f"v - {1 << (out_shift - 1)}u" if rounded else "v"
    calls = [f"{name}((const uint16_t *)({sym} + at), {buf}, {acc}, {v});"]
    return ["{", *("    " + ln for ln in prep), f"    const uint32_t v = sx << {wbits - 1};",
            f"    const uint32_t at = (uint32_t){em.at(k_name, '0')} * {stride}u;",
            *("    " + c for c in calls),
            *([] if direct else _store_loop(em, node, rows, acc, out_shift)), "}"]


def _store_loop(em, node: Node, rows: int, acc: str, out_shift: int) -> list[str]:
    """out[r] = sat(rshift(acc[r], out_shift)) through store() (its fused chain too; the M0's saturation helper
    is always inlined: CTarget.inline_saturation)."""
    value = shift_c(em, f"(int32_t){acc}[r]", out_shift)
    return [f"    for (int r = 0; r < {rows}; ++r)", "        " + store(em, node, "r", value)]
