"""CUMSUM from .tflite files (ir/ops/network/cumsum.py) against tflite-micro: int8 on every output value
(interpreter, host C, the microcontrollers' C) over axes, exclusive and reverse, input and output quantisations;
float32 bit for bit (sums from 0 in order)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    OPTIONS,
    assert_equal,
    compiled,
    int32_constant,
    random_rows,
    simulated_scores,
    tflite_micro,
)
from tests.tflite_models import TfliteBuilder, options

SHAPE = (2, 4, 32)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def cumsum_model(axis: int, exclusive: bool, reverse: bool, kind: str = "int8", in_q=(0.05, -3),
                 out_q=(0.4, 10)) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=in_q[0], zero_point=in_q[1], name="x")
    a = int32_constant(b, [axis], "axis")
    y = b.tensor(SHAPE, kind, scale=out_q[0], zero_point=out_q[1], name="y")
    b.op(OPS.CUMSUM, [x, a], [y], OPTIONS.CumsumOptions, options("CumsumOptions", exclusive=exclusive,
                                                                  reverse=reverse))
    return b.finish([x], [y])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_int8_equals_tflite_micro_on_every_value(axis, exclusive, reverse, tmp_path):
    data = cumsum_model(axis, exclusive, reverse)
    X = random_rows(np.random.default_rng(3), 6, 256)
    assert_equal(data, X, SHAPE, tmp_path, "int8", spread=20)


@pytest.mark.parametrize("in_q, out_q", [((0.02, 60), (0.05, -100)), ((0.5, -128), (2.0, 0)), ((0.1, 0), (0.1, 0))])
def test_int8_over_quantisations(in_q, out_q, tmp_path):
    data = cumsum_model(2, False, False, in_q=in_q, out_q=out_q)
    assert_equal(data, random_rows(np.random.default_rng(5), 6, 256), SHAPE, tmp_path, "int8", spread=20)


@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, True)])
def test_float32_sums_in_order_bit_for_bit(exclusive, reverse, tmp_path):
    data = cumsum_model(2, exclusive, reverse, "float32")
    X = np.random.default_rng(2).normal(0, 1e3, size=(10, 256)).astype(np.float32)
    X[0] = -0.0  # sums from +0: -0 becomes +0, as the kernel's accumulator does
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_int8_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    data = cumsum_model(1, True, True, in_q=(0.03, 11), out_q=(0.2, -5))
    X = random_rows(np.random.default_rng(9), 4, 256)[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))
