"""IF from .tflite files (tinycc_ml/importers/tflite.py's _lower_if) against tflite-micro: a condition computed from
the input (both branches lowered, each output chosen by it), float32 and int8, host and M4; a constant condition
lowers its branch alone; branches with resource variables under a computed condition refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, int32_constant, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options, schema

SHAPE = (1, 16)
Q = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.002, "zero_point": 0}, "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def _branch(b: TfliteBuilder, kind: str, code: int, constant: float) -> int:
    """A subgraph y = x OP c (c a constant of the input's quantisation), its index."""
    main, sub = b.sub, schema.SubGraphT()
    sub.tensors, sub.operators = [], []
    b.model.subgraphs.append(sub)
    b.sub = sub
    x = b.tensor(SHAPE, kind, name="bx", **Q[kind])
    data = (np.full(SHAPE, constant, np.float32) if kind == "float32"
            else np.full(SHAPE, round(constant / Q[kind]["scale"]) + Q[kind]["zero_point"]))
    c = b.tensor(SHAPE, kind, data=data, name="bc", **Q[kind])
    y = b.tensor(SHAPE, kind, name="by", **Q[kind])
    b.op(code, [x, c], [y], *((OPTIONS.AddOptions, options("AddOptions")) if code == OPS.ADD else
                              (OPTIONS.SubOptions, options("SubOptions"))))
    sub.inputs, sub.outputs = np.asarray([x], np.int32), np.asarray([y], np.int32)
    b.sub = main
    return len(b.model.subgraphs) - 1


def if_model(kind: str, constant_condition: bool | None = None) -> bytes:
    """cond = mean(x) > 0 (or a constant) -> IF(cond, x): then x + 1.5, else x - 2."""
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **Q[kind])
    if constant_condition is None:
        axis = int32_constant(b, [1], "axis")
        mean = b.tensor((1,), kind, name="mean", **Q[kind])
        b.op(OPS.MEAN, [x, axis], [mean], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=False))
        zero = b.tensor((1,), kind, name="zero", data=(np.zeros(1, np.float32) if kind == "float32"
                                                       else np.full(1, Q[kind]["zero_point"])), **Q[kind])
        cond = b.tensor((1,), "bool", scale=None, name="cond")
        b.op(OPS.GREATER, [mean, zero], [cond])
    else:
        cond = b.tensor((1,), "bool", scale=None, name="cond", data=np.asarray([constant_condition]))
    y = b.tensor(SHAPE, kind, name="y", **Q[kind])
    then_index, else_index = _branch(b, kind, OPS.ADD, 1.5), _branch(b, kind, OPS.SUB, 2.0)
    b.op(OPS.IF, [cond, x], [y], OPTIONS.IfOptions, options("IfOptions", thenSubgraphIndex=then_index,
                                                             elseSubgraphIndex=else_index))
    return b.finish([x], [y])


def rows(kind: str, n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(5)
    if kind == "float32":
        return rng.normal(0, 1, size=(n, 16)).astype(np.float32)
    return random_rows(rng, n, 16)[-n:]


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_a_computed_condition_chooses_the_branch_tflite_micro_runs(kind, tmp_path):
    data, X = if_model(kind), rows(kind)
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    got = result.load().scores(X) if kind == "float32" else result.load().run_raw(X)[0]
    np.testing.assert_array_equal(np.asarray(got).astype(want.dtype), want)
    x = X.astype(np.float64) if kind == "float32" else (X.astype(np.float64) + 3) * 0.05
    assert 0 < np.mean(x.mean(axis=1) > 0) < 1  # both branches taken


@pytest.mark.parametrize("flag", [True, False])
def test_a_constant_condition_lowers_one_branch(flag, tmp_path):
    data, X = if_model("float32", flag), rows("float32")
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    assert "select" not in {n.op for n in model.graph.nodes()}
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


def test_the_m4_chooses_the_same(tmp_path):
    require_target("cortex-m4")
    data, X = if_model("int8"), rows("int8", 4)
    np.testing.assert_array_equal(simulated_scores("cortex-m4", data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_a_malformed_branch_index_is_refused_by_name(tmp_path):
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "float32", name="x")
    cond = b.tensor((1,), "bool", scale=None, name="cond", data=np.asarray([True]))
    y = b.tensor(SHAPE, "float32", name="y")
    b.op(OPS.IF, [cond, x], [y], OPTIONS.IfOptions, options("IfOptions", thenSubgraphIndex=5, elseSubgraphIndex=1))
    path = tmp_path / "if.tflite"
    path.write_bytes(b.finish([x], [y]))
    with pytest.raises(tinycc_ml.errors.ModelFileError, match="subgraph"):
        tinycc_ml.load_model(path)
