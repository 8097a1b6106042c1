"""L2_POOL_2D (float32; lowered in tinycc_ml/importers/tflite.py onto square, average_pool2d, sqrt and the fused
activation) against tflite-micro: SAME and VALID padding, strides, RELU6; the Cortex-M4 bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options

SHAPE = (1, 5, 6, 3)


def l2_pool(padding: int, stride: int, out_hw, activation: int = 0) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "float32", scale=None, name="x")
    y = b.tensor((1, *out_hw, 3), "float32", scale=None, name="y")
    b.op(OPS.L2_POOL_2D, [x], [y], OPTIONS.Pool2DOptions,
         options("Pool2DOptions", padding=padding, strideW=stride, strideH=stride, filterWidth=3, filterHeight=2,
                 fusedActivationFunction=activation))
    return b.finish([x], [y])


CASES = {"same": (0, 2, (3, 3), 0), "valid": (1, 1, (4, 4), 0), "same relu6": (0, 1, (5, 6), 3)}


def rows(n: int = 8) -> np.ndarray:
    return np.random.default_rng(2).normal(0, 5, size=(n, int(np.prod(SHAPE)))).astype(np.float32)


@pytest.mark.parametrize("case", list(CASES))
def test_equals_tflite_micro(case, tmp_path):
    require_target("host")
    data = l2_pool(*CASES[case])
    X = rows()
    want = tflite_micro(data, X, SHAPE)
    _, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(np.asarray(result.load().scores(X)).astype(np.float32), want)
    assert (want.max() == 6.0) == (case == "same relu6")


@pytest.mark.toolchain
def test_the_m4_pools_the_same(tmp_path):
    require_target("cortex-m4")
    data = l2_pool(*CASES["same"])
    X = rows(3)
    np.testing.assert_array_equal(simulated_scores("cortex-m4", data, X, tmp_path).astype(np.float32),
                                  tflite_micro(data, X, SHAPE))
