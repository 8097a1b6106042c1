"""GATHER and EMBEDDING_LOOKUP (tinycc_ml/ir/ops/network/gather.py; constant indices onto take.py) against
tflite-micro: constant indices of any shape along any axis, indices computed by ARG_MAX with batch_dims, int32 ids
as the model's input into float32, int8 and int8-read-as-float32 tables; the microcontrollers; an index out of range
an error as in tflite-micro (the interpreter raises, the C clamps and reports it in <prefix>_status()); what
tflite-micro refuses refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import DataError, ModelFileError

SHAPE = (1, 4, 5, 3)
Q = {"int8": {"scale": 0.05, "zero_point": -3}, "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def constant_indices(kind: str, axis: int, indices: np.ndarray) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **Q[kind])
    i = b.tensor(indices.shape, "int32", scale=None, data=indices.astype(np.int32), name="indices")
    a = axis % len(SHAPE)
    out_shape = SHAPE[:a] + indices.shape + SHAPE[a + 1:]
    y = b.tensor(out_shape, kind, name="y", **Q[kind])
    b.op(OPS.GATHER, [x, i], [y], OPTIONS.GatherOptions, options("GatherOptions", axis=axis))
    return b.finish([x], [y])


def gather_of_argmax(kind: str) -> bytes:
    """x -> ARG_MAX over the last axis -> GATHER(x, index, axis 3, batch_dims 3): each position's largest channel,
    the indices computed."""
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **Q[kind])
    axis = b.tensor((1,), "int32", scale=None, data=np.asarray([3], dtype=np.int32), name="axis")
    index = b.tensor(SHAPE[:3], "int32", scale=None, name="index")
    b.op(OPS.ARG_MAX, [x, axis], [index], OPTIONS.ArgMaxOptions, options("ArgMaxOptions", outputType=2))
    y = b.tensor(SHAPE[:3], kind, name="y", **Q[kind])
    b.op(OPS.GATHER, [x, index], [y], OPTIONS.GatherOptions, options("GatherOptions", axis=3, batchDims=3))
    return b.finish([x], [y])


def embedding(table_kind: str, out_kind: str, ids: int = 6, zero_point: int = 0) -> bytes:
    rng = np.random.default_rng(4)
    b = TfliteBuilder()
    lookup = b.tensor((ids,), "int32", scale=None, name="ids")
    data = (rng.normal(0, 2, size=(9, 2, 3)).astype(np.float32) if table_kind == "float32"
            else rng.integers(-128, 128, size=(9, 2, 3)))
    q = {"scale": 0.02, "zero_point": zero_point} if table_kind == "int8" else {"scale": None}
    table = b.tensor((9, 2, 3), table_kind, data=data, name="table", **q)
    y = b.tensor((ids, 2, 3), out_kind, name="y", **(q if out_kind == "int8" else {"scale": None}))
    b.op(OPS.EMBEDDING_LOOKUP, [lookup, table], [y])
    return b.finish([lookup], [y])


def rows(kind: str, n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(8)
    size = int(np.prod(SHAPE))
    return rng.normal(0, 3, size=(n, size)).astype(np.float32) if kind == "float32" else random_rows(rng, n, size)


def _outputs(data: bytes, X: np.ndarray, tmp_path, kind: str, shape=SHAPE):
    model, result = compiled(data, tmp_path)
    if kind == "float32":
        return np.asarray(model.scores(X)), np.asarray(result.load().scores(X))
    return (model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1),
            np.asarray(result.load().run_raw(X)[0]))


@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("axis, indices", [
    (1, np.asarray([3, 0, 0, 2])),
    (2, np.asarray([[4, 1], [0, 0], [2, 3]])),
    (-1, np.asarray([2, 2, 0, 1, 2])),
    (0, np.asarray([0, 0])),
], ids=["axis 1", "axis 2, 2-D indices", "last axis", "axis 0 repeated"])
def test_constant_indices_gather_what_tflite_micro_gathers(kind, axis, indices, tmp_path):
    data = constant_indices(kind, axis, indices)
    X = rows(kind)
    want = tflite_micro(data, X, SHAPE)
    for got in _outputs(data, X, tmp_path, kind):
        np.testing.assert_array_equal(got.reshape(len(X), -1).astype(want.dtype), want)


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_computed_indices_with_batch_dims(kind, tmp_path):
    data = gather_of_argmax(kind)
    X = rows(kind)
    want = tflite_micro(data, X, SHAPE)
    np.testing.assert_array_equal(want, X.reshape(len(X), -1, 3).max(axis=2))  # the largest of each position
    for got in _outputs(data, X, tmp_path, kind):
        np.testing.assert_array_equal(got.reshape(len(X), -1).astype(want.dtype), want)


@pytest.mark.parametrize("table_kind, out_kind", [("float32", "float32"), ("int8", "int8"), ("int8", "float32")])
def test_embedding_lookup_of_int32_ids(table_kind, out_kind, tmp_path):
    """int32 ids as the model's input; an int8 table read as float32 is dequantised as TFLite Micro does."""
    data = embedding(table_kind, out_kind)
    ids = np.random.default_rng(6).integers(0, 9, size=(10, 6)).astype(np.int32)
    want = tflite_micro(data, ids, (6,))
    model, result = compiled(data, tmp_path)
    got = result.load().run_raw(ids)[0]
    np.testing.assert_array_equal(np.asarray(model.scores(ids)).reshape(len(ids), -1).astype(want.dtype)
                                  if out_kind == "float32" else
                                  model.run_quantised(ids).reshape(len(ids), -1), want)
    np.testing.assert_array_equal(np.asarray(got).reshape(len(ids), -1).astype(want.dtype), want)


def gather_of_ids(ids: int = 3) -> bytes:
    """GATHER of a constant float32 table's rows (axis 0) by int32 indices the model takes as its input."""
    b = TfliteBuilder()
    i = b.tensor((ids,), "int32", scale=None, name="ids")
    table = b.tensor((9, 2), "float32", scale=None, data=np.arange(18, dtype=np.float32).reshape(9, 2),
                     name="table")
    y = b.tensor((ids, 2), "float32", scale=None, name="y")
    b.op(OPS.GATHER, [table, i], [y], OPTIONS.GatherOptions, options("GatherOptions", axis=0))
    return b.finish([i], [y])


@pytest.mark.parametrize("make, kind", [(gather_of_ids, "float32"), (lambda: embedding("float32", "float32", ids=3),
                                                                      "float32"),
                                        (lambda: embedding("int8", "int8", ids=3), "int8")],
                         ids=["GATHER", "EMBEDDING_LOOKUP", "EMBEDDING_LOOKUP int8"])
@pytest.mark.parametrize("bad", [[-1, 0, 2], [0, 9, 1], [0, 2, 2**31 - 1]], ids=["-1", "one past", "int32 max"])
def test_an_index_out_of_range_is_an_error_as_in_tflite_micro(make, kind, bad, tmp_path):
    """tflite-micro's Invoke fails on an index outside the axis; the interpreter raises DataError (a ValueError)
    naming the node and the index; the C clamps it (no read outside the table), finishes the call and reports it
    through <prefix>_status(), which the host predictor turns into DataError naming the row."""
    data = make()
    good = np.asarray([[0, 8, 1], [2, 2, 0]], dtype=np.int32)
    rows = np.concatenate([good, np.asarray([bad], dtype=np.int32)])
    want = tflite_micro(data, good, (3,))
    with pytest.raises(RuntimeError, match="invocation failed"):
        tflite_micro(data, rows[2:], (3,))
    model, result = compiled(data, tmp_path)
    assert f"int {result.prefix}_status(void);" in result.files[f"{result.prefix}.h"]
    wrong = next(v for v in bad if not 0 <= v < 9)
    with pytest.raises(ValueError, match=rf"row 2: index {wrong} \(at \[{bad.index(wrong)}\] of the indices\) is "
                                         r"outside axis 0 of 9"):
        model.run_quantised(rows) if kind == "int8" else model.scores(rows)
    predictor = result.load()
    np.testing.assert_array_equal(np.asarray(predictor.run_raw(good)[0]).astype(want.dtype), want)
    with pytest.raises(DataError, match=r"row 2 holds a value where TFLite Micro.s Invoke stops with an "
                                          r"error \(an index outside its tensor"):
        predictor.run_raw(rows)
    lib, ffi = predictor._lib, predictor._ffi
    status, scores = getattr(lib, f"{result.prefix}_status"), getattr(lib, f"{result.prefix}_scores")
    out = np.zeros(want.shape[1], dtype=np.float32 if kind == "float32" else np.int8)
    for row, fault in ((good[0], 0), (rows[2], 1), (good[1], 0)):
        scores(ffi.from_buffer("int32_t[]", np.ascontiguousarray(row)),
               ffi.from_buffer(f"{result.output.score_ctype}[]", out, require_writable=True))
        assert status() == fault and status() == 0  # read once, cleared
    clamped = np.clip(rows[2], 0, 8)  # the rows the C read in their place
    np.testing.assert_array_equal(out.astype(want.dtype), tflite_micro(data, good[1:], (3,))[0])
    scores(ffi.from_buffer("int32_t[]", np.ascontiguousarray(rows[2])),
           ffi.from_buffer(f"{result.output.score_ctype}[]", out, require_writable=True))
    assert status() == 1
    np.testing.assert_array_equal(out.astype(want.dtype), tflite_micro(data, clamped[None], (3,))[0])


def test_constant_indices_build_no_status(tmp_path):
    _, result = compiled(constant_indices("int8", 2, np.asarray([4, 0])), tmp_path)
    assert "_status" not in result.files[f"{result.prefix}.h"]


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_gather_the_same(target, tmp_path):
    require_target(target)
    cases = (("int8", gather_of_argmax("int8")), ("int8", constant_indices("int8", 2, np.asarray([4, 0]))),
             ("float32", gather_of_argmax("float32")))
    for k, (kind, data) in enumerate(cases):
        X = rows(kind)[:4]
        want = tflite_micro(data, X, SHAPE)
        (tmp_path / str(k)).mkdir()
        got = simulated_scores(target, data, X, tmp_path / str(k))
        np.testing.assert_array_equal(got.astype(want.dtype), want)


@pytest.mark.parametrize("data, problem", [
    (constant_indices("int8", 1, np.asarray([0, 4])), "indices \\[0, 4\\] leave axis 1 of 4"),
    (embedding("int8", "float32", zero_point=3), "needs zero point 0"),
    (embedding("float32", "int8"), "a float32 table gives int8"),
], ids=["index out of range", "hybrid table with a zero point", "float table to int8"])
def test_what_tflite_micro_refuses_is_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
