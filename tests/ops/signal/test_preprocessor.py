"""TFLite Micro's micro_speech audio preprocessors (tests/data/tflite/README.md), int8 and float: tinycc-ml read
them ("unknown element type 15" before) and computes them equal to tflite-micro frame after frame over a stream,
the noise estimate carried from frame to frame (the IR's state), in the interpreter, on the host and in the
simulated Cortex-M4 and Cortex-M0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tflite_micro.python.tflite_micro import runtime

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_models import TfliteBuilder
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.fixed import run_fixed_stream

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
MODELS = ["audio_preprocessor_int8.tflite", "audio_preprocessor_float.tflite"]


def stream(seed: int, frames: int) -> np.ndarray:
    """Frames of real-looking audio (two tones and noise), then loud and quiet noise, silence, full-scale noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(480 * frames) / 16000
    audio = 8000 * np.sin(2 * np.pi * 440 * t) + 2500 * np.sin(2 * np.pi * 1900 * t) + rng.normal(0, 600, t.size)
    rows = [audio.reshape(frames, 480), rng.normal(0, 3000, (2, 480)), rng.normal(0, 40, (1, 480)),
            np.zeros((1, 480)), rng.integers(-32768, 32768, (1, 480))]
    return np.clip(np.round(np.concatenate(rows)), -32768, 32767).astype(np.int16)


def tflite_micro(path: Path, frames: np.ndarray) -> np.ndarray:
    interpreter = runtime.Interpreter.from_file(path)
    outs = []
    for frame in frames:
        interpreter.set_input(frame[None], 0)
        interpreter.invoke()
        outs.append(interpreter.get_output(0).copy())
    return np.stack(outs)


@pytest.mark.parametrize("name", MODELS)
def test_interpreter_equals_tflite_micro_over_a_stream(name):
    frames = stream(1, 8)
    want = tflite_micro(DATA / name, frames)
    graph = tinycc_ml.load_model(DATA / name).graph
    got, state = run_fixed_stream(graph, frames[:, None].astype(np.int64))
    np.testing.assert_array_equal(got["scores"].reshape(want.shape), want)
    # a stream in two runs, the state handed from the first to the second, is the stream in one
    first, middle = run_fixed_stream(graph, frames[:5, None].astype(np.int64))
    second, end = run_fixed_stream(graph, frames[5:, None].astype(np.int64), middle)
    np.testing.assert_array_equal(np.concatenate([first["scores"], second["scores"]]), got["scores"])
    assert all(np.array_equal(end[k], state[k]) for k in state) and any(state[k].any() for k in state)


@pytest.mark.parametrize("name", MODELS)
def test_host_c_equals_tflite_micro_and_resets(name, tmp_path):
    frames = stream(2, 6)
    want = tflite_micro(DATA / name, frames)
    result = tinycc_ml.compile(DATA / name, target="host", name="front", out_dir=tmp_path)
    assert result.report["state_bytes"] == 40 * 4  # the noise estimate: 40 uint32
    predictor = result.load()
    np.testing.assert_array_equal(predictor.run_raw(frames)[0], want)
    again = predictor.run_raw(frames)[0]  # the state goes on from the stream's end: not the first run's values
    assert not np.array_equal(again, want)
    predictor.reset()
    np.testing.assert_array_equal(predictor.run_raw(frames)[0], want)
    header = (tmp_path / "front.h").read_text()
    assert "void front_reset(void);" in header and "int front_step(" in header


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0"])
def test_simulated_chips_equal_tflite_micro(target, tmp_path):
    require_target(target)
    name = MODELS[0]
    frames = stream(3, 3)
    want = tflite_micro(DATA / name, frames)
    result = tinycc_ml.compile(DATA / name, target=target, name="front", out_dir=tmp_path)
    run = get_backend(target).simulate(tmp_path, result.output, frames.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(want.shape), want)


@pytest.mark.parametrize("options,problem", [(b"\x05\x00\xff\x01", "not a map"),
                                             (b"\x00\x00\x00\x00\xf0\x24\x01", "outside")])
def test_bad_custom_options_name_the_file_and_operator(options, problem, tmp_path):
    b = TfliteBuilder()
    x, y = b.tensor((514,), "int16", scale=None, name="x"), b.tensor((257,), "uint32", scale=None, name="y")
    b.custom_op("SignalEnergy", [x], [y], {"start_index": 0, "end_index": 257})
    b.sub.operators[-1].customOptions = np.frombuffer(options, dtype=np.uint8)
    path = tmp_path / "bad.tflite"
    path.write_bytes(b.finish([x], [y]))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite: operator 0 \(CUSTOM \(SignalEnergy\)\): custom options: "
                                             rf".*{problem}"):
        tinycc_ml.load_model(path)


def test_unknown_custom_operator_is_refused_by_name(tmp_path):
    b = TfliteBuilder()
    x, y = b.tensor((8,), "int16", scale=None, name="x"), b.tensor((8,), "int16", scale=None, name="y")
    b.custom_op("SignalMystery", [x], [y], {})
    path = tmp_path / "mystery.tflite"
    path.write_bytes(b.finish([x], [y]))
    with pytest.raises(ModelFileError, match="custom operator 'SignalMystery' is not supported.*SignalRfft"):
        tinycc_ml.load_model(path)
