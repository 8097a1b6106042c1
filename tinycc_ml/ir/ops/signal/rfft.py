"""SignalRfft: the real FFT of frames (zero-padded to fft_length) as complex bins 0..fft_length/2 interleaved (re,
im): TFLite Micro's RFFT of int16, int32 or float32 frames, kissfft's ``kiss_fftr`` in that arithmetic (FIXED_POINT
16, FIXED_POINT 32, float; restated in ``kissfft.py``)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import NO_ACCUMULATOR, NO_RANGES, declared_result, with_rows
from tinycc_ml.ir.ops.signal.kissfft import MAX_FFT, SCALAR_TYPES, TENSOR_TYPES, c_real_fft, real_fft


def check_fft_length(size: int) -> None:
    need(4 <= size <= MAX_FFT and size & (size - 1) == 0, f"fft_length {size} is not a power of two in [4, {MAX_FFT}]")


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.dtype in SCALAR_TYPES, f"the frames must be i16, i32 or f32, got {x.dtype}")
    size = int(attrs["fft_length"])
    check_fft_length(size)
    need(x.rank >= 1 and x.shape[-1] <= size, f"frames of {x.shape[-1] if x.rank else 0} samples for fft_length {size}")
    return declared_result(declared, (*x.shape[:-1], size + 2), x.dtype, x.layout)


def rfft(x, dtype, fft_length: int) -> np.ndarray:
    """Rows of frames (rows, ..., L) -> (rows, ..., fft_length + 2) in the frames' arithmetic."""
    x = np.asarray(x)
    lead, length = x.shape[:-1], x.shape[-1]
    frames = np.zeros((int(np.prod(lead, dtype=np.int64)), fft_length), np.float32 if dtype.is_float else np.int64)
    frames[:, :length] = x.reshape(-1, length)
    return real_fft(frames, dtype, fft_length).reshape(*lead, fft_length + 2)


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    size = int(node.attrs["fft_length"])
    length = em.graph.type(x).shape[-1]
    frames = em.graph.type(x).size // length
    fn = c_real_fft(em, em.graph.type(x).dtype, size)
    return [f"for (long r = 0; r < {frames}; ++r)",
            f"    {fn}({em.var(x)} + r * {length}, {length}, {em.var(node.name)} + r * {size + 2});"]


def _evaluate(xs, attrs):
    """The float semantics: float32 frames (the integer ones as the fixed-point interpreter computes them)."""
    x = np.asarray(xs[0])
    kind = SCALAR_TYPES[2] if x.dtype.kind == "f" else SCALAR_TYPES[0]
    return rfft(x[None], kind, int(attrs["fft_length"]))[0].astype(np.float64)


register_op(OpDef(
    "signal_rfft", 1, _infer, _evaluate, {"fft_length": "int"},
    "TFLite Micro's SignalRfft of int16, int32 or float32 frames: kissfft's real FFT in that arithmetic, bins (re, im)",
    fixed=lambda call: rfft(with_rows(call.ins, call.in_types)[0], call.in_types[0].dtype,
                            int(call.attrs["fft_length"])),
    c={"fixed": _c, "float": _c}, unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


def fft_kind(options, op: str, x_type) -> None:
    """The option "T" (TFLite's TensorType) names the frames' type."""
    kind = custom_int(options, "T", op, 0, 255)
    need(kind in TENSOR_TYPES, f"{op}: T = {kind}: the int16 (7), int32 (2) and float32 (0) transforms exist")
    need(TENSOR_TYPES[kind] == x_type.dtype, f"{op}: T = {kind} ({TENSOR_TYPES[kind]}) for {x_type.dtype} tensors")


@tflite_custom("SignalRfft")
def lower(low, options, ins, outs) -> None:
    x = low.value(ins[0])
    fft_kind(options, "SignalRfft", low.graph.type(x))
    size = custom_int(options, "fft_length", "SignalRfft", 4, MAX_FFT)
    low.add("signal_rfft", [x], {"fft_length": size}, low.tensors[outs[0]])
