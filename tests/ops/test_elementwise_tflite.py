"""The operators converted Keras models brought in (tests/importers/test_keras_zoo.py found them), each on its own
against tflite-micro over every int8 input or wide random rows: quantised ABS and RSQRT
(tinycc_ml/ir/ops/network/quantised_unary.py), ELU (activations.py's TFLite kernel), SQUARED_DIFFERENCE
(squared_difference.py), MEAN over any axes (reduce.py), ADD with broadcasting, QUANTIZE of a float32 tensor inside a
network (quantize.py), FULLY_CONNECTED with per-channel weights and keep_num_dims."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, random_rows, simulated_scores, tflite_micro, unary_model
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import DataError

SHAPE = (1, 4, 4, 16)  # 256 elements: every int8 value once in the first row


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def every_int8(n: int = 4) -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.concatenate([np.arange(-128, 128, dtype=np.int8)[None], rng.integers(-128, 128, size=(n, 256))]
                          ).astype(np.int8)


def _equal(data: bytes, X: np.ndarray, shape, tmp_path, kind: str = "int8") -> np.ndarray:
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    if kind == "float32":  # the float interpreter sums in float64 (within 1e-5); the C in TFLite Micro's float32
        np.testing.assert_allclose(np.asarray(model.scores(X)).reshape(len(X), -1), want, rtol=1e-5, atol=1e-6)
        got = [result.load().scores(X)]
    else:
        got = [model.run_quantised(X.reshape(len(X), *shape)), result.load().run_raw(X)[0]]
    for g in got:
        np.testing.assert_array_equal(np.asarray(g).reshape(len(X), -1).astype(want.dtype), want)
    return want


@pytest.mark.parametrize("code, in_q, out_q", [
    (OPS.ABS, (0.05, -3), (0.05, -3)), (OPS.ABS, (0.05, -3), (0.03, -128)),
    (OPS.RSQRT, (0.02, -128), (0.1, -100)), (OPS.RSQRT, (0.3, -128), (0.01, -128)),
], ids=["abs same scale", "abs rescaled", "rsqrt", "rsqrt coarse input"])
def test_quantised_abs_and_rsqrt_of_every_int8(code, in_q, out_q, tmp_path):
    """Every int8 input (RSQRT: zero point -128, so that none is negative, which stops tflite-micro)."""
    data = unary_model(code, SHAPE, in_q=in_q, out_q=out_q)
    want = _equal(data, every_int8(), SHAPE, tmp_path)
    assert np.unique(want).size > 20


def test_a_negative_rsqrt_input_is_reported_as_tflite_micro_stops(tmp_path):
    """A code below the input zero point: tflite-micro's Invoke fails; the interpreter raises DataError naming the
    row and the code, the host C gives a defined result and its status reports it (DataError from predict)."""
    data = unary_model(OPS.RSQRT, SHAPE, in_q=(0.02, -3), out_q=(0.1, -100))
    X = np.full((3, 256), 5, np.int8)
    X[1, 7] = -4
    with pytest.raises(RuntimeError):
        tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    with pytest.raises(DataError, match=r"row 1: input code -4 is below the zero point -3.*RSQRT"):
        model.run_quantised(X.reshape(3, *SHAPE))
    build = result.load()
    with pytest.raises(DataError, match=r"row 1 holds a value where TFLite Micro.s Invoke stops"):
        build.run_raw(X)
    np.testing.assert_array_equal(build.run_raw(X[[0, 2]])[0].reshape(2, -1), tflite_micro(data, X[[0, 2]], SHAPE))


def test_quantised_abs_of_int16(tmp_path):
    data = unary_model(OPS.ABS, SHAPE, "int16", in_q=(0.05 / 256, 0), out_q=(0.03 / 256, 0))
    _equal(data, random_rows(np.random.default_rng(2), 6, 256, "int16"), SHAPE, tmp_path, "int16")


@pytest.mark.parametrize("in_q, out_q", [((0.05, 10), (0.04, -60)), ((0.2, -128), (0.1, -20))])
def test_elu_of_every_int8_and_float(in_q, out_q, tmp_path):
    data = unary_model(OPS.ELU, SHAPE, in_q=in_q, out_q=out_q)
    _equal(data, every_int8(), SHAPE, tmp_path)
    small = (1, 4, 4, 4)  # tflite-micro's Python interpreter has no arena for 256 floats and ELU's table
    data = unary_model(OPS.ELU, small, "float32", in_q=(None, 0), out_q=(None, 0))
    X = np.random.default_rng(3).normal(0, 3, size=(6, 64)).astype(np.float32)
    (tmp_path / "float").mkdir()
    _equal(data, X, small, tmp_path / "float", "float32")


def squared_difference(kind: str, b_shape=(16,)) -> bytes:
    rng = np.random.default_rng(9)
    q = {"int8": [(0.05, -3), (0.04, 5), (0.02, -128)], "int16": [(0.05 / 256, 0), (0.04 / 256, 0), (0.02 / 128, 0)],
         "float32": [(None, 0)] * 3, "int32": [(None, 0)] * 3}[kind]
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=q[0][0], zero_point=q[0][1], name="x")
    data = (rng.normal(0, 2, size=b_shape).astype(np.float32) if kind == "float32"
            else rng.integers(-100, 100, size=b_shape))
    c = b.tensor(b_shape, kind, scale=q[1][0], zero_point=q[1][1], data=data, name="c")
    y = b.tensor(SHAPE, kind, scale=q[2][0], zero_point=q[2][1], name="y")
    b.op(OPS.SQUARED_DIFFERENCE, [x, c], [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "int16", "float32", "int32"])
def test_squared_difference(kind, tmp_path):
    rng = np.random.default_rng(4)
    X = (rng.normal(0, 3, size=(6, 256)).astype(np.float32) if kind == "float32"
         else rng.integers(-40000, 40000, size=(6, 256)).astype(np.int32) if kind == "int32"
         else random_rows(rng, 6, 256, kind))
    want = _equal(squared_difference(kind), X, SHAPE, tmp_path, kind)
    assert np.unique(want).size > 20


def mean(kind: str, axes, keep: bool, out_shape) -> bytes:
    q = {"int8": (0.05, -3), "int16": (0.05 / 256, 0), "float32": (None, 0)}[kind]
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=q[0], zero_point=q[1], name="x")
    a = b.tensor((len(axes),), "int32", scale=None, data=np.asarray(axes, dtype=np.int32), name="axes")
    y = b.tensor(out_shape, kind, scale=None if q[0] is None else q[0] / 2, zero_point=q[1], name="y")
    b.op(OPS.MEAN, [x, a], [y], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=keep))
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "int16", "float32"])
@pytest.mark.parametrize("axes, keep, out_shape", [([3], True, (1, 4, 4, 1)), ([1, 3], False, (1, 4)),
                                                  ([-1], False, (1, 4, 4))])
def test_mean_over_any_axes(kind, axes, keep, out_shape, tmp_path):
    rng = np.random.default_rng(6)
    X = rng.normal(0, 3, size=(6, 256)).astype(np.float32) if kind == "float32" else random_rows(rng, 6, 256, kind)
    _equal(mean(kind, axes, keep, out_shape), X, SHAPE, tmp_path, kind)


def broadcast_add(kind: str, shape=SHAPE) -> bytes:
    """x (1, 4, 4, 16) + a computed (1, 4, 1, 1) mean + a constant scalar."""
    q = {"int8": (0.05, -3), "float32": (None, 0)}[kind]
    b = TfliteBuilder()
    x = b.tensor(shape, kind, scale=q[0], zero_point=q[1], name="x")
    a = b.tensor((2,), "int32", scale=None, data=np.asarray([2, 3], dtype=np.int32), name="axes")
    m = b.tensor((1, 4, 1, 1), kind, scale=q[0], zero_point=q[1], name="m")
    b.op(OPS.MEAN, [x, a], [m], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=True))
    s = b.tensor(shape, kind, scale=None if q[0] is None else 0.08, zero_point=q[1], name="s")
    b.op(OPS.ADD, [x, m], [s], OPTIONS.AddOptions, options("AddOptions"))
    c = b.tensor((), kind, scale=q[0], zero_point=q[1], name="c",
                 data=np.asarray(np.float32(0.7) if kind == "float32" else np.int8(30)))
    y = b.tensor(shape, kind, scale=None if q[0] is None else 0.1, zero_point=q[1], name="y")
    b.op(OPS.ADD, [c, s], [y], OPTIONS.AddOptions, options("AddOptions"))
    return b.finish([x], [y])


def quantize_inside(shape=SHAPE) -> bytes:
    """int8 x -> DEQUANTIZE -> float32 TANH -> QUANTIZE -> int8: a float island inside an int8 network."""
    b = TfliteBuilder()
    x = b.tensor(shape, "int8", scale=0.05, zero_point=-3, name="x")
    f = b.tensor(shape, "float32", scale=None, name="f")
    b.op(OPS.DEQUANTIZE, [x], [f])
    t = b.tensor(shape, "float32", scale=None, name="t")
    b.op(OPS.TANH, [f], [t])
    y = b.tensor(shape, "int8", scale=1 / 128, zero_point=0, name="y")
    b.op(OPS.QUANTIZE, [t], [y])
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_add_broadcasts(kind, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.normal(0, 3, size=(6, 256)).astype(np.float32) if kind == "float32" else random_rows(rng, 6, 256)
    _equal(broadcast_add(kind), X, SHAPE, tmp_path, kind)


def test_quantize_of_a_float_tensor_inside_a_network(tmp_path):
    want = _equal(quantize_inside(), every_int8(), SHAPE, tmp_path)
    assert np.unique(want).size > 50


def fully_connected(kind: str, keep_num_dims: bool) -> bytes:
    """(1, 4, 16) -> FULLY_CONNECTED with per-channel weight scales -> (4, 6) or, keep_num_dims, (1, 4, 6)."""
    rng = np.random.default_rng(8)
    b = TfliteBuilder()
    q = (0.05, -3) if kind == "int8" else (0.05 / 256, 0)
    x = b.tensor((1, 4, 16), kind, scale=q[0], zero_point=q[1], name="x")
    scales = rng.uniform(0.002, 0.03, size=6)
    w = b.tensor((6, 16), "int8", scale=scales, zero_point=0, data=rng.integers(-127, 128, size=(6, 16)), name="w")
    bias_bits = "int32" if kind == "int8" else "int64"
    bias = b.tensor((6,), bias_bits, scale=scales * q[0], zero_point=0, data=rng.integers(-2000, 2000, size=6),
                    name="bias")
    out = (1, 4, 6) if keep_num_dims else (4, 6)
    y = b.tensor(out, kind, scale=0.1 if kind == "int8" else 0.1 / 256, zero_point=-4 if kind == "int8" else 0,
                 name="y")
    b.op(OPS.FULLY_CONNECTED, [x, w, bias], [y], OPTIONS.FullyConnectedOptions,
         options("FullyConnectedOptions", keepNumDims=keep_num_dims))
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "int16"])
@pytest.mark.parametrize("keep_num_dims", [False, True])
def test_per_channel_fully_connected(kind, keep_num_dims, tmp_path):
    X = random_rows(np.random.default_rng(9), 8, 64, kind)
    want = _equal(fully_connected(kind, keep_num_dims), X, (1, 4, 16), tmp_path, kind)
    assert np.unique(want).size > 20


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_agree(target, tmp_path):
    require_target(target)
    cases = [(unary_model(OPS.RSQRT, SHAPE, in_q=(0.02, -128), out_q=(0.1, -100)), SHAPE),
             (squared_difference("int8"), SHAPE), (quantize_inside((1, 4, 4, 4)), (1, 4, 4, 4)),
             (broadcast_add("int8", (1, 4, 4, 4)), (1, 4, 4, 4)),
             (fully_connected("int8", True), (1, 4, 16)), (mean("int8", [3], True, (1, 4, 4, 1)), SHAPE)]
    for k, (data, shape) in enumerate(cases):
        X = every_int8(2)[:, :int(np.prod(shape))]
        (tmp_path / str(k)).mkdir()
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / str(k)),
                                      tflite_micro(data, X, shape))


def test_log_softmax_at_float(tmp_path):
    """TFLite Micro's float LOG_SOFTMAX (max, the sum of exps, its log): equal on the host, whose expf and logf are
    the C library tflite-micro runs with (its int8 kernel: tests/ops/test_log_softmax.py)."""
    data = unary_model(OPS.LOG_SOFTMAX, (1, 4, 16), "float32", in_q=(None, 0), out_q=(None, 0))
    X = np.random.default_rng(5).normal(0, 4, size=(8, 64)).astype(np.float32)
    _equal(data, X, (1, 4, 16), tmp_path, "float32")
