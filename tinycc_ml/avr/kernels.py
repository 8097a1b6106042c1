"""Hand-tuned ATmega328P kernels: overrides of the shared code tables (CTarget.code_overrides).

matvec (dense int16 or int8 weights in flash, int16 vector in RAM, product shift 0):
    offset-binary operands, w' = w + a (a = 2^15, or 2^7 for int8) stored in flash and
    x' = x + 2^15, so every partial product is an unsigned MUL. Then
        sum(w x) = sum(w' x') - 2^15 sum(w) - a sum(x')      (mod 2^32)
    The per-row constants -2^15 sum(w) sit in flash in front of each block's weights; the kernel
    loads them into the accumulators and subtracts the per-input term. Up to 5 rows share each
    load of x (20 accumulator registers, r2..r21), weights are laid out block by block,
    column-major inside a block, for LPM Z+; four columns per loop iteration (8-bit counter), all
    blocks of a mat-vec in one call. ~27.1 cycles/MAC for int16 weights. When the producer of x
    (an input-type clip, an exp_lut) feeds only this kernel it stores x' and sum(x') itself
    (fused_producer). A mat-vec's fused chain (a layer's bias and relu, its offset-binary store and sum) or the
    scores' bias runs in the kernel's block epilogue when folded_epilogue proves the fold (mac_asm's epilogue).
sqdist as |M_j|^2 + |x|^2 - 2 M_j.x on the same kernel: with |M| < 2^14 the weights are -2 M and
    the constants |M_j|^2 - 2^15 sum(-2 M_j), so the kernel leaves the exact distance; a fused clip
    also sums x^2.
sqdist (prototypes in flash, point in RAM, any product shift h <= 7):
    rshift(M - x, h) = Mh - xh - [Ml < xl] with M + 2^(h-1) = Mh 2^h + Ml and x = xh 2^h + xl
    (0 <= Ml, xl < 2^h): 16-bit operands and no shift in the loop; |d| <= 2^15 is proven by
    choose_scales, so |d|^2 is three unsigned MULs. 4 prototypes share each load of x.
exp_lut: one asm loop when the tables are non-negative and the rounded product fits 16 bits
    (unsigned MULs, no saturation), else C with the same expressions as c_fixed.
clip, scale: the same expressions as c_fixed in 16-bit C (the fused input clamp in inline asm);
    rounding shifts + saturation of int32 values by 8..16 in inline asm (rss_avr).
All are exact: the int32 sums are those of tinycc_ml.ir.fixed (which proves they fit), and
wrapping uint32 arithmetic gives the same bits.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tinycc_ml.avr.cost import avr_dense_takes
from tinycc_ml.target import (
    Block,
    BlockedLayout,
    CEmitter,
    Node,
    SplitLayout,
    align_shifts,
    chain_last,
    chain_shift,
    clip_loop_head,
    clip_loop_start,
    clip_ok,
    exp_tables,
    fold,
    fused_tanh,
    index_type,
    int_matrix,
    kernel_clip16,
    node_kernels_only,
    node_output_shift,
    output_bias,
    rshift_c,
    saturate_c,
    shared_x_readers,
    shift_c,
    sole_vector_user,
    sparse_matvec_plan,
    store,
    tanh_lut_lines,
    tanh_mul_loop,
    tanh_of_mul,
)

BLOCK = 5  # rows per pass over x: 5 x 4 accumulator bytes = r2..r21
SQD_BLOCK = 4  # prototypes per pass over the point


def asm_words(lines: list[str]) -> str:
    return "".join(f'    "{line}\\n"\n' for line in lines)


def asm_prologue(name: str, saved: list[str]) -> list[str]:
    return ([f".section .text.{name},\\\"ax\\\",@progbits", f".local {name}", f".type {name}, @function", f"{name}:"]
            + [f"push {r}" for r in saved])


UNROLL = 4  # columns per loop iteration of mac_asm


def mac_asm(name: str, rows: int, wbits: int, x_offset: bool, cols: int, nblocks: int,
            out_shift: int | None = None, accumulate: bool = False, tail: int = 0, post: int = 0,
            rounded: bool = False, epilogue: tuple[int, int, bool, bool] | None = None) -> str:
    """void name(const void *w /*flash*/, const int16_t *x, void *acc, uint32_t v): nblocks blocks of
    ``rows`` rows over ``cols`` columns, then (``tail`` > 0) one block of ``tail`` rows; in flash, per block: the
    rows' 32-bit constants K, then w' column-major
    (rows values per column). acc[q] = K[q] - v + w'.x' (mod 2^32) as uint32, or with out_shift (0..31) the
    int16 sat16(rshift(acc[q], out_shift)), then shifted by ``post`` (_post_shift). Up to 5 rows: the accumulators
    take r2..r21, one weight register
    suffices (lo byte's products before hi). x, acc, v and the block count wait on the stack between blocks
    (every register is busy in the loop). ``accumulate`` (one block): w points at the block's weights of the
    first column, no constants; acc[q] += w'.x' (the accumulators start from acc, v is not used).
    ``epilogue`` = (m, n, relu, offset) of a folded_epilogue.Epilogue (its rounding and bias in K; m = s - n): acc
    is an int16 vector, the kernel stores E: y 2^n = (acc >> m) with its low n bits cleared, 0 where acc < 0
    (relu) or -0x8000 below int16 (else), 0x7FFF above int16; with offset + 2^15, returning the sum of the
    stored values (uint32_t)."""
    acc = [f"r{r}" for r in range(2, 2 + 4 * rows)]
    saved = [r for r in acc if int(r[1:]) < 18] + ["r28", "r29"]
    body = asm_prologue(name, saved)
    summed = epilogue is not None and epilogue[3]
    f = 3 if summed else 0  # the sum's 3 bytes on top of the frame
    # frame (Y = SP after the pushes): [Y+1..3 the sum, lsb first,] then Y+f+1 block count, Y+f+2/3 x hi/lo,
    # Y+f+4/5 acc hi/lo, Y+f+6..9 v (msb first)
    body += [f"push r{r}" for r in range(16, 24)] + ["movw r30, r24", f"ldi r24, {nblocks}", "push r24"]
    body += ["push r1"] * f
    body += ["5:", *_mac_block(rows, wbits, x_offset, cols, out_shift, accumulate, post, rounded, f, epilogue)]
    if nblocks > 1:
        body += [f"ldd r24, Y+{f + 1}", "dec r24", f"std Y+{f + 1}, r24", "breq 3f", "rjmp 5b", "3:"]
    if tail:
        body += _mac_block(tail, wbits, x_offset, cols, out_shift, accumulate, post, rounded, f, epilogue)
    body += ["pop r22", "pop r23", "pop r24", "clr r25"] if summed else []
    body += ["pop r0"] * 9
    body += ["clr r1"] + [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    ret = "uint32_t" if summed else "void"
    return f"{ret} {name}(const void *w, const int16_t *x, void *acc, uint32_t v);\n__asm__(\n{asm_words(body)});\n"


def _mac_block(rows: int, wbits: int, x_offset: bool, cols: int, out_shift: int | None,
               accumulate: bool, post: int = 0, rounded: bool = False, f: int = 0, epilogue=None) -> list[str]:
    """One block of mac_asm: its accumulators from the constants (or acc), the columns, the stores (``f``: bytes
    on top of the frame, the folded epilogue's sum)."""
    acc = [f"r{r}" for r in range(2, 2 + 4 * rows)]
    body = ["in r28, 0x3d", "in r29, 0x3e", f"ldd r26, Y+{f + 3}", f"ldd r27, Y+{f + 2}",
            f"ldd r22, Y+{f + 9}", f"ldd r23, Y+{f + 8}", f"ldd r24, Y+{f + 7}", f"ldd r25, Y+{f + 6}"]
    if accumulate:  # acc from RAM (X at acc, then back at x)
        body += ["ldd r26, Y+5", "ldd r27, Y+4", *[f"ld {r}, X+" for r in acc], "ldd r26, Y+3", "ldd r27, Y+2"]
    for q in range(0 if accumulate else rows):  # acc = K - v
        a = acc[4 * q:4 * q + 4]
        body += [f"lpm {r}, Z+" for r in a]
        body += [f"sub {a[0]}, r22", f"sbc {a[1]}, r23", f"sbc {a[2]}, r24", f"sbc {a[3]}, r25"]
    iters = -(-cols // UNROLL)
    wide = iters > 256
    body += ([f"ldi r24, lo8({iters})", f"ldi r25, hi8({iters})"] if wide else [f"ldi r24, {iters & 0xFF}"])
    body += ["clr r28"]
    first = (UNROLL - cols % UNROLL) % UNROLL  # a partial first iteration enters at this copy
    if first:
        body += [f"rjmp 6{first}f"]
    column = _mac_column(rows, wbits, acc, x_offset)
    body += ["1:"]
    for c in range(UNROLL):
        body += [f"6{c}:"] + column
    body += (["sbiw r24, 1"] if wide else ["dec r24"]) + ["breq 2f", "rjmp 1b"]
    body += ["2:", "in r28, 0x3d", "in r29, 0x3e", f"ldd r26, Y+{f + 5}", f"ldd r27, Y+{f + 4}"]
    # r24 is zero after the loop, r25 free
    if epilogue is not None:
        body += _store_folded(acc, rows, *epilogue)
    else:
        body += ([f"st X+, {r}" for r in acc] if out_shift is None
                 else store_rows(acc, rows, out_shift, "r24", "r25", post, rounded))
    return body + [f"std Y+{f + 5}, r26", f"std Y+{f + 4}, r27"]


def _window(a: list[str], m: int) -> tuple[list[str], str, str, str]:
    """Code leaving z = a >> m (5 <= m <= 16; m < 8 only when a 2^(8-m) fits int32) as (lo, hi) and a top byte
    that is hi's sign extension exactly when z fits int16, its bit 7 the sign of a: bytes moved, then a few
    bit shifts (right by m - 8; left by 16 - m through a sign byte in r0; left by 8 - m)."""
    if 8 <= m < 12:
        return [f"asr {a[3]}", f"ror {a[2]}", f"ror {a[1]}"] * (m - 8), a[1], a[2], a[3]
    if m >= 12:
        return ([f"mov r0, {a[3]}", "lsl r0", "sbc r0, r0"]
                + [f"lsl {a[1]}", f"rol {a[2]}", f"rol {a[3]}", "rol r0"] * (16 - m)), a[2], a[3], "r0"
    return [f"lsl {a[0]}", f"rol {a[1]}", f"rol {a[2]}", f"rol {a[3]}"] * (8 - m), a[1], a[2], a[3]


def _store_folded(acc: list[str], rows: int, m: int, n: int, relu: bool, offset: bool) -> list[str]:
    """Block epilogue of mac_asm for a folded epilogue (see mac_asm; r23 a temporary, r1 zero); with offset
    the value + 2^15 (r22 = 0x80) is added to the sum (r24, r25, r30; Z saved), kept in the frame."""
    out = ["clr r1", "ldi r22, 0x80"]
    if offset:
        out += ["push r30", "ldd r24, Y+1", "ldd r25, Y+2", "ldd r30, Y+3"]
    for q in range(rows):
        a = acc[4 * q:4 * q + 4]
        shift, lo, hi, top = _window(a, m)
        out += [f"sbrc {a[3]}, 7", "rjmp 6f"] if relu else []  # a < 0: 0
        out += shift
        if relu:  # z >= 0 fits int16 when top and hi's bit 7 are 0
            out += [f"mov r23, {hi}", "andi r23, 0x80", f"or r23, {top}", "brne 7f"]
        else:
            out += [f"mov r23, {hi}", "lsl r23", "sbc r23, r23", f"cp r23, {top}", "brne 7f"]
        out += [f"mov r23, {lo}", f"andi r23, {(0xFF << n) & 0xFF}", f"mov {lo}, r23"] if n else []
        out += ["rjmp 8f", "7:"]
        if relu:
            out += ["ldi r23, 0xFF", f"mov {lo}, r23", "ldi r23, 0x7F", f"mov {hi}, r23", "rjmp 8f",
                    "6:", f"clr {lo}", f"clr {hi}"]
        else:  # by the sign (in C after lsl top): 0x7FFF or 0x8000
            out += [f"lsl {top}", "ldi r23, 0x7F", "adc r23, r1", f"mov {hi}, r23", "subi r23, 0x80", f"mov {lo}, r23"]
        out += ["8:"]
        if offset:
            out += [f"eor {hi}, r22", f"add r24, {lo}", f"adc r25, {hi}", "adc r30, r1"]
        out += [f"st X+, {lo}", f"st X+, {hi}"]
    if offset:
        out += ["std Y+1, r24", "std Y+2, r25", "std Y+3, r30", "pop r30"]
    return out


def _post_shift(lo: str, hi: str, post: int, zero: str) -> list[str]:
    """The int16 in hi:lo shifted by ``post`` (c_fixed.chain_shift; r23 free): 1 <= post <= 8 a rounding right
    shift (a positive value past int16 after the rounding addition is shifted in as unsigned: its 17th bit is
    0), -15 < post < 0 a left shift saturated at the first step that changes the sign bit."""
    if post > 0:
        return [f"ldi r23, {1 << (post - 1)}", f"add {lo}, r23", f"adc {hi}, {zero}", "brvs 11f", f"asr {hi}",
                "rjmp 12f", "11:", f"lsr {hi}", "12:", f"ror {lo}"] + [f"asr {hi}", f"ror {lo}"] * (post - 1)
    if post < 0:
        return ([f"mov r23, {hi}"] + [f"lsl {lo}", f"rol {hi}", "brvs 13f"] * -post
                + ["rjmp 14f", "13:", "lsl r23", "ldi r23, 0x7F", f"adc r23, {zero}", f"mov {hi}, r23",
                   "subi r23, 0x80", f"mov {lo}, r23", "14:"])
    return []


def _post_value(v: int, post: int) -> int:
    """_post_shift of a constant (as uint16)."""
    v = v - 65536 if v >= 32768 else v
    v = (v + (1 << (post - 1))) >> post if post > 0 else max(-32768, min(32767, v << -post))
    return v & 0xFFFF


def store_rows(acc: list[str], rows: int, k: int, zero: str | None = None, mulc: str | None = None,
                post: int = 0, rounded: bool = False) -> list[str]:
    """Block epilogue of mac_asm: st X+ the int16 sat16(rshift(a, k)) of each accumulator, 8 <= k <= 16
    (rss_avr's method: add 2^(k-1), shift bytes, saturate when the byte above is not the sign). With a
    zero register other than r1 and a free upper register (mulc), 12 <= k <= 14 shift by MULs by 2^(16-k)
    (the high byte of a * 2^(16-k) is a >> (k - 8)): 10 cycles instead of 19."""
    if not 8 <= k <= 16:
        return store_rows_any(acc, rows, k, zero or "r1", post, rounded)
    byte, bit = divmod(k - 1, 8)
    by_mul = zero is not None and mulc is not None and 12 <= k <= 14
    zero = zero or "r1"
    out = (["clr r1"] + ([] if rounded else [f"ldi r22, {1 << bit}"])
           + ([f"ldi {mulc}, {1 << (16 - k)}"] if by_mul else []))
    for q in range(rows):
        a = acc[4 * q:4 * q + 4]
        if not rounded:
            out += [f"add {a[byte]}, r22"] + [f"adc {r}, {zero}" for r in a[byte + 1:]]
        if by_mul:  # result in a1 (lo), a2 (hi); it fits when a3 is the sign extension of its low k - 12 + 4 bits
            lo, hi, j = a[1], a[2], k - 8
            shift = [f"mul {a[1]}, {mulc}", f"mov {a[1]}, r1", f"mul {a[2]}, {mulc}", f"or {a[1]}, r0",
                     f"mov {a[2]}, r1", f"mul {a[3]}, {mulc}", f"or {a[2]}, r0"]
            check = [f"mov r23, {a[3]}", f"subi r23, {(-(1 << (j - 1))) & 0xFF}", f"andi r23, {(0xFF << j) & 0xFF}",
                     "breq 8f", f"lsl {a[3]}", "ldi r23, 0x7F", f"adc r23, {zero}", f"mov {hi}, r23",
                     "subi r23, 0x80", f"mov {lo}, r23"]
        elif k < 12:
            lo, hi, top = a[1], a[2], a[3]
            shift = [f"asr {a[3]}", f"ror {a[2]}", f"ror {a[1]}"] * (k - 8)
        else:
            lo, hi, top = a[2], a[3], "r0"
            shift = [] if k == 16 else [f"mov r0, {a[3]}", "lsl r0", "sbc r0, r0"] + [
                f"lsl {a[1]}", f"rol {a[2]}", f"rol {a[3]}", "rol r0"] * (16 - k)
        if not by_mul:  # saturation: lsl top puts its sign in C; hi = 0x7F + C, lo = hi - 0x80
            check = [] if k == 16 else [f"mov r23, {hi}", "lsl r23", "sbc r23, r23", f"cp r23, {top}", "breq 8f",
                                        f"lsl {top}", "ldi r23, 0x7F", f"adc r23, {zero}", f"mov {hi}, r23",
                                        "subi r23, 0x80", f"mov {lo}, r23"]
        over = _post_value(0x7FFF, post)
        if not rounded:
            out += ["brvc 7f", f"ldi r23, 0x{over & 0xFF:02X}", f"mov {lo}, r23", f"ldi r23, 0x{over >> 8:02X}",
                    f"mov {hi}, r23", "rjmp 9f" if post else "rjmp 8f", "7:"]
        out += shift + check + ["8:", *_post_shift(lo, hi, post, zero), *(["9:"] if post else []),
                                f"st X+, {lo}", f"st X+, {hi}"]
    return out


STORE_SHIFTS = range(0, 32)  # the shifts _store_rows handles (every shift of an int32 accumulator)


def store_rows_any(acc: list[str], rows: int, k: int, zero: str, post: int = 0,
                    rounded: bool = False) -> list[str]:
    """_store_rows for 0 <= k <= 7 and 17 <= k <= 31 (r0, r22, r23 free; ``zero`` holds 0 after clr r1).
    k < 8: the rounded value shifted right by k (result in bytes 0-1) or, cheaper for k >= 5, left by 8 - k
    into bytes 1-2 with a sign byte above; saturated when the bytes above are not the result's sign.
    k >= 17: the result is (a + 2^(k-1)) >> k, always in range; when the rounding addition overflows int32
    the exact result is 2^(31-k)."""
    out = ["clr r1"]
    rnd = k and not rounded  # the rounding addition here (else the row constants hold it)
    if rnd:
        byte, bit = divmod(k - 1, 8)
        out.append(f"ldi r22, {1 << bit}")
    over_val = _post_value(0x7FFF if k <= 16 else 1 << (31 - k), post)
    for q in range(rows):
        a = acc[4 * q:4 * q + 4]
        body = []
        if rnd:
            body += [f"add {a[byte]}, r22"] + [f"adc {r}, {zero}" for r in a[byte + 1:]]
            body += ["brvc 7f", f"ldi r23, {over_val & 0xFF}", f"mov {a[0]}, r23", f"ldi r23, {over_val >> 8}",
                     f"mov {a[1]}, r23", "rjmp 9f", "7:"]
            lo_o, hi_o = a[0], a[1]  # where the overflow case leaves its value
        if k < 8:
            if k <= 4:  # result in a0 (lo), a1 (hi); a2, a3 must be its sign
                body += [f"asr {a[3]}", f"ror {a[2]}", f"ror {a[1]}", f"ror {a[0]}"] * k
                lo, hi, above = a[0], a[1], [a[2], a[3]]
            else:  # result in a1 (lo), a2 (hi); a3 and the sign byte r0 must be its sign
                body += [f"mov r0, {a[3]}", "lsl r0", "sbc r0, r0"]
                body += [f"lsl {a[0]}", f"rol {a[1]}", f"rol {a[2]}", f"rol {a[3]}", "rol r0"] * (8 - k)
                lo, hi, above = a[1], a[2], [a[3], "r0"]
            body += [f"mov r23, {hi}", "lsl r23", "sbc r23, r23", f"cp r23, {above[0]}", f"cpc r23, {above[1]}",
                     "breq 8f", f"lsl {above[1]}", "ldi r23, 0x7F", f"adc r23, {zero}", f"mov {hi}, r23",
                     "subi r23, 0x80", f"mov {lo}, r23"]
        elif k < 24:
            j = k - 16
            if j <= 4:  # result in a2 (lo), a3 (hi)
                body += [f"asr {a[3]}", f"ror {a[2]}"] * j
                lo, hi = a[2], a[3]
            else:  # a3:a2 shifted left by 8 - j into a sign byte: result in a3 (lo), r0 (hi)
                body += [f"mov r0, {a[3]}", "lsl r0", "sbc r0, r0"] + [f"lsl {a[2]}", f"rol {a[3]}", "rol r0"] * (8 - j)
                lo, hi = a[3], "r0"
        else:  # result: a3 >> (k - 24), sign-extended
            body += [f"asr {a[3]}"] * (k - 24) + [f"mov r0, {a[3]}", "lsl r0", "sbc r0, r0"]
            lo, hi = a[3], "r0"
        body += ["8:", *_post_shift(lo, hi, post, zero), f"st X+, {lo}", f"st X+, {hi}"]
        if rnd:
            body += ["rjmp 10f", "9:", f"st X+, {lo_o}", f"st X+, {hi_o}", "10:"]
        out += body
    return out


def _mac_column(rows: int, wbits: int, acc: list[str], x_offset: bool) -> list[str]:
    body = ["ld r22, X+", "ld r23, X+"] + ([] if x_offset else ["subi r23, 0x80"])
    for q in range(rows):
        a0, a1, a2, a3 = acc[4 * q:4 * q + 4]
        body += ["lpm r29, Z+",
                 "mul r29, r22", f"add {a0}, r0", f"adc {a1}, r1", f"adc {a2}, r28", f"adc {a3}, r28",
                 "mul r29, r23", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28"]
        if wbits == 16:
            body += ["lpm r29, Z+",
                     "mul r29, r22", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28",
                     "mul r29, r23", f"add {a2}, r0", f"adc {a3}, r1"]
    return body


def sqd_asm(name: str, protos: int) -> str:
    """void name(const void *m /*flash: per k, per prototype: Mh lo, Mh hi, Ml*/, const uint8_t *xs
    /*per k: xh lo, xh hi, xl*/, uint32_t *acc, uint16_t n): acc[q] = sum over k of (Mh - xh - [Ml < xl])^2
    for up to 4 prototypes sharing each load of x."""
    acc = [f"r{r}" for r in range(2, 2 + 4 * protos)]
    saved = acc + ["r28", "r29"]
    body = asm_prologue(name, saved)
    body += ["movw r30, r24", "movw r26, r22", "movw r28, r20", "movw r24, r18", "push r28", "push r29"]
    body += [f"clr {r}" for r in acc] + ["clr r28", "1:", "ld r18, X+", "ld r19, X+", "ld r21, X+"]
    for q in range(protos):
        a0, a1, a2, a3 = acc[4 * q:4 * q + 4]
        body += ["lpm r22, Z+", "lpm r23, Z+", "lpm r20, Z+",
                 "cp r20, r21", "sbc r22, r18", "sbc r23, r19",
                 "sbrs r23, 7", "rjmp 3f", "com r23", "neg r22", "sbci r23, 0xff",
                 "3:", "mul r22, r22", f"add {a0}, r0", f"adc {a1}, r1", f"adc {a2}, r28", f"adc {a3}, r28",
                 "mul r23, r23", f"add {a2}, r0", f"adc {a3}, r1",
                 "mul r22, r23", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28",
                 f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28"]
    body += ["sbiw r24, 1", "breq 2f", "rjmp 1b", "2:", "pop r29", "pop r28"]
    body += [f"std Y+{i}, {r}" for i, r in enumerate(acc)]
    body += ["clr r1"] + [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return (f"void {name}(const void *m, const uint8_t *xs, uint32_t *acc, uint16_t n);\n"
            f"__asm__(\n{asm_words(body)});\n")


def rshift_avr(em: CEmitter, expr: str, k: int) -> str:
    """rshift_c, cheaper on AVR: avr-gcc shifts an int32 one bit per 4-instruction loop iteration
    (91 cycles for >> 13). Shifts of 8 or more move whole bytes first; 13 to 15 join the high
    half shifted left and the low half shifted right."""
    if k < 0:
        return shift_c(em, expr, k)
    if k < 8:
        return rshift_c(expr, k)
    name = em.sym(f"rs{k}")
    if name not in em.helpers:
        head = f"static inline int32_t {name}(int32_t v)\n{{\n    v += INT32_C({1 << (k - 1)});\n"
        if 13 <= k <= 15:  # v >> k = (v >> 16) * 2^(16-k) + (low 16 bits >> k), the parts do not overlap
            body = ("    int32_t hi = v >> 16;\n    __asm__(\"\" : \"+r\"(hi)); /* keep gcc from re-forming v >> k */\n"
                    f"    return (int32_t)((uint32_t)hi << {16 - k}) | (int32_t)((uint16_t)v >> {k});\n}}\n")
        else:
            whole = 8 * (k // 8)
            body = (f"    v >>= {whole};\n    __asm__(\"\" : \"+r\"(v)); /* keep the byte move apart */\n"
                    f"    return v >> {k - whole};\n}}\n")
        em.helpers[name] = head + body
    return f"{name}({expr})"


def rss_avr(em: CEmitter, expr: str, k: int) -> str:
    """int16 sat16(rshift(v, k)) of an int32 expression, for 8 <= k <= 16, in inline asm: add the rounding
    constant, shift bytes 1..3 by k - 8 right (k < 12) or bytes 1..3 plus a sign byte by 16 - k left, then
    saturate when the byte above the 16-bit result is not its sign extension (or when the addition overflowed)."""
    name = em.sym(f"rss{k}")
    if name not in em.helpers:
        c = 1 << (k - 1)
        add = "\\n\\t".join(f"{op} %{b}0, {f}(-{c})" for op, b, f in
                            zip(("subi", "sbci", "sbci", "sbci"), "ABCD", ("lo8", "hi8", "hlo8", "hhi8")))
        if k < 12:  # result in bytes B (lo), C (hi); D must be C's sign
            ops = ["asr %D0", "ror %C0", "ror %B0"] * (k - 8)
            lo, hi, top, tmp, out = "%B0", "%C0", "%D0", "%A0", ["mov %A2, %B0", "mov %B2, %C0"]
        else:  # result in bytes C (lo), D (hi); E (sign byte) must be D's sign
            ops = ["mov %1, %D0", "lsl %1", "sbc %1, %1"] + ["lsl %B0", "rol %C0", "rol %D0", "rol %1"] * (16 - k)
            lo, hi, top, tmp, out = "%C0", "%D0", "%1", "%B0", ["movw %A2, %C0"]
        # saturation: lsl top puts its sign in C; hi = 0x7F + C, lo = hi - 0x80: 0x7FFF or 0x8000
        check = [] if k == 16 else [f"mov {tmp}, {hi}", f"lsl {tmp}", f"sbc {tmp}, {tmp}", f"cp {tmp}, {top}",
                                    "breq 1f", f"lsl {top}", f"ldi {hi}, 0x7F", f"adc {hi}, r1", f"mov {lo}, {hi}",
                                    f"subi {lo}, 0x80", "1:"]
        # v + 2^(k-1) past INT32_MAX (V set): the exact result is 2^(31-k) or more, saturated
        over = ["brvc 2f", f"ldi {lo}, 0xFF", f"ldi {hi}, 0x7F", "rjmp 1f", "2:"]
        asm = "\\n\\t".join([add] + over + ops + check + (["1:"] if k == 16 else []) + out)
        em.helpers[name] = (f"static inline __attribute__((always_inline)) int16_t {name}(int32_t v)\n{{\n"
                            "    uint8_t e;\n    int16_t r;\n"
                            f"    __asm__(\"{asm}\" : \"+d\"(v), \"=&r\"(e), \"=r\"(r));\n    (void)e;\n"
                            "    return r;\n}\n")
    return f"{name}({expr})"


def mulu16_avr(em: CEmitter) -> str:
    """Name of an inline 16 x 16 -> 32 unsigned product (4 MULs, no libgcc call)."""
    name = em.sym("mulu16")
    if name not in em.helpers:
        asm = "\\n\\t".join(["mul %A1, %A2", "movw %A0, r0", "mul %B1, %B2", "movw %C0, r0",
                               "mul %A1, %B2", "add %B0, r0", "adc %C0, r1", "clr r1", "adc %D0, r1",
                               "mul %B1, %A2", "add %B0, r0", "adc %C0, r1", "clr r1", "adc %D0, r1"])
        em.helpers[name] = (f"static inline __attribute__((always_inline)) uint32_t {name}(uint16_t a, uint16_t b)\n"
                            "{\n    uint32_t r;\n"
                            f"    __asm__(\"{asm}\" : \"=&r\"(r) : \"r\"(a), \"r\"(b));\n    return r;\n}}\n")
    return name


def muls8(em: CEmitter) -> str:
    """Name of an inline int8 x int8 -> int16 product: one MULS (avr-gcc widens both to 16 bits and calls
    __mulhisi3 when the product is summed into an int32)."""
    name = em.sym("muls8")
    if name not in em.helpers:
        em.helpers[name] = (f"static inline __attribute__((always_inline)) int16_t {name}(int8_t a, int8_t b)\n"
                            "{\n    int16_t r;\n"
                            "    __asm__(\"muls %1, %2\\n\\tmovw %0, r0\\n\\tclr r1\"\n"
                            "            : \"=r\"(r) : \"d\"(a), \"d\"(b));\n"
                            "    return r;\n}\n")
    return name


def dot8_avr(em: CEmitter) -> str:
    """Name of an inline ``acc + sum w[i] x[i]`` of n (1-255) int8 weights in flash and int8 inputs in RAM:
    LPM Z+, LD X+, MULS, the product sign-extended into the int32: 17 cycles a term."""
    name = em.sym("dot8")
    if name not in em.helpers:
        asm = "\\n\\t".join(["1:", "lpm %[wv], Z+", "ld %[xv], X+", "muls %[wv], %[xv]", "mov %[ext], r1",
                               "lsl %[ext]", "sbc %[ext], %[ext]", "add %A[acc], r0", "adc %B[acc], r1",
                               "adc %C[acc], %[ext]", "adc %D[acc], %[ext]", "dec %[n]", "brne 1b", "clr r1"])
        em.helpers[name] = (
            f"static inline __attribute__((always_inline)) int32_t {name}(int32_t acc, const int8_t *w, "
            "const int8_t *x, uint8_t n)\n{\n    uint8_t wv, xv, ext;\n"
            f"    __asm__ volatile(\"{asm}\"\n"
            "        : [acc] \"+r\"(acc), [w] \"+z\"(w), [x] \"+x\"(x), [n] \"+r\"(n), [wv] \"=&d\"(wv), "
            "[xv] \"=&d\"(xv), [ext] \"=&r\"(ext)\n        :\n        : \"r0\", \"memory\");\n"
            "    return acc;\n}\n")
    return name


def mulr8_avr(em: CEmitter) -> str:
    """Name of an inline (d * f + 128) >> 8 for uint16 d, uint8 f (two MULs: the rounding bit is bit 7 of the
    low product's low byte; the result fits 16 bits)."""
    name = em.sym("mulr8")
    if name not in em.helpers:
        asm = "\\n\\t".join(["mul %A[d], %[f]", "mov %A[r], r1", "mov %B[r], r0", "mul %B[d], %[f]",
                               "lsl %B[r]", "adc %A[r], r0", "mov %B[r], r1", "clr r1", "adc %B[r], r1"])
        em.helpers[name] = (f"static inline __attribute__((always_inline)) uint16_t {name}(uint16_t d, uint8_t f)\n"
                            "{\n    uint16_t r;\n"
                            f"    __asm__(\"{asm}\" : [r] \"=&r\"(r) : [d] \"r\"(d), [f] \"r\"(f));\n"
                            "    return r;\n}\n")
    return name


def asr16_avr(em: CEmitter, k: int) -> str:
    """Name of an inline arithmetic right shift of an int16 by k (unrolled: avr-gcc loops at -Os)."""
    name = em.sym(f"asr16_{k}")
    if name not in em.helpers:
        asm = "\\n\\t".join(["asr %B0", "ror %A0"] * k)
        em.helpers[name] = (f"static inline __attribute__((always_inline)) int16_t {name}(int16_t v)\n"
                            f"{{\n    __asm__(\"{asm}\" : \"+r\"(v));\n    return v;\n}}\n")
    return name


def adds16_avr(em: CEmitter) -> str:
    """Name of an inline saturating int16 + int16 (the sum of Bonsai's path scores at one scale)."""
    name = em.sym("adds16")
    if name not in em.helpers:
        asm = "\\n\\t".join(["add %A[a], %A[b]", "adc %B[a], %B[b]", "brvc 1f", "ldi %A[a], 0xFF", "ldi %B[a], 0x7F",
                               "sbrc %B[b], 7", "adiw %A[a], 1", "1:"])
        em.helpers[name] = (f"static inline __attribute__((always_inline)) int16_t {name}(int16_t a, int16_t b)\n"
                            "{\n"
                            f"    __asm__(\"{asm}\" : [a] \"+w\"(a) : [b] \"r\"(b));\n"
                            "    return a;\n}\n")
    return name


def rss_small_avr(em: CEmitter, expr: str, k: int) -> str:
    """int16 sat16(rshift(v, k)) for 1 <= k <= 7 without a 32-bit shift loop: v + 2^(k-1) is in int16 range
    after the shift exactly when its upper half is in [-2^(k-1), 2^(k-1)); then it has at most 16 + k
    significant bits, so (v << (8 - k)) >> 8 (a short left shift and a byte move) is the result."""
    name = em.sym(f"rsl{k}")
    if name not in em.helpers:
        em.helpers[name] = (f"static inline int16_t {name}(int32_t v)\n{{\n    v += INT32_C({1 << (k - 1)});\n"
                            "    const int16_t hi = (int16_t)((uint32_t)v >> 16);\n"
                            f"    if (hi >= {1 << (k - 1)}) return 32767;\n"
                            f"    if (hi < -{1 << (k - 1)}) return -32767 - 1;\n"
                            f"    return (int16_t)((int32_t)((uint32_t)v << {8 - k}) >> 8);\n}}\n")
    return f"{name}({expr})"


def rs_value(em: CEmitter, node: Node, expr: str, k: int) -> str:
    """The saturated rshift(expr, k) in node's type, through rss_avr (or rss_small_avr) when it applies."""
    if node.type.dtype.bits == 16 and 8 <= k <= 16:
        return rss_avr(em, expr, k)
    if node.type.dtype.bits == 16 and 1 <= k <= 7:
        return rss_small_avr(em, expr, k)
    return saturate_c(em, node, rshift_avr(em, expr, k))


def store_rs(em: CEmitter, node: Node, index: str, expr: str, k: int) -> str:
    """store(node, index, rshift(expr, k)) through rss_avr (or rss_small_avr) when it applies."""
    if node.type.dtype.bits == 16 and 8 <= k <= 16:
        return f"{em.var(node.name)}[{index}] = {rss_avr(em, expr, k)};"
    if node.type.dtype.bits == 16 and 1 <= k <= 7:
        return f"{em.var(node.name)}[{index}] = {rss_small_avr(em, expr, k)};"
    return store(em, node, index, rshift_avr(em, expr, k))


def offset_user(em: CEmitter, name: str) -> str | None:
    """The sole kernel use of ``name`` (mat-vec or dot-product distance): then its producer may store
    x + 2^15 and the sums the kernel needs (see presum_sym)."""
    return sole_vector_user(em, name, matvec_ok, sqdist_dot_ok)


def fused_producer(em: CEmitter, name: str) -> str | None:
    """The user kind (offset_user) when the producer of ``name`` stores x + 2^15 and its sums: an input-type
    clip (for either user), an exp_lut feeding a mat-vec, or the last value of a fused element-wise chain
    feeding a mat-vec (a layer's bias and relu before the next layer: chain_offset_store)."""
    g = em.graph
    op = g.op(name)
    if op == "clip" and clip_ok(em, g.node(name)):
        return offset_user(em, name) or ("matvec_at" if node_kernels_only(em, name, matvec_at_ok) else None)
    if op == "exp_lut" and exp_ok(em, g.node(name)) and offset_user(em, name) == "matvec":
        return "matvec"
    if chain_offset_store(em, name):
        return "matvec"
    return None


def chain_offset_store(em: CEmitter, name: str) -> str | None:
    """AvrTarget.offset_store: the last value of a fused chain whose only reader is mac_asm's mat-vec is
    stored as x + 2^15 and summed (into presum_sym, which the reader zeroes after reading it)."""
    if not chain_last(em, name) or offset_user(em, name) != "matvec":
        return None
    sym = presum_sym(em, name)
    em.scratch(sym, "uint32_t", 1)
    return sym


def presum_sym(em: CEmitter, name: str) -> str:
    """Scratch where the producer of ``name`` leaves sum(x + 2^15) (and, for a distance, sum(x^2))."""
    return em.sym(f"sum_{em.var(name)}")


def fused_clip(em: CEmitter, name: str) -> bool:
    return em.graph.op(name) == "clip" and fused_producer(em, name) is not None


def blocks(rows: int, size: int = BLOCK) -> list[tuple[int, int]]:
    """(first row, rows) of each pass: blocks of ``size``, then the remainder."""
    return [(r, min(size, rows - r)) for r in range(0, rows, size)]


def kernel_weights(A: np.ndarray, wbits: int, k_extra=None) -> tuple[np.ndarray, tuple[Block, ...]]:
    """Flash image for mac_asm: per block of rows, the rows' constants K = -2^15 * row sum (mod 2^32, little
    endian) then w' = w + 2^(wbits-1) as unsigned, column-major. Also where each block's weights start."""
    dt = np.uint16 if wbits == 16 else np.uint8
    off = (A.astype(np.int64) + (1 << (wbits - 1))).astype(dt)
    k_row = -(A.astype(np.int64).sum(axis=1) << 15) + (0 if k_extra is None else np.asarray(k_extra, np.int64))
    k_row = (k_row % (1 << 32)).astype("<u4")
    parts, layout, pos = [], [], 0
    for r, n in blocks(A.shape[0]):
        k = k_row[r:r + n].view(dt)
        parts += [k, off[r:r + n].T.reshape(-1)]
        layout.append(Block(r, n, pos + len(k), n, 1))
        pos += len(k) + n * A.shape[1]
    return np.concatenate(parts), tuple(layout)


def matvec_ok(em: CEmitter, node: Node) -> bool:
    """The dense kernel takes the mat-vec: a constant matrix (dense, or sparse when the cost model of
    the cost model (avr.cost, arm.m0_cost) chose this kernel for it), not one the sparse kernel takes."""
    a_name, x_name = node.inputs
    g = em.graph
    op = g.op(a_name)
    if not (op in ("const", "sparse_const") and g.op(x_name) not in ("const", "sparse_const")
            and int(node.attrs.get("shift", 0)) == 0 and g.type(a_name).dtype.bits in (8, 16)
            and g.type(x_name).dtype.bits == 16 and 0 < g.type(a_name).shape[1] < 65536):
        return False
    if op == "sparse_const" and sparse_matvec_plan(em, node) is None:
        return False
    return avr_dense_takes(em, node)


def kernel_matvec(em: CEmitter, node: Node) -> list[str]:
    a_name, x_name = node.inputs
    g = em.graph
    A = int_matrix(g, a_name)
    # streaming's feed() keeps reading a sparse constant's CSC arrays
    key = f"{a_name}:dense" if g.op(a_name) == "sparse_const" else a_name
    wbits = g.type(a_name).dtype.bits
    out_shift = node_output_shift(g, node.name)
    acc = em.sym("acc")
    ep = folded(em, node)
    if ep is not None:  # the store and its fused chain (bias, relu, offset-binary) in the kernel's epilogue
        scores = ep.last == em.scores_node  # then the head's own slot is never written
        return ["{", *mac_lines(em, A, wbits, a_name, x_name, acc, layout_key=key, k_extra=ep.bias,
                                out=(em.var(ep.last if scores else node.name), out_shift), epilogue=ep),
                *([f"    (void){em.var(node.name)};"] if scores else []), "}"]
    if node.type.dtype.bits == 16 and 8 <= out_shift <= 16:  # the kernel shifts, saturates and stores
        return ["{", *mac_lines(em, A, wbits, a_name, x_name, acc, layout_key=key,
                                out=(em.var(node.name), out_shift)), "}"]
    return ["{", *mac_lines(em, A, wbits, a_name, x_name, acc, layout_key=key),
            f"    for (uint8_t r = 0; r < {A.shape[0]}; ++r)",
            "        " + store_rs(em, node, "r", f"(int32_t){acc}[r]", out_shift),
            "}"]


def folded(em: CEmitter, node: Node):
    """The folded epilogue (folded_epilogue.fold) of a dense mat-vec with a fused chain, or of a network's output
    layer with the scores' bias (output_bias), whose shifts the kernel's epilogue takes (_window), else None."""

    g = em.graph
    if g.op(node.inputs[0]) != "const":
        return None
    if g.analyses.fused.get(node.name):
        ep = fold(em, node.name)
    else:  # the scores' bias (a network's output layer): the kernel stores the scores themselves
        bias = output_bias(em, node)
        ep = fold(em, node.name, [bias]) if bias else None
    if ep is None or ep.n > 7:
        return None
    m = ep.shift - ep.n
    if not (8 <= m <= 16 or (5 <= m < 8 and ep.amax < 2 ** (23 + m))):  # _window's shifts
        return None
    if not g.analyses.fused.get(node.name):
        em.kernel_stored.add(bias)
    return ep


def mac_lines(em: CEmitter, A: np.ndarray, wbits: int, label: str, x_name: str, acc: str, layout_key: str,
              fuse: bool = True, k_extra=None, v_sub: str | None = None,
              out: tuple[str, int] | None = None, epilogue=None) -> list[str]:
    """Lines leaving acc[r] = k_extra[r] - v_sub + sum_k A[r][k] x[k] (mod 2^32) for the int matrix A, kept in
    flash (k_extra: ints known at compile time, v_sub: a C expression); with out = (int16 array, k), the
    kernel stores sat16(rshift(acc[r], k)) there instead (8 <= k <= 16), or with ``epilogue`` (a
    folded_epilogue.Epilogue, its bias in k_extra) its values, offset-binary with their sum when the next
    mat-vec kernel reads them (AvrTarget.offset_store)."""
    rows, cols = A.shape
    wtype = "uint16_t" if wbits == 16 else "uint8_t"
    image, layout = kernel_weights(A, wbits, k_extra)
    sym = em.add_const_array(em.sym(f"{label}_off"), image, wtype,
                             f"%{label}: {rows}x{cols} + {1 << (wbits - 1)}, per 5-row block: -2^15 * row sums "
                             "(32-bit), then the block column-major")
    decode = (lambda e: f"(int16_t)({e} ^ 0x8000u)") if wbits == 16 else (lambda e: f"(int8_t)({e} ^ 0x80u)")
    em.kernel_layout[layout_key] = BlockedLayout(sym, wtype, layout, decode)
    if out is None:
        em.scratch(acc, "uint32_t", rows)
    pre = fuse and fused_producer(em, x_name) is not None  # x holds x + 2^15, its sum is in presum_sym
    x = em.var(x_name)
    if pre:
        lines = [f"    uint32_t sx = {presum_sym(em, x_name)}[0];"]
        if chain_last(em, x_name):  # summed by the chain's stores: zeroed for the next inference
            lines.append(f"    {presum_sym(em, x_name)}[0] = 0;")
    else:
        lines = ["    uint32_t sx = 0;",
                 f"    for (uint16_t k = 0; k < {cols}; ++k) sx += (uint16_t)((uint16_t){x}[k] ^ 0x8000u);"]
    lines += [f"    sx <<= {15 if wbits == 16 else 7};"] + ([f"    sx += {v_sub};"] if v_sub else [])
    groups = [(0, BLOCK, rows // BLOCK)] if rows >= BLOCK else []
    if rows % BLOCK:
        groups.append((rows - rows % BLOCK, rows % BLOCK, 1))
    spec, sums, tag = None, None, ""
    if epilogue is not None:
        em.stored_heads.add(epilogue.head)
        sums = em.target.offset_store(em, epilogue.last)
        spec = (epilogue.shift - epilogue.n, epilogue.n, epilogue.relu, bool(sums))
        tag = f"e{epilogue.shift}n{epilogue.n}{'r' if epilogue.relu else ''}{'o' if sums else ''}"
    for r, n, nb in groups:
        name = em.sym(f"mac{n}w{wbits}{'o' if pre else ''}_{cols}x{nb}" + (tag or (f"s{out[1]}" if out else "")))
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, pre, cols, nb, out[1] if out else None, epilogue=spec)
        base = layout[r // BLOCK].base - (4 if wbits == 8 else 2) * n
        call = f"{name}({sym} + {base}, (const int16_t *){x}, {out[0] if out else acc} + {r}, sx);"
        lines.append(f"    {sums}[0] += {call}" if sums else f"    {call}")
    return lines


def sqdist_dot_ok(em: CEmitter, node: Node) -> bool:
    """Distances as |M_j|^2 + |x|^2 - 2 M_j.x on the mat-vec kernel: exact when the differences are
    not shifted (then choose_scales proved k (|M| + |x|)^2 <= 2^30, so every partial sum fits)."""
    x_name, m_name = node.inputs
    g = em.graph
    return (int(node.attrs.get("shift", 0)) == 0 and g.op(m_name) == "const" and g.type(m_name).dtype.bits == 16
            and g.op(x_name) not in ("const", "sparse_const") and g.type(x_name).dtype.bits == 16
            and g.type(m_name).shape[0] < 65536 and g.type(m_name).shape[1] < 256)


def kernel_sqdist_dot(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    k, m = M.shape
    acc, x = em.sym("acc"), em.var(x_name)
    out_shift = 2 * g.type(x_name).dtype.scale - node.type.dtype.scale
    if fused_producer(em, x_name):
        xx = [f"    const uint32_t xx = {presum_sym(em, x_name)}[1];"]
    else:
        xx = ["    uint32_t xx = 0;",
              f"    for (uint16_t k = 0; k < {k}; ++k) {{",
              f"        const uint16_t a = {x}[k] < 0 ? -(uint16_t){x}[k] : (uint16_t){x}[k];",
              f"        xx += {mulu16_avr(em)}(a, a);",
              "    }"]
    key = m_name
    if np.abs(M).max() <= 16383:  # weights -2 M fit: the kernel leaves |M_j|^2 + |x|^2 - 2 M_j.x itself
        direct = node.type.dtype.bits == 16 and 8 <= out_shift <= 16  # the kernel shifts and stores
        lines = mac_lines(em, -2 * M.T, 16, f"{m_name}_t2", x_name, acc, key, k_extra=(M * M).sum(axis=0),
                          v_sub="(uint32_t)-xx", out=(em.var(node.name), out_shift) if direct else None)
        em.kernel_layout[key] = replace(em.kernel_layout[key],  # streaming reads M back: -(w >> 1)
                                        decode=lambda e: f"(int16_t)-((int16_t)({e} ^ 0x8000u) >> 1)")
        if direct:
            return ["{", *xx, *lines, "}"]
        return ["{", *xx, *lines,
                f"    for (uint8_t j = 0; j < {m}; ++j)",
                "        " + store_rs(em, node, "j", f"(int32_t){acc}[j]", out_shift),
                "}"]
    norms = em.add_const_array(em.sym(f"{m_name}_sq"), (M * M).sum(axis=0).astype(np.int32), "int32_t",
                               f"%{m_name}: squared norm of each prototype")
    return ["{", *mac_lines(em, M.T.copy(), 16, f"{m_name}_t", x_name, acc, layout_key=key), *xx,
            f"    for (uint8_t j = 0; j < {m}; ++j) {{",
            f"        const uint32_t d = (uint32_t)pgm_read_dword(&{norms}[j]) + xx - ({acc}[j] << 1);",
            "        " + store_rs(em, node, "j", "(int32_t)d", out_shift),
            "    }",
            "}"]


def sqdist_ok(em: CEmitter, node: Node) -> bool:
    x_name, m_name = node.inputs
    g = em.graph
    return (g.op(m_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and g.type(m_name).dtype.bits == 16 and g.type(x_name).dtype.bits == 16
            and int(node.attrs.get("shift", 0)) <= 7 and g.type(m_name).shape[0] < 65536 // 3)


def split_prototypes(M: np.ndarray, h: int) -> np.ndarray:
    """(k, m) prototypes -> bytes for sqd_asm: per block of SQD_BLOCK prototypes, per dimension k,
    per prototype: Mh lo, Mh hi, Ml."""
    Mp = M.astype(np.int64) + ((1 << (h - 1)) if h else 0)
    mh, ml = Mp >> h, Mp & ((1 << h) - 1)
    out = np.empty(Mp.shape + (3,), np.uint8)
    u = mh & 0xFFFF
    out[..., 0], out[..., 1], out[..., 2] = u & 0xFF, u >> 8, ml
    return np.concatenate([out[:, j:j + n].reshape(-1) for j, n in blocks(M.shape[1], SQD_BLOCK)])


def kernel_sqdist(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"]
    k, m = M.shape
    h = int(node.attrs.get("shift", 0))
    sym = em.add_const_array(em.sym(f"{m_name}_split"), split_prototypes(M, h), "uint8_t",
                             f"%{m_name}: per prototype, per dim: (M + 2^(h-1)) >> {h} (int16), low {h} bits")
    em.kernel_layout[m_name] = SplitLayout(sym, k, m, SQD_BLOCK)
    xs, acc = em.sym("xs"), em.sym("acc")
    em.scratch(xs, "uint8_t", 3 * k)
    em.scratch(acc, "uint32_t", m)
    x = em.var(x_name)
    out_shift = node_output_shift(g, node.name)
    lines = ["{",
             f"    for (uint16_t k = 0; k < {k}; ++k) {{",
             f"        const int16_t xh = (int16_t)({x}[k] >> {h});",
             f"        {xs}[3 * k] = (uint8_t)xh;",
             f"        {xs}[3 * k + 1] = (uint8_t)((uint16_t)xh >> 8);",
             f"        {xs}[3 * k + 2] = (uint8_t)({x}[k] & {(1 << h) - 1});",
             "    }"]
    for j, n in blocks(m, SQD_BLOCK):
        name = em.sym(f"sqd{n}")
        if name not in em.helpers:
            em.helpers[name] = sqd_asm(name, n)
        lines.append(f"    {name}({sym} + {3 * k * j}, {xs}, {acc} + {j}, {k});")
    return lines + [f"    for (uint16_t j = 0; j < {m}; ++j)",
                    "        " + store(em, node, "j", rshift_avr(em, f"(int32_t){acc}[j]", out_shift)),
                    "}"]


def _bits(em: CEmitter, name: str) -> int:
    return em.graph.type(name).dtype.bits


def clip_presum_asm(em: CEmitter, node: Node, lo: int, hi: int) -> list[str]:
    """A fused clip with scalar bounds (the input clamp before the projection): one inline-asm loop
    storing clamp(x) + 2^15 and summing it (24 bits suffice for up to 256 elements)."""
    (a,) = node.inputs
    n = node.type.size
    sym = presum_sym(em, node.name)
    em.scratch(sym, "uint32_t", 1)
    one = ["ld %A[v], %a[s]+", "ld %B[v], %a[s]+"]
    if hi < 32767:
        one += ["cp %A[v], %A[h1]", "cpc %B[v], %B[h1]", "brlt 2f", "movw %[v], %[hi]", "2:"]
    if lo == 0:
        one += ["sbrc %B[v], 7", "movw %[v], %[lo]"]
    elif lo > -32768:
        one += ["cp %A[v], %A[lo]", "cpc %B[v], %B[lo]", "brge 3f", "movw %[v], %[lo]", "3:"]
    one += ["eor %B[v], %[k]", "st %a[d]+, %A[v]", "st %a[d]+, %B[v]", "add %A[sx], %A[v]", "adc %B[sx], %B[v]",
            "adc %C[sx], __zero_reg__"] + (["adc %D[sx], __zero_reg__"] if n > 256 else [])
    unroll = 2 if n % 2 == 0 else 1  # two elements per iteration when n is even
    count = n // unroll
    short = count <= 256
    asm = ["1:"] + one * unroll + ["dec %[n]" if short else "sbiw %[n], 1", "brne 1b"]
    text = "\\n\\t".join(asm)
    return ["{",
            f"    const int16_t *s = {em.var(a)};",
            f"    int16_t *d = {em.var(node.name)}, v;",
            f"    {'uint8_t' if short else 'uint16_t'} n = {count & 0xFF if short else count};",
            "    uint32_t sx = 0;",
            f'    __asm__ volatile("{text}"',
            # early-clobber everywhere: gcc may otherwise share a register between equal values (n, k; sx, lo)
            f'        : [s] "+&e"(s), [d] "+&e"(d), [n] "+&{"r" if short else "w"}"(n), [sx] "+&r"(sx),'
            ' [v] "=&r"(v)',
            f'        : [h1] "r"((int16_t){min(hi + 1, 32767)}), [hi] "r"((int16_t){hi}), [lo] "r"((int16_t){lo}),'
            ' [k] "r"((uint8_t)0x80)',
            '        : "memory");',
            f"    {sym}[0] = sx;",
            "}"]


def kernel_clip(em: CEmitter, node: Node) -> list[str] | None:
    """The shared 16-bit clamp (input_clamp), fused with the sums the AVR mat-vec and distance kernels
    need of x when one of them is its only user."""
    fused = fused_producer(em, node.name) if clip_ok(em, node) else None
    if not fused:
        return kernel_clip16(em, node)
    out = em.var(node.name)
    lines, bounds, lo, hi = clip_loop_head(em, node)
    if fused in ("matvec", "matvec_at") and np.ndim(lo) == 0:
        return clip_presum_asm(em, node, int(lo), int(hi))
    if fused:
        em.scratch(presum_sym(em, node.name), "uint32_t", 2 if fused == "sqdist" else 1)
        lines.append("    uint32_t sx = 0;" + (" uint32_t xx = 0;" if fused == "sqdist" else ""))
    lines += clip_loop_start(em, node, bounds)
    if fused:
        lines += ["        const uint16_t u = (uint16_t)c ^ 0x8000u;", f"        {out}[i] = (int16_t)u;",
                  "        sx += u;"]
        if fused == "sqdist":
            lines += ["        const uint16_t m = c < 0 ? -(uint16_t)c : (uint16_t)c;",
                      f"        xx += {mulu16_avr(em)}(m, m);"]
        lines += ["    }", f"    {presum_sym(em, node.name)}[0] = sx;"]
        if fused == "sqdist":
            lines += [f"    {presum_sym(em, node.name)}[1] = xx;"]
    return lines + ["}"]


def kernel_scale(em: CEmitter, node: Node) -> list[str] | None:
    (a,) = node.inputs
    fq = int(node.attrs["factor_q"])
    if _bits(em, a) != 16 or not -32768 <= fq <= 32767 or node.type.rank != 1:
        return None
    k = em.graph.type(a).dtype.scale + node.attrs["factor_scale"] - node.type.dtype.scale
    if fq > 0 and fq & (fq - 1) == 0:  # 2^p: rshift(v 2^p, k) = rshift(v, k - p), exact (a shift, no multiply)
        p = fq.bit_length() - 1
        return [f"for (uint16_t i = 0; i < {node.type.size}; ++i) "
                + store_rs(em, node, "i", f"(int32_t){em.at(a, 'i')}", k - p)]
    prod = f"(int32_t){em.at(a, 'i')} * (int16_t){fq}"  # 16 x 16 -> 32: __mulhisi3, not __mulsi3
    return [f"for (uint16_t i = 0; i < {node.type.size}; ++i) " + store_rs(em, node, "i", prod, k)]


def exp_ok(em: CEmitter, node: Node) -> bool:
    (a,) = node.inputs
    at = node.attrs
    lo_q, hi_q, drop = int(at["lo_q"]), int(at["hi_q"]), int(at["drop_bits"])
    rnd = (1 << (drop - 1)) if drop else 0
    return (_bits(em, a) == 16 and node.type.rank == 1 and -32768 <= lo_q <= hi_q <= 32767
            and hi_q - lo_q + rnd <= 65535)


def store_presum(em: CEmitter, node: Node, index: str, expr: str, k: int) -> list[str]:
    """store_rs, or (when a kernel mat-vec alone uses the result) x + 2^15 stored and summed into sx."""
    if not fused_producer(em, node.name):
        return ["    " + store_rs(em, node, index, expr, k)]
    em.scratch(presum_sym(em, node.name), "uint32_t", 1)
    val = rss_avr(em, expr, k) if node.type.dtype.bits == 16 and 8 <= k <= 16 else \
        f"{saturate_c(em, node, rshift_avr(em, expr, k))}"
    return [f"    const uint16_t u = (uint16_t){val} ^ 0x8000u;", f"    {em.var(node.name)}[{index}] = (int16_t)u;",
            "    sx += u;"]


def exp_asm(name: str, n: int, at: dict, shift: int, presum: bool) -> str:
    """void name(const int16_t *in, int16_t *out, uint32_t *sx, t_hi, t_lo /*flash*/): exp_lut over n <= 256
    elements (any product shift 0..31: every output scale the search can choose) when both tables are
    non-negative and every rounded product fits 16 bits (checked by the caller): clamp, index, two LPM
    pairs, an unsigned 16 x 16 product, the rounding shift; with presum,
    out holds the result + 2^15 and *sx their sum."""
    lo_q, hi_q, drop, k = int(at["lo_q"]), int(at["hi_q"]), int(at["drop_bits"]), int(at["low_bits"])
    rnd = (1 << (drop - 1)) if drop else 0
    saved = ["r2", "r3", "r4", "r5", "r10", "r11", "r12", "r13", "r14", "r15", "r16", "r17", "r28", "r29"]
    b = asm_prologue(name, saved)
    b += ["movw r26, r24", "movw r28, r22", "movw r14, r20", "movw r12, r18", "movw r10, r16",
          "clr r5", "clr r2", "clr r3", "clr r4",
          f"ldi r16, {n & 0xFF}", "1:", "ld r24, X+", "ld r25, X+"]
    if lo_q == 0:  # the common case (distances): a sign test, the fix out of line
        b += ["sbrc r25, 7", "rjmp 5f", "2:"]
    elif lo_q > -32768:
        b += [f"cpi r24, lo8({lo_q})", f"ldi r31, hi8({lo_q})", "cpc r25, r31", "brge 2f",
              f"ldi r24, lo8({lo_q})", f"ldi r25, hi8({lo_q})", "2:"]
    if hi_q < 32767:
        b += [f"cpi r24, lo8({hi_q + 1})", f"ldi r31, hi8({hi_q + 1})", "cpc r25, r31", "brlt 3f",
              f"ldi r24, lo8({hi_q})", f"ldi r25, hi8({hi_q})", "3:"]
    off = (lo_q - rnd) & 0xFFFF  # u = v - lo_q + rnd, exact in 16 bits (exp_ok); t = u >> drop
    if off:
        b += [f"subi r24, lo8({off})", f"sbci r25, hi8({off})"]
    t_max = (hi_q - lo_q + rnd) >> drop
    # byte offsets into the tables straight from u: 2 (t >> k) = (u >> (drop + k - 1)) & ~1 and
    # 2 (t & mask) = (u >> (drop - 1)) & 2 mask, with no shift of u by drop first
    hi_code, hi_lo, hi_hi = _u_offset(drop + k, 0xFFFE, 2 * (t_max >> k) > 0xFF)
    b += hi_code + ["movw r30, r12", f"add r30, {hi_lo}", f"adc r31, {hi_hi}", "lpm r20, Z+", "lpm r21, Z"]
    lo_code, lo_lo, lo_hi = _u_offset(drop, 2 * ((1 << k) - 1), 2 * ((1 << k) - 1) > 0xFF)
    b += lo_code + ["movw r30, r10", f"add r30, {lo_lo}", f"adc r31, {lo_hi}",
          "lpm r18, Z+", "lpm r19, Z",
          "mul r20, r18", "movw r22, r0", "mul r21, r19", "movw r24, r0",
          "mul r20, r19", "add r23, r0", "adc r24, r1", "adc r25, r5",
          "mul r21, r18", "add r23, r0", "adc r24, r1", "adc r25, r5"]
    c = (1 << (shift - 1)) if shift else 0
    regs = ["r22", "r23", "r24", "r25"]
    if c:
        first = next(i for i in range(4) if (c >> (8 * i)) & 0xFF)  # lower bytes of c are 0: no borrow from them
        neg = (-c) & 0xFFFFFFFF
        b += [f"{'subi' if i == first else 'sbci'} {regs[i]}, {(neg >> (8 * i)) & 0xFF}" for i in range(first, 4)]
    # the rounded product is non-negative and its result fits 15 bits (checked by the caller)
    if shift < 8:
        b += ["lsr r25", "ror r24", "ror r23", "ror r22"] * shift
        lo, hi = "r22", "r23"
    elif shift > 16:
        b += ["lsr r25", "ror r24"] * (shift - 16)
        lo, hi = "r24", "r25"
    elif shift < 12:
        b += ["lsr r25", "ror r24", "ror r23"] * (shift - 8)
        lo, hi = "r23", "r24"
    else:
        b += ["lsl r23", "rol r24", "rol r25"] * (16 - shift)
        lo, hi = "r24", "r25"
    if presum:
        b += [f"subi {hi}, 0x80", f"add r2, {lo}", f"adc r3, {hi}", "adc r4, r5"]
    b += [f"st Y+, {lo}", f"st Y+, {hi}", "dec r16", "breq 4f", "rjmp 1b"]
    if lo_q == 0:
        b += ["5:", "clr r24", "clr r25", "rjmp 2b"]
    b += ["4:"]
    if presum:
        b += ["movw r30, r14", "st Z+, r2", "st Z+, r3", "st Z+, r4", "st Z+, r5"]
    b += ["clr r1"] + [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return (f"void {name}(const int16_t *in, int16_t *out, uint32_t *sx, const int16_t *t_hi, const int16_t *t_lo);\n"
            f"__asm__(\n{asm_words(b)});\n")


def _u_offset(n: int, mask: int, wide: bool) -> tuple[list[str], str, str]:
    """exp_asm: ((u >> n) << 1) & mask for u in r25:r24 (kept), as (code, low register, high register);
    the high register is r5 (zero) when not ``wide`` (the offset fits a byte). Byte moves instead of
    bit shifts where they are shorter; r22, r23, r19 are free."""
    if n == 0:
        code, lo, hi = ["movw r22, r24", "lsl r22", "rol r23"], "r22", "r23"
    elif n - 1 >= 8:
        code, lo, hi = ["mov r22, r25"] + ["lsr r22"] * (n - 9) + (["clr r23"] if wide else []), "r22", "r23"
    elif n - 1 >= 5 and not wide:  # the low byte of u >> m is the high byte of u << (8 - m)
        code, lo, hi = ["movw r22, r24"] + ["lsl r22", "rol r23"] * (9 - n), "r23", "r23"
    elif n - 1 >= 5:
        code, lo, hi = ["movw r22, r24", "clr r19"] + ["lsl r22", "rol r23", "rol r19"] * (9 - n), "r23", "r19"
    else:
        code, lo, hi = ["movw r22, r24"] + ["lsr r23", "ror r22"] * (n - 1), "r22", "r23"
    if mask & 0xFF != 0xFF:
        code.append(f"andi {lo}, {mask & 0xFF}")
    if wide:
        if mask >> 8 != 0xFF:
            code.append(f"andi {hi}, {mask >> 8}")
    else:
        hi = "r5"
    return code, lo, hi


def kernel_exp_lut(em: CEmitter, node: Node) -> list[str] | None:
    if not exp_ok(em, node):
        return None
    (a,) = node.inputs
    at = node.attrs
    lo_q, hi_q, drop = int(at["lo_q"]), int(at["hi_q"]), int(at["drop_bits"])
    rnd = (1 << (drop - 1)) if drop else 0
    t_hi, t_lo = exp_tables(em, node)
    k, mask = at["low_bits"], (1 << at["low_bits"]) - 1
    rd = em.target.read_const
    shift = at["hi_scale"] + at["lo_scale"] - node.type.dtype.scale
    th, tl = np.asarray(at["table_hi"], np.int64), np.asarray(at["table_lo"], np.int64)
    if th.min() >= 0 and tl.min() >= 0 and int(th.max()) * int(tl.max()) < 2**31:  # unsigned MULs, inline
        prod = (f"(int32_t){mulu16_avr(em)}({rd(t_hi, f't >> {k}', 'uint16_t')}, "
                f"{rd(t_lo, f't & {mask}', 'uint16_t')})")
    else:
        prod = f"(int32_t){rd(t_hi, f't >> {k}', 'int16_t')} * {rd(t_lo, f't & {mask}', 'int16_t')}"
    if (th.min() >= 0 and tl.min() >= 0 and node.type.dtype.bits == 16 and 0 <= shift <= 31
            and node.type.size <= 256
            and (int(th.max()) * int(tl.max()) + ((1 << (shift - 1)) if shift else 0)) >> shift <= 32767):
        name = em.sym(f"exp_{node.name}")
        fused = bool(fused_producer(em, node.name))
        em.helpers[name] = exp_asm(name, node.type.size, at, shift, fused)
        if fused:
            em.scratch(presum_sym(em, node.name), "uint32_t", 1)
        return [f"{name}({em.var(a)}, {em.var(node.name)}, {presum_sym(em, node.name) if fused else '0'}, {t_hi}, "
                f"{t_lo});"]
    pre = ["uint32_t sx = 0;"] if fused_producer(em, node.name) else []
    post = [f"{presum_sym(em, node.name)}[0] = sx;"] if pre else []
    return ["{", *pre, f"for (uint16_t i = 0; i < {node.type.size}; ++i) {{",
            f"    int16_t v = {em.at(a, 'i')};",
            *([f"    if (v < {lo_q}) v = {lo_q};"] if lo_q > -32768 else []),  # an edge bound cannot bind (and
            *([f"    if (v > {hi_q}) v = {hi_q};"] if hi_q < 32767 else []),  # would trip -Wtype-limits)
            # v - lo_q is in [0, hi_q - lo_q]: exact as uint16 even where the int16 difference wraps
            f"    const uint16_t t = (uint16_t)((uint16_t)((uint16_t)v - (uint16_t){lo_q}) + {rnd}u) >> {drop};",
            *store_presum(em, node, "i", prod, shift),
            "}", *post, "}"]


def matvec_at_ok(em: CEmitter, node: Node) -> bool:
    """matvec_at (row block k of a constant (n, rows, cols) by x, as Bonsai's node scores) on mac_asm."""
    m_name, _, x_name = node.inputs
    g = em.graph
    if g.op(m_name) != "const" or g.op(x_name) in ("const", "sparse_const") or int(node.attrs.get("shift", 0)):
        return False
    t, xt = g.type(m_name), g.type(x_name)
    if not (t.rank == 3 and t.dtype.bits in (8, 16) and xt.dtype.bits == 16 and xt.rank == 1
            and 0 < t.shape[2] < 65536 and t.shape[1] > 0):
        return False
    n, rows, cols = t.shape  # the image's elements (kernel_weights: 4 bytes of row constant per row) index in 16 bits
    return n * (rows * cols + (2 if t.dtype.bits == 16 else 4) * rows) <= 65535


def kernel_matvec_at(em: CEmitter, node: Node) -> list[str] | None:
    """Block k's rows on the dense kernel: every block's image (kernel_weights) one after the other in flash,
    the call's weight pointer moved to block k at run time; no libgcc multiply."""
    if not matvec_at_ok(em, node):
        return None
    m_name, k_name, x_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    n, rows, cols = M.shape
    wbits = g.type(m_name).dtype.bits
    bias = node.attrs.get("bias_q")  # each block's bias joins its rows' constants: no run-time cost
    extra = np.zeros((n, rows), np.int64) if bias is None else np.asarray(bias, np.int64).reshape(n, rows)
    out_shift = node_output_shift(g, node.name)
    direct = node.type.dtype.bits == 16 and out_shift in STORE_SHIFTS  # the kernel shifts, saturates and stores
    # the stores' rounding constant joins the sum where no sum can then pass int32 (|x| <= 2^15): subtracted
    # from v at the call (the image stays the same for every node reading it: a matrix shared by levels)
    rounded = direct and out_shift > 0 and int(
        (np.abs(M).sum(axis=2) * 32768 + np.abs(extra)).max()) + (1 << (out_shift - 1)) <= 2**31 - 1
    parts = [kernel_weights(M[k], wbits, extra[k]) for k in range(n)]
    stride = len(parts[0][0])  # n * stride < 2^16 (matvec_at_ok)
    layout = parts[0][1]
    wtype = "uint16_t" if wbits == 16 else "uint8_t"
    sym = em.add_const_array(em.sym(f"{m_name}_off"), np.concatenate([p[0] for p in parts]), wtype,
                             f"%{m_name}: {n} blocks of {rows}x{cols} + {1 << (wbits - 1)}, each as the dense "
                             "kernel stores a matrix")
    acc = em.sym("acc")
    if not direct:
        em.scratch(acc, "uint32_t", rows)
    # the fused chain (sigma's scale) in the stores too, where its loop costs more than the kernel copy it
    # may add (each post shift is its own kernel): from BLOCK rows
    post = chain_shift(em, node) if direct and rows >= BLOCK else None
    if post is not None and -15 < post <= 8:
        em.stored_heads.add(node.name)
    else:
        post = 0
    x = em.var(x_name)
    lines = ["{", f"    const uint16_t at = (uint16_t)((uint16_t){em.at(k_name, '0')} * {stride}u);"]
    readers = shared_x_readers(em, x_name, matvec_at_ok)
    shift = 15 if wbits == 16 else 7
    # the input clamp stored x + 2^15 and its sum for the node kernels (node_kernels_only)
    pre = g.op(x_name) == "clip" and fused_producer(em, x_name) == "matvec_at"
    if pre:
        total = [f"    uint32_t sx = {presum_sym(em, x_name)}[0];"]
    else:
        it = "uint8_t" if cols < 256 else "uint16_t"
        total = ["    uint32_t sx = 0;",
                 f"    for ({it} k = 0; k < {cols}; ++k) sx += (uint16_t)((uint16_t){x}[k] ^ 0x8000u);"]
    if len(readers) > 1:  # every node's W, V and theta read the same x: its sum is taken (and shifted) once
        widths = sorted({g.type(g.node(r).inputs[0]).dtype.bits for r in readers})
        memo = em.sym(f"sum_at_{x}")
        em.scratch(memo, "uint32_t", len(widths))
        if readers[0] == node.name:
            lines += total + [f"    {memo}[{i}] = sx << {b - 1};" for i, b in enumerate(widths)]
        lines += [f"    const uint32_t v = {memo}[{widths.index(wbits)}];"]
    else:
        lines += total + [f"    const uint32_t v = sx << {shift};"]
    # one call: the 5-row blocks, then the remainder's block (its constants and weights follow in flash)
    nr, nb, tail = (BLOCK, rows // BLOCK, rows % BLOCK) if rows >= BLOCK else (rows, 1, 0)
    name = em.sym(f"mac{nr}w{wbits}{'o' if pre else ''}_{cols}x{nb}" + (f"t{tail}" if tail else "")
                  + (f"s{out_shift}" if direct else "") + ("r" if rounded else "")
                  + (f"p{post}" if post > 0 else f"l{-post}" if post else ""))
    if name not in em.helpers:
        em.helpers[name] = mac_asm(name, nr, wbits, pre, cols, nb, out_shift if direct else None, tail=tail,
                                   post=post, rounded=rounded)
    base = layout[0].base - (4 if wbits == 8 else 2) * nr
    dest = em.var(node.name) if direct else acc
    v = f"v - {1 << (out_shift - 1)}u" if rounded else "v"
    lines.append(f"    {name}({sym} + at + {base}, (const int16_t *){x}, {dest}, {v});")
    if not direct:
        lines += [f"    for (uint8_t r = 0; r < {rows}; ++r)",
                  "        " + store_rs(em, node, "r", f"(int32_t){acc}[r]", out_shift)]
    return lines + ["}"]


def muls16_avr(em: CEmitter) -> str:
    """Name of an inline signed 16 x 16 -> 32 product (MUL, MULS, two MULSU: no libgcc call)."""
    name = em.sym("muls16")
    if name not in em.helpers:
        asm = "\\n\\t".join(["clr %[z]", "mul %A[a], %A[b]", "movw %A[r], r0", "muls %B[a], %B[b]", "movw %C[r], r0",
                               "mulsu %B[a], %A[b]", "sbc %D[r], %[z]", "add %B[r], r0", "adc %C[r], r1",
                               "adc %D[r], %[z]",
                               "mulsu %B[b], %A[a]", "sbc %D[r], %[z]", "add %B[r], r0", "adc %C[r], r1",
                               "adc %D[r], %[z]", "clr r1"])
        em.helpers[name] = (f"static inline __attribute__((always_inline)) int32_t {name}(int16_t a, int16_t b)\n"
                            "{\n    int32_t r;\n    uint8_t z;\n"
                            f"    __asm__(\"{asm}\" : [r] \"=&r\"(r), [z] \"=&r\"(z) : [a] \"a\"(a), [b] \"a\"(b));\n"
                            "    (void)z;\n    return r;\n}\n")
    return name


def kernel_mul(em: CEmitter, node: Node) -> list[str] | None:
    """Element-wise product of two int16 vectors (Bonsai's W z * tanh(V z)): an inline signed product; with the
    tanh computed in the same loop when it has no other use (c_fixed.tanh_of_mul)."""
    a, b = node.inputs
    g = em.graph
    if (node.type.rank != 1 or node.type.dtype.bits != 16 or any(g.op(v) in ("const", "sparse_const") for v in (a, b))
            or any(g.type(v).shape != node.type.shape or g.type(v).dtype.bits != 16 for v in (a, b))):
        return None
    k = g.type(a).dtype.scale + g.type(b).dtype.scale - node.type.dtype.scale
    if tanh_of_mul(em, node) is not None:
        def tanh_lines(em, tanh, final):
            return avr_tanh_lines(em, tanh, final) or tanh_lut_lines(em, tanh, final)
        return tanh_mul_loop(em, node, tanh_lines, lambda i: rs_value(
            em, node, f"{muls16_avr(em)}({em.at(a, i)}, {em.at(b, i)})", k), lambda add: sum16(em, add))
    return [f"for (uint16_t i = 0; i < {node.type.size}; ++i) "
            + store_rs(em, node, "i", f"{muls16_avr(em)}({em.var(a)}[i], {em.var(b)}[i])", k)]


def sum16(em: CEmitter, add: Node):
    """The path score's sum as one saturating 16-bit add (adds16_avr) when both operands and the sum have one
    scale (no alignment, no shift) and the sum heads no fused chain; else None."""

    g = em.graph
    a, b = add.inputs
    c, la, lb = align_shifts(g.type(a).dtype.scale, g.type(b).dtype.scale)
    if (la or lb or c != add.type.dtype.scale or add.name in g.analyses.fused
            or any(g.type(v).dtype.bits != 16 for v in (a, b, add.name))):
        return None
    return lambda i: f"{adds16_avr(em)}({em.at(a, i)}, {em.at(b, i)})"


def avr_tanh_lines(em: CEmitter, node: Node, final) -> list[str] | None:
    """Element i of tanh_lut (c_fixed's table with linear interpolation) in 16-bit arithmetic: the table
    rises, so y1 - y0 >= 0 and its product with the fraction is one unsigned 16 x 16 product (no libgcc
    call); ``final`` makes the last line from the value. None when the table or scales do not allow it."""
    (a,) = node.inputs
    at = node.attrs
    table = np.asarray(at["table"], np.int64)
    drop, top = int(at["drop_bits"]), int(at["in_max_q"])
    if (_bits(em, a) != 16 or node.type.rank != 1 or not 0 <= drop <= 15 or not 0 < top <= 65535
            or table.min(initial=0) < 0 or table.max(initial=0) > 32767 or np.any(np.diff(table) < 0)):
        return None
    sym = em.add_const_array(em.sym(f"{node.name}_tanh"), at["table"], "int16_t",
                             f"%{node.name}: tanh table, scale 2^-{at['table_scale']}")
    rd = em.target.read_const
    last = len(table) - 1
    k_out = at["table_scale"] - node.type.dtype.scale
    if 0 < k_out <= 15 and int(table.max(initial=0)) + (1 << (k_out - 1)) <= 32767:  # int16 arithmetic suffices
        out = f"{asr16_avr(em, k_out)}((int16_t)((int16_t)(v < 0 ? -y : y) + {1 << (k_out - 1)}))"
    else:
        out = shift_c(em, "(int32_t)(v < 0 ? -y : y)", k_out, bound=int(np.max(np.abs(table), initial=0)))
    head = [f"    const int16_t v = {em.at(a, 'i')};",
            "    const uint16_t mag = v < 0 ? (uint16_t)(0u - (uint16_t)v) : (uint16_t)v;",
            f"    const uint16_t q = mag < {top}u ? mag : {top}u;"]
    if drop == 0:  # one entry per input value: no interpolation
        return [*head, f"    const int16_t y = {rd(sym, 'q', 'int16_t')};", "    " + final(out)]
    if drop <= 8 and top << (8 - drop) <= 65535:
        # q 2^(8-drop): the index in the high byte, the fraction 2^(8-drop) f in the low one; then
        # (d f + 2^(drop-1)) >> drop = (d f 2^(8-drop) + 128) >> 8, a byte move (no 32-bit shift loop)
        split = [f"    const uint16_t qq = (uint16_t)(q << {8 - drop});",
                 "    const uint8_t t = (uint8_t)(qq >> 8), f = (uint8_t)qq;"]
        interp = f"{mulr8_avr(em)}((uint16_t)(y1 - y0), f)"
    elif drop >= 8:  # floor(floor(a / 2^8) / 2^(drop-8)) = floor(a / 2^drop) for a >= 0
        split = [f"    const uint16_t t = q >> {drop}, f = q & {(1 << drop) - 1}u;"]
        interp = (f"((uint16_t)(({mulu16_avr(em)}((uint16_t)(y1 - y0), f) + {1 << (drop - 1)}u) >> 8) "
                  f">> {drop - 8})")
    else:
        split = [f"    const uint16_t t = q >> {drop}, f = q & {(1 << drop) - 1}u;"]
        interp = f"(({mulu16_avr(em)}((uint16_t)(y1 - y0), f) + {1 << (drop - 1)}u) >> {drop})"
    if (top >> drop) + 1 <= last:  # t + 1 is always an entry: both from one pointer
        reads = [f"    const int16_t *tp = {sym} + t;", "    const int16_t y0 = (int16_t)pgm_read_word(tp);",
                 "    const int16_t y1 = (int16_t)pgm_read_word(tp + 1);"]
    else:
        reads = [f"    const int16_t y0 = {rd(sym, 't', 'int16_t')};",
                 f"    const int16_t y1 = {rd(sym, f'(t < {last} ? t + 1 : {last})', 'int16_t')};"]
    return [*head, *split, *reads,
            f"    const int16_t y = (int16_t)(y0 + (int16_t){interp});",
            "    " + final(out)]


def kernel_tanh_lut(em: CEmitter, node: Node) -> list[str] | None:
    """tanh_lut in 16-bit arithmetic (avr_tanh_lines); nothing when its product's loop computes it."""

    if fused_tanh(em, node):
        return None  # the shared entry says where it is computed
    lines = avr_tanh_lines(em, node, lambda value: store(em, node, "i", value))
    if lines is None:
        return None
    n = node.type.size
    return [f"for ({index_type(n)} i = 0; i < {n}; ++i) {{", *lines, "}"]


ON_READ_CHUNK = 32  # input features clamped per pass into the kernel's buffer (64 bytes of RAM)


def kernel_matvec_on_read(em: CEmitter, node: Node) -> list[str] | None:
    """A dense mat-vec of the input clamped on read (CEmitter.clamp_on_read: no RAM copy of the input): the
    clamp of ON_READ_CHUNK features at a time into a small buffer (stored x + 2^15, summed), then the
    mat-vec kernel over those columns of every block, accumulating (the first chunk starts from the row
    constants); acc - v and the rounding shift at the end. Exact as kernel_matvec (the same sums mod 2^32)."""
    a_name, x_name = node.inputs
    g = em.graph
    if (node.op != "matvec" or x_name != em.read_clamp or g.op(a_name) != "const" or int(node.attrs.get("shift", 0))
            or g.type(a_name).dtype.bits not in (8, 16) or not 0 < g.type(a_name).shape[1] < 65536):
        return None
    rows, cols = g.type(a_name).shape
    if 2 * min(ON_READ_CHUNK, cols) + 4 * rows >= 2 * cols:  # its buffers would take the copy's RAM: shared C
        return None
    A = int_matrix(g, a_name)
    wbits = g.type(a_name).dtype.bits
    image, layout = kernel_weights(A, wbits)
    wtype = "uint16_t" if wbits == 16 else "uint8_t"
    sym = em.add_const_array(em.sym(f"{a_name}_off"), image, wtype,
                             f"%{a_name}: {rows}x{cols} + {1 << (wbits - 1)}, per 5-row block: -2^15 * row sums "
                             "(32-bit), then the block column-major")
    acc, xb = em.sym("acc"), em.sym("xchunk")
    em.scratch(acc, "uint32_t", rows)
    ch = min(ON_READ_CHUNK, cols)
    em.scratch(xb, "int16_t", ch)
    clamp = em.clamp_function()
    x = em.var(g.inputs()[0])

    def helper(n: int, width: int, first: bool) -> str:
        name = em.sym(f"mac{n}w{wbits}o_{width}x1" + ("" if first else "a"))
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, True, width, 1, accumulate=not first)
        return name

    def chunk(c0: str, width: int, first: bool) -> list[str]:
        out = [f"for (uint8_t i = 0; i < {width}; ++i) {{",
               f"    const uint16_t u = (uint16_t){clamp}({x}[{c0} + i], {c0} + i) ^ 0x8000u;",
               f"    {xb}[i] = (int16_t)u;", "    sx += u;", "}"]
        for b in layout:
            n = b.count
            at = f"{b.base - (4 if wbits == 8 else 2) * n}" if first else f"{b.base} + (uint32_t){c0} * {n}"
            out.append(f"{helper(n, width, first)}({sym} + {at}, {xb}, {acc} + {b.first}, 0);")
        return out

    full, tail = divmod(cols - ch, ch)
    lines = ["{", "    uint32_t sx = 0;", *("    " + ln for ln in chunk("0", ch, True))]
    if full:
        lines += [f"    for (uint16_t c0 = {ch}; c0 < {ch * (full + 1)}; c0 += {ch}) {{",
                  *("        " + ln for ln in chunk("c0", ch, False)), "    }"]
    if tail:
        lines += ["    " + ln for ln in chunk(str(cols - tail), tail, False)]
    out_shift = node_output_shift(g, node.name)
    lines += [f"    sx <<= {15 if wbits == 16 else 7};",
              f"    for (uint8_t r = 0; r < {rows}; ++r)",
              "        " + store_rs(em, node, "r", f"(int32_t)({acc}[r] - sx)", out_shift), "}"]
    return lines
