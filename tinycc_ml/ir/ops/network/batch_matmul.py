"""BATCH_MATMUL: out[..., m, n] = sum_k lhs[..., m, k] rhs[..., k, n] over broadcast batch axes (ranks 2 to 5),
``adj_x`` / ``adj_y`` reading an operand with its last two axes swapped.

TFLite Micro's kernel (batch_matmul.cc, reference_ops::BatchMatMul): float32 summed over k in order from 0 (no fused
multiply-add); int8 per-tensor, sum_k (lhs - lhs zero point)(rhs - rhs zero point) in int32, requantised by
lhs scale x rhs scale / out scale (GetQuantizedConvolutionMultipler, in double) and clamped to int8; int16 (zero
points 0) summed in int64 and requantised by the int64 MultiplyByQuantizedMultiplier, clamped to int16. Either
operand may be a constant or computed.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise, requantise64
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACC64_BITS,
    channel_multipliers,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_64,
)
from tinycc_ml.ir.types import PER_TENSOR, TensorType

BATCH_MATMUL_OPTIONS = 101  # schema.fbs: BatchMatMulOptions { adj_x, adj_y, asymmetric_quantize_inputs }
MAX_RANK = 5
INT32_PRODUCTS = 2**31 // (255 * 255)  # int8 products (zero points off) a sum holds without leaving int32


def matrix_shape(t: TensorType, adjoint: bool) -> tuple[int, int]:
    """(rows, columns) of an operand's matrices as the product reads them."""
    rows, cols = t.shape[-2], t.shape[-1]
    return (cols, rows) if adjoint else (rows, cols)


def _batch_shape(a: TensorType, b: TensorType) -> tuple[int, ...]:
    rank = max(a.rank, b.rank) - 2
    pa, pb = (1,) * (rank - a.rank + 2) + a.shape[:-2], (1,) * (rank - b.rank + 2) + b.shape[:-2]
    need(all(x == y or 1 in (x, y) for x, y in zip(pa, pb)),
         f"batch axes {list(a.shape[:-2])} and {list(b.shape[:-2])} do not broadcast")
    return tuple(max(x, y) for x, y in zip(pa, pb))


def batch_multiplier(lhs, rhs, out) -> tuple[int, int]:
    multipliers, shifts = channel_multipliers(lhs.qscales[0], [rhs.qscales[0]], out.qscales[0])
    return int(multipliers[0]), int(shifts[0])


def _infer(ts, attrs, declared):
    lhs, rhs = ts
    adj_x, adj_y = bool(attrs["adj_x"]), bool(attrs["adj_y"])
    need(2 <= lhs.rank <= MAX_RANK and 2 <= rhs.rank <= MAX_RANK,
         f"operands of {lhs.rank} and {rhs.rank} dimensions (2 to {MAX_RANK})")
    need(lhs.dtype.kind == rhs.dtype.kind and lhs.dtype.bits == rhs.dtype.bits,
         f"operands of one element type, got {lhs.dtype} and {rhs.dtype}")
    need(lhs.dtype.is_float or (lhs.dtype.is_quantised and lhs.dtype.bits in (8, 16)),
         f"operands must be float32, int8 or int16, got {lhs.dtype}")
    (m, k), (k2, n) = matrix_shape(lhs, adj_x), matrix_shape(rhs, adj_y)
    need(k == k2, f"the product sums {k} columns of lhs against {k2} rows of rhs")
    shape = _batch_shape(lhs, rhs) + (m, n)
    layout = declared.layout if declared is not None and declared.rank == len(shape) else ""
    if lhs.dtype.is_float:
        need(declared is None or declared.dtype.is_float, f"float32 operands give float32, not {declared}")
        return TensorType(shape, lhs.dtype, layout)
    need(declared is not None and declared.dtype.is_quantised and declared.dtype.bits == lhs.dtype.bits
         and declared.dtype.axis == PER_TENSOR, f"the result needs a declared per-tensor qi{lhs.dtype.bits} type")
    need(lhs.dtype.axis == PER_TENSOR and rhs.dtype.axis == PER_TENSOR, "operands must be quantised per tensor")
    if lhs.dtype.bits == 8:
        need(k <= INT32_PRODUCTS, f"a sum of {k} int8 products may leave int32 (at most {INT32_PRODUCTS})")
    else:
        need(lhs.dtype.zero_point == rhs.dtype.zero_point == declared.dtype.zero_point == 0,
             "int16 operands and result need zero point 0 (TFLite Micro's Prepare)")
        need(k <= 2 ** (ACC64_BITS - 30), f"a sum of {k} int16 products may pass the 2^{ACC64_BITS} TFLite's int64 "
                                          "requantisation assumes")
    multiplier, _ = batch_multiplier(lhs.dtype, rhs.dtype, declared.dtype)
    need(multiplier > 0, "the scales give a multiplier of 0 (lhs scale x rhs scale / out scale underflows)")
    return TensorType(shape, declared.dtype, layout)


def _operand(v: np.ndarray, adjoint: bool) -> np.ndarray:
    return np.swapaxes(v, -1, -2) if adjoint else v


def _float_product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """float32 products summed over k in order, each sum rounded to float32 (TFLite's loop, no BLAS)."""
    lhs, rhs = np.asarray(lhs, np.float32), np.asarray(rhs, np.float32)
    total = np.zeros(np.broadcast_shapes(lhs.shape[:-1] + (1,), rhs.shape[:-2] + (1, rhs.shape[-1])), np.float32)
    for k in range(lhs.shape[-1]):
        total = (total + lhs[..., :, k:k + 1] * rhs[..., k:k + 1, :]).astype(np.float32)
    return total


def _evaluate(xs, attrs):
    lhs, rhs = (_operand(np.asarray(v), bool(attrs[a])) for v, a in zip(xs, ("adj_x", "adj_y")))
    return _float_product(lhs, rhs).astype(np.float64)


def _aligned(values, types) -> list[np.ndarray]:
    """Each operand with a row axis (a constant's of length 1) and the same number of batch axes."""
    rank = max(t.rank for t in types)
    out = []
    for v, t in zip(values, types):
        v = np.asarray(v, dtype=np.int64)
        v = v if v.ndim == t.rank + 1 else v[None]
        out.append(v.reshape(v.shape[:1] + (1,) * (rank - t.rank) + v.shape[1:]))
    return out


def _fixed(call):
    (tl, tr), out = call.in_types, call.type.dtype
    lhs, rhs = _aligned(call.ins, call.in_types)
    lhs = _operand(lhs - tl.dtype.zero_point, bool(call.attrs["adj_x"]))
    rhs = _operand(rhs - tr.dtype.zero_point, bool(call.attrs["adj_y"]))
    total = np.matmul(lhs, rhs)  # int64: exact
    multiplier, shift = batch_multiplier(tl.dtype, tr.dtype, out)
    if out.bits == 8:
        scaled = multiply_by_quantized_multiplier(total, multiplier, shift)
    else:
        scaled = multiply_by_quantized_multiplier_64(total, multiplier, shift)
    lo, hi = out.integer_range
    return np.clip(scaled + out.zero_point, lo, hi)


def _strides(t: TensorType, batch: tuple[int, ...]) -> list[int]:
    """Each batch axis' step in the operand (0 where it is broadcast)."""
    padded = (1,) * (len(batch) - (t.rank - 2)) + t.shape[:-2]
    steps, step = [], t.shape[-2] * t.shape[-1]
    for d in reversed(padded):
        steps.append(step if d != 1 else 0)
        step *= d
    return steps[::-1]


def _c(em, node) -> list[str]:
    lhs_name, rhs_name = node.inputs
    tl, tr, out = em.graph.type(lhs_name), em.graph.type(rhs_name), node.type
    adj_x, adj_y = bool(node.attrs["adj_x"]), bool(node.attrs["adj_y"])
    batch = out.shape[:-2]
    m, n = out.shape[-2:]
    k = matrix_shape(tl, adj_x)[1]
    sl, sr = _strides(tl, batch), _strides(tr, batch)
    lines, indent = ["{", "    long o = 0;"], "    "
    for axis, extent in enumerate(batch):
        lines.append(f"{indent}for (long d{axis} = 0; d{axis} < {extent}; ++d{axis})")
        indent += "    "

    def base(steps):
        return " + ".join(f"d{a} * {s}" for a, s in enumerate(steps) if s) or "0"

    lhs_at = f"{base(sl)} + " + ("k * " + str(m) + " + i" if adj_x else f"i * {k} + k")
    rhs_at = f"{base(sr)} + " + (f"j * {k} + k" if adj_y else f"k * {n} + j")
    lines += [f"{indent}for (long i = 0; i < {m}; ++i)", f"{indent}for (long j = 0; j < {n}; ++j) {{"]
    body = indent + "    "
    if out.dtype.is_float:
        lines += [f"{body}float total = 0.0f;",
                  f"{body}for (long k = 0; k < {k}; ++k)",
                  f"{body}    total += {em.at(lhs_name, lhs_at)} * {em.at(rhs_name, rhs_at)};",
                  f"{body}{em.var(node.name)}[o++] = total;"]
    else:
        multiplier, shift = batch_multiplier(tl.dtype, tr.dtype, out.dtype)
        wide = "int32_t" if out.dtype.bits == 8 else "int64_t"
        scale = requantise(em) if out.dtype.bits == 8 else requantise64(em)
        lo, hi = out.dtype.integer_range
        lines += [f"{body}{wide} total = 0;",
                  f"{body}for (long k = 0; k < {k}; ++k)",
                  f"{body}    total += ({wide})((int32_t){em.at(lhs_name, lhs_at)} - {tl.dtype.zero_point}) * "
                  f"({wide})((int32_t){em.at(rhs_name, rhs_at)} - {tr.dtype.zero_point});",
                  f"{body}{em.var(node.name)}[o++] = {clamp_to(em, out.dtype.bits)}({scale}(total, {multiplier}, "
                  f"{shift}) + {out.dtype.zero_point}, {lo}, {hi});"]
    return lines + [f"{indent}}}", "}"]


register_op(OpDef(
    "batch_matmul", 2, _infer, _evaluate, {"adj_x": "int", "adj_y": "int"},
    "TFLite's BATCH_MATMUL: matrix products over broadcast batch axes (adj_x / adj_y: an operand's last two axes "
    "swapped); int8 / int16 as TFLite Micro's reference kernel (zero points off, one requantisation)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: None,
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("BATCH_MATMUL", 126, options=BATCH_MATMUL_OPTIONS, inputs=(2, 2))
def lower_tflite(low, options, ins, outs) -> None:
    lhs, rhs, out = (low.tensors[i] for i in (*ins, outs[0]))
    need(lhs.type_name == rhs.type_name == out.type_name and lhs.type_name in ("float32", "int8", "int16"),
         f"BATCH_MATMUL of {lhs.type_name} and {rhs.type_name} to {out.type_name} (TFLite Micro: all float32, int8 "
         "or int16)")
    adj_x = int(bool(options.scalar(0, "B", 0, "adj_x"))) if options is not None else 0
    adj_y = int(bool(options.scalar(1, "B", 0, "adj_y"))) if options is not None else 0
    need(len(out.shape) >= max(len(lhs.shape), len(rhs.shape)),
         f"BATCH_MATMUL: an output of {len(out.shape)} dimensions for operands of {len(lhs.shape)} and "
         f"{len(rhs.shape)}")
    low.add("batch_matmul", [low.value(ins[0], ""), low.value(ins[1], "")], {"adj_x": adj_x, "adj_y": adj_y}, out)
