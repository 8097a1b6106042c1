"""Float32 DIV (with a fused activation), FLOOR_DIV and FLOOR_MOD (tinycc_ml/ir/ops/network/float_binary.py) against
tflite-micro: broadcast constants of both signs, quotients landing on integers; the Cortex-M0 and M4 bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, binary_model, compiled, simulated_scores, tflite_micro

SHAPE = (1, 2, 4, 4)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def model(code, activation: int = 0) -> bytes:
    divisors = np.asarray([2.0, -0.5, 3.0, -7.25], dtype=np.float32)
    options = dict(options_type=OPTIONS.DivOptions, options_name="DivOptions",
                   option_fields={"fusedActivationFunction": activation}) if code == OPS.DIV else {}
    return binary_model(code, SHAPE, (4,), SHAPE, "float32", a_q=(None, 0), b_q=(None, 0), out_q=(None, 0),
                        b_data=divisors, **options)


def rows(n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(3)
    X = rng.normal(0, 6, size=(n, 32)).astype(np.float32)
    X[: n // 2] = np.round(X[: n // 2] * 4) / 4  # quarters: exact quotients, floors and remainders at 0
    return X


@pytest.mark.parametrize("code, activation", [(OPS.DIV, 0), (OPS.DIV, 1), (OPS.FLOOR_DIV, 0), (OPS.FLOOR_MOD, 0)],
                         ids=["div", "div relu", "floor_div", "floor_mod"])
def test_equals_tflite_micro(code, activation, tmp_path):
    data = model(code, activation)
    X = rows()
    want = tflite_micro(data, X, SHAPE)
    model_, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(np.asarray(result.load().scores(X)).astype(np.float32), want)
    np.testing.assert_array_equal(np.asarray(model_.scores(X)).astype(np.float32), want)
    assert np.any(want == 0) and np.any(want < 0) or activation


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["cortex-m0", "cortex-m4"])
def test_the_arm_targets_compute_the_same(target, tmp_path):
    require_target(target)
    for k, code in enumerate((OPS.DIV, OPS.FLOOR_DIV, OPS.FLOOR_MOD)):
        data = model(code)
        X = rows(4)
        (tmp_path / str(k)).mkdir()
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / str(k)).astype(np.float32),
                                      tflite_micro(data, X, SHAPE))
