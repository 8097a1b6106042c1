"""ARG_MAX and ARG_MIN: the index (int32) of the largest (smallest) element along one axis, the axis dropped; the
first such index on ties, as TFLite's reference kernel keeps the first (it replaces only on a strict comparison).

Float: TFLite Micro's plain comparison (GreaterFn / LessFn): a NaN never replaces the element held, and nothing
replaces a NaN held (a run starting with NaN gives 0). Quantised: the stored integers compared (a positive scale
keeps their order). The result is plain int32 (TFLite Micro writes int32 indices only).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType, integer

INDEX = integer(32)


def _infer(ts, attrs, declared):
    (x,) = ts
    axis = int(attrs["axis"])
    need(attrs["which"] in ("max", "min"), f"which {attrs['which']!r}: max or min")
    need(0 <= axis < x.rank, f"axis {axis} of a {x.rank}-dimensional tensor")
    need(x.dtype.is_float or x.dtype.is_quantised or x.dtype.is_fixed,
         f"operand must be f32 or integers, got {x.dtype}")
    need(declared is None or declared.dtype == INDEX, f"the result is int32 indices, not {declared}")
    shape = tuple(d for k, d in enumerate(x.shape) if k != axis)
    return TensorType(shape, INDEX, "")


def _indices(values, axis: int, which: str) -> np.ndarray:
    """Along ``axis`` (of the full array, rows included): TFLite's scan, first index on ties."""
    values = np.moveaxis(np.asarray(values), axis, 0)
    held, index = values[0].copy(), np.zeros(values.shape[1:], dtype=np.int64)
    for i in range(1, values.shape[0]):
        candidate = values[i]
        with np.errstate(invalid="ignore"):  # NaN compares false, as in C
            better = candidate > held if which == "max" else candidate < held
        held = np.where(better, candidate, held)
        index = np.where(better, i, index)
    return index


def _rows(ins, attrs, rank: int) -> np.ndarray:
    value = np.asarray(ins[0])
    return _indices(value, value.ndim - rank + int(attrs["axis"]), attrs["which"])


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    axis = int(node.attrs["axis"])
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    size = x.shape[axis]
    cmp = ">" if node.attrs["which"] == "max" else "<"
    ctype = "float" if x.dtype.is_float else f"int{x.dtype.bits}_t"
    better = f"(v {cmp} held)"
    return ["{",
            f"    for (long outer = 0; outer < {outer}; ++outer)",
            f"    for (long inner = 0; inner < {inner}; ++inner) {{",
            f"        {ctype} held = {em.at(x_name, f'outer * {size * inner} + inner')};",
            "        int32_t index = 0;",
            f"        for (int32_t i = 1; i < {size}; ++i) {{",
            f"            const {ctype} v = {em.at(x_name, f'(outer * {size} + i) * {inner} + inner')};",
            f"            if {better} {{",
            "                held = v;",
            "                index = i;",
            "            }",
            "        }",
            f"        {em.at(node.name, f'outer * {inner} + inner') if node.type.rank else em.at(node.name, '0')}"
            " = index;",
            "    }",
            "}"]


register_op(OpDef(
    "arg_reduce", 1, _infer,
    lambda xs, attrs: _indices(np.asarray(xs[0]), int(attrs["axis"]), attrs["which"]).astype(np.float64),
    {"axis": "int", "which": "str"},
    "TFLite's ARG_MAX / ARG_MIN (which: max or min): the int32 index of the extreme along an axis, the first on "
    "ties (a NaN compares false, as in TFLite Micro)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _rows(ins, attrs, np.ndim(ins[0]) - 1).astype(np.float64),
    fixed=lambda call: _rows(call.ins, call.attrs, call.in_types[0].rank),
    c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

ARG_MAX_OPTIONS, ARG_MIN_OPTIONS = 40, 57  # schema.fbs' BuiltinOptions: { output_type: TensorType }


def _lower(low, op: str, which: str, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(x.type_name in ("float32", "int8"), f"{op}: {x.type_name} tensors (TFLite Micro takes float32 and int8)")
    need(out.type_name == "int32", f"{op}: {out.type_name} indices (TFLite Micro writes int32)")
    rank = len(x.shape)
    given = low.ints(ins[1], op, "axis").ravel().tolist()
    need(len(given) == 1 and -rank <= given[0] < rank, f"{op}: axis {given} of a {rank}-dimensional input")
    low.add("arg_reduce", [low.value(ins[0])], {"axis": int(given[0]) % rank, "which": which}, out)


@tflite_builtin("ARG_MAX", 56, options=ARG_MAX_OPTIONS, inputs=(2, 2))
def lower_arg_max(low, options, ins, outs) -> None:
    _lower(low, "ARG_MAX", "max", ins, outs)


@tflite_builtin("ARG_MIN", 79, options=ARG_MIN_OPTIONS, inputs=(2, 2))
def lower_arg_min(low, options, ins, outs) -> None:
    _lower(low, "ARG_MIN", "min", ins, outs)
