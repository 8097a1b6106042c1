"""Distances to prototypes with 8-bit storage: 8 x 16-bit products on the ATmega328P.

At precision int8, choose_scales keeps 8 significant bits of each sqdist's prototypes
(ir.fixed.significant_bits, as TargetAttributes.prototype_bits = PROTO_BITS asks): M = M8 2^k with
|M8| <= 127, still typed int16 at the point's scale, so the fixed-point semantics (and
tinycc_ml.ir.fixed) are those of any sqdist. The AVR kernel stores M8 and
runs the int8 mat-vec kernel (two unsigned MULs per term instead of four):
    ||x - M_j||^2 = |M_j|^2 + |x|^2 + 2^(k+1) sum_i (-M8_ij) x_i        (mod 2^32, exact)
|M_j|^2 = 2^(2k) sum_i M8_ij^2, so for k >= 1 the kernel's row constants carry |M_j|^2 / 2^(k+1) exactly
(else it sits in flash); |x|^2 comes from the fused input clamp (one asm pass with the clamp and
the sum the kernel needs), or from one loop here.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.avr.kernels import (
    asm_prologue,
    asm_words,
    fused_producer,
    mac_lines,
    mulu16_avr,
    presum_sym,
    sqdist_dot_ok,
    store_rows,
    store_rs,
)
from tinycc_ml.target import Node, clip_ok, split8, storage_clip_bounds


def avr_sqdist8(em, node: Node) -> list[str] | None:
    """The AVR int8-prototype distance kernel, or None (the int16 kernels take the node)."""
    from dataclasses import replace

    if node.op != "sqdist" or not sqdist_dot_ok(em, node):
        return None
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    split = split8(M)
    if split is None:
        return None
    m8, k = split
    kdim, m = M.shape
    x = em.var(x_name)
    acc = em.sym("acc")
    out_shift = 2 * g.type(x_name).dtype.scale - node.type.dtype.scale
    if fused_producer(em, x_name):
        xx = [f"    const uint32_t xx = {presum_sym(em, x_name)}[1];"]
    else:
        xx = ["    uint32_t xx = 0;", f"    for (uint16_t k = 0; k < {kdim}; ++k) {{",
              f"        const uint16_t a = {x}[k] < 0 ? -(uint16_t){x}[k] : (uint16_t){x}[k];",
              f"        xx += {mulu16_avr(em)}(a, a);", "    }"]
    if k >= 1:  # |M_j|^2 = 2^(2k) sum(M8^2): the kernel's row constants carry |M_j|^2 / 2^(k+1) exactly
        lines = mac_lines(em, (-m8).T.copy(), 8, f"{m_name}_i8", x_name, acc, layout_key=m_name,
                          k_extra=(m8 * m8).sum(axis=0) << (k - 1))
        norms = None
    else:
        norms = em.add_const_array(em.sym(f"{m_name}_sq"), (M * M).sum(axis=0).astype(np.int32), "int32_t",
                                   f"%{m_name}: squared norm of each prototype")
        lines = mac_lines(em, (-m8).T.copy(), 8, f"{m_name}_i8", x_name, acc, layout_key=m_name)
    # streaming reads the prototypes back: M = -w * 2^k
    em.kernel_layout[m_name] = replace(em.kernel_layout[m_name],
                                       decode=lambda e: f"(int16_t)(-(int16_t)(int8_t)({e} ^ 0x80u) * {1 << k})")
    if node.type.dtype.bits == 16 and 8 <= out_shift <= 16 and m <= 256:
        name = em.sym(f"d8post{m}_{k}_{out_shift}" + ("n" if norms else ""))
        if name not in em.helpers:
            em.helpers[name] = post_asm(name, m, k, out_shift, norms is not None)
        return ["{", *xx, *lines, f"    {name}({acc}, {norms or 0}, xx, {em.var(node.name)});", "}"]
    rd = em.target.read_const
    norm = f"(uint32_t){rd(norms, 'j', 'int32_t')} + " if norms else ""
    return ["{", *xx, *lines,
            f"    for (uint8_t j = 0; j < {m}; ++j) {{",
            f"        const uint32_t d = {norm}xx + ({acc}[j] << {k + 1});",
            "        " + store_rs(em, node, "j", "(int32_t)d", out_shift),
            "    }", "}"]


def post_asm(name: str, m: int, k: int, out_shift: int, norms: bool) -> str:
    """void name(const uint32_t *acc, const int32_t *norms /*flash*/, uint32_t xx, int16_t *out):
    out[j] = sat16(rshift([norms[j] +] xx + (acc[j] << (k + 1)), out_shift)) for the m prototypes, mod 2^32
    like the C it replaces; 8 <= out_shift <= 16 (the mat-vec kernel's store)."""
    saved = ["r10", "r11", "r12", "r13", "r16", "r17", "r28", "r29"]
    acc = ["r2", "r3", "r4", "r5"]
    saved = ["r2", "r3", "r4", "r5", *saved]
    b = asm_prologue(name, saved)
    # acc r24:25 -> Y, norms r22:23 -> Z, xx r18..r21 -> r10..r13, out r16:17 -> X
    b += ["movw r28, r24", "movw r30, r22", "movw r10, r18", "movw r12, r20", "movw r26, r16",
          f"ldi r16, {m & 0xFF}", "1:", *[f"ld {r}, Y+" for r in acc]]
    b += ["lsl r2", "rol r3", "rol r4", "rol r5"] * (k + 1)
    if norms:
        b += ["lpm r18, Z+", "lpm r19, Z+", "lpm r20, Z+", "lpm r21, Z+",
              "add r2, r18", "adc r3, r19", "adc r4, r20", "adc r5, r21"]
    b += ["add r2, r10", "adc r3, r11", "adc r4, r12", "adc r5, r13"]
    b += store_rows(acc, 1, out_shift)
    b += ["dec r16", "breq 9f", "rjmp 1b", "9:", "clr r1"]
    b += [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return (f"void {name}(const uint32_t *acc, const int32_t *norms, uint32_t xx, int16_t *out);\n"
            f"__asm__(\n{asm_words(b)});\n")


def clamp_squares_asm(name: str, n: int, lo: int, hi: int) -> str:
    """void name(const int16_t *x, int16_t *out, uint32_t *sums): the input clamp feeding a distance kernel,
    in one pass: out[i] = clamp(x[i]) + 2^15, sums[0] = sum(out) (24 bits: n <= 256), sums[1] = sum of the
    squared clamped values (mod 2^32). With lo = 0 one unsigned compare settles the common case."""
    saved = [f"r{r}" for r in range(2, 10)] + ["r16", "r17", "r28", "r29"]
    full = []
    if hi < 32767:
        full += ["cp r16, r22", "cpc r17, r23", "brge 1f", "movw r22, r16", "1:"]
    if lo > -32768:
        full += ["cp r22, r20", "cpc r23, r21", "brge 1f", "movw r22, r20", "1:"]
    fast = lo == 0
    square = ["movw r18, r22"]
    if lo < 0:  # |v|: the squares use unsigned MULs
        square += ["sbrs r19, 7", "rjmp 1f", "com r19", "neg r18", "sbci r19, 0xFF", "1:"]
    square += ["mul r18, r18", "add r5, r0", "adc r6, r1", "adc r7, r9", "adc r8, r9",
               "mul r19, r19", "add r7, r0", "adc r8, r1",
               "mul r18, r19", "lsl r0", "rol r1", "add r6, r0", "adc r7, r1", "adc r8, r9"]  # 2 |v|l |v|h < 2^16
    unroll = 1  # keeps every branch within reach
    body, slow = [], []
    for e in range(unroll):
        body += ["ld r22, X+", "ld r23, X+"]
        if fast:  # 0 <= v <= hi as one unsigned compare with hi + 1 (r25: its high byte)
            body += [f"cpi r22, lo8({hi + 1})", "cpc r23, r25", f"brsh 2{e}f", f"3{e}:"]
            slow += [f"2{e}:", *full, f"rjmp 3{e}b"]
        else:
            body += full
        body += square + ["subi r23, 0x80", "st Y+, r22", "st Y+, r23", "add r2, r22", "adc r3, r23", "adc r4, r9"]
    b = asm_prologue(name, saved)
    b += ["movw r26, r24", "movw r28, r22", "push r20", "push r21", "clr r9", "clr r2", "clr r3", "clr r4",
          "clr r5", "clr r6", "clr r7", "clr r8",
          f"ldi r16, lo8({hi})", f"ldi r17, hi8({hi})", f"ldi r20, lo8({lo})", f"ldi r21, hi8({lo})",
          f"ldi r25, hi8({hi + 1})", f"ldi r24, {n & 0xFF}", "8:", *body, "dec r24", "brne 8b", "rjmp 9f", *slow,
          "9:", "pop r31", "pop r30", "st Z+, r2", "st Z+, r3", "st Z+, r4", "st Z+, r9",
          "st Z+, r5", "st Z+, r6", "st Z+, r7", "st Z+, r8", "clr r1"]
    b += [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return f"void {name}(const int16_t *x, int16_t *out, uint32_t *sums);\n__asm__(\n{asm_words(b)});\n"


def avr_clamp_squares(em, node: Node) -> list[str] | None:
    """The fused input clamp of a distance (sum and squares for the kernel) in asm, or None."""
    if node.op != "clip" or not clip_ok(em, node) or fused_producer(em, node.name) != "sqdist":
        return None
    (a,) = node.inputs
    lo, hi = storage_clip_bounds(node.attrs["lo"], node.attrs["hi"], em.graph.type(a).dtype)
    n = node.type.size
    if np.ndim(lo) != 0 or n > 256:
        return None
    sym = presum_sym(em, node.name)
    em.scratch(sym, "uint32_t", 2)
    name = em.sym(f"clampsq{n}_{int(lo)}_{int(hi)}".replace("-", "m"))
    if name not in em.helpers:
        em.helpers[name] = clamp_squares_asm(name, n, int(lo), int(hi))
    return [f"{name}({em.var(a)}, {em.var(node.name)}, {sym});"]
