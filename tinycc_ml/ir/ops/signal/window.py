"""SignalWindow: each frame of int16 samples times an int16 window, shifted right and saturated to int16
(signal/src/window.cc: (x * w) >> shift in int32, an arithmetic shift)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import I16, INTEGER_ONLY, declared_result, need_type, with_rows


def _infer(ts, attrs, declared):
    x, w = ts
    need_type(x, I16, "the samples")
    need_type(w, I16, "the window", rank=1)
    need(x.rank >= 1 and x.shape[-1] == w.shape[0], f"a window of {w.shape[0]} for frames of shape {list(x.shape)}")
    need(0 <= int(attrs["shift"]) <= 31, f"shift {attrs['shift']} is outside [0, 31]")
    return declared_result(declared, x.shape, I16, x.layout)


def apply_window(x, w, shift: int) -> np.ndarray:
    return np.clip((np.asarray(x, np.int64) * np.asarray(w, np.int64)) >> shift, -32768, 32767)


def _fixed(call):
    x, w = with_rows(call.ins, call.in_types)
    return apply_window(x, w.reshape(-1), int(call.attrs["shift"]))


def _c(em, node) -> list[str]:
    x, w = node.inputs
    n, size = em.graph.type(w).size, node.type.size
    return [f"for (long i = 0; i < {size}; ++i) {{",
            f"    const int32_t raw = ((int32_t){em.at(x, 'i')} * {em.at(w, f'i % {n}')}) "
            f">> {int(node.attrs['shift'])};",
            f"    {em.var(node.name)}[i] = (int16_t)(raw < -32768 ? -32768 : (raw > 32767 ? 32767 : raw));", "}"]


register_op(OpDef(
    "signal_window", 2, _infer, lambda xs, attrs: apply_window(xs[0], xs[1], int(attrs["shift"])).astype(np.float64),
    {"shift": "int"}, "TFLite Micro's SignalWindow: int16 samples times an int16 window, >> shift, saturated",
    fixed=_fixed, c={"fixed": _c}, dense_const_operand=1, unsupported=INTEGER_ONLY))


@tflite_custom("SignalWindow", inputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    shift = custom_int(options, "shift", "SignalWindow", 0, 31)
    low.add("signal_window", [low.value(ins[0]), low.value(ins[1])], {"shift": shift}, low.tensors[outs[0]])
