"""EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL: an elementwise comparison of two broadcast tensors,
a bool tensor (one byte per element, 0 or 1).

TFLite Micro's kernels (comparisons.cc): float32, plain int32/int64 (and bool for EQUAL/NOT_EQUAL) compared as
stored (a NaN is unequal to everything); int8 compared "with scaling": each operand less its zero point, shifted left
8 bits, times its own scale as a Q31 multiplier (QuantizeMultiplierSmallerThanOneExp, which stops TFLite Micro at a
scale of 1 or more: refused by name), so operands of different quantisations compare as their reals nearly do.
GREATER also lists int16, but Prepare computes no multipliers for it (they are left unset): refused by name, as are
int16 operands of the others (no kernel). Broadcasting goes through Broadcast4DSlow: at most 4 dimensions.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, rows_aligned, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier, quantize_multiplier
from tinycc_ml.ir.types import BOOL, TensorType

COMPARISONS = {"equal": (np.equal, "=="), "not_equal": (np.not_equal, "!="), "greater": (np.greater, ">"),
               "greater_equal": (np.greater_equal, ">="), "less": (np.less, "<"), "less_equal": (np.less_equal, "<=")}
BUILTINS = {"EQUAL": ("equal", 71), "NOT_EQUAL": ("not_equal", 72), "GREATER": ("greater", 61),
            "GREATER_EQUAL": ("greater_equal", 62), "LESS": ("less", 58), "LESS_EQUAL": ("less_equal", 63)}
SCALING_SHIFT = 8  # ComparisonsPrepare's kLeftShift
BROADCAST_RANK = 4  # Broadcast4DSlow


def _infer(ts, attrs, declared):
    which = attrs["which"]
    need(which in COMPARISONS, f"which {which!r}: one of {', '.join(COMPARISONS)}")
    a, b = ts
    need(a.dtype.kind == b.dtype.kind and a.dtype.bits == b.dtype.bits,
         f"operands must be of one element type, got {a.dtype} and {b.dtype}")
    kind = a.dtype.kind
    need(kind in ("f32", "int", "bool") or (kind == "qi" and a.dtype.bits == 8),
         f"{which}: {a.dtype} operands (TFLite Micro compares float32, int32, int64, bool and int8)")
    need(kind != "int" or a.dtype.bits in (32, 64), f"{which}: {a.dtype} operands (plain integers: int32, int64)")
    need(kind != "bool" or which in ("equal", "not_equal"), f"{which}: bool operands (only EQUAL and NOT_EQUAL)")
    if kind == "qi":
        for t, what in ((a, "first"), (b, "second")):
            need(t.dtype.axis < 0, f"{which}: the {what} operand has per-channel scales")
            need(t.dtype.qscales[0] < 1.0, f"{which}: the {what} operand's scale {t.dtype.qscales[0]:.6g} is 1 or more "
                                           "(TFLite Micro's multiplier must be below 1)")
    shape = broadcast_shape(a.shape, b.shape, which)
    need(a.shape == b.shape or len(shape) <= BROADCAST_RANK,
         f"{which}: broadcasting over {len(shape)} dimensions (TFLite Micro broadcasts up to {BROADCAST_RANK})")
    need(declared is None or declared.dtype == BOOL, f"{which} gives bool, not {declared}")
    return TensorType(shape, BOOL, a.layout if a.rank >= b.rank else b.layout)


def _multipliers(t: TensorType) -> tuple[int, int, int]:
    """(zero point, multiplier, shift) of an int8 operand."""
    multiplier, shift = quantize_multiplier(float(t.dtype.qscales[0]))
    return t.dtype.zero_point, multiplier, shift


def _evaluate(xs, attrs):
    with np.errstate(invalid="ignore"):
        return COMPARISONS[attrs["which"]][0](np.asarray(xs[0]), np.asarray(xs[1])).astype(np.float64)


def _fixed(call):
    a, b = with_rows_aligned(call.ins, call.in_types)
    if call.in_types[0].dtype.is_quantised:
        scaled = []
        for value, t in ((a, call.in_types[0]), (b, call.in_types[1])):
            zero_point, multiplier, shift = _multipliers(t)
            scaled.append(multiply_by_quantized_multiplier((value - zero_point) << SCALING_SHIFT, multiplier, shift))
        a, b = scaled
    return COMPARISONS[call.attrs["which"]][0](a, b).astype(np.int64)


def _c(em, node) -> list[str]:
    symbol = COMPARISONS[node.attrs["which"]][1]
    ta, tb = (em.graph.type(i) for i in node.inputs)
    if not ta.dtype.is_quantised:
        return c_loop(em, node, lambda a, b: f"(({a}) {symbol} ({b}))")
    req = requantise(em)

    def scaled(value: str, t: TensorType) -> str:
        zero_point, multiplier, shift = _multipliers(t)
        return f"{req}(((int32_t){value} - {zero_point}) * {1 << SCALING_SHIFT}, {multiplier}, {shift})"

    return c_loop(em, node, lambda a, b: f"({scaled(a, ta)} {symbol} {scaled(b, tb)})")


register_op(OpDef(
    "compare", 2, _infer, _evaluate, {"which": "str"},
    "TFLite's comparisons (which: equal, not_equal, greater, greater_equal, less, less_equal) of two broadcast "
    "tensors, a bool result; int8 operands rescaled as TFLite Micro does (zero point off, << 8, times the scale)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(rows_aligned(ins, batched, rank), attrs),
    fixed=_fixed, c={"fixed": _c, "float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def _register(builtin: str, which: str, code: int) -> None:
    @tflite_builtin(builtin, code, inputs=(2, 2))
    def lower(low, options, ins, outs) -> None:
        low.add("compare", [low.value(ins[0]), low.value(ins[1])], {"which": which}, low.tensors[outs[0]])


for _builtin, (_which, _code) in BUILTINS.items():
    _register(_builtin, _which, _code)
