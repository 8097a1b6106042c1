"""TFLite Micro's quantised ABS (int8, int16) and RSQRT (int8): ``quantised_unary`` (function abs or rsqrt).

ABS (elementwise.cc, AbsEvalQuantized): |q - input zero point|, plus the output zero point where the scales are equal,
else requantised by input scale / output scale (divided in float32, QuantizeMultiplier, MultiplyByQuantizedMultiplier)
first; saturated. RSQRT (RsqrtEvalQuantized): v = q - zero point; v = 0 gives the largest code; else 1/sqrt(v) as
GetInvSqrtQuantizedMultiplierExp computes it (gemmlowp's fixed-point Newton-Raphson, 5 steps), applied to 1 shifted
20 bits, then requantised by 1 / (sqrt(input scale) x output scale) (sqrt and product in float32, as the C++'s
std::sqrt(float)) with 20 bits shifted back; saturated. A negative v stops TFLite Micro's Invoke with an error
("Rsqrt is only defined for positive values"): the interpreter raises DataError naming the node, the row and the
value; the C gives what v = 1 gives (the kernel's own branch for v <= 1), finishes the call and sets the run-time
fault flag that ``<prefix>_status()`` reports (as GATHER does for an index outside its axis).

int8 inputs become a 256-entry table of those integer results (every input computed at compile time); int16 ABS is
the arithmetic in C.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.network.gather import fault_flag
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    saturating_rounding_multiply_by_pot,
    wrap32,
)
from tinycc_ml.ir.ops.windows import quantised_operand
from tinycc_ml.ir.types import PER_TENSOR, TensorType

RSQRT_SHIFT = 20  # RsqrtEvalQuantized's kShift
INT32_MAX = 2**31 - 1


def _infer(ts, attrs, declared):
    (x,) = ts
    function = attrs["function"]
    need(function in ("abs", "rsqrt"), f"function {function!r}: abs or rsqrt")
    bits = x.dtype.bits if x.dtype.is_quantised else 0
    need(bits in ((8, 16) if function == "abs" else (8,)),
         f"{function}: {x.dtype} (TFLite Micro's quantised {function.upper()} takes "
         f"{'int8 and int16' if function == 'abs' else 'int8'})")
    need(declared is not None and declared.dtype.is_quantised and declared.dtype.bits == bits
         and declared.dtype.axis == PER_TENSOR, f"the result needs a declared per-tensor qi{bits} type")
    quantised_operand(x, "input", bits, zero_point=bits == 8)
    quantised_operand(declared, "output", bits, zero_point=bits == 8)
    return TensorType(x.shape, declared.dtype, x.layout)


def abs_parameters(x, out) -> tuple[int, int] | None:
    """(multiplier, shift) of input / output scale (divided in float32), or None where the scales are equal."""
    if np.float32(x.qscales[0]) == np.float32(out.qscales[0]):
        return None
    return quantize_multiplier(float(np.float32(x.qscales[0]) / np.float32(out.qscales[0])))


def rsqrt_parameters(x, out) -> tuple[int, int]:
    scale = float(np.sqrt(np.float32(x.qscales[0])) * np.float32(out.qscales[0]))
    return quantize_multiplier(1.0 / scale)


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(value, reverse shift -1): (multiplier, left shift)."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1  # (leading zeros - 1) / 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    # Newton-Raphson in gemmlowp's FixedPoint<int32, 3>: products double the integer bits, Rescale shifts back
    half_input = int(rounding_divide_by_pot(np.int64(value >> 1), 1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # one in Q3.28

    def mul(a: int, b: int) -> int:
        return int(saturating_rounding_doubling_high_mul(np.int64(a), np.int64(b)))

    for _ in range(5):
        cube = int(saturating_rounding_multiply_by_pot(np.int64(mul(mul(x, x), x)), 6))  # Q9 -> Q3
        difference = wrap32(mul(half_three, x) - mul(half_input, cube))  # both Q6, a raw (wrapping) subtraction
        x = int(saturating_rounding_multiply_by_pot(difference, 3))  # Q6 -> Q3
    x = mul(x, 1518500250)  # times sqrt(2) / 2 in Q0.31
    if shift < 0:
        x = int(wrap32(x << -shift))  # an int32 shift
        shift = 0
    return x, -shift


def quantised_abs(value: np.ndarray, x, out) -> np.ndarray:
    """AbsEvalQuantized of ``value`` (the inputs less their zero point)."""
    magnitude = np.abs(value)
    parameters = abs_parameters(x, out)
    if parameters is not None:
        magnitude = multiply_by_quantized_multiplier(magnitude, *parameters)
    return np.clip(magnitude + out.zero_point, *out.integer_range)


def table(function: str, x, out) -> np.ndarray:
    """The int8 results of the input integers -128..127 (int64)."""
    q = np.arange(-128, 128, dtype=np.int64)
    value = q - x.zero_point
    lo, hi = out.integer_range
    if function == "abs":
        return quantised_abs(value, x, out)
    multiplier, shift = rsqrt_parameters(x, out)
    results = []
    for v in value.tolist():
        if v == 0:
            results.append(hi)
            continue
        inverse, inverse_shift = inv_sqrt_multiplier(v)
        data = multiply_by_quantized_multiplier(np.int64(1), inverse, inverse_shift + RSQRT_SHIFT)
        output = multiply_by_quantized_multiplier(data, multiplier, shift - RSQRT_SHIFT) + out.zero_point
        results.append(int(np.clip(output, lo, hi)))
    return np.asarray(results, dtype=np.int64)


def _fixed(call):
    x, out = call.in_types[0].dtype, call.type.dtype
    values = np.asarray(call.ins[0], dtype=np.int64)
    if call.attrs["function"] == "rsqrt" and np.any(values < x.zero_point):
        rows = values.reshape(len(values), -1)  # a computed operand: rows first
        r = int(np.argmax(np.any(rows < x.zero_point, axis=1)))
        raise DataError(f"{call.where}: row {r}: input code {int(rows[r][rows[r] < x.zero_point][0])} is below the "
                        f"zero point {x.zero_point}: a negative value, where TFLite Micro's RSQRT stops with an error")
    if x.bits == 8:
        return table(call.attrs["function"], x, out)[values + 128]
    return quantised_abs(values - x.zero_point, x, out)  # int16 ABS (zero points 0)


def _c(em, node) -> list[str]:
    (x_name,) = node.inputs
    x, out = em.graph.type(x_name).dtype, node.type.dtype
    if x.bits == 8:
        values = table(node.attrs["function"], x, out)
        symbol = em.add_const_array(em.sym(f"{node.name}_table"), values.astype(np.int8), "int8_t",
                                    f"%{node.name}: TFLite Micro's quantised {node.attrs['function']} of -128..127")
        read = em.target.read_const(symbol, f"(int){em.at(x_name, 'i')} + 128", "int8_t")
        check = []
        if node.attrs["function"] == "rsqrt" and x.zero_point > -128:  # TFLite Micro stops at a negative value
            check = [f"    if ({em.at(x_name, 'i')} < {x.zero_point}) {fault_flag(em)} = 1;"]
        return [f"for (long i = 0; i < {node.type.size}; ++i) {{", f"    {em.var(node.name)}[i] = {read};", *check,
                "}"]
    parameters = abs_parameters(x, out)
    v = f"(int32_t){em.at(x_name, 'i')}"
    magnitude = f"({v} < 0 ? -{v} : {v})"
    if parameters is not None:
        magnitude = f"{requantise(em)}({magnitude}, {parameters[0]}, {parameters[1]})"
    lo, hi = out.integer_range
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {clamp_to(em, 16)}({magnitude}, {lo}, {hi});"]


register_op(OpDef(
    "quantised_unary", 1, _infer, lambda xs, a: xs[0], {"function": "str"},
    "TFLite Micro's quantised ABS (int8, int16) and RSQRT (int8): its integer kernels (int8 as a table of the 256 "
    "inputs)",
    fixed=_fixed, c={"fixed": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR,
                 "c_float": "a quantised function reads integers"}))
