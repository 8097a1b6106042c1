"""Elementwise float32 functions, one op ``float_unary`` whose ``function`` names one: TFLite's ABS, NEG, FLOOR, CEIL,
ROUND (halves to even: TFLite's RoundToNearest), SQUARE, SQRT, RSQRT (1 / sqrt), EXP, LOG, SIN, COS, and ONNX's
functions that TFLite has no builtin for: SOFTPLUS log(1 + e^x), MISH x tanh(softplus(x)), SELU (gamma (x > 0 ? x :
alpha (e^x - 1)), attributes alpha and gamma) and CELU (max(0, x) + min(0, alpha (e^(x / alpha) - 1)), attribute
alpha).

TFLite Micro runs its functions on float32 tensors (ABS and RSQRT also on quantised ones: ``quantised_unary.py``). The
C calls <math.h>'s float functions; ABS, NEG, FLOOR, CEIL, ROUND, SQUARE, SQRT and RSQRT are exact in IEEE arithmetic,
so they equal TFLite Micro's on every target; the others are the C library's, whose last bit may differ from one
library to another (the interpreter rounds the float64 function once; SELU and CELU step by step, as their C).
SOFTPLUS is x + log1p(e^-x) above 0 and
log1p(e^x) below, as onnxruntime computes it (no overflow for large |x|); SELU and CELU take e^x - 1 below 0 as
onnxruntime does (not expm1: its values near 0 are onnxruntime's, to float32 rounding of e^x). avr-libc has no
log1p: there log(1 + u) corrected by u / ((1 + u) - 1) (Goldberg's).
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


def _softplus(v):
    return np.logaddexp(0.0, v)


def _exp_less_one(v):
    """e^v - 1 as the C computes it (and onnxruntime): e^v rounded to float32, then less 1 in float32."""
    return (np.exp(v.astype(np.float64)).astype(F32) - F32(1)).astype(np.float64)


def _selu(v, p):
    below = (F32(p["alpha"]) * _exp_less_one(np.minimum(v, 0)).astype(F32)).astype(np.float64)
    return p["gamma"] * np.where(v > 0, v, below)


def _celu(v, p):
    return np.where(v > 0, v, p["alpha"] * _exp_less_one((np.minimum(v, 0) / F32(p["alpha"])).astype(F32)))


# function -> (float32 semantics, C expression of v, TFLite builtin name, its number: None for ONNX's alone)
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
    "softplus": (_in64(_softplus), "@softplus(v)", None, None),
    "mish": (_in64(lambda v: v * np.tanh(_softplus(v))), "v * tanhf(@softplus(v))", None, None),
    # semantics of (v, the parameters); ALPHA and GAMMA in the C: their float32 values
    "selu": (_selu, "(v > 0.0f ? GAMMA * v : GAMMA * (ALPHA * (expf(v) - 1.0f)))", None, None),
    "celu": (_celu, "(v > 0.0f ? v : ALPHA * (expf(v / ALPHA) - 1.0f))", None, None),
}
# the parameterised functions' attributes with ONNX's defaults
PARAMETERS = {"selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
              "celu": {"alpha": 1.0}}


def parameters(attrs: dict) -> dict[str, float]:
    """The function's attributes as float32 values (ONNX's defaults where absent)."""
    return {k: float(np.float32(attrs.get(k, default))) for k, default in PARAMETERS.get(attrs["function"], {}).items()}


def _infer(ts, attrs, declared):
    (x,) = ts
    function = attrs.get("function")
    need(function in FUNCTIONS, f"function {function!r}: one of {', '.join(FUNCTIONS)}")
    extra = sorted(k for k in ("alpha", "gamma") if k in attrs and k not in PARAMETERS.get(function, {}))
    need(not extra, f"function {function!r} takes no attribute {', '.join(extra)}")
    need(function != "celu" or parameters(attrs)["alpha"] != 0, "celu: alpha 0 (ONNX's Celu divides by alpha)")
    need(x.dtype.is_float, f"float_unary takes f32 tensors, got {x.dtype}")
    return TensorType(x.shape, x.dtype, x.layout)


def _evaluate(xs, attrs):
    function = attrs["function"]
    with np.errstate(all="ignore"):
        if function in PARAMETERS:
            return _in64(lambda v: FUNCTIONS[function][0](v, parameters(attrs)))(np.asarray(xs[0], dtype=F32))
        return FUNCTIONS[function][0](np.asarray(xs[0], dtype=F32))


# halves to even with one floorf (avr-libc has no rintf)
ROUND_HALF_EVEN = """\
static inline float @round_half_even(float v)
{
    const float low = floorf(v), rest = v - low;
    return (rest < 0.5f || (rest == 0.5f && low * 0.5f == floorf(low * 0.5f))) ? low : low + 1.0f;
}
"""


# log(1 + u): avr-libc has no log1pf; there log(1 + u) times u / ((1 + u) - 1), exact to a few ulps (Goldberg)
LOG1PF = """\
static inline float @log1pf(float u)
{
#if defined(__AVR__)
    const float w = 1.0f + u;
    return w == 1.0f ? u : logf(w) * (u / (w - 1.0f));
#else
    return log1pf(u);
#endif
}
"""
# onnxruntime's Softplus: no overflow of e^x for large |x|
SOFTPLUS = """\
static inline float @softplus(float v)
{
    return v > 0.0f ? v + LOG1PF(expf(-v)) : LOG1PF(expf(v));
}
"""


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    expression = FUNCTIONS[node.attrs["function"]][1]
    for key, value in parameters(node.attrs).items():
        expression = expression.replace(key.upper(), f"{value!r}f")
    if "@round_half_even" in expression:
        expression = expression.replace("@round_half_even", c_helper(em, "round_half_even", ROUND_HALF_EVEN))
    if "@softplus" in expression:
        log1p = c_helper(em, "log1pf", LOG1PF)
        expression = expression.replace("@softplus", c_helper(em, "softplus", SOFTPLUS.replace("LOG1PF", log1p)))
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float v = {em.at(x_name, 'i')};",
            f"    {em.var(node.name)}[i] = {expression};",
            "}"]


register_op(OpDef(
    "float_unary", 1, _infer, _evaluate, {"function": "str", "alpha": "float?", "gamma": "float?"},
    "float32 elementwise functions (function: TFLite's abs, neg, floor, ceil, round, square, sqrt, rsqrt, exp, log, "
    "sin, cos; ONNX's softplus, mish, selu (alpha, gamma), celu (alpha))",
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
    if _name is not None:
        tflite_builtin(_name, _code)(_lowering(_function))
