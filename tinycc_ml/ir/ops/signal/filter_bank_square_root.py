"""SignalFilterBankSquareRoot: each uint64 channel's square root rounded to nearest (Sqrt64 of signal/src: the
32-bit routine below 2^32, results capped at 0xFFFF there), shifted right by the int32 scalar operand (the FFT's
auto-scale bits), uint32."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import (
    I32,
    INTEGER_ONLY,
    U32,
    U64,
    c_sqrt64,
    declared_result,
    need_type,
    sqrt64,
    with_rows,
)


def _infer(ts, attrs, declared):
    x, bits = ts
    need_type(x, U64, "the channels", rank=1)
    need_type(bits, I32, "the shift", rank=0)
    return declared_result(declared, x.shape, U32)


def square_root(x, bits) -> np.ndarray:
    bits = np.asarray(bits, np.int64).reshape(-1, 1)
    return (sqrt64(x) >> np.clip(bits, 0, 63)) & 0xFFFFFFFF


def _fixed(call):
    x, bits = with_rows(call.ins, call.in_types)
    return square_root(x, bits)


def _c(em, node) -> list[str]:
    x, bits = node.inputs
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {c_sqrt64(em)}({em.at(x, 'i')}) >> {em.at(bits, '0')};"]


register_op(OpDef(
    "signal_filter_bank_square_root", 2, _infer,
    lambda xs, attrs: square_root(np.asarray(xs[0]).astype(np.uint64)[None], xs[1])[0].astype(np.float64), {},
    "TFLite Micro's SignalFilterBankSquareRoot: rounded square roots of uint64 channels >> the scale's bits, uint32",
    fixed=_fixed, c={"fixed": _c}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalFilterBankSquareRoot", inputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    bits = low.value(ins[1])
    if low.graph.op(bits) == "const":
        value = int(low.graph.node(bits).attrs["value"])
        need(0 <= value <= 31, f"SignalFilterBankSquareRoot: a shift of {value} bits")
    low.add("signal_filter_bank_square_root", [low.value(ins[0]), bits], {}, low.tensors[outs[0]])
