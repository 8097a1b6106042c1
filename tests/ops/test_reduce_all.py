"""REDUCE_ALL from .tflite files (ir/ops/network/reduce_all.py) against tflite-micro: x -> GREATER(x, c) -> REDUCE_ALL
over one or several axes, kept or not; every output value on the host (interpreter and C) and the M4."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, int32_constant, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options

SHAPE = (2, 3, 4)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def all_model(axes, keep: bool) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "float32", name="x")
    c = b.tensor((1,), "float32", data=np.asarray([-0.8], np.float32), name="c")
    mask = b.tensor(SHAPE, "bool", scale=None, name="mask")
    b.op(OPS.GREATER, [x, c], [mask])
    a = int32_constant(b, axes, "axes")
    kept = tuple(1 if k in [a % 3 for a in axes] else d for k, d in enumerate(SHAPE)
                 if keep or k not in [a % 3 for a in axes])
    y = b.tensor(kept, "bool", scale=None, name="y")
    b.op(OPS.REDUCE_ALL, [mask, a], [y], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=keep))
    return b.finish([x], [y])


@pytest.mark.parametrize("axes, keep", [([2], False), ([0], True), ([0, 2], False), ([-1, 1], True),
                                        ([0, 1, 2], False)])
def test_equals_tflite_micro(axes, keep, tmp_path):
    data = all_model(axes, keep)
    X = np.random.default_rng(3).normal(0, 1, size=(40, 24)).astype(np.float32)
    X[0] = 1.0  # all true
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(np.asarray(model.scores(X)).astype(want.dtype), want)
    np.testing.assert_array_equal(np.asarray(result.load().scores(X)).astype(want.dtype), want)
    assert 0 < want.mean() < 1


def test_the_m4_reduces_the_same(tmp_path):
    require_target("cortex-m4")
    data = all_model([0, 2], False)
    X = np.random.default_rng(4).normal(0, 1, size=(4, 24)).astype(np.float32)
    np.testing.assert_array_equal(simulated_scores("cortex-m4", data, X, tmp_path).astype(bool),
                                  tflite_micro(data, X, SHAPE).astype(bool))
