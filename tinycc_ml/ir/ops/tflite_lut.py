"""TFLite's int16 lookup tables and the int16 softmax that reads them, exactly as TFLite defines them.

A table (``LUTPopulate<int16_t>``) holds 513 int16 samples of a function over the int16 input range, computed
in float32 arithmetic; a lookup (``LUTLookup``) takes the sample at the input's top 9 bits and interpolates
with the low 7. The tables are built here, at compile time, and stored as constants, so the C only looks up.
Each float32 step below is one IEEE single operation, as in the C++ (numpy's float32 scalars round each one);
exp is the float64 value rounded to float32 (std::exp on a float: correctly rounded but for rare last-bit
cases, which the tests against tflite-micro would show).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier

LUT_SIZE = 513  # 512 samples and one more, for the last interval's slope
INT16_RANGE = 65535  # int16 max - int16 min
F32 = np.float32


def _round(v: np.float32) -> np.float32:
    """TfLiteRound of a float: halves away from zero, in float32."""
    return F32(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))


def int16_table(transform, input_scale: float, input_zero_point: int, output_scale: float,
                 output_zero_point: int) -> np.ndarray:
    """LUTPopulate<int16_t>: ``transform`` (float32 -> float32) sampled over the input's int16 range, each
    sample nudged by half the interpolation's error at the interval's midpoint, as int16 codes."""
    scale_in, scale_out = F32(input_scale), F32(output_scale)
    input_min = scale_in * F32(-32768 - input_zero_point)
    input_max = scale_in * F32(32767 - input_zero_point)
    output_min = scale_out * F32(-32768 - output_zero_point)
    output_max = scale_out * F32(32767 - output_zero_point)
    step = (input_max - input_min) / F32(512)
    half_step = step / F32(2)
    inverse = F32(65536) / (output_max - output_min)
    table = np.zeros(LUT_SIZE, np.int64)
    with np.errstate(over="ignore"):
        for i in range(512):
            start = input_min + F32(i) * step
            value, midpoint = F32(transform(start)), F32(transform(start + half_step))
            following = F32(transform(input_min + F32(i + 1) * step))
            sample = _round(value * inverse)
            interpolated = _round((following * inverse + _round(value * inverse)) / F32(2))
            error = interpolated - _round(midpoint * inverse)
            table[i] = int(min(max(sample - _round(error / F32(2)), F32(-32768)), F32(32767)))
        last = _round(F32(transform(input_max)) * inverse)
    table[512] = int(min(max(last, F32(-32768)), F32(32767)))
    return table


def exp_float32(x: np.float32) -> np.float32:
    with np.errstate(over="ignore", under="ignore"):
        return F32(math.exp(float(x)))


def one_over_one_plus(x: np.float32) -> np.float32:
    return F32(1) / (F32(1) + x)


@functools.cache
def softmax_tables() -> tuple[np.ndarray, np.ndarray]:
    """The int16 softmax's tables: exp over [-10, 0] and 1 / (1 + x) over [0, 1], both to [-1, 1) in Q0.15 (built
    once: every softmax and every interpreter call reads the same two; read-only)."""
    exp = int16_table(exp_float32, float(F32(10) / F32(INT16_RANGE)), 32767, float(F32(2) / F32(INT16_RANGE)), 0)
    reciprocal = int16_table(one_over_one_plus, float(F32(1) / F32(INT16_RANGE)), -32768,
                             float(F32(2) / F32(INT16_RANGE)), 0)
    for table in (exp, reciprocal):
        table.flags.writeable = False
    return exp, reciprocal


def lookup(values, table: np.ndarray) -> np.ndarray:
    """LUTLookup of int16 values: the sample at the top 9 bits, plus the slope times the low 7, rounded."""
    values = np.asarray(values, dtype=np.int64)
    index = 256 + (values >> 7)
    base, slope = table[index], table[index + 1] - table[index]
    return base + ((slope * (values & 0x7F) + 64) >> 7)


def softmax_int16_parameters(beta: float, input_scale: float) -> tuple[int, int]:
    """The multiplier and shift taking (x - max) to [-65535, 0] for [-10, 0] (double arithmetic)."""
    return quantize_multiplier(float(input_scale) * float(beta) / (10.0 / 65535.0))


def softmax_int16(q: np.ndarray, beta: float, input_scale: float) -> np.ndarray:
    """reference_ops::SoftmaxInt16 along the last axis: int16 in (zero point 0), int16 out at scale 1/32768."""
    exp_table, reciprocal_table = softmax_tables()
    multiplier, shift = softmax_int16_parameters(beta, input_scale)
    q = np.asarray(q, dtype=np.int64)
    diff = q - q.max(axis=-1, keepdims=True)
    scaled = np.clip(multiply_by_quantized_multiplier(diff, multiplier, shift) + 32767, -32768, 32767)
    exps = lookup(scaled, exp_table)
    sums = exps.sum(axis=-1, keepdims=True)  # Q16.15 in int32: depth x 32767 stays below 2^31 (checked by the rule)
    headroom = 32 - np.floor(np.log2(np.maximum(sums, 1))).astype(np.int64) - 1  # leading zeros of a positive sum
    shifted = ((sums << (headroom - 1)) + (1 << 13)) >> 14
    reciprocal = lookup(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767), reciprocal_table)
    right = 31 - headroom
    result = (exps * reciprocal + (np.int64(1) << (right - 1))) >> right
    return np.clip(result, 0, 32767)
