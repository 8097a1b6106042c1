"""LEAKY_RELU (tinycc_ml/ir/ops/network/leaky_relu.py) against tflite-micro: int8 on every byte (interpreter, host
C, the microcontrollers' C), float32 bit for bit, bad files refused with one error."""

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
    random_rows,
    simulated_scores,
    tflite_micro,
    unary_model,
)
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 4, 5, 3)


def leaky(alpha: float, kind: str = "int8", in_q=(0.05, -3), out_q=(0.04, 7), shape=SHAPE) -> bytes:
    return unary_model(OPS.LEAKY_RELU, shape, kind, in_q, out_q, OPTIONS.LeakyReluOptions, {"alpha": alpha},
                       "LeakyReluOptions")


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("alpha, in_q, out_q", [
    (0.2, (0.05, -3), (0.04, 7)),         # the usual: output scale finer than the input's
    (0.01, (0.1, 0), (0.1, 0)),           # PyTorch's default slope, one quantisation
    (1.5, (0.02, -128), (0.07, 20)),      # alpha above 1
    (0.3, (0.003, 100), (0.5, -100)),     # scales far apart: most values clamp
    (-0.25, (0.05, 3), (0.05, -5)),       # a negative alpha: requantised by its magnitude, negated
])
def test_int8_equals_tflite_micro_on_every_byte(alpha, in_q, out_q, tmp_path):
    data = leaky(alpha, in_q=in_q, out_q=out_q)
    X = random_rows(np.random.default_rng(0), 40, int(np.prod(SHAPE)))
    assert_int8_equal(data, X, SHAPE, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_random_quantisations_equal_tflite_micro(seed, tmp_path):
    rng = np.random.default_rng(seed)
    in_q = (float(rng.uniform(0.001, 0.5)), int(rng.integers(-128, 128)))
    out_q = (float(rng.uniform(0.001, 0.5)), int(rng.integers(-128, 128)))
    data = leaky(float(rng.uniform(0.0, 2.0)), in_q=in_q, out_q=out_q, shape=(1, 64))
    assert_int8_equal(data, random_rows(rng, 20, 64), (1, 64), tmp_path)


def test_float_equals_tflite_micro_bit_for_bit(tmp_path):
    data = leaky(0.2, kind="float32")
    X = random_rows(np.random.default_rng(1), 30, int(np.prod(SHAPE)), "float32")
    assert_float_equal(data, X, SHAPE, tmp_path)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_the_microcontrollers_compute_the_same_bytes(target, tmp_path):
    require_target(target)
    data = leaky(0.1, in_q=(0.05, -3), out_q=(0.03, 11))
    X = random_rows(np.random.default_rng(2), 4, int(np.prod(SHAPE)))[:5]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


@pytest.mark.parametrize("alpha", [float("nan"), float("inf")])
def test_a_non_finite_alpha_is_refused_naming_it(alpha, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(leaky(alpha))
    with pytest.raises(ModelFileError, match=r"bad\.tflite.*alpha"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("kind", ["int16", "int8"])
def test_multipliers_are_the_double_quotients_tflite_micro_uses(kind, tmp_path):
    """Scales of TFLite Micro's own 16x8 integration test (seanet leaky_relu1) where the float32 quotient's multiplier
    (1620052864) and the double's (1620052871) round some inputs apart: every input code against tflite-micro."""
    in_q, out_q = (float(np.float32(0.005836874712258577)), 0), (float(np.float32(0.0046422905288636684)), 0)
    info = np.iinfo(kind)
    codes = np.arange(info.min, info.max + 1, dtype=np.int64)
    width = 256
    X = np.resize(codes, (len(codes) + width - 1) // width * width).reshape(-1, width).astype(kind)
    data = unary_model(OPS.LEAKY_RELU, (1, width), kind, in_q, out_q, OPTIONS.LeakyReluOptions, {"alpha": 0.3},
                       "LeakyReluOptions")
    want = tflite_micro(data, X, (1, width))
    path = tmp_path / "leaky.tflite"
    path.write_bytes(data)
    got = np.asarray(tinycc_ml.compile(path, name="leaky").load().run_raw(X)[0]).reshape(want.shape)
    np.testing.assert_array_equal(got, want)
