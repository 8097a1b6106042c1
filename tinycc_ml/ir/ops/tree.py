"""Tree walking: the child of a node in a complete binary tree."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import OpDef, float_or_fixed, need, register_op
from tinycc_ml.ir.types import IDX, TensorType


def _infer_branch(ts, attrs, declared):
    k, s = ts
    need(k.dtype == IDX and k.rank == 0, f"node must be an idx scalar, got {k}")
    float_or_fixed(s, "branch value")
    need(s.size == 1, f"branch value must hold one element, got shape {s.shape}")
    return TensorType((), IDX)


def _fixed_branch(call):
    k, s = call.ins
    return 2 * k + np.where(s.reshape(len(s), -1)[:, 0] > 0, 1, 2)


register_op(OpDef(
    "branch", 2, _infer_branch,
    lambda xs, a: np.asarray(2 * int(xs[0]) + (1 if float(np.reshape(xs[1], -1)[0]) > 0 else 2)), {},
    "child of node k in a complete binary tree: 2k+1 if value > 0, else 2k+2",
    fixed=_fixed_branch,
    interval=lambda attrs, ivs, shape: None,  # an index: no numeric range
    acc_bound=lambda call: (2**31 - 1, 0)))
