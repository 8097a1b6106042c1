"""SignalEnergy: the power re^2 + im^2 of the bins [start_index, end_index) of an int16 complex spectrum
(interleaved re, im), as uint32 (signal/src/energy.cc: the int32 sum, stored unsigned). TFLite Micro leaves the
other bins unwritten (whatever the arena held); here they are 0."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import I16, INTEGER_ONLY, U32, declared_result, need_type, with_rows, wrap


def _infer(ts, attrs, declared):
    (x,) = ts
    need_type(x, I16, "the spectrum", rank=1)
    need(x.size % 2 == 0, f"a complex spectrum has an even number of int16s, got {x.size}")
    bins = x.size // 2
    start, end = int(attrs["start_index"]), int(attrs["end_index"])
    need(0 <= start <= end <= bins, f"bins [{start}, {end}) of a spectrum of {bins}")
    return declared_result(declared, (bins,), U32)


def energy(x, start: int, end: int) -> np.ndarray:
    x = np.asarray(x, np.int64)
    power = x[..., 0::2] ** 2 + x[..., 1::2] ** 2
    bins = np.arange(power.shape[-1])
    return np.where((bins >= start) & (bins < end), wrap(power, 32, signed=False), 0)


def _fixed(call):
    return energy(with_rows(call.ins, call.in_types)[0], int(call.attrs["start_index"]), int(call.attrs["end_index"]))


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    start, end = int(node.attrs["start_index"]), int(node.attrs["end_index"])
    y = em.var(node.name)
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    if (i < {start} || i >= {end}) {{",
            f"        {y}[i] = 0;", "        continue;", "    }",
            f"    {y}[i] = (uint32_t)((int32_t){em.at(x, '2 * i')} * {em.at(x, '2 * i')}) + "
            f"(uint32_t)((int32_t){em.at(x, '2 * i + 1')} * {em.at(x, '2 * i + 1')});", "}"]


register_op(OpDef(
    "signal_energy", 1, _infer,
    lambda xs, attrs: energy(xs[0], int(attrs["start_index"]), int(attrs["end_index"])).astype(np.float64),
    {"start_index": "int", "end_index": "int"},
    "TFLite Micro's SignalEnergy: re^2 + im^2 of the bins [start, end) of an int16 spectrum, uint32",
    fixed=_fixed, c={"fixed": _c}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalEnergy")
def lower(low, options, ins, outs) -> None:
    bins = low.tensors[outs[0]].shape[-1]
    attrs = {"start_index": custom_int(options, "start_index", "SignalEnergy", 0, bins),
             "end_index": custom_int(options, "end_index", "SignalEnergy", 0, bins)}
    low.add("signal_energy", [low.value(ins[0])], attrs, low.tensors[outs[0]])
