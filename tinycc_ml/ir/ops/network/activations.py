"""Smooth and piecewise activations of network tensors, elementwise, one op each: ``logistic`` (sigmoid),
``tensor_tanh``, ``hard_swish``, ``hard_sigmoid`` (alpha x + beta clipped to [0, 1]), ``elu`` (alpha), ``silu``
(x sigmoid(x)), ``gelu`` (``approximate``: "none", the erf form, or "tanh"), as ONNX defines them.

Float: the function in float64, stored as float32 (the C: float32 with <math.h>; equal within float32 rounding).
Integer at 8 bits: a table of 256 entries, one per input integer: the function of the input's real value,
rounded to the nearest output integer (halves up) and saturated. So every output is the correctly rounded function
of its input's value: the error is at most half an output step (plus what saturation cuts), the bound a table can
state without any approximation argument. The table serves both 8-bit dialects: TFLite's int8 (asymmetric, the
zero points; the quantiser gives the output the calibrated range) and the project's pow2 int8 (``fx8``). The C
reads the table (flash on the microcontrollers) at the input integer + 128.

At fx16 (the project's int16; a table would take 65,536 entries), ``logistic`` and ``tensor_tanh`` compute TFLite
Micro's int16 kernels (a 256-step table of the sigmoid, interpolated linearly; the input rescaled by its
power-of-two scale times 3 * 2^12): the output fx16 at scale 15 (steps of 2^-15). Their error is measured
exhaustively, over all 65,536 inputs at every input scale from 0 to 15 (tests/ops/test_fixed16_sigmoid.py): at most
FIXED16_ERROR_BOUND from the true function. ``hard_swish`` (exact), ``hard_sigmoid``, ``silu``, ``gelu`` and
``elu`` compute ir/ops/fixed16_activations.py's forms, the output at a scale of its own, each with an error bound
stated there and proven over every int16 input (tests/ops/test_fixed16_activations.py).

``kernel`` "tflite" (``logistic`` and ``tensor_tanh`` read from a ``.tflite`` file): TFLite Micro's kernels instead
(``ir/ops/tflite_sigmoid.py``): at int8 its gemmlowp fixed point, again a table of the 256 inputs; at int16 (zero
points 0, output 2^-15) its interpolated table, in C step by step; at float its logistic's cut-offs (1 above
16.62, exp(x) below -9).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops import fixed16_activations, tflite_sigmoid
from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.windows import network_result, quantised_operand

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow of exp(-x) for very negative x


# op -> (float64 function of (x, attrs), float C expression of v, attributes)
FUNCTIONS = {
    "logistic": (lambda x, a: tflite_sigmoid.logistic_float(x) if a.get("kernel") == "tflite" else _sigmoid(x),
                 lambda a: (tflite_sigmoid.c_logistic_float("v") if a.get("kernel") == "tflite"
                            else "1.0f / (1.0f + expf(-v))"),
                 {"kernel": "str?"}),
    "tensor_tanh": (lambda x, a: np.tanh(x), lambda a: "tanhf(v)", {"kernel": "str?"}),
    "hard_swish": (lambda x, a: (_tflite_hard_swish(x) if a.get("kernel") == "tflite"
                                 else x * np.clip(x + 3.0, 0.0, 6.0) / 6.0),
                   lambda a: "v * (v < -3.0f ? 0.0f : (v > 3.0f ? 6.0f : v + 3.0f)) / 6.0f", {"kernel": "str?"}),
    "hard_sigmoid": (lambda x, a: np.clip(float(a["alpha"]) * x + float(a["beta"]), 0.0, 1.0),
                     lambda a: (f"(({_f(a['alpha'])} * v + {_f(a['beta'])}) < 0.0f ? 0.0f : (({_f(a['alpha'])} * v + "
                                f"{_f(a['beta'])}) > 1.0f ? 1.0f : {_f(a['alpha'])} * v + {_f(a['beta'])}))"),
                     {"alpha": "float", "beta": "float"}),
    "elu": (lambda x, a: (_tflite_elu(x) if a.get("kernel") == "tflite"
                          else np.where(x > 0, x, float(a["alpha"]) * np.expm1(np.minimum(x, 0.0)))),
            lambda a: ("(v < 0.0f ? TCM_EXPM1F(v) : v)" if a.get("kernel") == "tflite"
                       else f"(v > 0.0f ? v : {_f(a['alpha'])} * (expf(v) - 1.0f))"),
            {"alpha": "float", "kernel": "str?"}),
    "silu": (lambda x, a: x * _sigmoid(x), lambda a: "v / (1.0f + expf(-v))", {}),
    "gelu": (lambda x, a: (0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
                           if a["approximate"] == "tanh" else 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))),
             lambda a: ("0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))"
                        if a["approximate"] == "tanh" else "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))"),
             {"approximate": "str"}),
}
# the functions with an fx16 form in the project's fixed point: TFLite's int16 kernel (see the module's words),
# their output in steps of 2^-15
FIXED16_FUNCTIONS = ("logistic", "tensor_tanh")
FIXED16_ERROR_BOUND = 2.0**-13  # measured: sigmoid 1.27, tanh 2.45 steps of 2^-15 at worst (4 steps allowed)
# the ones computed by ir/ops/fixed16_activations.py, their output at a scale of its own
FIXED16_OWN_SCALE = fixed16_activations.FIXED16_OPS
INT16_REFUSAL = ("has no int16 form in the project's fixed point: compile the network at int8 (int8_dialect pow2 "
                 "or TFLite's) or float")


# op -> (int8 kernel of (q, input type, output type), int16 kernel of (q, multiplier, shift) or None)
TFLITE_KERNELS = {
    "logistic": (lambda q, x, y: tflite_sigmoid.logistic_int8(q, float(x.qscales[0]), x.zero_point),
                 tflite_sigmoid.logistic_int16),
    "tensor_tanh": (lambda q, x, y: tflite_sigmoid.tanh_int8(q, float(x.qscales[0]), x.zero_point),
                    tflite_sigmoid.tanh_int16),
    "hard_swish": (lambda q, x, y: tflite_sigmoid.hard_swish_int8(q, float(x.qscales[0]), x.zero_point,
                                                                  float(y.qscales[0]), y.zero_point), None),
    "elu": (lambda q, x, y: _tflite_elu_int8(q, x, y), None)}


# TFLite's float ELU calls expm1; avr-libc has none (there exp - 1, which loses bits near 0)
EXPM1F = """\
static inline float @expm1f(float v)
{
#if defined(__AVR__)
    return expf(v) - 1.0f;
#else
    return expm1f(v);
#endif
}
"""


def _tflite_elu(x):
    """TFLite's float ELU: expm1 below 0 (the float64 function rounded to float32 once), x above."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore"):
        return np.where(x < 0, np.expm1(np.minimum(x, 0).astype(np.float64)).astype(np.float32), x)


def _tflite_elu_int8(q, x, y) -> np.ndarray:
    """TFLite Micro's int8 ELU table (PopulateLookupTable): each input dequantised in float32, exp(v) - 1 below 0
    (expf rounded once, the subtraction in float32), times 1 / output scale in float32, rounded halves away, plus
    the zero point, saturated."""
    f32 = np.float32
    v = f32(x.qscales[0]) * (np.asarray(q, np.int64) - x.zero_point).astype(f32)
    transformed = np.where(v < 0, np.exp(np.minimum(v, 0).astype(np.float64)).astype(f32) - f32(1), v).astype(f32)
    scaled = (transformed * (f32(1) / f32(y.qscales[0]))).astype(f32).astype(np.float64)
    rounded = np.copysign(np.floor(np.abs(scaled) + 0.5), scaled)
    return np.clip(rounded + y.zero_point, -128, 127).astype(np.int64)


def _tflite_hard_swish(x):
    """TFLite's float HARD_SWISH, step by step in float32: x min(6, max(0, x + 3)) / 6."""
    x = np.asarray(x, dtype=np.float32)
    return x * np.minimum(np.float32(6), np.maximum(np.float32(0), x + np.float32(3))) / np.float32(6)


def _f(value) -> str:
    return f"{float(np.float32(value))!r}f"


def real_values(dtype, ints: np.ndarray) -> np.ndarray:
    """The real values of integers of an 8-bit type: pow2 fx8 or TFLite's per-tensor affine int8."""
    if dtype.is_fixed:
        return ints * 2.0 ** -dtype.scale
    return (ints - dtype.zero_point) * float(dtype.qscales[0])


def to_integers(dtype, reals: np.ndarray) -> np.ndarray:
    """Reals to the type's integers, rounded to nearest (halves up), saturated to int8."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype.is_fixed:
            ints = np.floor(reals * 2.0**dtype.scale + 0.5)
        else:
            ints = np.floor(reals / float(dtype.qscales[0]) + 0.5) + dtype.zero_point
    return np.clip(ints, -128, 127).astype(np.int64)  # as every layer's int8 saturates (arith.saturate)


def table(op: str, x_dtype, out_dtype, attrs: dict) -> np.ndarray:
    """The 256 outputs of the integers -128..127 (int64)."""
    if attrs.get("kernel") == "tflite":
        return TFLITE_KERNELS[op][0](np.arange(-128, 128), x_dtype, out_dtype)
    function = FUNCTIONS[op][0]
    with np.errstate(over="ignore", invalid="ignore"):
        return to_integers(out_dtype, function(real_values(x_dtype, np.arange(-128, 128, dtype=np.float64)), attrs))


def _infer(op: str):
    def infer(ts, attrs, declared):
        (x,) = ts
        if op == "gelu":
            need(attrs["approximate"] in ("none", "tanh"), f"approximate {attrs['approximate']!r}: none or tanh")
        for name in ("alpha", "beta"):
            if name in FUNCTIONS[op][2]:
                need(math.isfinite(float(attrs[name])), f"{name} {attrs[name]} is not a finite number")
        kernel = attrs.get("kernel")
        need(kernel in (None, "tflite") and (kernel is None or op in TFLITE_KERNELS),
             f"kernel {kernel!r}: {op} has none of that name")
        if kernel == "tflite" and x.dtype.is_quantised:
            return _tflite_result(op, x, declared)
        result = network_result(x, declared, x.shape, x.layout)
        if x.dtype.is_fixed and x.dtype.bits == 16 and op in FIXED16_FUNCTIONS:
            need(result.dtype.is_fixed and result.dtype.bits == 16 and result.dtype.scale == 15,
                 f"an fx16 {op} writes steps of 2^-15 (fx16 at scale 15), not {result.dtype}")
            _int16_parameters(op, x.dtype, result.dtype)
        elif x.dtype.is_fixed and x.dtype.bits == 16 and op in FIXED16_OWN_SCALE:
            need(result.dtype.is_fixed and result.dtype.bits == 16, f"an fx16 {op} writes fx16, not {result.dtype}")
            fixed16_activations.shifts(op, attrs, x.dtype.scale, result.dtype.scale)
        elif x.dtype.is_fixed:
            need(x.dtype.bits == 8 and result.dtype.is_fixed and result.dtype.bits == 8, f"{op} {INT16_REFUSAL}")
        elif x.dtype.is_quantised:
            quantised_operand(x, "input", 8)
            quantised_operand(result, "output", 8)
        return result
    return infer


def _tflite_result(op: str, x, declared):
    """TFLite Micro's int8 or int16 kernel: the checks of its Prepare."""
    bits = x.dtype.bits
    need(bits in ((8,) if TFLITE_KERNELS[op][1] is None else (8, 16)), f"input must be qi8"
         f"{'' if TFLITE_KERNELS[op][1] is None else ' or qi16'}, got {x.dtype}")
    result = network_result(x, declared, x.shape, x.layout, bits)
    quantised_operand(x, "input", bits, zero_point=bits == 8)
    quantised_operand(result, "output", bits, zero_point=bits == 8)
    if bits == 16:
        tflite_sigmoid.int16_parameters(op, float(x.dtype.qscales[0]), float(result.dtype.qscales[0]))
        return result
    if op == "hard_swish":
        tflite_sigmoid.hard_swish_parameters(float(x.dtype.qscales[0]), float(result.dtype.qscales[0]))
        return result
    tflite_sigmoid.int8_parameters(float(x.dtype.qscales[0]))
    need(op != "logistic" or result.dtype.zero_point == -128,
         f"an int8 logistic writes steps from -128: the output's zero point is {result.dtype.zero_point}")
    return result


def _real_scale(dtype) -> float:
    """The real value of one integer step: 2^-scale (the project's fixed point) or TFLite's scale."""
    return 2.0 ** -dtype.scale if dtype.is_fixed else float(dtype.qscales[0])


def _int16_parameters(op: str, x_dtype, out_dtype) -> tuple[int, int]:
    return tflite_sigmoid.int16_parameters(op, _real_scale(x_dtype), _real_scale(out_dtype))


def _register(op: str) -> None:
    function, c_expression, attrs = FUNCTIONS[op]

    def evaluate(xs, a):
        return function(np.asarray(xs[0], dtype=np.float64), a).astype(np.float32)

    def fixed(call: FixedCall):
        x = call.in_types[0].dtype
        if x.bits == 16 and x.is_fixed and op in FIXED16_OWN_SCALE:
            return fixed16_activations.fixed16(op, call.ins[0], call.attrs, x.scale, call.type.dtype.scale)
        if x.bits == 16 and (x.is_quantised or x.is_fixed):  # TFLite's int16 kernel (fx16: the same arithmetic)
            return TFLITE_KERNELS[op][1](call.ins[0], *_int16_parameters(op, x, call.type.dtype))
        values = table(op, x, call.type.dtype, call.attrs)
        return values[np.asarray(call.ins[0], dtype=np.int64) + 128]

    def c_float(em, node) -> list[str]:
        (x_name,) = node.inputs
        expression = c_expression(node.attrs)
        if "TCM_EXPM1F" in expression:
            expression = expression.replace("TCM_EXPM1F", c_helper(em, "expm1f", EXPM1F))
        return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
                f"    const float v = {em.at(x_name, 'i')};",
                f"    {em.var(node.name)}[i] = {expression};",
                "}"]

    def c_fixed(em, node) -> list[str]:
        (x_name,) = node.inputs
        x = em.graph.type(x_name).dtype
        if x.bits == 16 and x.is_fixed and op in FIXED16_OWN_SCALE:
            body = fixed16_activations.c_block(em, op, node.attrs, em.at(x_name, "i"), f"{em.var(node.name)}[i]",
                                               x.scale, node.type.dtype.scale)
            return [f"for (long i = 0; i < {node.type.size}; ++i)"] + body
        if x.bits == 16:  # TFLite's int16 kernel, also the fx16 sigmoid and tanh
            return _c_int16(op, em, node)
        values = table(op, em.graph.type(x_name).dtype, node.type.dtype, node.attrs)
        symbol = em.add_const_array(em.sym(f"{node.name}_table"), values.astype(np.int8), "int8_t",
                                    f"%{node.name}: {op} of each input integer -128..127, correctly rounded")
        read = em.target.read_const(symbol, f"(int){em.at(x_name, 'i')} + 128", "int8_t")
        return [f"for (long i = 0; i < {node.type.size}; ++i)",
                f"    {em.var(node.name)}[i] = {read};"]

    register_op(OpDef(
        op, 1, _infer(op), evaluate, dict(attrs),
        f"{op} of each element (ONNX's); at 8 bits a table of the correctly rounded function of every input integer",
        evaluate_rows=lambda ins, batched, a, n, rank: evaluate(ins, a), fixed=fixed,
        c={"fixed": c_fixed, "float": c_float},
        unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def _c_int16(op: str, em, node) -> list[str]:
    (x_name,) = node.inputs
    multiplier, shift = _int16_parameters(op, em.graph.type(x_name).dtype, node.type.dtype)
    body = tflite_sigmoid.c_int16_block(em, op, em.at(x_name, "i"), f"{em.var(node.name)}[i]", multiplier, shift)
    return [f"for (long i = 0; i < {node.type.size}; ++i)"] + body


for _op in FUNCTIONS:
    _register(_op)


@tflite_builtin("LOGISTIC", 14)
def lower_tflite_logistic(low, options, ins, outs) -> None:
    low.add("logistic", [low.value(ins[0])], {"kernel": "tflite"}, low.tensors[outs[0]])


@tflite_builtin("HARD_SWISH", 117)
def lower_tflite_hard_swish(low, options, ins, outs) -> None:
    low.add("hard_swish", [low.value(ins[0])], {"kernel": "tflite"}, low.tensors[outs[0]])


@tflite_builtin("ELU", 111)
def lower_tflite_elu(low, options, ins, outs) -> None:
    low.add("elu", [low.value(ins[0])], {"alpha": 1.0, "kernel": "tflite"}, low.tensors[outs[0]])


@tflite_builtin("TANH", 28)
def lower_tflite_tanh(low, options, ins, outs) -> None:
    low.add("tensor_tanh", [low.value(ins[0])], {"kernel": "tflite"}, low.tensors[outs[0]])
