"""Comparisons, LOGICAL_AND/OR/NOT and SELECT_V2 (tinycc_ml/ir/ops/network/compare.py, logical.py, logical_not.py,
select.py) against tflite-micro: bool tensors between operators and as a model's output, int8 operands of different
quantisations compared "with scaling", float32 with NaNs, int32, broadcasting; the microcontrollers too; what
tflite-micro cannot run refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 4, 4, 3)
COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")
QUANTISATION = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.05 / 256, "zero_point": 0},
                "float32": {"scale": None}, "int32": {"scale": None}}
OTHER_QUANTISATION = {**QUANTISATION, "int8": {"scale": 0.07, "zero_point": 4}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def _constant(kind: str, shape, rng) -> np.ndarray:
    if kind == "float32":  # whole numbers, which half of the float rows hold too (equal values occur)
        return np.round(rng.normal(0, 2, size=shape)).astype(np.float32)
    top = {"int8": 128, "int16": 32768, "int32": 5}[kind]  # int32: small values, so that equal ones occur
    return rng.integers(-top, top, size=shape)


def comparison(name: str, kind: str, constant_shape=(3,), same_quantisation: bool = False) -> bytes:
    """x -> NAME(x, constant) -> a bool output."""
    rng = np.random.default_rng(5)
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, name="x", **QUANTISATION[kind])
    q = QUANTISATION if same_quantisation else OTHER_QUANTISATION
    c = b.tensor(constant_shape, kind, data=_constant(kind, constant_shape, rng), name="c", **q[kind])
    y = b.tensor(SHAPE, "bool", scale=None, name="y")
    b.op(getattr(OPS, name), [x, c], [y])
    return b.finish([x], [y])


def masked(kind: str) -> bytes:
    """x -> GREATER(x, c), LESS_EQUAL(x, c2 by row), OR, NOT, EQUAL with GREATER, AND -> SELECT_V2(mask, x, d): the
    bool tensors live between operators, the condition broadcast against x and d."""
    rng = np.random.default_rng(9)
    b = TfliteBuilder()
    q = QUANTISATION[kind]
    x = b.tensor(SHAPE, kind, name="x", **q)
    c = b.tensor((3,), kind, data=_constant(kind, (3,), rng), name="c", **OTHER_QUANTISATION[kind])
    c2 = b.tensor((1, 4, 1, 1), kind, data=_constant(kind, (1, 4, 1, 1), rng), name="c2", **q)
    flags = [b.tensor(SHAPE, "bool", scale=None, name=f"f{i}") for i in range(6)]
    b.op(OPS.GREATER, [x, c], [flags[0]])
    b.op(OPS.LESS_EQUAL, [x, c2], [flags[1]])
    b.op(OPS.LOGICAL_OR, [flags[0], flags[1]], [flags[2]])
    b.op(OPS.LOGICAL_NOT, [flags[2]], [flags[3]])
    b.op(OPS.EQUAL, [flags[3], flags[0]], [flags[4]])
    b.op(OPS.LOGICAL_AND, [flags[4], flags[2]], [flags[5]])
    d = b.tensor((1, 1, 1, 3), kind, data=_constant(kind, (1, 1, 1, 3), rng), name="d", **q)
    y = b.tensor(SHAPE, kind, name="y", **q)
    b.op(OPS.SELECT_V2, [flags[5], x, d], [y])
    return b.finish([x], [y])


def rows(kind: str, n: int = 24) -> np.ndarray:
    rng = np.random.default_rng(13)
    size = int(np.prod(SHAPE))
    if kind == "float32":
        X = rng.normal(0, 3, size=(n, size)).astype(np.float32)
        X[: n // 2] = np.round(X[: n // 2])
        X[-3:, ::4] = np.nan  # NaN compares unequal to everything
        X[-2:, 1::4] = np.inf
        return X
    if kind == "int32":
        return rng.integers(-5, 5, size=(n, size)).astype(np.int32)
    return random_rows(rng, n, size, kind)


def _host_outputs(data: bytes, X: np.ndarray, tmp_path, kind: str):
    model, result = compiled(data, tmp_path)
    host = result.load()
    if kind == "float32":
        return np.asarray(model.scores(X)), np.asarray(host.scores(X))
    return model.run_quantised(X.reshape(len(X), *SHAPE)).reshape(len(X), -1), host.run_raw(X)[0]


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("kind", ["int8", "float32", "int32"])
def test_comparisons_equal_tflite_micro(name, kind, tmp_path):
    """Each comparison's bool output (int8 operands of two quantisations, rescaled as TFLite Micro does; float32
    with NaN and infinity; plain int32 with many equal values) equals tflite-micro's, in the interpreter and the C."""
    data = comparison(name, kind, same_quantisation=name in ("EQUAL", "NOT_EQUAL"))  # else equal reals are rare
    X = rows(kind)
    want = tflite_micro(data, X, SHAPE)
    assert want.dtype == np.bool_ and 0 < want.mean() < 1
    interpreted, host = _host_outputs(data, X, tmp_path, kind)
    np.testing.assert_array_equal(interpreted.reshape(len(X), -1).astype(bool), want)
    np.testing.assert_array_equal(np.asarray(host).reshape(len(X), -1), want.astype(np.uint8))


def test_int8_comparisons_see_the_scaling(tmp_path):
    """Operands of different quantisations: the codes compared as stored would give another answer on some rows,
    TFLite Micro's rescaled comparison (and ours) the reals' order up to its rounding."""
    data = comparison("GREATER", "int8")
    X = rows("int8", 300)
    want = tflite_micro(data, X, SHAPE)
    c = np.random.default_rng(5)
    constant = c.integers(-128, 128, size=(3,))
    as_stored = X.reshape(len(X), -1, 3) > constant
    assert np.any(as_stored.reshape(len(X), -1) != want)
    _, host = _host_outputs(data, X, tmp_path, "int8")
    np.testing.assert_array_equal(np.asarray(host).reshape(len(X), -1), want.astype(np.uint8))


def constant_mask(kind: str) -> bytes:
    """SELECT_V2 by a constant bool mask (int16 has no comparison in TFLite Micro to compute one)."""
    rng = np.random.default_rng(17)
    b = TfliteBuilder()
    q = QUANTISATION[kind]
    x = b.tensor(SHAPE, kind, name="x", **q)
    mask = b.tensor((1, 4, 1, 3), "bool", scale=None, data=rng.integers(0, 2, size=(1, 4, 1, 3)).astype(bool),
                    name="mask")
    d = b.tensor((3,), kind, data=_constant(kind, (3,), rng), name="d", **q)
    y = b.tensor(SHAPE, kind, name="y", **q)
    b.op(OPS.SELECT_V2, [mask, x, d], [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("kind, build", [("int8", masked), ("float32", masked), ("int16", constant_mask),
                                         ("float32", constant_mask)])
def test_masks_select_what_tflite_micro_selects(kind, build, tmp_path):
    data = build(kind)
    X = rows(kind)
    want = tflite_micro(data, X, SHAPE)
    interpreted, host = _host_outputs(data, X, tmp_path, kind)
    np.testing.assert_array_equal(np.asarray(interpreted).reshape(len(X), -1).astype(want.dtype), want)
    np.testing.assert_array_equal(np.asarray(host).reshape(len(X), -1).astype(want.dtype), want)
    x = X.reshape(len(X), -1)
    picked = (want == x) | (np.isnan(want) & np.isnan(x)) if kind == "float32" else want == x
    assert 0 < picked.mean() < 1  # both branches taken


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_the_microcontrollers_select_the_same(target, kind, tmp_path):
    require_target(target)
    data = masked(kind)
    X = rows(kind)[:6] if kind == "int8" else rows(kind)[-6:]
    got = simulated_scores(target, data, X, tmp_path)
    want = tflite_micro(data, X, SHAPE)
    np.testing.assert_array_equal(got.astype(want.dtype), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m4"])
def test_a_mask_output_on_the_microcontrollers(target, tmp_path):
    require_target(target)
    data = comparison("LESS", "int8")
    X = rows("int8")[:4]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def _select_of(x_q: dict, d_q: dict) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "int8", name="x", **x_q)
    c = b.tensor((3,), "int8", data=np.asarray([1, 2, 3]), name="c", **x_q)
    flag = b.tensor(SHAPE, "bool", scale=None, name="flag")
    b.op(OPS.GREATER, [x, c], [flag])
    d = b.tensor((3,), "int8", data=np.asarray([1, 2, 3]), name="d", **d_q)
    y = b.tensor(SHAPE, "int8", name="y", **x_q)
    b.op(OPS.SELECT_V2, [flag, x, d], [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("data, problem", [
    (comparison("GREATER", "int16", same_quantisation=True), "greater: qi16.* operands"),
    (comparison("LESS", "int16", same_quantisation=True), "less: qi16.* operands"),
    (_select_of({"scale": 1.5, "zero_point": 0}, {"scale": 1.5, "zero_point": 0}), "scale 1.5 is 1 or more"),
    (_select_of({"scale": 0.05, "zero_point": 0}, {"scale": 0.04, "zero_point": 0}), "one element type and "
                                                                                     "quantisation"),
], ids=["int16 greater", "int16 less", "scale of 1.5", "x and y quantised apart"])
def test_what_tflite_micro_cannot_run_is_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*({problem})"):
        tinycc_ml.load_model(path)
