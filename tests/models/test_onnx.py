"""ONNX dense networks, written with onnx.helper as PyTorch exports them (Flatten, Gemm with
transB=1, Relu, ..., Softmax) or as Keras does (MatMul + Add): compiled predictions and probabilities
agree with onnx.reference; weights as external data and a dynamic batch are read; other ops and
dynamic dimensions are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.interp import run_float

onnx = pytest.importorskip("onnx")  # the [onnx] extra; CI installs it (dev extra)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RNG = np.random.default_rng(0)
D, H, L = 12, 16, 4


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def torch_like(path, hidden_act="Relu", final="Softmax", batch=1, extra_nodes=(), dims=None):
    """x[batch, D] -> Flatten -> Gemm(W1^T) -> act -> Gemm(W2^T) -> act -> Gemm(W3^T) -> final."""
    inits = [_init("W1", RNG.normal(size=(H, D)) / 3), _init("b1", RNG.normal(size=H) / 3),
             _init("W2", RNG.normal(size=(H, H)) / 3), _init("b2", RNG.normal(size=H) / 3),
             _init("W3", RNG.normal(size=(L, H)) / 3), _init("b3", RNG.normal(size=L) / 3)]
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "W1", "b1"], ["g1"], transB=1, name="fc1"),
             helper.make_node(hidden_act, ["g1"], ["h1"], name="act1"),
             helper.make_node("Gemm", ["h1", "W2", "b2"], ["g2"], transB=1, name="fc2"),
             helper.make_node(hidden_act, ["g2"], ["h2"], name="act2"),
             helper.make_node("Gemm", ["h2", "W3", "b3"], ["g3"], transB=1, name="fc3"), *extra_nodes]
    out = "g3"
    if final:
        nodes.append(helper.make_node(final, ["g3"], ["y"], name="final"))
        out = "y"
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims or [batch, D])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, L])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return model


def keras_like(path):
    """x[1, D] -> MatMul(W) -> Add(b) -> Tanh -> MatMul -> Add -> Sigmoid (one output: binary)."""
    inits = [_init("W1", RNG.normal(size=(D, H)) / 3), _init("b1", RNG.normal(size=H)),
             _init("W2", RNG.normal(size=(H, 1))), _init("b2", [0.1])]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Tanh", ["a1"], ["h1"]), helper.make_node("MatMul", ["h1", "W2"], ["m2"]),
             helper.make_node("Add", ["b2", "m2"], ["a2"]), helper.make_node("Sigmoid", ["a2"], ["y"])]
    graph = helper.make_graph(nodes, "keras", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return model


def reference(model, X):
    ev = ReferenceEvaluator(model)
    return np.concatenate([ev.run(None, {"x": row[None].astype(np.float32)})[0] for row in X])


@pytest.mark.parametrize("hidden_act", ["Relu", "Tanh", "Sigmoid"])
def test_torch_shaped_network_agrees_with_onnx_reference(tmp_path, hidden_act):
    require_target("host")
    proto = torch_like(tmp_path / "net.onnx", hidden_act)
    X = RNG.normal(size=(300, D))
    want = reference(proto, X)
    model = tinycc_ml.load_model(tmp_path / "net.onnx")
    assert model.family == "mlp" and model.hidden_sizes == [H, H]
    np.testing.assert_allclose(model.predict_proba(X), want, atol=1e-5)
    result = tinycc_ml.compile(tmp_path / "net.onnx", name="net")
    host = result.load()
    assert np.mean(host.predict(X) == np.argmax(want, axis=1)) >= 0.999
    np.testing.assert_allclose(host.predict_proba(X), want, atol=1e-5)
    int16 = tinycc_ml.compile(tmp_path / "net.onnx", precision="int16", calibration=X, name="net").load()
    assert np.mean(int16.predict(X) == np.argmax(want, axis=1)) >= 0.97


@pytest.mark.parametrize("hidden_act, final", [("Relu", "Softmax"), ("Tanh", None)])
def test_a_dense_chain_at_int8_is_tflites_quantisation_of_the_file_read_as_a_network(tmp_path, hidden_act, final):
    """precision int8 in the default dialect (TFLite's) of a dense chain: the file read as a float network and
    quantised as TFLite's converter does, its C equal to that int8 network's interpreter on every byte and its
    labels onnx.reference's on most rows; int8_dialect="pow2" keeps the mlp family's own int8."""
    from tinycc_ml.models.network import NetworkModel

    require_target("host")
    proto = torch_like(tmp_path / "net.onnx", hidden_act, final=final)
    X = RNG.normal(size=(300, D))
    labels = np.argmax(reference(proto, X), axis=1)
    result = tinycc_ml.compile(tmp_path / "net.onnx", precision="int8", calibration=X[:200], name="net")
    assert result.report["quantised_from_float"] and result.report["model"].startswith("network net.onnx")
    network = tinycc_ml.load_model(tmp_path / "net.onnx").network_form()
    assert isinstance(network, NetworkModel)
    int8 = network.quantise(X[:200])
    Xq = int8.quantise_input(X)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, int8.run_int8(Xq.reshape(len(X), *int8.input_shape)).reshape(len(X), -1))
    assert np.mean(predictions == labels) >= 0.95  # int8 steps of the scores (softmax's 1/256 ties: the first)
    pow2 = tinycc_ml.compile(tmp_path / "net.onnx", precision="int8", int8_dialect="pow2", calibration=X[:200],
                             name="net")
    assert pow2.report["model"].startswith("mlp") and "quantised_from_float" not in pow2.report
    assert np.mean(pow2.load().predict(X) == labels) >= 0.95


def test_keras_shaped_binary_network_and_the_command_line(tmp_path, capsys):
    require_target("host")
    proto = keras_like(tmp_path / "k.onnx")
    X = RNG.normal(size=(200, D))
    p = reference(proto, X)[:, 0]
    host = tinycc_ml.compile(tmp_path / "k.onnx", name="k").load()
    np.testing.assert_array_equal(host.predict(X), (p > 0.5).astype(int))
    np.testing.assert_allclose(host.predict_proba(X)[:, 1], p, atol=1e-5)
    assert cli.main(["compile", str(tmp_path / "k.onnx"), "-o", str(tmp_path / "out"), "--name", "k"]) == 0
    assert (tmp_path / "out" / "k.h").exists()


def _nan_weight(path):
    proto = torch_like(path)
    W2 = numpy_helper.to_array(proto.graph.initializer[2]).copy()
    W2[3, 1] = np.nan
    proto.graph.initializer[2].CopyFrom(_init("W2", W2))
    onnx.save(proto, str(path))


@pytest.mark.parametrize("make, message", [
    (_nan_weight, r"W2 holds a non-finite value \(nan\) at index \(3, 1\)"),
    (lambda p: torch_like(p, extra_nodes=[helper.make_node("Conv", ["x", "W1"], ["c"], name="conv")]),
     r"Conv node 'conv' takes a tensor of shape \[1, 12\]; expected \(batch, channels, length\)"),
    (lambda p: torch_like(p, dims=[1, "features"]), "dimension 1 is dynamic .features."),
    (lambda p: torch_like(p, final="Softsign"), "op Softsign"),
    (lambda p: p.write_bytes(b"not a protobuf at all \x00\xff"), "not a readable ONNX model"),
])
def test_bad_onnx_files_are_refused(tmp_path, capsys, make, message):
    path = tmp_path / "bad.onnx"
    make(path)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_external_data_and_a_dynamic_batch_are_read(tmp_path):
    """PyTorch's default export: the weights in a data file next to the model, the batch symbolic."""
    proto = torch_like(tmp_path / "inside.onnx")
    onnx.save(proto, str(tmp_path / "outside.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="w.bin", size_threshold=0)
    proto = onnx.load(str(tmp_path / "inside.onnx"))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(proto, str(tmp_path / "dynamic.onnx"))
    X = RNG.normal(size=(20, D))
    inside = tinycc_ml.load_model(tmp_path / "inside.onnx")
    assert (tmp_path / "w.bin").stat().st_size > 0
    for name in ("outside.onnx", "dynamic.onnx"):
        np.testing.assert_array_equal(tinycc_ml.load_model(tmp_path / name).scores(X), inside.scores(X))


def chained(path, layers, final=None, width=6, dim=5, keras=False):
    """A dense network with each layer's activations given by name (``layers``: one list of op names per
    layer, the last layer's width its own): Gemm(transB=1) or, with ``keras``, MatMul + Add."""
    nodes, inits, current = [helper.make_node("Flatten", ["x"], ["f"], name="flatten")], [], "f"
    widths = [dim] + [width] * (len(layers) - 1) + [layers[-1][0]]
    for i, (acts, (n_in, n_out)) in enumerate(zip([acts for acts in (*layers[:-1], layers[-1][1])],
                                                   zip(widths[:-1], widths[1:]))):
        W, b = RNG.normal(size=(n_out, n_in)) / np.sqrt(n_in) * 2, RNG.normal(size=n_out) / 2
        if keras:
            inits += [_init(f"W{i}", W.T), _init(f"b{i}", b)]
            nodes += [helper.make_node("MatMul", [current, f"W{i}"], [f"m{i}"], name=f"mm{i}"),
                      helper.make_node("Add", [f"m{i}", f"b{i}"], [f"z{i}"], name=f"add{i}")]
        else:
            inits += [_init(f"W{i}", W), _init(f"b{i}", b)]
            nodes.append(helper.make_node("Gemm", [current, f"W{i}", f"b{i}"], [f"z{i}"], transB=1, name=f"fc{i}"))
        current = f"z{i}"
        for j, op in enumerate(acts):
            nodes.append(helper.make_node(op, [current], [f"a{i}_{j}"], name=f"act{i}_{j}"))
            current = f"a{i}_{j}"
    if final:
        nodes.append(helper.make_node(final, [current], ["y"], name="final"))
        current = "y"
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, widths[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return model


def what_onnx_says(model, layers, final, X):
    """The model's answer to compare with onnx.reference's output: probabilities (softmax, a last Sigmoid),
    else the scores (class scores, a regression value)."""
    acts = [op for op in layers[-1][1] if op != "Identity"]  # Identity: a no-op
    if final == "Softmax" or (acts and acts[-1] == "Sigmoid"):
        p = model.predict_proba(X)
        return p[:, 1:] if layers[-1][0] == 1 else p
    return model.scores(X)


ACTS = ["Relu", "Tanh", "Sigmoid", "Identity"]


@settings(max_examples=40, deadline=None)
@given(layers=st.lists(st.lists(st.sampled_from(ACTS), max_size=2), min_size=0, max_size=3),
       last=st.tuples(st.sampled_from([1, 3]), st.lists(st.sampled_from(ACTS), max_size=2)),
       final=st.sampled_from([None, "Softmax"]), keras=st.booleans())
def test_any_chain_of_the_supported_ops_reads_as_onnx_reference_computes(tmp_path_factory, layers, last, final,
                                                                        keras):
    if final == "Softmax" and last[0] == 1:
        final = None  # a softmax of one output is refused (below)
    layers = [*layers, last]
    path = tmp_path_factory.mktemp("chain") / "net.onnx"
    proto = chained(path, layers, final, keras=keras)
    X = RNG.normal(size=(20, 5)) * 2
    model = tinycc_ml.load_model(path)
    assert model.hidden_sizes == [6] * (len(layers) - 1)
    np.testing.assert_allclose(what_onnx_says(model, layers, final, X), reference(proto, X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run_float(model.lower(), X)["scores"], model.scores(X), rtol=1e-4, atol=1e-5)


# Relu then Tanh then Sigmoid then Softmax across layers; two activations on one layer; a hidden layer
# without one; Sigmoid under a Tanh at the end (binary); Relu at the end of a regression network.
MIXED = [
    ([["Relu"], ["Tanh"], ["Sigmoid"], (4, [])], "Softmax", False, True),
    ([["Tanh", "Relu"], ["Identity"], (3, ["Sigmoid"])], None, True, False),
    ([["Sigmoid"], (1, ["Tanh", "Sigmoid"])], None, False, True),
    ([["Relu"], ["Tanh"], (1, ["Relu"])], None, True, False),
]


@pytest.mark.parametrize("layers, final, keras, int16", MIXED)
def test_mixed_activation_networks_compile_and_agree_with_onnx_reference(tmp_path, layers, final, keras, int16):
    require_target("host")
    proto = chained(tmp_path / "m.onnx", layers, final, keras=keras)
    X = RNG.normal(size=(200, 5)) * 2
    want = reference(proto, X)
    model = tinycc_ml.load_model(tmp_path / "m.onnx")
    assert model.activation is None and "mixed" in str(model.meta())
    tinycc_ml.save_model(model, tmp_path / "m.npz")  # the chains survive the model file
    again = tinycc_ml.load_model(tmp_path / "m.npz")
    assert again.chains == model.chains and again.output == model.output
    host = tinycc_ml.compile(tmp_path / "m.npz", name="m").load()
    if model.task.get("kind") == "regression":
        np.testing.assert_allclose(host.predict(X), want[:, 0], rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_allclose(what_onnx_says(host, layers, final, X), want, atol=1e-5)
        np.testing.assert_array_equal(host.predict(X), model.predict(X))
    if not int16:
        return
    int16 = tinycc_ml.compile(tmp_path / "m.onnx", precision="int16", calibration=X, name="m").load()
    if model.task.get("kind") == "regression":
        assert np.max(np.abs(int16.predict(X) - want[:, 0])) < 0.05
    else:
        assert np.mean(np.all(np.reshape(int16.predict(X) == model.predict(X), (len(X), -1)), axis=1)) >= 0.97


@pytest.mark.parametrize("layers, final, message", [
    ([["Relu", "Softmax"], (3, [])], None, "Gemm after the final Softmax"),
    ([(1, [])], "Softmax", "a softmax output needs at least two classes"),
])
def test_what_cannot_be_a_dense_network_is_refused(tmp_path, layers, final, message):
    chained(tmp_path / "m.onnx", layers, final)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(tmp_path / "m.onnx")


def test_an_activation_on_the_input_and_a_bias_after_an_activation_are_refused(tmp_path):
    proto = chained(tmp_path / "m.onnx", [["Relu"], (3, [])], keras=True)
    nodes = list(proto.graph.node)
    moved = helper.make_node("Relu", ["f"], ["f_relu"], name="input_relu")
    nodes[1].input[0] = "f_relu"
    del proto.graph.node[:]
    proto.graph.node.extend([nodes[0], moved, *nodes[1:]])
    onnx.save(proto, str(tmp_path / "in.onnx"))
    with pytest.raises(ModelFileError, match="'input_relu' does not follow a dense layer"):
        tinycc_ml.load_model(tmp_path / "in.onnx")
    proto = chained(tmp_path / "m.onnx", [["Relu"], (3, [])], keras=True)
    nodes = list(proto.graph.node)  # flatten, mm0, add0, act0_0, mm1, add1: swap add0 and act0_0
    nodes[2].input[0], nodes[3].input[0] = "a0_0", "m0"
    nodes[4].input[0] = "z0"
    del proto.graph.node[:]
    proto.graph.node.extend([nodes[0], nodes[1], nodes[3], nodes[2], *nodes[4:]])
    onnx.save(proto, str(tmp_path / "bias.onnx"))
    with pytest.raises(ModelFileError, match="'add0' does not follow a MatMul or Gemm"):
        tinycc_ml.load_model(tmp_path / "bias.onnx")


def _small_net(path, nodes, inits, x_dims=(1, 4), out="y", out_dims=(1, 3)):
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(out_dims))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


W43 = np.random.default_rng(36).normal(size=(4, 3))  # its own generator: RNG's draws stay as they were


def _with_dims(tensor, dims):
    """The initializer claiming ``dims`` its data does not have (helper.make_tensor would refuse it)."""
    del tensor.dims[:]
    tensor.dims.extend(dims)
    return tensor


@pytest.mark.parametrize("nodes, inits, x_dims, message", [
    # issue 36, item 10: each was a traceback or a model onnxruntime refuses
    ([helper.make_node("MatMul", ["x", "W"], ["y"])],
     [_with_dims(_init("W", W43), [4, 4])],
     (1, 4), r"initializer 'W' \(dims \[4, 4\]\) cannot be read"),
    ([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b", "b"], ["y"])],
     [_init("W", W43), _init("b", np.ones(3))], (1, 4), "Add node .* has 3 inputs; Add takes two"),
    ([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"], domain="my.ops")],
     [_init("W", W43)], (1, 4), "is Relu of domain 'my.ops', not the standard ONNX op"),
    ([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m", "y"], ["y"])],
     [_init("W", W43)], (1, 4), "takes its own output as an input"),
    ([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
     [_init("W", W43), _init("b", np.ones((3, 1)))], (1, 4), r"adds shape \(3, 1\) to 3 outputs"),
    ([helper.make_node("Gemm", ["x", "W"], ["y"])], [_init("W", W43)], (1, 1, 4), "takes a rank-3 input"),
    ([helper.make_node("Gemm", ["x", "W", "b"], ["y"])], [_init("W", W43), _init("b", np.ones((3, 1)))], (1, 4),
     r"bias has shape \(3, 1\)"),
])
def test_onnx_graphs_onnxruntime_refuses_are_refused(tmp_path, nodes, inits, x_dims, message):
    path = _small_net(tmp_path / "m.onnx", nodes, inits, x_dims)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)


def test_the_bias_shapes_onnx_broadcasts_onto_a_row_are_read(tmp_path):
    for shape in [(), (1,), (3,), (1, 3)]:
        path = _small_net(tmp_path / "m.onnx", [helper.make_node("MatMul", ["x", "W"], ["m"]),
                                                helper.make_node("Add", ["m", "b"], ["y"])],
                          [_init("W", W43), _init("b", np.full(shape, 0.5))])
        np.testing.assert_allclose(tinycc_ml.load_model(path).biases[0], 0.5)
