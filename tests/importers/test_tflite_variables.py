"""TFLite resource variables (CALL_ONCE of an initialisation subgraph; VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE:
tinycc_ml/importers/tflite.py) as the model's state, on files TensorFlow's converter wrote
(tests/data/tflite/variables_*.tflite, scripts/tflite_variables.py): a stream of calls equal to tflite-micro's
interpreter called on the same rows in order, the interpreter and the C alike, on the host and the Cortex-M4; reset
starts the stream over; WHILE loops unrolled where their trip count follows from constants, refused by name where it
depends on the input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import ModelFileError

DATA = Path(__file__).resolve().parents[1] / "data"


def tflm_stream(data: bytes, X: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(data)
    outs = []
    for x in X:
        interpreter.set_input(x.reshape(1, 4), 0)
        interpreter.invoke()
        outs.append(interpreter.get_output(0).reshape(-1).copy())
    return np.stack(outs)


def rows(quantisation: str, n: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if quantisation == "float":
        return rng.normal(0, 1, size=(n, 4)).astype(np.float32)
    if quantisation == "16x8":
        return rng.integers(-32768, 32768, size=(n, 4)).astype(np.int16)
    return rng.integers(-128, 128, size=(n, 4)).astype(np.int8)


@pytest.mark.parametrize("quantisation", ["float", "int8", "16x8"])
def test_a_stream_of_calls_equals_tflite_micro(quantisation, tmp_path):
    require_target("host")
    path = DATA / "tflite" / f"variables_{quantisation}.tflite"
    X = rows(quantisation)
    want = tflm_stream(path.read_bytes(), X)
    assert len({tuple(r) for r in want.tolist()}) > 8 and np.any(want[1:] != want[:-1])  # the state moves
    model = tinycc_ml.load_model(path)
    predictor = tinycc_ml.compile(path, out_dir=tmp_path, name="acc").load()
    if quantisation == "float":
        np.testing.assert_allclose(np.asarray(model.scores(X)), want, rtol=1e-6, atol=1e-7)
        got = predictor.scores(X)
    else:
        np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), 1, 4)).reshape(len(X), -1), want)
        got = predictor.run_raw(X)[0]
    np.testing.assert_array_equal(np.asarray(got).reshape(len(X), -1).astype(want.dtype), want)
    # the stream goes on from where it stopped; reset starts it over from CALL_ONCE's values
    more = rows(quantisation, 4, seed=1)
    whole = tflm_stream(path.read_bytes(), np.concatenate([X, more]))[len(X):]
    again = predictor.scores(more) if quantisation == "float" else predictor.run_raw(more)[0]
    np.testing.assert_array_equal(np.asarray(again).reshape(4, -1).astype(want.dtype), whole)
    predictor.reset()
    fresh = predictor.scores(X[:4]) if quantisation == "float" else predictor.run_raw(X[:4])[0]
    np.testing.assert_array_equal(np.asarray(fresh).reshape(4, -1).astype(want.dtype), want[:4])


@pytest.mark.toolchain
def test_the_m4_keeps_the_variables_between_calls(tmp_path):
    require_target("cortex-m4")
    from tinycc_ml.codegen.backend import get_backend

    path = DATA / "tflite" / "variables_int8.tflite"
    X = rows("int8", 6)
    result = tinycc_ml.compile(path, target="cortex-m4", out_dir=tmp_path, name="acc")
    scale, zero_point = result.output.input_quantisation[:2]
    run = get_backend("cortex-m4").simulate(tmp_path, result.output, (X.astype(np.float64) - zero_point) * scale)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(X), -1), tflm_stream(path.read_bytes(), X))


def test_a_while_loop_of_constant_trip_count_is_unrolled():
    """Keras 3's LSTM converts to WHILE (a counter against the sequence length): unrolled, 8 turns of its body, every
    output equal to tflite-micro's (also in tests/importers/test_keras_zoo.py)."""
    path = DATA / "keras" / "lstm_keywords_float.tflite"
    graph = tinycc_ml.load_model(path).graph
    assert sum(graph.op(n) == "tensor_tanh" for n in graph.order()) == 2 * 8  # two per turn
    X = np.random.default_rng(4).normal(0, 1, size=(5, 40)).astype(np.float32)
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(path.read_bytes())
    want = []
    for x in X:
        interpreter.set_input(x.reshape(1, 8, 5), 0)
        interpreter.invoke()
        want.append(interpreter.get_output(0).reshape(-1).copy())
    np.testing.assert_allclose(tinycc_ml.load_model(path).scores(X), np.stack(want), rtol=1e-5, atol=1e-6)


def test_a_fixed_loop_in_an_int8_model_equals_tflite_micro(tmp_path):
    """while_int8.tflite: three steps of a WHILE the converter left between DEQUANTIZE and QUANTIZE (its body
    float32, its counter int32), unrolled by the reader: every output byte tflite-micro's, host and interpreter."""
    require_target("host")
    path = DATA / "tflite" / "while_int8.tflite"
    X = rows("int8", 24)
    want = tflm_stream(path.read_bytes(), X)
    assert len({tuple(r) for r in want.tolist()}) > 12
    model = tinycc_ml.load_model(path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), 1, 4)).reshape(len(X), -1), want)
    got = tinycc_ml.compile(path, out_dir=tmp_path, name="loop").load().run_raw(X)[0]
    np.testing.assert_array_equal(np.asarray(got).reshape(len(X), -1), want)


def test_a_loop_whose_trip_count_depends_on_the_input_is_refused_by_name():
    with pytest.raises(ModelFileError, match="while_data_dependent.tflite: operator 0 \\(WHILE\\): the loop's "
                                             "condition depends on the input"):
        tinycc_ml.load_model(DATA / "tflite" / "while_data_dependent.tflite")


def test_each_load_starts_a_fresh_stream(tmp_path):
    """The same build loaded twice in one process shares one library (the compile cache): each load starts from the
    first call's state, not where the other predictor's stream stopped."""
    require_target("host")
    path = DATA / "tflite" / "variables_int8.tflite"
    X = rows("int8", 6)
    first = tinycc_ml.compile(path, out_dir=tmp_path / "a", name="acc").load().run_raw(X)[0]
    second = tinycc_ml.compile(path, out_dir=tmp_path / "b", name="acc").load().run_raw(X)[0]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(np.asarray(second).reshape(len(X), -1), tflm_stream(path.read_bytes(), X))
