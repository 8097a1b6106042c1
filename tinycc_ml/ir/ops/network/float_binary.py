"""TFLite's float32 DIV, FLOOR_DIV and FLOOR_MOD of two broadcast tensors: one op ``float_binary`` whose ``function``
names one (TFLite Micro runs FLOOR_DIV and FLOOR_MOD on float32 only; DIV's int32 form is ``integer_div``).

DIV: a / b in float32, clamped by the fused activation. FLOOR_DIV: floor of the quotient computed in double, as
TFLite's FloorDiv (the AVR's double is float: there the quotient is rounded once more, which can move a result that
lies within an ulp below an integer). FLOOR_MOD: fmodf(a, b), plus b where the remainder's sign differs from b's.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper, float_activation
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import ACTIVATIONS, apply_activation
from tinycc_ml.ir.types import TensorType

F32 = np.float32
DIV_OPTIONS = 29  # schema.fbs' BuiltinOptions: DivOptions { fused_activation_function }


def _floor_mod(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.fmod(a, b).astype(F32)
        return np.where((r != 0) & ((b < 0) != (r < 0)), (r + b).astype(F32), r)


def _floor_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor(a.astype(np.float64) / b.astype(np.float64)).astype(F32)


def _div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a / b).astype(F32)


FLOOR_MOD_C = """\
static inline float @floor_mod(float a, float b)
{
    const float r = fmodf(a, b);
    return (r != 0.0f && ((b < 0.0f) != (r < 0.0f))) ? r + b : r;
}
"""
FLOOR_DIV_C = """\
static inline float @floor_div(float a, float b)
{
    return (float)floor((double)a / (double)b);
}
"""
FUNCTIONS = {"div": (_div, None), "floor_div": (_floor_div, ("floor_div", FLOOR_DIV_C)),
             "floor_mod": (_floor_mod, ("floor_mod", FLOOR_MOD_C))}


def _infer(ts, attrs, declared):
    function = attrs.get("function")
    need(function in FUNCTIONS, f"function {function!r}: one of {', '.join(FUNCTIONS)}")
    need(len(ts) == 2, f"{function} takes two operands, got {len(ts)}")
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    a, b = ts
    need(a.dtype.is_float and b.dtype.is_float, f"{function} takes float32 tensors, got {a.dtype} and {b.dtype}")
    shape = broadcast_shape(a.shape, b.shape, function)
    return TensorType(shape, a.dtype, a.layout if a.rank >= b.rank else b.layout)


def _evaluate(xs, attrs):
    a, b = (np.asarray(v, dtype=F32) for v in xs)
    value = FUNCTIONS[attrs["function"]][0](a, b)
    return apply_activation(value, attrs.get("activation", "none")).astype(F32).astype(np.float64)


def _c(em, node) -> list[str]:
    helper = FUNCTIONS[node.attrs["function"]][1]
    if helper is None:
        activation = float_activation(em, node.attrs.get("activation", "none"))
        return c_loop(em, node, lambda a, b: f"{activation}(({a}) / ({b}))" if activation else f"({a}) / ({b})")
    name = c_helper(em, *helper)
    return c_loop(em, node, lambda a, b: f"{name}({a}, {b})")


register_op(OpDef(
    "float_binary", 2, _infer, _evaluate, {"function": "str", "activation": "str?"},
    "TFLite's float32 DIV (a fused activation), FLOOR_DIV and FLOOR_MOD of two broadcast tensors",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    c={"float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "fixed": "float32 only",
                 "c_fixed": "float32 only"}))


def lower_float_div(low, options, ins, outs) -> None:
    """DIV of float32 tensors (integer_arith's DIV lowering sends them here)."""
    low.add("float_binary", [low.value(ins[0]), low.value(ins[1])],
            {"function": "div", "activation": low.activation(options, 0, "DIV")}, low.tensors[outs[0]])


def _lower(function: str, name: str):
    def lower(low, options, ins, outs) -> None:
        for i in ins:
            need(low.tensors[i].type_name == "float32",
                 f"{name}: {low.tensors[i].type_name} tensors (TFLite Micro's kernel takes float32)")
        low.add("float_binary", [low.value(ins[0]), low.value(ins[1])], {"function": function}, low.tensors[outs[0]])
    return lower


tflite_builtin("FLOOR_DIV", 90, inputs=(2, 2))(_lower("floor_div", "FLOOR_DIV"))
tflite_builtin("FLOOR_MOD", 95, inputs=(2, 2))(_lower("floor_mod", "FLOOR_MOD"))
