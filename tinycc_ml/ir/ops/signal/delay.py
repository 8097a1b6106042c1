"""SignalDelay: each row of int16 samples (its last axis) delayed by delay_length samples across calls, zeros
first (signal/micro/kernels/delay.cc). The last delay_length samples are state; two IR ops:

- ``signal_delay`` (x[, history]) -> the row's samples delay_length earlier: (history, x)'s first ones;
- ``signal_delay_history`` (x, history) -> (history, x)'s last delay_length, for the next call."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import (
    I16,
    INTEGER_ONLY,
    declared_result,
    need_history,
    need_type,
    new_state,
    outer_and_inner,
    with_rows,
)
from tinycc_ml.ir.types import TensorType

MAX_DELAY = 1 << 16


def _check(x: TensorType, history: TensorType | None, attrs: dict) -> None:
    delay = int(attrs["delay"])
    need(0 <= delay <= MAX_DELAY, f"delay_length {delay} is outside [0, {MAX_DELAY}]")
    need_type(x, I16, "the samples")
    need(x.rank >= 1, "the samples must have at least one dimension")
    need_history(history, (*x.shape[:-1], delay), "the delay", f"{delay} samples a row",
                 "a delay of 0 keeps no history")


def _infer(ts, attrs, declared):
    x, *history = ts
    _check(x, history[0] if history else None, attrs)
    return declared_result(declared, x.shape, I16, x.layout)


def _infer_history(ts, attrs, declared):
    x, history = ts
    _check(x, history, attrs)
    return declared_result(declared, history.shape, I16)


def _joined(x, history, delay: int) -> np.ndarray:
    x = np.asarray(x, np.int64)
    rows = x.reshape(len(x), -1, x.shape[-1])
    if delay == 0:
        return rows
    return np.concatenate([np.asarray(history, np.int64).reshape(len(x), -1, delay), rows], axis=-1)


def delayed(x, history, attrs: dict) -> np.ndarray:
    x = np.asarray(x)
    return _joined(x, history, int(attrs["delay"]))[:, :, :x.shape[-1]].reshape(x.shape)


def next_history(x, history, attrs: dict) -> np.ndarray:
    delay = int(attrs["delay"])
    return _joined(x, history, delay)[:, :, -delay:].reshape(np.shape(history))


def _sample(em, x: str, history: str, delay: int, inner: int, t: str) -> str:
    return f"({t} < {delay} ? {em.at(history, f'o * {delay} + {t}')} : {em.at(x, f'o * {inner} + {t} - {delay}')})"


def _c(em, node) -> list[str]:
    x, *history = node.inputs
    delay = int(node.attrs["delay"])
    rows, inner = outer_and_inner(em.graph.type(x))
    value = _sample(em, x, history[0], delay, inner, "i") if history else em.at(x, f"o * {inner} + i")
    return [f"for (long o = 0; o < {rows}; ++o)", f"    for (long i = 0; i < {inner}; ++i)",
            f"        {em.var(node.name)}[o * {inner} + i] = {value};"]


def _c_history(em, node) -> list[str]:
    x, history = node.inputs
    delay = int(node.attrs["delay"])
    rows, inner = outer_and_inner(em.graph.type(x))
    return [f"for (long o = 0; o < {rows}; ++o)", f"    for (long i = 0; i < {delay}; ++i) {{",
            f"        const long t = {inner} + i;",
            f"        {em.var(node.name)}[o * {delay} + i] = {_sample(em, x, history, delay, inner, 't')};", "    }"]


register_op(OpDef(
    "signal_delay", (1, 2), _infer,
    lambda xs, attrs: delayed(np.asarray(xs[0])[None], np.asarray(xs[1])[None] if len(xs) > 1 else None, attrs)[0]
    .astype(np.float64), {"delay": "int"},
    "TFLite Micro's SignalDelay: each row's samples delay_length samples earlier (zeros first)",
    fixed=lambda call: delayed(*with_rows(call.ins[:1], call.in_types[:1]),
                               with_rows(call.ins[1:], call.in_types[1:])[0] if len(call.ins) > 1 else None,
                               call.attrs),
    c={"fixed": _c}, unsupported=INTEGER_ONLY))
register_op(OpDef(
    "signal_delay_history", 2, _infer_history,
    lambda xs, attrs: next_history(np.asarray(xs[0])[None], np.asarray(xs[1])[None], attrs)[0].astype(np.float64),
    {"delay": "int"}, "TFLite Micro's SignalDelay, the samples it keeps for the next call",
    fixed=lambda call: next_history(*with_rows(call.ins, call.in_types), call.attrs), c={"fixed": _c_history},
    unsupported=INTEGER_ONLY))


@tflite_custom("SignalDelay")
def lower(low, options, ins, outs) -> None:
    delay = custom_int(options, "delay_length", "SignalDelay", 0, MAX_DELAY)
    x = low.value(ins[0])
    x_type = low.graph.type(x)
    attrs = {"delay": delay}
    _check(x_type, None, {"delay": 0})
    if delay == 0:
        low.add("signal_delay", [x], attrs, low.tensors[outs[0]])
        return
    base = low.name_of(low.tensors[outs[0]])
    history = new_state(low, f"{base}_history", np.zeros((*x_type.shape[:-1], delay), np.int16), I16)
    low.add("signal_delay", [x, history], attrs, low.tensors[outs[0]])
    low.graph.set_next_state(history, low.graph.add("signal_delay_history", [x, history], attrs,
                                                    type=low.graph.type(history), name=f"{base}_history_next"))
