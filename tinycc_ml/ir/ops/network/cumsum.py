"""CUMSUM: running sums along one axis, forward or reversed, inclusive or exclusive.

TFLite Micro's kernel (cumsum.cc): float32 accumulated from 0 in order. int8 (input and output quantisations may
differ): each value less the input's zero point, shifted left 20 bits, times input scale / (2 x input scale) (Q31),
accumulated in int32 from the scaled zero-point offset (the reference's "accumulator = 0" is the offset: one term of
-zero point more, reproduced), requantised by 2 x input scale / (2^20 x output scale), plus the output's zero point,
saturated. An exclusive sum writes the accumulator before adding the value.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.add_n import LEFT_SHIFT, float_or_int8_result, parameters
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, wrap32

CUMSUM_OPTIONS = 102  # schema.fbs' BuiltinOptions: CumsumOptions { exclusive, reverse }


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.rank >= 1, "CUMSUM of a scalar")
    need(0 <= int(attrs["axis"]) < x.rank, f"axis {attrs['axis']} of a {x.rank}-dimensional tensor")
    return float_or_int8_result(x, declared, "CUMSUM")


def _along(values: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """The values with ``axis`` last, in summing order."""
    v = np.moveaxis(values, axis, -1)
    return v[..., ::-1] if reverse else v


def _back(values: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return np.moveaxis(values[..., ::-1] if reverse else values, -1, axis)


def _running(terms: np.ndarray, start, exclusive: bool, add) -> np.ndarray:
    """Running sums of ``terms`` along the last axis from ``start`` (``add`` the type's addition, in order)."""
    sums, accumulator = np.empty_like(terms), np.broadcast_to(start, terms.shape[:-1]).copy()
    for k in range(terms.shape[-1]):
        if exclusive:
            sums[..., k] = accumulator
            accumulator = add(accumulator, terms[..., k])
        else:
            accumulator = add(accumulator, terms[..., k])
            sums[..., k] = accumulator
    return sums


def _evaluate_rows(xs, batched, attrs, n, rank):
    if not batched[0]:
        return None
    axis, reverse = int(attrs["axis"]) + 1, bool(attrs.get("reverse", 0))
    v = _along(np.asarray(xs[0], dtype=np.float32), axis, reverse)
    sums = _running(v, np.float32(0), bool(attrs.get("exclusive", 0)), lambda a, b: (a + b).astype(np.float32))
    return _back(sums, axis, reverse).astype(np.float64)


def _evaluate(xs, attrs):
    return _evaluate_rows([np.asarray(xs[0])[None]], [True], attrs, 1, None)[0]


def _fixed(call):
    x, out = call.in_types[0].dtype, call.type.dtype
    (mi, si), (mo, so) = parameters(x, out)
    offset, axis, reverse = -int(x.zero_point), int(call.attrs["axis"]) + 1, bool(call.attrs.get("reverse", 0))
    v = _along(np.asarray(call.ins[0], dtype=np.int64), axis, reverse)
    terms = multiply_by_quantized_multiplier((v + offset) << LEFT_SHIFT, mi, si)
    start = multiply_by_quantized_multiplier(np.int64(offset << LEFT_SHIFT), mi, si)
    sums = _running(terms, start, bool(call.attrs.get("exclusive", 0)), lambda a, b: wrap32(a + b))
    return _back(np.clip(multiply_by_quantized_multiplier(sums, mo, so) + out.zero_point, -128, 127), axis, reverse)


def _c(em, node) -> list[str]:
    shape, axis = node.type.shape, int(node.attrs["axis"])
    inner, depth, outer = int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    reverse, exclusive = bool(node.attrs.get("reverse", 0)), bool(node.attrs.get("exclusive", 0))
    x, y = em.var(node.inputs[0]), em.var(node.name)
    step = "long d = " + (f"{depth - 1} - k" if reverse else "k") + ";"
    index = f"o + d * {outer} + i * {depth * outer}"
    if node.type.dtype.is_float:
        kind, start, term = "float", "0.0f", f"{x}[at]"
        store = f"{y}[at] = sum;"
    else:
        xt, out = em.graph.type(node.inputs[0]).dtype, node.type.dtype
        (mi, si), (mo, so) = parameters(xt, out)
        req, offset = requantise(em), -int(xt.zero_point)
        kind = "uint32_t"
        start = f"(uint32_t){int(multiply_by_quantized_multiplier(np.int64(offset << LEFT_SHIFT), mi, si))}"
        term = f"(uint32_t){req}(((int32_t){x}[at] + {offset}) * {1 << LEFT_SHIFT}, {mi}, {si})"
        store = f"{y}[at] = {clamp_to(em, 8)}({req}((int32_t)sum, {mo}, {so}) + {out.zero_point}, -128, 127);"
    update = [f"        const {kind} value = {term};", "        sum += value;"]
    body = ([f"        {store}", *update] if exclusive else [*update, f"        {store}"])
    return ["for (long i = 0; i < " + str(inner) + "; ++i)",
            f"for (long o = 0; o < {outer}; ++o) {{",
            f"    {kind} sum = {start};",
            f"    for (long k = 0; k < {depth}; ++k) {{",
            f"        {step}",
            f"        const long at = {index};",
            *body,
            "    }",
            "}"]


register_op(OpDef(
    "cumsum", 1, _infer, _evaluate, {"axis": "int", "exclusive": "int?", "reverse": "int?"},
    "TFLite's CUMSUM along one axis (exclusive, reverse): float32 from 0 in order; int8 as TFLite Micro's kernel",
    evaluate_rows=_evaluate_rows, fixed=_fixed, c={"float": _c, "fixed": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("CUMSUM", 128, options=CUMSUM_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    axis_values = low.ints(ins[1], "CUMSUM", "axis").ravel()
    need(axis_values.size == 1, f"CUMSUM: the axis must be one value, got {axis_values.tolist()}")
    rank, axis = len(x.shape), int(axis_values[0])
    need(-rank <= axis < rank, f"CUMSUM: axis {axis} of a {rank}-dimensional tensor")
    exclusive = int(bool(options.scalar(0, "B", 0, "exclusive"))) if options is not None else 0
    reverse = int(bool(options.scalar(1, "B", 0, "reverse"))) if options is not None else 0
    low.add("cumsum", [low.value(ins[0])], {"axis": axis % rank, "exclusive": exclusive, "reverse": reverse},
            low.tensors[outs[0]])
