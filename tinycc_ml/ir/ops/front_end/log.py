"""log: the natural log of every element (of max(x, 2^-s_in) in fixed point: q <= 0 reads as one unit, the least
positive value the operand holds). Fixed point, by table: q = m 2^k with m in [2^14, 2^15); the table holds
round(ln(1 + i / 64) 2^15) for i in 0..64; with i = (m - 2^14) >> 8 and f = (m - 2^14) & 255,
l = T[i] + rshift((T[i + 1] - T[i]) f, 8) (linear between the 65 points; log_error_bound gives the worst error), and
ln(x) = l 2^-15 + (k + 14 - s_in) ln 2, ln 2 as round(ln(2) 2^15) = 22713: the int32 sum at scale 2^15 brought to the
result's scale (rounding shift), saturated."""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.front_end.common import bit_length, infer_same_shape, shift_each
from tinycc_ml.ir.ops.registry import OpDef, register_op

TABLE_BITS = 6  # 64 segments
TABLE_SCALE = 15
LN2_Q = round(math.log(2) * 2**TABLE_SCALE)
# worst errors in units of the natural log: linear interpolation of ln(1 + t) between points 1/64 apart (h^2 / 8),
# a table entry's rounding and the interpolation's rounding shift (2^-16 each), ln 2's rounding per power of two
INTERPOLATION_ERROR = 2.0**-12 / 8
LN2_ERROR = abs(LN2_Q * 2.0**-TABLE_SCALE - math.log(2))


def log_error_bound(s_in: int) -> float:
    """The largest |fixed_log(q, s_in) 2^-15 - ln(q 2^-s_in)| over 16-bit q >= 1 (before the result's rounding):
    q = m 2^k has -14 <= k <= 0, so at most 14 + |s_in| multiples of ln 2 are added."""
    return INTERPOLATION_ERROR + 2 * 2.0**-16 + (14 + abs(s_in)) * LN2_ERROR


def log_table() -> np.ndarray:
    i = np.arange(2**TABLE_BITS + 1)
    return np.floor(np.log1p(i / 2**TABLE_BITS) * 2**TABLE_SCALE + 0.5).astype(np.int64)


def fixed_log(q: np.ndarray, s_in: int) -> np.ndarray:
    """ln(max(q, 1) 2^-s_in) at scale 2^15 (int64; within int32 for 16-bit q and |s_in| <= 30)."""
    q = np.maximum(np.asarray(q, dtype=np.int64), 1)
    k = bit_length(q) - 15
    m = shift_each(q, np.maximum(k, 0)) if np.any(k > 0) else q << -k  # 16-bit q: k <= 0, m = q 2^-k exactly
    offset = m - 2**14
    i, f = offset >> 8, offset & 255
    table = log_table()
    lo = table[i]
    return lo + rshift((table[i + 1] - lo) * f, 8) + (k + 14 - s_in) * LN2_Q


def _interval(attrs, ivs, shape):
    lo, hi = ivs[0]
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(lo, 0.0)), np.log(np.maximum(hi, 0.0))


def _fixed(call):
    return saturate(rshift(fixed_log(call.ins[0], call.in_scale(0)), TABLE_SCALE - call.scale), call.bits)


def _bound(call):
    # |k + 14 - s_in| ln 2 plus one table value, at scale 2^15
    return (abs(call.scales[0]) + 29) * LN2_Q, TABLE_SCALE


register_op(OpDef(
    "log", 1, infer_same_shape, lambda xs, attrs: np.log(xs[0]), {},
    "the natural log of every element; fixed point: by a 65-entry table with linear interpolation, a non-positive "
    "value read as the operand's least positive one",
    evaluate_rows=lambda ins, batched, attrs, n, rank: np.log(ins[0]),
    fixed=_fixed, interval=_interval, acc_bound=_bound))
