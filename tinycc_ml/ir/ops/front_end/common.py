"""What the front-end ops share: the type rule, per-element shifts and the rounding the interpreter and C agree on."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import float_or_fixed, need, result_dtype
from tinycc_ml.ir.types import TensorType

INT16_MAX = 2**15 - 1


def infer_same_shape(ts, attrs, declared):
    (x,) = ts
    float_or_fixed(x, "operand")
    need(not x.dtype.is_fixed or x.dtype.bits == 16, f"fixed-point operands are 16-bit, got {x.dtype}")
    return TensorType(x.shape, result_dtype(ts, declared))


def shift_each(v: np.ndarray, r) -> np.ndarray:
    """v * 2^-r per element (r an int array or int): right shifts round half up, left shifts are exact (int64)."""
    v = np.asarray(v, dtype=np.int64)
    r = np.broadcast_to(np.asarray(r, dtype=np.int64), v.shape)
    right = np.maximum(r, 0)
    half = np.where(right > 0, np.left_shift(np.int64(1), np.maximum(right - 1, 0)), 0)
    return np.where(r >= 0, np.right_shift(v + half, right), np.left_shift(v, np.maximum(-r, 0)))


def bit_length(v: np.ndarray) -> np.ndarray:
    """Bits of each non-negative integer (0 for 0), exact below 2^53."""
    v = np.asarray(v, dtype=np.int64)
    return np.where(v > 0, np.frexp(v.astype(np.float64))[1], 0).astype(np.int64)
