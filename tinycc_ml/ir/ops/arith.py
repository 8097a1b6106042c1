"""Integer arithmetic shared by every op's fixed-point semantics (and by the table builders).

Conventions, shared with the C code generator:
- A value of type fx<b>.<s> holds an int of b bits whose real value is int * 2^-s.
- Products of two stored values are formed in 32 bits (int16 x int16 always fits).
- ``rshift(v, k)`` is a rounding shift: (v + 2^(k-1)) >> k for k > 0 (arithmetic shift, so
  halves round up, towards +inf); v * 2^-k for k < 0; v for k == 0.
- Results are saturated to their storage width (never wrapped).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import IRError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_ALIGN_SHIFT = 15


class FixedOverflow(IRError, AssertionError):
    """An int32 intermediate left its range: a bug in the overflow proofs, or a hand-written
    graph whose types cannot hold its values."""


def check32(v, where: str):
    v = np.asarray(v)
    if v.size and (v.min() < INT32_MIN or v.max() > INT32_MAX):
        raise FixedOverflow(f"{where}: int32 intermediate out of range [{v.min()}, {v.max()}]")
    return v


def check_range(v, bits: int, where: str):
    """Values within +-2^bits (a 16x8 layer's int64 sums: TFLite assumes |sum| < 2^47), else FixedOverflow."""
    v = np.asarray(v)
    if v.size and (v.min() < -(1 << bits) or v.max() >= (1 << bits)):
        raise FixedOverflow(f"{where}: intermediate out of range [{v.min()}, {v.max()}] (beyond +-2^{bits})")
    return v


def rshift(v, k: int, own: bool = False):
    """``own``: ``v`` is the caller's own int64 array, which the result may overwrite (no new array)."""
    v = np.asarray(v, dtype=np.int64)
    if k >= 63:  # |v| < 2^63 <= 2^(k-1): the rounded quotient is 0 (hand-written graphs get here)
        return np.zeros_like(v)
    if k <= -63:  # beyond int64: saturate, so the range checks report it
        return np.sign(v) * np.int64(2**63 - 1)
    into = v if own and v.ndim else None
    if k > 0:
        out = np.add(v, 1 << (k - 1), out=into)  # an array of its own (a scalar for 0-d): the shift goes into it
        return np.right_shift(out, k, out=out) if isinstance(out, np.ndarray) else out >> k
    if k < 0:
        return np.multiply(v, 1 << -k, out=into)
    return v


def rshift_bound(bound: int, k: int) -> int:
    """The largest |rshift(v, k)| for |v| <= bound."""
    return (bound + (1 << (k - 1))) >> k if k > 0 else bound << -k


def saturate(v, bits: int, own: bool = False):
    """``own``: ``v`` is the caller's own int64 array, which the result may overwrite (no new array)."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    # np.minimum(np.maximum(...)): np.clip's value for integers, without its per-call overhead (the scale search
    # saturates small arrays thousands of times)
    v = np.asarray(v, dtype=np.int64)
    out = np.maximum(v, lo, out=v if own and v.ndim else None)  # the minimum goes into it (a scalar for 0-d)
    return np.minimum(out, hi, out=out) if isinstance(out, np.ndarray) else np.minimum(out, hi)


def saturate_shifted(v, k: int, bits: int, own: bool = False):
    """saturate(rshift(v, k), bits) with one new array at most, none when ``own`` (see rshift): the interpreter's
    step after most ops, over every calibration row. A shift other than 0 gives an array of its own to clamp."""
    return saturate(rshift(v, k, own), bits, own=own or k != 0)


def align_shifts(sa: int, sb: int) -> tuple[int, int, int]:
    """Common scale for add/sub and the left shifts (negative: rounding right shifts) bringing each
    operand to it: the finer scale, unless that would shift a 16-bit value left by more than 15
    bits (then the finer operand is rounded down to scale min + 15)."""
    c = min(max(sa, sb), min(sa, sb) + MAX_ALIGN_SHIFT)
    return c, c - sa, c - sb


def clip_bounds(lo: float, hi: float, dtype) -> tuple[int, int]:
    """Integer bounds of clip for an operand of type ``dtype``.

    Scalar bounds are exact (within int32): a bound beyond the operand's range still binds, so
    clip(x, 33, 40) is 33 where x cannot reach 33. Per-element bounds are stored in the operand's
    type, so they are clamped into its storage range."""
    if np.ndim(lo) == 0 and np.ndim(hi) == 0:
        top = 2**31 - 1  # symmetric, so -top is an int32 literal in C
    else:
        top = 2 ** (dtype.bits - 1) - 1
    lo_q = np.clip(np.ceil(np.asarray(lo, dtype=np.float64) * 2.0**dtype.scale), -top - 1, top).astype(np.int64)
    hi_q = np.clip(np.floor(np.asarray(hi, dtype=np.float64) * 2.0**dtype.scale), -top - 1, top).astype(np.int64)
    if lo_q.ndim == 0:
        lo_q, hi_q = np.maximum(lo_q, -top), np.maximum(hi_q, -top)
    # bounds between two grid points round inwards past each other: keep lo, so that every
    # clamp form (numpy's min(max()), C's two compares) gives the same value
    return lo_q, np.maximum(hi_q, lo_q)


def storage_clip_bounds(lo: float, hi: float, dtype):
    """clip_bounds clamped into the operand's storage range, for kernels that keep bounds in the
    operand's type; None when that would change the result (a bound beyond the far end of the range)."""
    lo_q, hi_q = clip_bounds(lo, hi, dtype)
    top = 2 ** (dtype.bits - 1)
    if np.any(lo_q > top - 1) or np.any(hi_q < -top):
        return None
    return np.maximum(lo_q, -top), np.minimum(hi_q, top - 1)
