"""Cortex-M4 / M33 kernel for the front end's fused log mel power (``log_mel_power`` at int16: the shared C in
codegen/c_front_end.py defines it), bit for bit: per frame the block exponent b found two lanes at a time and the
frame shifted by b (arm.m4_power_spectrum's SSUB16/SEL and PKHBT helpers), kissfft's q15 real FFT (arm.m4_fft), then
the shared mel sums and logs with each bin's re^2 + im^2 in one SMUAD of its word (2^31 for two -32768s: the same
bits as the shared C's unsigned sum) and the 64-bit sums by UMLAL."""

from __future__ import annotations

from tinycc_ml.arm.m4_power_spectrum import block_scaled_fft, power_claims
from tinycc_ml.target import Node, log_mel_base, log_mel_loop

# the frames' conditions are the power spectrum kernel's: 16-bit, an even length, read as stored
log_mel_claims = power_claims


def log_mel_power(em, node: Node) -> list[str] | None:
    energy = "(uint32_t)__smuad((int32_t)s[{k}], (int32_t)s[{k}])"
    return [*block_scaled_fft(em, node),
            f"    const int32_t exponent = 2 * b + ({log_mel_base(em, node)}); /* the frame's mel values: acc 2^-E */",
            *log_mel_loop(em, node, energy),
            "}"]
