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


# ---- DEPTH_TO_SPACE and SPACE_TO_DEPTH: a reshape, a transpose of the block axes and a reshape

DEPTH_TO_SPACE_OPTIONS, SPACE_TO_DEPTH_OPTIONS = 94, 19  # schema.fbs' BuiltinOptions: { block_size: int }


def _blocks(low, op: str, options, ins, outs):
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(len(x.shape) == 4, f"{op}: an input of {len(x.shape)} dimensions (TFLite Micro takes 4)")
    need(x.type_name in ("int8", "float32"), f"{op}: {x.type_name} tensors (TFLite Micro takes int8 and float32)")
    block = int(options.scalar(0, "i", 0, "block_size")) if options is not None else 0
    need(block >= 1, f"{op}: block_size {block}")
    return x, out, block


def _moved(low, ins, out, x, inner: tuple, outer: tuple) -> None:
    """x reshaped to ``inner`` (rank 5, batch dropped), axes 1 and 2 swapped, reshaped to the output."""
    name = low.name_of(out)
    blocks = low.step("reshape", [low.value(ins[0])], {"shape": list(inner)}, inner, x, f"{name}_blocks")
    swapped = (inner[0], inner[2], inner[1], inner[3], inner[4])
    moved = low.step("transpose", [blocks], {"perm": [0, 2, 1, 3, 4]}, swapped, x, f"{name}_moved")
    need(list(out.shape) == list(outer), f"{low.where}: the output declares shape {list(out.shape)}, the operator "
         f"computes {list(outer)}")
    low.add("reshape", [moved], {"shape": list(outer)}, out)


# the channel index of (block row i, block column j, depth d): DCR (TFLite's DEPTH_TO_SPACE, ONNX's default)
# (i block + j) depth + d; CRD (ONNX's mode="CRD", PyTorch's PixelShuffle) d block^2 + i block + j
DEPTH_TO_SPACE_MODES = ("DCR", "CRD")


def depth_to_space_steps(h: int, w: int, c: int, block: int, mode: str = "DCR"):
    """DEPTH_TO_SPACE of an NHWC (1, h, w, c) tensor as a reshape to rank 5 (the batch dropped), a transpose and a
    reshape: (the rank-5 shape, the permutation, the (1, h block, w block, c / block^2) result)."""
    need(mode in DEPTH_TO_SPACE_MODES, f"DEPTH_TO_SPACE mode {mode!r}: one of {', '.join(DEPTH_TO_SPACE_MODES)}")
    need(block >= 1 and c % (block * block) == 0,
         f"DEPTH_TO_SPACE: {c} channels with block_size {block} (the channels must be a multiple of {block * block})")
    depth = c // (block * block)
    if mode == "DCR":
        inner, perm = (h, w, block, block, depth), [0, 2, 1, 3, 4]
    else:
        inner, perm = (h, w, depth, block, block), [0, 3, 1, 4, 2]
    return inner, perm, (1, h * block, w * block, depth)


@tflite_builtin("DEPTH_TO_SPACE", 5, options=DEPTH_TO_SPACE_OPTIONS, options_required=True)
def lower_depth_to_space(low, options, ins, outs) -> None:
    x, out, block = _blocks(low, "DEPTH_TO_SPACE", options, ins, outs)
    n, h, w, c = (int(d) for d in x.shape)
    need(n == 1 and c % (block * block) == 0, f"DEPTH_TO_SPACE: shape {list(x.shape)} with block_size {block}")
    inner, _, outer = depth_to_space_steps(h, w, c, block)
    _moved(low, ins, out, x, inner, outer)


@tflite_builtin("SPACE_TO_DEPTH", 26, options=SPACE_TO_DEPTH_OPTIONS, options_required=True)
def lower_space_to_depth(low, options, ins, outs) -> None:
    x, out, block = _blocks(low, "SPACE_TO_DEPTH", options, ins, outs)
    n, h, w, c = (int(d) for d in x.shape)
    need(n == 1 and h % block == 0 and w % block == 0,
         f"SPACE_TO_DEPTH: shape {list(x.shape)} with block_size {block}")
    _moved(low, ins, out, x, (h // block, block, w // block, block, c), (1, h // block, w // block, block * block * c))
