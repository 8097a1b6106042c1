"""GaussianNB's weighted squared distances (wsqdist) on the ATmega328P: one asm pass over every class's terms.

avr-gcc calls libgcc's __mulhisi3 for both products of a term (w x, then the square): about 200 cycles a term.
The kernel reads one flash stream, per class a term count, per term the feature's byte offset and w, t
(5 bytes, LPM Z+), and per term: w x on MUL/MULS/MULSU (16 x 16 -> 32), the rounding shift by k to the terms'
scale, t subtracted in 24 bits, the 16-bit saturation (out of line), |e|^2 on three unsigned MULs into a
40-bit sum (D <= 128 squares below 2^30 fit). C then rounds each class's sum to the result's scale
(output shift >= 8: from its top 32 bits) and stores it through the node's fused chain.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.avr.kernels import asm_prologue, asm_words
from tinycc_ml.codegen.c_fixed import store
from tinycc_ml.codegen.kernels import KernelCost
from tinycc_ml.ir.ops.linalg import wsqdist_product_shift, wsqdist_terms
from tinycc_ml.ir.ops.registry import node_output_shift

MAX_FEATURES = 128  # a byte holds the feature's byte offset
# cycles, fitted on simavr runs (benchmarks/naive_bayes_cycles.py): per term at shift k (the shift's part
# below), per class (its count, the 40-bit store and C's rounding), per call
AVR_WSQDIST = {"term": 77.0, "class": 60.0, "call": 60.0}


def shift_cycles(k: int) -> int:
    """Cycles of the rounding shift by k (8 <= k <= 22) in the kernel's term (see _shift)."""
    m, n = divmod(k, 8)
    ext = 3 if m == 2 else 0
    if n == 0:
        return ext + 1 + 3
    if n == 7:
        return ext + (4 - m) + 1 + 3
    return ext + n * (4 - m) + 3


def _shift(k: int) -> tuple[list[str], list[str]]:
    """Lines leaving rshift(p, k) (p in r22..r25, |p| <= 2^30, 8 <= k <= 22: |q| <= 2^22) as 24 bits, and
    those 3 registers (low first; r19 the sign byte where p has too few); the adc lines after them add the
    rounding bit (bit k - 1) from the carry."""
    p = ["r22", "r23", "r24", "r25"]
    m, n = divmod(k, 8)
    lines, top = [], 1 if n == 7 else 0  # a left shift by 1 moves the result a byte up
    q = p[m + top:]
    if len(q) < 3:  # asr and lsl keep the sign: take it first
        lines += ["mov r19, r25", "lsl r19", "sbc r19, r19"]
        q = q + ["r19"] * (3 - len(q))
    if n == 0:
        lines += [f"lsl {p[m - 1]}"]
    elif n == 7:  # p << 1 (bits 31 and 30 are both the sign), then bit 7 of the byte below the result
        lines += [f"lsl {p[m]}", *[f"rol {r}" for r in p[m + 1:]], f"lsl {p[m]}"]
    else:  # the last bit out of byte m is bit k - 1
        for _ in range(n):
            lines += [f"asr {p[3]}", *[f"ror {r}" for r in reversed(p[m:3])]]
    return lines, q


def wsqdist_asm(name: str, k: int) -> str:
    """void name(const uint8_t *stream /*flash*/, const int16_t *x, uint8_t *acc, uint8_t classes): per class
    (stream: its term count, then per term 2 j, w, t as bytes, int16 little-endian) acc[5 c..5 c + 4] = the
    40-bit sum of sat16(rshift(w x[j], k) - t)^2."""
    saved = ["r2", "r3", "r4", "r5", "r6", "r7", "r14", "r15", "r16", "r17", "r28", "r29"]
    b = asm_prologue(name, saved)
    b += ["movw r30, r24", "movw r14, r22", "movw r28, r20", "mov r17, r18", "clr r2",
          "1:", "clr r3", "clr r4", "clr r5", "clr r6", "clr r7", "lpm r16, Z+", "tst r16", "brne 2f", "rjmp 5f",
          "2:", "lpm r18, Z+", "movw r26, r14", "add r26, r18", "adc r27, r2", "ld r18, X+", "ld r19, X",
          "lpm r20, Z+", "lpm r21, Z+",
          # w x, signed 16 x 16 -> 32 in r22..r25
          "muls r19, r21", "movw r24, r0", "mul r18, r20", "movw r22, r0",
          "mulsu r19, r20", "sbc r25, r2", "add r23, r0", "adc r24, r1", "adc r25, r2",
          "mulsu r21, r18", "sbc r25, r2", "add r23, r0", "adc r24, r1", "adc r25, r2"]
    lines, q = _shift(k)
    b += lines + [f"adc {q[0]}, r2", f"adc {q[1]}, r2", f"adc {q[2]}, r2"]
    # e = q - t in 24 bits (t sign-extended into r18)
    b += ["lpm r20, Z+", "lpm r21, Z+", "mov r18, r21", "lsl r18", "sbc r18, r18",
          f"sub {q[0]}, r20", f"sbc {q[1]}, r21", f"sbc {q[2]}, r18",
          # in int16 when the top byte is the sign of bit 15
          f"mov r18, {q[1]}", "lsl r18", "sbc r18, r18", f"cpse r18, {q[2]}", "rjmp 7f",
          "3:", f"sbrs {q[1]}, 7", "rjmp 4f", f"com {q[1]}", f"neg {q[0]}", f"sbci {q[1]}, 0xFF",
          # |e|^2 = l^2 + 2 l h 2^8 + h^2 2^16 (2 l h < 2^16: |e| <= 2^15)
          "4:", f"mul {q[0]}, {q[0]}", "add r3, r0", "adc r4, r1", "adc r5, r2", "adc r6, r2", "adc r7, r2",
          f"mul {q[1]}, {q[1]}", "add r5, r0", "adc r6, r1", "adc r7, r2",
          f"mul {q[0]}, {q[1]}", "lsl r0", "rol r1", "add r4, r0", "adc r5, r1", "adc r6, r2", "adc r7, r2",
          "dec r16", "breq 5f", "rjmp 2b",
          "5:", "st Y+, r3", "st Y+, r4", "st Y+, r5", "st Y+, r6", "st Y+, r7", "dec r17", "breq 9f", "rjmp 1b",
          # saturation: e beyond int16 -> -32768 or 32767 by its sign (top byte)
          "7:", f"ldi {q[0]}, 0xFF", f"ldi {q[1]}, 0x7F", f"sbrs {q[2]}, 7", "rjmp 3b",
          f"ldi {q[0]}, 0x00", f"ldi {q[1]}, 0x80", "rjmp 3b",
          "9:", "clr r1"]
    b += [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return f"void {name}(const uint8_t *stream, const int16_t *x, uint8_t *acc, uint8_t classes);\n" \
           f"__asm__(\n{asm_words(b)});\n"


def _plan(em, node):
    """(terms per class, out shift, k) when the kernel can run the node, else None."""
    g = em.graph
    x_name, w_name, t_name = node.inputs
    if (g.op(x_name) in ("const", "sparse_const") or g.op(w_name) != "const" or g.op(t_name) != "const"
            or g.type(x_name).size > MAX_FEATURES or g.type(node.name).dtype.bits != 16
            or g.type(w_name).dtype.bits != 16 or g.type(x_name).dtype.bits != 16 or node.type.size > 255):
        return None
    k = wsqdist_product_shift([g.type(i) for i in node.inputs])
    out_shift = node_output_shift(g, node.name)
    if out_shift < 8 or not 8 <= k <= 22:
        return None
    W, T = g.node(w_name).attrs["value"], g.node(t_name).attrs["value"]
    return wsqdist_terms(W, T), out_shift, k


def avr_wsqdist_ok(em, node) -> bool:
    return _plan(em, node) is not None


def avr_wsqdist_cost(em, node) -> KernelCost:
    plan = _plan(em, node)
    if plan is None:
        return KernelCost(unavailable="no AVR wsqdist kernel for these types")
    cols, _, k = plan
    terms = sum(len(c) for c in cols)
    c = AVR_WSQDIST
    return KernelCost(round(c["call"] + c["class"] * len(cols) + (c["term"] + shift_cycles(k)) * terms),
                      5 * terms + len(cols) + 400)


def avr_wsqdist(em, node) -> list[str] | None:
    plan = _plan(em, node)
    if plan is None:
        return None
    cols, out_shift, k = plan
    g = em.graph
    x_name, w_name, t_name = node.inputs
    W = g.node(w_name).attrs["value"].astype(np.int64)
    T = g.node(t_name).attrs["value"].astype(np.int64)
    stream = []
    for c, js in enumerate(cols):
        stream.append(len(js))
        for j in js:
            w, t = int(W[c, j]) & 0xFFFF, int(T[c, j]) & 0xFFFF
            stream += [2 * int(j), w & 0xFF, w >> 8, t & 0xFF, t >> 8]
    sym = em.add_const_array(em.sym(f"{node.name}_terms"), np.asarray(stream, np.uint8), "uint8_t",
                             f"%{node.name}: per class its term count, per term 2 j, w, t (int16 little-endian)")
    name = em.sym(f"wsqdist_k{k}")
    if name not in em.helpers:
        em.helpers[name] = wsqdist_asm(name, k)
    acc = em.sym("wacc")
    C = len(cols)
    em.scratch(acc, "uint8_t", 5 * C)
    # rshift(s, out_shift) = (floor(s / 2^(out_shift - 1)) + 1) >> 1, from v = floor(s / 2^8)
    half = out_shift - 9
    q = f"(v >> {half})" if half > 0 else "v" if half == 0 else "((v << 1) | (a[0] >> 7))"
    return ["{", f"    {name}({sym}, {em.var(x_name)}, {acc}, {C});",
            f"    for (uint8_t c = 0; c < {C}; ++c) {{",
            f"        const uint8_t *a = {acc} + 5 * c;",
            "        const uint32_t v = (uint32_t)a[1] | ((uint32_t)a[2] << 8) | ((uint32_t)a[3] << 16) | "
            "((uint32_t)a[4] << 24);",
            f"        const uint32_t r = ({q} + 1u) >> 1;",
            "        " + store(em, node, "c", "(int32_t)(r > 32767u ? 32767u : r)"),
            "    }", "}"]
