"""SHAPE, ZEROS_LIKE, FILL, BROADCAST_ARGS (constants) and BROADCAST_TO (copies) from
tinycc_ml/ir/ops/network/shape_constants.py against tflite-micro, each inside a model that computes with it; the
microcontrollers; bad shapes refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, compiled, int32_constant, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError

Q = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.002, "zero_point": 0}, "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def shape_then_reshape(kind):
    """x (1, 4, 3) -> SHAPE -> RESHAPE(x, that shape) -> RELU."""
    b = TfliteBuilder()
    x = b.tensor((1, 4, 3), kind, name="x", **Q[kind])
    s = b.tensor((3,), "int32", scale=None, name="s")
    b.op(OPS.SHAPE, [x], [s])
    r = b.tensor((1, 4, 3), kind, name="r", **Q[kind])
    b.op(OPS.RESHAPE, [x, s], [r])
    y = b.tensor((1, 4, 3), kind, name="y", **Q[kind])
    b.op(OPS.RELU, [r], [y])
    return b.finish([x], [y])


def zeros_like_added(kind):
    b = TfliteBuilder()
    x = b.tensor((1, 4, 3), kind, name="x", **Q[kind])
    z = b.tensor((1, 4, 3), kind, name="z", **Q[kind])
    b.op(OPS.ZEROS_LIKE, [x], [z])
    y = b.tensor((1, 4, 3), kind, name="y", **Q[kind])
    b.op(OPS.MAXIMUM, [x, z], [y])
    return b.finish([x], [y])


def filled_product(kind):
    b = TfliteBuilder()
    x = b.tensor((1, 4, 3), kind, name="x", **Q[kind])
    value = {"float32": np.float32(1.5), "int16": np.int16(700)}.get(kind, np.int8(7))
    v = b.tensor((), kind, data=np.asarray(value), name="v", **Q[kind])
    f = b.tensor((1, 1, 3), kind, name="f", **Q[kind])
    b.op(OPS.FILL, [int32_constant(b, [1, 1, 3], "dims"), v], [f])
    y = b.tensor((1, 4, 3), kind, name="y", **Q[kind])
    b.op(OPS.MAXIMUM, [x, f], [y])
    return b.finish([x], [y])


def broadcast(kind, to=(2, 4, 5, 3)):
    b = TfliteBuilder()
    x = b.tensor((4, 1, 3), kind, name="x", **Q[kind])
    y = b.tensor(to, kind, name="y", **Q[kind])
    b.op(OPS.BROADCAST_TO, [x, int32_constant(b, list(to), "to")], [y])
    return b.finish([x], [y])


def broadcast_args_reshape(kind):
    b = TfliteBuilder()
    x = b.tensor((1, 12), kind, name="x", **Q[kind])
    s = b.tensor((2,), "int32", scale=None, name="s")
    b.op(OPS.BROADCAST_ARGS, [int32_constant(b, [4, 1], "a"), int32_constant(b, [1, 3], "c")], [s])
    r = b.tensor((4, 3), kind, name="r", **Q[kind])
    b.op(OPS.RESHAPE, [x, s], [r])
    y = b.tensor((4, 3), kind, name="y", **Q[kind])
    b.op(OPS.RELU, [r], [y])
    return b.finish([x], [y])


MODELS = {"SHAPE": (shape_then_reshape, (1, 4, 3)), "ZEROS_LIKE": (zeros_like_added, (1, 4, 3)),
          "FILL": (filled_product, (1, 4, 3)), "BROADCAST_TO": (broadcast, (4, 1, 3)),
          "BROADCAST_ARGS": (broadcast_args_reshape, (1, 12))}


def rows(kind, shape, n=10):
    rng = np.random.default_rng(31)
    size = int(np.prod(shape))
    return rng.normal(0, 3, size=(n, size)).astype(np.float32) if kind == "float32" else random_rows(rng, n, size, kind)


INT16_REFUSED = ("ZEROS_LIKE", "FILL")  # TFLite Micro's kernels take no int16 (ZerosLikeEval, FillEval)


@pytest.mark.parametrize("op, kind", [(op, kind) for op in MODELS for kind in ("int8", "int16", "float32")
                                      if not (kind == "int16" and op in INT16_REFUSED)])
def test_equals_tflite_micro(op, kind, tmp_path):
    build, shape = MODELS[op]
    data = build(kind)
    X = rows(kind, shape)
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    if kind == "float32":
        got = [model.scores(X), result.load().scores(X)]
    else:
        got = [model.run_quantised(X.reshape(len(X), *shape)), result.load().run_raw(X)[0]]
    for g in got:
        np.testing.assert_array_equal(np.asarray(g).reshape(len(X), -1).astype(want.dtype), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m4"])
def test_the_microcontrollers_broadcast_and_fill_the_same(target, tmp_path):
    require_target(target)
    for k, op in enumerate(("BROADCAST_TO", "FILL")):
        build, shape = MODELS[op]
        data = build("int8")
        X = rows("int8", shape, 3)
        (tmp_path / str(k)).mkdir()
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / str(k)),
                                      tflite_micro(data, X, shape))


@pytest.mark.parametrize("op", INT16_REFUSED)
def test_int16_forms_tflite_micro_refuses_are_refused(op, tmp_path):
    build, shape = MODELS[op]
    data = build("int16")
    with pytest.raises(RuntimeError):
        tflite_micro(data, rows("int16", shape, 2), shape)
    path = tmp_path / "op.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"op\.tflite.*{op}.*int16"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("data, problem", [
    (broadcast("int8", to=(2, 4, 5, 2)), "does not broadcast to"),
    (broadcast("int8", to=(1, 2, 3, 4, 1, 3)), "at most 5"),
], ids=["not broadcastable", "six dimensions"])
def test_bad_shapes_are_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
