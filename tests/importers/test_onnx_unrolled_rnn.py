"""The dynamo exporter's unrolled torch.nn.RNN read back as one RNN node (importers/onnx_unrolled_rnn.py): the
same C as the TorchScript exporter's RNN node, steppable; and a graph that differs from the pattern anywhere is
left unrolled, node by node, still onnxruntime's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import CompileError

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "data" / "pytorch_zoo"
DYNAMO = ZOO / "rnn_activity.onnx"  # 32 steps of 3 features, hidden 16, zero initial state


def rnn_nodes(path: Path) -> tuple:
    return tinycc_ml.load_model(path).recurrent_layers


def scores_close(path: Path, rows: int = 8) -> None:
    """The float interpreter's scores are onnxruntime's to float32 rounding, labels equal."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    X = np.random.default_rng(3).normal(size=(rows, 32 * 3)).astype(np.float32)
    want = np.concatenate([session.run(None, {session.get_inputs()[0].name: x.reshape(1, 32, 3)})[0] for x in X])
    got = tinycc_ml.load_model(path).scores(X)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.argmax(got, axis=1), np.argmax(want, axis=1))


def edited(tmp_path: Path, edit) -> Path:
    """The dynamo file with ``edit(graph)`` applied, saved whole (weights inside)."""
    model = onnx.load(str(DYNAMO))  # its .onnx.data read in
    edit(model.graph)
    path = tmp_path / "edited.onnx"
    onnx.save(model, str(path))
    return path


def node_reading(graph, op: str, name: str):
    return next(n for n in graph.node if n.op_type == op and name in n.input)


def another_weight(graph, name: str, like: str, nudge: float) -> None:
    value = numpy_helper.to_array(next(t for t in graph.initializer if t.name == like)).copy()
    value.reshape(-1)[0] += np.float32(nudge)
    graph.initializer.append(numpy_helper.from_array(value, name))


def other_r(graph):  # step 5's recurrent weights differ from the other steps'
    mm = node_reading(graph, "MatMul", "tanh_4")
    another_weight(graph, "R_other", mm.input[1], 0.25)
    mm.input[1] = "R_other"


def other_bias(graph):  # step 7's b_hh differs
    add = next(n for n in graph.node if n.op_type == "Add" and n.output[0] == "linear_8")
    another_weight(graph, "b_other", "layer.bias_hh_l0", -0.5)
    add.input[1] = "b_other"


def swapped_steps(graph):  # steps 3 and 4 read each other's slice of the input's product
    a, b = (next(n for n in graph.node if n.op_type == "Add" and f"getitem_{k}" in n.input) for k in (4, 5))
    a.input[list(a.input).index("getitem_4")], b.input[list(b.input).index("getitem_5")] = "getitem_5", "getitem_4"


def state_read_outside(graph):  # the head reads step 5's state beside the last one
    gemm = next(n for n in graph.node if n.op_type == "Gemm")
    graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
    k = list(graph.node).index(gemm)
    graph.node.insert(k, helper.make_node("Add", [gemm.input[0], "step5"], ["mixed"]))
    graph.node.insert(k, helper.make_node("Squeeze", ["tanh_5", "axis0"], ["step5"]))
    gemm.input[0] = "mixed"


def test_the_dynamo_files_unrolled_rnn_is_one_rnn_node_and_the_torchscript_files_c():
    assert rnn_nodes(DYNAMO) and rnn_nodes(ZOO / "rnn_activity_ts.onnx")
    graph = tinycc_ml.load_model(DYNAMO).graph
    assert sum(graph.op(n) == "tensor_tanh" for n in graph.order()) == 32  # the unrolled layer's steps, once each
    scores_close(DYNAMO)


@pytest.mark.parametrize("edit", [other_r, other_bias, swapped_steps, state_read_outside])
def test_a_graph_that_differs_from_the_pattern_stays_unrolled_and_exact(edit, tmp_path):
    path = edited(tmp_path, edit)
    assert rnn_nodes(path) == ()
    scores_close(path)
    with pytest.raises(CompileError, match=r"this one has none \(an exporter may have unrolled one into MatMul and "
                                           r"Tanh nodes: compile it unrolled\)"):
        tinycc_ml.load_model(path, recurrent="step")


def test_a_relu_rnn_is_read_with_its_activation(tmp_path):
    def relu(graph):
        for node in graph.node:
            if node.op_type == "Tanh":
                node.op_type = "Relu"

    path = edited(tmp_path, relu)
    assert rnn_nodes(path)
    graph = tinycc_ml.load_model(path).graph
    assert not any(graph.op(n) == "tensor_tanh" for n in graph.order())
    scores_close(path)


def test_the_dynamo_file_steps_as_the_torchscript_file_does(tmp_path):
    """One time step per call from the dynamo file: the same C as the TorchScript file's stepped build (int16,
    calibrated on the same steps), and its float stream's last step is onnxruntime's on the whole sequence."""
    require_target("host")
    steps = np.random.default_rng(4).normal(size=(64, 3))
    files = []
    for name in ("rnn_activity", "rnn_activity_ts"):
        folder = tmp_path / name
        folder.mkdir()
        for f in ZOO.glob(f"{name}.onnx*"):  # the .onnx renamed (the C names it), its .onnx.data as it names it
            (folder / ("net.onnx" if f.suffix == ".onnx" else f.name)).write_bytes(f.read_bytes())
        model = tinycc_ml.load_model(folder / "net.onnx", recurrent="step")
        files.append(tinycc_ml.compile(model, target="host", precision="int16", calibration=steps, name="net").files)
    assert files[0] == files[1]
    result = tinycc_ml.compile(DYNAMO, target="host", recurrent="step", name="net", out_dir=tmp_path / "float")
    sequence = np.random.default_rng(5).normal(size=(32, 3)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(DYNAMO), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: sequence[None]})[0][0]
    predictor = result.load()
    predictor.reset()
    scores, _ = predictor.run_raw(sequence)
    np.testing.assert_allclose(scores[-1], want, rtol=1e-4, atol=1e-5)
