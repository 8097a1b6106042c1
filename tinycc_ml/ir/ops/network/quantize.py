"""QUANTIZE between integer types (requantize) and DEQUANTIZE, as TFLite Micro computes them.

requantize (TFLite's QUANTIZE of an int8, int16 or int32 tensor to int8, int16 or int32, as TFLite Micro's
kernel takes them: int8 to int8/int16/int32, int16 to int8/int16/int32, int32 to int8/int16): the input less its zero
point (wrapping in int32), times input scale / output scale (QuantizeMultiplier in double,
MultiplyByQuantizedMultiplier), plus the output's zero point (wrapping), saturated to the output's width
(``reference_ops::Requantize``).

dequantize (DEQUANTIZE of int8 or int16 to float32): scale x (q - zero point). TFLite multiplies in double and
rounds to float32; the exact product of a float32 scale and an integer below 2^17 has at most 41 significant bits,
so one float32 multiplication rounds the same exact value once: the C multiplies in float.

QUANTIZE of the float32 input a converter puts first (inference_input_type float32) is not an op here: the reader
makes its output the network's input, and the build's float entry point quantises as AffineQuantize does
(``tinycc_ml.ir.fixed.quantise_affine``). A QUANTIZE of a float32 tensor further in (a converter leaves some
operators in float32 between DEQUANTIZE and QUANTIZE) is ``quantize``: the same arithmetic in C.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    AFFINE_CODES,
    multiply_by_quantized_multiplier,
    quantise_affine,
    quantize_multiplier,
    wrap32,
)
from tinycc_ml.ir.ops.windows import check_requantisation, quantised_operand
from tinycc_ml.ir.types import F32, TensorType

NO_FLOAT_FORM = "it reads quantised integers: a float network has none (its float C is the real arithmetic)"


def _widths(t: TensorType, what: str) -> int:
    need(t.dtype.is_quantised and t.dtype.bits in (8, 16), f"{what} must be qi8 or qi16, got {t.dtype}")
    quantised_operand(t, what, t.dtype.bits)
    return t.dtype.bits


REQUANTIZE_WIDTHS = {8: (8, 16, 32), 16: (8, 16, 32), 32: (8, 16)}  # TFLite Micro's QUANTIZE: input -> outputs


def _infer_requantize(ts, attrs, declared):
    (x,) = ts
    need(x.dtype.is_quantised and x.dtype.bits in REQUANTIZE_WIDTHS, f"input must be qi8, qi16 or qi32, got {x.dtype}")
    quantised_operand(x, "input", x.dtype.bits)
    need(declared is not None, "requantize needs the declared result type (its scale and zero point)")
    need(declared.dtype.is_quantised and declared.dtype.bits in REQUANTIZE_WIDTHS[x.dtype.bits],
         f"a qi{x.dtype.bits} input requantizes to qi{' / qi'.join(map(str, REQUANTIZE_WIDTHS[x.dtype.bits]))}, "
         f"not {declared.dtype}")
    quantised_operand(declared, "result", declared.dtype.bits)
    check_requantisation(x.dtype.qscales[0] / declared.dtype.qscales[0], "requantize")
    return TensorType(x.shape, declared.dtype, x.layout)


def requantize_parameters(in_dtype, out_dtype) -> tuple[int, int]:
    """TFLite's effective scale (input / output, in double) as a multiplier and shift."""
    return quantize_multiplier(float(in_dtype.qscales[0]) / float(out_dtype.qscales[0]))


def _fixed_requantize(call: FixedCall):
    x, out = call.in_types[0].dtype, call.type.dtype
    multiplier, shift = requantize_parameters(x, out)
    scaled = multiply_by_quantized_multiplier(wrap32(np.asarray(call.ins[0], np.int64) - x.zero_point), multiplier,
                                              shift)
    return np.clip(wrap32(scaled + out.zero_point), *out.integer_range)


def _c_requantize(em, node) -> list[str]:
    (x_name,) = node.inputs
    x, out = em.graph.type(x_name).dtype, node.type.dtype
    multiplier, shift = requantize_parameters(x, out)
    lo, hi = out.integer_range
    if 32 in (x.bits, out.bits):  # int32 sums wrap as TFLite's do: through uint32
        value = f"(int32_t)((uint32_t){em.at(x_name, 'i')} - (uint32_t)INT32_C({x.zero_point}))"
        result = (f"(int32_t)((uint32_t){requantise(em)}({value}, {multiplier}, {shift}) + "
                  f"(uint32_t)INT32_C({out.zero_point}))")
        clamped = result if out.bits == 32 else f"{clamp_to(em, out.bits)}({result}, {lo}, {hi})"
        return [f"for (long i = 0; i < {node.type.size}; ++i)", f"    {em.var(node.name)}[i] = {clamped};"]
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {clamp_to(em, out.bits)}({requantise(em)}((int32_t){em.at(x_name, 'i')} - "
            f"{x.zero_point}, {multiplier}, {shift}) + {out.zero_point}, {lo}, {hi});"]


register_op(OpDef(
    "requantize", 1, _infer_requantize, lambda xs, a: xs[0], {},
    "TFLite's QUANTIZE of an int8/int16 tensor to int8/int16: requantised to the result's scale and zero point "
    "(MultiplyByQuantizedMultiplier of input / output scale), saturated",
    evaluate_rows=lambda ins, batched, attrs, n, rank: ins[0], fixed=_fixed_requantize, c={"fixed": _c_requantize},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "c_float": NO_FLOAT_FORM}))


def _infer_dequantize(ts, attrs, declared):
    (x,) = ts
    _widths(x, "input")
    return TensorType(x.shape, F32, x.layout)


def _fixed_dequantize(call: FixedCall):
    x = call.in_types[0].dtype
    return (np.float32(x.qscales[0]) * (np.asarray(call.ins[0], np.int64) - x.zero_point).astype(np.float32))


def _c_dequantize(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name).dtype
    scale = repr(float(np.float32(x.qscales[0])))
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {scale}f * (float)((int32_t){em.at(x_name, 'i')} - {x.zero_point});"]


register_op(OpDef(
    "dequantize", 1, _infer_dequantize, lambda xs, a: xs[0], {},
    "TFLite's DEQUANTIZE of an int8/int16 tensor: scale x (q - zero point) as float32",
    evaluate_rows=lambda ins, batched, attrs, n, rank: ins[0], fixed=_fixed_dequantize, c={"fixed": _c_dequantize},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "c_float": NO_FLOAT_FORM}))


def _infer_quantize(ts, attrs, declared):
    (x,) = ts
    need(x.dtype.is_float, f"quantize takes a float32 tensor, got {x.dtype}")
    need(declared is not None, "quantize needs the declared result type (its scale and zero point)")
    _widths(declared, "result")
    return TensorType(x.shape, declared.dtype, x.layout)


def _fixed_quantize(call: FixedCall):
    out = call.type.dtype
    return quantise_affine(np.asarray(call.ins[0], np.float64), out.qscales[0], out.zero_point, out.bits)


def _c_quantize(em, node) -> list[str]:
    (x_name,) = node.inputs
    out = node.type.dtype
    lo, hi = out.integer_range
    if out.bits == 8:
        lo = AFFINE_CODES[0]
    scale = repr(float(np.float32(out.qscales[0])))
    # roundf: halves away from zero, as TfLiteRound; the clamp in float first (NaN to the least code)
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float steps = roundf({em.at(x_name, 'i')} / {scale}f);",
            f"    {em.var(node.name)}[i] = !(steps >= {lo - out.zero_point}.0f) ? {lo} : "
            f"steps >= {hi - out.zero_point}.0f ? {hi} : (int32_t)steps + {out.zero_point};",
            "}"]


register_op(OpDef(
    "quantize", 1, _infer_quantize, lambda xs, a: xs[0], {},
    "TFLite's QUANTIZE of a float32 tensor inside a network: round(x / scale) (float32 division, halves away from "
    "zero) + zero point, saturated",
    evaluate_rows=lambda ins, batched, attrs, n, rank: ins[0], fixed=_fixed_quantize,
    c={"fixed": _c_quantize, "float": _c_quantize},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("QUANTIZE", 114)
def lower_quantize(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    widths = {"int8": 8, "int16": 16, "int32": 32}
    need(x.type_name == "float32" and out.type_name in ("int8", "int16")
         or widths.get(out.type_name) in REQUANTIZE_WIDTHS.get(widths.get(x.type_name), ()),
         f"QUANTIZE of {x.type_name} to {out.type_name}: supported are float32 to int8/int16, int8/int16 to "
         "int8/int16/int32, int32 to int8/int16 (as TFLite Micro)")
    low.add("quantize" if x.type_name == "float32" else "requantize", [low.value(ins[0])], {}, out)


@tflite_builtin("DEQUANTIZE", 6)
def lower_dequantize(low, options, ins, outs) -> None:
    x, out = low.tensors[ins[0]], low.tensors[outs[0]]
    need(x.type_name in ("int8", "int16") and out.type_name == "float32",
         f"DEQUANTIZE of {x.type_name} to {out.type_name}: supported is int8/int16 to float32")
    low.add("dequantize", [low.value(ins[0])], {}, out)
