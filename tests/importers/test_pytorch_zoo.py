"""The PyTorch zoo's files (scripts/pytorch_zoo.py: trained models, both exporters; benchmarks/pytorch_zoo.py measures
them all): a subset held to onnxruntime here, and what the zoo found fixed: both exporters' files give the same C
(IR names from the ops, not from the exporters' node names; reshape chains collapsed), BatchNorm1d after a Linear
folded. The suite does not import torch: the files are committed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import ModelFileError
from tinycc_ml.models.mlp import MLPModel
from tinycc_ml.models.network import NetworkModel

onnxruntime = pytest.importorskip("onnxruntime")

ZOO = Path(__file__).resolve().parents[1] / "data" / "pytorch_zoo"
ROWS = 24


def onnxruntime_scores(path: Path, X: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    dtype = np.int64 if np.issubdtype(X.dtype, np.integer) else np.float32
    return np.concatenate([session.run(None, {name: x[None].astype(dtype)})[0].reshape(1, -1) for x in X])


def c_files(path: Path, tmp_path: Path, precision: str = "float", calibration=None) -> dict[str, str]:
    """The C of ``path`` compiled from a copy named net.onnx (the C's comment names the file)."""
    folder = tmp_path / path.stem
    folder.mkdir(parents=True)
    for f in path.parent.glob(f"{path.name}*"):  # the .onnx.data keeps the name the .onnx gives it
        (folder / ("net.onnx" if f.name == path.name else f.name)).write_bytes(f.read_bytes())
    return tinycc_ml.compile(tinycc_ml.load_model(folder / "net.onnx"), target="host", precision=precision,
                             calibration=calibration, name="net").files


# gru_keyword: dynamo reshapes y[:, -1] in four steps, TorchScript in three; tcn: causal F.pad and a time slice;
# unet_tiny: cat of a ConvTranspose2d's output and a skip; conv1d_keyword: a transpose layer before the Conv1d
# rnn_activity: dynamo unrolls nn.RNN into 32 steps of MatMul / Tanh, read back as one RNN node
@pytest.mark.parametrize("name", ["lenet", "gru_keyword", "tcn", "unet_tiny", "conv1d_keyword", "lstm2_activity",
                                  "rnn_activity"])
def test_both_exporters_give_the_same_c(name, tmp_path):
    """The exporters name their nodes differently (dynamo "node_conv2d", TorchScript "/0/Conv") and move axes in
    different steps: the IR's names come from its ops and reshape chains collapse, so the C is the same."""
    dynamo, torchscript = (c_files(ZOO / f"{name}{e}.onnx", tmp_path) for e in ("", "_ts"))
    assert dynamo == torchscript
    assert "/* %conv2d" in dynamo["net.c"] or "/* %conv1d" in dynamo["net.c"] or "/* %fully" in dynamo["net.c"]


def test_the_int16_c_of_both_exporters_is_the_same(tmp_path):
    rows = np.random.default_rng(0).uniform(0, 1, size=(64, 64))
    assert c_files(ZOO / "lenet.onnx", tmp_path, "int16", rows) == c_files(ZOO / "lenet_ts.onnx", tmp_path, "int16",
                                                                         rows)


def test_a_reshape_of_a_reshape_reads_the_first_ones_operand():
    """dynamo's y[:, -1] of a GRU's output: view, view, unsqueeze... one reshape before the slice, not four."""
    graph = tinycc_ml.load_model(ZOO / "gru_keyword.onnx").graph
    for node in graph.order():
        if graph.op(node) == "reshape":
            assert graph.op(graph.node(node).inputs[0]) != "reshape", node


@pytest.mark.parametrize("name", ["cnn_bn", "mobilenet_v2", "resnet8", "conv1d_dwsep"])
def test_unfolded_files_of_both_exporters_give_the_same_c(name, tmp_path):
    """Each exporter folds BatchNorm into the Conv in its own float32 arithmetic, so the default files may hold
    weights an ulp apart; exported unfolded (dynamo's optimize=False: Constant value_ints, CastLike, Expand of
    the bias; TorchScript's do_constant_folding=False) both hold the module's own parameters and give one C."""
    rows = np.random.default_rng(0).uniform(0, 1, size=(64, 96 if name == "conv1d_dwsep" else 64))
    for precision, calibration in (("float", None), ("int16", rows)):
        dynamo, torchscript = (c_files(ZOO / f"{name}{e}_unfolded.onnx", tmp_path / f"{precision}{e}", precision,
                                       calibration) for e in ("", "_ts"))
        assert dynamo == torchscript
        assert "relu6" not in dynamo["net.h"]  # dynamo's Clip after a CastLike'd bound fused into the Conv as well


@pytest.mark.parametrize("name, shape", [("mobilenet_v2", (1, 8, 8)), ("conv1d_dwsep", (3, 32))])
def test_an_unoptimised_dynamo_file_agrees_with_onnxruntime(name, shape, tmp_path):
    require_target("host")
    path = ZOO / f"{name}_unfolded.onnx"
    X = np.random.default_rng(2).uniform(0, 1, size=(ROWS, *shape))
    want = onnxruntime_scores(path, X)
    scores = tinycc_ml.compile(path, target="host", name="net", out_dir=tmp_path).load().decision_function(
        X.reshape(ROWS, -1))
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name, shape", [("mobilenet_v2", (1, 8, 8)), ("resnet8", (1, 8, 8)),
                                         ("attention_pool", (3, 32)), ("conv_autoencoder", (1, 8, 8))])
def test_zoo_models_agree_with_onnxruntime(name, shape, exporter, tmp_path):
    require_target("host")
    path = ZOO / f"{name}{exporter}.onnx"
    X = np.random.default_rng(1).uniform(0, 1, size=(ROWS, *shape))
    want = onnxruntime_scores(path, X)
    rows = X.reshape(ROWS, -1)
    scores = tinycc_ml.compile(path, target="host", name="net", out_dir=tmp_path).load().decision_function(rows)
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("exporter", ["", "_ts"])
def test_batch_norm_after_a_linear_is_folded(exporter):
    """BatchNorm1d after a Linear: the TorchScript exporter leaves the BatchNormalization node (dynamo folds it);
    both files load as the same MLP, and as a network where the net has other layers."""
    path = ZOO / f"mlp_dropout_bn{exporter}.onnx"
    model = tinycc_ml.load_model(path)
    assert isinstance(model, MLPModel)
    X = np.random.default_rng(2).uniform(0, 1, size=(ROWS, 64))
    np.testing.assert_allclose(model.scores(X), onnxruntime_scores(path, X), rtol=1e-4, atol=1e-5)


def test_a_batch_norm_the_file_keeps_folds_to_the_constants_dynamo_folded():
    """mlp_dropout_bn: the TorchScript exporter leaves BatchNorm1d after the Linear, the dynamo exporter folds it
    (onnxscript's fusion, in float32): the importer's fold of the one file gives the other file's constants bit for
    bit, and both files the same C at float and int16."""
    from onnx import load, numpy_helper

    folded = {i.name: numpy_helper.to_array(i) for i in load(ZOO / "mlp_dropout_bn.onnx").graph.initializer}
    model = tinycc_ml.load_model(ZOO / "mlp_dropout_bn_ts.onnx")
    for W, b, (w_name, b_name) in zip(model.weights, model.biases, [("0.weight", "0.bias"), ("4.weight", "4.bias")]):
        np.testing.assert_array_equal(W.astype(np.float32), folded[w_name])
        np.testing.assert_array_equal(b.astype(np.float32), folded[b_name])


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_both_exporters_give_the_same_c_of_a_batch_norm_after_a_linear(precision, tmp_path):
    rows = np.random.default_rng(0).uniform(0, 16, size=(64, 64)) if precision == "int16" else None
    assert (c_files(ZOO / "mlp_dropout_bn.onnx", tmp_path, precision, rows)
            == c_files(ZOO / "mlp_dropout_bn_ts.onnx", tmp_path, precision, rows))


@pytest.mark.parametrize("bias", [True, False])
def test_a_batch_norm_folds_into_a_conv_as_onnxruntime_folds_it(bias, tmp_path):
    """onnxruntime's Conv + BatchNormalization fusion (its basic optimisations; the optimised model saved) is the
    oracle: the importer's folded filter and bias equal its constants bit for bit (the arithmetic the exporters'
    folds share: float32, s = g / sqrt(v + eps), w * s, (b - mean) * s + beta; in float64 then rounded, 586 of
    these 1728 weights came out 1 ulp apart)."""
    from onnx import TensorProto, helper, load, numpy_helper

    rng = np.random.default_rng(7)
    inits = {"w": rng.normal(size=(64, 3, 3, 3)), "b": rng.normal(size=64), "g": rng.uniform(0.2, 2, 64),
             "beta": rng.normal(size=64), "mean": rng.normal(size=64), "var": rng.uniform(0.01, 3, 64)}
    if not bias:
        del inits["b"]
    nodes = [helper.make_node("Conv", ["x", "w", *(["b"] if bias else [])], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["y"], name="bn",
                              epsilon=1e-5)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    path = tmp_path / "net.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "fused.onnx")
    onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    fused = load(tmp_path / "fused.onnx").graph
    assert [n.op_type for n in fused.node] == ["Conv"]
    want = {i.name: numpy_helper.to_array(i) for i in fused.initializer}
    graph = tinycc_ml.load_model(path).graph
    (conv,) = [graph.node(n) for n in graph.order() if graph.op(n) == "conv2d"]
    filters, biases = (graph.node(n).attrs["value"] for n in conv.inputs[1:3])
    np.testing.assert_array_equal(filters.transpose(0, 3, 1, 2), want[fused.node[0].input[1]])  # OHWI -> OIHW
    np.testing.assert_array_equal(biases, want[fused.node[0].input[2]])


def test_a_max_pool_over_the_whole_map_is_the_global_max_of_the_other_exporter():
    """cnn_maxhead: MaxPool2d(4) of a 4 x 4 map is TorchScript's MaxPool (stride 4) and dynamo's ReduceMax: one IR
    max_pool2d of stride 1, so the graphs are the same op for op."""
    graphs = [tinycc_ml.load_model(ZOO / f"cnn_maxhead{e}.onnx").graph for e in ("", "_ts")]
    nodes = [[g.node(n) for n in g.order()] for g in graphs]
    assert [(n.name, n.op, n.inputs, {k: v for k, v in n.attrs.items() if k != "value"}, n.type) for n in nodes[0]] \
        == [(n.name, n.op, n.inputs, {k: v for k, v in n.attrs.items() if k != "value"}, n.type) for n in nodes[1]]
    assert [n.attrs["stride"] for n in nodes[0] if n.op == "max_pool2d"] == [[1, 1]]


# both exporters fold these models' BatchNorms into the Convs, some channels' scales one float32 ulp apart: the
# files' values differ, the importer's graphs must not (in cnn_bn, cnn_maxhead, ds_cnn and conv1d_dwsep as trained
# the two foldings happen to round alike)
@pytest.mark.parametrize("name", ["cnn_se", "mobilenet_v2", "mobilenet_v3", "resnet8"])
def test_the_files_folded_conv_constants_are_all_the_c_differs_in(name, tmp_path):
    """The TorchScript file with the dynamo file's Conv weights and biases in place of its own gives the dynamo
    file's C byte for byte (GlobalAveragePool = ReduceMean, MaxPool = ReduceMax over the whole map, Clip's bounds as
    Constant nodes or initializers, ...)."""
    from onnx import load, numpy_helper, save

    dynamo, torchscript = load(ZOO / f"{name}.onnx"), load(ZOO / f"{name}_ts.onnx")
    values = {i.name: numpy_helper.to_array(i) for i in dynamo.graph.initializer}
    convs = [[n for n in m.graph.node if n.op_type == "Conv"] for m in (dynamo, torchscript)]
    assert len(convs[0]) == len(convs[1])
    theirs = {t: values[d] for a, b in zip(*convs) for d, t in zip(a.input[1:], b.input[1:])}
    assert any(not np.array_equal(numpy_helper.to_array(i), theirs[i.name])
               for i in torchscript.graph.initializer if i.name in theirs)  # the files differ there
    for i in torchscript.graph.initializer:
        if i.name in theirs:
            i.CopyFrom(numpy_helper.from_array(theirs[i.name], i.name))
    (tmp_path / "swapped").mkdir()
    save(torchscript, tmp_path / "swapped" / "net.onnx")
    swapped = tinycc_ml.compile(tinycc_ml.load_model(tmp_path / "swapped" / "net.onnx"), target="host",
                                name="net").files
    assert c_files(ZOO / f"{name}.onnx", tmp_path) == swapped


def linear_batch_norm_net(path: Path, conv: bool, variance: float = 1.5) -> None:
    """[Conv1d, Flatten,] Gemm, BatchNormalization, Relu, Gemm: as the TorchScript exporter writes BatchNorm1d."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    features = 4 if conv else 6  # the Conv: 2 channels of (8 - 3) // 3 + 1 = 2 positions
    inits = {"W": rng.normal(size=(5, features)), "b": rng.normal(size=5), "g": rng.uniform(0.5, 1.5, 5),
             "beta": rng.normal(size=5), "mean": rng.normal(size=5), "var": np.full(5, variance),
             "W2": rng.normal(size=(3, 5)), "cw": rng.normal(size=(2, 2, 3))}
    nodes = [helper.make_node("Gemm", ["f", "W", "b"], ["d"], name="linear", transB=1),
             helper.make_node("BatchNormalization", ["d", "g", "beta", "mean", "var"], ["n"], name="bn",
                              epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "W2"], ["y"], name="head", transB=1)]
    shape = [1, 2, 8] if conv else [1, 6]
    if conv:
        nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], name="conv", strides=[3]),
                 helper.make_node("Flatten", ["c"], ["f"], name="flatten")] + nodes
    else:
        nodes[0].input[0] = "x"
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


@pytest.mark.parametrize("conv", [False, True])
def test_batch_norm_after_a_gemm_folds_in_both_loaders(conv, tmp_path):
    path = tmp_path / "net.onnx"
    linear_batch_norm_net(path, conv)
    model = tinycc_ml.load_model(path)
    assert isinstance(model, NetworkModel if conv else MLPModel)
    X = np.random.default_rng(5).normal(size=(ROWS, 16 if conv else 6))
    np.testing.assert_allclose(model.scores(X), onnxruntime_scores(path, X.reshape(ROWS, *([2, 8] if conv else [6]))),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("conv", [False, True])
def test_a_batch_norm_with_a_negative_variance_is_refused_by_name(conv, tmp_path):
    path = tmp_path / "net.onnx"
    linear_batch_norm_net(path, conv, variance=-1.0)
    with pytest.raises(ModelFileError, match=r"net\.onnx: BatchNormalization node 'bn' has a variance \+ epsilon"):
        tinycc_ml.load_model(path)


def softmax_net(path: Path, op: str, axis: int, opset: int, shape=(1, 3, 4, 5)) -> None:
    """A 1x1 Conv (3 -> 3 channels, 1-D or 2-D), then Softmax / LogSoftmax over ``axis``."""
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(6).normal(size=(3, 3, *[1] * (len(shape) - 2)))
    w = numpy_helper.from_array(weights.astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node(op, ["c"], ["y"], name="norm", axis=axis)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString())


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis, shape", [(1, (1, 3, 4, 5)), (2, (1, 3, 4, 5)), (-1, (1, 3, 4, 5)), (2, (1, 3, 6)),
                                         (2, (1, 3, 6, 1))])
def test_softmax_over_any_axis(op, axis, shape, tmp_path):
    """Attention over time (softmax over a Conv1d's time axis) and over channels: the axis moved last and back."""
    path = tmp_path / "net.onnx"
    softmax_net(path, op, axis, 13, shape)
    X = np.random.default_rng(7).normal(size=(ROWS, *shape[1:]))
    got = tinycc_ml.load_model(path).scores(X.reshape(ROWS, -1))
    np.testing.assert_allclose(got, onnxruntime_scores(path, X), rtol=1e-5, atol=1e-6)


def test_softmax_before_opset_13_over_several_axes_is_refused_by_name(tmp_path):
    path = tmp_path / "net.onnx"
    softmax_net(path, "Softmax", 1, 11)
    with pytest.raises(ModelFileError, match=r"Softmax node 'norm' \(opset 11\) normalises axes 1\.\. of shape "
                                             r"\[1, 3, 4, 5\] together; only one axis is supported"):
        tinycc_ml.load_model(path)
    softmax_net(path, "Softmax", 3, 11)  # the last axis: the same in every opset
    X = np.random.default_rng(8).normal(size=(4, 3, 4, 5))
    np.testing.assert_allclose(tinycc_ml.load_model(path).scores(X.reshape(4, -1)), onnxruntime_scores(path, X),
                               rtol=1e-5, atol=1e-6)


ZOO_FILES = sorted(p.name for p in ZOO.glob("*.onnx"))


@pytest.mark.parametrize("file", ZOO_FILES)
def test_every_zoo_files_float_c_gives_onnxruntimes_outputs(file, tmp_path):
    """Every output value of every zoo file's float C within float32 rounding of onnxruntime's (what the file
    outputs: a dense net ending in Sigmoid or Softmax keeps its scores before it, the file's output its
    probabilities); the rows random in the input's range of the zoo's data (token ids: small indices)."""
    from tinycc_ml.importers.onnx import onnx_outputs

    require_target("host")
    path = ZOO / file
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape][1:]
    rng = np.random.default_rng(7)
    tokens = "int64" in session.get_inputs()[0].type
    X = rng.integers(0, 4, size=(6, *shape)) if tokens else rng.uniform(-1, 1, size=(6, *shape))
    want = onnxruntime_scores(path, X)
    model = tinycc_ml.load_model(path)
    predictor = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path).load()
    rows = X.reshape(len(X), -1)
    got = predictor.run_raw(rows.astype(np.int32))[0] if tokens else onnx_outputs(model, predictor, rows)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(want)))))


def test_an_unrolled_layers_time_steps_share_one_copy_of_the_steps_code(tmp_path):
    """Two LSTM layers unrolled over 32 time steps: each layer's cell and hidden-state code is written once (a
    function each time step calls, codegen/outline.py), not 32 times."""
    path = ZOO / "lstm2_activity.onnx"
    files = c_files(path, tmp_path)
    assert files["net.c"].count("= lstm_cell(") == 2 * 64  # the nodes' comments: 2 layers x 32 steps, 2 functions
    # the forget gate's input sum, per layer: the step function, and step 0 (its state a constant, another text) in
    # the one-row and the host's block function
    assert files["net.c"].count("f_a += ") == 2 * 3
    assert files["net.c"].count("static void net_step") == 4
