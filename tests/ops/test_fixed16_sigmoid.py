"""The project's fx16 sigmoid and tanh (ir/ops/network/activations.py: TFLite Micro's int16 kernels on power-of-two
scales): the error bound the docs state, measured over every one of the 65,536 inputs at each input scale, and the
output's type rule (the other functions' fx16 forms: tests/ops/test_fixed16_activations.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tinycc_ml.ir.ops import OPS, FixedCall
from tinycc_ml.ir.ops.network.activations import FIXED16_ERROR_BOUND, FUNCTIONS
from tinycc_ml.ir.ops.registry import TypeRuleError
from tinycc_ml.ir.types import TensorType, fixed

EVERY_INPUT = np.arange(-(2**15), 2**15, dtype=np.int64)


def fx16(op: str, s_in: int, s_out: int = 15) -> np.ndarray:
    call = FixedCall([EVERY_INPUT], [TensorType((EVERY_INPUT.size,), fixed(16, s_in))],
                     TensorType((EVERY_INPUT.size,), fixed(16, s_out)), {}, op)
    return np.asarray(OPS[op].fixed(call), dtype=np.int64)


@pytest.mark.parametrize("op", ["logistic", "tensor_tanh"])
@pytest.mark.parametrize("s_in", range(16))
def test_every_input_within_the_stated_bound(op, s_in):
    got = fx16(op, s_in) * 2.0**-15
    truth = FUNCTIONS[op][0](EVERY_INPUT * 2.0**-s_in, {})
    assert np.max(np.abs(got - truth)) <= FIXED16_ERROR_BOUND
    assert np.all(np.diff(got) >= 0)  # monotone, as the functions are


@pytest.mark.parametrize("op", ["logistic", "tensor_tanh"])
def test_the_output_is_fx16_in_steps_of_two_to_the_minus_15(op):
    with pytest.raises(TypeRuleError, match=r"writes steps of 2\^-15"):
        OPS[op].infer([TensorType((4,), fixed(16, 10))], {}, TensorType((4,), fixed(16, 14)))
    assert OPS[op].infer([TensorType((4,), fixed(16, 10))], {}, TensorType((4,), fixed(16, 15))).dtype == fixed(16, 15)
