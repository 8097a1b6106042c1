"""TFLite Micro's real FFTs in all their arithmetics: SignalRfft of int32 and float32 frames (int16:
test_signal_ops.py) and SignalIrfft of int16, int32 and float32 bins, one operator at a time against tflite-micro
on every bit (kissfft's rounding, wrap-around and float32 order of operations), in the interpreter and the host C;
bad parameters refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.ops.signal.stream_check import built, interpreted, one_op, tflite_micro_outputs
from tinycc_ml.errors import ModelFileError

KINDS = {"int16": 7, "int32": 2, "float32": 0}


def values(kind: str, rows: int, length: int, seed: int) -> np.ndarray:
    """Full-scale noise, quiet noise, a tone, silence, every value at the type's most negative, alternating extremes."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    if kind == "float32":
        out = np.stack([rng.normal(0, 1, length), rng.normal(0, 1e-3, length), 3e4 * np.sin(0.3 * t),
                        np.zeros(length), np.full(length, -1e30), np.where(t % 2, 1e20, -1e20),
                        *rng.normal(0, 100, (rows, length))])
        return out.astype(np.float32)
    lo, hi = np.iinfo(kind).min, np.iinfo(kind).max
    out = np.stack([rng.integers(lo, hi, length, endpoint=True), rng.normal(0, 300, length),
                    0.6 * hi * np.sin(0.3 * t), np.zeros(length), np.full(length, lo), np.where(t % 2, hi, lo),
                    *rng.normal(0, hi / 8, (rows, length))])
    return np.clip(np.round(out), lo, hi).astype(kind)


def assert_equal(name: str, kind: str, x_len: int, y_len: int, fft_length: int, calls: np.ndarray, tmp_path) -> None:
    data = one_op(name, (x_len,), kind, [((y_len,), kind)], {"T": KINDS[kind], "fft_length": fft_length})
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    (got,) = interpreted(path, calls)
    host = built(path, calls, "host", tmp_path)
    for ours in (got, host):
        if kind == "float32":  # every bit: rounding, signed zeros, infinities
            np.testing.assert_array_equal(np.asarray(ours, np.float32).view(np.uint32), want.view(np.uint32))
        else:
            np.testing.assert_array_equal(ours, want)


@pytest.mark.parametrize("kind", ["int32", "float32"])
@pytest.mark.parametrize("fft_length,length", [(4, 4), (8, 6), (64, 64), (512, 400)])
def test_rfft_equals_tflite_micro(kind, fft_length, length, tmp_path):
    assert_equal("SignalRfft", kind, length, fft_length + 2, fft_length,
                 values(kind, 4, length, fft_length + length), tmp_path)


@pytest.mark.parametrize("kind", ["int16", "int32", "float32"])
@pytest.mark.parametrize("fft_length", [4, 8, 32, 256])
def test_irfft_equals_tflite_micro(kind, fft_length, tmp_path):
    assert_equal("SignalIrfft", kind, fft_length + 2, fft_length, fft_length, values(kind, 4, fft_length + 2,
                                                                                    fft_length), tmp_path)


@pytest.mark.parametrize("name,x,y,options,problem", [
    ("SignalRfft", (64, "int32"), (66, "int32"), {"T": 7, "fft_length": 64}, "T = 7 \\(i16\\) for i32 tensors"),
    ("SignalRfft", (48, "float32"), (50, "float32"), {"T": 0, "fft_length": 48}, "fft_length 48 is not a power of two"),
    ("SignalRfft", (64, "int16"), (66, "int16"), {"T": 9, "fft_length": 64}, "T = 9: the int16 \\(7\\), int32"),
    ("SignalIrfft", (64, "int16"), (64, "int16"), {"T": 7, "fft_length": 64}, "spectra of 64 values for fft_length "
                                                                               "64 \\(its 33 bins"),
    ("SignalIrfft", (66, "int16"), (64, "int16"), {"T": 7}, "'fft_length' is absent"),
])
def test_bad_parameters_are_refused_by_name(name, x, y, options, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(one_op(name, (x[0],), x[1], [((y[0],), y[1])], options))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite: operator 0 \(CUSTOM \({name}\)\).*{problem}"):
        tinycc_ml.load_model(path)
