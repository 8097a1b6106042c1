"""Cortex-M4 / M33 real FFT in q15: kissfft's 16-bit fixed-point real FFT (``ir/ops/signal/kissfft.py``, the
arithmetic of TFLite Micro's SignalRfft and of the features' power spectrum) on the DSP extension, bit for bit.

A complex value is one word (re in the low half, im in the high half), so kissfft's wrapping int16 additions are
SADD16 / SSUB16 on both parts at once, and a radix-4 butterfly's rotations by -i are SSAX / SASX. The roundings
are kissfft's exactly:

- a part divided by the radix, ``(v K + 2^14) >> 15`` with K = 32767 / radix: SMLABB for the low part; SMLATB
  with 2K and 2^15 for the high part, whose result is twice the low part's form, so its high half is already the
  shifted high part; PKHTB joins them (3 instructions per complex value);
- a product by a twiddle (c, s), ``(re c - im s + 2^14) >> 15`` and ``(re s + im c + 2^14) >> 15``: SMLSD and
  SMLADX with the rounding addend, ASR and PKHBT (4 per product);
- the real split's halvings ``(a + b) >> 1`` in int: SHADD16 / SHSUB16 (they add in 17 bits).

The first computed stage (span 1) reads the input in kissfft's order directly (its butterfly b reads the slots
base(b) + q n / radix, base from a table), so there is no permutation pass; the other stages read each stage's
twiddles (k fstride, 2 k fstride, 3 k fstride side by side) from a table of their own. A frame shorter than the
FFT is copied once into a zero-padded buffer. The int32 FFT and the inverse stay the shared C.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import c_helper
from tinycc_ml.target import kissfft_plan as plan
from tinycc_ml.target import kissfft_tables as tables


def _packed(pairs: np.ndarray) -> np.ndarray:
    """(…, 2) int16 (re, im) -> uint32 words, re low."""
    pairs = np.asarray(pairs, np.int64)
    return ((pairs[..., 0] & 0xFFFF) | ((pairs[..., 1] & 0xFFFF) << 16)).astype(np.uint32)


def _div(x: str, scratch: str) -> list[str]:
    """x (a word) divided by the radix in both parts (D: K low, 2K high; R1 = 2^14, R2 = 2^15)."""
    return [f"smlatt {scratch}, {x}, %[D], %[R2]", f"smlabb {x}, {x}, %[D], %[R1]",
            f"pkhtb {x}, {scratch}, {x}, asr #15"]


def _cmul(x: str, t: str, scratch: str) -> list[str]:
    """x times the twiddle word t, each part rounded (R1 = 2^14)."""
    return [f"smlsd {scratch}, {x}, {t}, %[R1]", f"smladx {x}, {x}, {t}, %[R1]", f"asr {scratch}, {scratch}, #15",
            f"pkhbt {x}, {scratch}, {x}, lsl #1"]


def _asm(lines: list[str], outputs: str, inputs: str, clobbers: str, indent: str) -> list[str]:
    body = [f'{indent}    "{line}\\n"' for line in lines]
    return [f"{indent}__asm__ volatile(", *body, f"{indent}    : {outputs}", f"{indent}    : {inputs}",
            f"{indent}    : {clobbers});"]


def _butterfly(m: int, twiddles: str, step: int) -> list[str]:
    """One radix-4 butterfly at f (words f[0], f[m], f[2m], f[3m]) in place, f advanced by ``step`` bytes; the
    twiddles in T1..T3 (``twiddles`` "registers"), loaded one by one from t ("load"), or none ("one", k = 0: a
    product by (32767, 0) of a value divided by 4 is that value)."""
    lines = []
    for q, x in ((1, "%[x1]"), (2, "%[x2]"), (3, "%[x3]")):
        lines += [f"ldr {x}, [%[f], #{4 * q * m}]", *_div(x, "%[x4]")]
        if twiddles == "registers":
            lines += _cmul(x, f"%[T{q}]", "%[x4]")
        elif twiddles == "load":
            lines += ["ldr %[T], [%[t]], #4", *_cmul(x, "%[T]", "%[x4]")]
    lines += ["ldr %[x0], [%[f]]", *_div("%[x0]", "%[x4]"),
              "sadd16 %[x4], %[x0], %[x2]", "ssub16 %[x0], %[x0], %[x2]",  # f0 = a0 + s1, s5 = a0 - s1
              "sadd16 %[x2], %[x1], %[x3]", "ssub16 %[x1], %[x1], %[x3]",  # s3 = s0 + s2, s4 = s0 - s2
              "sadd16 %[x3], %[x4], %[x2]", "ssub16 %[x4], %[x4], %[x2]",
              f"str %[x4], [%[f], #{8 * m}]", "ssax %[x2], %[x0], %[x1]", "sasx %[x0], %[x0], %[x1]",
              f"str %[x2], [%[f], #{4 * m}]", f"str %[x0], [%[f], #{12 * m}]"]
    if step == 0:
        return lines + ["str %[x3], [%[f]]"]
    if step < 256:
        return lines + [f"str %[x3], [%[f]], #{step}"]
    return lines + ["str %[x3], [%[f]]", f"add %[f], %[f], #{step}"]


def real_fft_q15(em, dtype, fft_length: int) -> str:
    """``void fn(const int16_t *x, long length, int16_t *out)``: kiss_fftr of x (length samples, zero-padded to
    fft_length) into out (fft_length / 2 + 1 bins, re and im), as kissfft.c_real_fft's C computes it."""
    name = f"m4_rfft_q15_{fft_length}"
    if em.sym(name) in em.helpers:
        return em.sym(name)
    n = fft_length // 2
    stages, order = plan(n)
    tw, supers = tables(dtype, n, False)
    words = _packed(tw)
    p_first, _ = stages[-1]
    q = n // p_first
    base_type = "uint8_t" if q <= 256 else "uint16_t"
    base_sym = em.add_const_array(em.sym(f"fft{n}_bases"), order[::p_first], base_type,
                                  f"the {n}-point FFT's first stage: the input slot of each butterfly")
    sup_sym = em.add_const_array(em.sym(f"fft{n}_supers_q15"), _packed(supers), "uint32_t",
                                 "the real split's twiddles (cos, sin) as words")
    pad = em.sym(f"m4_rfft_pad_{fft_length}")
    work = em.sym(f"m4_rfft_work_{fft_length}")
    em.static_ram[pad] = 2 * fft_length
    em.static_ram[work] = 4 * n
    d4, d2 = 8191 | (16382 << 16), 16383 | (32766 << 16)
    lines = ["    typedef uint32_t __attribute__((aligned(2), may_alias)) word_t;",
             f"    static uint32_t {work}[{n}];", f"    static uint32_t {pad}[{n}];",
             "    const uint16_t *src = (const uint16_t *)x;",
             f"    if (length < {fft_length} || ((uintptr_t)x & 3u)) {{", "        long i;",
             f"        for (i = 0; i < length; ++i) ((int16_t *){pad})[i] = x[i];",
             f"        for (; i < {fft_length}; ++i) ((int16_t *){pad})[i] = 0;",
             f"        src = (const uint16_t *){pad};", "    }",
             "    const uint32_t r1 = 16384, r2 = 32768;",
             f"    uint32_t d = {d4 if p_first == 4 else d2}u;"]
    # first stage: radix p_first, span 1, its inputs read in kissfft's order; a product by (32767, 0) of a value
    # divided by 4 is that value (|v| <= 8192: (v 32767 + 2^14) >> 15 = v); after a division by 2 it is not
    # (-16384 becomes -16383), so the radix-2 stage multiplies
    if p_first == 4:
        first = ["ldrb r4, [%[b]], #1", "add r9, %[in], r4, lsl #2",
                 "ldr r4, [r9]", f"ldr r5, [r9, #{4 * q}]", f"ldr r6, [r9, #{8 * q}]", f"ldr r8, [r9, #{12 * q}]",
                 *_div("r4", "r9"), *_div("r5", "r9"), *_div("r6", "r9"), *_div("r8", "r9"),
                 "sadd16 r9, r4, r6", "ssub16 r4, r4, r6", "sadd16 r6, r5, r8", "ssub16 r5, r5, r8",
                 "ssax r8, r4, r5", "sasx r10, r4, r5", "sadd16 r4, r9, r6", "ssub16 r9, r9, r6",
                 "stmia %[w]!, {r4, r8, r9, r10}"]
    else:
        first = ["ldrb r4, [%[b]], #1", "add r9, %[in], r4, lsl #2", "ldr r4, [r9]", f"ldr r5, [r9, #{4 * q}]",
                 *_div("r4", "r9"), *_div("r5", "r9"), *_cmul("r5", "%[one]", "r9"),
                 "sadd16 r6, r4, r5", "ssub16 r8, r4, r5", "stmia %[w]!, {r6, r8}"]
    lines += ["    {", f"        const {base_type} *b = {base_sym};", "        uint32_t *wp = " + work + ";",
              "        const word_t *in = (const word_t *)(const void *)src;",
              f"        for (long i = 0; i < {q // 2}; ++i)",
              *_asm(first + first, "[b] \"+r\"(b), [w] \"+r\"(wp)",
                    "[in] \"r\"(in), [D] \"r\"(d), [R1] \"r\"(r1), [R2] \"r\"(r2), [one] \"r\"(32767)",
                    '"r4", "r5", "r6", "r8", "r9", "r10", "memory"', "            "),
              "    }", "    d = " + f"{d4}u;"]
    fstride_of = [int(np.prod([p for p, _ in stages[:s]])) for s in range(len(stages))]
    temps = "[x0] \"=&r\"(x0), [x1] \"=&r\"(x1), [x2] \"=&r\"(x2), [x3] \"=&r\"(x3), [x4] \"=&r\"(x4)"
    consts = "[D] \"r\"(d), [R1] \"r\"(r1), [R2] \"r\"(r2)"
    for s in reversed(range(len(stages) - 1)):
        p, m = stages[s]
        fstride = fstride_of[s]
        k = np.arange(1, m)
        stage_tw = np.stack([words[k * fstride], words[2 * k * fstride], words[3 * k * fstride]], axis=1)
        t_sym = em.add_const_array(em.sym(f"fft{n}_stage{s}_q15"), stage_tw, "uint32_t",
                                   f"the {n}-point FFT's stage {s} twiddles (k, 2k, 3k x {fstride}, k >= 1)")
        lines += [f"    /* radix 4, span {m}, {fstride} block(s): k = 0 (twiddles 1), then k by k */", "    {",
                  "        uint32_t x0, x1, x2, x3, x4;", f"        uint32_t *f = {work};"]
        if fstride == 1:
            # k = 0 apart, then k = 1 alone where m - 1 is odd, then two butterflies a turn
            single = _butterfly(m, "load", 4) if (m - 1) % 2 else []
            pairs = ["1:", *_butterfly(m, "load", 4), *_butterfly(m, "load", 4), "cmp %[f], %[end]", "bne 1b"]
            loop = single + (pairs if m > 2 else [])
            lines += [*_asm(_butterfly(m, "one", 4), temps + ", [f] \"+r\"(f)", consts, '"memory"', "        "),
                      f"        const uint32_t *t = {t_sym}, *end = {work} + {m};", "        uint32_t tw;",
                      *_asm(loop, temps + ", [f] \"+r\"(f), [t] \"+r\"(t), [T] \"=&r\"(tw)",
                            consts + ", [end] \"r\"(end)", '"cc", "memory"', "        "), "    }"]
            continue
        per_asm = min(fstride, 4)
        ones = [line for _ in range(per_asm) for line in _butterfly(m, "one", 16 * m)]
        twisted = [line for _ in range(per_asm) for line in _butterfly(m, "registers", 16 * m)]
        lines += [f"        for (long b = 0; b < {fstride // per_asm}; ++b)",
                  *_asm(ones, temps + ", [f] \"+r\"(f)", consts, '"memory"', "            "),
                  f"        const uint32_t *t = {t_sym};",
                  f"        for (long k = 1; k < {m}; ++k, t += 3) {{",
                  "            const uint32_t t1 = t[0], t2 = t[1], t3 = t[2];",
                  f"            f = {work} + k;",
                  f"            for (long b = 0; b < {fstride // per_asm}; ++b)",
                  *_asm(twisted, temps + ", [f] \"+r\"(f)",
                        consts + ", [T1] \"r\"(t1), [T2] \"r\"(t2), [T3] \"r\"(t3)", '"memory"',
                        "                "),
                  "        }", "    }"]
    split_step = ["ldr %[x0], [%[L]], #4", "ldr %[x1], [%[H]], #-4", "ldr %[x2], [%[S]], #4",
             *_div("%[x0]", "%[x3]"),  # pk
             "ssub16 %[x3], %[Z], %[x1]", "smlatt %[x3], %[x3], %[D], %[R2]", "smlabb %[x1], %[x1], %[D], %[R1]",
             "pkhtb %[x1], %[x3], %[x1], asr #15",  # pnk: re / 2, -im / 2
             "sadd16 %[x3], %[x0], %[x1]", "ssub16 %[x0], %[x0], %[x1]",  # f1, f2
             *_cmul("%[x0]", "%[x2]", "%[x1]"),  # t
             "shadd16 %[x1], %[x3], %[x0]", "str %[x1], [%[OL]], #4",
             "shsub16 %[x1], %[x3], %[x0]", "shsub16 %[x2], %[x0], %[x3]", "pkhbt %[x1], %[x1], %[x2]",
             "str %[x1], [%[OH]], #-4"]
    split = ["1:", *split_step, *split_step, "cmp %[L], %[H]", "bls 1b"]
    lines += ["    /* the real split */", "    {",
              "        word_t *o = (word_t *)(void *)out;", f"        d = {d2}u;",
              f"        const uint32_t dc = {work}[0];",
              "        uint32_t x0, x1, x2, x3;",
              f"        const uint32_t *L = {work} + 1, *H = {work} + {n - 1}, *S = {sup_sym};",
              f"        word_t *OL = o + 1, *OH = o + {n - 1};",
              "        uint32_t z = 0, dh = dc;",
              *_asm(_div("%[x]", "%[y]"), "[x] \"+r\"(dh), [y] \"=&r\"(x0)", consts, "", "        "),
              "        o[0] = (uint16_t)__sadd16(dh, dh >> 16);",
              f"        o[{n}] = (uint16_t)__ssub16(dh, dh >> 16);",
              *_asm(split, "[x0] \"=&r\"(x0), [x1] \"=&r\"(x1), [x2] \"=&r\"(x2), [x3] \"=&r\"(x3), "
                    "[L] \"+r\"(L), [H] \"+r\"(H), [S] \"+r\"(S), [OL] \"+r\"(OL), [OH] \"+r\"(OH)",
                    consts + ", [Z] \"r\"(z)", '"cc", "memory"', "        "),
              "    }"]
    lines = [line for line in lines if line]
    return c_helper(em, name, "\n".join([
        f"/* kiss_fftr of {fft_length} int16 samples on the DSP extension (arm.m4_fft): x ({fft_length} at most, "
        f"zero-padded), out {n + 1} bins (re, im) */",
        f"static void __attribute__((optimize(\"O2\"))) @{name}(const int16_t *x, long length, int16_t *out)",
        "{", *lines, "}", ""]))


def real_fft(em, dtype, fft_length: int) -> str | None:
    """CTarget.real_fft of the Cortex-M4 / M33: the q15 kernel for int16 frames of 16 points or more."""
    if str(dtype) == "i16" and 16 <= fft_length <= 2048:
        return real_fft_q15(em, dtype, fft_length)
    if str(dtype) == "i32" and 16 <= fft_length <= 512:  # LDRD reaches 1020 bytes: spans up to 64 (n = 256)
        return real_fft_q31(em, dtype, fft_length)
    return None


# ---------------------------------------------------------------- q31

def _pairs(pairs: list[tuple[str, str]]) -> list[str]:
    """(x, y) -> (x + y, x - y) in place for each pair, wrapping: x + y, then (x + y) - 2y."""
    return [line for x, y in pairs for line in (f"add {x}, {x}, {y}", f"sub {y}, {x}, {y}, lsl #1")]


def _q31_product(address: str, twiddle: str, re: str, im: str) -> list[str]:
    """The complex value at ``address`` divided by 4 (SMMULR by 2K: (v 2K + 2^31) >> 32 = (v K + 2^30) >> 31) and
    doubled (|v| <= 2^29 after the division), times the twiddle (c, s) loaded from ``twiddle``: each part
    (2X + 2^31) >> 32 = (X + 2^30) >> 31 of the exact 64-bit sum X, the high word plus the low word's top bit."""
    return [f"ldrd %[A], %[B], {address}", "smmulr %[A], %[A], %[K]", "smmulr %[B], %[B], %[K]",
            "lsl %[A], %[A], #1", "lsl %[B], %[B], #1", f"ldrd %[C], %[S], {twiddle}",
            "smull %[L], %[H], %[A], %[S]", "smlal %[L], %[H], %[B], %[C]", f"add {im}, %[H], %[L], lsr #31",
            "rsb %[S], %[S], #0",
            "smull %[L], %[H], %[A], %[C]", "smlal %[L], %[H], %[B], %[S]", f"add {re}, %[H], %[L], lsr #31"]


def _q31_butterfly(m: int, twiddles: str, step: int) -> list[str]:
    """One radix-4 butterfly of int32 (re, im) pairs at f[0], f[m], f[2m], f[3m] in place (f held 12m bytes
    ahead where 24m bytes pass LDRD's reach), f advanced by ``step`` bytes. Twiddles (in the order 1, 3, 2) at
    [t], [t, 8], [t, 16] ("fixed"), loaded with t advancing ("load"), or none ("one", k = 0: a product by
    (2^31 - 1, 0) of a value divided by 4 is that value)."""
    ahead = 12 * m if 24 * m > 1020 else 0

    def at(q: int) -> str:
        offset = 8 * q * m - ahead
        return f"[%[f], #{offset}]" if offset else "[%[f]]"

    if twiddles == "one":
        lines = [f"ldrd %[P], %[Q], {at(0)}", f"ldrd %[A], %[B], {at(1)}", f"ldrd %[C], %[S], {at(2)}",
                 f"ldrd %[L], %[H], {at(3)}", *[f"smmulr %[{r}], %[{r}], %[K]" for r in "PQABCSLH"],
                 # (a0, a2) -> (f0, s5), (a1, a3) -> (s3, s4), (f0, s3) -> (out0, out2), s5 and s4 -> out1, out3
                 *_pairs([("%[P]", "%[C]"), ("%[Q]", "%[S]"), ("%[A]", "%[L]"), ("%[B]", "%[H]"),
                          ("%[P]", "%[A]"), ("%[Q]", "%[B]"), ("%[C]", "%[H]"), ("%[S]", "%[L]")]),
                 f"strd %[P], %[Q], {at(0)}", f"strd %[C], %[L], {at(1)}", f"strd %[A], %[B], {at(2)}",
                 f"strd %[H], %[S], {at(3)}"]
    else:
        tw = ["[%[t]], #8"] * 3 if twiddles == "load" else ["[%[t]]", "[%[t], #8]", "[%[t], #16]"]
        lines = [*_q31_product(at(1), tw[0], "%[P]", "%[Q]"),  # s0 = (P, Q)
                 *_q31_product(at(3), tw[1], "%[Y]", "%[X]"),  # s2 = (Y, X)
                 *_pairs([("%[P]", "%[Y]"), ("%[Q]", "%[X]")]),  # s3 = (P, Q), s4 = (Y, X)
                 f"strd %[Y], %[X], {at(3)}",  # s4 kept in f[3m] meanwhile
                 *_q31_product(at(2), tw[2], "%[Y]", "%[X]"),  # s1 = (Y, X)
                 f"ldrd %[A], %[B], {at(0)}", "smmulr %[A], %[A], %[K]", "smmulr %[B], %[B], %[K]",  # a0
                 *_pairs([("%[A]", "%[Y]"), ("%[B]", "%[X]"),  # f0 = (A, B), s5 = (Y, X)
                          ("%[A]", "%[P]"), ("%[B]", "%[Q]")]),  # out0 = (A, B), out2 = (P, Q)
                 f"strd %[A], %[B], {at(0)}", f"strd %[P], %[Q], {at(2)}", f"ldrd %[C], %[S], {at(3)}",
                 *_pairs([("%[Y]", "%[S]"), ("%[X]", "%[C]")]),  # out1 = (Y, C), out3 = (S, X)
                 f"strd %[Y], %[C], {at(1)}", f"strd %[S], %[X], {at(3)}"]
    return lines + ([f"add %[f], %[f], #{step}"] if step else [])


def real_fft_q31(em, dtype, fft_length: int) -> str:
    """``void fn(const int32_t *x, long length, int32_t *out)``: kiss_fftr of x (length samples, zero-padded to
    fft_length) into out (fft_length / 2 + 1 bins, re and im), as kissfft.c_real_fft's C computes it; the complex
    FFT runs in out itself."""
    name = f"m4_rfft_q31_{fft_length}"
    if em.sym(name) in em.helpers:
        return em.sym(name)
    n = fft_length // 2
    stages, order = plan(n)
    tw, supers = tables(dtype, n, False)
    p_first, _ = stages[-1]
    q = n // p_first
    base_type = "uint8_t" if q <= 256 else "uint16_t"
    base_sym = em.add_const_array(em.sym(f"fft{n}_bases"), order[::p_first], base_type,
                                  f"the {n}-point FFT's first stage: the input slot of each butterfly")
    sup_sym = em.add_const_array(em.sym(f"fft{n}_supers_q31"), supers, "int32_t",
                                 "the real split's twiddles (cos, sin), q31")
    pad = em.sym(f"m4_rfft31_pad_{fft_length}")
    em.static_ram[pad] = 4 * fft_length
    k4, k2 = 2 * ((2**31 - 1) // 4), 2 * ((2**31 - 1) // 2)
    lines = [f"    static int32_t {pad}[{fft_length}];", "    const int32_t *src = x;",
             f"    if (length < {fft_length}) {{", "        long i;",
             f"        for (i = 0; i < length; ++i) {pad}[i] = x[i];",
             f"        for (; i < {fft_length}; ++i) {pad}[i] = 0;", f"        src = {pad};", "    }",
             f"    int32_t k = {k4 if p_first == 4 else k2};"]
    # first stage: span 1, twiddles (2^31 - 1, 0): the identity after a division (|v| <= 2^30)
    load = ["ldrb r2, [%[b]], #1", "add r2, %[in], r2, lsl #3"]

    def pair_load(regs: tuple[str, str], offset: int) -> list[str]:
        if offset <= 1020:
            return [f"ldrd {regs[0]}, {regs[1]}, [r2, #{offset}]" if offset else f"ldrd {regs[0]}, {regs[1]}, [r2]"]
        return [f"add r2, r2, #{offset}", f"ldrd {regs[0]}, {regs[1]}, [r2]"]

    if p_first == 4:
        # a0 = (r3, r4), a1 = (r8, r9), a2 = (r5, r11), a3 = (r6, r10): the butterfly's results then lie in
        # order, out0 (r3, r4), out1 (r5, r6), out2 (r8, r9), out3 (r10, r11)
        first = [*load, *pair_load(("r3", "r4"), 0), *pair_load(("r8", "r9"), 8 * q),
                 f"add r2, r2, #{16 * q}", *pair_load(("r5", "r11"), 0), *pair_load(("r6", "r10"), 8 * q),
                 *[f"smmulr {r}, {r}, %[K]" for r in ("r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11")],
                 *_pairs([("r3", "r5"), ("r4", "r11"), ("r8", "r6"), ("r9", "r10"), ("r3", "r8"), ("r4", "r9"),
                          ("r5", "r10"), ("r11", "r6")]),
                 "stmia %[w]!, {r3, r4, r5, r6, r8, r9, r10, r11}"]
        clobbered = '"r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "memory"'
    else:
        first = [*load, *pair_load(("r3", "r4"), 0), *pair_load(("r5", "r6"), 8 * q),
                 *[f"smmulr {r}, {r}, %[K]" for r in ("r3", "r4", "r5", "r6")],
                 *_pairs([("r3", "r5"), ("r4", "r6")]), "stmia %[w]!, {r3, r4, r5, r6}"]
        clobbered = '"r2", "r3", "r4", "r5", "r6", "memory"'
    lines += ["    {", f"        const {base_type} *b = {base_sym};", "        int32_t *wp = out;",
              f"        for (long i = 0; i < {q}; ++i)",
              *_asm(first, '[b] "+r"(b), [w] "+r"(wp)', '[in] "r"(src), [K] "r"(k)', clobbered, "            "),
              "    }", f"    k = {k4};"]
    regs = "PQABCSLHXY"
    temps = ", ".join(f'[{r}] "=&r"({r.lower()}{r.lower()})' for r in regs)
    decl = "        int32_t " + ", ".join(f"{r.lower()}{r.lower()}" for r in regs) + ";"
    fstride_of = [int(np.prod([p for p, _ in stages[:s]])) for s in range(len(stages))]
    for s in reversed(range(len(stages) - 1)):
        _, m = stages[s]
        fstride = fstride_of[s]
        ahead = 12 * m if 24 * m > 1020 else 0
        ks = np.arange(1, m)
        stage_tw = np.stack([tw[ks * fstride], tw[3 * ks * fstride], tw[2 * ks * fstride]], axis=1)
        t_sym = em.add_const_array(em.sym(f"fft{n}_stage{s}_q31"), stage_tw, "int32_t",
                                   f"the {n}-point FFT's stage {s} twiddles (k, 3k, 2k x {fstride}, k >= 1), q31")
        lines += [f"    /* radix 4, span {m}, {fstride} block(s): k = 0 (twiddles 1), then k by k */", "    {",
                  decl, f"        int32_t *f = out + {ahead // 4};",
                  f"        for (long b = 0; b < {fstride}; ++b)",
                  *_asm(_q31_butterfly(m, "one", 32 * m), temps + ', [f] "+r"(f)', '[K] "r"(k)', '"memory"',
                        "            "),
                  f"        const int32_t *t = {t_sym};"]
        if fstride == 1:
            loop = ["1:", *_q31_butterfly(m, "load", 8), "cmp %[f], %[end]", "bne 1b"]
            lines += [f"        f = out + {ahead // 4} + 2;",
                      f"        int32_t *const end = out + {ahead // 4 + 2 * m};",
                      *(_asm(loop, temps + ', [f] "+r"(f), [t] "+r"(t)', '[K] "r"(k), [end] "r"(end)',
                             '"cc", "memory"', "        ") if m > 1 else []), "    }"]
            continue
        lines += [f"        for (long j = 1; j < {m}; ++j, t += 6) {{", f"            f = out + {ahead // 4} + 2 * j;",
                  f"            for (long b = 0; b < {fstride}; ++b)",
                  *_asm(_q31_butterfly(m, "fixed", 32 * m), temps + ', [f] "+r"(f)', '[K] "r"(k), [t] "r"(t)',
                        '"memory"', "                "),
                  "        }", "    }"]
    split = ["1:", "ldrd %[A], %[B], [%[Lp]]", "ldrd %[C], %[S], [%[Hp]]", "rsb %[S], %[S], #0",
             *[f"smmulr %[{r}], %[{r}], %[K]" for r in "ABCS"],  # pk = (A, B), pnk = (C, S)
             *_pairs([("%[A]", "%[C]"), ("%[B]", "%[S]")]),  # f1 = (A, B), f2 = (C, S)
             "ldrd %[X], %[Y], [%[T]], #8",
             "mov %[L], #0x40000000", "mov %[H], #0", "smlal %[L], %[H], %[C], %[Y]", "smlal %[L], %[H], %[S], %[X]",
             "lsl %[H], %[H], #1", "orr %[Z], %[H], %[L], lsr #31",  # ti
             "rsb %[Y], %[Y], #0",
             "mov %[L], #0x40000000", "mov %[H], #0", "smlal %[L], %[H], %[C], %[X]", "smlal %[L], %[H], %[S], %[Y]",
             "lsl %[H], %[H], #1", "orr %[C], %[H], %[L], lsr #31",  # tr
             "add %[X], %[A], %[C]", "asr %[X], %[X], #1", "add %[Y], %[B], %[Z]", "asr %[Y], %[Y], #1",
             "strd %[X], %[Y], [%[Lp]], #8",
             "sub %[A], %[A], %[C]", "asr %[A], %[A], #1", "sub %[B], %[Z], %[B]", "asr %[B], %[B], #1",
             "strd %[A], %[B], [%[Hp]], #-8", "cmp %[Lp], %[Hp]", "bls 1b"]
    sregs = "ABCSXYZLH"
    lines += ["    /* the real split, in place */", "    {",
              "        int32_t " + ", ".join(f"{r.lower()}{r.lower()}" for r in sregs) + ";",
              f"        int32_t *lp = out + 2, *hp = out + {2 * n - 2};", f"        const int32_t *ts = {sup_sym};",
              f"        const int32_t dr = {_smmulr_c('out[0]', k2)}, di = {_smmulr_c('out[1]', k2)};",
              "        out[0] = (int32_t)((uint32_t)dr + (uint32_t)di);",
              f"        out[{2 * n}] = (int32_t)((uint32_t)dr - (uint32_t)di);",
              "        out[1] = 0;", f"        out[{2 * n + 1}] = 0;", f"        k = {k2};",
              *_asm(split, ", ".join(f'[{r}] "=&r"({r.lower()}{r.lower()})' for r in sregs)
                    + ', [Lp] "+r"(lp), [Hp] "+r"(hp), [T] "+r"(ts)', '[K] "r"(k)', '"cc", "memory"', "        "),
              "    }"]
    return c_helper(em, name, "\n".join([
        f"/* kiss_fftr of {fft_length} int32 samples on the Cortex-M4 (arm.m4_fft): x ({fft_length} at most, "
        f"zero-padded), out {n + 1} bins (re, im), the complex FFT computed in out */",
        f"static void __attribute__((optimize(\"O2\"))) @{name}(const int32_t *x, long length, int32_t *out)",
        "{", *lines, "}", ""]))


def _smmulr_c(v: str, k: int) -> str:
    """kissfft's division of one part in C: (v 2K + 2^31) >> 32."""
    return f"(int32_t)(((int64_t){v} * {k} + INT64_C(2147483648)) >> 32)"
