"""CAST from .tflite files (ir/ops/network/integer_arith.py) against tflite-micro: TFLite Micro's CAST converts the
stored values and ignores quantisation (an int8 tensor's codes, not its reals), truncates floats towards zero, wraps
integers to a narrower type, and reads a bool mask as 0 and 1. Every output value on the host (interpreter and C) and
in the microcontrollers' C."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder

SHAPE = (1, 8, 32)
Q = {"int8": (0.05, -3), "int16": (0.001, 0)}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def cast_model(source: str, target: str, quantised: bool = True) -> bytes:
    b = TfliteBuilder()
    q = Q.get(source) if quantised else None
    x = b.tensor(SHAPE, source, scale=q[0] if q else None, zero_point=q[1] if q else 0, name="x")
    y = b.tensor(SHAPE, target, scale=None, name="y")
    b.op(OPS.CAST, [x], [y])
    return b.finish([x], [y])


def mask_model() -> bytes:
    """float x -> LESS(x, 0.5) -> CAST to float32: a mask as 0.0 / 1.0."""
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "float32", name="x")
    half = b.tensor((1,), "float32", data=np.asarray([0.5], np.float32), name="half")
    mask = b.tensor(SHAPE, "bool", scale=None, name="mask")
    y = b.tensor(SHAPE, "float32", name="y")
    b.op(OPS.LESS, [x, half], [mask])
    b.op(OPS.CAST, [mask], [y])
    return b.finish([x], [y])


def rows(source: str) -> np.ndarray:
    rng = np.random.default_rng(6)
    if source == "float32":  # fractions of both signs, whole numbers, values past int8's range
        X = rng.normal(0, 60, size=(6, 256)).astype(np.float32)
        X[0, :8] = [-2.5, -1.0, -0.5, -0.0, 0.5, 1.0, 2.5, 127.9]
        return X
    if source == "int32":
        return rng.integers(-2**31, 2**31, size=(6, 256)).astype(np.int32)
    return random_rows(rng, 6, 256, source)


CASES = [("int8", "int32", True), ("int8", "int16", True), ("int8", "float32", True), ("int16", "int32", True),
         ("int16", "int8", True), ("float32", "int32", False), ("int32", "int8", False), ("int32", "int16", False),
         ("int32", "float32", False)]


@pytest.mark.parametrize("source, target, quantised", CASES)
def test_equals_tflite_micro_on_every_value(source, target, quantised, tmp_path):
    data = cast_model(source, target, quantised)
    X = rows(source)
    want = tflite_micro(data, X, SHAPE)
    _, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(np.asarray(result.load().run_raw(X)[0]).astype(want.dtype), want)
    assert np.unique(want).size > 50


def test_float32_to_int8_truncates_towards_zero(tmp_path):
    data = cast_model("float32", "int8", False)
    X = np.random.default_rng(1).uniform(-127, 127, size=(4, 256)).astype(np.float32)
    want = tflite_micro(data, X, SHAPE)
    np.testing.assert_array_equal(want, np.trunc(X).astype(np.int8))  # what tflite-micro does
    _, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(np.asarray(result.load().run_raw(X)[0]).astype(np.int8), want)


def test_a_comparison_mask_cast_to_float(tmp_path):
    data = mask_model()
    X = np.random.default_rng(3).normal(0.5, 1, size=(5, 256)).astype(np.float32)
    want = tflite_micro(data, X, SHAPE)
    assert set(np.unique(want)) == {0.0, 1.0}
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


@pytest.mark.parametrize("target", ["cortex-m4", "avr"])
def test_int8_codes_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    data = cast_model("int8", "int16")
    X = rows("int8")[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))
