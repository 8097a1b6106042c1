"""SignalPCAN: per-channel automatic gain control (signal/src/pcan_argc_fixed.cc). Each channel's gain is read off
the int16 gain table at its noise estimate (a piecewise quadratic in the estimate's octave and 10 bits of its
fraction), the channel times the gain >> snr_shift is the SNR (12 fractional bits), shrunk to 6 fractional bits:
snr^2 / 4 below 2, snr - 1 above. uint32 in and out; the int16 gain widened to uint32 as C widens it."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import (
    I16,
    INTEGER_ONLY,
    U32,
    c_msb32,
    declared_result,
    msb32,
    need_type,
    with_rows,
    wrap,
)

SNR_BITS, OUTPUT_BITS = 12, 6  # kPcanSnrBits, kPcanOutputBits
GAIN_TABLE = 4 * 32 - 6 + 3  # entries the largest estimate's octave reads


def _infer(ts, attrs, declared):
    x, noise, lut = ts
    need_type(x, U32, "the channels", rank=1)
    need_type(noise, U32, "the noise estimate", rank=1)
    need_type(lut, I16, "the gain table", rank=1)
    need(x.shape == noise.shape, f"{x.size} channels and a noise estimate of {noise.size}")
    need(lut.size >= GAIN_TABLE, f"a gain table of {lut.size} entries; every estimate needs {GAIN_TABLE}")
    need(0 <= int(attrs["snr_shift"]) <= 63, f"snr_shift {attrs['snr_shift']} is outside [0, 63]")
    return declared_result(declared, x.shape, U32)


def gain(noise, lut) -> np.ndarray:
    """WideDynamicFunction: the int16 gain at each estimate."""
    x = np.asarray(noise, np.int64)
    lut = np.asarray(lut, np.int64).reshape(-1)
    octave = msb32(x)
    base = np.clip(4 * octave - 6, 0, len(lut) - 3)
    up = (x << np.clip(11 - octave, 0, 31)) & 0xFFFFFFFF
    frac = np.where(octave < 11, up, x >> np.clip(octave - 11, 0, 31)) & 0x3FF
    result = (lut[base + 2] * frac) >> 5
    result = wrap(result + wrap(lut[base + 1] << 5, 32), 32)
    result = wrap(wrap(result * frac, 32) + (1 << 14), 32) >> 15
    result = wrap(result + lut[base], 16)
    return np.where(x <= 2, lut[np.clip(x, 0, 2)], result)


def shrink(snr) -> np.ndarray:
    snr = np.asarray(snr, np.int64)
    return np.where(snr < (2 << SNR_BITS), (snr * snr) >> (2 + 2 * SNR_BITS - OUTPUT_BITS),
                    ((snr >> (SNR_BITS - OUTPUT_BITS)) - (1 << OUTPUT_BITS)) & 0xFFFFFFFF)


def pcan(x, noise, lut, snr_shift: int) -> np.ndarray:
    g = wrap(gain(noise, lut), 32, signed=False).astype(np.uint64)
    with np.errstate(over="ignore"):
        snr = ((np.asarray(x, np.int64).astype(np.uint64) * g) >> np.uint64(snr_shift)).astype(np.int64) & 0xFFFFFFFF
    return shrink(snr)


def _fixed(call):
    x, noise, lut = with_rows(call.ins, call.in_types)
    return pcan(x, noise, lut, int(call.attrs["snr_shift"]))


def _c(em, node) -> list[str]:
    x, noise, lut = node.inputs
    msb = c_msb32(em)
    shift = int(node.attrs["snr_shift"])
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const uint32_t e = {em.at(noise, 'i')};", "    int16_t g;", "    uint32_t snr;",
            "    if (e <= 2) {", f"        g = {em.at(lut, '(long)e')};", "    } else {",
            f"        const long octave = (long){msb}(e), base = 4 * octave - 6;",
            "        const int32_t frac = (int32_t)((octave < 11 ? e << (11 - octave) : e >> (octave - 11)) & 0x3FF);",
            f"        int32_t r = ((int32_t){em.at(lut, 'base + 2')} * frac) >> 5;",
            f"        r = (int32_t)((uint32_t)r + ((uint32_t)(int32_t){em.at(lut, 'base + 1')} << 5));",
            "        r = (int32_t)((uint32_t)r * (uint32_t)frac);",
            "        r = (int32_t)((uint32_t)r + (1UL << 14)) >> 15;",
            f"        g = (int16_t)(uint16_t)(uint32_t)(r + {em.at(lut, 'base')});", "    }",
            f"    snr = (uint32_t)(((uint64_t){em.at(x, 'i')} * (uint32_t)(int32_t)g) >> {shift});",
            f"    {em.var(node.name)}[i] = snr < (2UL << {SNR_BITS}) ? (snr * snr) >> {2 + 2 * SNR_BITS - OUTPUT_BITS}"
            f" : (snr >> {SNR_BITS - OUTPUT_BITS}) - (1UL << {OUTPUT_BITS});", "}"]


register_op(OpDef(
    "signal_pcan", 3, _infer,
    lambda xs, attrs: pcan(np.asarray(xs[0], np.int64)[None], np.asarray(xs[1], np.int64)[None], xs[2],
                           int(attrs["snr_shift"]))[0].astype(np.float64),
    {"snr_shift": "int"}, "TFLite Micro's SignalPCAN: per-channel automatic gain control by a noise estimate",
    fixed=_fixed, c={"fixed": _c}, dense_const_operand=2, unsupported=INTEGER_ONLY))


@tflite_custom("SignalPCAN", inputs=(3, 3))
def lower(low, options, ins, outs) -> None:
    need(low.tensors[ins[2]].data is not None, "SignalPCAN: the gain table must be a constant")
    low.add("signal_pcan", [low.value(ins[0]), low.value(ins[1]), low.value(ins[2], "")],
            {"snr_shift": custom_int(options, "snr_shift", "SignalPCAN", 0, 63)}, low.tensors[outs[0]])
