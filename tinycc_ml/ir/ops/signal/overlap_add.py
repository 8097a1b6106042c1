"""SignalOverlapAdd: frames (..., n_frames, frame_size) of int16 or float32 added into a running buffer, frame_step
values out per frame (signal/micro/kernels/overlap_add.cc, signal/src/overlap_add.cc): the buffer plus the frame
(int16: saturated; float32: one rounding), its first frame_step values out, the rest moved to the front, zeros
after. What the buffer carries to the next call, frame_size - frame_step values a row, is state; two IR ops:

- ``signal_overlap_add`` (frames[, state]) -> (..., n_frames * frame_step);
- ``signal_overlap_add_state`` (frames[, state]) -> the buffer's carried values for the next call."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import (
    I16,
    NO_ACCUMULATOR,
    NO_RANGES,
    declared_result,
    new_state,
    saturate16_c,
    with_rows,
)
from tinycc_ml.ir.ops.signal.kissfft import CTYPES, TENSOR_TYPES
from tinycc_ml.ir.types import F32, TensorType

MAX_FRAME = 1 << 16


def _check(x: TensorType, state: TensorType | None, attrs: dict) -> tuple[int, int, int]:
    """(rows, frames, frame_size) of the frames x."""
    step = int(attrs["frame_step"])
    need(x.dtype in (I16, F32), f"the frames must be i16 or f32, got {x.dtype}")
    need(x.rank >= 2, f"the frames must have at least two dimensions (frames, frame_size), have shape "
                      f"{list(x.shape)}")
    size, n = x.shape[-1], x.shape[-2]
    need(1 <= step <= size, f"frame_step {step} must be in [1, frame_size {size}]")
    rows = x.size // (size * n) if size * n else 0
    carried = size - step
    if carried == 0:
        need(state is None, "frames of frame_step values carry nothing: no state operand")
    else:
        need(state is not None and state.dtype == x.dtype and state.shape == (*x.shape[:-2], carried),
             f"the carried state must be {x.dtype} of shape {[*x.shape[:-2], carried]}, is "
             f"{state if state is not None else 'missing'}")
    return rows, n, size


def _infer(ts, attrs, declared):
    x, *state = ts
    _check(x, state[0] if state else None, attrs)
    return declared_result(declared, (*x.shape[:-2], x.shape[-2] * int(attrs["frame_step"])), x.dtype)


def _infer_state(ts, attrs, declared):
    x, *state = ts
    _check(x, state[0] if state else None, attrs)
    need(bool(state), "frames of frame_step values carry nothing: no next state")
    return declared_result(declared, state[0].shape, x.dtype)


def overlap_add(x, state, step: int, is_float: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows of frames (rows, ..., n, size) and carried values -> (outputs (rows, ..., n * step), next carried)."""
    kind = np.float32 if is_float else np.int64
    x = np.asarray(x).astype(kind)
    lead, n, size = x.shape[:-2], x.shape[-2], x.shape[-1]
    frames = x.reshape(-1, n, size)
    buf = np.zeros((len(frames), size), kind)
    if size > step:
        buf[:, :size - step] = np.asarray(state).astype(kind).reshape(len(frames), size - step)
    out = np.zeros((len(frames), n, step), kind)
    for j in range(n):
        buf = buf + frames[:, j]
        if not is_float:
            buf = np.clip(buf, -32768, 32767)
        out[:, j] = buf[:, :step]
        buf = np.concatenate([buf[:, step:], np.zeros((len(frames), step), kind)], axis=1)
    return out.reshape(*lead, n * step), buf[:, :size - step].reshape(*lead, size - step)


def _semantics(which: int):
    def fixed(call):
        x, *state = with_rows(call.ins, call.in_types)
        return overlap_add(x, state[0] if state else None, int(call.attrs["frame_step"]),
                           call.in_types[0].dtype == F32)[which]

    def evaluate(xs, attrs):
        x = np.asarray(xs[0])
        state = [np.asarray(xs[1])[None]] if len(xs) > 1 else []
        return overlap_add(x[None], state[0] if state else None, int(attrs["frame_step"]), x.dtype.kind == "f")[
            which][0].astype(np.float64)
    return fixed, evaluate


def _c(which: int):
    def code(em, node) -> list[str]:
        x, *state = node.inputs
        step = int(node.attrs["frame_step"])
        rows, n, size = _check(em.graph.type(x), em.graph.type(state[0]) if state else None, node.attrs)
        T = CTYPES[str(em.graph.type(x).dtype)]
        carried = size - step
        buf = em.sym(f"{node.name}_buffer")
        em.static_ram[buf] = size * (2 if T == "int16_t" else 4)
        add = saturate16_c("v") if T == "int16_t" else "v"
        lines = [f"for (long o = 0; o < {rows}; ++o) {{",
                 f"    static {T} b[{size}]; /* {buf}: the buffer frames are added into */",
                 f"    for (long i = 0; i < {size}; ++i)",
                 f"        b[i] = i < {carried} ? {em.at(state[0], f'o * {carried} + i') if state else '0'} : 0;",
                 f"    for (long j = 0; j < {n}; ++j) {{", f"        for (long i = 0; i < {size}; ++i) {{",
                 f"            const {'int32_t' if T == 'int16_t' else T} v = "
                 f"{'(int32_t)' if T == 'int16_t' else ''}b[i] + {em.at(x, f'(o * {n} + j) * {size} + i')};",
                 f"            b[i] = {add};", "        }"]
        if which == 0:
            lines += [f"        for (long i = 0; i < {step}; ++i)",
                      f"            {em.var(node.name)}[(o * {n} + j) * {step} + i] = b[i];"]
        lines += [f"        for (long i = 0; i < {size}; ++i)",
                  f"            b[i] = i < {carried} ? b[i + {step}] : 0;",
                  "    }"]
        if which == 1:
            lines += [f"    for (long i = 0; i < {carried}; ++i)",
                      f"        {em.var(node.name)}[o * {carried} + i] = b[i];"]
        return [*lines, "}"]
    return code


for _which, (_name, _infer_rule, _text) in enumerate([
        ("signal_overlap_add", _infer, "TFLite Micro's SignalOverlapAdd of int16 (saturated) or float32 frames"),
        ("signal_overlap_add_state", _infer_state, "TFLite Micro's SignalOverlapAdd, what its buffer carries to the "
                                                   "next call")]):
    _fixed, _evaluate = _semantics(_which)
    register_op(OpDef(_name, (1, 2), _infer_rule, _evaluate, {"frame_step": "int"}, _text, fixed=_fixed,
                      c={"fixed": _c(_which), "float": _c(_which)},
                      unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_custom("SignalOverlapAdd")
def lower(low, options, ins, outs) -> None:
    op = "SignalOverlapAdd"
    x = low.value(ins[0])
    x_type = low.graph.type(x)
    kind = custom_int(options, "T", op, 0, 255)
    need(kind in (0, 7) and TENSOR_TYPES[kind] == x_type.dtype,
         f"{op}: T = {kind} for {x_type.dtype} frames (the int16 (7) and float32 (0) kernels exist)")
    step = custom_int(options, "frame_step", op, 1, MAX_FRAME)
    attrs = {"frame_step": step}
    need(x_type.rank >= 2, f"{op}: frames of shape {list(x_type.shape)}; (..., frames, frame_size) is needed")
    size = x_type.shape[-1]
    need(step <= size, f"{op}: frame_step {step} beyond frame_size {size}")
    if step == size:
        low.add("signal_overlap_add", [x], attrs, low.tensors[outs[0]])
        return
    base = low.name_of(low.tensors[outs[0]])
    dtype = x_type.dtype
    init = np.zeros((*x_type.shape[:-2], size - step), np.float32 if dtype == F32 else np.int16)
    state = new_state(low, f"{base}_carried", init, dtype)
    low.add("signal_overlap_add", [x, state], attrs, low.tensors[outs[0]])
    low.graph.set_next_state(state, low.graph.add("signal_overlap_add_state", [x, state], attrs,
                                                  type=TensorType(init.shape, dtype), name=f"{base}_carried_next"))
