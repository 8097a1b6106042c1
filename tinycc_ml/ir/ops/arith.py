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


def rshift(v, k: int):
    v = np.asarray(v, dtype=np.int64)
    if k >= 63:  # |v| < 2^63 <= 2^(k-1): the rounded quotient is 0 (hand-written graphs get here)
        return np.zeros_like(v)
    if k <= -63:  # beyond int64: saturate, so the range checks report it
        return np.sign(v) * np.int64(2**63 - 1)
    if k > 0:
        return (v + (1 << (k - 1))) >> k
    if k < 0:
        return v * (1 << -k)
    return v


def rshift_bound(bound: int, k: int) -> int:
    """The largest |rshift(v, k)| for |v| <= bound."""
    return (bound + (1 << (k - 1))) >> k if k > 0 else bound << -k


def saturate(v, bits: int):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return np.clip(np.asarray(v, dtype=np.int64), lo, hi)


def align_shifts(sa: int, sb: int) -> tuple[int, int, int]:
    """Common scale for add/sub and the left shifts (negative: rounding right shifts) bringing each
    operand to it: the finer scale, unless that would shift a 16-bit value left by more than 15
    bits (then the finer operand is rounded down to scale min + 15)."""
    c = min(max(sa, sb), min(sa, sb) + MAX_ALIGN_SHIFT)
    return c, c - sa, c - sb


def clip_bounds(lo: float, hi: float, dtype) -> tuple[int, int]:
    """Integer bounds of clip for an operand of type ``dtype``, within its storage range."""
    top = 2 ** (dtype.bits - 1)
    lo_q = np.maximum(np.ceil(np.asarray(lo) * 2.0**dtype.scale), -top).astype(np.int64)
    hi_q = np.minimum(np.floor(np.asarray(hi) * 2.0**dtype.scale), top - 1).astype(np.int64)
    return lo_q, hi_q
