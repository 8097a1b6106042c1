"""REDUCE_ALL: the logical AND of a bool tensor over axes (TFLite Micro's reduce.cc, ReduceGeneric from true)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.reduce import REDUCER_OPTIONS, reduced_axes, reduced_shape
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import BOOL, TensorType


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.dtype == BOOL, f"REDUCE_ALL takes a bool tensor (TFLite Micro's kernel), got {x.dtype}")
    keep = int(attrs["keep_dims"])
    return TensorType(reduced_shape(x.shape, attrs), BOOL, x.layout if keep else "")


def _all(values, rank: int, attrs: dict) -> np.ndarray:
    """Over any leading (row) axes; ``rank``: the input's."""
    values = np.asarray(values)
    lead = values.ndim - rank
    axes = tuple(lead + a for a in reduced_axes(attrs, rank))
    return np.all(values != 0, axis=axes, keepdims=bool(int(attrs["keep_dims"])))


def _c(em, node) -> list[str]:
    x_name = node.inputs[0]
    x = em.graph.type(x_name)
    axes = set(reduced_axes(node.attrs, x.rank))
    kept = [k for k in range(x.rank) if k not in axes]
    out_strides = {k: int(np.prod([x.shape[j] for j in kept if j > k])) for k in kept}
    y = em.var(node.name)
    lines = [f"for (long o = 0; o < {node.type.size}; ++o)", f"    {y}[o] = 1;",
             f"for (long i = 0; i < {x.size}; ++i) {{", "    long rest = i, o = 0;"]
    for k in reversed(range(x.rank)):
        if k in axes:
            lines.append(f"    rest /= {x.shape[k]};")
        else:
            lines.append(f"    o += (rest % {x.shape[k]}) * {out_strides[k]};")
            lines.append(f"    rest /= {x.shape[k]};")
    lines += ["    (void)rest;", f"    if (!{em.at(x_name, 'i')})", f"        {y}[o] = 0;", "}"]
    return lines


register_op(OpDef(
    "reduce_all", 1, _infer, lambda xs, attrs: _all(xs[0], np.ndim(xs[0]), attrs).astype(np.float64),
    {"axes": "ints", "keep_dims": "int"},
    "TFLite's REDUCE_ALL: the logical AND of a bool tensor over axes",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _all(ins[0], np.ndim(ins[0]) - (1 if batched[0] else 0),
                                                            attrs).astype(np.float64),
    fixed=lambda call: _all(call.ins[0], call.in_types[0].rank, call.attrs).astype(np.int64),
    c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("REDUCE_ALL", 140, options=REDUCER_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    need(x.type_name == "bool", f"REDUCE_ALL: {x.type_name} tensors (TFLite Micro takes bool)")
    rank = len(x.shape)
    given = low.ints(ins[1], "REDUCE_ALL", "axis").ravel().tolist()
    need(given and all(-rank <= a < rank for a in given), f"REDUCE_ALL: axes {given} of a {rank}-dimensional input")
    keep = int(bool(options.scalar(0, "B", 0, "keep_dims"))) if options is not None else 0
    low.add("reduce_all", [low.value(ins[0])], {"axes": sorted({int(a) % rank for a in given}), "keep_dims": keep},
            low.tensors[outs[0]])
