"""The Cortex-M4 AVERAGE_POOL_2D kernel (tinycc_ml/arm/m4_network_pool.py): single-op models in QEMU, every output
byte equal to tflite-micro's (rows of every int8 value, all -128 and all 127: the int16 lane sums' extremes), and
the layer run by the kernel's function where every window lies inside the input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, pool_model, random_rows, simulated_scores, tflite_micro

pytestmark = pytest.mark.toolchain


def avg_pool(shape, window, stride, padding: str, activation: str, q) -> bytes:
    return pool_model(OPS.AVERAGE_POOL_2D, shape, window, stride, padding, activation, q)[0]


@pytest.mark.parametrize("shape, window, stride, padding, activation, kernel", [
    ((1, 25, 5, 64), (25, 5), (1, 1), "valid", "none", True),  # KWS's global pool: 125 taps
    ((1, 15, 17, 8), (15, 17), (1, 1), "valid", "relu", True),  # 255 taps: the lane sums' bound
    ((1, 7, 6, 12), (2, 3), (2, 1), "valid", "relu6", True),
    ((1, 8, 8, 4), (3, 3), (2, 2), "valid", "none", True),
    ((1, 5, 5, 8), (3, 3), (2, 2), "same", "none", False),  # windows across the border: the shared C
    ((1, 16, 16, 4), (16, 16), (1, 1), "valid", "none", False),  # 256 taps: the shared C
])
def test_average_pool_equals_tflite_micro_on_the_m4(shape, window, stride, padding, activation, kernel, tmp_path):
    require_target("cortex-m4")
    model = avg_pool(shape, window, stride, padding, activation, (0.05, -3))
    size = int(np.prod(shape))
    X = np.concatenate([random_rows(np.random.default_rng(1), 4, size),
                        np.full((1, size), -128, np.int8), np.full((1, size), 127, np.int8)])
    got = simulated_scores("cortex-m4", model, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(model, X, shape).reshape(len(X), -1))
    source = (tmp_path / "cortex-m4" / "op.c").read_text()
    assert ("op_m4_avgpool_" in source) == kernel
