"""TFLite's elementwise float32 functions, one op ``float_unary`` whose ``function`` names one: ABS, NEG, FLOOR, CEIL,
ROUND (halves to even: TFLite's RoundToNearest), SQUARE, SQRT, RSQRT (1 / sqrt), EXP, LOG, SIN, COS.

TFLite Micro runs these on float32 tensors (ABS and RSQRT also on quantised ones: ``quantised_unary.py``). The C
calls <math.h>'s float functions; ABS, NEG, FLOOR, CEIL, ROUND, SQUARE, SQRT and RSQRT are exact in IEEE arithmetic,
so they equal TFLite Micro's on every target; EXP, LOG, SIN and COS are the C library's, whose last bit may differ
from one library to another (the interpreter rounds the float64 function once).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType

F32 = np.float32
FLOAT_ONLY = "float32 only (as TFLite Micro runs most of them; its quantised ABS and RSQRT: quantised_unary)"


def _rsqrt(v):
    with np.errstate(divide="ignore", invalid="ignore"):
        return F32(1) / np.sqrt(v)


def _in64(function):
    """The float64 function rounded to float32 once."""
    def apply(v):
        with np.errstate(all="ignore"):
            return function(v.astype(np.float64)).astype(F32)
    return apply


# function -> (float32 semantics, C expression of v, TFLite builtin name, its number)
FUNCTIONS = {
    "abs": (np.abs, "fabsf(v)", "ABS", 101),
    "neg": (np.negative, "-v", "NEG", 59),
    "floor": (np.floor, "floorf(v)", "FLOOR", 8),
    "ceil": (np.ceil, "ceilf(v)", "CEIL", 104),
    "round": (np.rint, "@round_half_even(v)", "ROUND", 116),  # TFLite's RoundToNearest (C: ROUND_HALF_EVEN)
    "square": (lambda v: v * v, "v * v", "SQUARE", 92),
    "sqrt": (np.sqrt, "sqrtf(v)", "SQRT", 75),
    "rsqrt": (_rsqrt, "1.0f / sqrtf(v)", "RSQRT", 76),
    "exp": (_in64(np.exp), "expf(v)", "EXP", 47),
    "log": (_in64(np.log), "logf(v)", "LOG", 73),
    "sin": (_in64(np.sin), "sinf(v)", "SIN", 66),
    "cos": (_in64(np.cos), "cosf(v)", "COS", 108),
}


def _infer(ts, attrs, declared):
    (x,) = ts
    need(attrs.get("function") in FUNCTIONS, f"function {attrs.get('function')!r}: one of {', '.join(FUNCTIONS)}")
    need(x.dtype.is_float, f"float_unary takes f32 tensors, got {x.dtype}")
    return TensorType(x.shape, x.dtype, x.layout)


def _evaluate(xs, attrs):
    with np.errstate(all="ignore"):
        return FUNCTIONS[attrs["function"]][0](np.asarray(xs[0], dtype=F32))


# halves to even with one floorf (avr-libc has no rintf)
ROUND_HALF_EVEN = """\
static inline float @round_half_even(float v)
{
    const float low = floorf(v), rest = v - low;
    return (rest < 0.5f || (rest == 0.5f && low * 0.5f == floorf(low * 0.5f))) ? low : low + 1.0f;
}
"""


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    expression = FUNCTIONS[node.attrs["function"]][1]
    if "@round_half_even" in expression:
        expression = expression.replace("@round_half_even", c_helper(em, "round_half_even", ROUND_HALF_EVEN))
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float v = {em.at(x_name, 'i')};",
            f"    {em.var(node.name)}[i] = {expression};",
            "}"]


register_op(OpDef(
    "float_unary", 1, _infer, _evaluate, {"function": "str"},
    "TFLite's float32 elementwise functions (function: abs, neg, floor, ceil, round, square, sqrt, rsqrt, exp, log, "
    "sin, cos)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs),
    c={"float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "fixed": FLOAT_ONLY, "c_fixed": FLOAT_ONLY}))


def _lowering(function: str):
    def lower(low, options, ins, outs) -> None:
        x = low.tensors[ins[0]]
        name = FUNCTIONS[function][2]
        if function in ("abs", "rsqrt") and x.type_name in ("int8", "int16"):  # TFLite Micro's integer kernels
            low.add("quantised_unary", [low.value(ins[0])], {"function": function}, low.tensors[outs[0]])
            return
        need(x.type_name == "float32", f"{name}: {x.type_name} tensors (float32 is supported)")
        low.add("float_unary", [low.value(ins[0])], {"function": function}, low.tensors[outs[0]])
    return lower


for _function, (_, _, _name, _code) in FUNCTIONS.items():
    tflite_builtin(_name, _code)(_lowering(_function))
