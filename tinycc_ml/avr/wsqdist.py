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
from tinycc_ml.codegen.c_fixed import store
from tinycc_ml.codegen.kernels import KernelCost
from tinycc_ml.ir.ops.linalg import wsqdist_product_shift, wsqdist_terms
from tinycc_ml.ir.ops.registry import node_output_shift

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


def _pow2_shift(s: int) -> tuple[list[str], list[str]]:
    """rshift(x, s) (x in r20:r21, 0 <= s <= 7) as 24 bits: the product by a power of two 2^(k - s)."""
    lines = ["mov r24, r21", "lsl r24", "sbc r24, r24"]
    for _ in range(s):
        lines += ["asr r21", "ror r20"]
    return lines + (["adc r20, r2", "adc r21, r2", "adc r24, r2"] if s else []), ["r20", "r21", "r24"]


def _final(out_shift: int) -> tuple[list[str], int]:
    """Lines storing min(rshift(S, out_shift), 32767) to Y+ for the class's S = A + C 2^8 + B 2^16 (A r3..r5,
    B r6..r8 unsigned, C r9..r11 signed; S >= 0 below 2^40), and their cycles."""
    s = ["r16", "r17", "r18", "r19", "r20"]
    lines = ["mov r16, r3", "mov r17, r4", "mov r18, r5", "clr r19", "clr r20",
             "mov r25, r11", "lsl r25", "sbc r25, r25",
             "add r17, r9", "adc r18, r10", "adc r19, r11", "adc r20, r25",
             "add r18, r6", "adc r19, r7", "adc r20, r8"]
    b, bits = divmod(out_shift - 1, 8)  # floor(S / 2^(out_shift - 1)), then (that + 1) >> 1
    regs = s[b:]
    for _ in range(bits):
        lines += [f"lsr {regs[-1]}", *[f"ror {r}" for r in reversed(regs[:-1])]]
    lines += [f"subi {regs[0]}, 0xFF", *[f"sbci {r}, 0xFF" for r in regs[1:]]]
    lines += [f"lsr {regs[-1]}", *[f"ror {r}" for r in reversed(regs[:-1])]]
    check = [f"mov r25, {regs[2]}", *[f"or r25, {r}" for r in regs[3:]]] if len(regs) > 2 else ["clr r25"]
    lines += check + [f"sbrc {regs[1]}, 7", "ser r25", "tst r25", "breq 6f", f"ldi {regs[0]}, 0xFF",
                      f"ldi {regs[1]}, 0x7F", "6:", f"st Y+, {regs[0]}", f"st Y+, {regs[1]}"]
    cycles = 15 + (bits + 2) * len(regs) + len(check) + 2 + 1 + 1 + 4 + 1  # sbrc/ser and breq: one way
    return lines, cycles


def wsqdist_asm(name: str, k: int, out_shift: int, pow2: int | None) -> str:
    """void name(const uint8_t *stream /*flash*/, const int16_t *x, int16_t *out, uint8_t classes): per class
    (stream: its term count, then per term the bytes to its x[j] from the last read, and w, t, int16
    little-endian; with ``pow2`` every w is 2^(k - pow2): not stored, the product a shift of x by pow2)
    out[c] = min(rshift(sum of sat16(rshift(w x[j], k) - t)^2, out_shift), 32767). The squares as
    q_l^2 + 2 q_h q_l 2^8 + q_h^2 2^16 (q_h signed) in three 24-bit sums (D <= 128 terms)."""
    saved = [f"r{r}" for r in range(2, 18)] + ["r28", "r29"]
    b = asm_prologue(name, saved)
    b += ["movw r30, r24", "movw r12, r22", "movw r28, r20", "mov r14, r18", "clr r2",
          "1:", *[f"clr r{r}" for r in range(3, 12)], "movw r26, r12", "lpm r15, Z+", "tst r15", "brne 2f",
          "rjmp 5f",
          "2:", "lpm r24, Z+", "add r26, r24", "adc r27, r2", "ld r20, X+", "ld r21, X+"]
    if pow2 is None:
        b += ["lpm r22, Z+", "lpm r23, Z+",
              # w x, signed 16 x 16 -> 32 in r16..r19 (Atmel AVR201)
              "muls r21, r23", "movw r18, r0", "mul r20, r22", "movw r16, r0",
              "mulsu r21, r22", "sbc r19, r2", "add r17, r0", "adc r18, r1", "adc r19, r2",
              "mulsu r23, r20", "sbc r19, r2", "add r17, r0", "adc r18, r1", "adc r19, r2"]
        lines, q = _shift(k)
    else:
        lines, q = _pow2_shift(pow2)
    b += lines
    # e = q - t in 24 bits (t's sign: one more when negative)
    b += ["lpm r22, Z+", "lpm r23, Z+", f"sub {q[0]}, r22", f"sbc {q[1]}, r23", f"sbc {q[2]}, r2", "sbrc r23, 7",
          f"inc {q[2]}",
          # in int16 when the top byte is the sign of bit 15
          f"mov r25, {q[1]}", "lsl r25", "sbc r25, r25", f"cpse r25, {q[2]}", "rjmp 7f",
          "3:", f"mul {q[0]}, {q[0]}", "add r3, r0", "adc r4, r1", "adc r5, r2",
          f"muls {q[1]}, {q[1]}", "add r6, r0", "adc r7, r1", "adc r8, r2",
          f"mulsu {q[1]}, {q[0]}", "lsl r0", "rol r1", "sbc r25, r25", "add r9, r0", "adc r10, r1", "adc r11, r25",
          "dec r15", "breq 5f", "rjmp 2b"]
    final, _ = _final(out_shift)
    b += ["5:", *final, "dec r14", "breq 9f", "rjmp 1b",
          # saturation: e beyond int16 -> -32768 or 32767 by its sign (top byte)
          "7:", f"ldi {q[0]}, 0xFF", f"ldi {q[1]}, 0x7F", f"sbrs {q[2]}, 7", "rjmp 3b",
          f"ldi {q[0]}, 0x00", f"ldi {q[1]}, 0x80", "rjmp 3b",
          "9:", "clr r1"]
    b += [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return f"void {name}(const uint8_t *stream, const int16_t *x, int16_t *out, uint8_t classes);\n" \
           f"__asm__(\n{asm_words(b)});\n"


TERM_CYCLES = 9 + 11 + 5 + 18 + 4  # x, t, the saturation check, the square, the loop
PRODUCT_CYCLES = 6 + 18  # w and w x
CLASS_CYCLES = 16 + 4  # the class's start and its loop
CALL_CYCLES = 2 * 18 * 2 + 5 + 1 + 4 + 4 + 12  # pushes and pops, set-up, call and ret, C's arguments


def _pow2(W: np.ndarray, cols: list[np.ndarray], k: int) -> int | None:
    """s when every stored weight is 2^(k - s) with 0 <= s <= 7 (the kernel then shifts x), else None."""
    stored = np.concatenate([W[c, js] for c, js in enumerate(cols)]) if cols else np.zeros(0)
    if stored.size == 0 or np.any(stored != stored[0]) or stored[0] <= 0:
        return None
    a = int(stored[0]).bit_length() - 1
    return k - a if 1 << a == int(stored[0]) and 0 <= k - a <= 7 else None


def _plan(em, node):
    """(terms per class, out shift, k, pow2) when the kernel can run the node, else None."""
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
    W, T = g.node(w_name).attrs["value"].astype(np.int64), g.node(t_name).attrs["value"]
    cols = wsqdist_terms(W, T)
    return cols, out_shift, k, _pow2(W, cols, k)


def avr_wsqdist_ok(em, node) -> bool:
    return _plan(em, node) is not None


def avr_wsqdist_cost(em, node) -> KernelCost:
    """Cycles counted from the kernel's instructions (the rare saturated term not counted; simavr agrees within
    a few percent: tests/backends/test_wsqdist.py), flash of its stream and code."""
    plan = _plan(em, node)
    if plan is None:
        return KernelCost(unavailable="no AVR wsqdist kernel for these types")
    cols, out_shift, k, pow2 = plan
    terms = sum(len(c) for c in cols)
    per_term = TERM_CYCLES + (PRODUCT_CYCLES + shift_cycles(k) if pow2 is None else 3 + 2 * pow2 + 3 * (pow2 > 0))
    per_class = CLASS_CYCLES + _final(out_shift)[1]
    # a class without terms skips the loop: its start costs 1 more (the rjmp), no term loop exit
    code = 2 * (60 + len(_final(out_shift)[0]) + (20 if pow2 is None else 0))
    return KernelCost(round(CALL_CYCLES + per_class * len(cols) + per_term * terms - 2 * len(cols)),
                      (3 if pow2 is not None else 5) * terms + len(cols) + code)


def avr_wsqdist(em, node) -> list[str] | None:
    plan = _plan(em, node)
    if plan is None:
        return None
    cols, out_shift, k, pow2 = plan
    g = em.graph
    x_name, w_name, t_name = node.inputs
    W = g.node(w_name).attrs["value"].astype(np.int64)
    T = g.node(t_name).attrs["value"].astype(np.int64)
    stream = []
    for c, js in enumerate(cols):
        stream.append(len(js))
        at = 0  # the byte offset of X: each term reads x[j] with X+ twice
        for j in js:
            w, t = int(W[c, j]) & 0xFFFF, int(T[c, j]) & 0xFFFF
            stream += [2 * int(j) - at] + ([] if pow2 is not None else [w & 0xFF, w >> 8]) + [t & 0xFF, t >> 8]
            at = 2 * int(j) + 2
    sym = em.add_const_array(em.sym(f"{node.name}_terms"), np.asarray(stream, np.uint8), "uint8_t",
                             f"%{node.name}: per class its term count, per term the bytes to its x, "
                             + ("t" if pow2 is not None else "w, t") + " (int16 little-endian)")
    name = em.sym(f"wsqdist_k{k}_{out_shift}" + (f"_p{pow2}" if pow2 is not None else ""))
    if name not in em.helpers:
        em.helpers[name] = wsqdist_asm(name, k, out_shift, pow2)
    out = em.sym("wout")
    C = len(cols)
    em.scratch(out, "int16_t", C)
    return ["{", f"    {name}({sym}, {em.var(x_name)}, {out}, {C});",
            f"    for (uint8_t c = 0; c < {C}; ++c) " + store(em, node, "c", f"(int32_t){out}[c]"), "}"]
