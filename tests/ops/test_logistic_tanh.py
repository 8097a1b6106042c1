"""LOGISTIC, TANH and HARD_SWISH from .tflite files (``kernel`` "tflite" of ir/ops/network/activations.py, the
integer kernels in ir/ops/tflite_sigmoid.py) against tflite-micro: int8 and int16 on every output value
(interpreter, host C, the microcontrollers' C), float32 within its rounding, files tflite-micro's Prepare refuses
refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    assert_int8_equal,
    compiled,
    random_rows,
    simulated_scores,
    tflite_micro,
    unary_model,
)
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.ops.tflite_sigmoid import SIGMOID_TABLE

SHAPE = (1, 4, 4, 16)  # 256 values: every int8 input in one row
OUTPUT_Q8 = {OPS.LOGISTIC: (1 / 256, -128), OPS.TANH: (1 / 128, 0)}  # what TFLite's converter writes
CODES = {"logistic": OPS.LOGISTIC, "tanh": OPS.TANH}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def every_int8(shape=SHAPE) -> np.ndarray:
    """Row 0: every int8 value once; then the extremes and random rows."""
    size = int(np.prod(shape))
    return random_rows(np.random.default_rng(3), 6, size)


def test_the_interpolation_table_is_the_one_tflite_micro_reads():
    """int16 TANH at an input scale whose rescaling is exactly 2 per input step reads table entry k at input 128 k
    (the output is the entry less 32768); the last entry shows in the interpolation at 254 + 255/256."""
    scale = float(np.nextafter(np.float32(1 / 6144), np.float32(np.inf)))  # multiplier 16384, shift 13: v = 2 x
    data = unary_model(OPS.TANH, (1, 256), "int16", in_q=(scale, 0), out_q=(2.0 ** -15, 0))
    x = np.minimum(128 * np.arange(256), 32767)
    x[255] = 128 * 254 + 127
    y = tflite_micro(data, x.reshape(1, 256).astype(np.int16), (1, 256)).reshape(-1).astype(np.int64) + 32768
    np.testing.assert_array_equal(y[:255], SIGMOID_TABLE[:255])
    assert y[255] - y[254] == SIGMOID_TABLE[255] - SIGMOID_TABLE[254]


@pytest.mark.parametrize("op", ["logistic", "tanh"])
@pytest.mark.parametrize("in_q", [(0.05, -3), (0.1, 0), (0.0078125, 127), (0.9, -128), (0.003, 40), (2.0 ** -4, 0)])
def test_int8_equals_tflite_micro_on_every_input(op, in_q, tmp_path):
    data = unary_model(CODES[op], SHAPE, in_q=in_q, out_q=OUTPUT_Q8[CODES[op]])
    X = every_int8()
    assert np.unique(tflite_micro(data, X, SHAPE)).size > 3  # not all saturated
    assert_int8_equal(data, X, SHAPE, tmp_path)


def test_int8_tanh_writes_its_steps_whatever_the_output_tensor_says(tmp_path):
    """tflite-micro's int8 TANH ignores the output's quantisation (steps of 1/128 around 0): so do we."""
    data = unary_model(OPS.TANH, SHAPE, in_q=(0.05, 2), out_q=(0.02, 9))
    assert_int8_equal(data, every_int8(), SHAPE, tmp_path)


def int16_rows(n: int, size: int) -> np.ndarray:
    return random_rows(np.random.default_rng(5), n, size, "int16")


@pytest.mark.parametrize("op", ["logistic", "tanh"])
@pytest.mark.parametrize("scale", [2.0 ** -12, 2.0 ** -11, 1 / 3000, 3.0 / 32768, 0.0011, 2.0 ** -16])
def test_int16_equals_tflite_micro_on_every_value(op, scale, tmp_path):
    data = unary_model(CODES[op], (1, 512), "int16", in_q=(scale, 0), out_q=(2.0 ** -15, 0))
    X = int16_rows(12, 512)
    X[3] = np.arange(-32768, 32768, 128)  # a sweep through the table
    want = tflite_micro(data, X, (1, 512))
    model, result = compiled(data, tmp_path)
    assert result.precision == "int16"
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), 1, 512)).reshape(len(X), -1), want)
    scores, _ = result.load().run_raw(X)
    np.testing.assert_array_equal(scores, want)


@pytest.mark.parametrize("op", ["logistic", "tanh"])
def test_float_within_float32_rounding_of_tflite_micro(op, tmp_path):
    data = unary_model(CODES[op], (1, 64), "float32")
    X = random_rows(np.random.default_rng(1), 40, 64, "float32") * 4  # past logistic's cut-offs at -9 and 16.6
    want = tflite_micro(data, X, (1, 64))
    model, result = compiled(data, tmp_path, precision="float")
    for got in (model.scores(X), result.load().scores(X)):
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=4e-7, atol=1e-30)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    for op, kind, in_q, out_q in [("logistic", "int8", (0.06, 5), OUTPUT_Q8[OPS.LOGISTIC]),
                                  ("tanh", "int16", (1 / 3000, 0), (2.0 ** -15, 0)),
                                  ("logistic", "int16", (2.0 ** -12, 0), (2.0 ** -15, 0))]:
        size = 256 if kind == "int8" else 96  # an int16 row of 256 and its output leave the Uno no stack
        data = unary_model(CODES[op], (1, size), kind, in_q=in_q, out_q=out_q)
        X = (every_int8((1, size)) if kind == "int8" else int16_rows(3, size))[:4]
        (tmp_path / f"{op}{kind}").mkdir()
        got = simulated_scores(target, data, X, tmp_path / f"{op}{kind}", name=f"{op}{kind}")
        np.testing.assert_array_equal(got, tflite_micro(data, X, (1, size)))


@pytest.mark.parametrize("op, kind, in_q, out_q, problem", [
    ("logistic", "int8", (0.05, 0), (1 / 256, 0), "zero point is 0"),
    ("logistic", "int16", (2.0 ** -12, 0), (2.0 ** -14, 0), "2\\^-15"),
    ("tanh", "int16", (2.0 ** -12, 3), (2.0 ** -15, 0), "zero point"),
    ("tanh", "int16", (4.0, 0), (2.0 ** -15, 0), "15-bit multiplier"),
    ("logistic", "int8", (1e-12, 0), (1 / 256, -128), "input scale"),
])
def test_files_tflite_micro_refuses_are_refused_by_name(op, kind, in_q, out_q, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(unary_model(CODES[op], (1, 8), kind, in_q=in_q, out_q=out_q))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("in_q, out_q", [((0.05, -3), (0.03, -20)), ((0.1, 0), (0.04, -100)), ((0.02, 60), (0.02, 7)),
                                         ((0.3, -128), (0.25, -120)), ((0.004, 10), (0.002, -128))])
def test_int8_hard_swish_equals_tflite_micro_on_every_input(in_q, out_q, tmp_path):
    data = unary_model(OPS.HARD_SWISH, SHAPE, in_q=in_q, out_q=out_q)
    X = every_int8()
    assert np.unique(tflite_micro(data, X, SHAPE)).size > 20
    assert_int8_equal(data, X, SHAPE, tmp_path)


def test_float_hard_swish_equals_tflite_micro_bit_for_bit(tmp_path):
    data = unary_model(OPS.HARD_SWISH, (1, 64), "float32")
    X = random_rows(np.random.default_rng(4), 40, 64, "float32")
    want = tflite_micro(data, X, (1, 64))
    model, result = compiled(data, tmp_path, precision="float")
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_hard_swish_alike(target, tmp_path):
    require_target(target)
    data = unary_model(OPS.HARD_SWISH, (1, 256), in_q=(0.05, -3), out_q=(0.03, -20))
    X = every_int8((1, 256))[:2]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, (1, 256)))


@pytest.mark.parametrize("kind, in_q, out_q, problem", [
    ("int16", (2.0 ** -12, 0), (2.0 ** -12, 0), "input must be qi8, got"),
    ("int8", (1.0, 0), (0.001, 0), "output's scale at least 1/128"),
])
def test_hard_swish_files_tflite_micro_refuses_are_refused(kind, in_q, out_q, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(unary_model(OPS.HARD_SWISH, (1, 8), kind, in_q=in_q, out_q=out_q))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
