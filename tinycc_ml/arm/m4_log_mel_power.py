"""Cortex-M4 / M33 kernel for the front end's fused log mel power (``log_mel_power`` at int16: the shared C in
codegen/c_front_end.py defines it), bit for bit: per frame the block exponent b found two lanes at a time and the
frame shifted by b (arm.m4_power_spectrum's SSUB16/SEL and PKHBT helpers), kissfft's q15 real FFT (arm.m4_fft), then
the shared mel sums and logs with each bin's re^2 + im^2 in one SMUAD of its word (2^31 for two -32768s: the same
bits as the shared C's unsigned sum) and the 64-bit sums by UMLAL."""

from __future__ import annotations

from tinycc_ml.arm import m4_fft
from tinycc_ml.arm.m4_power_spectrum import MINMAX
from tinycc_ml.target import Node, c_helper, log_mel_base, log_mel_loop


def log_mel_claims(em, node: Node) -> bool:
    (x,) = node.inputs
    x_type = em.graph.type(x)
    return (str(x_type.dtype).startswith("fx16") and x_type.rank == 2 and x_type.shape[1] % 2 == 0
            and em.at(x, "i") == f"{em.var(x)}[i]" and 16 <= int(node.attrs["fft_length"]) <= 2048)


def log_mel_power(em, node: Node) -> list[str] | None:
    (x,) = node.inputs
    x_type = em.graph.type(x)
    frames, length = x_type.shape
    size = int(node.attrs["fft_length"])
    fft = m4_fft.real_fft_q15(em, x_type.dtype, size)
    c_helper(em, "m4_minmax16", MINMAX)
    P = em.prefix + "_"
    buffer = em.sym(f"m4_power_frame_{length}_{size}")
    em.static_ram[buffer] = 2 * length + 2 * (size + 2)
    energy = "(uint32_t)__smuad((int32_t)s[{k}], (int32_t)s[{k}])"
    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static int16_t frame[{length}] __attribute__((aligned(4))); /* {buffer} */",
            f"    static int16_t spectrum[{size + 2}] __attribute__((aligned(4)));",
            f"    const int16_t *in = {em.var(x)} + f * {length};",
            "    const uint32_t *s = (const uint32_t *)(const void *)spectrum;",
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
            f"    const int32_t exponent = 2 * b + ({log_mel_base(em, node)}); /* the frame's mel values: acc 2^-E */",
            *log_mel_loop(em, node, energy),
            "}"]
