"""SignalIrfft: the inverse real FFT of complex bins 0..fft_length/2 interleaved (re, im) into fft_length samples:
TFLite Micro's IRFFT of int16, int32 or float32 spectra, kissfft's ``kiss_fftri`` in that arithmetic (restated in
``kissfft.py``); the float transform divided by fft_length, as its kernel does, the fixed-point ones not."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import NO_ACCUMULATOR, NO_RANGES, declared_result, with_rows
from tinycc_ml.ir.ops.signal.kissfft import MAX_FFT, SCALAR_TYPES, c_inverse_real_fft, inverse_real_fft
from tinycc_ml.ir.ops.signal.rfft import check_fft_length, fft_kind


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.dtype in SCALAR_TYPES, f"the spectra must be i16, i32 or f32, got {x.dtype}")
    size = int(attrs["fft_length"])
    check_fft_length(size)
    need(x.rank >= 1 and x.shape[-1] == size + 2,
         f"spectra of {x.shape[-1] if x.rank else 0} values for fft_length {size} (its {size // 2 + 1} bins (re, "
         f"im) are {size + 2})")
    return declared_result(declared, (*x.shape[:-1], size), x.dtype, x.layout)


def irfft(x, dtype, fft_length: int) -> np.ndarray:
    """Rows of spectra (rows, ..., fft_length + 2) -> (rows, ..., fft_length) in the spectra's arithmetic."""
    x = np.asarray(x)
    lead = x.shape[:-1]
    return inverse_real_fft(x.reshape(-1, fft_length + 2), dtype, fft_length).reshape(*lead, fft_length)


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    size = int(node.attrs["fft_length"])
    frames = em.graph.type(x).size // (size + 2)
    fn = c_inverse_real_fft(em, em.graph.type(x).dtype, size)
    return [f"for (long r = 0; r < {frames}; ++r)",
            f"    {fn}({em.var(x)} + r * {size + 2}, {em.var(node.name)} + r * {size});"]


def _evaluate(xs, attrs):
    x = np.asarray(xs[0])
    kind = SCALAR_TYPES[2] if x.dtype.kind == "f" else SCALAR_TYPES[0]
    return irfft(x[None], kind, int(attrs["fft_length"]))[0].astype(np.float64)


register_op(OpDef(
    "signal_irfft", 1, _infer, _evaluate, {"fft_length": "int"},
    "TFLite Micro's SignalIrfft of int16, int32 or float32 bins: kissfft's inverse real FFT in that arithmetic "
    "(float: divided by fft_length)",
    fixed=lambda call: irfft(with_rows(call.ins, call.in_types)[0], call.in_types[0].dtype,
                             int(call.attrs["fft_length"])),
    c={"fixed": _c, "float": _c}, unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_custom("SignalIrfft")
def lower(low, options, ins, outs) -> None:
    x = low.value(ins[0])
    fft_kind(options, "SignalIrfft", low.graph.type(x))
    size = custom_int(options, "fft_length", "SignalIrfft", 4, MAX_FFT)
    low.add("signal_irfft", [x], {"fft_length": size}, low.tensors[outs[0]])
