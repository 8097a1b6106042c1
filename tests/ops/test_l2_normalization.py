"""L2_NORMALIZATION from .tflite files (ir/ops/network/l2_normalization.py) against tflite-micro: int8 on every
output value (interpreter, host C, the microcontrollers' C) over zero points and row lengths, including rows that
are all zero point (the inverse square root's own branch); float32 C bit for bit; a fused activation refused."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    OPTIONS,
    assert_int8_equal,
    compiled,
    random_rows,
    simulated_scores,
    tflite_micro,
    unary_model,
)
from tinycc_ml.errors import ModelFileError

OUT_Q = (1 / 128, 0)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def rows(shape, zero_point: int) -> np.ndarray:
    size = int(np.prod(shape))
    X = random_rows(np.random.default_rng(4), 8, size)
    X[-1] = zero_point  # every difference 0: the sum 0
    X[-2] = np.where(np.arange(size) == 0, zero_point + 1, zero_point)  # the sum 1
    small = np.random.default_rng(5).integers(-2, 3, size=size) + zero_point
    X[-3] = np.clip(small, -128, 127)  # small sums: the inverse square root's left shift
    return X


@pytest.mark.parametrize("in_q", [(0.05, -3), (0.1, 0), (0.02, 100), (0.5, -128)])
@pytest.mark.parametrize("shape", [(1, 256), (4, 16), (2, 3, 7), (1, 2, 2, 128)])
def test_int8_equals_tflite_micro_on_every_value(in_q, shape, tmp_path):
    data = unary_model(OPS.L2_NORMALIZATION, shape, in_q=in_q, out_q=OUT_Q, options_type=OPTIONS.L2NormOptions,
                       options_name="L2NormOptions")
    X = rows(shape, in_q[1])
    assert np.unique(tflite_micro(data, X, shape)).size > 10
    assert_int8_equal(data, X, shape, tmp_path)


def test_float32_equals_tflite_micro_bit_for_bit(tmp_path):
    shape = (5, 12)
    data = unary_model(OPS.L2_NORMALIZATION, shape, "float32", options_type=OPTIONS.L2NormOptions,
                       options_name="L2NormOptions")
    X = np.random.default_rng(2).normal(0, 4, size=(20, 60)).astype(np.float32)
    X[0, :12] = 0.0  # a zero row: the norm's floor 1e-6
    X[1, :12] = 1e-8
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-6, atol=1e-6)  # the interpreter: float64
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_int8_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    shape = (2, 32)
    data = unary_model(OPS.L2_NORMALIZATION, shape, in_q=(0.07, -10), out_q=OUT_Q,
                       options_type=OPTIONS.L2NormOptions, options_name="L2NormOptions")
    X = rows(shape, -10)[:6]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, shape))


def test_a_fused_activation_is_refused_by_name(tmp_path):
    data = unary_model(OPS.L2_NORMALIZATION, (1, 16), in_q=(0.05, 0), out_q=OUT_Q,
                       options_type=OPTIONS.L2NormOptions, options_name="L2NormOptions",
                       option_fields={"fusedActivationFunction": 1})
    path = tmp_path / "op.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match="L2_NORMALIZATION: a fused activation"):
        tinycc_ml.load_model(path)
