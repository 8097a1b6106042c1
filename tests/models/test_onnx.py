"""ONNX dense networks, written with onnx.helper as PyTorch exports them (Flatten, Gemm with
transB=1, Relu, ..., Softmax) or as Keras does (MatMul + Add): compiled predictions and probabilities
agree with onnx.reference; other ops, dynamic shapes, external data are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import ModelFileError

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


def _external(path):
    proto = torch_like(path)
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)


@pytest.mark.parametrize("make, message", [
    (lambda p: torch_like(p, extra_nodes=[helper.make_node("Conv", ["x", "W1"], ["c"], name="conv")]),
     "op Conv .node 'conv'. is not supported"),
    (lambda p: torch_like(p, dims=["batch", D]), "dimension 0 is dynamic .batch."),
    (_external, "initializer 'W1' is stored as external data"),
    (lambda p: torch_like(p, final="LogSoftmax"), "op LogSoftmax"),
    (lambda p: p.write_bytes(b"not a protobuf at all \x00\xff"), "not a readable ONNX model"),
])
def test_bad_onnx_files_are_refused(tmp_path, capsys, make, message):
    path = tmp_path / "bad.onnx"
    make(path)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_mixed_hidden_activations_are_refused(tmp_path):
    proto = torch_like(tmp_path / "m.onnx")
    proto.graph.node[4].op_type = "Tanh"  # act2: Relu then Tanh
    onnx.save(proto, str(tmp_path / "m.onnx"))
    with pytest.raises(ModelFileError, match=r"mix activations \['relu', 'tanh'\]"):
        tinycc_ml.load_model(tmp_path / "m.onnx")
