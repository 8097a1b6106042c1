"""log_mel_power: per frame of L samples, log(max(W @ |rfft(frame, fft_length)|^2, floor)), the power spectrum, a mel
filter bank W (n_mels, fft_length / 2 + 1) and a floored natural log fused in one op, so that integer builds keep each
frame's block exponent up to the log ("log in the block-floating domain").

Float: power_spectrum's float32 kissfft and its re * re + im * im, then the mel sums with W as float32 and the
floored log, as the unfused ops compute them.

Fixed point, per frame: the block exponent b and the block-scaled q15 kissfft of power_spectrum (the bins are
X 2^(b - log2 fft_length) in units of 2^-s_in), each bin's energy e_k = re^2 + im^2 (at most 2^31) left as it is, and
acc_j = sum_k wq_jk e_k in 64 bits, where wq = round(W 2^s_w) are the weights as 16-bit unsigned integers at the
finest power-of-two scale s_w holding the largest. The frame's mel value j is acc_j 2^-E with
E = s_w + 2 b + 2 s_in - 2 log2(fft_length), whatever the frame's level. Its log at scale 2^15: acc = m 2^k with m
(the top 15 bits of acc, truncated) in [2^14, 2^15), l = the log table's interpolation at m (log.py: T[i] +
rshift((T[i + 1] - T[i]) f, 8), i = (m - 2^14) >> 8, f = (m - 2^14) & 255) + (k + 14 - E) LN2_Q; acc = 0 has no
log. The floor is compared in the log: y = max(l, Lf) with Lf = round(ln(floor) 2^15) (log is monotone and the table's
interpolation too: the max of the logs is the log of the max). y brought to the result's scale by a rounding shift,
saturated. ``log_stage_error_bound`` states the worst error of y against ln(max(acc 2^-E, floor)) in float64."""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.front_end.common import bit_length
from tinycc_ml.ir.ops.front_end.log import INTERPOLATION_ERROR, LN2_ERROR, LN2_Q, TABLE_SCALE, log_table
from tinycc_ml.ir.ops.front_end.power_spectrum import block_shift, check_frames, float_power, padded
from tinycc_ml.ir.ops.registry import OpDef, need, register_op, result_dtype
from tinycc_ml.ir.ops.signal.common import I16
from tinycc_ml.ir.ops.signal.kissfft import real_fft
from tinycc_ml.ir.types import TensorType

WEIGHT_MAX = 2**16 - 1  # the quantised weights are uint16
LOG_BITS = 15  # the mantissa m the table reads: [2^14, 2^15)


def _infer(ts, attrs, declared):
    (x,) = ts
    size = check_frames(x, attrs, "log_mel_power")
    weights = np.asarray(attrs["weights"], dtype=np.float64)
    need(weights.ndim == 2 and weights.shape[1] == size // 2 + 1,
         f"log_mel_power's weights are (mels, {size // 2 + 1}), got {weights.shape}")
    need(bool(np.all(np.isfinite(weights)) and np.all(weights >= 0) and np.any(weights > 0)),
         "log_mel_power's weights are finite, >= 0 and not all 0")
    need(float(np.max(weights)) >= SMALLEST_LARGEST_WEIGHT,
         f"log_mel_power's largest weight {float(np.max(weights))!r} is below 2^-32: its 16-bit scale would pass the "
         "shifts the sums take")
    floor = float(attrs["floor"])
    need(math.isfinite(floor) and floor > 0, f"log_mel_power's floor is a finite number > 0, got {floor}")
    return TensorType((x.shape[0], weights.shape[0]), result_dtype(ts, declared))


SMALLEST_LARGEST_WEIGHT = 2.0**-32  # the weights' scale s_w stays below 48 (a denormal largest weight overflowed)


def weight_scale(weights: np.ndarray) -> int:
    """s_w: the largest scale at which round(max W 2^s_w) fits 16 unsigned bits."""
    top = float(np.max(weights))
    s = math.floor(math.log2(WEIGHT_MAX / top))
    while math.floor(top * 2.0**s + 0.5) > WEIGHT_MAX:
        s -= 1
    while math.floor(top * 2.0 ** (s + 1) + 0.5) <= WEIGHT_MAX:
        s += 1
    return s


def quantised_weights(weights) -> tuple[np.ndarray, int]:
    """(wq, s_w): wq = round(W 2^s_w), int64 in [0, 65535]."""
    weights = np.asarray(weights, dtype=np.float64)
    s = weight_scale(weights)
    return np.floor(weights * 2.0**s + 0.5).astype(np.int64), s


def log_floor_q(floor: float) -> int:
    """Lf = round(ln(floor) 2^15), halves up."""
    return math.floor(math.log(floor) * 2**TABLE_SCALE + 0.5)


def exact_bit_length(v: np.ndarray) -> np.ndarray:
    """Bits of non-negative int64 values below 2^62 (bit_length's float64 is exact only below 2^53)."""
    v = np.asarray(v, dtype=np.int64)
    high = v >> 30
    return np.where(high > 0, bit_length(high) + 30, bit_length(v))


def log_of_sums(acc: np.ndarray, exponent: np.ndarray, floor_q: int) -> np.ndarray:
    """max(ln(acc 2^-E) by the table, Lf) at scale 2^15 (int64), acc >= 0 below 2^62, E broadcasting against it."""
    acc = np.asarray(acc, dtype=np.int64)
    k = exact_bit_length(acc) - LOG_BITS
    m = np.where(k >= 0, acc >> np.maximum(k, 0), acc << np.maximum(-k, 0))
    offset = np.where(acc > 0, m - 2 ** (LOG_BITS - 1), 0)
    i, f = offset >> 8, offset & 255
    table = log_table()
    lo = table[i]
    logs = lo + rshift((table[i + 1] - lo) * f, 8) + (k + LOG_BITS - 1 - np.asarray(exponent)) * LN2_Q
    return np.where(acc > 0, np.maximum(logs, floor_q), floor_q)


def frame_exponent(b: np.ndarray, s_in: int, s_w: int, size: int) -> np.ndarray:
    """E per frame: the mel value is acc 2^-E."""
    return s_w + 2 * b + 2 * s_in - 2 * (size.bit_length() - 1)


def mel_sums(frames: np.ndarray, size: int, wq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(acc (..., frames, mels) int64, b (..., frames)) of int16 frames (..., frames, L)."""
    frames = np.asarray(frames, dtype=np.int64)
    lead = frames.shape[:-1]
    b = block_shift(frames)
    scaled = (frames << b[..., None]).reshape(-1, frames.shape[-1])
    spectrum = real_fft(padded(scaled, size, np.int64), I16, size).reshape(*lead, size + 2)
    energy = spectrum[..., 0::2] ** 2 + spectrum[..., 1::2] ** 2
    return energy @ wq.T, b


def fixed_log_mel(frames: np.ndarray, s_in: int, size: int, weights, floor: float) -> np.ndarray:
    """y at scale 2^15 (int64, (..., frames, mels))."""
    wq, s_w = quantised_weights(weights)
    acc, b = mel_sums(frames, size, wq)
    return log_of_sums(acc, frame_exponent(b, s_in, s_w, size)[..., None], log_floor_q(floor))


def exponent_range(s_in: int, s_w: int, size: int) -> tuple[int, int]:
    """The least and largest E (b from 0 to 15)."""
    return frame_exponent(0, s_in, s_w, size), frame_exponent(15, s_in, s_w, size)


def log_stage_error_bound(s_in: int, s_w: int, size: int, mels_bins: int) -> float:
    """The largest |y 2^-15 - ln(max(acc 2^-E, floor))| over every acc of the op (float64 reference): the
    mantissa's truncation (ln(1 + 2^-14) < 2^-14, none when acc < 2^15), the table's interpolation, its rounding and
    the interpolation's rounding shift (log.py), |k + 14 - E| multiples of ln 2's rounding (k from -14 to
    bits(acc) - 15, acc < 2^31 65535 mels_bins), Lf's rounding (2^-16: max(a', b') is within max(|a' - a|, |b' - b|)
    of max(a, b))."""
    top_bits = (2**31 * WEIGHT_MAX * mels_bins).bit_length()
    lo, hi = exponent_range(s_in, s_w, size)
    multiples = max(abs(k + LOG_BITS - 1 - e) for k in (1 - LOG_BITS, top_bits - LOG_BITS) for e in (lo, hi))
    table = 2.0**-14 + INTERPOLATION_ERROR + 2 * 2.0**-16 + multiples * LN2_ERROR
    return max(table, 2.0**-16)


def _evaluate(xs, attrs):
    power = float_power(xs, attrs)
    mels = power @ np.asarray(attrs["weights"], dtype=np.float32).astype(np.float64).T
    return np.log(np.maximum(mels, float(attrs["floor"])))


def _fixed(call):
    y = fixed_log_mel(call.ins[0], call.in_scale(0), int(call.attrs["fft_length"]), call.attrs["weights"],
                      float(call.attrs["floor"]))
    return saturate(rshift(y, TABLE_SCALE - call.scale), call.bits)


def _interval(attrs, ivs, shape):
    lo, hi = ivs[0]
    top = np.sum(np.maximum(np.abs(lo), np.abs(hi)), axis=-1) ** 2  # |X_k|^2 <= (sum |x|)^2, per frame
    weights = np.asarray(attrs["weights"], dtype=np.float64)
    floor = float(attrs["floor"])
    high = np.log(np.maximum(np.reshape(top, (-1, 1)) * weights.sum(axis=1)[None, :], floor))
    return np.full(shape, math.log(floor)), np.broadcast_to(high, shape).copy()


def _bound(call):
    # y at scale 2^15: |ln| of a value between 2^-E and 2^62 2^-E, or of the floor, well within int32
    lo, hi = exponent_range(call.scales[0], quantised_weights(call.attrs["weights"])[1],
                            int(call.attrs["fft_length"]))
    return max(abs(log_floor_q(float(call.attrs["floor"]))), (max(abs(lo), abs(hi)) + 63) * LN2_Q), TABLE_SCALE


def _macs(ts, stored, out):
    frames, length = ts[0].shape
    return frames * (2 * length * length.bit_length() + 4 * out.shape[1])  # the FFT's, about 4 bins a mel


register_op(OpDef(
    "log_mel_power", 1, _infer, _evaluate, {"fft_length": "int", "weights": "array", "floor": "float"},
    "per frame: log(max(W @ |rfft|^2, floor)), power spectrum, mel filter bank and floored log in one; fixed point: "
    "the block-scaled q15 kissfft, 64-bit mel sums of the unshifted energies and a per-frame exponent carried to the "
    "log by table",
    fixed=_fixed, interval=_interval, acc_bound=_bound, macs=_macs))
