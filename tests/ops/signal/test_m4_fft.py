"""The Cortex-M4 / M33 q15 and q31 real FFT kernels (arm.m4_fft) against tflite-micro's SignalRfft of int16 and
int32 frames on every bit: FFT lengths whose complex FFT is all radix-4 stages and ones with kissfft's radix-2
stage, full frames and frames shorter than the FFT (zero-padded), full-scale noise, the most negative value
everywhere and alternating extremes (every wrap-around of kissfft's fixed-point arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.signal.stream_check import one_op, tflite_micro_outputs
from tests.ops.signal.test_fft_ops import values
from tinycc_ml.runtime.simulate import run_on_target

CASES = [  # (target, kind, fft_length, frame length)
    ("cortex-m4", "int16", 512, 512), ("cortex-m4", "int16", 512, 400), ("cortex-m4", "int16", 256, 256),
    ("cortex-m4", "int16", 16, 11), ("cortex-m4", "int16", 2048, 2048), ("cortex-m33", "int16", 128, 100),
    ("cortex-m4", "int32", 512, 512), ("cortex-m4", "int32", 256, 200), ("cortex-m4", "int32", 16, 16),
    ("cortex-m4", "int32", 128, 128), ("cortex-m33", "int32", 64, 50)]
TYPES = {"int16": 7, "int32": 2}


def rfft_model(kind: str, fft_length: int, length: int) -> bytes:
    return one_op("SignalRfft", (length,), kind, [((fft_length + 2,), kind)],
                  {"T": TYPES[kind], "fft_length": fft_length})


@pytest.mark.parametrize("target, kind, fft_length, length", CASES)
def test_m4_real_fft_equals_tflite_micro(target, kind, fft_length, length, tmp_path):
    data = rfft_model(kind, fft_length, length)
    calls = values(kind, 3, length, fft_length + length)
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / "rfft.tflite"
    path.write_bytes(data)
    require_target(target)
    out = tmp_path / "build"
    result = tinycc_ml.compile(path, target=target, name="op", out_dir=out).output
    # the rows as they are (every int32 value; the backends' simulate takes float rows)
    run = run_on_target(target, [out / "op.c"], out / "op.h", "op", calls, result.n_scores, result.input_ctype,
                        result.score_ctype)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(calls), -1), want)


@pytest.mark.parametrize("kind, fft_length, kernel", [("int16", 512, True), ("int16", 2048, True),
                                                      ("int16", 4096, False), ("int16", 8, False),
                                                      ("int32", 512, True), ("int32", 1024, False)])
def test_m4_builds_take_the_kernel_where_it_applies(kind, fft_length, kernel, tmp_path):
    path = tmp_path / "rfft.tflite"
    path.write_bytes(rfft_model(kind, fft_length, fft_length))
    source = tinycc_ml.compile(path, target="cortex-m4", name="op").files["op.c"]
    bits = kind[3:]
    assert (f"op_m4_rfft_q{int(bits) - 1}_{fft_length}(" in source) == kernel
    assert (f"op_sig_rfft_i{bits}_{fft_length}(" in source) != kernel
