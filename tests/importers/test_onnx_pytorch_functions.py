"""PyTorch's float functions and tensor moves that its exporters write as Softplus, Mish, Selu, Celu, Greater + Where,
ReduceL2 + Clip + Expand + Div (F.normalize) and DepthToSpace (PixelShuffle), each spelled as one of the exporters
spells it (the models are built here with onnx.helper: the suite does not import torch), held to onnxruntime on
random rows and edge values: the float C to float32 rounding, the integer builds where a form exists (DepthToSpace,
LeakyRelu read back from a Where) to the interpreters bit for bit, the others refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.importers.test_onnx_pytorch import assert_chip_equals_interpreter, check_builds, save_net
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.interp import run_float

onnxruntime = pytest.importorskip("onnxruntime")
F32 = np.float32
# values where the functions change branch or would overflow a naive formula (e^x for softplus at 100)
EDGES = np.array([0.0, -0.0, 1e-7, -1e-7, 1e-3, -1e-3, 0.5, -0.5, 15.9, 16.1, 19.99, 20.0, 20.01, -20.0, 50.0, -50.0,
                  88.8, -88.8, 100.0, -100.0, 1e4, -1e4], F32)


def onnxruntime_run(path: Path, X: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name, shape = session.get_inputs()[0].name, session.get_inputs()[0].shape
    return np.concatenate([session.run(None, {name: x.reshape(shape).astype(F32)})[0].reshape(1, -1) for x in X])


def edge_rows(width: int, n: int = 24, seed: int = 0) -> np.ndarray:
    """Random rows, then rows of every edge value, then an all-zero row."""
    rng = np.random.default_rng(seed)
    edges = np.resize(EDGES, (-(-EDGES.size // width)) * width).reshape(-1, width)
    return np.concatenate([rng.normal(scale=3.0, size=(n, width)), edges, np.zeros((1, width))]).astype(F32)


def assert_float32_close(got, want, ulps: int = 4) -> None:
    """Within a few float32 ulps of each value (of 1e-30 for results nearer 0: onnxruntime flushes subnormals)."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    limit = ulps * np.spacing(np.maximum(np.abs(want), F32(1e-30)))
    bad = np.abs(got.astype(np.float64) - want.astype(np.float64)) > limit
    assert not np.any(bad), (got[bad][:5], want[bad][:5])


def host_float(path: Path, X: np.ndarray, tmp_path: Path, name: str = "net"):
    """The model, and its float C's scores on the host."""
    require_target("host")
    model = tinycc_ml.load_model(path)
    scores, _ = tinycc_ml.compile(model, target="host", name=name, out_dir=tmp_path / f"{path.stem}_c").load() \
        .run_raw(X)
    return model, np.asarray(scores).reshape(len(X), -1)


def float_ops(model) -> list[str]:
    return [model.graph.op(n) if model.graph.op(n) != "float_unary" else model.graph.node(n).attrs["function"]
            for n in model.graph.order() if model.graph.op(n) not in ("const", "input")]


# ---------------------------------------------------------------- Softplus, Mish, Selu, Celu: float_unary functions

FUNCTION_NODES = {
    "softplus": ("Softplus", {}), "mish": ("Mish", {}), "selu": ("Selu", {}),
    "selu_given": ("Selu", {"alpha": 1.3, "gamma": 0.9}), "celu": ("Celu", {"alpha": 0.7}), "celu_1": ("Celu", {}),
}


def function_net(path: Path, op: str, attrs: dict) -> None:
    """y = op(x) on (1, 8): the function meets the edge values themselves."""
    from onnx import helper

    save_net(path, [helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)], {}, [1, 8], opset=18)


@pytest.mark.parametrize("name", sorted(FUNCTION_NODES))
def test_float_functions_equal_onnxruntime_to_float32_rounding(name, tmp_path):
    op, attrs = FUNCTION_NODES[name]
    function_net(tmp_path / f"{name}.onnx", op, attrs)
    X = edge_rows(8)
    want = onnxruntime_run(tmp_path / f"{name}.onnx", X)
    model, got = host_float(tmp_path / f"{name}.onnx", X, tmp_path)
    assert float_ops(model) == [op.lower()]
    assert np.all(np.isfinite(want))
    # onnxruntime's exp and tanh are its own vectorised approximations (MLAS): a few ulps of the function's scale
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=4 * 2.0**-23)
    small = np.abs(want) < 1e-3  # the tails (softplus(-100) = 3.7e-44): to the value's own scale
    np.testing.assert_allclose(got[small], want[small], rtol=1e-4, atol=1e-30)
    interpreted = run_float(model.graph, X[:, None])["scores"].reshape(got.shape)
    np.testing.assert_allclose(interpreted, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["softplus", "selu_given"])
def test_float_functions_are_refused_by_name_in_fixed_point(name, tmp_path):
    op, attrs = FUNCTION_NODES[name]
    function_net(tmp_path / "f.onnx", op, attrs)
    model = tinycc_ml.load_model(tmp_path / "f.onnx")
    X = edge_rows(8)[:24]
    with pytest.raises(CompileError, match=r"op float_unary \(function " + op.lower() + r"\) has no form in the "
                                           r"project's fixed point"):
        tinycc_ml.compile(model, target="host", precision="int16", calibration=X)
    with pytest.raises(CompileError, match=r"op float_unary \(function " + op.lower() + r"\) has no int8"):
        tinycc_ml.compile(model, target="host", precision="int8", calibration=X)


def test_an_op_of_a_later_opset_is_refused_as_onnxruntime_refuses_it(tmp_path):
    """Mish is an op of opset 18: a file of opset 17 holding one is refused by onnxruntime, and here by name."""
    function_net(tmp_path / "m.onnx", "Mish", {})
    import onnx

    model = onnx.load(str(tmp_path / "m.onnx"))
    model.opset_import[0].version = 17
    onnx.save(model, str(tmp_path / "m17.onnx"))
    with pytest.raises(Exception, match="Mish"):
        onnxruntime.InferenceSession(str(tmp_path / "m17.onnx"), providers=["CPUExecutionProvider"])
    with pytest.raises(ModelFileError, match=r"node 'mish' \(Mish\) is an op of opset 18 on; the file's opset is 17"):
        tinycc_ml.load_model(tmp_path / "m17.onnx")


def test_celu_of_alpha_zero_is_refused_by_name(tmp_path):
    function_net(tmp_path / "c.onnx", "Celu", {"alpha": 0.0})
    with pytest.raises(ModelFileError, match=r"Celu node 'celu': alpha 0"):
        tinycc_ml.load_model(tmp_path / "c.onnx")


# ---------------------------------------------------------------- both exporters' spellings read as one op

def dense_function_net(path: Path, nodes_of, opset: int = 17, extra=None) -> None:
    """Gemm (8 -> 16), the activation's nodes (``nodes_of(h, out)``) on its output, Gemm (16 -> 3)."""
    from onnx import helper

    rng = np.random.default_rng(5)
    inits = {"W": rng.normal(scale=2.0, size=(8, 16)).astype(F32), "b": rng.normal(size=16).astype(F32),
             "V": rng.normal(size=(16, 3)).astype(F32), **(extra or {})}
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="a"), *nodes_of("h", "act"),
             helper.make_node("Gemm", ["act", "V"], ["y"], name="b")]
    save_net(path, nodes, inits, [1, 8], opset=opset)


def mish_torchscript(h, out):
    from onnx import helper

    return [helper.make_node("Softplus", [h], ["sp"], name="/Softplus"), helper.make_node("Tanh", ["sp"], ["t"],
                                                                                           name="/Tanh"),
            helper.make_node("Mul", ["t", h], [out], name="/Mul")]


def softplus_dynamo(threshold: float):
    def nodes(h, out):
        from onnx import helper

        return [helper.make_node("Softplus", [h], ["tmp"], name="n3"),
                helper.make_node("Greater", [h, "threshold"], ["big"], name="node_gt"),
                helper.make_node("Where", ["big", h, "tmp"], [out], name="node_softplus")]
    return nodes, {"threshold": np.array(threshold, F32)}


def one_node(op, **attrs):
    def nodes(h, out):
        from onnx import helper

        return [helper.make_node(op, [h], [out], name=op.lower(), **attrs)]
    return nodes


def c_text(model, tmp_path: Path, label: str) -> str:
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path / label)
    return "".join(Path(p).read_text() for p in sorted(result.paths))


def test_both_exporters_mish_and_softplus_give_one_op_and_the_same_c(tmp_path):
    """TorchScript's Mul(x, Tanh(Softplus(x))) is dynamo's Mish node; dynamo's Where(x > 20, x, Softplus(x))
    (F.softplus's threshold, exact in float32 above 16) is TorchScript's Softplus node: one float_unary each, the same
    C."""
    nodes, extra = softplus_dynamo(20.0)
    spellings = {"mish": [(mish_torchscript, 17, None), (one_node("Mish"), 18, None)],
                 "softplus": [(nodes, 18, extra), (one_node("Softplus"), 17, None)]}
    X = edge_rows(8)
    for function, files in spellings.items():
        texts = []
        for k, (nodes_of, opset, inits) in enumerate(files):
            (tmp_path / str(k)).mkdir(exist_ok=True)
            path = tmp_path / str(k) / f"{function}.onnx"  # one file name: the C's header names it
            dense_function_net(path, nodes_of, opset, inits)
            model, got = host_float(path, X, tmp_path)
            assert float_ops(model) == ["fully_connected", function, "fully_connected"]
            np.testing.assert_allclose(got, onnxruntime_run(path, X), rtol=2e-6, atol=1e-5)
            texts.append(c_text(model, tmp_path, f"{function}_{k}_text"))
        assert texts[0] == texts[1]


def test_a_where_that_is_no_known_activation_runs_as_compare_and_select(tmp_path):
    """Softplus's Where at a threshold of 5 (not exact as Softplus alone) and a Mish whose Softplus is read elsewhere
    stay node by node: compare + select, softplus, tensor_tanh, tensor_mul; still onnxruntime's values."""
    nodes, extra = softplus_dynamo(5.0)
    dense_function_net(tmp_path / "s.onnx", nodes, 18, extra)
    X = edge_rows(8)
    model, got = host_float(tmp_path / "s.onnx", X, tmp_path)
    assert float_ops(model) == ["fully_connected", "softplus", "compare", "select", "fully_connected"]
    np.testing.assert_allclose(got, onnxruntime_run(tmp_path / "s.onnx", X), rtol=2e-6, atol=1e-5)

    def mish_and_softplus(h, out):
        from onnx import helper

        return [*mish_torchscript(h, "m"), helper.make_node("Add", ["m", "sp"], [out], name="/Add")]
    dense_function_net(tmp_path / "m.onnx", mish_and_softplus)
    model, got = host_float(tmp_path / "m.onnx", X, tmp_path)
    assert "mish" not in float_ops(model) and "softplus" in float_ops(model)
    np.testing.assert_allclose(got, onnxruntime_run(tmp_path / "m.onnx", X), rtol=2e-6, atol=1e-5)


# ---------------------------------------------------------------- torch.where on data

def leaky_where(compare: str, swapped: bool, alpha_first: bool):
    """torch.where(h > 0, h, 0.1 * h) and its mirrored spellings."""
    def nodes(h, out):
        from onnx import helper

        mul = helper.make_node("Mul", ["alpha", h] if alpha_first else [h, "alpha"], ["scaled"], name="/Mul")
        branches = ["scaled", h] if swapped else [h, "scaled"]
        return [helper.make_node(compare, [h, "zero"], ["positive"], name="/Greater"), mul,
                helper.make_node("Where", ["positive", *branches], [out], name="/Where")]
    return nodes, {"zero": np.array(0.0, F32), "alpha": np.array(0.1, F32)}


@pytest.mark.parametrize("compare,swapped,alpha_first", [("Greater", False, False), ("GreaterOrEqual", False, True),
                                                         ("Less", True, False), ("LessOrEqual", True, True)])
def test_where_of_a_sign_test_is_leaky_relu_at_every_precision(compare, swapped, alpha_first, tmp_path):
    nodes, extra = leaky_where(compare, swapped, alpha_first)
    dense_function_net(tmp_path / "w.onnx", nodes, 17, extra)
    model = tinycc_ml.load_model(tmp_path / "w.onnx")
    assert float_ops(model) == ["fully_connected", "leaky_relu", "fully_connected"]
    assert model.graph.node(model.graph.order()[-4]).attrs["alpha"] == pytest.approx(0.1)
    check_builds(tmp_path / "w.onnx", tmp_path)


def general_where_net(path: Path) -> None:
    """where(x >= 0.5, x, tanh(x) * 2) and where(x == 0, -1, x) on (1, 2, 3, 4): the comparisons on the data and on
    constants, the branches a value and a constant, broadcast (the constant of shape (4,))."""
    from onnx import helper

    nodes = [helper.make_node("GreaterOrEqual", ["x", "half"], ["c"], name="ge"),
             helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("Mul", ["t", "two"], ["t2"], name="mul"),
             helper.make_node("Where", ["c", "x", "t2"], ["w"], name="where"),
             helper.make_node("Equal", ["x", "zero"], ["z"], name="eq"),
             helper.make_node("Where", ["z", "minus", "w"], ["y0"], name="where_zero"),
             helper.make_node("Flatten", ["y0"], ["y"], name="flat")]
    save_net(path, nodes, {"half": np.array(0.5, F32), "two": np.array(2.0, F32), "zero": np.array(0.0, F32),
                           "minus": np.array([-1, -2, -3, -4], F32)}, [1, 2, 3, 4])


def test_where_on_data_compiles_to_compare_and_select(tmp_path):
    general_where_net(tmp_path / "g.onnx")
    X = edge_rows(24)
    X[:, :6] = [0.5, 0.0, -0.0, 0.4999999, 0.5000001, 1.0]  # on the comparisons' constants exactly
    model, got = host_float(tmp_path / "g.onnx", X, tmp_path)
    assert float_ops(model).count("compare") == 2 and float_ops(model).count("select") == 2
    want = onnxruntime_run(tmp_path / "g.onnx", X)
    assert_float32_close(got, want)
    assert np.any(want == -1) and np.any(want == 0.5)
    with pytest.raises(CompileError, match=r"op compare has no form in the project's fixed point"):
        tinycc_ml.compile(model, target="host", precision="int16", calibration=X)


def test_where_of_a_condition_and_branches_in_different_layouts(tmp_path):
    """A condition computed on a transposed copy (held as ONNX holds it) choosing between a channels-last value and a
    constant: the bool mask moved to the IR's NHWC like any value; onnxruntime's elements, at TFLite's int8 too."""
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Transpose", ["c"], ["t"], name="t1", perm=[0, 1, 3, 2]),
             helper.make_node("Transpose", ["t"], ["u"], name="t2", perm=[0, 1, 3, 2]),
             helper.make_node("Less", ["u", "zero"], ["m"], name="less"),
             helper.make_node("Where", ["m", "small", "c"], ["w"], name="where"),
             helper.make_node("Flatten", ["w"], ["y"], name="flat")]
    rng = np.random.default_rng(8)
    save_net(tmp_path / "l.onnx", nodes, {"W": rng.normal(size=(3, 2, 3, 3)).astype(F32), "zero": np.array(0.0, F32),
                                          "small": np.array([[[0.25]], [[-0.5]], [[1.0]]], F32)}, [1, 2, 3, 4])
    X = edge_rows(24)
    model, got = host_float(tmp_path / "l.onnx", X, tmp_path)
    want = onnxruntime_run(tmp_path / "l.onnx", X)  # (the convolution's sums in another order: a few ulps)
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=1e-6 * np.max(np.abs(want)))
    assert np.sum(want == 0.25) > 0 and np.sum(want == -0.5) > 0
    check_builds(tmp_path / "l.onnx", tmp_path, builds=("float", "int8"))


def threshold_where(h, out):
    """torch.where(h > 0.5, h, 2 * tanh(h)): no activation the importer knows."""
    from onnx import helper

    return [helper.make_node("Greater", [h, "half"], ["big"], name="/Greater"),
            helper.make_node("Tanh", [h], ["t"], name="/Tanh"),
            helper.make_node("Mul", ["t", "two"], ["t2"], name="/Mul"),
            helper.make_node("Where", ["big", h, "t2"], [out], name="/Where")]


def test_where_on_data_compiles_to_tflite_comparison_and_select_at_int8(tmp_path):
    """GREATER on int8 operands of different quantisations (rescaled as TFLite Micro does) and SELECT_V2 copying
    integers of one quantisation: the int8 C the int8 interpreter's on every byte, within int8's tolerance of
    onnxruntime; the project's fixed point refused by name."""
    dense_function_net(tmp_path / "t.onnx", threshold_where, 17, {"half": np.array(0.5, F32),
                                                                  "two": np.array(2.0, F32)})
    model = tinycc_ml.load_model(tmp_path / "t.onnx")
    assert float_ops(model) == ["fully_connected", "compare", "tensor_tanh", "tensor_mul", "select", "fully_connected"]
    check_builds(tmp_path / "t.onnx", tmp_path, builds=("float", "int8"))
    int8 = model.quantise(np.random.default_rng(0).normal(size=(48, 8)))
    ops = {int8.graph.op(n): int8.graph.type(n).dtype for n in int8.graph.order()}
    assert ops["compare"].kind == "bool" and ops["select"].bits == 8
    with pytest.raises(CompileError, match=r"op compare has no form in the project's fixed point"):
        tinycc_ml.compile(model, target="host", precision="int16", calibration=edge_rows(8)[:24])


def test_where_refusals_name_node_and_value(tmp_path):
    from onnx import helper

    save_net(tmp_path / "c.onnx", [helper.make_node("Where", ["cond", "x", "x"], ["y"], name="w")],
             {"cond": np.array([True, False])}, [1, 2])
    with pytest.raises(ModelFileError, match=r"Where node 'w': a constant condition 'cond' with computed branches"):
        tinycc_ml.load_model(tmp_path / "c.onnx")
    save_net(tmp_path / "f.onnx", [helper.make_node("Where", ["x", "x", "x"], ["y"], name="w")], {}, [1, 2])
    with pytest.raises(ModelFileError, match=r"Where node 'w': its condition 'x' is not a comparison's bool tensor"):
        tinycc_ml.load_model(tmp_path / "f.onnx")


# ---------------------------------------------------------------- F.normalize: ReduceL2, Clip, Expand, Div

def normalize_net(path: Path, dynamo: bool) -> None:
    """F.normalize(x, dim=1) then a Gemm, as each exporter writes it: dynamo (opset 18: ReduceL2's axes an input,
    Expand by a constant shape), TorchScript (opset 17: axes an attribute, Expand by Shape(x))."""
    from onnx import helper

    rng = np.random.default_rng(9)
    inits = {"eps": np.array(1e-12, F32), "V": rng.normal(size=(8, 3)).astype(F32)}
    if dynamo:
        inits.update(axes=np.array([1], np.int64), shape=np.array([1, 8], np.int64))
        nodes = [helper.make_node("ReduceL2", ["x", "axes"], ["n"], name="node_linalg_vector_norm", keepdims=1),
                 helper.make_node("Clip", ["n", "eps"], ["c"], name="node_clamp_min"),
                 helper.make_node("Expand", ["c", "shape"], ["e"], name="node_expand")]
    else:
        nodes = [helper.make_node("ReduceL2", ["x"], ["n"], name="/ReduceL2", axes=[1], keepdims=1),
                 helper.make_node("Clip", ["n", "eps", ""], ["c"], name="/Clip"),
                 helper.make_node("Shape", ["x"], ["shape"], name="/Shape"),
                 helper.make_node("Expand", ["c", "shape"], ["e"], name="/Expand")]
    nodes += [helper.make_node("Div", ["x", "e"], ["d"], name="div"), helper.make_node("Gemm", ["d", "V"], ["y"],
                                                                                       name="head")]
    save_net(path, nodes, inits, [1, 8], opset=18 if dynamo else 17)


def test_normalize_is_one_l2_normalization_from_both_exporters(tmp_path):
    """F.normalize as either exporter writes it: one l2_normalization (its least norm the Clip's 1e-12), equal to
    onnxruntime on zero rows, a row whose norm is below the clamp, and edge values; the same C from both files; at
    TFLite's int8 its L2_NORMALIZATION kernel (output steps of 1/128), the C the interpreter's on every byte; the
    project's fixed point refused by name."""
    X = edge_rows(8)
    X[-2] = 1e-20  # a norm below the clamp's 1e-12
    texts = []
    for dynamo in (True, False):
        folder = tmp_path / str(dynamo)
        folder.mkdir()
        normalize_net(folder / "n.onnx", dynamo)
        model, got = host_float(folder / "n.onnx", X, folder)
        want = onnxruntime_run(folder / "n.onnx", X)
        assert np.all(want[-1] == 0) and np.all(np.isfinite(want))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * np.max(np.abs(want)))
        assert float_ops(model) == ["l2_normalization", "fully_connected"]
        assert model.graph.node(model.graph.order()[1]).attrs["epsilon"] == pytest.approx(1e-12)
        texts.append(c_text(model, folder, "text"))
        check_builds(folder / "n.onnx", folder, builds=("float", "int8"))
        with pytest.raises(CompileError, match=r"op l2_normalization has no form in the project's fixed point"):
            tinycc_ml.compile(model, target="host", precision="int16", calibration=X)
    assert texts[0] == texts[1]


def test_a_norm_that_is_no_normalisation_is_reduce_sum_of_squares_and_a_root(tmp_path):
    """ReduceL2 over the features without keepdims, then a Gemm: squares, reduce_sum, sqrt (float builds)."""
    from onnx import helper

    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Gemm", ["x", "W"], ["g"], name="g"),
             helper.make_node("Reshape", ["g", "s"], ["r"], name="r"),
             helper.make_node("ReduceL2", ["r"], ["n"], name="norm", axes=[2], keepdims=0),
             helper.make_node("Gemm", ["n", "V"], ["y"], name="head")]
    save_net(tmp_path / "l.onnx", nodes, {"W": rng.normal(size=(8, 12)).astype(F32), "s": np.array([1, 4, 3]),
                                          "V": rng.normal(size=(4, 2)).astype(F32)}, [1, 8])
    X = edge_rows(8)
    model, got = host_float(tmp_path / "l.onnx", X, tmp_path)
    assert [op for op in float_ops(model) if op not in ("reshape", "fully_connected")] == ["square", "reduce_sum",
                                                                                            "sqrt"]
    np.testing.assert_allclose(got, onnxruntime_run(tmp_path / "l.onnx", X), rtol=4e-6, atol=1e-5)


def test_expand_of_data_grows_every_unit_axis_by_copies(tmp_path):
    """Expand of a (1, 2, 1) value to (3, 2, 5) (both a leading and an inner axis grown, 5 = 4 + 1 copies), read back
    flat: onnxruntime's elements, at every precision (concatenations copy)."""
    from onnx import helper

    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Gemm", ["x", "W"], ["g"], name="g"),
             helper.make_node("Reshape", ["g", "s"], ["r"], name="r"),
             helper.make_node("Expand", ["r", "shape"], ["e"], name="e"),
             helper.make_node("Reshape", ["e", "flat"], ["y"], name="f")]
    save_net(tmp_path / "e.onnx", nodes, {"W": rng.normal(size=(4, 2)).astype(F32), "s": np.array([1, 2, 1]),
                                          "shape": np.array([3, 1, 5]), "flat": np.array([1, 30])}, [1, 4])
    check_builds(tmp_path / "e.onnx", tmp_path)


# ---------------------------------------------------------------- DepthToSpace (PixelShuffle)

def pixel_shuffle_net(path: Path, mode: str, block: int, channels: int) -> None:
    """Conv (2 -> channels, 3x3, same) on (1, 2, 3, 4), DepthToSpace, Flatten."""
    from onnx import helper

    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("DepthToSpace", ["c"], ["d"], name="shuffle", blocksize=block, mode=mode),
             helper.make_node("Flatten", ["d"], ["y"], name="flat")]
    save_net(path, nodes, {"W": rng.normal(size=(channels, 2, 3, 3)).astype(F32),
                           "b": rng.normal(size=channels).astype(F32)}, [1, 2, 3, 4])


@pytest.mark.parametrize("mode,block,channels", [("CRD", 2, 4), ("DCR", 2, 8), ("CRD", 3, 18), ("DCR", 3, 9)])
def test_depth_to_space_compiles_at_every_precision(mode, block, channels, tmp_path):
    pixel_shuffle_net(tmp_path / "p.onnx", mode, block, channels)
    model = tinycc_ml.load_model(tmp_path / "p.onnx")
    assert float_ops(model).count("transpose") >= 1 and "conv2d" in float_ops(model)
    check_builds(tmp_path / "p.onnx", tmp_path)


def test_depth_to_space_refusals_name_node_and_value(tmp_path):
    pixel_shuffle_net(tmp_path / "b.onnx", "CRD", 3, 4)
    with pytest.raises(ModelFileError, match=r"DepthToSpace node 'shuffle': blocksize 3 on 4 channels; the channels "
                                             r"must be a multiple of blocksize\^2 \(9\)"):
        tinycc_ml.load_model(tmp_path / "b.onnx")
    pixel_shuffle_net(tmp_path / "m.onnx", "RCD", 2, 4)
    with pytest.raises(ModelFileError, match=r"DepthToSpace \(node 'shuffle'\): mode='RCD' is not supported "
                                             r"\(supported: DCR, CRD\)"):
        tinycc_ml.load_model(tmp_path / "m.onnx")


# ---------------------------------------------------------------- on the chips

@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_functions_where_and_depth_to_space_run_on_the_chips(target, tmp_path):
    """The float C of Softplus, Mish, Selu, Celu, compare + select and a norm in the simulator, to float32 rounding
    of onnxruntime (avr-libc's functions are its own); DepthToSpace and the LeakyRelu read from a Where at int16 and
    TFLite's int8, GREATER + SELECT_V2 and L2_NORMALIZATION at TFLite's int8, bit for bit with the interpreter."""
    from onnx import helper

    from tinycc_ml.codegen.backend import get_backend

    require_target(target)
    rng = np.random.default_rng(11)
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="a"),
             helper.make_node("Softplus", ["h"], ["sp"], name="softplus"),
             helper.make_node("Mish", ["h"], ["mi"], name="mish"),
             helper.make_node("Selu", ["h"], ["se"], name="selu"),
             helper.make_node("Celu", ["h"], ["ce"], name="celu", alpha=0.7),
             helper.make_node("Greater", ["h", "half"], ["g"], name="gt"),
             helper.make_node("Where", ["g", "sp", "mi"], ["w"], name="where"),
             helper.make_node("Concat", ["w", "se", "ce"], ["cat"], name="cat", axis=1),
             helper.make_node("ReduceL2", ["cat", "axes"], ["n"], name="norm", keepdims=1),
             helper.make_node("Div", ["cat", "n"], ["y"], name="div")]
    save_net(tmp_path / "f.onnx", nodes, {"W": rng.normal(scale=4.0, size=(6, 4)).astype(F32),
                                          "b": rng.normal(size=4).astype(F32), "half": np.array(0.5, F32),
                                          "axes": np.array([1])}, [1, 6], opset=18)
    X = edge_rows(6, n=4)[[0, 1, 2, 3, 5, 7, -1]]
    want = onnxruntime_run(tmp_path / "f.onnx", X)
    model = tinycc_ml.load_model(tmp_path / "f.onnx")
    result = tinycc_ml.compile(model, target=target, name="net", out_dir=tmp_path / "float")
    got = np.asarray(get_backend(target).simulate(tmp_path / "float", result.output, X).scores).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    pixel_shuffle_net(tmp_path / "p.onnx", "CRD", 2, 8)
    nodes, extra = leaky_where("Greater", False, False)
    dense_function_net(tmp_path / "w.onnx", nodes, 17, extra)
    dense_function_net(tmp_path / "t.onnx", threshold_where, 17, {"half": np.array(0.5, F32),
                                                                  "two": np.array(2.0, F32)})
    normalize_net(tmp_path / "n.onnx", True)
    for path, labels in ((tmp_path / "p.onnx", ("int16", "int8")), (tmp_path / "w.onnx", ("int16", "int8")),
                         (tmp_path / "t.onnx", ("int8",)), (tmp_path / "n.onnx", ("int8",))):
        model = tinycc_ml.load_model(path)
        rows = rng.normal(size=(40, model.input_dim))
        for label in labels:
            assert_chip_equals_interpreter(model, rows, label, target, tmp_path / f"{path.stem}_{label}")
