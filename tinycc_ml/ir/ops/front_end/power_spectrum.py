"""power_spectrum: per frame of L samples (zero-padded to fft_length), |X_k|^2 of the real FFT's bins
0..fft_length/2 (the power spectrum, unnormalised: numpy's abs(rfft(frame, fft_length))**2).

Float: kissfft's float real FFT (TFLite Micro's SignalRfft of f32), then re * re + im * im in float32.

Fixed point, block-scaled q15: each frame is shifted left by b = max(0, 15 - bits(max |q|)) (its largest sample then
uses the int16 range; b = 0 for a silent frame), transformed by kissfft's int16 real FFT (TFLite Micro's SignalRfft of
int16: every stage divides by its radix, so the bins are X 2^(b - log2 fft_length) with no overflow), and each bin's
energy e = re^2 + im^2 (below 2^31) is brought to the result's scale by the frame's own shift
r = 2 b + 2 s_in - s_out - 2 log2(fft_length): e 2^-r, right shifts rounding half up, saturated to [0, 32767]. The
block exponent b keeps the FFT's rounding relative to the frame's own level (quiet frames keep their bits); it is
resolved at the op's output, whose scale is static."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import saturate
from tinycc_ml.ir.ops.front_end.common import INT16_MAX, bit_length, shift_each
from tinycc_ml.ir.ops.registry import OpDef, float_or_fixed, need, register_op, result_dtype
from tinycc_ml.ir.ops.signal.common import I16
from tinycc_ml.ir.ops.signal.kissfft import MAX_FFT, real_fft
from tinycc_ml.ir.types import F32, TensorType


def check_frames(x, attrs, op: str) -> int:
    """The frames operand of a spectrum op (``op`` names it in messages): float or 16-bit fixed point, (frames,
    samples) with at most fft_length samples, fft_length a power of two; returns fft_length."""
    float_or_fixed(x, "frames")
    need(not x.dtype.is_fixed or x.dtype.bits == 16, f"fixed-point frames are 16-bit, got {x.dtype}")
    size = int(attrs["fft_length"])
    need(4 <= size <= MAX_FFT and size & (size - 1) == 0, f"fft_length {size} is not a power of two in [4, {MAX_FFT}]")
    need(x.rank == 2 and x.shape[1] <= size, f"{op} takes (frames, samples <= {size}), got {x}")
    return size


def _infer(ts, attrs, declared):
    (x,) = ts
    size = check_frames(x, attrs, "power_spectrum")
    return TensorType((x.shape[0], size // 2 + 1), result_dtype(ts, declared))


def block_shift(frames: np.ndarray) -> np.ndarray:
    """b per frame (the last axis): max(0, 15 - bits(max |q|))."""
    return np.maximum(0, 15 - bit_length(np.max(np.abs(frames), axis=-1)))


def padded(frames: np.ndarray, size: int, dtype) -> np.ndarray:
    out = np.zeros((*frames.shape[:-1], size), dtype)
    out[..., :frames.shape[-1]] = frames
    return out


def float_power(xs, attrs):
    """The float semantics: numpy float64 of the float32 kissfft's re * re + im * im."""
    size = int(attrs["fft_length"])
    x = np.asarray(xs[0], dtype=np.float32)
    spectrum = real_fft(padded(x, size, np.float32), F32, size).astype(np.float32)
    re, im = spectrum[:, 0::2], spectrum[:, 1::2]
    return (re * re + im * im).astype(np.float64)


def fixed_power(frames: np.ndarray, s_in: int, s_out: int, size: int) -> np.ndarray:
    """(..., frames, L) int64 -> (..., frames, size / 2 + 1)."""
    frames = np.asarray(frames, dtype=np.int64)
    lead = frames.shape[:-1]
    b = block_shift(frames)
    scaled = (frames << b[..., None]).reshape(-1, frames.shape[-1])
    spectrum = real_fft(padded(scaled, size, np.int64), I16, size).reshape(*lead, size + 2)
    energy = spectrum[..., 0::2] ** 2 + spectrum[..., 1::2] ** 2
    r = 2 * b + 2 * s_in - s_out - 2 * (size.bit_length() - 1)
    return np.minimum(shift_each(np.minimum(energy, 2**31), np.broadcast_to(r[..., None], energy.shape)), INT16_MAX)


def _fixed(call):
    return saturate(fixed_power(call.ins[0], call.in_scale(0), call.scale, int(call.attrs["fft_length"])), call.bits)


def _interval(attrs, ivs, shape):
    lo, hi = ivs[0]
    top = np.sum(np.maximum(np.abs(lo), np.abs(hi)), axis=-1) ** 2
    return np.zeros(shape), np.broadcast_to(np.reshape(top, (-1, 1)), shape).copy()


register_op(OpDef(
    "power_spectrum", 1, _infer, float_power, {"fft_length": "int"},
    "per frame: |X_k|^2 of the real FFT's bins; fixed point: a block-scaled q15 kissfft (TFLite Micro's int16 RFFT) "
    "and each frame's exponent resolved at the output's scale",
    fixed=_fixed, interval=_interval, acc_bound=lambda call: call.saturated,
    macs=lambda ts, stored, out: ts[0].shape[0] * (out.shape[1] - 1) * 2 * (out.shape[1].bit_length() + 1)))
