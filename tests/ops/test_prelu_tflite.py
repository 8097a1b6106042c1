"""PRELU from .tflite files (ir/ops/network/prelu.py) against tflite-micro: int8 and int16 inputs with int8 slopes
(per channel and per element, with zero points), float32; the microcontrollers too; an int16 slope refused."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, assert_equal, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 3, 4, 5)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def prelu(kind="int8", alpha_shape=(1, 1, 5), alpha_kind=None, out_q=(0.04, 6)) -> bytes:
    rng = np.random.default_rng(9)
    b = TfliteBuilder()
    in_q = (0.05 / 256, 0) if kind == "int16" else (0.05, -3)
    x = b.tensor(SHAPE, kind, scale=in_q[0], zero_point=in_q[1], name="x")
    alpha_kind = alpha_kind or ("float32" if kind == "float32" else "int8")
    if alpha_kind == "float32":
        a = b.tensor(alpha_shape, "float32", scale=None, data=rng.uniform(-0.5, 1.5, alpha_shape).astype(np.float32))
    else:
        top = 32768 if alpha_kind == "int16" else 128
        a = b.tensor(alpha_shape, alpha_kind, scale=0.01, zero_point=-20 if alpha_kind == "int8" else 0,
                     data=rng.integers(-top, top, size=alpha_shape))
    out = (out_q[0] / 256, 0) if kind == "int16" else out_q
    y = b.tensor(SHAPE, kind, scale=out[0], zero_point=out[1], name="y")
    b.op(OPS.PRELU, [x, a], [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "int16", "float32"])
@pytest.mark.parametrize("alpha_shape", [(1, 1, 5), (3, 4, 5), (1,)])
def test_equals_tflite_micro(kind, alpha_shape, tmp_path):
    data = prelu(kind, alpha_shape)
    X = random_rows(np.random.default_rng(1), 20, int(np.prod(SHAPE)), kind)
    assert_equal(data, X, SHAPE, tmp_path, kind, spread=20)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    data = prelu()
    X = random_rows(np.random.default_rng(2), 3, int(np.prod(SHAPE)))[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_an_int16_slope_is_refused_as_tflite_micro_refuses_it(tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(prelu("int16", alpha_kind="int16"))
    with pytest.raises(ModelFileError, match=r"bad\.tflite.*a int16 slope for int16 inputs"):
        tinycc_ml.load_model(path)
