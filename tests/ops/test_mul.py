"""MUL (tinycc_ml/ir/ops/network/mul.py) against tflite-micro: int8 on every byte with and without broadcasting
and each fused activation (interpreter, host C, the microcontrollers' C), float32 bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    OPTIONS,
    assert_float_equal,
    assert_int8_equal,
    binary_model,
    random_rows,
    simulated_scores,
    tflite_micro,
)
from tests.tflite_builder import ACTIVATIONS
from tinycc_ml.errors import ModelFileError


def mul(a_shape, b_shape, out_shape, activation="none", **kw) -> bytes:
    return binary_model(OPS.MUL, a_shape, b_shape, out_shape, options_type=OPTIONS.MulOptions,
                        option_fields={"fusedActivationFunction": ACTIVATIONS[activation]}, options_name="MulOptions",
                        **kw)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("a_shape, b_shape, out_shape", [
    ((1, 4, 4, 3), (1, 4, 4, 3), (1, 4, 4, 3)),   # same shapes
    ((1, 4, 4, 3), (3,), (1, 4, 4, 3)),           # a per-channel scale (broadcast over the last axis)
    ((1, 4, 4, 3), (1, 1, 1, 3), (1, 4, 4, 3)),
    ((1, 4, 4, 3), (1, 4, 1, 1), (1, 4, 4, 3)),   # along the height only
    ((1, 6), (), (1, 6)),                          # by a scalar
    ((2, 1, 5), (1, 3, 1), (2, 3, 5)),            # both broadcast
])
@pytest.mark.parametrize("activation", ["none", "relu6"])
def test_int8_equals_tflite_micro_on_every_byte(a_shape, b_shape, out_shape, activation, tmp_path):
    data = mul(a_shape, b_shape, out_shape, activation, a_q=(0.05, -3), b_q=(0.02, 9), out_q=(0.03, 4))
    X = random_rows(np.random.default_rng(0), 30, int(np.prod(a_shape)))
    assert_int8_equal(data, X, a_shape, tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_random_quantisations_equal_tflite_micro(seed, tmp_path):
    rng = np.random.default_rng(seed)
    q = [(float(rng.uniform(0.002, 0.3)), int(rng.integers(-128, 128))) for _ in range(3)]
    data = mul((1, 8, 3), (8, 1), (1, 8, 3), ["none", "relu", "relu6"][seed % 3], a_q=q[0], b_q=q[1], out_q=q[2])
    assert_int8_equal(data, random_rows(rng, 20, 24), (1, 8, 3), tmp_path)


@pytest.mark.parametrize("b_shape", [(1, 4, 4, 3), (3,)])
def test_float_equals_tflite_micro_bit_for_bit(b_shape, tmp_path):
    data = mul((1, 4, 4, 3), b_shape, (1, 4, 4, 3), "relu", kind="float32")
    assert_float_equal(data, random_rows(np.random.default_rng(1), 20, 48, "float32"), (1, 4, 4, 3), tmp_path)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_the_microcontrollers_compute_the_same_bytes(target, tmp_path):
    require_target(target)
    data = mul((1, 4, 4, 3), (3,), (1, 4, 4, 3), "relu")
    X = random_rows(np.random.default_rng(2), 4, 48)[:5]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, (1, 4, 4, 3)))


@pytest.mark.parametrize("a_shape, b_shape, out_shape, match", [
    ((1, 4, 3), (1, 5, 3), (1, 4, 3), "do not broadcast"),
    ((1, 4, 3), (3,), (1, 4, 4), "declares|shape"),
])
def test_shapes_that_do_not_work_are_refused(a_shape, b_shape, out_shape, match, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(mul(a_shape, b_shape, out_shape))
    with pytest.raises(ModelFileError, match=match):
        tinycc_ml.load_model(path)
