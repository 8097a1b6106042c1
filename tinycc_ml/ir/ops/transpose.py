"""TRANSPOSE: a tensor's axes permuted (the elements and their quantisation kept). Networks from ONNX
use it where ONNX's channels-first order meets the IR's NHWC: at the input, and before a flatten."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import PER_TENSOR, TensorType


def _perm(attrs: dict, rank: int) -> list[int]:
    perm = [int(p) for p in attrs["perm"]]
    need(sorted(perm) == list(range(rank)), f"perm {perm} is not a permutation of the {rank} axes")
    return perm


def _infer_transpose(ts, attrs, declared):
    (x,) = ts
    perm = _perm(attrs, x.rank)
    need(not x.dtype.is_quantised or x.dtype.axis == PER_TENSOR, "a per-channel quantised tensor cannot be transposed")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype, declared.layout if declared is not None else "")


def transpose_rows(value: np.ndarray, rank: int, perm) -> np.ndarray:
    """Any leading (row) axes kept in front."""
    lead = value.ndim - rank
    return np.transpose(value, [*range(lead), *(lead + int(p) for p in perm)])


register_op(OpDef(
    "transpose", 1, _infer_transpose, lambda xs, a: transpose_rows(np.asarray(xs[0]), np.ndim(xs[0]), a["perm"]),
    {"perm": "ints"},
    "TFLite's TRANSPOSE: result axis i is the input's axis perm[i] (and the declared layout); quantised: the "
    "same integers, moved",
    evaluate_rows=lambda ins, batched, attrs, n, rank: transpose_rows(ins[0], rank, attrs["perm"]),
    fixed=lambda call: transpose_rows(call.ins[0], call.in_types[0].rank, call.attrs["perm"]),
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("TRANSPOSE", 39, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    rank = len(low.tensors[ins[0]].shape)
    perm = low.ints(ins[1], "TRANSPOSE", "perm").ravel()
    # tflite-micro takes no negative axis here (it fails to allocate the tensors)
    need(sorted(int(p) for p in perm) == list(range(rank)),
         f"TRANSPOSE: perm {perm.tolist()} is not a permutation of the input's {rank} axes 0..{rank - 1}")
    low.add("transpose", [low.value(ins[0])], {"perm": [int(p) for p in perm]}, low.tensors[outs[0]])
