"""The project's own fixed point for network ops (fx types: int * 2^-scale), beside TFLite's int8 (tflite_arith).

A convolution, depthwise convolution or fully connected layer with input x at 2^sx, weights at 2^sw and an int32
bias at 2^(sx + sw) sums acc = bias + sum w x in int32 (each product exact: int16 x int16 < 2^31); its result at
2^so is acc shifted right by sx + sw - so (0..31) with rounding (halves up: ``arith.rshift``), saturated to the
result's width, then the fused activation is a clamp of the integers (relu: at 0; relu6: also at 6 2^so). Pools,
copies and activations keep their input's type. The scales come from calibration rows, and every accumulator from
an overflow proof (``passes/network_scales.py``)."""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.types import TensorType

MAX_SHIFT = 31  # a right shift of an int32 in C: 32 or more is undefined


def accumulator_scale(x: TensorType, w: TensorType) -> int:
    """The scale of a layer's int32 sums: the input's plus the weights'."""
    return x.dtype.scale + w.dtype.scale


def layer_shift(x: TensorType, w: TensorType, out: TensorType) -> int:
    """The right shift from a layer's accumulator to its result."""
    return accumulator_scale(x, w) - out.dtype.scale


def check_fixed_layer(x: TensorType, w: TensorType, b: TensorType) -> None:
    """A fixed-point layer's operands: fx8/fx16 input and weights of one width, the bias fx32 at their product's
    scale (so that it joins the sum as it is)."""
    need(x.dtype.bits in (8, 16), f"input must be fx8 or fx16, got {x.dtype}")
    need(w.dtype.is_fixed and w.dtype.bits == x.dtype.bits, f"weights must be fx{x.dtype.bits}, got {w.dtype}")
    need(b.dtype.is_fixed and b.dtype.bits == 32 and b.dtype.scale == accumulator_scale(x, w),
         f"bias must be fx32.{accumulator_scale(x, w)} (the input's scale plus the weights'), got {b.dtype}")


def check_shift(shift: int, what: str) -> None:
    need(0 <= shift <= MAX_SHIFT, f"{what}: a right shift of {shift} bits is outside [0, {MAX_SHIFT}] (the result "
                                  "must be no finer than the accumulator, and int32 C shifts by at most 31)")


def relu6_top(dtype) -> int:
    """6 at the result's scale (rounded, halves up), or the width's largest integer."""
    top = 2 ** (dtype.bits - 1) - 1
    return int(min(top, math.floor(6.0 * 2.0**dtype.scale + 0.5)))


def activation_bounds(activation: str, dtype) -> tuple[int, int]:
    """The fused activation as an integer clamp at ``dtype``."""
    top = 2 ** (dtype.bits - 1) - 1
    if activation == "relu":
        return 0, top
    if activation == "relu6":
        return 0, relu6_top(dtype)
    return -top - 1, top


def clamp_activation(values: np.ndarray, activation: str, dtype) -> np.ndarray:
    lo, hi = activation_bounds(activation, dtype)
    return np.clip(values, lo, hi)


def layer_result(acc: np.ndarray, call) -> np.ndarray:
    """A layer's int32 sums (bias included) to its result: rounded shift, saturation, activation."""
    x, w = call.in_types[0], call.in_types[1]
    acc = check32(acc, call.where)
    shifted = saturate(rshift(acc, layer_shift(x, w, call.type)), call.type.dtype.bits)
    return clamp_activation(shifted, call.attrs.get("activation", "none"), call.type.dtype)


def rounded_division(sums: np.ndarray, counts) -> np.ndarray:
    """sum / count rounded half away from zero, as C's truncating division computes it with count / 2 added
    to a positive sum's magnitude (the pools' average)."""
    sums = np.asarray(sums, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    half = counts // 2
    return np.where(sums > 0, (sums + half) // counts, -((half - sums) // counts))


def channel_bounds(weights: np.ndarray, bias: np.ndarray, x_bound: int) -> int:
    """The largest |acc| of a layer: per output channel (rows of ``weights``, (channels, terms)) the sum of its
    weights' magnitudes times the input's largest |int|, plus its bias'."""
    w = np.abs(np.asarray(weights, dtype=np.int64))
    return int(np.max(w.sum(axis=1) * int(x_bound) + np.abs(np.asarray(bias, dtype=np.int64)), initial=0))
