"""sqrt: the square root of every element (of max(x, 0)). Fixed point, exactly: y = round(sqrt(q 2^e)) with
e = 2 s_out - s_in, halves up, saturated to 32767; q <= 0 gives 0. Computed on integers: an odd e becomes even as
(2q, e - 1); then r = isqrt(4 q 2^e) for e >= 0 (q 2^e at least 2^30 saturates: its root is 2^15 or more), or
isqrt(4 q) >> -e/2 for e < 0; y = (r + 1) >> 1 (floor(sqrt(N) + 1/2) = (floor(2 sqrt(N)) + 1) >> 1)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import saturate
from tinycc_ml.ir.ops.front_end.common import INT16_MAX, infer_same_shape
from tinycc_ml.ir.ops.registry import OpDef, register_op

SATURATING_SQUARE = 1 << 30  # N at or above it has a root of at least 2^15


def even_exponent(s_in: int, s_out: int) -> tuple[int, int]:
    """(factor, e): q 2^(2 s_out - s_in) = (factor q) 2^e with e even (factor 1 or 2)."""
    e = 2 * s_out - s_in
    return (2, e - 1) if e % 2 else (1, e)


def isqrt(v: np.ndarray) -> np.ndarray:
    """floor(sqrt(v)) of non-negative int64 values below 2^52, exactly."""
    v = np.asarray(v, dtype=np.int64)
    r = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    r = np.where(r * r > v, r - 1, r)
    return np.where((r + 1) * (r + 1) <= v, r + 1, r)


def fixed_sqrt(q: np.ndarray, s_in: int, s_out: int) -> np.ndarray:
    factor, e = even_exponent(s_in, s_out)
    q = np.maximum(np.asarray(q, dtype=np.int64), 0) * factor
    if e >= 0:
        # q 2^e >= 2^30 saturates below; the min and a shift of at most 31 (any q >= 1 then saturates) keep int64 exact
        n = np.minimum(q, SATURATING_SQUARE) << min(e, 31)
        r = np.where(n >= SATURATING_SQUARE, 2 * INT16_MAX + 2, isqrt(4 * np.minimum(n, SATURATING_SQUARE)))
    else:
        r = isqrt(4 * q) >> (-e // 2)
    return np.minimum((r + 1) >> 1, INT16_MAX)


def _interval(attrs, ivs, shape):
    lo, hi = ivs[0]
    return np.sqrt(np.maximum(lo, 0.0)), np.sqrt(np.maximum(hi, 0.0))


def _fixed(call):
    return saturate(fixed_sqrt(call.ins[0], call.in_scale(0), call.scale), call.bits)


register_op(OpDef(
    "sqrt", 1, infer_same_shape, lambda xs, attrs: np.sqrt(np.maximum(xs[0], 0.0)), {},
    "the square root of max(x, 0), every element; fixed point: rounded exactly (integer square root), saturated",
    evaluate_rows=lambda ins, batched, attrs, n, rank: np.sqrt(np.maximum(ins[0], 0.0)),
    fixed=_fixed, interval=_interval, acc_bound=lambda call: call.saturated))
