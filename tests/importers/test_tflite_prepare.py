"""The reader checks a file as tflite-micro's Prepare does, and more where tflite-micro would run on with a file
whose outputs no kernel defines: each finding of issue 49's differential campaign (files both accepted, their
outputs different) as a small model built here. Either the file is refused with one ModelFileError naming the
tensor or operator and the problem, or the interpreter and the host C equal tflite-micro on every output byte.
(tflite-micro accepts every refused file below: it copies a RESHAPE's integers under another scale, runs a
stride of 0, computes the shape the output declares, and wraps an overflowing accumulator.)"""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_models import TfliteBuilder, options, packed, schema, tflite_micro_outputs
from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tflite import load_tflite
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.models.network import NetworkModel

OP = schema.BuiltinOperator
INT32_MAX = 2**31 - 1


def write(tmp_path, data: bytes, name: str = "net"):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    return path


def refused(tmp_path, data: bytes, match: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ModelFileError, match=match) as caught:
        load_tflite(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message


def named(model, name: str):
    return next(t for t in model.subgraphs[0].tensors if t.name.decode() == name)


def rows(shape, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).integers(-128, 128, size=(8, *shape)).astype(np.int8)
    X[0], X[1] = -128, 127
    return X


def equals_tflite_micro(tmp_path, data: bytes, X: np.ndarray | None = None) -> None:
    """The interpreter and the host C compute tflite-micro's outputs, byte for byte."""
    graph = load_tflite(write(tmp_path, data))
    shape = graph.type(graph.inputs()[0]).shape
    X = rows(shape) if X is None else X
    want = tflite_micro_outputs(data, X)
    ours = run_fixed(graph, X)["scores"]
    assert ours.shape == want.shape and np.array_equal(ours, want), f"{(ours != want).sum()} bytes differ"
    require_target("host")
    result = tinycc_ml.compile(NetworkModel(graph, "net"), target="host", name="net", out_dir=tmp_path / "c")
    scores, _ = result.load().run_raw(X.reshape(len(X), -1))
    np.testing.assert_array_equal(scores, want.reshape(len(X), -1))


def conv_options(**fields):
    made = {"padding": 0, "strideW": 1, "strideH": 1, "dilationWFactor": 1, "dilationHFactor": 1, **fields}
    return options("Conv2DOptions", **made)


def conv_model(out_shape=(1, 6, 6, 3), **fields) -> bytes:
    rng = np.random.default_rng(0)
    b = TfliteBuilder()
    x = b.tensor((1, 6, 6, 2), scale=0.05, zero_point=3, name="x")
    w = b.filters(rng, (3, 3, 3, 2), 0)
    y = b.tensor(out_shape, scale=0.1, zero_point=-5, name="y")
    b.op(OP.CONV_2D, [x, w, b.bias(rng, x, w, 3)], [y], schema.BuiltinOptions.Conv2DOptions, conv_options(**fields))
    return b.finish([x], [y])


# ---------------------------------------------------------------- RESHAPE re-quantised

def reshape_model(out_scale: float, out_zero_point: int) -> bytes:
    """RESHAPE (its output quantised as given) -> FULLY_CONNECTED, which reads the RESHAPE's output's scale."""
    rng = np.random.default_rng(2)
    b = TfliteBuilder()
    x = b.tensor((1, 1, 2, 3), scale=0.05, zero_point=3, name="x")
    shape = b.tensor((2,), "int32", scale=None, data=np.array([1, 6]), name="shape")
    flat = b.tensor((1, 6), scale=out_scale, zero_point=out_zero_point, name="flat")
    b.op(OP.RESHAPE, [x, shape], [flat])
    w = b.filters(rng, (4, 6), 0, per_channel=False)
    y = b.tensor((1, 4), scale=0.1, zero_point=-5, name="y")
    b.op(OP.FULLY_CONNECTED, [flat, w, b.bias(rng, flat, w, 4)], [y], schema.BuiltinOptions.FullyConnectedOptions,
         options("FullyConnectedOptions"))
    return b.finish([x], [y])


def test_a_reshape_keeping_its_quantisation_equals_tflite_micro(tmp_path):
    equals_tflite_micro(tmp_path, reshape_model(0.05, 3))


@pytest.mark.parametrize("scale,zero_point", [(0.1, 3), (0.05, -5), (0.1, -5)])
def test_a_reshape_that_would_requantise_is_refused(tmp_path, scale, zero_point):
    """tflite-micro copies the integers and the next layer reads them at the output's scale (a reinterpretation
    no converter writes); the reader kept the input's scale and computed other outputs."""
    refused(tmp_path, reshape_model(scale, zero_point),
            r"operator 0 \(RESHAPE\) giving 'flat': .*reshape keeps its input's quantisation")


def test_a_reshape_to_a_denormal_scale_is_refused(tmp_path):
    refused(tmp_path, reshape_model(1e-40, 3), "tensor 'flat': scale 1e-40 is not a positive normal float32")


# ---------------------------------------------------------------- strides, dilations and windows of 0

@pytest.mark.parametrize("field,name", [("strideH", "stride_h"), ("strideW", "stride_w")])
def test_a_stride_left_out_of_the_file_is_0_and_refused(tmp_path, field, name):
    """The schema gives strides no default: a writer leaves a 0 out, and the reader took the absent field as 1."""
    refused(tmp_path, conv_model(**{field: 0}),
            rf"CONV_2D: {name} is 0 \(absent from the file: the schema's default\); it must be at least 1")


@pytest.mark.parametrize("field,name", [("dilationHFactor", "dilation_h_factor"),
                                        ("dilationWFactor", "dilation_w_factor")])
def test_a_dilation_of_0_is_refused(tmp_path, field, name):
    refused(tmp_path, conv_model(**{field: 0}), rf"CONV_2D: {name} is 0; it must be at least 1")


def test_left_out_dilations_are_the_schema_default_1(tmp_path):
    data = conv_model()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    assert model.subgraphs[0].operators[0].builtinOptions.dilationHFactor == 1  # not written: the default
    equals_tflite_micro(tmp_path, data)


def test_a_pool_window_of_0_is_refused(tmp_path):
    b = TfliteBuilder()
    x = b.tensor((1, 4, 4, 2), name="x")
    y = b.tensor((1, 2, 2, 2), name="y")
    b.op(OP.MAX_POOL_2D, [x], [y], schema.BuiltinOptions.Pool2DOptions,
         options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=0))
    refused(tmp_path, b.finish([x], [y]), r"MAX_POOL_2D: filter_height is 0 \(absent from the file")


def depthwise_model(depth_multiplier: int, bias_axis: int = 0) -> bytes:
    rng = np.random.default_rng(3)
    b = TfliteBuilder()
    x = b.tensor((1, 5, 5, 4), scale=0.04, zero_point=-7, name="x")
    w = b.filters(rng, (1, 3, 3, 8), 3)
    bias = b.bias(rng, x, w, 8)
    b.sub.tensors[bias].quantization.quantizedDimension = bias_axis
    y = b.tensor((1, 5, 5, 8), scale=0.08, zero_point=2, name="y")
    b.op(OP.DEPTHWISE_CONV_2D, [x, w, bias], [y], schema.BuiltinOptions.DepthwiseConv2DOptions,
         options("DepthwiseConv2DOptions", padding=0, strideW=1, strideH=1, depthMultiplier=depth_multiplier,
                 dilationWFactor=1, dilationHFactor=1))
    return b.finish([x], [y])


@pytest.mark.parametrize("multiplier", [0, 1, 4])
def test_a_depth_multiplier_other_than_the_filters_is_refused(tmp_path, multiplier):
    """tflite-micro's depthwise kernel loops over the options' multiplier, not the one the shapes make."""
    refused(tmp_path, depthwise_model(multiplier), f"DEPTHWISE_CONV_2D: depth_multiplier {multiplier}, but the "
                                                   "filter's 8 channels for the input's 4 make 2")


# ---------------------------------------------------------------- declared shapes

def fc_model(declared_units: int, units: int = 5, bias=None, zero_point: int = 3, weights=None) -> bytes:
    rng = np.random.default_rng(1)
    b = TfliteBuilder()
    x = b.tensor((1, 6), scale=0.05, zero_point=zero_point, name="x")
    if weights is None:
        w = b.filters(rng, (units, 6), 0, per_channel=False)
    else:
        w = b.tensor((units, 6), scale=0.01, data=weights)
    bias = b.bias(rng, x, w, units) if bias is None else b.tensor((units,), "int32", scale=0.0005,
                                                                  data=np.asarray(bias), name="bias")
    y = b.tensor((1, declared_units), scale=0.1, zero_point=-5, name="y")
    b.op(OP.FULLY_CONNECTED, [x, w, bias], [y], schema.BuiltinOptions.FullyConnectedOptions,
         options("FullyConnectedOptions"))
    return b.finish([x], [y])


@pytest.mark.parametrize("declared", [4, 6])
def test_a_fully_connected_output_declared_with_other_units_is_refused(tmp_path, declared):
    """tflite-micro computes the declared units (4: the first four scores, 6: one past the weights)."""
    refused(tmp_path, fc_model(declared), rf"operator 0 \(FULLY_CONNECTED\) giving 'y': the tensor declares shape "
                                          rf"\[1, {declared}\], the operator computes \[1, 5\]")


@pytest.mark.parametrize("shape", [(1, 6, 6, 2), (1, 5, 6, 3), (1, 6, 6, 3, 1), (6, 6, 3)])
def test_a_convolution_output_of_another_shape_is_refused(tmp_path, shape):
    refused(tmp_path, conv_model(out_shape=shape),
            rf"operator 0 \(CONV_2D\) giving 'y': the tensor declares shape \[{', '.join(map(str, shape))}\], the "
            r"operator computes \[1, 6, 6, 3\]")


def test_a_pool_output_of_another_shape_is_refused(tmp_path):
    b = TfliteBuilder()
    x = b.tensor((1, 4, 4, 2), name="x")
    y = b.tensor((1, 3, 3, 2), name="y")
    b.op(OP.AVERAGE_POOL_2D, [x], [y], schema.BuiltinOptions.Pool2DOptions,
         options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=2))
    refused(tmp_path, b.finish([x], [y]), r"AVERAGE_POOL_2D\) giving 'y': the tensor declares shape \[1, 3, 3, 2\], "
                                          r"the operator computes \[1, 2, 2, 2\]")


# ---------------------------------------------------------------- int32 biases near the accumulator's limits

def extreme_fc(bias_offset: int) -> bytes:
    """Input zero point -128, weights all 127 (channel 1: all -127): an input of 127 everywhere sums 6 x 127 x 255
    in products; biases ``bias_offset`` past what takes that sum exactly to INT32_MAX (channel 1: INT32_MIN)."""
    products = 6 * 127 * 255
    bias = [INT32_MAX - products + bias_offset, -INT32_MAX - 1 + products - bias_offset, 0]
    weights = np.full((3, 6), 127)
    weights[1] = -127  # the lowest sum at an input of 127
    return fc_model(3, units=3, bias=bias, zero_point=-128, weights=weights)


def test_a_bias_reaching_int32_exactly_equals_tflite_micro(tmp_path):
    X = rows((1, 6), seed=4)
    equals_tflite_micro(tmp_path, extreme_fc(0), X)


@pytest.mark.parametrize("offset", [1, 1000])
def test_a_bias_whose_sum_can_pass_int32_is_refused(tmp_path, offset):
    """tflite-micro wraps the accumulator (INT32_MAX + 1 becomes INT32_MIN: the score flips from 127 to -128);
    the interpreter raised FixedOverflow only when a row reached it, and the C wrapped (undefined behaviour)."""
    refused(tmp_path, extreme_fc(offset), r"operator 0 \(FULLY_CONNECTED\) giving 'y': channel 0's accumulator "
                                          rf"\(bias {INT32_MAX - 6 * 127 * 255 + offset}, products .*\) can pass int32")


def test_a_convolution_bias_near_int32_is_refused(tmp_path):
    data = conv_model()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    bias = model.subgraphs[0].tensors[model.subgraphs[0].operators[0].inputs[2]]
    model.buffers[bias.buffer].data = np.array([INT32_MAX, -5, 7], "<i4").view(np.uint8)
    refused(tmp_path, packed(model), r"CONV_2D\) giving 'y': channel 0's accumulator \(bias 2147483647")


# ---------------------------------------------------------------- per-channel scales along the operator's axis

def test_a_bias_naming_a_stale_quantized_dimension_is_read_along_its_only_axis(tmp_path):
    """TFLite Micro's person_detect.tflite: a depthwise bias of shape [8] whose quantisation names axis 3
    (tflite-micro never reads a bias's scales); it was refused with "8 scales on axis 3 of shape [8]"."""
    equals_tflite_micro(tmp_path, depthwise_model(2, bias_axis=3))


# ---------------------------------------------------------------- what tflite-micro's Prepare refuses (the fuzzer's)

def test_scales_without_zero_points_are_refused(tmp_path):
    """tflite-micro reads a tensor without zero points as not quantised (scale 0); the reader took zero point 0."""
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(reshape_model(0.05, 3), 0))
    model.subgraphs[0].tensors[0].quantization.zeroPoint = np.zeros(0, np.int64)
    refused(tmp_path, packed(model), "tensor 'x': scales without zero points")


def test_a_fused_relu6_beyond_int32_at_the_output_scale_is_refused(tmp_path):
    data = conv_model(fusedActivationFunction=3)
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    named(model, "y").quantization.scale = np.asarray([1e-9], np.float32)
    refused(tmp_path, packed(model), r"CONV_2D\) giving 'y': a fused RELU6 at output scale 1e-09 puts 6 beyond int32")


def test_a_fully_connected_bias_at_another_scale_is_refused(tmp_path):
    """tflite-micro's FULLY_CONNECTED refuses a bias scale 2% of the output scale away from input x weights."""
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(fc_model(5, bias=[1, 2, 3, 4, 5]), 0))
    named(model, "bias").quantization.scale = np.asarray([0.01], np.float32)  # 10% of the output scale away
    refused(tmp_path, packed(model), r"FULLY_CONNECTED\) giving 'y': bias scale 0.01 is not input scale x weight scale")


def test_a_filter_whose_quantized_dimension_does_not_hold_its_channels_is_refused(tmp_path):
    """tflite-micro's Prepare indexes the filter's shape with it (INT32_MIN: a segmentation fault, found by the
    fuzzer's tflite-micro oracle)."""
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(conv_model(), 0))
    named(model, "t1").quantization.quantizedDimension = -(2**31)
    refused(tmp_path, packed(model), r"tensor 't1': quantized_dimension -2147483648 of shape \[3, 3, 3, 2\] does not "
                                     "hold its 3 channels")


@pytest.mark.parametrize("code", [127, 9])
def test_a_quantized_bias_type_other_than_int32_is_refused(tmp_path, code):
    """The fuzzer's oracle: tflite-micro refuses an unknown type; an int8 network's biases are int32."""
    refused(tmp_path, conv_model(quantizedBiasType=code), r"CONV_2D: quantized_bias_type .* is not supported")
    refused(tmp_path, _fc_with_bias_type(code),
            r"FULLY_CONNECTED: quantized_bias_type .* is not supported")


def _fc_with_bias_type(code: int) -> bytes:
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(fc_model(5), 0))
    model.subgraphs[0].operators[0].builtinOptions.quantizedBiasType = code
    return packed(model)


def test_an_int32_quantized_bias_type_reads_as_before(tmp_path):
    equals_tflite_micro(tmp_path, conv_model(quantizedBiasType=2))
