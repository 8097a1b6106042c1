"""GATHER_ND from .tflite files (ir/ops/network/gather_nd.py) against tflite-micro: constant coordinate tuples (1 to
the params' rank of them), computed ones (int32 ids as the model's input: a table lookup by two coordinates), int8 and
float32 params, every output value on the host (interpreter and C) and the microcontrollers; a constant slice
outside params refused by name, as tflite-micro stops; a computed one an error (the C clamps and reports it)."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, compiled, random_rows, simulated_scores, tflite_micro
from tests.ops.test_gather import _outputs
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import DataError, ModelFileError

SHAPE = (4, 5, 6)
Q = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.002, "zero_point": 0}, "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def constant_indices(kind: str, indices: np.ndarray) -> bytes:
    indices = np.asarray(indices, dtype=np.int32)
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **Q[kind])
    i = b.tensor(indices.shape, "int32", scale=None, data=indices, name="indices")
    nd = indices.shape[-1]
    y = b.tensor(indices.shape[:-1] + SHAPE[nd:], kind, name="y", **Q[kind])
    b.op(OPS.GATHER_ND, [x, i], [y])
    return b.finish([x], [y])


def lookup(kind: str, n: int = 3) -> bytes:
    """ids (n, 2) int32 -> GATHER_ND(table (9, 7, 4), ids): rows of a constant table picked by two coordinates."""
    rng = np.random.default_rng(4)
    b = TfliteBuilder()
    ids = b.tensor((n, 2), "int32", scale=None, name="ids")
    data = (rng.normal(0, 2, size=(9, 7, 4)).astype(np.float32) if kind == "float32"
            else rng.integers(-128, 128, size=(9, 7, 4)))
    table = b.tensor((9, 7, 4), kind, data=data, name="table", **Q[kind])
    y = b.tensor((n, 4), kind, name="y", **Q[kind])
    b.op(OPS.GATHER_ND, [table, ids], [y])
    return b.finish([ids], [y])


def rows(kind: str, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(8)
    size = int(np.prod(SHAPE))
    return rng.normal(0, 3, size=(n, size)).astype(np.float32) if kind == "float32" else random_rows(rng, n, size)


@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("indices", [
    [[3], [0], [0], [2]],
    [[1, 4], [0, 0], [3, 2]],
    [[[1, 4, 5], [0, 0, 0]], [[3, 2, 1], [2, 2, 2]]],
    [[0, 9]],  # the second coordinate passes its axis (5): the flat slice is still inside params
])
def test_constant_indices_gather_what_tflite_micro_gathers(kind, indices, tmp_path):
    data = constant_indices(kind, np.asarray(indices))
    X = rows(kind)
    want = tflite_micro(data, X, SHAPE)
    for got in _outputs(data, X, tmp_path, kind, SHAPE):
        np.testing.assert_array_equal(np.asarray(got).astype(want.dtype), want)


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_computed_indices_look_up_a_table(kind, tmp_path):
    data = lookup(kind)
    rng = np.random.default_rng(2)
    X = np.stack([np.stack([rng.integers(0, 9, 3), rng.integers(0, 7, 3)], axis=1).reshape(-1)
                  for _ in range(10)]).astype(np.int32)
    want = tflite_micro(data, X, (3, 2))
    _, result = compiled(data, tmp_path)
    got = np.asarray(result.load().run_raw(X)[0]).astype(want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["cortex-m4", "avr"])
def test_the_microcontrollers_gather_the_same(target, tmp_path):
    require_target(target)
    data = constant_indices("int8", np.asarray([[1, 4], [0, 0], [3, 2]]))
    X = rows("int8")[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_a_constant_slice_outside_params_is_refused_by_name(tmp_path):
    path = tmp_path / "op.tflite"
    path.write_bytes(constant_indices("int8", np.asarray([[3, 5]])))  # flat 3 x 30 + 5 x 6 = 120: past the end
    with pytest.raises(ModelFileError, match="GATHER_ND: a slice at flat position"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("bad", [[-1, 0], [8, 7], [9, 0]], ids=["before", "one past the end", "next table row"])
def test_a_computed_slice_outside_params_is_an_error_as_in_tflite_micro(bad, tmp_path):
    """tflite-micro's Invoke fails on a slice outside params (a coordinate past its own axis is fine while the flat
    slice stays inside: [8, 7] is past the end, [0, 9] would not be); the interpreter raises DataError, the C clamps
    the slice's start and reports it through <prefix>_status(), the host predictor raises naming the row."""
    data = lookup("float32", n=1)
    good = np.asarray([[0, 0], [8, 6], [0, 9]], dtype=np.int32)  # [0, 9]: flat 9 x 4 = row 1, column 2
    want = tflite_micro(data, good, (1, 2))
    with pytest.raises(RuntimeError, match="invocation failed"):
        tflite_micro(data, np.asarray([bad], dtype=np.int32), (1, 2))
    model, result = compiled(data, tmp_path)
    rows = np.concatenate([good, np.asarray([bad], dtype=np.int32)])
    with pytest.raises(ValueError, match=rf"row 3: index \[{bad[0]}, {bad[1]}\] \(slice 0\) starts at "):
        model.scores(rows)
    np.testing.assert_array_equal(np.asarray(model.scores(good)).astype(np.float32), want)
    predictor = result.load()
    np.testing.assert_array_equal(np.asarray(predictor.run_raw(good)[0]), want)
    with pytest.raises(DataError, match=r"row 3 holds a value where TFLite Micro.s Invoke stops with an "
                                          r"error \(an index outside its tensor"):
        predictor.run_raw(rows)
    status = getattr(predictor._lib, f"{result.prefix}_status")
    assert status() == 0  # cleared by the predictor's search for the row
