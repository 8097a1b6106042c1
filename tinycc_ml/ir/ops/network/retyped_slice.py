"""retyped_slice: elements [offset, offset + size) of a flat vector, reshaped and read as another type of the same
storage (the integers kept, their quantisation another), or a narrower integer of a plain integer vector (each
element converted as C converts it: wrapped to the narrower width).

How a network of several inputs or outputs meets the C's one input vector and one score vector: the reader gives
a ``.tflite`` file of several inputs one flat input holding them in the file's order, each input a retyped slice of
it (the flat vector holds plain integer codes where the inputs' quantisations differ); a build of several outputs
joins them, each a retyped slice typed as the plain integers of its width where theirs differ; inputs of several
integer widths share a vector of the widest plain integers (TFLite Micro's seanet TRANSPOSE_CONV tests take an int32
output shape beside int16 values). Float tensors stay float32: the slice is then a copy.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.types import TensorType


def same_storage(a, b) -> bool:
    """Whether two element types store alike: both float32, or integers of one range (quantised or plain)."""
    if a.is_float or b.is_float:
        return a.is_float and b.is_float
    integral = (a.is_quantised or a.is_integer) and (b.is_quantised or b.is_integer)
    return integral and a.integer_range == b.integer_range


def narrows(a, b) -> bool:
    """Whether ``b`` is an integer type narrower than the plain signed integers ``a`` (a vector of inputs of several
    widths)."""
    return (a.is_integer and not a.is_quantised and not a.is_float and a.integer_range[0] < 0
            and (b.is_quantised or b.is_integer) and not b.is_float and b.bits < a.bits)


def _wrapped(values, declared) -> np.ndarray:
    """Values converted to the declared narrower integers as C converts them (two's complement wrap)."""
    bits, low = declared.bits, declared.integer_range[0]
    return ((np.asarray(values, np.int64) - low) & ((1 << bits) - 1)) + low


def _infer(ts, attrs, declared):
    (x,) = ts
    shape = tuple(int(d) for d in attrs["shape"])
    offset = int(attrs["offset"])
    need(x.rank == 1, f"the operand must be a flat vector, got shape {list(x.shape)}")
    need(all(d >= 1 for d in shape) and 0 <= offset and offset + math.prod(shape) <= x.size,
         f"{math.prod(shape)} elements from {offset} leave the vector of {x.size}")
    need(declared is not None, "retyped_slice needs the declared result type")
    need(same_storage(x.dtype, declared.dtype) or narrows(x.dtype, declared.dtype),
         f"{x.dtype} and {declared.dtype} are not stored alike")
    return TensorType(shape, declared.dtype, declared.layout)


def _part(value, attrs: dict, lead: int) -> np.ndarray:
    value = np.asarray(value)
    offset, shape = int(attrs["offset"]), [int(d) for d in attrs["shape"]]
    flat = value[..., offset:offset + math.prod(shape)]
    return flat.reshape(*value.shape[:lead], *shape)


def _fixed(call: FixedCall):
    part = _part(call.ins[0], call.attrs, np.ndim(call.ins[0]) - 1)
    x, out = call.in_types[0].dtype, call.type.dtype
    return _wrapped(part, out) if narrows(x, out) else part


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    dtype = node.type.dtype
    ctype = "float" if dtype.is_float else f"{'u' if dtype.kind == 'uint' else ''}int{dtype.bits}_t"
    read = em.at(x_name, f"{int(node.attrs['offset'])} + i")
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = ({ctype}){read};"]


register_op(OpDef(
    "retyped_slice", 1, _infer, lambda xs, a: _part(xs[0], a, np.ndim(xs[0]) - 1), {"offset": "int", "shape": "ints"},
    "elements [offset, offset + size) of a flat vector, reshaped, read as the declared type of the same storage "
    "(a network's several inputs in one input vector, its several outputs in one score vector)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _part(ins[0], attrs, np.ndim(ins[0]) - 1),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))
