"""TFLite's float32 elementwise functions (tinycc_ml/ir/ops/network/float_unary.py) against tflite-micro: the exact
ones (ABS, NEG, FLOOR, CEIL, ROUND, SQUARE, SQRT, RSQRT) bit for bit on the host and the microcontrollers, the C
library's (EXP, LOG, SIN, COS) within a float32 step; quantised operands refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, assert_equal, compiled, simulated_scores, tflite_micro, unary_model
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.ops.network.float_unary import FUNCTIONS

EXACT = ("abs", "neg", "floor", "ceil", "round", "square", "sqrt", "rsqrt")
LIBRARY = ("exp", "log", "sin", "cos")


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def code(function: str) -> int:
    return getattr(OPS, FUNCTIONS[function][2])


def inputs(function: str, n: int = 30) -> np.ndarray:
    """Values around the functions' edges: halves and integers (ROUND's ties), signed zeros, large values;
    positive ones for the roots and the logarithm."""
    rng = np.random.default_rng(2)
    X = rng.normal(0, 6, size=(n, 64)).astype(np.float32)
    X[0, :16] = np.asarray([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 3.0, -3.0, 1e30, -1e30, 2.5e-40, 7.5, 8.5,
                            -7.5], dtype=np.float32)
    if function in ("sqrt", "rsqrt", "log"):
        X = np.abs(X) + np.float32(1e-3)
    return X


@pytest.mark.parametrize("function", EXACT)
def test_exact_functions_equal_tflite_micro_bit_for_bit(function, tmp_path):
    assert_equal(unary_model(code(function), (1, 64), "float32"), inputs(function), (1, 64), tmp_path, "float32")


@pytest.mark.parametrize("function", LIBRARY)
def test_library_functions_within_a_float32_step(function, tmp_path):
    data = unary_model(code(function), (1, 64), "float32")
    X = inputs(function)
    want = tflite_micro(data, X, (1, 64))
    model, result = compiled(data, tmp_path)
    for got in (model.scores(X), result.load().scores(X)):
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2.4e-7, atol=1e-30)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_exact_functions_alike(target, tmp_path):
    require_target(target)
    for function in ("round", "rsqrt", "floor"):
        data = unary_model(code(function), (1, 64), "float32")
        X = inputs(function, 3)
        (tmp_path / function).mkdir()
        got = simulated_scores(target, data, X, tmp_path / function, function)
        np.testing.assert_array_equal(np.asarray(got, np.float32), tflite_micro(data, X, (1, 64)))


def test_a_quantised_operand_without_an_integer_kernel_is_refused_by_name(tmp_path):
    """ABS and RSQRT have TFLite Micro's integer kernels (quantised_unary); the others take float32 only."""
    path = tmp_path / "q.tflite"
    path.write_bytes(unary_model(OPS.SQRT, (1, 8)))
    with pytest.raises(ModelFileError, match=r"q\.tflite.*SQRT: int8 tensors \(float32 is supported\)"):
        tinycc_ml.load_model(path)
