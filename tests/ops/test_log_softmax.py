"""LOG_SOFTMAX from .tflite files (ir/ops/network/log_softmax.py) against tflite-micro: int8 on every output value
(interpreter, host C, the microcontrollers' C) over input scales from fine to coarse and rows of several depths,
float32 C bit for bit; an int8 output quantisation other than TFLite's fixed one refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, assert_int8_equal, random_rows, simulated_scores, tflite_micro, unary_model
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.ops.tflite_arith import log_x_for_x_greater_than_or_equal_to_1

OUT_Q = (16 / 256, 127)  # TFLite's Prepare requires it


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@given(st.integers(1 << 12, 2**31 - 1))
@settings(max_examples=300, deadline=None)
def test_the_fixed_point_log_is_within_its_rounding_of_log(raw):
    """log_x_for_x_greater_than_or_equal_to_1 of a Q12 value >= 1 gives log(x) in Q5 to about 2^-24."""
    got = int(log_x_for_x_greater_than_or_equal_to_1(np.int64(raw), 12, 5)) / 2.0 ** 26
    assert abs(got - np.log(raw / 2.0 ** 19)) < 2.0 ** -20


@pytest.mark.parametrize("in_q", [(0.05, -3), (0.1, 0), (0.0078125, 127), (0.9, -128), (0.003, 40), (0.25, 5)])
@pytest.mark.parametrize("shape", [(1, 256), (4, 64), (2, 4, 10)])
def test_int8_equals_tflite_micro_on_every_value(in_q, shape, tmp_path):
    data = unary_model(OPS.LOG_SOFTMAX, shape, in_q=in_q, out_q=OUT_Q)
    X = random_rows(np.random.default_rng(7), 8, int(np.prod(shape)))
    want = tflite_micro(data, X, shape)
    assert np.unique(want).size > 5  # rows that reach the rounding, not all saturated
    assert_int8_equal(data, X, shape, tmp_path)


def test_float32_equals_tflite_micro_bit_for_bit(tmp_path):
    shape = (3, 10)
    data = unary_model(OPS.LOG_SOFTMAX, shape, "float32")
    X = np.random.default_rng(2).normal(0, 4, size=(20, 30)).astype(np.float32)
    want = tflite_micro(data, X, shape)
    model = tinycc_ml.load_model(_written(data, tmp_path))
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-6, atol=1e-6)  # the interpreter: float64
    result = tinycc_ml.compile(tmp_path / "op.tflite", target="host", name="op", out_dir=tmp_path / "host")
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


def _written(data: bytes, tmp_path):
    path = tmp_path / "op.tflite"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_int8_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    shape = (2, 32)
    data = unary_model(OPS.LOG_SOFTMAX, shape, in_q=(0.07, -10), out_q=OUT_Q)
    X = random_rows(np.random.default_rng(9), 4, 64)[:5]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, shape))


def test_another_output_quantisation_is_refused_by_name(tmp_path):
    data = unary_model(OPS.LOG_SOFTMAX, (1, 16), in_q=(0.05, 0), out_q=(0.1, 127))
    with pytest.raises(ModelFileError, match="16/256 and zero point 127"):
        tinycc_ml.load_model(_written(data, tmp_path))
