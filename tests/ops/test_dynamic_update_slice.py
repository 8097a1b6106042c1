"""DYNAMIC_UPDATE_SLICE from .tflite files (ir/ops/network/dynamic_update_slice.py) against tflite-micro: a constant
block written into the input at constant starts (in range, past the end: clamped, negative: clamped), the input
written into a constant buffer at a computed start (ARG_MAX of the input: a row chosen at run time), int8, int16 and
float32, every output value on the host (interpreter and C) and the microcontrollers."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, int32_constant, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options

SHAPE = (4, 6, 8)
Q = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.001, "zero_point": 0},
     "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def _data(rng, kind: str, shape) -> np.ndarray:
    if kind == "float32":
        return rng.normal(0, 2, size=shape).astype(np.float32)
    top = 32768 if kind == "int16" else 128
    return rng.integers(-top, top, size=shape)


def constant_update(kind: str, update_shape, start) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **Q[kind])
    u = b.tensor(update_shape, kind, data=_data(np.random.default_rng(1), kind, update_shape), name="update",
                 **Q[kind])
    s = int32_constant(b, start, "start")
    y = b.tensor(SHAPE, kind, name="y", **Q[kind])
    b.op(OPS.DYNAMIC_UPDATE_SLICE, [x, u, s], [y])
    return b.finish([x], [y])


def computed_start(kind: str) -> bytes:
    """x (1, 8) -> start [argmax(x), 0] -> a constant (4, 8) buffer with x written at that row (clamped to 3)."""
    b = TfliteBuilder()
    x = b.tensor((1, 8), kind, name="x", **Q[kind])
    axis = int32_constant(b, [1], "axis")
    index = b.tensor((1,), "int32", scale=None, name="index")
    b.op(OPS.ARG_MAX, [x, axis], [index], OPTIONS.ArgMaxOptions, options("ArgMaxOptions", outputType=2))
    zero = int32_constant(b, [0], "zero")
    start = b.tensor((2,), "int32", scale=None, name="start")
    b.op(OPS.CONCATENATION, [index, zero], [start], OPTIONS.ConcatenationOptions,
         options("ConcatenationOptions", axis=0))
    buffer = b.tensor((4, 8), kind, data=_data(np.random.default_rng(2), kind, (4, 8)), name="buffer", **Q[kind])
    y = b.tensor((4, 8), kind, name="y", **Q[kind])
    b.op(OPS.DYNAMIC_UPDATE_SLICE, [buffer, x, start], [y])
    return b.finish([x], [y])


def rows(kind: str, size: int, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(8)
    return rng.normal(0, 3, size=(n, size)).astype(np.float32) if kind == "float32" else \
        random_rows(rng, n, size, kind)


def _check(data: bytes, X: np.ndarray, shape, kind: str, tmp_path) -> np.ndarray:
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    if kind == "float32":
        got = [model.scores(X), result.load().scores(X)]
    else:
        got = [model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), result.load().run_raw(X)[0]]
    for g in got:
        np.testing.assert_array_equal(np.asarray(g).astype(want.dtype), want)
    return want


@pytest.mark.parametrize("kind", ["int8", "int16", "float32"])
@pytest.mark.parametrize("update_shape, start", [((2, 3, 4), [1, 2, 3]), ((1, 6, 8), [3, 0, 0]),
                                                 ((2, 2, 2), [9, -4, 7]), ((4, 6, 8), [1, 1, 1])])
def test_constant_blocks_land_where_tflite_micro_writes_them(kind, update_shape, start, tmp_path):
    _check(constant_update(kind, update_shape, start), rows(kind, int(np.prod(SHAPE))), SHAPE, kind, tmp_path)


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_a_computed_start(kind, tmp_path):
    X = rows(kind, 8, n=12)
    want = _check(computed_start(kind), X, (1, 8), kind, tmp_path)
    assert len({tuple(r) for r in want}) > 3  # the row written moves with the input


@pytest.mark.parametrize("target", ["cortex-m4", "avr"])
def test_the_microcontrollers_write_the_same(target, tmp_path):
    require_target(target)
    data = computed_start("int8")
    X = rows("int8", 8)[:4]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, (1, 8)))
