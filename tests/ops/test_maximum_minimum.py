"""MAXIMUM and MINIMUM (tinycc_ml/ir/ops/network/maximum_minimum.py) against tflite-micro: int8 on every byte,
broadcast or not, float32 bit for bit; operands of different quantisations refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, assert_float_equal, assert_int8_equal, binary_model, random_rows
from tinycc_ml.errors import ModelFileError

Q = (0.05, -3)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("code", [OPS.MAXIMUM, OPS.MINIMUM])
@pytest.mark.parametrize("a_shape, b_shape, out_shape", [((1, 4, 4, 3), (1, 4, 4, 3), (1, 4, 4, 3)),
                                                         ((1, 4, 4, 3), (3,), (1, 4, 4, 3)),
                                                         ((1, 10), (), (1, 10))])
def test_int8_equals_tflite_micro_on_every_byte(code, a_shape, b_shape, out_shape, tmp_path):
    data = binary_model(code, a_shape, b_shape, out_shape, a_q=Q, b_q=Q, out_q=Q)
    assert_int8_equal(data, random_rows(np.random.default_rng(0), 20, int(np.prod(a_shape))), a_shape, tmp_path)


@pytest.mark.parametrize("code", [OPS.MAXIMUM, OPS.MINIMUM])
def test_float_equals_tflite_micro_bit_for_bit(code, tmp_path):
    data = binary_model(code, (1, 4, 4, 3), (1, 1, 4, 3), (1, 4, 4, 3), kind="float32")
    assert_float_equal(data, random_rows(np.random.default_rng(1), 20, 48, "float32"), (1, 4, 4, 3), tmp_path)


def test_operands_of_other_quantisations_are_refused(tmp_path):
    path = tmp_path / "mixed.tflite"
    path.write_bytes(binary_model(OPS.MAXIMUM, (1, 6), (1, 6), (1, 6), a_q=Q, b_q=(0.1, 0), out_q=Q))
    with pytest.raises(ModelFileError, match=r"mixed\.tflite.*one quantisation"):
        tinycc_ml.load_model(path)
