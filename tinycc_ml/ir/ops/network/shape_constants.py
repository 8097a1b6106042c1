"""TFLite operators whose outputs the file's static shapes and constants determine: SHAPE, ZEROS_LIKE, FILL and
BROADCAST_ARGS lower to constants; BROADCAST_TO to copies (``take`` along each repeated axis, after a reshape
adding the leading axes). No op of their own: TFLite Micro computes nothing a compiler cannot compute first.

TFLite Micro's kernels: SHAPE writes int32 only; ZEROS_LIKE writes zero bytes (for int8: the integer 0, whatever the
zero point); FILL copies its scalar value (of the output's type) into a shape given by a constant; BROADCAST_TO takes
a constant shape of up to 5 dimensions.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.types import TensorType

STORED = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "bool": np.uint8}
MAX_BROADCAST_RANK = 5


def _constant(low, out, value: np.ndarray) -> None:
    """The output tensor as a constant of ``value`` (its declared shape and type)."""
    need(tuple(value.shape) == tuple(out.shape),
         f"{low.where} giving {out.name!r}: the tensor declares shape {list(out.shape)}, the operator computes "
         f"{list(value.shape)}")
    node = low.graph.add("const", [], {"value": np.ascontiguousarray(value)},
                         type=low.tensor_type(out, low.layout(out)), name=low.name_of(out))
    low.values[out.index] = node


@tflite_builtin("SHAPE", 77, inputs=(1, 1))
def lower_shape(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(out.type_name == "int32", f"SHAPE: a {out.type_name} output (TFLite Micro writes int32)")
    _constant(low, out, np.asarray(x.shape, dtype=np.int32))


@tflite_builtin("ZEROS_LIKE", 93, inputs=(1, 1))
def lower_zeros_like(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(x.type_name in ("float32", "int8", "int32", "int64") and out.type_name == x.type_name,
         f"ZEROS_LIKE of {x.type_name} to {out.type_name} (TFLite Micro: float32, int8, int32, int64, kept)")
    _constant(low, out, np.zeros(x.shape, dtype=STORED[x.type_name]))


@tflite_builtin("FILL", 94, inputs=(2, 2))
def lower_fill(low, options, ins, outs) -> None:
    dims, value, out = low.tensors[ins[0]], low.tensors[ins[1]], low.tensors[outs[0]]
    need(dims.data is not None, f"FILL: the shape {dims.name!r} must be a constant (TFLite Micro's Prepare)")
    need(value.data is not None and len(value.shape) == 0,
         f"FILL: the value {value.name!r} must be a constant scalar (a computed one is not supported)")
    need(value.type_name == out.type_name and value.type_name in ("float32", "int8", "int32"),
         f"FILL of a {value.type_name} value into {out.type_name} (TFLite Micro's Eval: float32, int8 or int32, "
         "kept)")
    if value.type_name == "int8":  # the stored integer copied: one quantisation makes it the same real
        need(value.scales.tolist() == out.scales.tolist() and value.zero_points.tolist() == out.zero_points.tolist(),
             "FILL: the value and the output must share their quantisation (TFLite Micro copies the integer)")
    shape = tuple(int(d) for d in low.ints(ins[0], "FILL", "shape").ravel())
    _constant(low, out, np.full(shape, value.data, dtype=STORED[value.type_name]))


@tflite_builtin("BROADCAST_ARGS", 145, inputs=(2, 2))
def lower_broadcast_args(low, options, ins, outs) -> None:
    a, b = (tuple(int(d) for d in low.ints(i, "BROADCAST_ARGS", "shape").ravel()) for i in ins)
    out = low.tensors[outs[0]]
    try:
        shape = np.broadcast_shapes(a, b)
    except ValueError:
        need(False, f"BROADCAST_ARGS: shapes {list(a)} and {list(b)} do not broadcast")
    _constant(low, out, np.asarray(shape, dtype=STORED[out.type_name]))


def broadcast_value(low, value: str, like, shape, name: str) -> str:
    """A computed or constant IR value broadcast to ``shape`` (numpy's rule) as copies: a reshape adding the leading
    axes, then a ``take`` repeating each axis of 1 (typed as TFLite tensor ``like``); the value itself when it has
    the shape already."""
    current = list(low.graph.type(value).shape)
    shape = [int(d) for d in shape]
    if current == shape:
        return value
    if low.graph.op(value) == "const":  # a constant broadcast at compile time: one constant of the shape
        dtype = low.graph.type(value).dtype
        data = np.ascontiguousarray(np.broadcast_to(low.graph.node(value).attrs["value"], shape))
        return low.graph.add("const", [], {"value": data}, type=TensorType(tuple(shape), dtype, ""), name=name)
    padded = [1] * (len(shape) - len(current)) + current
    if padded != current:
        value = low.step("reshape", [value], {"shape": list(padded)}, list(padded), like, f"{name}_ranked")
    for k, (d, s) in enumerate(zip(padded, shape)):
        if d != s:
            padded[k] = s
            value = low.step("take", [value], {"axis": k, "indices": [0] * s}, list(padded), like, f"{name}_axis{k}")
    return value


@tflite_builtin("BROADCAST_TO", 130, inputs=(2, 2))
def lower_broadcast_to(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    shape = tuple(int(d) for d in low.ints(ins[1], "BROADCAST_TO", "shape").ravel())
    need(len(x.shape) <= len(shape) <= MAX_BROADCAST_RANK,
         f"BROADCAST_TO: {list(x.shape)} to {list(shape)} (no fewer dimensions, at most {MAX_BROADCAST_RANK})")
    padded = (1,) * (len(shape) - len(x.shape)) + tuple(x.shape)
    need(all(d == s or d == 1 for d, s in zip(padded, shape)), f"BROADCAST_TO: {list(x.shape)} does not broadcast "
                                                              f"to {list(shape)}")
    need(x.type_name == out.type_name, f"BROADCAST_TO of {x.type_name} to {out.type_name}")
    value = broadcast_value(low, low.value(ins[0]), x, shape, f"{low.name_of(out)}_copy")
    low.add("reshape", [value], {"shape": list(shape)}, out)  # names the copies as the output
