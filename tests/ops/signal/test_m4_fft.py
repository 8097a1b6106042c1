"""The Cortex-M4 / M33 q15 real FFT kernel (arm.m4_fft) against tflite-micro's SignalRfft of int16 frames on every
bit: FFT lengths whose complex FFT is all radix-4 stages and ones with kissfft's radix-2 stage, full frames and
frames shorter than the FFT (zero-padded), full-scale noise, the most negative value everywhere and alternating
extremes (every wrap-around of kissfft's int16 arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.ops.signal.stream_check import built, one_op, tflite_micro_outputs
from tests.ops.signal.test_fft_ops import values

CASES = [  # (target, fft_length, frame length)
    ("cortex-m4", 512, 512), ("cortex-m4", 512, 400), ("cortex-m4", 256, 256), ("cortex-m4", 16, 11),
    ("cortex-m4", 2048, 2048), ("cortex-m33", 128, 100)]


def rfft_model(fft_length: int, length: int) -> bytes:
    return one_op("SignalRfft", (length,), "int16", [((fft_length + 2,), "int16")], {"T": 7, "fft_length": fft_length})


@pytest.mark.parametrize("target, fft_length, length", CASES)
def test_m4_real_fft_equals_tflite_micro(target, fft_length, length, tmp_path):
    data = rfft_model(fft_length, length)
    calls = values("int16", 3, length, fft_length + length)
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / "rfft.tflite"
    path.write_bytes(data)
    np.testing.assert_array_equal(built(path, calls, target, tmp_path), want)


@pytest.mark.parametrize("fft_length, kernel", [(512, True), (2048, True), (4096, False), (8, False)])
def test_m4_builds_take_the_kernel_where_it_applies(fft_length, kernel, tmp_path):
    path = tmp_path / "rfft.tflite"
    path.write_bytes(rfft_model(fft_length, fft_length))
    source = tinycc_ml.compile(path, target="cortex-m4", name="op").files["op.c"]
    assert (f"op_m4_rfft_q15_{fft_length}(" in source) == kernel
    assert (f"op_sig_rfft_i16_{fft_length}(" in source) != kernel
