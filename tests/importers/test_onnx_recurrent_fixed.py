"""ONNX's recurrent layers (GRU, LSTM, RNN) in the project's fixed point, int16 and pow2 int8: stepped one time step
per call with the states in static RAM (each state at its next value's scale), or unrolled. Every score of the C
(host, and the chips' simulators) equals the fixed-point interpreter's over a stream of steps; the int16 scores
stay near the float network's and its labels are onnxruntime's. The builds skip the scale search when stepped, so
each compiles in seconds (the files: tests/data/pytorch, both exporters)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tests.importers.test_onnx_recurrent import onnxruntime_stream, recurrent_file, sequences, time_steps
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.interp import run_float
from tinycc_ml.models.network_fixed import quantise_rows

onnxruntime = pytest.importorskip("onnxruntime")

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
BUILDS = {"int16": ("int16", {}), "int8_pow2": ("int8", {"int8_dialect": "pow2"})}
# the largest score error of a build, as a share of the float scores' spread over the stream
TOLERANCE = {"int16": 0.02, "int8_pow2": 0.25}


def stepped_build(path: Path, label: str, target: str, folder: Path, seed: int = 0):
    """The stepped model of ``path``, its ``label`` build for ``target`` calibrated on the steps of 6 random
    sequences (one stream), and the steps of 2 other sequences."""
    model = tinycc_ml.load_model(path, recurrent="step")
    calibration = time_steps(model, sequences(path, seed), path)
    test = sequences(path, seed + 1)[:2]
    precision, options = BUILDS[label]
    result = tinycc_ml.compile(model, target=target, precision=precision, calibration=calibration, name="net",
                               out_dir=folder, **options)
    return model, result, test, time_steps(model, test, path)


def interpreter_stream(result, steps: np.ndarray, sequences_: int) -> np.ndarray:
    """The fixed-point interpreter's scores on each sequence's steps, from the initial state each time."""
    per = len(steps) // sequences_
    return np.concatenate([run_fixed(result.graph, quantise_rows(result.graph, steps[k * per:(k + 1) * per]))
                           ["scores"] for k in range(sequences_)])


@pytest.mark.parametrize("label", list(BUILDS))
@pytest.mark.parametrize("name", ["gru_keyword", "lstm_activity", "lstm_2layer", "lstm_classifier_ts"])
def test_stepped_integer_builds_equal_the_interpreter_and_follow_the_float_network(name, label, tmp_path):
    require_target("host")
    path = DATA / f"{name}.onnx"
    model, result, test, steps = stepped_build(path, label, "host", tmp_path)
    predictor = result.load()
    per = len(steps) // len(test)
    raw = []
    for k in range(len(test)):
        predictor.reset()
        raw.append(predictor.run_raw(predictor.quantise(steps[k * per:(k + 1) * per]))[0])
    raw = np.concatenate(raw).astype(np.int64)
    np.testing.assert_array_equal(raw.reshape(-1), interpreter_stream(result, steps, len(test)).reshape(-1))
    scale = result.graph.type(result.graph.output("scores")).dtype.scale
    want = np.concatenate([model.scores(steps[k * per:(k + 1) * per]) for k in range(len(test))])
    spread = float(np.max(want) - np.min(want))
    assert np.max(np.abs(raw.reshape(want.shape) * 2.0**-scale - want)) <= TOLERANCE[label] * spread + 1e-3
    if label == "int16":  # the last step of each sequence: onnxruntime's label on the whole sequence
        last = raw.reshape(len(test), per, -1)[:, -1]
        assert np.array_equal(np.argmax(last, 1), np.argmax(onnxruntime_stream(path, test), 1))
    assert "stepped, one time step per call" in result.files["net.h"]


@pytest.mark.parametrize("name, target", [("gru_keyword", "cortex-m4"), ("lstm_activity", "avr")])
def test_stepped_int16_recurrent_models_run_on_the_chips_as_the_interpreter_does(name, target, tmp_path):
    """The GRU keyword-style model (49 x 10) on the Cortex-M4, the LSTM activity model on the ATmega328P within its
    2 KB of RAM, at int16, one time step per call: every step's scores the interpreter's."""
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend

    _, result, test, steps = stepped_build(DATA / f"{name}.onnx", "int16", target, tmp_path)
    steps = steps[:len(steps) // len(test)]  # one sequence from the reset state
    if target == "avr":
        assert result.report["fit"]["chip"] == "ATmega328P" and result.report["fit"]["ram_bytes"] < 2048
    run = get_backend(target).simulate(tmp_path, result.output, steps)
    want = run_fixed(result.graph, quantise_rows(result.graph, steps))["scores"]
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64).reshape(want.shape), want)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["GRU", "LSTM", "RNN"]), hidden=st.integers(1, 6), seed=st.integers(0, 2**16),
       stepped=st.booleans(), label=st.sampled_from(list(BUILDS)),
       linear_before_reset=st.integers(0, 1))
def test_any_small_recurrent_layer_in_fixed_point_is_the_interpreter_on_host(op, hidden, seed, stepped, label,
                                                                             linear_before_reset, tmp_path_factory):
    """Contract: a GRU (either reset form), LSTM or RNN of any width and weights, stepped or unrolled over 5 steps,
    compiles at int16 and pow2 int8, its C the interpreter's on every score, its int16 scores near the float
    network's."""
    require_target("host")
    folder = tmp_path_factory.mktemp("layer")
    attrs = {"linear_before_reset": linear_before_reset} if op == "GRU" else {}
    path = recurrent_file(folder / "n.onnx", op, attrs, hidden=hidden, seed=seed)
    model = tinycc_ml.load_model(path, recurrent="step" if stepped else "unroll")
    X = np.random.default_rng(seed).normal(size=(24, 5 * 3))  # 24 sequences of 5 steps of 3 features
    rows = time_steps(model, X, path) if stepped else X
    precision, options = BUILDS[label]
    result = tinycc_ml.compile(model, target="host", precision=precision, calibration=rows, name="net",
                               out_dir=folder / "c", search=False, **options)  # the arithmetic, at calibrated scales
    predictor = result.load()
    raw = predictor.run_raw(predictor.quantise(rows))[0].astype(np.int64)
    want = run_fixed(result.graph, quantise_rows(result.graph, rows))["scores"]
    np.testing.assert_array_equal(raw.reshape(want.shape), want)
    if label == "int16":
        real = run_float(model.graph, rows.reshape(len(rows), *model.input_shape))["scores"].reshape(len(rows), -1)
        scale = result.graph.type(result.graph.output("scores")).dtype.scale
        spread = float(np.max(real) - np.min(real))
        assert np.max(np.abs(want.reshape(real.shape) * 2.0**-scale - real)) <= 0.02 * spread + 1e-3
