"""UNIDIRECTIONAL_SEQUENCE_LSTM (tinycc_ml/ir/ops/network/lstm.py) against tflite-micro: int8 (int16 cell state)
and float32, a stream of calls carrying the hidden and cell states between them (TFLite's variable tensors),
cell clipping, tanh or sigmoid cell gates, batch-major and time-major; the microcontrollers too; files tflite-micro
would compute otherwise refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled
from tests.ops.single_op import tflite_micro as stream  # one interpreter: the rows are successive calls
from tests.tflite_models import TfliteBuilder, options, schema
from tinycc_ml.errors import ModelFileError


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def lstm(steps=5, features=6, units=4, kind="int8", activation=4, cell_clip=0.0, time_major=False,
         cell_scale=2.0**-11, seed=0, peephole=False, bias_reach=2000) -> bytes:
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    wide = kind == "int16"  # TFLite's 16x8 LSTM: int16 activations and hidden state (zero points 0), int64 biases
    x_scale, h_q = (0.05 / 256, (0.02 / 256, 0)) if wide else (0.05, (0.02, 3))
    shape = (steps, 1, features) if time_major else (1, steps, features)
    out_shape = (steps, 1, units) if time_major else (1, steps, units)
    if kind == "float32":
        x = b.tensor(shape, "float32", scale=None, name="x")
    else:
        x = b.tensor(shape, kind, scale=x_scale, zero_point=0 if wide else -4, name="x")
    ins = [x]
    w_scales = []
    for k in range(8):
        cols = features if k < 4 else units
        if kind == "float32":
            ins.append(b.tensor((units, cols), "float32", scale=None,
                                data=rng.normal(0, 0.5, (units, cols)).astype(np.float32)))
        else:
            w_scales.append(float(rng.uniform(0.005, 0.03)))
            ins.append(b.tensor((units, cols), "int8", scale=w_scales[-1], zero_point=0,
                                data=rng.integers(-127, 128, (units, cols))))
    ins += [-1, -1, -1]
    if peephole:
        ins[9] = b.tensor((units,), kind, scale=None if kind == "float32" else 0.01, data=np.ones(units, np.int8))
    for k in range(4):
        if kind == "float32":
            ins.append(b.tensor((units,), "float32", scale=None, data=rng.normal(0, 0.3, units).astype(np.float32)))
        else:
            reach = bias_reach * 256 if wide else bias_reach
            ins.append(b.tensor((units,), "int64" if wide else "int32", scale=np.float32(x_scale * w_scales[k]),
                                zero_point=0, data=rng.integers(-reach, reach, units)))
    ins += [-1, -1]
    if kind == "float32":
        h = b.tensor((1, units), "float32", scale=None, name="h")
        c = b.tensor((1, units), "float32", scale=None, name="c")
    else:
        h = b.tensor((1, units), kind, scale=h_q[0], zero_point=h_q[1], name="h")
        c = b.tensor((1, units), "int16", scale=cell_scale, zero_point=0, name="c")
    b.sub.tensors[h].isVariable = b.sub.tensors[c].isVariable = True
    ins += [h, c, -1, -1, -1, -1]
    y = (b.tensor(out_shape, "float32", scale=None, name="y") if kind == "float32"
         else b.tensor(out_shape, kind, scale=h_q[0], zero_point=h_q[1], name="y"))
    b.op(OPS.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [y], OPTIONS.UnidirectionalSequenceLSTMOptions,
         options("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=activation, cellClip=cell_clip,
                 timeMajor=time_major))
    return b.finish([x], [y])


def rows(kind: str, n: int, size: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "float32":
        return rng.normal(0, 1.5, (n, size)).astype(np.float32)
    if kind == "int16":
        return rng.integers(-32768, 32768, (n, size)).astype(np.int16)
    return rng.integers(-128, 128, (n, size)).astype(np.int8)


CASES = [dict(), dict(cell_clip=0.5), dict(time_major=True), dict(cell_scale=2.0**-8, seed=3),
         dict(steps=1, units=7, features=3, seed=4), dict(cell_scale=2.0**-15, seed=5)]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_int8_stream_equals_tflite_micro(case, tmp_path):
    data = lstm(**case)
    steps, features = case.get("steps", 5), case.get("features", 6)
    shape = (steps, 1, features) if case.get("time_major") else (1, steps, features)
    X = rows("int8", 12, steps * features)
    want = stream(data, X, shape)
    assert np.unique(want).size > 10
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


@pytest.mark.parametrize("case", [dict(), dict(cell_clip=0.5, seed=2), dict(time_major=True, cell_scale=2.0**-12)])
def test_16x8_stream_equals_tflite_micro(case, tmp_path):
    data = lstm(kind="int16", **case)
    shape = (5, 1, 6) if case.get("time_major") else (1, 5, 6)
    X = rows("int16", 12, 30)
    want = stream(data, X, shape)
    assert np.unique(want).size > 10
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


@pytest.mark.parametrize("case", [dict(), dict(cell_clip=0.8, time_major=True)])
def test_float_stream_within_float32_rounding_of_tflite_micro(case, tmp_path):
    data = lstm(kind="float32", **case)
    X = rows("float32", 10, 30)
    want = stream(data, X, (5, 1, 6) if case.get("time_major") else (1, 5, 6))
    model, result = compiled(data, tmp_path, precision="float")
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.load().scores(X), want, rtol=1e-5, atol=1e-6)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_carry_the_same_states(target, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend

    for kind in ("int8", "int16"):
        data = lstm(cell_clip=0.5, kind=kind)
        X = rows(kind, 4, 30, seed=2)
        (tmp_path / kind).mkdir()
        model, result = compiled(data, tmp_path / kind, target=target)
        x = model.graph.type(model.input_name).dtype
        real = (X.astype(np.float64) - x.zero_point) * x.qscales[0]
        run = get_backend(target).simulate(tmp_path / kind / target, result.output, real)
        np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(X), -1), stream(data, X, (1, 5, 6)))


@pytest.mark.parametrize("activation", [0, 6])
def test_a_cell_gate_without_tanh_is_refused_by_name(activation, tmp_path):
    path = tmp_path / "act.tflite"
    path.write_bytes(lstm(activation=activation))
    with pytest.raises(ModelFileError, match=rf"act\.tflite.*the cell gate's activation {activation}"):
        tinycc_ml.load_model(path)


def test_peepholes_are_refused_by_name(tmp_path):
    path = tmp_path / "peep.tflite"
    path.write_bytes(lstm(peephole=True))
    with pytest.raises(ModelFileError, match=r"peep\.tflite.*inputs \[9\] \(peepholes"):
        tinycc_ml.load_model(path)


def test_a_cell_scale_that_is_no_power_of_two_is_refused(tmp_path):
    path = tmp_path / "cell.tflite"
    path.write_bytes(lstm(cell_scale=0.0003))
    with pytest.raises(ModelFileError, match=r"cell\.tflite.*must be a power of two"):
        tinycc_ml.load_model(path)


def test_intermediate_tensors_of_shape_zero_are_left_alone(tmp_path):
    """Converters write the integer LSTM's intermediates as tensors of shape [0]: unread, they are not refused."""
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(lstm(), 0))
    t = schema.TensorT()
    t.shape, t.type, t.name = np.asarray([0], np.int32), schema.TensorType.INT16, b"intermediate"
    model.subgraphs[0].tensors.append(t)
    model.subgraphs[0].operators[0].intermediates = np.asarray([len(model.subgraphs[0].tensors) - 1], np.int32)
    from tests.tflite_models import packed

    path = tmp_path / "inter.tflite"
    path.write_bytes(packed(model))
    assert tinycc_ml.load_model(path).n_outputs == 20
