"""ADD_N from .tflite files (ir/ops/network/add_n.py) against tflite-micro: int8 on every output value (interpreter,
host C, the microcontrollers' C) for 2 to 5 operands, computed and constant, over zero points and scales; float32 bit
for bit; operands of different quantisations refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, assert_equal, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 4, 4, 16)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def add_n_model(n_constants: int, repeats: int, kind: str = "int8", in_q=(0.05, -3), out_q=(0.1, 7),
                constant_q=None) -> bytes:
    """ADD_N(x, c1, x, c2, ...): the input ``repeats`` times and ``n_constants`` constants, interleaved."""
    rng = np.random.default_rng(n_constants + 10 * repeats)
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=in_q[0], zero_point=in_q[1], name="x")
    q = constant_q or in_q
    constants = [b.tensor(SHAPE, kind, scale=q[0], zero_point=q[1], name=f"c{k}",
                          data=(rng.normal(0, 3, size=SHAPE).astype(np.float32) if kind == "float32"
                                else rng.integers(-128, 128, size=SHAPE)))
                 for k in range(n_constants)]
    operands = []
    for k in range(max(repeats, n_constants)):
        operands += ([x] if k < repeats else []) + ([constants[k]] if k < n_constants else [])
    y = b.tensor(SHAPE, kind, scale=out_q[0], zero_point=out_q[1], name="y")
    b.op(OPS.ADD_N, operands, [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("n_constants, repeats", [(1, 1), (0, 2), (2, 2), (3, 2), (1, 4)])
@pytest.mark.parametrize("in_q, out_q", [((0.05, -3), (0.1, 7)), ((0.02, 60), (0.03, -100)),
                                         ((0.5, -128), (6.0, -100))])
def test_int8_equals_tflite_micro_on_every_value(n_constants, repeats, in_q, out_q, tmp_path):
    data = add_n_model(n_constants, repeats, in_q=in_q, out_q=out_q)
    X = random_rows(np.random.default_rng(3), 6, 256)
    assert_equal(data, X, SHAPE, tmp_path, "int8", spread=20)


def test_float32_sums_in_order_bit_for_bit(tmp_path):
    data = add_n_model(2, 3, "float32")
    X = np.random.default_rng(2).normal(0, 1e3, size=(10, 256)).astype(np.float32)
    X[0] = -0.0  # 0 + -0 is +0: the sum starts from 0 as the kernel's does
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_int8_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    data = add_n_model(2, 2, in_q=(0.03, 11), out_q=(0.07, -5))
    X = random_rows(np.random.default_rng(9), 4, 256)[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_operands_of_different_quantisations_are_refused_by_name(tmp_path):
    path = tmp_path / "op.tflite"
    path.write_bytes(add_n_model(1, 1, constant_q=(0.04, -3)))
    with pytest.raises(ModelFileError, match="ADD_N's inputs must have one type"):
        tinycc_ml.load_model(path)
