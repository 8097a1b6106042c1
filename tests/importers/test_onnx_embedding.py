"""PyTorch's nn.Embedding through ONNX: the network's input is integer token indices (int64 in the file, int32_t in
the C) that a Gather of a constant table reads; the float network after it as any other. The zoo's token models
(scripts/pytorch_zoo.py, both exporters) against onnxruntime, in the host C and on a chip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import CompileError, DataError, ModelFileError

onnxruntime = pytest.importorskip("onnxruntime")

ZOO = Path(__file__).resolve().parents[1] / "data" / "pytorch_zoo"


def tokens(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 24, size=(rows, 12))  # the zoo's vocabulary of 24, 12 tokens


def onnxruntime_scores(path: Path, X: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[None].astype(np.int64)})[0].reshape(1, -1) for x in X])


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name", ["embedding_mean", "embedding_conv1d"])
def test_embedding_networks_agree_with_onnxruntime(name, exporter, tmp_path):
    """Embedding, then a mean over the tokens, or a Conv1d over them and a max: the C takes int32_t indices."""
    require_target("host")
    path = ZOO / f"{name}{exporter}.onnx"
    X = tokens(40)
    want = onnxruntime_scores(path, X)
    model = tinycc_ml.load_model(path)
    assert model.index_input and not model.is_quantised
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-5, atol=1e-6)
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path)
    assert "const int32_t *x" in result.files["net.h"] or "int32_t x[" in result.files["net.h"]
    scores, labels = result.load().run_raw(X.astype(np.int32))
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, np.argmax(want, axis=1))


def test_an_embedding_network_runs_on_the_cortex_m4_as_on_the_host(tmp_path):
    require_target("cortex-m4")
    model = tinycc_ml.load_model(ZOO / "embedding_conv1d.onnx")
    X = tokens(3, seed=1)
    host = tinycc_ml.compile(model, target="host", name="net").load().run_raw(X.astype(np.int32))[0]
    result = tinycc_ml.compile(model, target="cortex-m4", name="net", out_dir=tmp_path)
    run = get_backend("cortex-m4").simulate(tmp_path, result.output, X)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(host.shape), host)


@pytest.mark.parametrize("precision, options, what", [("int16", {}, "precision 'int16'"),
                                                     ("int8", {"int8_dialect": "pow2"}, "int8_dialect='pow2'")])
def test_the_projects_fixed_point_of_an_embedding_network_is_refused_by_name(precision, options, what):
    model = tinycc_ml.load_model(ZOO / "embedding_mean.onnx")
    with pytest.raises(CompileError, match=rf"its input is integer indices \(an Embedding's\); {what} is not "
                                           r"implemented .*compile it at precision float or int8 \(TFLite's dialect\)"):
        tinycc_ml.compile(model, target="host", precision=precision, calibration=tokens(16), **options)


@pytest.mark.parametrize("name", ["embedding_mean", "embedding_conv1d"])
def test_tflites_int8_of_an_embedding_network_is_the_interpreter_in_c(name, tmp_path):
    """TFLite's int8: the indices stay int32, the table int8 over its whole range (GATHER keeps it), the rest
    calibrated: the host C equals the int8 interpreter on every byte, its labels onnxruntime's on most rows."""
    require_target("host")
    path = ZOO / f"{name}.onnx"
    model = tinycc_ml.load_model(path)
    calibration, X = tokens(64), tokens(80, seed=5)
    result = tinycc_ml.compile(model, target="host", name="net", precision="int8", calibration=calibration,
                               out_dir=tmp_path)
    int8 = model.quantise(calibration)
    g = int8.graph
    (gather,) = [n for n in g.order() if g.op(n) == "gather"]
    table, indices = g.node(gather).inputs
    assert g.type(indices).dtype.is_integer and not g.type(indices).dtype.is_quantised
    values = np.asarray(model.graph.node(model.graph.node([n for n in model.graph.order()
                                                            if model.graph.op(n) == "gather"][0]).inputs[0])
                        .attrs["value"])
    dtype = g.type(table).dtype  # the whole table representable: no entry clipped
    assert dtype.qscales[0] * (-128 - dtype.zero_point) <= values.min() + dtype.qscales[0] / 2
    assert values.max() - dtype.qscales[0] / 2 <= dtype.qscales[0] * (127 - dtype.zero_point)
    scores, labels = result.load().run_raw(X.astype(np.int32))
    np.testing.assert_array_equal(scores, int8.run_int8(X.reshape(len(X), *int8.input_shape)).reshape(len(X), -1))
    want = onnxruntime_scores(path, X)
    assert np.mean(labels == np.argmax(want, axis=1)) >= 0.95


def index_net(path: Path, nodes: list, shape=(1, 5), kind=None) -> None:
    """A network of int64 input ``x`` and the given nodes (the last writes ``y``) with a 7 x 4 table ``E``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(size=(7, 4)).astype(np.float32), "E"),
             numpy_helper.from_array(rng.normal(size=(3, 4)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array([0, 2], np.int64), "two")]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", kind or TensorProto.INT64,
                                                                           list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def test_an_int32_index_input_and_a_gather_axis_of_the_table(tmp_path):
    """int32 indices, the table's rows gathered, then a Gemm of the flattened embeddings."""
    from onnx import TensorProto, helper

    path = tmp_path / "net.onnx"
    index_net(path, [helper.make_node("Gather", ["E", "x"], ["e"], name="embed", axis=0),
                     helper.make_node("ReduceMean", ["e"], ["m"], name="mean", axes=[1], keepdims=0),
                     helper.make_node("Gemm", ["m", "W"], ["y"], name="head", transB=1)], kind=TensorProto.INT32)
    X = np.random.default_rng(4).integers(0, 7, size=(10, 5))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[None].astype(np.int32)})[0] for x in X])
    np.testing.assert_allclose(tinycc_ml.load_model(path).scores(X), want, rtol=1e-5, atol=1e-6)


def test_negative_indices_count_from_the_end_and_indices_outside_are_an_error(tmp_path):
    """ONNX's Gather takes -7..6 for 7 rows (onnxruntime too): the interpreter and the C agree with onnxruntime;
    beyond, onnxruntime fails, the interpreter raises DataError and the C reports it in net_status()."""
    from onnx import TensorProto, helper

    path = tmp_path / "net.onnx"
    index_net(path, [helper.make_node("Gather", ["E", "x"], ["e"], name="embed", axis=0),
                     helper.make_node("ReduceMean", ["e"], ["m"], name="mean", axes=[1], keepdims=0),
                     helper.make_node("Gemm", ["m", "W"], ["y"], name="head", transB=1)], kind=TensorProto.INT32)
    X = np.random.default_rng(5).integers(-7, 7, size=(10, 5))
    X[0] = [-7, -1, 0, 6, -4]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[None].astype(np.int32)})[0] for x in X])
    model = tinycc_ml.load_model(path)
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-5, atol=1e-6)
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path / "c")
    predictor = result.load()
    np.testing.assert_allclose(predictor.run_raw(X.astype(np.int32))[0], want, rtol=1e-5, atol=1e-6)
    bad = np.asarray([[0, 1, 7, 2, 3]])
    with pytest.raises(Exception, match="out of bounds|indices element"):
        session.run(None, {"x": bad.astype(np.int32)})
    with pytest.raises(DataError, match=r"row 0: index 7 \(at \[0, 2\] of the indices\) is outside axis 0 of 7"):
        model.scores(bad)
    with pytest.raises(DataError, match=r"row 0 holds a value where TFLite Micro.s Invoke stops with an "
                                          r"error \(an index outside its tensor"):
        predictor.run_raw(bad.astype(np.int32))


def test_integer_indices_read_by_anything_but_a_gather_of_a_constant_are_refused_by_name(tmp_path):
    from onnx import helper

    path = tmp_path / "net.onnx"
    index_net(path, [helper.make_node("Gather", ["x", "two"], ["g"], name="pick", axis=1),
                     helper.make_node("Gather", ["E", "g"], ["y"], name="embed")])
    with pytest.raises(ModelFileError, match=r"Gather node 'pick' reads the integer input 'x'; only a Gather of a "
                                             r"constant table \(an Embedding\) reads integer indices"):
        tinycc_ml.load_model(path)
    index_net(path, [helper.make_node("Gather", ["E", "x"], ["e"], name="embed"),
                     helper.make_node("Flatten", ["e"], ["f"], name="flat"),
                     helper.make_node("Gather", ["E", "f"], ["y"], name="again")])
    with pytest.raises(ModelFileError, match=r"Gather node 'again' takes the computed float tensor 'f' as indices "
                                             r"of the constant 'E'; only the network's integer input"):
        tinycc_ml.load_model(path)


def test_an_input_of_another_integer_type_is_refused_by_name(tmp_path):
    from onnx import TensorProto, helper

    path = tmp_path / "net.onnx"
    index_net(path, [helper.make_node("Gather", ["E", "x"], ["y"], name="embed")], kind=TensorProto.INT16)
    with pytest.raises(ModelFileError, match=r"input 'x' has ONNX element type 5; float32 \(type 1\) is read, and "
                                             r"integers \(int32, int64: indices\) as the first input"):
        tinycc_ml.load_model(path)
