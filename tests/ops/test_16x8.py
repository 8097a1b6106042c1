"""TFLite's 16x8 quantisation (int16 activations with zero point 0, int8 weights, int64 or int32 biases: TensorFlow's
EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8) against tflite-micro: every output value of the
interpreter and of the host C on rows that include the int16 extremes, the simulators' too; files that tflite-micro's
16x8 kernels would compute otherwise (zero points they ignore, an int32 bias on a depthwise layer, sums beyond the
requantisation's range) refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    OPTIONS,
    binary_model,
    compiled,
    random_rows,
    simulated_scores,
    tflite_micro,
    unary_model,
)
from tests.tflite_builder import NetBuilder
from tests.tflite_models import packed, unpacked
from tinycc_ml.errors import ModelFileError


def int16_rows(rng, n: int, shape) -> np.ndarray:
    """n int16 rows: the first all -32768, all 32767, alternating extremes; the rest uniform."""
    size = int(np.prod(shape))
    extremes = np.stack([np.full(size, -32768), np.full(size, 32767), np.resize([-32768, 32767], size)])
    return np.concatenate([extremes, rng.integers(-32768, 32768, size=(n, size))]).astype(np.int16)


def conv_stack(seed: int, bias_bits: int = 64) -> tuple[bytes, tuple[int, ...]]:
    """CONV_2D (stride 2, relu6) -> DEPTHWISE_CONV_2D (multiplier 2, dilation 2) -> MAX_POOL_2D -> ADD (of the
    pool and itself through a conv) -> AVERAGE_POOL_2D -> RESHAPE -> FULLY_CONNECTED (relu) -> SOFTMAX."""
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=bias_bits)
    x = net.input((9, 8, 3))
    y = net.conv(x, 4, (3, 3), stride=(2, 2), padding="same", activation="relu6")
    if bias_bits == 64:  # TFLite's 16x8 depthwise kernel reads int64 biases only
        y = net.depthwise(y, 2, (3, 3), dilation=(2, 2), padding="same")
    y = net.max_pool(y, (2, 2), (1, 1), padding="same")
    y = net.add(y, net.conv(y, net.shapes[y][-1], (1, 1), per_channel=False))
    y = net.average_pool(y, (2, 2), (2, 2), padding="same")
    y = net.fc(net.flatten(y), 6, activation="relu")
    return net.finish(net.softmax(y)), (1, 9, 8, 3)


def dense_stack(seed: int, bias_bits: int) -> tuple[bytes, tuple[int, ...]]:
    """FULLY_CONNECTED -> FULLY_CONNECTED (relu6): the scores before any softmax (a regression's output)."""
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=bias_bits)
    x = net.input((20,))
    return net.finish(net.fc(net.fc(x, 12, activation="relu6"), 3)), (1, 20)


MODELS = [(conv_stack, 0, 64), (conv_stack, 1, 32), (conv_stack, 2, 64), (dense_stack, 3, 64), (dense_stack, 4, 32)]


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("make, seed, bias_bits", MODELS)
def test_interpreter_and_host_c_equal_tflite_micro(make, seed, bias_bits, tmp_path):
    data, shape = make(seed, bias_bits)
    X = int16_rows(np.random.default_rng(seed), 120, shape)
    want = tflite_micro(data, X, shape)
    assert np.unique(want).size > 20  # outputs spread over the int16 range, where rounding would show
    model, result = compiled(data, tmp_path)
    assert model.reference == "int16" and result.precision == "int16"
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    scores, _ = result.load().run_raw(X)
    assert scores.dtype == np.int16
    np.testing.assert_array_equal(scores, want)


def test_real_rows_quantise_to_int16_with_the_input_scale(tmp_path):
    data, shape = dense_stack(5, 64)
    model, result = compiled(data, tmp_path)
    x = model.graph.type(model.input_name).dtype
    assert x.bits == 16 and x.zero_point == 0
    rows = np.random.default_rng(0).normal(0, 2000 * x.qscales[0], size=(40, 20))
    q = model.quantise_input(rows)
    np.testing.assert_array_equal(q, np.clip(np.round(rows.astype(np.float32) / x.qscales[0]), -32768, 32767))
    np.testing.assert_array_equal(result.load().quantise(rows), q)
    np.testing.assert_array_equal(result.load().run_raw(q)[0], tflite_micro(data, q.astype(np.int16), shape))


@pytest.mark.parametrize("bias_bits", [64, 32])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_simulators_equal_tflite_micro(target, bias_bits, tmp_path):
    require_target(target)
    data, shape = conv_stack(6, bias_bits)
    X = int16_rows(np.random.default_rng(6), 5, shape)
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, shape))


def edited(data: bytes, edit) -> bytes:
    """The file with ``edit(subgraph, buffers)`` applied."""
    model = unpacked(data)
    edit(model.subgraphs[0], model.buffers)
    return packed(model)


def first(sub, op_code_index: int):
    return next(op for op in sub.operators if op.opcodeIndex == op_code_index)


def test_a_convolution_zero_point_tflite_micro_ignores_is_refused(tmp_path):
    data, _ = conv_stack(0, 64)

    def nonzero_output_zero_point(sub, buffers):
        sub.tensors[first(sub, 0).outputs[0]].quantization.zeroPoint = [7]
    path = tmp_path / "zp.tflite"
    path.write_bytes(edited(data, nonzero_output_zero_point))
    with pytest.raises(ModelFileError, match="zero point 0.*16x8 kernel adds none"):
        compiled(path.read_bytes(), tmp_path, "zp")


def test_an_int32_bias_on_a_16x8_depthwise_layer_is_refused(tmp_path):
    data, _ = conv_stack(0, 64)

    def narrow_bias(sub, buffers):
        bias = sub.tensors[first(sub, 1).inputs[2]]
        values = np.frombuffer(bytes(buffers[bias.buffer].data), "<i8")
        bias.type = 2  # INT32: tflite-micro's 16x8 depthwise kernel would read its bytes as int64 ones
        buffers[bias.buffer].data = values.astype("<i4").view(np.uint8)
    with pytest.raises(ModelFileError, match="bias must be qi64"):
        compiled(edited(data, narrow_bias), tmp_path, "narrow")


def test_sums_beyond_the_16x8_requantisation_range_are_refused(tmp_path):
    data, _ = dense_stack(3, 64)

    def huge_bias(sub, buffers):
        bias = sub.tensors[sub.operators[0].inputs[2]]
        buffers[bias.buffer].data = np.full(12, 1 << 50, dtype="<i8").view(np.uint8)
    with pytest.raises(ModelFileError, match=r"can pass \+-2\^47"):
        compiled(edited(data, huge_bias), tmp_path, "huge")


def test_an_int16_softmax_at_another_scale_is_refused(tmp_path):
    data, _ = conv_stack(0, 64)

    def rescaled(sub, buffers):
        sub.tensors[sub.outputs[0]].quantization.scale = [1 / 256]
    with pytest.raises(ModelFileError, match="int16 softmax gives scale 1/32768"):
        compiled(edited(data, rescaled), tmp_path, "softmax")


Q16 = (0.0004, 0)  # TFLite's int16 activations: symmetric
ELEMENTWISE = {  # one-operator int16 files: (bytes, input shape)
    "MUL broadcast": (lambda: binary_model(OPS.MUL, (1, 4, 6), (1, 1, 6), (1, 4, 6), "int16", Q16, (0.0003, 0),
                                           (0.00002, 0)), (1, 4, 6)),
    "SUB": (lambda: binary_model(OPS.SUB, (1, 4, 6), (1, 4, 6), (1, 4, 6), "int16", Q16, (0.0003, 0),
                                 (0.0006, 0)), (1, 4, 6)),
    "MAXIMUM": (lambda: binary_model(OPS.MAXIMUM, (1, 4, 6), (1, 1, 6), (1, 4, 6), "int16", Q16, Q16, Q16),
                (1, 4, 6)),
    "MINIMUM": (lambda: binary_model(OPS.MINIMUM, (1, 4, 6), (1, 4, 6), (1, 4, 6), "int16", Q16, Q16, Q16),
                (1, 4, 6)),
    "RELU": (lambda: unary_model(OPS.RELU, (1, 4, 6), "int16", Q16, (0.0003, 0)), (1, 4, 6)),
    "RELU6": (lambda: unary_model(OPS.RELU6, (1, 4, 6), "int16", Q16, Q16), (1, 4, 6)),
    "LEAKY_RELU": (lambda: unary_model(OPS.LEAKY_RELU, (1, 4, 6), "int16", Q16, (0.0003, 0),
                                       OPTIONS.LeakyReluOptions, {"alpha": 0.2}, "LeakyReluOptions"), (1, 4, 6)),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_int16_elementwise_ops_equal_tflite_micro(name, tmp_path):
    make, shape = ELEMENTWISE[name]
    data = make()
    X = random_rows(np.random.default_rng(9), 80, int(np.prod(shape)), "int16")
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


def mean_model(shape, in_scale=0.01, out_scale=0.004) -> bytes:
    from tests.tflite_models import TfliteBuilder, options

    b = TfliteBuilder()
    x = b.tensor(shape, "int16", scale=in_scale, zero_point=0, name="x")
    axes = b.tensor((2,), "int32", scale=None, data=np.asarray([1, 2], dtype=np.int32))
    y = b.tensor((1, 1, 1, shape[-1]), "int16", scale=out_scale, zero_point=0, name="y")
    b.op(OPS.MEAN, [x, axes], [y], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=True))
    return b.finish([x], [y])


@pytest.mark.parametrize("out_scale", [0.004, 0.01, 0.05])
def test_int16_mean_equals_tflite_micro(out_scale, tmp_path):
    shape = (1, 5, 6, 8)
    data = mean_model(shape, out_scale=out_scale)
    X = int16_rows(np.random.default_rng(8), 40, shape)
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


def test_an_int16_mean_whose_int32_sums_can_wrap_is_refused(tmp_path):
    path = tmp_path / "wide.tflite"
    path.write_bytes(mean_model((1, 200, 200, 1)))
    with pytest.raises(ModelFileError, match=r"wide\.tflite.*a mean of 40000 int16 values: TFLite's int32 sums can "
                                             r"wrap"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("bias_type", [0, 2])
def test_a_16x8_layer_without_bias_sums_as_its_quantized_bias_type_says(bias_type, tmp_path):
    """tflite-micro's bias-less 16x8 CONV_2D and FULLY_CONNECTED take the int32 path (int32 sums, the int32
    requantisation) when quantized_bias_type is INT32 (2), else the int64 one: the two round differently."""
    data, shape = conv_stack(7, 32)

    def no_bias(sub, buffers):
        for op in sub.operators:
            if len(op.inputs) == 3 and hasattr(op.builtinOptions, "quantizedBiasType"):
                op.inputs = [*op.inputs[:2], -1]
                op.builtinOptions.quantizedBiasType = bias_type
    data = edited(data, no_bias)
    X = int16_rows(np.random.default_rng(7), 60, shape)
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)
    other = edited(data, lambda sub, buffers: [setattr(op.builtinOptions, "quantizedBiasType", 2 - bias_type)
                                               for op in sub.operators
                                               if hasattr(op.builtinOptions, "quantizedBiasType")])
    assert not np.array_equal(tflite_micro(other, X, shape), want)  # the type decides the arithmetic
