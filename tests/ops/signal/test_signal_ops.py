"""TFLite Micro's signal ops one at a time: one-operator .tflite files with the custom operator (tests/tflite_models.py
``custom_op``) run by tflite-micro (the definition) and by tinycc-ml's interpreter and host C, every output equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tflite_micro.python.tflite_micro import runtime

import tinycc_ml
from tests.tflite_models import TfliteBuilder
from tinycc_ml.ir.ops.signal.common import msb32, sqrt64
from tinycc_ml.ir.ops.signal.filter_bank_log import filter_bank_log


def one_op(name: str, in_shape, in_kind: str, out_shape, out_kind: str, options: dict, extra=()) -> bytes:
    """x -> name -> y; ``extra``: constant operands after x, as (kind, values)."""
    b = TfliteBuilder()
    x = b.tensor(in_shape, in_kind, scale=None, name="x")
    consts = [b.tensor(np.shape(v), kind, scale=None, data=np.asarray(v), name=f"c{k}") for k, (kind, v) in
              enumerate(extra)]
    y = b.tensor(out_shape, out_kind, scale=None, name="y")
    b.custom_op(name, [x, *consts], [y], options)
    return b.finish([x], [y])


def tflite_micro(data: bytes, frames) -> np.ndarray:
    """tflite-micro's output 0 for each frame in turn (one interpreter: its state carried from frame to frame)."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)  # its default is too small for an FFT
    outs = []
    for frame in frames:
        interpreter.set_input(frame, 0)
        interpreter.invoke()
        outs.append(interpreter.get_output(0).copy())
    return np.stack(outs).reshape(len(outs), -1)


def assert_equal_to_tflite_micro(data: bytes, frames: np.ndarray, tmp_path, name: str = "op") -> None:
    want = tflite_micro(data, frames)
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    model = tinycc_ml.load_model(path)
    np.testing.assert_array_equal(model.run_int8(frames.astype(np.int64)).reshape(len(frames), -1), want)
    result = tinycc_ml.compile(path, target="host", name=name, out_dir=tmp_path / "host")
    scores, _ = result.load().run_raw(frames.reshape(len(frames), -1))
    np.testing.assert_array_equal(scores, want)


def int16_frames(rng, n: int, length: int) -> np.ndarray:
    """Full-scale noise, quiet noise, a tone, silence, every sample -32768, and alternating extremes."""
    t = np.arange(length)
    rows = [rng.integers(-32768, 32768, length), rng.normal(0, 300, length), 20000 * np.sin(0.3 * t),
            np.zeros(length), np.full(length, -32768), np.where(t % 2, 32767, -32768)]
    rows += list(rng.normal(0, 4000, (n, length)))
    return np.clip(np.round(rows), -32768, 32767).astype(np.int16)


@pytest.mark.parametrize("fft_length,length", [(8, 8), (64, 50), (256, 256), (512, 480)])
def test_rfft_equals_tflite_micro(fft_length, length, tmp_path):
    # kissfft's fixed point: radix-4 stages (and a radix-2 one when n / 2 is not a power of 4), zero padding
    data = one_op("SignalRfft", (length,), "int16", (fft_length + 2,), "int16", {"T": 7, "fft_length": fft_length})
    assert_equal_to_tflite_micro(data, int16_frames(np.random.default_rng(fft_length), 6, length), tmp_path)


def test_window_and_auto_scale_equal_tflite_micro(tmp_path):
    rng = np.random.default_rng(5)
    window = rng.integers(-32768, 32768, 64).astype(np.int16)
    data = one_op("SignalWindow", (64,), "int16", (64,), "int16", {"shift": 9}, extra=[("int16", window)])
    assert_equal_to_tflite_micro(data, int16_frames(rng, 6, 64), tmp_path, "window")
    b = TfliteBuilder()  # both outputs of SignalFftAutoScale: the samples and the shift, the shift read by a MUL
    x = b.tensor((64,), "int16", scale=None, name="x")
    y, bits = b.tensor((64,), "int16", scale=None, name="y"), b.tensor((), "int32", scale=None, name="bits")
    b.custom_op("SignalFftAutoScale", [x], [y, bits], {})
    data = b.finish([x], [y])
    frames = np.concatenate([int16_frames(rng, 6, 64), (rng.integers(-40, 40, (3, 64))).astype(np.int16)])
    assert_equal_to_tflite_micro(data, frames, tmp_path, "auto_scale")


def test_filter_bank_log_equals_tflite_micro(tmp_path):
    rng = np.random.default_rng(7)
    data = one_op("SignalFilterBankLog", (40,), "uint32", (40,), "int16", {"input_correction_bits": 3,
                                                                            "output_scale": 1600})
    powers = np.concatenate([[0, 1, 2, 3, 2**29 - 1, 2**29, 2**31, 2**32 - 1], rng.integers(0, 2**32, 32)])
    frames = np.stack([powers, rng.integers(0, 2**20, 40), rng.integers(0, 2**32, 40)]).astype(np.uint32)
    assert_equal_to_tflite_micro(data, frames, tmp_path, "log")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_square_root_rounds_to_nearest_below_its_cap(x):
    root = int(sqrt64(np.array([x], dtype=np.uint64))[0])
    cap = 0xFFFF if x < 2**32 else 0xFFFFFFFF
    assert root <= cap and (root == cap or abs(root * root - x) <= root)  # nearest: |r^2 - x| <= r


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_log_is_scaled_natural_log_within_a_unit(x):
    got = int(filter_bank_log(np.array([x]), 64, 0)[0])
    want = 0 if x <= 1 else min(64 * np.log(x), 32767)
    assert abs(got - want) <= 1 and int(msb32(np.array([x]))[0]) == (32 if x == 0 else x.bit_length())
