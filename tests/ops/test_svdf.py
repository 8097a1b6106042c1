"""SVDF (tinycc_ml/ir/ops/network/svdf.py) against tflite-micro over streams of calls (the activation state kept
between them, TFLite's variable tensor): int8 with an int16 or int8 state, float32 with its activation; the
microcontrollers too; files tflite-micro's Prepare refuses refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled
from tests.ops.single_op import tflite_micro as stream  # one interpreter: the rows are successive calls
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def svdf(kind="int8", state_kind="int16", features=10, units=4, rank=2, memory=5, activation=0, seed=0,
         bias_scale=None, state_zero_point=0, time_kind=None, bias=True) -> bytes:
    """One SVDF; ``time_kind``: the time weights' type where it is not the state's; ``bias`` False: none (-1)."""
    rng = np.random.default_rng(seed)
    filters = units * rank
    b = TfliteBuilder()
    if kind == "float32":
        x = b.tensor((1, features), "float32", scale=None, name="x")
        w = b.tensor((filters, features), "float32", scale=None,
                     data=rng.normal(0, 0.4, (filters, features)).astype(np.float32))
        t = b.tensor((filters, memory), "float32", scale=None, data=rng.normal(0, 0.4, (filters, memory))
                     .astype(np.float32))
        bias_t = b.tensor((units,), "float32", scale=None, data=rng.normal(0, 0.2, units).astype(np.float32))
        s = b.tensor((1, filters * memory), "float32", scale=None, name="state")
        y = b.tensor((1, units), "float32", scale=None, name="y")
    else:
        wide = state_kind == "int16"
        s_scale, t_scale = (2.0**-10, 2.0**-14) if wide else (0.05, 0.01)
        x = b.tensor((1, features), "int8", scale=0.05, zero_point=-2, name="x")
        w = b.tensor((filters, features), "int8", scale=0.01, zero_point=0,
                     data=rng.integers(-127, 128, (filters, features)))
        time_kind = time_kind or state_kind
        top = 32767 if time_kind == "int16" else 127
        t = b.tensor((filters, memory), time_kind, scale=t_scale, zero_point=0,
                     data=rng.integers(-top, top + 1, (filters, memory)))
        bias_t = b.tensor((units,), "int32", scale=bias_scale or float(np.float32(s_scale) * np.float32(t_scale)),
                          zero_point=0, data=rng.integers(-20000, 20000, units))
        s = b.tensor((1, filters * memory), state_kind, scale=s_scale, zero_point=state_zero_point, name="state")
        y = b.tensor((1, units), "int8", scale=0.05 if wide else 0.02, zero_point=5, name="y")
    b.sub.tensors[s].isVariable = True
    b.op(OPS.SVDF, [x, w, t, bias_t if bias else -1, s], [y], OPTIONS.SVDFOptions,
         options("SVDFOptions", rank=rank, fusedActivationFunction=activation))
    return b.finish([x], [y])


def rows(kind, n, features=10, seed=1):
    rng = np.random.default_rng(seed)
    if kind == "float32":
        return rng.normal(0, 1, (n, features)).astype(np.float32)
    return rng.integers(-128, 128, (n, features)).astype(np.int8)


@pytest.mark.parametrize("state_kind, rank, memory, zero_point", [
    ("int16", 2, 5, 0), ("int16", 1, 8, 0), ("int8", 3, 4, 0),
    ("int8", 2, 5, -7), ("int8", 1, 3, -60), ("int16", 2, 4, 300)])
def test_int8_stream_equals_tflite_micro(state_kind, rank, memory, zero_point, tmp_path):
    """Each state width with its own time weights' width, at zero point 0 and others (the state's codes are the
    clamped column plus the zero point, wrapping in the state's type, and the time sums subtract it)."""
    data = svdf(state_kind=state_kind, rank=rank, memory=memory, state_zero_point=zero_point)
    X = rows("int8", 16)
    want = stream(data, X, (1, 10))
    assert np.unique(want).size > 10
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), 1, 10)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


@pytest.mark.parametrize("activation", [0, 1, 3])
def test_float_stream_equals_tflite_micro(activation, tmp_path):
    data = svdf(kind="float32", activation=activation)
    X = rows("float32", 12)
    want = stream(data, X, (1, 10))
    model, result = compiled(data, tmp_path, precision="float")
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(result.load().scores(X), np.float32), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("state_kind, zero_point", [("int16", 0), ("int8", -60), ("int16", 300)])
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_carry_the_same_state(target, state_kind, zero_point, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend

    data = svdf(state_kind=state_kind, state_zero_point=zero_point, rank=1 if state_kind == "int8" else 2,
                memory=3 if state_kind == "int8" else 5)
    X = rows("int8", 5, seed=2)
    model, result = compiled(data, tmp_path, target=target)
    x = model.graph.type(model.input_name).dtype
    real = (X.astype(np.float64) - x.zero_point) * x.qscales[0]
    run = get_backend(target).simulate(tmp_path / target, result.output, real)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(X), -1), stream(data, X, (1, 10)))


def test_a_bias_scale_unlike_the_state_times_the_time_weights_is_refused(tmp_path):
    path = tmp_path / "bias.tflite"
    path.write_bytes(svdf(bias_scale=0.5))
    with pytest.raises(ModelFileError, match=r"bias\.tflite.*the bias's scale must be the state's times"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("state_kind, time_kind", [("int8", "int16"), ("int16", "int8")])
def test_time_weights_of_another_width_than_the_state_are_refused(state_kind, time_kind, tmp_path):
    """tflite-micro's Prepare takes either width for each, but its Eval reads the state at the time weights'
    width: a state of the other width is read past its end or half of it."""
    path = tmp_path / "mixed.tflite"
    path.write_bytes(svdf(state_kind=state_kind, time_kind=time_kind))
    with pytest.raises(ModelFileError, match=r"mixed\.tflite.*time weights of the state's width"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_an_svdf_without_a_bias_is_refused(kind, tmp_path):
    """The schema makes the bias optional, but tflite-micro reads it unconditionally (its TODO #1751): the int8
    Prepare its scale, the float Eval its data, both through a null pointer (tflite-micro crashes on such a file)."""
    path = tmp_path / "nobias.tflite"
    path.write_bytes(svdf(kind=kind, bias=False))
    with pytest.raises(ModelFileError, match=r"nobias\.tflite.*SVDF: no bias \(input 3 is -1\)"):
        tinycc_ml.load_model(path)
