"""The TFLite operators of issue 35 item 2 (MAX_POOL_2D, PAD, MEAN, RELU, RELU6) in small int8 models built
here: the reader's lowering run by the interpreter equals tflite-micro (its reference kernels) on every output
byte, and the host C equals the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_models import (
    TfliteBuilder,
    options,
    packed,
    pool_net,
    schema,
    tflite_micro_outputs,
    unpacked,
)
from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tflite import load_tflite
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.models.network import NetworkModel

OP = schema.BuiltinOperator


def pool_model(rng, code: int, padding: int, activation: int, same_quantisation: bool = True) -> bytes:
    b = TfliteBuilder()
    h, w, c = (int(v) for v in rng.integers(3, 9, size=3))
    scale, zero_point = float(rng.uniform(0.01, 0.1)), int(rng.integers(-100, 100))
    x = b.tensor((1, h, w, c), scale=scale, zero_point=zero_point, name="x")
    fh, fw = (int(v) for v in rng.integers(1, 4, size=2))
    sh, sw = (int(v) for v in rng.integers(1, 3, size=2))
    if padding == 0:
        oh, ow = -(-h // sh), -(-w // sw)
    else:
        oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
    y = b.tensor((1, oh, ow, c), scale=scale, zero_point=zero_point, name="y")
    b.op(code, [x], [y], schema.BuiltinOptions.Pool2DOptions,
         options("Pool2DOptions", padding=padding, strideW=sw, strideH=sh, filterWidth=fw, filterHeight=fh,
                 fusedActivationFunction=activation))
    return b.finish([x], [y])


def pad_model(rng) -> bytes:
    b = TfliteBuilder()
    h, w, c = (int(v) for v in rng.integers(2, 6, size=3))
    pads = rng.integers(0, 3, size=(4, 2))
    pads[0] = 0
    scale, zero_point = float(rng.uniform(0.01, 0.1)), int(rng.integers(-100, 100))
    x = b.tensor((1, h, w, c), scale=scale, zero_point=zero_point, name="x")
    paddings = b.tensor((4, 2), "int32", scale=None, data=pads, name="paddings")
    shape = np.array([1, h, w, c]) + pads.sum(axis=1)
    y = b.tensor(shape, scale=scale, zero_point=zero_point, name="y")
    b.op(OP.PAD, [x, paddings], [y], schema.BuiltinOptions.PadOptions, options("PadOptions"))
    return b.finish([x], [y])


def mean_model(rng, keep_dims: bool) -> bytes:
    b = TfliteBuilder()
    h, w, c = (int(v) for v in rng.integers(1, 12, size=3))
    x = b.tensor((1, h, w, c), scale=float(rng.uniform(0.01, 0.1)), zero_point=int(rng.integers(-100, 100)),
                 name="x")
    axes = b.tensor((2,), "int32", scale=None, data=np.array([1, 2]), name="axes")
    y = b.tensor((1, 1, 1, c) if keep_dims else (1, c), scale=float(rng.uniform(0.005, 0.1)),
                 zero_point=int(rng.integers(-100, 100)), name="y")
    b.op(OP.MEAN, [x, axes], [y], schema.BuiltinOptions.ReducerOptions, options("ReducerOptions", keepDims=keep_dims))
    return b.finish([x], [y])


def activation_model(rng, code: int) -> bytes:
    """A 1x1 convolution (so the activation reads a computed tensor), then RELU or RELU6."""
    b = TfliteBuilder()
    h, w, c = (int(v) for v in rng.integers(2, 6, size=3))
    x = b.tensor((1, h, w, c), scale=0.05, zero_point=int(rng.integers(-50, 50)), name="x")
    wt = b.filters(rng, (c, 1, 1, c), 0)
    conv_scale, conv_zero = float(rng.uniform(0.02, 0.1)), int(rng.integers(-30, 30))
    conv = b.tensor((1, h, w, c), scale=conv_scale, zero_point=conv_zero, name="conv")
    b.op(OP.CONV_2D, [x, wt, b.bias(rng, x, wt, c)], [conv], schema.BuiltinOptions.Conv2DOptions,
         options("Conv2DOptions", padding=0, strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1))
    if code == OP.RELU6:  # TFLite's int8 RELU6 keeps the input's quantisation
        y = b.tensor((1, h, w, c), scale=conv_scale, zero_point=conv_zero, name="y")
    else:
        y = b.tensor((1, h, w, c), scale=float(rng.uniform(0.01, 0.1)), zero_point=int(rng.integers(-128, 0)),
                     name="y")
    b.op(code, [conv], [y])
    return b.finish([x], [y])


def concatenation_model(rng, axis: int) -> bytes:
    """Two 1x1 convolutions of the input and the first's RELU6 (one quantisation, as TFLite's int8 kernel
    needs), concatenated along ``axis``."""
    b = TfliteBuilder()
    h, w, c = (int(v) for v in rng.integers(2, 5, size=3))
    x = b.tensor((1, h, w, c), scale=0.05, zero_point=int(rng.integers(-50, 50)), name="x")
    scale, zero_point = float(rng.uniform(0.02, 0.1)), int(rng.integers(-30, 30))
    parts = []
    for k, out_c in enumerate((int(rng.integers(1, 4)), int(rng.integers(1, 4)))):
        if axis % 4 != 3:
            out_c = 2
        wt = b.filters(rng, (out_c, 1, 1, c), 0)
        conv = b.tensor((1, h, w, out_c), scale=scale, zero_point=zero_point, name=f"conv{k}")
        b.op(OP.CONV_2D, [x, wt, b.bias(rng, x, wt, out_c)], [conv], schema.BuiltinOptions.Conv2DOptions,
             options("Conv2DOptions", padding=0, strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1))
        parts.append(conv)
    relu6 = b.tensor(b.sub.tensors[parts[0]].shape, scale=scale, zero_point=zero_point, name="relu6")
    b.op(OP.RELU6, [parts[0]], [relu6])
    parts.append(relu6)
    shape = np.array(b.sub.tensors[parts[0]].shape)
    shape[axis % 4] = sum(int(b.sub.tensors[p].shape[axis % 4]) for p in parts)
    y = b.tensor(shape, scale=scale, zero_point=zero_point, name="y")
    b.op(OP.CONCATENATION, parts, [y], schema.BuiltinOptions.ConcatenationOptions,
         options("ConcatenationOptions", axis=axis))
    return b.finish([x], [y])


def models():
    for seed in range(4):
        rng = np.random.default_rng(seed)
        yield f"max_pool{seed}", pool_model(rng, OP.MAX_POOL_2D, seed % 2, (0, 1, 3, 0)[seed])
        yield f"pad{seed}", pad_model(rng)
        yield f"mean{seed}", mean_model(rng, bool(seed % 2))
        yield f"relu{seed}", activation_model(rng, OP.RELU)
        yield f"relu6_{seed}", activation_model(rng, OP.RELU6)
    yield "pool_net", pool_net()
    for axis in (3, -1, 1, 2):
        yield f"concatenation_axis{axis}", concatenation_model(np.random.default_rng(axis + 10), axis)


CASES = list(models())


def load(tmp_path, name: str, data: bytes):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    return load_tflite(path)


def rows(shape, seed: int) -> np.ndarray:
    X = np.random.default_rng(100 + seed).integers(-128, 128, size=(6, *shape)).astype(np.int8)
    X[0], X[1] = -128, 127
    return X


@pytest.mark.parametrize("name,data", CASES, ids=[n for n, _ in CASES])
def test_the_interpreter_equals_tflite_micro_on_every_byte(tmp_path, name, data):
    graph = load(tmp_path, name, data)
    X = rows(graph.type(graph.inputs()[0]).shape, len(name))
    ours = run_fixed(graph, X)["scores"]
    want = tflite_micro_outputs(data, X)
    assert ours.shape == want.shape
    assert np.array_equal(ours, want), f"{name}: {(ours != want).sum()} of {ours.size} bytes differ"
    assert parse_graph(print_graph(graph)).structurally_equal(graph)  # the text form round trip


@pytest.mark.parametrize("name,data", CASES, ids=[n for n, _ in CASES])
def test_the_host_c_equals_the_interpreter(tmp_path, name, data):
    require_target("host")
    model = NetworkModel(load(tmp_path, name, data), name)
    X = rows(model.input_shape, len(name)).reshape(6, -1)
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path / "c")
    scores, _ = result.load().run_raw(X)
    want = model.run_int8(X.reshape(len(X), *model.input_shape)).reshape(len(X), -1)
    np.testing.assert_array_equal(scores, want)


def test_a_mean_over_other_axes_is_quantized_mean_or_sum(tmp_path):
    """Refused before; now TFLite Micro's QuantizedMeanOrSum (tests/ops/test_elementwise_tflite.py: every type)."""
    from tests.tflite_builder import tflm_raw_outputs

    b = TfliteBuilder()
    x = b.tensor((1, 4, 4, 3), name="x")
    axes = b.tensor((1,), "int32", scale=None, data=np.array([3]), name="axes")
    y = b.tensor((1, 4, 4), name="y")
    b.op(OP.MEAN, [x, axes], [y], schema.BuiltinOptions.ReducerOptions, options("ReducerOptions"))
    data = b.finish([x], [y])
    load(tmp_path, "m", data)
    model = tinycc_ml.load_model(tmp_path / "m.tflite")
    X = np.random.default_rng(1).integers(-128, 128, size=(4, 48)).astype(np.int8)
    want = tflm_raw_outputs(data, [r.reshape(1, 4, 4, 3) for r in X]).reshape(4, -1)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(4, 1, 4, 4, 3)).reshape(4, -1), want)


def test_padding_that_is_not_a_constant_is_refused(tmp_path):
    b = TfliteBuilder()
    x = b.tensor((1, 4, 4, 3), name="x")
    paddings = b.tensor((4, 2), "int32", scale=None, name="paddings")
    y = b.tensor((1, 4, 4, 3), name="y")
    b.op(OP.PAD, [x, paddings], [y], schema.BuiltinOptions.PadOptions, options("PadOptions"))
    with pytest.raises(ModelFileError, match="PAD: paddings 'paddings' must be a constant int32 tensor"):
        load(tmp_path, "m", b.finish([x], [y]))


def test_relu6_that_requantises_is_refused(tmp_path):
    data = activation_model(np.random.default_rng(0), OP.RELU6)
    model = unpacked(data)
    model.subgraphs[0].tensors[-1].quantization.scale = np.asarray([0.5], np.float32)
    with pytest.raises(ModelFileError, match="relu6 keeps the input's quantisation"):
        load(tmp_path, "m", packed(model))
