"""SignalFilterBankLog: the natural log of each uint32 channel (shifted left by input_correction_bits, wrapping)
times output_scale, int16, saturated at 32767; 0 for a shifted value of 0 or 1 (signal/src/filter_bank_log.cc,
log.cc). The log is log2 by table: the octave, plus the fraction corrected by a 129-entry table of
log2(1 + f) - f (2^16 units, linearly interpolated), times ln 2 (45426 / 2^16), all in uint32 arithmetic."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import I16, INTEGER_ONLY, U32, c_msb32, declared_result, msb32, need_type, with_rows

SEGMENTS_LOG2, SCALE_LOG2, LN2 = 7, 16, 45426
_f = np.arange(2**SEGMENTS_LOG2 + 1) / 2**SEGMENTS_LOG2
# log2(1 + f) - f in 2^-16 units at the 129 segment ends, and a 0 after them (the table TFLite Micro's log.cc holds)
LOG_TABLE = np.append(np.floor((np.log2(1 + _f) - _f) * 2**SCALE_LOG2 + 0.5), 0).astype(np.int64)


def _infer(ts, attrs, declared):
    need_type(ts[0], U32, "the channels", rank=1)
    need(0 <= int(attrs["input_correction_bits"]) <= 31, "input_correction_bits must be in [0, 31]")
    return declared_result(declared, ts[0].shape, I16)


def log32(x, out_scale: int) -> np.ndarray:
    """Log32 of uint32 values above 1 (int64 arrays)."""
    x = np.asarray(x, np.int64)
    octave = msb32(x) - 1
    frac = (x - (np.int64(1) << octave)) & 0xFFFFFFFF
    frac = np.where(octave < SCALE_LOG2, frac << np.clip(SCALE_LOG2 - octave, 0, 31),
                    frac >> np.clip(octave - SCALE_LOG2, 0, 31)) & 0xFFFFFFFF
    seg = frac >> (SCALE_LOG2 - SEGMENTS_LOG2)
    c0, c1 = LOG_TABLE[np.clip(seg, 0, 128)], LOG_TABLE[np.clip(seg + 1, 0, 129)]
    rel = ((c1 - c0) * (frac - (seg << (SCALE_LOG2 - SEGMENTS_LOG2)))) >> SCALE_LOG2
    log2 = ((octave << SCALE_LOG2) + frac + c0 + rel) & 0xFFFFFFFF
    loge = ((LN2 * log2 + (1 << 15)) >> SCALE_LOG2) & 0xFFFFFFFF
    return (((out_scale * loge) & 0xFFFFFFFF) + (1 << 15) & 0xFFFFFFFF) >> SCALE_LOG2


def filter_bank_log(x, out_scale: int, correction: int) -> np.ndarray:
    scaled = (np.asarray(x, np.int64) << correction) & 0xFFFFFFFF
    return np.where(scaled > 1, np.minimum(log32(np.maximum(scaled, 2), out_scale), 32767), 0)


def _fixed(call):
    return filter_bank_log(with_rows(call.ins, call.in_types)[0], int(call.attrs["output_scale"]),
                           int(call.attrs["input_correction_bits"]))


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    msb = c_msb32(em)
    table = em.add_const_array(em.sym("sig_log_table"), LOG_TABLE, "int32_t",
                               "log2(1 + f) - f at f = i / 128, 2^-16 units (TFLite Micro's log table)")
    rd = em.target.read_const
    scale, correction = int(node.attrs["output_scale"]), int(node.attrs["input_correction_bits"])
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const uint32_t v = (uint32_t){em.at(x, 'i')} << {correction};",
            "    uint32_t octave, frac, seg, log2v, loge, scaled;", "    int32_t c0, c1, rel;",
            "    if (v <= 1) {", f"        {em.var(node.name)}[i] = 0;", "        continue;", "    }",
            f"    octave = {msb}(v) - 1;",
            "    frac = v - ((uint32_t)1 << octave);",
            f"    frac = octave < {SCALE_LOG2} ? frac << ({SCALE_LOG2} - octave) : frac >> (octave - {SCALE_LOG2});",
            f"    seg = frac >> {SCALE_LOG2 - SEGMENTS_LOG2};",
            f"    c0 = {rd(table, '(long)seg', 'int32_t')};", f"    c1 = {rd(table, '(long)seg + 1', 'int32_t')};",
            f"    rel = (int32_t)((c1 - c0) * (int32_t)(frac - (seg << {SCALE_LOG2 - SEGMENTS_LOG2}))) "
            f">> {SCALE_LOG2};",
            f"    log2v = (octave << {SCALE_LOG2}) + frac + (uint32_t)c0 + (uint32_t)rel;",
            f"    loge = (uint32_t)((UINT64_C({LN2}) * log2v + (1UL << 15)) >> {SCALE_LOG2});",
            f"    scaled = (uint32_t)((uint32_t)({scale}UL * loge) + (1UL << 15)) >> {SCALE_LOG2};",
            f"    {em.var(node.name)}[i] = (int16_t)(scaled < 32767UL ? scaled : 32767UL);", "}"]


register_op(OpDef(
    "signal_filter_bank_log", 1, _infer,
    lambda xs, attrs: filter_bank_log(np.asarray(xs[0], np.int64)[None], int(attrs["output_scale"]),
                                      int(attrs["input_correction_bits"]))[0].astype(np.float64),
    {"output_scale": "int", "input_correction_bits": "int"},
    "TFLite Micro's SignalFilterBankLog: ln of uint32 channels times a scale, by table, int16",
    fixed=_fixed, c={"fixed": _c}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalFilterBankLog")
def lower(low, options, ins, outs) -> None:
    op = "SignalFilterBankLog"
    attrs = {"output_scale": custom_int(options, "output_scale", op, 0, (1 << 32) - 1),
             "input_correction_bits": custom_int(options, "input_correction_bits", op, 0, 31)}
    low.add("signal_filter_bank_log", [low.value(ins[0])], attrs, low.tensors[outs[0]])
