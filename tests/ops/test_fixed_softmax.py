"""softmax in the project's fixed point (ir/ops/fixed_softmax.py): the exp's error proven over every difference
0..65,535 at every input scale from 0 to 20, the stated bound held against the float64 softmax of the input's values
on rows of every kind (one value far above, ties, the extremes, random; 2 to 300 values), the type rules refused by
name. (Its C: tests/backends/test_network_pow2.py and the PyTorch nets.)"""

from __future__ import annotations

import numpy as np
import pytest

from tinycc_ml.ir.ops import OPS, FixedCall
from tinycc_ml.ir.ops.fixed16_activations import gate_error
from tinycc_ml.ir.ops.fixed_softmax import EXP, error_bound, output_scale
from tinycc_ml.ir.ops.registry import TypeRuleError
from tinycc_ml.ir.types import TensorType, fixed


def test_the_exp_is_within_its_stated_error_for_every_difference():
    assert gate_error(EXP, q=np.arange(0, 65536)) <= EXP.error


def rows_of(bits: int, n: int, rng) -> np.ndarray:
    top = (1 << (bits - 1)) - 1
    rows = [rng.integers(-top - 1, top + 1, size=n), np.full(n, 5), np.full(n, -top - 1),
            np.where(np.arange(n) == 0, top, -top - 1), np.where(np.arange(n) < 2, top, 0),
            rng.integers(-40, 40, size=n), rng.integers(top - 300 if bits == 16 else top - 8, top + 1, size=n)]
    return np.stack(rows).astype(np.int64)


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("n", [2, 5, 49, 300])
@pytest.mark.parametrize("s_in", [0, 4, 8, 12, 15, 19])
def test_every_probability_within_the_stated_bound(bits, n, s_in):
    q = rows_of(bits, n, np.random.default_rng(n + s_in))
    shape = q.shape
    call = FixedCall([q], [TensorType(shape, fixed(bits, s_in))], TensorType(shape, fixed(bits, output_scale(bits))),
                     {"beta": 1.0}, "softmax")
    got = np.asarray(OPS["softmax"].fixed(call), np.int64) * 2.0 ** -output_scale(bits)
    x = q * 2.0**-s_in
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.all(np.abs(got - p) <= error_bound(p, n, bits))


def test_the_type_rules_are_refused_by_name():
    x = TensorType((1, 4), fixed(16, 10), "NC")
    with pytest.raises(TypeRuleError, match="takes beta 1"):
        OPS["softmax"].infer([x], {"beta": 2.0}, TensorType((1, 4), fixed(16, 15), "NC"))
    with pytest.raises(TypeRuleError, match="writes fx16 at scale 15"):
        OPS["softmax"].infer([x], {"beta": 1.0}, TensorType((1, 4), fixed(16, 12), "NC"))
