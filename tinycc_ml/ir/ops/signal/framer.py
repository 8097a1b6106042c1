"""SignalFramer: each row of int16 samples (its last axis: n_frames x frame_step new samples a call) appended to a
ring buffer, frames of frame_size read from it every frame_step (signal/micro/kernels/framer.cc with
signal/src/circular_buffer.cc). Its ring buffer is state; four IR ops:

- ``signal_framer`` (x, count[, history]) -> frames (..., n_frames, frame_size);
- ``signal_framer_valid`` (count) -> 1 when every frame of the call is complete, else 0 (the bool output);
- ``signal_framer_count`` (count) -> the buffer's fill for the next call;
- ``signal_framer_history`` (x, history) -> the buffer's samples for the next call.

The buffer holds capacity = frame_size rounded up to a multiple of frame_step; before each frame it holds ``count``
samples (prefill: frame_size - frame_step zeros at first), the frame_step new ones are appended, and when it then
holds at least frame_size samples the oldest frame_size are the frame and the oldest frame_step are dropped. The
state keeps the last capacity - frame_step samples (zeros at first: the prefill's zeros) and the count; a frame is
read from their concatenation with the new samples. Where TFLite Micro writes no frame (the buffer not yet full:
valid 0) its output tensor keeps whatever its arena held; here the frame is zeros."""

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
    outer_and_inner,
    register_stream_op,
)
from tinycc_ml.ir.types import TensorType

ATTRS = {"frame_size": "int", "frame_step": "int"}
MAX_LENGTH = 1 << 16


def capacity(frame_size: int, frame_step: int) -> int:
    return -(-frame_size // frame_step) * frame_step


def kept(attrs: dict) -> int:
    """The samples the state keeps: capacity - frame_step."""
    return capacity(int(attrs["frame_size"]), int(attrs["frame_step"])) - int(attrs["frame_step"])


def _check(x: TensorType, attrs: dict) -> tuple[int, int]:
    """(rows, frames per call) of the samples x."""
    size, step = int(attrs["frame_size"]), int(attrs["frame_step"])
    need(1 <= size <= MAX_LENGTH and 1 <= step <= MAX_LENGTH,
         f"frame_size {size} and frame_step {step} must be in [1, {MAX_LENGTH}]")
    need_type(x, I16, "the samples")
    rows, inner = outer_and_inner(x)
    need(x.rank >= 1 and inner >= step and inner % step == 0,
         f"rows of {inner} samples are not a whole number of frame_step {step}")
    return rows, inner // step


def _need_count(t: TensorType) -> None:
    need_type(t, I32, "the framer's count")
    need(t.shape == (1,), f"the framer's count is one int32, has shape {list(t.shape)}")


def _need_history(x: TensorType, history: TensorType | None, attrs: dict) -> None:
    keep = kept(attrs)
    need_history(history, (*x.shape[:-1], keep), "the framer", f"{keep} samples a row",
                 "a framer whose capacity is one frame_step keeps no history")


def _infer_frames(ts, attrs, declared):
    x, count, *history = ts
    _, n = _check(x, attrs)
    _need_count(count)
    _need_history(x, history[0] if history else None, attrs)
    return declared_result(declared, (*x.shape[:-1], n, int(attrs["frame_size"])), I16)


def _infer_valid(ts, attrs, declared):
    (count,) = ts
    _need_count(count)
    return declared_result(declared, (), U8)


def _infer_count(ts, attrs, declared):
    (count,) = ts
    _need_count(count)
    need(int(attrs["frames"]) >= 1, f"frames {attrs['frames']} must be at least 1")
    return declared_result(declared, (1,), I32)


def _infer_history(ts, attrs, declared):
    x, history = ts
    _check(x, attrs)
    _need_history(x, history, attrs)
    return declared_result(declared, history.shape, I16)


def _fills(count: int, n: int, size: int, step: int) -> list[int | None]:
    """Each frame's fill once its samples are in (None: no frame), and the count left after the call."""
    fills = []
    for _ in range(n):
        count += step
        fills.append(count if count >= size else None)
        count -= step if count >= size else 0
    return [*fills, count]


def _buffers(x, history, keep: int) -> np.ndarray:
    rows = x.shape[0]
    xs = np.asarray(x, np.int64).reshape(rows, -1, x.shape[-1])
    if keep == 0:
        return xs
    return np.concatenate([np.asarray(history, np.int64).reshape(rows, -1, keep), xs], axis=-1)


def frames(x, count, history, attrs: dict) -> np.ndarray:
    size, step, keep = int(attrs["frame_size"]), int(attrs["frame_step"]), kept(attrs)
    buf = _buffers(x, history, keep)
    n = x.shape[-1] // step
    out = np.zeros((*buf.shape[:2], n, size), np.int64)
    for r in range(len(buf)):
        for j, fill in enumerate(_fills(int(np.asarray(count)[r, 0]), n, size, step)[:-1]):
            if fill is not None:
                start = keep + (j + 1) * step - fill
                out[r, :, j] = buf[r, :, start:start + size]
    return out.reshape(*x.shape[:-1], n, size)


def valid(count, attrs: dict) -> np.ndarray:
    return (np.asarray(count, np.int64)[:, 0] + int(attrs["frame_step"]) >= int(attrs["frame_size"])).astype(np.int64)


def next_count(count, attrs: dict) -> np.ndarray:
    size, step, n = int(attrs["frame_size"]), int(attrs["frame_step"]), int(attrs["frames"])
    return np.array([[_fills(int(c), n, size, step)[-1]] for c in np.asarray(count)[:, 0]], np.int64)


def next_history(x, history, attrs: dict) -> np.ndarray:
    keep = kept(attrs)
    return _buffers(x, history, keep)[:, :, -keep:].reshape(np.shape(history))


def _c_sample(em, x: str, history: str | None, keep: int, inner: int, t: str) -> str:
    """Sample t of row o of the concatenation (history, x)."""
    if history is None:
        return em.at(x, f"o * {inner} + {t}")
    return f"({t} < {keep} ? {em.at(history, f'o * {keep} + {t}')} : {em.at(x, f'o * {inner} + {t} - {keep}')})"


def _c_frames(em, node) -> list[str]:
    x, count, *history = node.inputs
    size, step, keep = int(node.attrs["frame_size"]), int(node.attrs["frame_step"]), kept(node.attrs)
    rows, inner = outer_and_inner(em.graph.type(x))
    n = inner // step
    out = em.var(node.name)
    sample = _c_sample(em, x, history[0] if history else None, keep, inner, "t")
    return ["{", f"    int32_t fill = {em.at(count, '0')};", f"    for (long j = 0; j < {n}; ++j) {{",
            f"        fill += {step};", f"        for (long o = 0; o < {rows}; ++o) {{",
            f"            const long start = {keep} + (j + 1) * {step} - fill;",
            f"            for (long i = 0; i < {size}; ++i) {{", "                const long t = start + i;",
            f"                {out}[(o * {n} + j) * {size} + i] = fill >= {size} ? {sample} : 0;",
            "            }", "        }", f"        if (fill >= {size})", f"            fill -= {step};", "    }", "}"]


def _c_valid(em, node) -> list[str]:
    (count,) = node.inputs
    return [f"{em.var(node.name)}[0] = (uint8_t)({em.at(count, '0')} + {int(node.attrs['frame_step'])} >= "
            f"{int(node.attrs['frame_size'])});"]


def _c_count(em, node) -> list[str]:
    (count,) = node.inputs
    size, step, n = int(node.attrs["frame_size"]), int(node.attrs["frame_step"]), int(node.attrs["frames"])
    return ["{", f"    int32_t fill = {em.at(count, '0')};", f"    for (long j = 0; j < {n}; ++j) {{",
            f"        fill += {step};", f"        if (fill >= {size})", f"            fill -= {step};", "    }",
            f"    {em.var(node.name)}[0] = fill;", "}"]


def _c_history(em, node) -> list[str]:
    x, history = node.inputs
    keep = kept(node.attrs)
    rows, inner = outer_and_inner(em.graph.type(x))
    sample = _c_sample(em, x, history, keep, inner, "t")
    return [f"for (long o = 0; o < {rows}; ++o) {{", f"    for (long i = 0; i < {keep}; ++i) {{",
            f"        const long t = {inner} + i;", f"        {em.var(node.name)}[o * {keep} + i] = {sample};", "    }",
            "}"]


register_stream_op("signal_framer", (2, 3), _infer_frames,
                   lambda x, count, *history, attrs: frames(x, count, history[0] if history else None, attrs),
                   _c_frames, ATTRS, "TFLite Micro's SignalFramer, its frames (zeros where none is complete yet)")
register_stream_op("signal_framer_valid", 1, _infer_valid, valid, _c_valid,
                   ATTRS, "TFLite Micro's SignalFramer, its valid flag: 1 when the call's frames are complete")
register_stream_op("signal_framer_count", 1, _infer_count, lambda count, attrs: next_count(count, attrs), _c_count,
                   {**ATTRS, "frames": "int"}, "TFLite Micro's SignalFramer, its buffer's fill for the next call")
register_stream_op("signal_framer_history", 2, _infer_history,
                   lambda x, history, attrs: next_history(x, history, attrs), _c_history,
                   ATTRS, "TFLite Micro's SignalFramer, the samples its buffer keeps for the next call")


@tflite_custom("SignalFramer", inputs=(1, 1), outputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    op = "SignalFramer"
    size = custom_int(options, "frame_size", op, 1, MAX_LENGTH)
    step = custom_int(options, "frame_step", op, 1, MAX_LENGTH)
    prefill = options.get("prefill", False)
    need(isinstance(prefill, bool), f"{op}: option 'prefill' is {prefill!r}; a boolean is needed")
    need(not prefill or size >= step, f"{op}: prefill with frame_size {size} below frame_step {step} (its buffer "
                                      "would be prefilled with a negative count of zeros)")
    x = low.value(ins[0])
    x_type = low.graph.type(x)
    attrs = {"frame_size": size, "frame_step": step}
    _, n = _check(x_type, attrs)
    base = low.name_of(low.tensors[outs[0]])
    count = new_state(low, f"{base}_count", np.array([size - step if prefill else 0], np.int32), I32)
    keep = kept(attrs)
    history = [new_state(low, f"{base}_history", np.zeros((*x_type.shape[:-1], keep), np.int16), I16)] if keep else []
    low.add("signal_framer", [x, count, *history], attrs, low.tensors[outs[0]])
    add_flag(low, "signal_framer_valid", [count], attrs, outs[1], op)
    low.graph.set_next_state(count, low.graph.add("signal_framer_count", [count], {**attrs, "frames": n},
                                                  type=TensorType((1,), I32), name=f"{base}_count_next"))
    if history:
        low.graph.set_next_state(history[0], low.graph.add("signal_framer_history", [x, history[0]], attrs,
                                                           type=low.graph.type(history[0]),
                                                           name=f"{base}_history_next"))
