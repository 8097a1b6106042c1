"""SignalFftAutoScale: int16 samples shifted left by as many bits as their largest magnitude leaves free, and that
number of bits (signal/src/fft_auto_scale.cc). Two IR ops, one per output: ``signal_fft_auto_scale_shift`` (the
bits, an int32 scalar) and ``signal_fft_auto_scale`` (the samples times 2^bits, wrapped to int16).

The largest magnitude is MaxAbs16's scan, kept in an int16: -(-32768) wraps to -32768 there, which this scan
reproduces (the bits are then 0)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.frontends import tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import (
    I16,
    I32,
    INTEGER_ONLY,
    c_msb32,
    declared_result,
    msb32,
    need_type,
    with_rows,
    wrap,
)


def _infer_shift(ts, attrs, declared):
    need_type(ts[0], I16, "the samples", rank=1)
    return declared_result(declared, (), I32)


def _infer_scale(ts, attrs, declared):
    x, bits = ts
    need_type(x, I16, "the samples", rank=1)
    need_type(bits, I32, "the shift", rank=0)
    return declared_result(declared, x.shape, I16, x.layout)


def scale_bits(x) -> np.ndarray:
    """Per row of x (rows, n): FftAutoScale's shift."""
    x = np.asarray(x, np.int64)
    top = np.zeros(len(x), np.int64)
    for i in range(x.shape[1]):  # MaxAbs16's scan, the maximum kept in an int16
        v = x[:, i]
        top = np.where(v > top, v, np.where(-v > top, wrap(-v, 16), top))
    return np.maximum(15 - msb32(wrap(top, 32, signed=False)), 0)


def _fixed_shift(call):
    return scale_bits(with_rows(call.ins, call.in_types)[0])


def _fixed_scale(call):
    x, bits = with_rows(call.ins, call.in_types)
    return wrap(x * (np.int64(1) << bits.reshape(-1, 1)), 16)


def _c_shift(em, node) -> list[str]:
    msb = c_msb32(em)
    scan = c_helper(em, "sig_fft_auto_scale_bits", f"""\
/* FftAutoScale's shift: 15 less the bit length of the largest magnitude (MaxAbs16's int16 maximum), at least 0 */
static int32_t @sig_fft_auto_scale_bits(const int16_t *x, long n)
{{
    int16_t top = 0;
    int32_t bits;
    for (long i = 0; i < n; ++i) {{
        if (x[i] > top)
            top = x[i];
        else if (-(int32_t)x[i] > top)
            top = (int16_t)(uint16_t)(-(int32_t)x[i]);
    }}
    bits = 15 - (int32_t){msb}((uint32_t)(int32_t)top);
    return bits > 0 ? bits : 0;
}}
""")
    (x,) = node.inputs
    return [f"{em.var(node.name)} = {scan}({em.var(x)}, {em.graph.type(x).size});"]


def _c_scale(em, node) -> list[str]:
    x, bits = node.inputs
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = (int16_t)(uint16_t)((uint32_t)(int32_t){em.at(x, 'i')} << "
            f"{em.at(bits, '0')});"]


register_op(OpDef(
    "signal_fft_auto_scale_shift", 1, _infer_shift,
    lambda xs, attrs: scale_bits(np.asarray(xs[0])[None])[0].astype(np.float64), {},
    "TFLite Micro's SignalFftAutoScale, its second output: the left shift the samples' largest magnitude allows",
    fixed=_fixed_shift, c={"fixed": _c_shift}, unsupported=INTEGER_ONLY))
register_op(OpDef(
    "signal_fft_auto_scale", 2, _infer_scale,
    lambda xs, attrs: wrap(np.asarray(xs[0], np.int64) << int(xs[1]), 16).astype(np.float64), {},
    "TFLite Micro's SignalFftAutoScale, its first output: the samples times 2^shift, wrapped to int16",
    fixed=_fixed_scale, c={"fixed": _c_scale}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalFftAutoScale", inputs=(1, 1), outputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    x = low.value(ins[0])
    need(low.graph.type(x).rank == 1, "SignalFftAutoScale scales one frame (a 1-D tensor)")
    low.add("signal_fft_auto_scale_shift", [x], {}, low.tensors[outs[1]])
    low.add("signal_fft_auto_scale", [x, low.values[outs[1]]], {}, low.tensors[outs[0]])
