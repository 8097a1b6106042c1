"""SignalStacker: frames of num_channels int16 values stacked with their context, stacker_left_context frames
before and stacker_right_context after, every stacker_step frames (signal/micro/kernels/stacker.cc). Its ring
buffer is state; four IR ops:

- ``signal_stacker`` (x, count[, history]) -> the stack of left + right + 1 frames (zeros when none is complete);
- ``signal_stacker_valid`` (count) -> 1 when the call completes a stack, else 0 (the bool output);
- ``signal_stacker_count`` (count) -> the frames the buffer holds for the next call (-1: no frame yet);
- ``signal_stacker_history`` (x, count, history) -> the last left + right frames for the next call.

TFLite Micro's buffer: the first frame goes in 1 + left times (its left context is itself), every later one once;
when it holds left + right + 1 frames they are the output and the oldest stacker_step are dropped. The state keeps
the last left + right frames and the count; where TFLite Micro writes no output (valid 0) its tensor keeps whatever
its arena held, here zeros."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.ops.signal.common import (
    I16,
    I32,
    U8,
    add_flag,
    declared_result,
    need_history,
    need_type,
    new_state,
    register_stream_op,
)
from tinycc_ml.ir.types import TensorType

ATTRS = {"left": "int", "right": "int", "step": "int"}
MAX_CONTEXT = 1 << 12


def _window(attrs: dict) -> int:
    """Frames in a stack: left + right + 1."""
    return int(attrs["left"]) + int(attrs["right"]) + 1


def _check(x: TensorType, attrs: dict) -> int:
    left, right, step = int(attrs["left"]), int(attrs["right"]), int(attrs["step"])
    need(0 <= left <= MAX_CONTEXT and 0 <= right <= MAX_CONTEXT, f"contexts {left} and {right} must be in [0, "
                                                                 f"{MAX_CONTEXT}]")
    need(1 <= step <= left + right + 1, f"stacker_step {step} must be in [1, {left + right + 1}] (the stack's frames: "
                                        "a larger step drops frames the buffer does not hold)")
    need_type(x, I16, "the frame", rank=1)
    return x.size


def _need_state(x: TensorType, count: TensorType, history: TensorType | None, attrs: dict) -> None:
    need_type(count, I32, "the stacker's count")
    need(count.shape == (1,), f"the stacker's count is one int32, has shape {list(count.shape)}")
    keep = (_window(attrs) - 1) * x.size
    need_history(history, (keep,), "the stacker", f"{keep} values", "a stacker without context keeps no history")


def _infer_stack(ts, attrs, declared):
    x, count, *history = ts
    channels = _check(x, attrs)
    _need_state(x, count, history[0] if history else None, attrs)
    return declared_result(declared, (_window(attrs) * channels,), I16)


def _infer_valid(ts, attrs, declared):
    (count,) = ts
    need_type(count, I32, "the stacker's count")
    return declared_result(declared, (), U8)


def _infer_count(ts, attrs, declared):
    (count,) = ts
    need_type(count, I32, "the stacker's count")
    return declared_result(declared, (1,), I32)


def _infer_history(ts, attrs, declared):
    x, count, history = ts
    _check(x, attrs)
    _need_state(x, count, history, attrs)
    return declared_result(declared, history.shape, I16)


def _held(count: int, attrs: dict) -> int:
    """Frames held once this call's frame is in."""
    return int(attrs["left"]) + 1 if count < 0 else count + 1


def stack(x, count, history, attrs: dict) -> np.ndarray:
    x = np.asarray(x, np.int64)
    window, channels = _window(attrs), x.shape[-1]
    out = np.zeros((len(x), window * channels), np.int64)
    for r in range(len(x)):
        c = int(np.asarray(count)[r, 0])
        if _held(c, attrs) >= window:
            earlier = [] if history is None else [np.asarray(history, np.int64)[r].reshape(-1)]
            frames = [x[r]] * window if c < 0 else [*earlier, x[r]]
            out[r] = np.concatenate(frames)
    return out


def valid(count, attrs: dict) -> np.ndarray:
    return np.array([int(_held(int(c), attrs) >= _window(attrs)) for c in np.asarray(count)[:, 0]], np.int64)


def next_count(count, attrs: dict) -> np.ndarray:
    def after(c: int) -> int:
        held = _held(c, attrs)
        return held - int(attrs["step"]) if held >= _window(attrs) else held
    return np.array([[after(int(c))] for c in np.asarray(count)[:, 0]], np.int64)


def next_history(x, count, history, attrs: dict) -> np.ndarray:
    x, history = np.asarray(x, np.int64), np.asarray(history, np.int64)
    keep = history.shape[-1]
    out = np.zeros((len(x), keep), np.int64)
    for r in range(len(x)):
        copies = int(attrs["left"]) + 1 if int(np.asarray(count)[r, 0]) < 0 else 1
        out[r] = np.concatenate([history[r], np.tile(x[r], copies)])[-keep:]
    return out


def _c_stack(em, node) -> list[str]:
    x, count, *history = node.inputs
    window, channels = _window(node.attrs), em.graph.type(x).size
    held = f"({em.at(count, '0')} < 0 ? {int(node.attrs['left']) + 1} : {em.at(count, '0')} + 1)"
    value = em.at(x, "i") if not history else \
        f"({em.at(count, '0')} < 0 || f == {window - 1} ? {em.at(x, 'i')} : {em.at(history[0], f'f * {channels} + i')})"
    return [f"for (long f = 0; f < {window}; ++f)", f"    for (long i = 0; i < {channels}; ++i)",
            f"        {em.var(node.name)}[f * {channels} + i] = {held} >= {window} ? {value} : 0;"]


def _c_valid(em, node) -> list[str]:
    (count,) = node.inputs
    c = em.at(count, "0")
    return [f"{em.var(node.name)}[0] = (uint8_t)(({c} < 0 ? {int(node.attrs['left']) + 1} : {c} + 1) >= "
            f"{_window(node.attrs)});"]


def _c_count(em, node) -> list[str]:
    (count,) = node.inputs
    c = em.at(count, "0")
    return ["{", f"    const int32_t held = {c} < 0 ? {int(node.attrs['left']) + 1} : {c} + 1;",
            f"    {em.var(node.name)}[0] = held >= {_window(node.attrs)} ? held - {int(node.attrs['step'])} : held;",
            "}"]


def _c_history(em, node) -> list[str]:
    x, count, history = node.inputs
    channels, keep = em.graph.type(x).size, em.graph.type(history).size
    return ["{", f"    const long shift = {em.at(count, '0')} < 0 ? {(int(node.attrs['left']) + 1) * channels} : "
                 f"{channels};",
            f"    for (long i = 0; i < {keep}; ++i) {{", "        const long t = i + shift;",
            f"        {em.var(node.name)}[i] = t < {keep} ? {em.at(history, 't')} : {em.at(x, f't % {channels}')};",
            "    }", "}"]


register_stream_op("signal_stacker", (2, 3), _infer_stack,
                   lambda x, count, *history, attrs: stack(x, count, history[0] if history else None, attrs), _c_stack,
                   ATTRS, "TFLite Micro's SignalStacker, its stack of frames (zeros where none is complete)")
register_stream_op("signal_stacker_valid", 1, _infer_valid, valid, _c_valid,
                   ATTRS, "TFLite Micro's SignalStacker, its valid flag: 1 when the call completes a stack")
register_stream_op("signal_stacker_count", 1, _infer_count, next_count, _c_count,
                   ATTRS, "TFLite Micro's SignalStacker, the frames its buffer holds for the next call (-1: none yet)")
register_stream_op("signal_stacker_history", 3, _infer_history, next_history, _c_history,
                   ATTRS, "TFLite Micro's SignalStacker, the frames its buffer keeps for the next call")


@tflite_custom("SignalStacker", inputs=(1, 1), outputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    op = "SignalStacker"
    attrs = {"left": custom_int(options, "stacker_left_context", op, 0, MAX_CONTEXT),
             "right": custom_int(options, "stacker_right_context", op, 0, MAX_CONTEXT),
             "step": custom_int(options, "stacker_step", op, 1, 2 * MAX_CONTEXT + 1)}
    x = low.value(ins[0])
    x_type = low.graph.type(x)
    channels = custom_int(options, "num_channels", op, 1, 1 << 15)
    need(x_type.rank == 1 and channels == x_type.size, f"{op}: num_channels {channels} for a frame of shape "
                                                       f"{list(x_type.shape)}")
    _check(x_type, attrs)
    base = low.name_of(low.tensors[outs[0]])
    count = new_state(low, f"{base}_count", np.array([-1], np.int32), I32)
    keep = (_window(attrs) - 1) * channels
    history = [new_state(low, f"{base}_history", np.zeros(keep, np.int16), I16)] if keep else []
    low.add("signal_stacker", [x, count, *history], attrs, low.tensors[outs[0]])
    add_flag(low, "signal_stacker_valid", [count], attrs, outs[1], op)
    low.graph.set_next_state(count, low.graph.add("signal_stacker_count", [count], attrs, type=TensorType((1,), I32),
                                                  name=f"{base}_count_next"))
    if history:
        low.graph.set_next_state(history[0], low.graph.add("signal_stacker_history", [x, count, history[0]], attrs,
                                                           type=TensorType((keep,), I16), name=f"{base}_history_next"))
