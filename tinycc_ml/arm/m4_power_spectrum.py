"""Cortex-M4 / M33 kernel for the front end's integer power spectrum (``power_spectrum`` at int16: the shared C in
codegen/c_front_end.py defines it), bit for bit: per frame the largest |sample| (the block exponent b: the
smallest shift bringing it to 2^14 or more), the frame shifted left by b, kissfft's q15 real FFT (arm.m4_fft), and
each bin's re^2 + im^2 shifted by r = 2 b + base and saturated to 32767.

On the DSP extension: the frame's largest and smallest sample two lanes at a time (SSUB16 sets the lanes' GE
flags, SEL keeps the larger or smaller lane), so |sample| is never formed (|-32768| would need 17 bits); the
shift of both lanes of a word by b in four instructions (the high lane masked before its shift so the low lane's
bits cannot carry into it, PKHBT joining them), skipped when b = 0; re^2 + im^2 of a bin in one SMUAD of its word
with itself (2^31 for two -32768s: the same bits the shared C's unsigned sum has), the rounding shift, USAT to 15
bits.
"""

from __future__ import annotations

from tinycc_ml.arm import m4_fft
from tinycc_ml.target import Node, c_helper, store

MINMAX = """\
/* the largest and smallest of n int16 samples (n even, any alignment) as the lanes of two words */
static void __attribute__((optimize("O2"))) @m4_minmax16(const int16_t *x, long n, int32_t *hi, int32_t *lo)
{
    typedef uint32_t __attribute__((aligned(2), may_alias)) word_t;
    const word_t *p = (const word_t *)(const void *)x;
    uint32_t mx = 0x80008000u, mn = 0x7FFF7FFFu, w, t;
    for (long i = 0; i < n / 2; ++i) {
        w = p[i];
        __asm__("ssub16 %[t], %[w], %[mx]\\n\\tsel %[mx], %[w], %[mx]\\n\\t"
                "ssub16 %[t], %[mn], %[w]\\n\\tsel %[mn], %[w], %[mn]"
                : [mx] "+r"(mx), [mn] "+r"(mn), [t] "=&r"(t) : [w] "r"(w) : "cc");
    }
    *hi = (int16_t)(mx & 0xFFFFu) > (int16_t)(mx >> 16) ? (int16_t)(mx & 0xFFFFu) : (int16_t)(mx >> 16);
    *lo = (int16_t)(mn & 0xFFFFu) < (int16_t)(mn >> 16) ? (int16_t)(mn & 0xFFFFu) : (int16_t)(mn >> 16);
}

/* y[i] = x[i] 2^b for n int16 samples (n even) that fit shifted */
static void __attribute__((optimize("O2"))) @m4_shift16(const int16_t *x, int16_t *y, long n, int b)
{
    typedef uint32_t __attribute__((aligned(2), may_alias)) word_t;
    const word_t *p = (const word_t *)(const void *)x;
    word_t *q = (word_t *)(void *)y;
    for (long i = 0; i < n / 2; ++i) {
        const uint32_t w = p[i];
        uint32_t r;
        __asm__("pkhbt %0, %1, %2" : "=r"(r) : "r"(w << b), "r"((w & 0xFFFF0000u) << b));
        q[i] = r;
    }
}
"""


def power_claims(em, node: Node) -> bool:
    (x,) = node.inputs
    x_type = em.graph.type(x)
    return (str(x_type.dtype).startswith("fx16") and x_type.rank == 2 and x_type.shape[1] % 2 == 0
            and em.at(x, "i") == f"{em.var(x)}[i]" and 16 <= int(node.attrs["fft_length"]) <= 2048)


def block_scaled_fft(em, node: Node) -> list[str]:
    """The opening of the C loop over ``node``'s frames (``f``): the frame at ``in``, its block exponent ``b``, the
    frame shifted left by b where b > 0, kissfft's q15 FFT into ``spectrum``, its words at ``s``; the caller adds
    what it makes of the bins and closes the loop. Shared by the power spectrum and the fused log mel power."""
    (x,) = node.inputs
    x_type = em.graph.type(x)
    frames, length = x_type.shape
    size = int(node.attrs["fft_length"])
    fft = m4_fft.real_fft_q15(em, x_type.dtype, size)  # the frame's 16-bit codes in kissfft's q15
    c_helper(em, "m4_minmax16", MINMAX)
    P = em.prefix + "_"
    buffer = em.sym(f"m4_power_frame_{length}_{size}")
    em.static_ram[buffer] = 2 * length + 2 * (size + 2)
    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static int16_t frame[{length}] __attribute__((aligned(4))); /* {buffer} */",
            f"    static int16_t spectrum[{size + 2}] __attribute__((aligned(4)));",
            f"    const int16_t *in = {em.var(x)} + f * {length};",
            "    int32_t hi, lo;",
            f"    {P}m4_minmax16(in, {length}, &hi, &lo);",
            "    const int32_t m = hi > -lo ? hi : -lo;",
            "    /* the block exponent: the smallest b with m 2^b >= 2^14 */",
            "    const int b = m ? (__builtin_clz((uint32_t)m) > 17 ? (int)__builtin_clz((uint32_t)m) - 17 : 0) : 0;",
            "    if (b) {",
            f"        {P}m4_shift16(in, frame, {length}, b);",
            "        in = frame;",
            "    }",
            f"    {fft}(in, {length}, spectrum);",
            "    const uint32_t *s = (const uint32_t *)(const void *)spectrum;"]


def power_spectrum(em, node: Node) -> list[str] | None:
    (x,) = node.inputs
    x_type = em.graph.type(x)
    size = int(node.attrs["fft_length"])
    bins = size // 2 + 1
    base = 2 * x_type.dtype.scale - node.type.dtype.scale - 2 * (size.bit_length() - 1)
    out = f"f * {bins} + k"
    general = ("r <= 0 ? (-r >= 15 ? (e ? 32767u : 0u) : (e > (UINT32_C(32767) >> -r) ? 32767u : e << -r)) "
               ": (r == 32 && e >= UINT32_C(2147483648) ? 1u : 0u)")
    return [*block_scaled_fft(em, node),
            f"    const int r = 2 * b + ({base}); /* the shift of every bin's power */",
            "    if (r > 0 && r <= 31) {",
            "        const uint32_t half = UINT32_C(1) << (r - 1);",
            f"        for (long k = 0; k < {bins}; ++k) {{",
            "            const uint32_t y = ((uint32_t)__smuad((int32_t)s[k], (int32_t)s[k]) + half) >> r;",
            f"            {store(em, node, out, '__usat((int32_t)y, 15)')}",
            "        }",
            "    } else {",
            f"        for (long k = 0; k < {bins}; ++k) {{",
            "            const uint32_t e = (uint32_t)__smuad((int32_t)s[k], (int32_t)s[k]);",
            f"            const uint32_t y = {general};",
            f"            {store(em, node, out, '(int32_t)(y > 32767u ? 32767u : y)')}",
            "        }",
            "    }",
            "}"]
