"""Shape ops: RESHAPE, free (the elements keep their order and their quantisation)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_C, NO_RANGES
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType


def _infer_reshape(ts, attrs, declared):
    (x,) = ts
    shape = tuple(int(d) for d in attrs["shape"])
    need(all(d >= 1 for d in shape), f"shape {list(shape)} has a dimension below 1")
    need(int(np.prod(shape)) == x.size, f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be reshaped")
    return TensorType(shape, x.dtype, declared.layout if declared is not None else "")


def _reshape_rows(value: np.ndarray, in_rank: int, shape) -> np.ndarray:
    """Any leading (row) axes kept."""
    return value.reshape(*value.shape[:value.ndim - in_rank], *(int(d) for d in shape))


register_op(OpDef(
    "reshape", 1, _infer_reshape, lambda xs, a: np.reshape(xs[0], [int(d) for d in a["shape"]]), {"shape": "ints"},
    "TFLite's RESHAPE: the same elements in the same order in a new shape (and the declared layout): free",
    evaluate_rows=lambda ins, batched, attrs, n, rank: ins[0].reshape(n, *(int(d) for d in attrs["shape"])),
    fixed=lambda call: _reshape_rows(call.ins[0], call.in_types[0].rank, call.attrs["shape"]),
    unsupported={"interval": NO_RANGES, "acc_bound": NO_RANGES, "c_float": NO_C}))
