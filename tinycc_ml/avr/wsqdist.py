"""GaussianNB's weighted squared distances (wsqdist) on the ATmega328P: one asm pass over every class's terms.

avr-gcc calls libgcc's __mulhisi3 for both products of a term (w x, then the square): about 200 cycles a term.
The kernel reads one flash stream: per class a term count, per term the bytes from the last x read to its
x[j], then w and t (LPM Z+; no w where every weight is the same power of two: the product is a shift of x).
Per term: w x on MUL/MULS/MULSU (16 x 16 -> 32), the rounding shift by k to the terms' scale (a byte move
where k is 7 or 0 mod 8: the AVR's TargetAttributes.byte_shift_bits lets scale choice prefer those), t
subtracted in 24 bits, the 16-bit saturation (out of line), the signed square as three 24-bit sums
(q_l^2, 2 q_h q_l, q_h^2: D <= 128 terms fit), 83 cycles a term at k = 15. Per class the sums are combined
into 40 bits, rounded to the result's scale and saturated to 32767 in asm; C stores them through the node's
fused chain. The cost model counts the instructions (within 0.5% of simavr).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.avr.kernels import asm_prologue, asm_words
from tinycc_ml.target import (
    KernelCost,
    node_output_shift,
    rshift,
    storage_clip_bounds,
    store,
    wsqdist_product_shift,
    wsqdist_terms,
)

MAX_FEATURES = 128  # a byte holds the offset to the next term's feature (bytes)
P = ["r16", "r17", "r18", "r19"]  # the product w x


def shift_cycles(k: int) -> int:
    """Cycles of the rounding shift by k (8 <= k <= 22) of a product (_shift), its rounding adc included."""
    m, n = divmod(k, 8)
    ext = 3 if m + (n == 7) == 2 else 0
    if n == 0:
        return ext + 1 + 3
    if n == 7:
        return ext + (4 - m) + 1 + 3
    return ext + n * (4 - m) + 3


def _shift(k: int) -> tuple[list[str], list[str]]:
    """Lines leaving rshift(p, k) (p in r16..r19, |p| < 2^30, 8 <= k <= 22: |q| <= 2^22) as 24 bits, and those
    3 registers (low first; r24 the sign byte where p has too few), the rounding bit (bit k - 1) added."""
    m, n = divmod(k, 8)
    lines, top = [], 1 if n == 7 else 0  # a left shift by 1 moves the result a byte up
    q = P[m + top:]
    if len(q) < 3:  # asr and lsl keep the sign: take it first
        lines += ["mov r24, r19", "lsl r24", "sbc r24, r24"]
        q = q + ["r24"]
    if n == 0:  # bit 7 of the byte below
        lines += [f"lsl {P[m - 1]}"]
    elif n == 7:  # p << 1 (bits 31 and 30 are both the sign), then bit 7 of the byte below the result
        lines += [f"lsl {P[m]}", *[f"rol {r}" for r in P[m + 1:]], f"lsl {P[m]}"]
    else:  # the last bit out of byte m is bit k - 1
        for _ in range(n):
            lines += ["asr r19", *[f"ror {r}" for r in reversed(P[m:3])]]
    return lines + [f"adc {r}, r2" for r in q], q


SHIFTS_LINES = ["lpm r25, Z+", "mov r24, r21", "lsl r24", "sbc r24, r24", "clc", "tst r25", "breq 8f",
                "4:", "asr r21", "ror r20", "dec r25", "brne 4b", "8:", "adc r20, r2", "adc r21, r2", "adc r24, r2"]


def shifts_cycles(s: int) -> int:
    """Cycles of SHIFTS_LINES for a term whose product is a shift of x by s (its count in the stream)."""
    return 3 + 3 + 1 + 1 + (1 + 5 * s - 1 if s else 2) + 3


def _final(out_shift: int) -> tuple[list[str], int]:
    """Lines storing min(rshift(S, out_shift), 32767) to Y+ for the class's S = A + C 2^8 + B 2^16 (A r3..r5,
    B r6..r8 unsigned, C r9..r11 signed; S >= 0 below 2^37), and their cycles."""
    s = ["r16", "r17", "r18", "r19", "r20"]
    lines = ["mov r16, r3", "mov r17, r4", "mov r18, r5", "clr r19", "clr r20",
             "mov r25, r11", "lsl r25", "sbc r25, r25",
             "add r17, r9", "adc r18, r10", "adc r19, r11", "adc r20, r25",
             "add r18, r6", "adc r19, r7", "adc r20, r8"]
    b, bits = divmod(out_shift - 1, 8)  # floor(S / 2^(out_shift - 1)), then (that + 1) >> 1
    if bits >= 5 and b < 4:  # S << (8 - bits) (below 2^40), from the next byte up
        for _ in range(8 - bits):
            lines += ["lsl r16", *[f"rol {r}" for r in s[1:]]]
        shifted, regs = (8 - bits) * len(s), s[b + 1:]
    else:
        regs = s[b:]
        for _ in range(bits):
            lines += [f"lsr {regs[-1]}", *[f"ror {r}" for r in reversed(regs[:-1])]]
        shifted = bits * len(regs)
    lines += [f"subi {regs[0]}, 0xFF", *[f"sbci {r}, 0xFF" for r in regs[1:]]]
    lines += [f"lsr {regs[-1]}", *[f"ror {r}" for r in reversed(regs[:-1])]]
    check = [f"mov r25, {regs[2]}", *[f"or r25, {r}" for r in regs[3:]]] if len(regs) > 2 else ["clr r25"]
    lines += check + [f"sbrc {regs[1]}, 7", "ser r25", "tst r25", "breq 6f", f"ldi {regs[0]}, 0xFF",
                      f"ldi {regs[1]}, 0x7F", "6:", f"st Y+, {regs[0]}", f"st Y+, {regs[1]}"]
    cycles = 15 + shifted + 2 * len(regs) + len(check) + 2 + 1 + 1 + 4 + 1  # sbrc/ser and breq: one way
    return lines, cycles


PRODUCT = ["lpm r22, Z+", "lpm r23, Z+",
           # w x, signed 16 x 16 -> 32 in r16..r19 (Atmel AVR201)
           "muls r21, r23", "movw r18, r0", "mul r20, r22", "movw r16, r0",
           "mulsu r21, r22", "sbc r19, r2", "add r17, r0", "adc r18, r1", "adc r19, r2",
           "mulsu r23, r20", "sbc r19, r2", "add r17, r0", "adc r18, r1", "adc r19, r2"]


def _term(k: int, shifts: bool, checked: bool) -> tuple[list[str], list[str], int]:
    """The term's lines from its x (X, r20:r21 loaded) to its square summed, the registers of q, and the
    term's fixed cycles (without a shift loop's, without the loop's branch)."""
    if shifts:
        lines, q, cycles = list(SHIFTS_LINES), ["r20", "r21", "r24"], 0
    else:
        shift, q = _shift(k)
        lines, cycles = PRODUCT + shift, 6 + 18 + shift_cycles(k)
    # e = q - t in 24 bits (t's sign: one more when negative)
    lines += ["lpm r22, Z+", "lpm r23, Z+", f"sub {q[0]}, r22", f"sbc {q[1]}, r23", f"sbc {q[2]}, r2",
              "sbrc r23, 7", f"inc {q[2]}"]
    if checked:  # in int16 when the top byte is the sign of bit 15
        lines += [f"mov r25, {q[1]}", "lsl r25", "sbc r25, r25", f"cpse r25, {q[2]}", "rjmp 7f"]
    lines += ["3:", f"mul {q[0]}, {q[0]}", "add r3, r0", "adc r4, r1", "adc r5, r2",
              f"muls {q[1]}, {q[1]}", "add r6, r0", "adc r7, r1", "adc r8, r2",
              f"mulsu {q[1]}, {q[0]}", "lsl r0", "rol r1", "sbc r25, r25", "add r9, r0", "adc r10, r1", "adc r11, r25"]
    return lines, q, cycles + 9 + 11 + (5 if checked else 0) + 18


def _words(lines: list[str]) -> int:
    return sum(1 for ln in lines if not ln.endswith(":"))


X_LINES = ["2:", "lpm r24, Z+", "add r26, r24", "adc r27, r2", "ld r20, X+", "ld r21, X+"]


def _short_loop(k: int, shifts: bool, checked: bool) -> bool:
    """The term loop's back branch reaches (brne: 63 words back)."""
    return _words(X_LINES + _term(k, shifts, checked)[0]) + 2 <= 63


def wsqdist_asm(name: str, k: int, out_shift: int, shifts: bool, checked: bool) -> str:
    """void name(const uint8_t *stream /*flash*/, const int16_t *x, int16_t *out, uint8_t classes): per class
    (stream: its term count, then per term the bytes to its x[j] from the last read, then w (int16
    little-endian) or, with ``shifts`` (every w a power of two 2^(k - s)), s; then t) out[c] =
    min(rshift(sum of sat16(rshift(w x[j], k) - t)^2, out_shift), 32767). Without ``checked`` no term can leave
    int16 (proven for x's range): no saturation. The squares as q_l^2 + 2 q_h q_l 2^8 + q_h^2 2^16 (q_h
    signed) in three 24-bit sums (D <= 128 terms)."""
    saved = [f"r{r}" for r in range(2, 18)] + ["r28", "r29"]
    term, q, _ = _term(k, shifts, checked)
    back = ["dec r15", "brne 2b"] if _short_loop(k, shifts, checked) else ["dec r15", "breq 5f", "rjmp 2b"]
    b = asm_prologue(name, saved)
    b += ["movw r30, r24", "movw r12, r22", "movw r28, r20", "mov r14, r18", "clr r2",
          "1:", *[f"clr r{r}" for r in range(3, 12)], "movw r26, r12", "lpm r15, Z+", "tst r15", "brne 2f",
          "rjmp 5f", *X_LINES, *term, *back]
    final, _ = _final(out_shift)
    b += ["5:", *final, "dec r14", "breq 9f", "rjmp 1b"]
    if checked:  # saturation: e beyond int16 -> -32768 or 32767 by its sign (top byte)
        b += ["7:", f"ldi {q[0]}, 0xFF", f"ldi {q[1]}, 0x7F", f"sbrs {q[2]}, 7", "rjmp 3b",
              f"ldi {q[0]}, 0x00", f"ldi {q[1]}, 0x80", "rjmp 3b"]
    b += ["9:", "clr r1"]
    b += [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return f"void {name}(const uint8_t *stream, const int16_t *x, int16_t *out, uint8_t classes);\n" \
           f"__asm__(\n{asm_words(b)});\n"


CLASS_CYCLES = 16 + 4  # the class's start and its loop
CALL_CYCLES = 2 * 18 * 2 + 5 + 1 + 4 + 4 + 12  # pushes and pops, set-up, call and ret, C's arguments


def _shift_counts(W: np.ndarray, cols: list[np.ndarray], k: int) -> np.ndarray | None:
    """Per stored term (class after class) s with w = 2^(k - s), 0 <= s <= 7, when every weight is such a power
    of two (GaussianNB's hard features: sqrt(v0 / var) = 1 at each feature's input scale), else None."""
    stored = np.concatenate([W[c, js] for c, js in enumerate(cols)]) if cols else np.zeros(0, np.int64)
    if stored.size == 0 or np.any(stored <= 0) or np.any(stored & (stored - 1)):
        return None
    s = k - np.floor(np.log2(stored)).astype(np.int64)
    return s if np.all((0 <= s) & (s <= 7)) else None


def _checked(em, node, W, T, k: int) -> bool:
    """Whether a term can leave int16: x's values are its clip's (the input clamp) when it is one, else any
    int16; the term is monotone in x, so the range's ends decide."""
    g = em.graph
    x_name = node.inputs[0]
    lo, hi = -(2**15), 2**15 - 1
    if g.op(x_name) == "clip":
        src = g.node(x_name)
        bounds = storage_clip_bounds(src.attrs["lo"], src.attrs["hi"], g.type(src.inputs[0]).dtype)
        if bounds is not None and np.ndim(bounds[0]) == 0 and g.type(src.inputs[0]).dtype.scale == \
                g.type(x_name).dtype.scale:
            lo, hi = int(bounds[0]), int(bounds[1])
    ends = [np.abs(rshift(W * v, k) - T) for v in (lo, hi)]
    return bool(np.max(np.maximum(*ends), initial=0) > 2**15 - 1)


def _plan(em, node):
    """(terms per class, out shift, k, per-term shifts or None, checked) when the kernel can run the node."""
    g = em.graph
    x_name, w_name, t_name = node.inputs
    if (g.op(x_name) in ("const", "sparse_const") or g.op(w_name) != "const" or g.op(t_name) != "const"
            or g.type(x_name).size > MAX_FEATURES or g.type(node.name).dtype.bits != 16
            or g.type(w_name).dtype.bits != 16 or g.type(x_name).dtype.bits != 16 or node.type.size > 255):
        return None
    k = wsqdist_product_shift([g.type(i) for i in node.inputs])
    out_shift = node_output_shift(g, node.name)
    if not 1 <= out_shift <= 39 or not 8 <= k <= 22:
        return None
    W, T = g.node(w_name).attrs["value"].astype(np.int64), g.node(t_name).attrs["value"].astype(np.int64)
    cols = wsqdist_terms(W, T)
    return cols, out_shift, k, _shift_counts(W, cols, k), _checked(em, node, W, T, k)


def avr_wsqdist_ok(em, node) -> bool:
    return _plan(em, node) is not None


def avr_wsqdist_cost(em, node) -> KernelCost:
    """Cycles counted from the kernel's instructions (the rare saturated term not counted; simavr agrees within
    1%: benchmarks/naive_bayes_cycles.py, tests/backends/test_wsqdist.py), flash of its stream and code."""
    plan = _plan(em, node)
    if plan is None:
        return KernelCost(unavailable="no AVR wsqdist kernel for these types")
    cols, out_shift, k, shifts, checked = plan
    terms = sum(len(c) for c in cols)
    lines, _, fixed = _term(k, shifts is not None, checked)
    loop = 3 if _short_loop(k, shifts is not None, checked) else 4
    work = (fixed + loop) * terms + (sum(shifts_cycles(int(s)) for s in shifts) if shifts is not None else 0)
    final, final_cycles = _final(out_shift)
    # the last term of a class: its loop's exit costs one cycle less than a taken branch (brne) or the same (breq)
    exits = sum(1 for c in cols if len(c)) * (1 if loop == 3 else 2)
    empty = sum(1 for c in cols if not len(c))  # brne not taken, rjmp 5f: one more
    cycles = CALL_CYCLES + (CLASS_CYCLES + final_cycles) * len(cols) + work - exits + empty
    code = 2 * (40 + _words(lines) + len(final))
    return KernelCost(round(cycles), (3 if shifts is not None else 4) * terms + terms + len(cols) + code)


def avr_wsqdist(em, node) -> list[str] | None:
    plan = _plan(em, node)
    if plan is None:
        return None
    cols, out_shift, k, shifts, checked = plan
    g = em.graph
    x_name, w_name, t_name = node.inputs
    W = g.node(w_name).attrs["value"].astype(np.int64)
    T = g.node(t_name).attrs["value"].astype(np.int64)
    stream, n = [], 0
    for c, js in enumerate(cols):
        stream.append(len(js))
        at = 0  # the byte offset of X: each term reads x[j] with X+ twice
        for j in js:
            w, t = int(W[c, j]) & 0xFFFF, int(T[c, j]) & 0xFFFF
            stream += [2 * int(j) - at] + ([int(shifts[n])] if shifts is not None else [w & 0xFF, w >> 8]) \
                + [t & 0xFF, t >> 8]
            at, n = 2 * int(j) + 2, n + 1
    sym = em.add_const_array(em.sym(f"{node.name}_terms"), np.asarray(stream, np.uint8), "uint8_t",
                             f"%{node.name}: per class its term count, per term the bytes to its x, "
                             + ("s (w = 2^(k - s)), t" if shifts is not None else "w, t") + " (int16 little-endian)")
    name = em.sym(f"wsqdist_k{k}_{out_shift}" + ("s" if shifts is not None else "") + ("c" if checked else ""))
    if name not in em.helpers:
        em.helpers[name] = wsqdist_asm(name, k, out_shift, shifts is not None, checked)
    out = em.sym("wout")
    C = len(cols)
    em.scratch(out, "int16_t", C)
    return ["{", f"    {name}({sym}, {em.var(x_name)}, {out}, {C});",
            f"    for (uint8_t c = 0; c < {C}; ++c) " + store(em, node, "c", f"(int32_t){out}[c]"), "}"]
