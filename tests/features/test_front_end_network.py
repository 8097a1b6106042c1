"""compile(network, front_end=...): a fitted front end before an ONNX or .tflite network, one C entry point from raw
samples to the decision (the calls of docs/guide/front-ends.md and docs/tutorials/kws-m4.md). The reference is
Python's: the front end's transform (float64), then the network in its
oracle (tflite-micro on the features quantised with the network's input scale and zero point; onnxruntime on the
float features). The C computes the features in float32: an int8 build equals tflite-micro on every row whose
features are not within float32's error of a rounding boundary of the input quantisation (``clear_rows``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import tinycc_ml
from tests.conftest import require_target
from tests.features.front_end_data import tones
from tests.features.front_end_networks import FEATURE_SCALE, float_cnn, int8_cnn, log_mel
from tests.onnx_oracle import onnxruntime_outputs
from tests.tflite_builder import tflm_outputs
from tinycc_ml.errors import CompileError
from tinycc_ml.features import stream_windows
from tinycc_ml.ir.ops.tflite_arith import quantise_affine

ZERO_POINT = -2
# float32 features are within ~1e-5 steps of float64's (log-mel values below 10, step 0.08): a row whose features
# all lie further than this from a rounding boundary (a half step) quantises alike in both
CLEAR_STEPS = 2e-4
_CACHE: dict = {}


def clear_rows(features: np.ndarray) -> np.ndarray:
    """Rows no feature of which lies within CLEAR_STEPS of a half step of the input quantisation."""
    steps = features / FEATURE_SCALE
    return np.all(np.abs(np.abs(steps - np.floor(steps)) - 0.5) > CLEAR_STEPS, axis=1)


def _int8_build(tmp_path_factory, target: str = "host"):
    if target not in _CACHE:
        folder = tmp_path_factory.mktemp(f"int8_{target.replace('-', '_')}")
        X, _ = tones(60)
        front = log_mel(X)
        data = int8_cnn(folder / "kws.tflite")
        result = tinycc_ml.compile(folder / "kws.tflite", target=target, front_end=front, name="kws",
                                   out_dir=folder / "c")
        _CACHE[target] = front, data, result
    return _CACHE[target]


def reference_int8(front, data, X) -> np.ndarray:
    """tflite-micro's int8 scores on the front end's float64 features quantised as the network's input says."""
    return tflm_outputs(data, quantise_affine(front.transform(X), FEATURE_SCALE, ZERO_POINT, 8)).astype(np.int64)


def _signals(seed: int, rows: int, loudness: float) -> np.ndarray:
    X, _ = tones(rows, seed=seed)
    return X * loudness


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), loudness=st.sampled_from([1e-3, 0.05, 1.0, 30.0]))
def test_an_int8_network_after_a_front_end_is_tflite_micro_on_the_quantised_features(tmp_path_factory, seed,
                                                                                    loudness):
    require_target("host")
    front, data, result = _int8_build(tmp_path_factory)
    X = _signals(seed, 12, loudness)
    clear = clear_rows(front.transform(X))
    assert clear.sum() >= 8  # the excluded rows are the rare ones
    predictor = result.load()
    got = np.asarray(predictor.decision_function(X)).astype(np.int64)
    np.testing.assert_array_equal(got[clear], reference_int8(front, data, X)[clear])
    assert predictor.predict(X)[clear].tolist() == np.argmax(reference_int8(front, data, X[clear]), axis=1).tolist()


def test_the_int8_build_says_how_the_features_reach_the_network(tmp_path_factory):
    require_target("host")
    _, _, result = _int8_build(tmp_path_factory)
    header = result.files["kws.h"]
    assert "Input: 1024 raw samples (float32)" in header
    assert f"q = round(x / {float(np.float32(FEATURE_SCALE))!r}) - {-ZERO_POINT}" in header
    assert result.precision == "int8" and result.report["arena_bytes"] > 0
    stream = dict(result.report["stream"])
    state = stream.pop("state_bytes")
    assert stream == {"window_samples": 1024, "hop_samples": 128, "values_per_sample": 1,
                      "frame_stack": "7 frames of 16 features kept; one frame of 256 values computed every 128"}
    assert state >= 4 * 256 + 7 * 16  # the newest frame's float samples and the int8 features of the stack


def test_a_float_network_after_a_front_end_is_onnxruntime_on_the_features(tmp_path):
    require_target("host")
    X, _ = tones(40, seed=3)
    front = log_mel(X)
    shape = float_cnn(tmp_path / "net.onnx")
    predictor = tinycc_ml.compile(tmp_path / "net.onnx", front_end=front, name="kwsf").load()
    expected = onnxruntime_outputs(tmp_path / "net.onnx", front.transform(X), shape)
    got = np.asarray(predictor.decision_function(X))
    assert np.max(np.abs(got - expected)) <= 1e-4 * (1 + np.max(np.abs(expected)))
    margin = np.sort(expected, axis=1)
    decided = margin[:, -1] - margin[:, -2] > 1e-3 * (1 + np.max(np.abs(expected)))
    assert predictor.predict(X)[decided].tolist() == np.argmax(expected, axis=1)[decided].tolist()


def test_a_float_network_quantised_from_the_front_ends_features(tmp_path):
    """precision int8 with a float network: TFLite's int8 quantisation from the calibration rows' features; the C
    equals the project's int8 interpreter of that network on the quantised features."""
    require_target("host")
    X, _ = tones(60, seed=4)
    front = log_mel(X)
    float_cnn(tmp_path / "net.onnx")
    result = tinycc_ml.compile(tmp_path / "net.onnx", front_end=front, name="kwsq", precision="int8",
                               calibration=X[:40])
    quantised = tinycc_ml.load_model(tmp_path / "net.onnx").quantise(front.transform(X[:40]))
    (x,) = quantised.graph.inputs()
    dtype = quantised.graph.type(x).dtype
    features = front.transform(X)
    steps = features / dtype.qscales[0]
    clear = np.all(np.abs(np.abs(steps - np.floor(steps)) - 0.5) > CLEAR_STEPS, axis=1)
    expected = quantised.run_quantised(quantised.quantise_input(features).reshape(-1, *quantised.input_shape))
    expected = expected.reshape(len(X), -1)
    got = np.asarray(result.load().decision_function(X)).astype(np.int64)
    assert clear.sum() >= 50
    np.testing.assert_array_equal(got[clear], expected[clear])
    assert result.report["quantised_from_float"] and result.report["calibration_rows"] == 40


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), cuts=st.lists(st.integers(1, 3000), min_size=1, max_size=8))
def test_the_stream_decides_on_the_windows_of_the_whole_signal(tmp_path_factory, seed, cuts):
    require_target("host")
    front, _, result = _int8_build(tmp_path_factory)
    predictor = result.load()
    signal = _signals(seed, 3, 1.0).ravel()
    expected = predictor.predict(stream_windows(signal, 1024, 128))
    predictor.reset()
    bounds = np.cumsum(cuts)
    got = [d for chunk in np.split(signal, bounds[bounds < signal.size]) for d in predictor.feed(chunk)]
    assert got == expected.tolist() and len(got) == 1 + (signal.size - 1024) // 128


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_the_front_end_and_network_run_on_the_m4(sim_target, tmp_path_factory, tmp_path):
    from tinycc_ml.codegen.backend import get_backend

    front, data, result = _int8_build(tmp_path_factory, sim_target)
    X = _signals(11, 8, 1.0)
    clear = clear_rows(front.transform(X))
    run = get_backend(sim_target).simulate(result.out_dir, result.output, X)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64)[clear], reference_int8(front, data, X)[clear])
    assert result.report["fit"]["ram_bytes"] >= result.report["arena_bytes"] + result.report["stream"]["state_bytes"]
    shape = float_cnn(tmp_path / "net.onnx")
    floats = tinycc_ml.compile(tmp_path / "net.onnx", target=sim_target, front_end=front, name="kwsf",
                               out_dir=tmp_path / "f")
    run = get_backend(sim_target).simulate(tmp_path / "f", floats.output, X)
    expected = onnxruntime_outputs(tmp_path / "net.onnx", front.transform(X), shape)
    assert np.max(np.abs(np.asarray(run.scores) - expected)) <= 1e-4 * (1 + np.max(np.abs(expected)))


def test_what_cannot_follow_a_front_end_is_refused_by_name(tmp_path):
    X, y = tones(30)
    front = log_mel(X)
    int8_cnn(tmp_path / "ten.tflite", frames=10)
    with pytest.raises(CompileError, match=r"gives 112 features but .* takes an input of shape \[1, 10, 16, 1\]"):
        tinycc_ml.compile(tmp_path / "ten.tflite", front_end=front)
    float_cnn(tmp_path / "net.onnx")
    with pytest.raises(CompileError, match="precision float or int8 .* precision int16 is not built"):
        tinycc_ml.compile(tmp_path / "net.onnx", front_end=front, precision="int16", calibration=X)
    with pytest.raises(CompileError, match="int8_dialect='pow2' is not built after a front end"):
        tinycc_ml.compile(tmp_path / "net.onnx", front_end=front, precision="int8", calibration=X,
                          int8_dialect="pow2")
    with pytest.raises(CompileError, match="front_end: StandardScaler: .* tinycc_ml.features steps only"):
        tinycc_ml.compile(tmp_path / "net.onnx", front_end=make_pipeline(*front, StandardScaler()).fit(X))
    with pytest.raises(CompileError, match="front_end=dict: expected a fitted Pipeline"):
        tinycc_ml.compile(tmp_path / "net.onnx", front_end={})
    with pytest.raises(CompileError, match="front_end=: front end .* has a front end already"):
        tinycc_ml.compile(make_pipeline(*log_mel(X), LogisticRegression()).fit(X, y), front_end=front)
    unfitted = log_mel(X)
    unfitted.steps[0] = ("framer", type(front[0])(256, 128))
    with pytest.raises(CompileError, match=r"step 0 \(Framer\) is not fitted"):
        tinycc_ml.compile(tmp_path / "net.onnx", front_end=unfitted)
