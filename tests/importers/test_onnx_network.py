"""ONNX convolutional networks (importers/onnx_network.py, onnx_data.py) quantised to int8 by the project
(models/network_quantise.py): the float graph agrees with a reference computed without tinycc-ml (a numpy
forward pass written here, and onnxruntime), the int8 interpreter stays within its quantisation's
tolerance of it, and the host C equals the int8 interpreter on every byte. Hostile files (external data
outside the folder, missing or short, bad offsets, huge shapes, non-finite weights) give one
ModelFileError each and write nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.models.network import NetworkModel

onnx = pytest.importorskip("onnx")  # the [onnx] extra; CI installs it (dev extra)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "sensor_cnn.onnx"
RNG = np.random.default_rng(7)


def example_dataset():
    spec = importlib.util.spec_from_file_location("sensor_cnn_dataset", REPO / "examples" / "sensor_cnn" / "dataset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- the PyTorch fixture


def numpy_forward(path: Path, X: np.ndarray) -> np.ndarray:
    """The fixture's network (examples/sensor_cnn: Conv1d(3, 8, 5, stride 2, pad 2) [BatchNorm folded by the
    exporter], ReLU, MaxPool1d(2), Conv1d(8, 8, 3, pad 1), ReLU, mean over time, Linear(8, 4)) in float64,
    its weights read by onnx's own external-data loader."""
    proto = onnx.load(str(path))  # onnx's reader, with the external data
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in proto.graph.initializer}
    convs = [n for n in proto.graph.node if n.op_type == "Conv"]
    (gemm,) = [n for n in proto.graph.node if n.op_type == "Gemm"]

    def conv1d(x, w, b, pad, stride):  # x (n, C, L), w (O, C, K)
        padded = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
        length = (padded.shape[2] - w.shape[2]) // stride + 1
        out = np.zeros((len(x), w.shape[0], length))
        for k in range(w.shape[2]):
            out += np.einsum("ncl,oc->nol", padded[:, :, k:k + (length - 1) * stride + 1:stride], w[:, :, k])
        return out + b[None, :, None]

    h = np.maximum(conv1d(X, weights[convs[0].input[1]], weights[convs[0].input[2]], 2, 2), 0)
    h = h.reshape(len(X), h.shape[1], -1, 2).max(axis=3)
    h = np.maximum(conv1d(h, weights[convs[1].input[1]], weights[convs[1].input[2]], 1, 1), 0)
    h = h.mean(axis=2)
    return h @ weights[gemm.input[1]].T + weights[gemm.input[2]]


@pytest.fixture(scope="module")
def sensor_rows():
    dataset = example_dataset()
    X_cal = dataset.make_rows(1200, 1)[0][:200]  # the example's calibration rows: its first 200 training rows
    X_test, y_test = dataset.make_rows(400, 2)
    return X_cal, X_test, y_test


def test_pytorch_fixture_float_graph_matches_a_numpy_forward_pass(sensor_rows):
    _, X, _ = sensor_rows
    model = tinycc_ml.load_model(FIXTURE)
    assert isinstance(model, NetworkModel) and not model.is_quantised
    assert model.input_shape == (1, 3, 128) and model.input_dim == 384
    want = numpy_forward(FIXTURE, X[:64].astype(np.float64))
    np.testing.assert_allclose(model.scores(X[:64].reshape(64, -1)), want, rtol=1e-5, atol=1e-5)


def test_pytorch_fixture_int8_stays_within_a_point_of_float_and_c_equals_the_interpreter(sensor_rows, tmp_path):
    X_cal, X_test, y_test = sensor_rows
    model = tinycc_ml.load_model(FIXTURE)
    calibration, flat = X_cal.reshape(len(X_cal), -1), X_test.reshape(len(X_test), -1)
    int8 = model.quantise(calibration)
    assert int8.is_quantised
    float_scores = numpy_forward(FIXTURE, X_test.astype(np.float64))
    int8_scores = int8.scores(flat)
    # the int8 scores are float's to within a few output steps (an input step of 2/255 g, weights to 1/127)
    out_scale = int8.graph.type(int8.graph.outputs[0][1]).dtype.qscales[0]
    worst = np.max(np.abs(int8_scores - float_scores), axis=1)  # rows beyond the calibration's range saturate
    assert np.quantile(worst, 0.95) < 4 * out_scale
    float_accuracy = np.mean(np.argmax(float_scores, axis=1) == y_test)
    int8_accuracy = np.mean(np.argmax(int8_scores, axis=1) == y_test)
    assert float_accuracy > 0.9 and abs(int8_accuracy - float_accuracy) <= 0.01 + 1e-9

    require_target("host")
    result = tinycc_ml.compile(FIXTURE, target="host", precision="int8", calibration=calibration, name="sensor",
                               out_dir=tmp_path)
    assert result.report["quantised_from_float"] and result.report["agreement_with_float"] > 0.95
    scores, predictions = result.load().run_raw(int8.quantise_input(flat[:100]))
    want = int8.run_int8(int8.quantise_input(flat[:100]).reshape(100, *int8.input_shape)).reshape(100, -1)
    np.testing.assert_array_equal(scores, want)
    np.testing.assert_array_equal(predictions, np.argmax(want, axis=1))


# ---------------------------------------------------------------- hand-built graphs, one op or attribute each


def init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def save(path, nodes, inits, in_shape, out_name, out_shape=None, opset=17):
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))


def head(current, channels, classes=3, spatial=1, pool="GlobalAveragePool"):
    """Global average pool, flatten, dense: a classifier's end."""
    nodes = [helper.make_node(pool, [current], ["pooled"], name="gap"),
             helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
             helper.make_node("Gemm", ["flat", "Wd", "bd"], ["y"], transB=1, name="dense")]
    return nodes, [init("Wd", RNG.normal(size=(classes, channels))), init("bd", RNG.normal(size=classes) / 4)]


def conv_net(path, spatial=1, in_c=3, out_c=4, kernel=3, size=12, group=1, extra_nodes=(), **conv_attrs):
    w_shape = (out_c, in_c // group, *[kernel] * spatial)
    inits = [init("W", RNG.normal(size=w_shape) / np.sqrt(in_c * kernel)), init("b", RNG.normal(size=out_c) / 4)]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", group=group, **conv_attrs),
             helper.make_node("Relu", ["c"], ["r"], name="relu")]
    tail, tail_inits = head("r", out_c, spatial=spatial)
    save(path, nodes + list(extra_nodes) + tail, inits + tail_inits, [1, in_c, *[size] * spatial], "y")


def bn_net(path):
    inits = [init("W", RNG.normal(size=(4, 2, 3)) / 2), init("b", RNG.normal(size=4)),
             init("gamma", RNG.uniform(0.5, 2, size=4)), init("beta", RNG.normal(size=4)),
             init("mean", RNG.normal(size=4)), init("var", RNG.uniform(0.2, 3, size=4))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn",
                              epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["r"], name="relu")]
    tail, tail_inits = head("r", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 10], "y")


def relu6_skip_net(path):
    """Two convolutions added (a skip connection), Clip(0, 6) with min/max inputs (opset 13), a max pool,
    a flatten of a tensor with several positions into MatMul + Add, Softmax."""
    inits = [init("W1", RNG.normal(size=(3, 2, 3, 3))), init("b1", RNG.normal(size=3)),
             init("W2", RNG.normal(size=(3, 3, 1, 1))), init("b2", RNG.normal(size=3)),
             init("lo", 0.0), init("hi", 6.0), init("Wm", RNG.normal(size=(3 * 3 * 3, 4)) / 3),
             init("bm", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"], name="relu6"),
             helper.make_node("Conv", ["r1", "W2", "b2"], ["c2"], name="conv2"),
             helper.make_node("Add", ["r1", "c2"], ["s"], name="skip"),
             helper.make_node("Relu", ["s"], ["r2"], name="relu"),
             helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "Wm"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bm"], ["z"], name="bias"),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=1)]
    save(path, nodes, inits, [1, 2, 6, 6], "y", opset=13)


def average_pool_net(path, **pool_attrs):
    inits = [init("W", RNG.normal(size=(4, 3, 3, 3)) / 3), init("b", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", auto_pad="SAME_UPPER"),
             helper.make_node("AveragePool", ["c"], ["a"], name="avg", **pool_attrs),
             helper.make_node("Relu", ["a"], ["r"], name="relu")]
    tail, tail_inits = head("r", 4, spatial=2)
    save(path, nodes + tail, inits + tail_inits, [1, 3, 7, 7], "y")


def max_pool_net(path):
    """MaxPool1d(3, stride 2, padding 1) as PyTorch writes it (explicit pads), a ReLU fused into the pool."""
    inits = [init("W", RNG.normal(size=(4, 2, 3)) / 2), init("b", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[3], strides=[2], pads=[1, 1]),
             helper.make_node("Relu", ["p"], ["r"], name="relu")]
    tail, tail_inits = head("r", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 10], "y")


def pytorch_mean_net(path, batch="batch"):
    """AdaptiveAvgPool1d(1) as torch.onnx.export writes it: Unsqueeze, ReduceMean (axes input), Squeeze,
    Reshape; a dynamic batch dimension."""
    inits = [init("W", RNG.normal(size=(5, 3, 5)) / 3), init("b", RNG.normal(size=5)),
             init("ax2", [2], np.int64), init("ax23", [-1, -2], np.int64), init("shape", [1, 5], np.int64),
             init("Wd", RNG.normal(size=(2, 5))), init("bd", RNG.normal(size=2))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[2, 2], strides=[2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Unsqueeze", ["r", "ax2"], ["u"], name="unsqueeze"),
             helper.make_node("ReduceMean", ["u", "ax23"], ["m"], name="mean", keepdims=1),
             helper.make_node("Squeeze", ["m", "ax2"], ["s"], name="squeeze"),
             helper.make_node("Reshape", ["s", "shape"], ["f"], name="view", allowzero=1),
             helper.make_node("Gemm", ["f", "Wd", "bd"], ["y"], transB=1, name="dense")]
    save(path, nodes, inits, [batch, 3, 16], "y", [batch, 2], opset=18)


def concat_branches_net(path):
    """Two convolutions of different ranges concatenated on channels (PyTorch's torch.cat), a third reading the
    concatenation: TFLite's converter gives both operands and the result one quantisation covering all three."""
    inits = [init("W1", RNG.normal(size=(3, 2, 3))), init("b1", RNG.normal(size=3)),
             init("W2", RNG.normal(size=(2, 2, 3)) * 6), init("b2", RNG.normal(size=2) * 4),
             init("W3", RNG.normal(size=(4, 5, 3)) / 3), init("b3", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], name="conv1", pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["x", "W2", "b2"], ["c2"], name="conv2", pads=[1, 1]),
             helper.make_node("Concat", ["r1", "c2"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "W3", "b3"], ["c3"], name="conv3"),
             helper.make_node("Relu", ["c3"], ["r3"], name="relu3")]
    tail, tail_inits = head("r3", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 12], "y")


def concat_input_net(path):
    """The network's input concatenated with a convolution of it (a U-Net's skip, a DenseNet's block): the input's
    quantisation is fixed (its own calibrated range), so it is requantised to the concatenation's wider one."""
    inits = [init("W1", RNG.normal(size=(3, 2, 3)) * 3), init("b1", RNG.normal(size=3) * 3),
             init("W3", RNG.normal(size=(4, 5, 3)) / 3), init("b3", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], name="conv1", pads=[1, 1]),
             helper.make_node("Concat", ["x", "c1"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "W3", "b3"], ["c3"], name="conv3"),
             helper.make_node("Relu", ["c3"], ["r3"], name="relu3")]
    tail, tail_inits = head("r3", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 12], "y")


def concat_softmax_net(path):
    """Softmax's output (TFLite's fixed 1/256) concatenated with a dense layer's: requantised to the union."""
    inits = [init("W1", RNG.normal(size=(3, 6))), init("b1", RNG.normal(size=3)),
             init("W2", RNG.normal(size=(2, 6)) * 2), init("b2", RNG.normal(size=2))]
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "W1", "b1"], ["g1"], transB=1, name="dense1"),
             helper.make_node("Softmax", ["g1"], ["s"], name="softmax", axis=1),
             helper.make_node("Gemm", ["f", "W2", "b2"], ["g2"], transB=1, name="dense2"),
             helper.make_node("Concat", ["s", "g2"], ["y"], name="cat", axis=1)]
    save(path, nodes, inits, [1, 6], "y", [1, 5])


def prelu_net(path):
    """nn.PReLU(channels) after a convolution: ONNX's PRelu with a slope of shape [C, 1]."""
    inits = [init("W", RNG.normal(size=(4, 2, 3))), init("b", RNG.normal(size=4)),
             init("slope", RNG.uniform(-0.5, 0.5, size=(4, 1)))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["p"], name="prelu")]
    tail, tail_inits = head("p", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 10], "y")


def resize_nearest_net(path):
    """F.interpolate(scale_factor=2, mode='nearest') as torch.onnx.export writes it (Resize with scales,
    asymmetric coordinates, floor) between two convolutions."""
    inits = [init("W1", RNG.normal(size=(3, 2, 3, 3)) / 2), init("b1", RNG.normal(size=3)),
             init("scales", [1, 1, 2, 2]), init("W2", RNG.normal(size=(4, 3, 3, 3)) / 3),
             init("b2", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c1", "", "scales"], ["u"], name="upsample", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Conv", ["u", "W2", "b2"], ["c2"], name="conv2"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu")]
    tail, tail_inits = head("r2", 4, spatial=2)
    save(path, nodes + tail, inits + tail_inits, [1, 2, 4, 4], "y", opset=13)


def reduce_channels_net(path, op):
    """x.sum(dim=1, keepdim=True) / x.mean(dim=1, keepdim=True) over a convolution's channels (TFLite's SUM /
    MEAN over an axis that is not a global pool's), then a dense layer."""
    inits = [init("W", RNG.normal(size=(4, 2, 3))), init("b", RNG.normal(size=4)), init("axes", [1], np.int64),
             init("Wd", RNG.normal(size=(3, 10))), init("bd", RNG.normal(size=3))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node(op, ["r", "axes"], ["m"], name="reduce", keepdims=1),
             helper.make_node("Flatten", ["m"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "Wd", "bd"], ["y"], transB=1, name="dense")]
    save(path, nodes, inits, [1, 2, 10], "y", opset=18)


def layer_norm_net(path):
    """nn.LayerNorm between two Linear layers (ONNX's LayerNormalization over the last axis): TFLite's int8
    decomposes it as the converter writes it (MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, SUB, MUL, MUL, ADD)."""
    inits = [init("W1", RNG.normal(size=(8, 6))), init("b1", RNG.normal(size=8)),
             init("gamma", RNG.uniform(0.5, 2, size=8)), init("beta", RNG.normal(size=8) / 2),
             init("W2", RNG.normal(size=(3, 8))), init("b2", RNG.normal(size=3))]
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "W1", "b1"], ["g1"], transB=1, name="dense1"),
             helper.make_node("LayerNormalization", ["g1", "gamma", "beta"], ["n"], name="norm", axis=-1,
                              epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1, name="dense2")]
    save(path, nodes, inits, [1, 6], "y", [1, 3])


CASES = {
    "layer_norm_decomposed": layer_norm_net,
    "concat_branches": concat_branches_net,
    "concat_input_requantised": concat_input_net,
    "concat_softmax_requantised": concat_softmax_net,
    "prelu_per_channel": prelu_net,
    "resize_nearest_2x": resize_nearest_net,
    "reduce_sum_channels": lambda p: reduce_channels_net(p, "ReduceSum"),
    "reduce_mean_channels": lambda p: reduce_channels_net(p, "ReduceMean"),
    "conv1d_same_pads": lambda p: conv_net(p, pads=[1, 1]),
    "conv1d_explicit_pads_stride": lambda p: conv_net(p, kernel=3, pads=[1, 1], strides=[2]),
    "conv2d_explicit_pads": lambda p: conv_net(p, spatial=2, size=6, kernel=3, pads=[2, 0, 1, 2]),
    "max_pool_explicit_pads": max_pool_net,
    "conv1d_valid_stride_dilation": lambda p: conv_net(p, kernel=3, strides=[2], dilations=[2]),
    "conv1d_auto_pad_same_upper_stride": lambda p: conv_net(p, kernel=4, strides=[3], auto_pad="SAME_UPPER"),
    "conv1d_auto_pad_valid": lambda p: conv_net(p, kernel=5, auto_pad="VALID"),
    "conv2d_pads_stride": lambda p: conv_net(p, spatial=2, size=7, kernel=3, pads=[1, 1, 1, 1], strides=[2, 2]),
    "depthwise_multiplier_2": lambda p: conv_net(p, in_c=3, out_c=6, group=3, pads=[1, 1]),
    "depthwise_2d": lambda p: conv_net(p, spatial=2, in_c=4, out_c=4, group=4, size=6, pads=[1, 1, 1, 1]),
    "one_channel_input": lambda p: conv_net(p, in_c=1, out_c=3),
    "batch_norm_folded": bn_net,
    "relu6_skip_maxpool_flatten_matmul_softmax": relu6_skip_net,
    "average_pool_same": lambda p: average_pool_net(p, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    "average_pool_valid": lambda p: average_pool_net(p, kernel_shape=[2, 2], strides=[2, 2]),
    "pytorch_mean_dynamic_batch": pytorch_mean_net,
}


def reference(path: Path, X: np.ndarray) -> np.ndarray:
    """onnxruntime's float32 outputs (the library ONNX files are run with), one row at a time (a batch of one,
    as the graph declares); they agree with onnx.reference's to float32 rounding (checked)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    got = np.concatenate([session.run(None, {name: x[None].astype(np.float32)})[0].reshape(1, -1) for x in X])
    evaluator = ReferenceEvaluator(str(path))
    spec = np.concatenate([evaluator.run(None, {evaluator.input_names[0]: x[None].astype(np.float32)})[0]
                           .reshape(1, -1) for x in X])
    np.testing.assert_allclose(got, spec, rtol=1e-4, atol=1e-5)
    return got


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_built_graph_float_int8_and_c(case, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(sorted(CASES).index(case)))
    path = tmp_path / f"{case}.onnx"
    CASES[case](path)
    model = tinycc_ml.load_model(path)
    assert isinstance(model, NetworkModel)
    X = RNG.normal(size=(48, *model.input_shape[1:]))
    want = reference(path, X)
    np.testing.assert_allclose(model.scores(X.reshape(48, -1)), want, rtol=1e-4, atol=1e-4)
    calibration = X.reshape(48, -1)
    int8 = model.quantise(calibration)
    got = int8.scores(calibration)
    spread = np.max(want) - np.min(want)
    assert np.max(np.abs(got - want)) < 0.1 * spread + 0.02, (case, np.max(np.abs(got - want)), spread)
    require_target("host")
    result = tinycc_ml.compile(model, target="host", precision="int8", calibration=calibration, name="net",
                               out_dir=tmp_path / "out")
    Xq = int8.quantise_input(calibration)
    scores, _ = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, int8.run_int8(Xq.reshape(48, *int8.input_shape)).reshape(48, -1))


@pytest.mark.parametrize("case, requantised", [("concat_branches", []), ("concat_input_requantised", ["input"]),
                                               ("concat_softmax_requantised", ["softmax"])])
def test_a_concatenations_operands_share_one_quantisation_covering_their_ranges(case, requantised, tmp_path):
    """As TFLite's converter quantises a concatenation: its operands and result one quantisation whose range holds
    every operand's calibrated range; an operand whose producer fixes its own (the network's input, softmax's
    1/256) read through a requantisation (QUANTIZE int8 -> int8) to it, the others written at it directly."""
    rng = np.random.default_rng(3)
    path = tmp_path / f"{case}.onnx"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "RNG", rng)
        CASES[case](path)
    model = tinycc_ml.load_model(path)
    X = rng.normal(size=(64, *model.input_shape[1:])).reshape(64, -1)
    q = model.quantise(X).graph
    (cat,) = [n for n in q.order() if q.op(n) == "concatenation"]
    shared = q.type(cat).dtype
    operands = q.node(cat).inputs
    assert all(q.type(o).dtype == shared for o in operands)
    assert sorted(q.op(q.node(r).inputs[0]) for r in q.order() if q.op(r) == "requantize") == requantised
    # the shared range holds each operand's float values (onnxruntime's, of the float tensors feeding the Concat)
    import onnxruntime

    proto = onnx.load(str(path))
    feeds = [n for n in proto.graph.node if n.op_type == "Concat"][0].input
    proto.graph.output.extend([helper.make_tensor_value_info(f, TensorProto.FLOAT, None) for f in feeds
                               if f not in [o.name for o in proto.graph.output]])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rows = X.reshape(64, *model.input_shape[1:]).astype(np.float32)
    values = np.concatenate([np.concatenate([np.ravel(session.run(feeds, {"x": r[None]})[k]) for r in rows])
                             for k in range(len(feeds))])
    scale, zero = shared.qscales[0], shared.zero_point
    # (to within a step: the zero point is rounded, as the converter nudges it)
    assert scale * (-128 - zero) - scale <= values.min() and values.max() <= scale * (127 - zero) + scale
    assert values.max() - values.min() > 0.9 * 255 * scale  # and no wider than they need


def test_batch_norm_is_folded_into_the_convolution(tmp_path):
    bn_net(tmp_path / "bn.onnx")
    ops = [model_op for model_op in (tinycc_ml.load_model(tmp_path / "bn.onnx").graph.op(n)
                                     for n in tinycc_ml.load_model(tmp_path / "bn.onnx").graph.order())]
    assert ops.count("conv2d") == 1 and "batch_norm" not in ops and ops.count("average_pool2d") == 1


def test_flatten_keeps_onnx_channels_first_order(tmp_path):
    """A flatten of (1, C, H, W) with several positions reads channel-major, as ONNX does: the dense layer
    sees ONNX's order (a wrong order would fail the reference comparison on this random graph)."""
    relu6_skip_net(tmp_path / "n.onnx")
    model = tinycc_ml.load_model(tmp_path / "n.onnx")
    assert "transpose" in [model.graph.op(n) for n in model.graph.order()]
    X = RNG.normal(size=(8, 72))
    np.testing.assert_allclose(model.scores(X), reference(tmp_path / "n.onnx", X.reshape(8, 2, 6, 6)), atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(kernel=st.integers(1, 5), stride=st.integers(1, 3), dilation=st.integers(1, 2), channels=st.integers(1, 4),
       size=st.integers(8, 20), padding=st.sampled_from(["VALID", "SAME_UPPER", "pads"]), seed=st.integers(0, 9))
def test_conv1d_property_agrees_with_onnxruntime(tmp_path_factory, kernel, stride, dilation, channels, size,
                                                    padding, seed):
    """Any 1-D convolution geometry (SAME, VALID, any pads smaller than the window) computes ONNX's values
    (float) and its int8 form stays within its tolerance."""
    if (kernel - 1) * dilation + 1 > size:
        return
    path = tmp_path_factory.mktemp("conv") / "c.onnx"
    rng = np.random.default_rng(seed)
    attrs = {"strides": [stride], "dilations": [dilation]}
    if padding == "pads":
        attrs["pads"] = [int(rng.integers(0, kernel)), int(rng.integers(0, kernel))]
    else:
        attrs["auto_pad"] = padding
    conv_net(path, in_c=channels, out_c=3, kernel=kernel, size=size, **attrs)
    if padding == "SAME_UPPER" and dilation > 1:  # onnxruntime refuses it: so does the importer
        with pytest.raises(ModelFileError, match="onnxruntime refuses dilated SAME padding"):
            tinycc_ml.load_model(path)
        return
    model = tinycc_ml.load_model(path)
    X = rng.normal(size=(20, channels * size))
    want = reference(path, X.reshape(20, channels, size))
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-4, atol=1e-4)
    int8 = model.quantise(X)
    assert np.max(np.abs(int8.scores(X) - want)) < 0.1 * (np.max(want) - np.min(want)) + 0.02


# ---------------------------------------------------------------- refusals


def test_float_network_integer_builds_need_calibration(tmp_path):
    conv_net(tmp_path / "c.onnx")
    for precision, options in (("int8", {}), ("int16", {}), ("int8", {"int8_dialect": "pow2"})):
        with pytest.raises(CompileError, match="calibration"):
            tinycc_ml.compile(tmp_path / "c.onnx", target="host", precision=precision, **options)
    with pytest.raises(CompileError, match="int8_dialect='tf' is not one of tflite, pow2"):
        tinycc_ml.compile(tmp_path / "c.onnx", target="host", precision="int8", int8_dialect="tf",
                          calibration=RNG.normal(size=(20, 36)))


def test_every_unsupported_op_and_attribute_is_named_in_one_error(tmp_path):
    inits = [init("W", RNG.normal(size=(4, 3, 3))), init("b", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv"),
             helper.make_node("Softsign", ["c"], ["r"], name="softsign"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2], storage_order=1),
             helper.make_node("Relu", ["p"], ["q"], name="relu", domain="com.example"),
             helper.make_node("GlobalAveragePool", ["q"], ["y"], name="gap")]
    save(tmp_path / "u.onnx", nodes, inits, [1, 3, 10], "y")
    with pytest.raises(ModelFileError) as info:
        tinycc_ml.load_model(tmp_path / "u.onnx")
    message = str(info.value)
    assert "3 unsupported" in message and "op Softsign (node 'softsign')" in message
    assert "MaxPool (node 'pool'): storage_order=1" in message and "domain 'com.example'" in message


def external_net(folder: Path, location="w.bin", offset=None, length=None, data: bytes | None = None):
    """A conv net whose filter is stored as external data with the given fields (written by hand)."""
    conv_net(folder / "e.onnx", in_c=2, out_c=3, kernel=3)
    proto = onnx.load(str(folder / "e.onnx"))
    tensor = proto.graph.initializer[0]
    raw = numpy_helper.to_array(tensor).tobytes()
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
    onnx.save(proto, str(folder / "e.onnx"))
    if data is not False:
        (folder / "w.bin").write_bytes(raw if data is None else data)
    return folder / "e.onnx", raw


def test_external_data_is_read_next_to_the_model(tmp_path):
    path, raw = external_net(tmp_path, offset=0, length=72)
    model = tinycc_ml.load_model(path)
    X = RNG.normal(size=(4, 24))
    np.testing.assert_allclose(model.scores(X), reference(path, X.reshape(4, 2, 12)), atol=1e-5)
    assert len(raw) == 72


def _escaping(folder: Path):
    (folder / "inner").mkdir()
    path, raw = external_net(folder / "inner", location="../w.bin")
    (folder / "w.bin").write_bytes(raw)
    return path


def _symlink_out(folder: Path):
    outside = folder / "outside"
    outside.mkdir()
    (folder / "m").mkdir()
    path, raw = external_net(folder / "m", location="link.bin")
    (outside / "w.bin").write_bytes(raw)
    (folder / "m" / "link.bin").symlink_to(outside / "w.bin")
    return path


def _overflowing_shape(folder: Path):
    conv_net(folder / "e.onnx")
    proto = onnx.load(str(folder / "e.onnx"))
    tensor = proto.graph.initializer[0]
    del tensor.dims[:]
    tensor.dims.extend([2**40, 2**40, 2**40])
    onnx.save(proto, str(folder / "e.onnx"))
    return folder / "e.onnx"


def _weight(value):
    def make(folder: Path):
        conv_net(folder / "e.onnx")
        proto = onnx.load(str(folder / "e.onnx"))
        w = numpy_helper.to_array(proto.graph.initializer[0]).copy()
        w[1, 0, 2] = value
        proto.graph.initializer[0].CopyFrom(init("W", w))
        onnx.save(proto, str(folder / "e.onnx"))
        return folder / "e.onnx"
    return make


HOSTILE = [
    (_escaping, "leaves the model's folder"),
    (_symlink_out, "leaves the model's folder"),
    (lambda f: external_net(f, location="/etc/passwd")[0], "absolute path"),
    (lambda f: external_net(f, data=False)[0], "does not exist next to the model"),
    (lambda f: external_net(f, data=b"\x00" * 40)[0], "which has 40 bytes: truncated"),
    (lambda f: external_net(f, offset=-4)[0], "external offset '-4'"),
    (lambda f: external_net(f, offset=10**17)[0], r"reads bytes 100000000000000000\.\."),
    (lambda f: external_net(f, offset="1e3")[0], "external offset '1e3'"),
    (lambda f: external_net(f, length=8)[0], "needs 72 bytes, its external length says 8"),
    (lambda f: external_net(f, location="")[0], "without a location"),
    (_overflowing_shape, "more than 268435456"),
    (lambda f: save(f / "e.onnx", [helper.make_node("GlobalAveragePool", ["x"], ["y"])], [], [1, 2**40, 2**40],
                    "y") or f / "e.onnx", r"input 'x' has shape \[1, 1099511627776, 1099511627776\], more than"),
    (_weight(np.nan), r"holds a non-finite value \(nan\) at index \(1, 0, 2\)"),
    (_weight(np.inf), r"holds a non-finite value \(inf\)"),
    (lambda f: conv_net(f / "e.onnx", pads=[0, 3]) or f / "e.onnx", r"pads \[0, 0, 0, 3\] reach past a 1x3 window"),
    (lambda f: conv_net(f / "e.onnx", in_c=4, out_c=6, group=4) or f / "e.onnx",
     r"group=4 with weights \[6, 1, 3\] on 4 input channels \(groups must divide"),
]


@pytest.mark.parametrize("make, message", HOSTILE, ids=[m for _, m in HOSTILE])
def test_hostile_onnx_files_give_one_error_and_write_nothing(tmp_path, capsys, make, message):
    path = make(tmp_path)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)
    out = tmp_path / "out"
    assert cli.main(["compile", str(path), "-o", str(out), "--precision", "int8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and not out.exists()


def test_the_command_line_quantises_a_float_network_with_calibration_rows(sensor_rows, tmp_path):
    """`tinycc-ml compile sensor_cnn.onnx --calibration rows.npz`: int8 (a network's precision with calibration
    rows), the C named after the file; written beside nothing else."""
    from tinycc_ml.cli import main as cli_main

    X_cal = sensor_rows[0]
    rows = tmp_path / "rows.npz"
    np.savez(rows, X=X_cal.reshape(len(X_cal), -1))
    model_file = tmp_path / "sensor_cnn.onnx"
    model_file.write_bytes(FIXTURE.read_bytes())
    (tmp_path / "sensor_cnn.onnx.data").write_bytes(FIXTURE.with_name(FIXTURE.name + ".data").read_bytes())
    out = tmp_path / "out"
    assert cli_main(["compile", str(model_file), "--calibration", str(rows), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["sensor_cnn.c", "sensor_cnn.h"]
    assert "int8_t" in (out / "sensor_cnn.h").read_text()


def test_pytorch_fixture_runs_on_the_atmega328p_in_its_2_kb(sensor_rows, tmp_path):
    """The PyTorch export, quantised to int8, on the ATmega328P: its firmware's static RAM and stack within the
    chip's 2 KB, constants in flash, every score byte the interpreter's on held-out rows (simavr)."""
    require_target("avr")
    from tinycc_ml.codegen.backend import get_backend

    X_cal, X_test, _ = sensor_rows
    model = tinycc_ml.load_model(FIXTURE)
    calibration, flat = X_cal.reshape(len(X_cal), -1), X_test[:3].reshape(3, -1)
    int8 = model.quantise(calibration)
    result = tinycc_ml.compile(FIXTURE, target="avr", precision="int8", calibration=calibration, name="sensor",
                               out_dir=tmp_path)
    rows = int8.quantise_input(flat)
    run = get_backend("avr").simulate(tmp_path, result.output, flat)  # real rows: quantised as rows are here
    want = int8.run_int8(rows.reshape(3, *int8.input_shape)).reshape(3, -1)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64), want)
    assert run.ram_bytes + run.stack_bytes <= 2048 and run.flash_bytes <= 32768


def test_a_node_without_an_output_is_refused_by_name(tmp_path):
    """A flipped byte can leave a node with no output (seed 892941877, onnx-file case 306: an IndexError)."""
    path = tmp_path / "no_out.onnx"
    inits = [init("W", RNG.normal(size=(4, 3, 3))), init("b", RNG.normal(size=4))]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], [], name="lost")]
    tail, tail_inits = head("c", 4)
    save(path, nodes + tail, inits + tail_inits, [1, 3, 12], "y")
    with pytest.raises(ModelFileError, match=r"no_out\.onnx.*node 'lost' \(Relu\) has no output"):
        tinycc_ml.load_model(path)
