"""Small PyTorch networks as torch.onnx.export writes them (scripts/export_pytorch_nets.py, both exporters: the
default dynamo one with its ``.onnx.data``, and ``dynamo=False``'s TorchScript one as ``*_ts.onnx``), compiled at
every precision and held to onnxruntime: the float graph to float32 rounding, the float C to the float
interpreter, TFLite's int8 C to the int8 interpreter on every byte, the project's int16 / pow2 int8 C to the
fixed-point interpreter bit for bit; every integer build within its tolerance of the float network. The suite
does not import torch: the files are committed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.interp import run_float
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.network_fixed import quantise_rows

onnxruntime = pytest.importorskip("onnxruntime")

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
ROWS = 48
# precision label -> (precision, options)
# (the project's dialects at their calibrated scales: the scale search may saturate rare large inputs, trading
# the scores' largest error for agreement, which would blur what these tests measure: the ops' arithmetic)
BUILDS = {"float": ("float", {}), "int8": ("int8", {}), "int16": ("int16", {"search": False}),
          "int8_pow2": ("int8", {"int8_dialect": "pow2", "search": False})}
# the integer builds' largest score error, as a share of the float scores' spread (plus a little absolute)
TOLERANCE = {"int8": 0.1, "int16": 0.02, "int8_pow2": 0.12}


def onnxruntime_scores(path: Path, X: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[None].astype(np.float32)})[0].reshape(1, -1) for x in X])


def check_builds(path: Path, tmp_path: Path, builds=tuple(BUILDS), seed: int = 0) -> dict:
    """``path`` at each build, held to onnxruntime and to the interpreters; the float scores' largest errors."""
    require_target("host")
    model = tinycc_ml.load_model(path)
    assert isinstance(model, NetworkModel)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(ROWS, *model.input_shape[1:]))
    want = onnxruntime_scores(path, X)
    rows = X.reshape(ROWS, -1)
    np.testing.assert_allclose(model.scores(rows), want, rtol=1e-4, atol=1e-5)
    spread = float(np.max(want) - np.min(want))
    errors = {}
    for label in builds:
        precision, options = BUILDS[label]
        calibration = None if precision == "float" else rows
        result = tinycc_ml.compile(model, target="host", precision=precision, calibration=calibration, name="net",
                                   out_dir=tmp_path / label, **options)
        if label == "float":
            scores, predictions = result.load().run_raw(rows.astype(np.float32))
            interp = run_float(model.graph, X[:, None])["scores"].reshape(ROWS, -1)
            np.testing.assert_allclose(scores, interp, rtol=1e-4, atol=1e-5 * (1 + np.max(np.abs(interp))))
            top = np.sort(want, axis=1)[:, -2:]
            clear = top[:, 1] - top[:, 0] > 1e-3  # rows whose two best scores float32 rounding cannot swap
            np.testing.assert_array_equal(predictions[clear], np.argmax(want, axis=1)[clear])
            got = scores
        elif label == "int8":
            int8 = model.quantise(rows)
            Xq = int8.quantise_input(rows)
            scores, _ = result.load().run_raw(Xq)
            np.testing.assert_array_equal(scores, int8.run_int8(Xq.reshape(ROWS, *int8.input_shape)).reshape(ROWS, -1))
            got = int8.scores(rows)
        else:
            Xq = quantise_rows(result.graph, rows)
            fixed = run_fixed(result.graph, Xq)
            scores, predictions = result.load().run_raw(Xq)
            np.testing.assert_array_equal(scores, fixed["scores"])
            np.testing.assert_array_equal(predictions, fixed["prediction"])
            scale = result.graph.type(result.graph.output("scores")).dtype.scale
            got = fixed["scores"].reshape(ROWS, -1) * 2.0**-scale
        errors[label] = float(np.max(np.abs(got - want)))
        if label in TOLERANCE:
            assert errors[label] < TOLERANCE[label] * spread + 0.02, (label, errors[label], spread)
    return errors


# ---------------------------------------------------------------- Identity, Dropout, Constant


@pytest.mark.parametrize("exporter", ["", "_ts"])
def test_mobilenet_style_net_compiles_from_both_exporters(exporter, tmp_path):
    """Depthwise-separable blocks with BatchNorm and ReLU6, a Dropout: the TorchScript exporter writes each Clip's
    bounds as Constant nodes after the Conv that fuses the Clip."""
    check_builds(DATA / f"mobilenet_style{exporter}.onnx", tmp_path)


def identity_dropout_net(path: Path, training: bool = False) -> None:
    """Identity on a weight and on a Clip's bound, Constant nodes after their reader's producer, a Dropout of
    opset 13 (ratio and training_mode inputs) on the data."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 2, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(size=4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.normal(size=(3, 4)).astype(np.float32), "Wd"),
             numpy_helper.from_array(np.array(0.3, np.float32), "ratio"),
             numpy_helper.from_array(np.array(training), "training")]
    six = helper.make_tensor("six", TensorProto.FLOAT, [], [6.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Identity", ["W"], ["W_shared"], name="weight_identity"),
             helper.make_node("Conv", ["x", "W_shared", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("Constant", [], ["lo"], name="lo_const", value=zero),
             helper.make_node("Constant", [], ["hi0"], name="hi_const", value=six),
             helper.make_node("Identity", ["hi0"], ["hi"], name="bound_identity"),
             helper.make_node("Clip", ["c", "lo", "hi"], ["r"], name="relu6"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Dropout", ["f", "ratio", "training"], ["d"], name="dropout"),
             helper.make_node("Gemm", ["d", "Wd"], ["y"], name="dense", transB=1)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 9])],
                              outputs, inits)
    import onnx

    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_identity_of_constants_and_inference_dropout_compile(tmp_path):
    identity_dropout_net(tmp_path / "n.onnx")
    check_builds(tmp_path / "n.onnx", tmp_path)


def test_a_training_dropout_is_refused_by_name(tmp_path):
    from tinycc_ml.errors import ModelFileError

    identity_dropout_net(tmp_path / "n.onnx", training=True)
    with pytest.raises(ModelFileError, match="Dropout node 'dropout': training_mode is not false"):
        tinycc_ml.load_model(tmp_path / "n.onnx")


# ---------------------------------------------------------------- grouped convolutions


@pytest.mark.parametrize("name", ["grouped_conv1d", "grouped_conv1d_ts", "grouped_conv2d", "grouped_conv2d_ts"])
def test_grouped_convolutions_compile_at_every_precision(name, tmp_path):
    """Conv1d(8, 8, groups=4), Conv1d(8, 6, 1, groups=2), Conv2d(4, 6, groups=2), Conv2d(6, 6, stride 2,
    groups=3): one grouped_conv2d each, never expanded into a dense filter."""
    model = tinycc_ml.load_model(DATA / f"{name}.onnx")
    ops = [model.graph.op(n) for n in model.graph.order()]
    assert ops.count("grouped_conv2d") == 2
    filters = [model.graph.type(model.graph.node(n).inputs[1]).shape for n in model.graph.order()
               if model.graph.op(n) == "grouped_conv2d"]
    assert all(shape[3] < model.graph.type(model.graph.node(n).inputs[0]).shape[3] for shape, n in
               zip(filters, [n for n in model.graph.order() if model.graph.op(n) == "grouped_conv2d"]))
    check_builds(DATA / f"{name}.onnx", tmp_path)


def assert_chip_equals_interpreter(model, rows, label: str, target: str, folder) -> None:
    """The ``label`` build (BUILDS) of ``model`` calibrated on ``rows``, run in ``target``'s simulator on the first
    three real rows (every build quantises them as its input says): every score the interpreter's."""
    from tinycc_ml.codegen.backend import get_backend

    precision, options = BUILDS[label]
    result = tinycc_ml.compile(model, target=target, precision=precision, calibration=rows, name="net",
                               out_dir=folder, **options)
    given = rows[:3]
    if label == "int8":
        int8 = model.quantise(rows)
        want = int8.run_int8(int8.quantise_input(given).reshape(3, *int8.input_shape)).reshape(3, -1)
    else:
        want = run_fixed(result.graph, quantise_rows(result.graph, given))["scores"]
    run = get_backend(target).simulate(folder, result.output, given)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64).reshape(want.shape), want)


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_grouped_convolutions_run_bit_for_bit_in_the_simulators(target, tmp_path):
    """The shared C of grouped_conv2d (constants in flash, PROGMEM on the AVR) at TFLite's int8 and the project's
    int16 and int8: every score the interpreter's."""
    require_target(target)
    path = DATA / "grouped_conv1d.onnx"
    model = tinycc_ml.load_model(path)
    rows = np.random.default_rng(5).normal(size=(40, model.input_dim))
    for label in ("int8", "int16", "int8_pow2"):
        assert_chip_equals_interpreter(model, rows, label, target, tmp_path / label)


@pytest.mark.parametrize("attrs", [
    {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 0, 1]},
    {"group": 3, "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"group": 2, "auto_pad": "VALID", "dilations": [2, 1]}], ids=["explicit_pads", "same_upper", "valid"])
def test_grouped_convolution_geometry_at_every_precision(attrs, tmp_path):
    """Conv(6 -> 6 channels) in groups, each window geometry, a Clip(0, 6) fused into it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(attrs["group"])
    group = attrs["group"]
    inits = [numpy_helper.from_array(rng.normal(size=(6, 6 // group, 3, 3)).astype(np.float32) / 2, "W"),
             numpy_helper.from_array(rng.normal(size=6).astype(np.float32) / 4, "b"),
             numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi"),
             numpy_helper.from_array(rng.normal(size=(3, 6)).astype(np.float32), "Wd")]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="grouped", **attrs),
             helper.make_node("Clip", ["c", "lo", "hi"], ["r"], name="relu6"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "Wd"], ["y"], name="dense", transB=1)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 7, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "g.onnx"))
    model = tinycc_ml.load_model(tmp_path / "g.onnx")
    (conv,) = [model.graph.node(n) for n in model.graph.order() if model.graph.op(n) == "grouped_conv2d"]
    assert conv.attrs["activation"] == "relu6" and conv.attrs["groups"] == group
    check_builds(tmp_path / "g.onnx", tmp_path)


# ---------------------------------------------------------------- activations

TABLE_ACTIVATIONS = ["sigmoid", "tanh", "hardswish", "hardsigmoid", "elu", "silu", "gelu", "gelu_tanh"]


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name", TABLE_ACTIVATIONS)
def test_activations_compile_at_every_precision(name, exporter, tmp_path):
    """Conv1d, the activation, Conv1d, mean, Linear: float, TFLite's int8 and pow2 int8 (a table of the correctly
    rounded function); int16: sigmoid and tanh TFLite's int16 kernel in steps of 2^-15, the others
    ir/ops/fixed16_activations.py's forms."""
    check_builds(DATA / f"{name}{exporter}.onnx", tmp_path, builds=("float", "int8", "int16", "int8_pow2"))


@pytest.mark.parametrize("name", ["leaky_relu", "leaky_relu_ts"])
def test_leaky_relu_lowers_to_the_tflite_op_and_compiles_at_every_precision(name, tmp_path):
    model = tinycc_ml.load_model(DATA / f"{name}.onnx")
    (node,) = [model.graph.node(n) for n in model.graph.order() if model.graph.op(n) == "leaky_relu"]
    assert node.attrs["alpha"] == pytest.approx(0.1)
    check_builds(DATA / f"{name}.onnx", tmp_path)


def test_silu_is_one_op():
    model = tinycc_ml.load_model(DATA / "silu_ts.onnx")
    ops = [model.graph.op(n) for n in model.graph.order()]
    assert "silu" in ops and "logistic" not in ops and "tensor_mul" not in ops


@pytest.mark.parametrize("op, attrs", [("logistic", {}), ("tensor_tanh", {}), ("hard_swish", {}),
                                       ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}), ("elu", {"alpha": 1.0}),
                                       ("silu", {}), ("gelu", {"approximate": "none"}),
                                       ("gelu", {"approximate": "tanh"})])
def test_an_activation_table_is_within_half_an_output_step_of_the_function(op, attrs):
    """The stated bound: every entry is the function of its input integer's value, correctly rounded, in both
    dialects, wherever the output type does not saturate."""
    from tinycc_ml.ir.ops.network.activations import FUNCTIONS, real_values, table
    from tinycc_ml.ir.types import fixed, quantised

    function = FUNCTIONS[op][0]
    for x_type, out_type in ((fixed(8, 5), fixed(8, 6)), (fixed(8, 3), fixed(8, 7)),
                             (quantised(8, 0.05, -10), quantised(8, 1 / 256, -128)),
                             (quantised(8, 0.1, 20), quantised(8, 0.03, 0))):
        ints = np.arange(-128, 128)
        want = function(real_values(x_type, ints.astype(np.float64)), attrs)
        got = real_values(out_type, table(op, x_type, out_type, attrs).astype(np.float64))
        step = 2.0**-out_type.scale if out_type.is_fixed else out_type.qscales[0]
        lo, hi = real_values(out_type, np.array([-128.0, 127.0]))
        inside = (want > lo) & (want < hi)
        assert np.all(np.abs(got - want)[inside] <= step / 2 * (1 + 1e-9))
        assert np.all(got[want >= hi] == hi) and np.all(got[want <= lo] == lo)


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_activation_tables_and_leaky_relu_run_bit_for_bit_in_the_simulators(target, tmp_path):
    require_target(target)
    for name, labels in (("silu", ("int8", "int8_pow2")), ("leaky_relu", ("int8", "int16")), ("tanh", ("int16",))):
        model = tinycc_ml.load_model(DATA / f"{name}.onnx")
        rows = np.random.default_rng(6).normal(size=(40, model.input_dim))
        for label in labels:
            assert_chip_equals_interpreter(model, rows, label, target, tmp_path / f"{name}_{label}")


# ---------------------------------------------------------------- PReLU, ConvTranspose, LogSoftmax, LayerNorm

# name -> (its builds, the refusal of the other precisions: (precision, options) and the message)
LAYER_NETS = {
    "prelu": (("float", "int16", "int8_pow2", "int8"), []),
    "conv_transpose1d": (("float", "int8", "int16", "int8_pow2"), []),
    "conv_transpose2d": (("float", "int8", "int16", "int8_pow2"), []),
    "softmax": (("float", "int16", "int8_pow2"), []),
    "log_softmax": (("float",), [("int8", {}, r"op log_softmax has no int8 quantisation"),
                                 ("int16", {}, r"op log_softmax has no form in the project's fixed point")]),
    "layer_norm": (("float", "int8"), [("int16", {}, r"op layer_norm has no form in the project's fixed point")]),
}


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name", list(LAYER_NETS))
def test_layers_compile_where_a_form_exists_and_are_refused_by_name_elsewhere(name, exporter, tmp_path):
    """nn.PReLU (float, int16, pow2 int8, TFLite's int8), ConvTranspose1d/2d (float, TFLite's int8, int16, pow2
    int8), Softmax (float, int16, pow2 int8), LogSoftmax (float) and LayerNorm (float, TFLite's int8 by the
    converter's decomposition): held to onnxruntime; every other precision refused with the node's op named."""
    from tinycc_ml.errors import CompileError

    path = DATA / f"{name}{exporter}.onnx"
    builds, refusals = LAYER_NETS[name]
    check_builds(path, tmp_path, builds=builds)
    model = tinycc_ml.load_model(path)
    rows = np.random.default_rng(3).normal(size=(20, model.input_dim))
    for precision, options, message in refusals:
        with pytest.raises(CompileError, match=message):
            tinycc_ml.compile(model, target="host", precision=precision, calibration=rows, out_dir=tmp_path / "no",
                              **options)


def test_conv_transpose_refuses_groups_and_dilations_by_name(tmp_path):
    from onnx import helper

    from tinycc_ml.errors import ModelFileError

    w = np.random.default_rng(4).normal(size=(3, 2, 3)).astype(np.float32)
    for attrs, message in (({"group": 3}, r"ConvTranspose \(node 'up'\): group=3 is not supported"),
                           ({"dilations": [2]}, r"ConvTranspose \(node 'up'\): dilations=\[2\] is not supported")):
        save_net(tmp_path / "t.onnx", [helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="up", **attrs)],
                 {"W": w}, [1, 3, 6])
        with pytest.raises(ModelFileError, match=message):
            tinycc_ml.load_model(tmp_path / "t.onnx")


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_prelu_and_conv_transpose_run_bit_for_bit_in_the_simulators(target, tmp_path):
    require_target(target)
    for name, labels in (("prelu", ("int16", "int8_pow2")), ("conv_transpose1d", ("int8", "int16", "int8_pow2")),
                         ("softmax", ("int16", "int8_pow2"))):
        model = tinycc_ml.load_model(DATA / f"{name}.onnx")
        rows = np.random.default_rng(8).normal(size=(40, model.input_dim))
        for label in labels:
            assert_chip_equals_interpreter(model, rows, label, target, tmp_path / f"{name}_{label}")


# ---------------------------------------------------------------- elementwise, shapes, reductions, pools

# name -> its builds (TFLite's int8 of a comparison's or a concatenation's operands: one quantisation covering their
# ranges, as the converter gives them)
TENSOR_NETS = {name: tuple(BUILDS) for name in ("elementwise", "shapes", "reductions", "pools2d", "pools1d")}


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name", list(TENSOR_NETS))
def test_tensor_ops_compile_at_every_precision(name, exporter, tmp_path):
    """Sub / Mul / Div / Max / Min broadcast, split, cat, F.pad, slicing, permute, squeeze / unsqueeze, chunk,
    mean / sum / amax over axes, pools with ceil_mode and count_include_pad, adaptive pools: float held to
    onnxruntime (the TorchScript exporter's shape arithmetic folded at import), the integer C to the interpreters."""
    check_builds(DATA / f"{name}{exporter}.onnx", tmp_path, builds=TENSOR_NETS[name])


def test_both_exporters_give_one_graph_for_the_tensor_ops():
    """The TorchScript exporter's Shape / Gather / ConstantOfShape arithmetic (F.pad, chunk) folds away: the same
    ops as the dynamo exporter's graph."""
    for name in TENSOR_NETS:
        ops = [sorted(tinycc_ml.load_model(DATA / f"{name}{e}.onnx").graph.op(n) for n in
                      tinycc_ml.load_model(DATA / f"{name}{e}.onnx").graph.order()) for e in ("", "_ts")]
        if name != "pools1d":  # dynamo writes AdaptiveMaxPool1d(1) as ReduceMax, TorchScript as MaxPool: one op each
            assert ops[0] == ops[1], name


def save_net(path: Path, nodes, inits, shape, opset: int = 17) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))


def constant_ops_net(path: Path) -> None:
    """Conv, then Sub / Mul / Div / Add of broadcast constants, Clip(-1, 1) (a maximum and a minimum by constants),
    a strided Slice, a Pad, a Transpose to channels last, ReduceMax over the channels (a global max pool), a Gemm."""
    from onnx import helper

    rng = np.random.default_rng(11)
    f32 = np.float32
    inits = {"W": rng.normal(size=(4, 2, 3)).astype(f32), "b": rng.normal(size=4).astype(f32) / 4,
             "offset": rng.normal(size=(4, 1)).astype(f32) / 2,
             "scale": rng.uniform(0.5, 2, size=(1, 4, 1)).astype(f32),
             "three": np.array(3, f32), "shift": np.array([0.25], f32), "lo": np.array(-1, f32), "hi": np.array(1, f32),
             "starts": np.array([1]), "ends": np.array([100]), "axes": np.array([2]), "steps": np.array([2]),
             "pads": np.array([0, 0, 2, 0, 0, 1]), "Wd": rng.normal(size=(3, 8)).astype(f32)}
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1]),
             helper.make_node("Sub", ["c", "offset"], ["s"], name="sub"),
             helper.make_node("Mul", ["scale", "s"], ["m"], name="mul"),
             helper.make_node("Div", ["m", "three"], ["d"], name="div"),
             helper.make_node("Add", ["shift", "d"], ["a"], name="add"),
             helper.make_node("Clip", ["a", "lo", "hi"], ["k"], name="clip"),
             helper.make_node("Slice", ["k", "starts", "ends", "axes", "steps"], ["sl"], name="slice"),
             helper.make_node("Pad", ["sl", "pads"], ["p"], name="pad"),
             helper.make_node("Transpose", ["p"], ["t"], name="channels_last", perm=[0, 2, 1]),
             helper.make_node("ReduceMax", ["t"], ["r"], name="largest", axes=[2], keepdims=0),
             helper.make_node("Gemm", ["r", "Wd"], ["y"], name="dense", transB=1)]
    save_net(path, nodes, inits, [1, 2, 11])


def test_constant_operands_and_shape_ops_compile_at_every_precision(tmp_path):
    """Every build, TFLite's int8 included: a constant operand of SUB and MUL takes its own int8 quantisation, of
    MAXIMUM / MINIMUM the other operand's; slices, pads, transposes and pools keep theirs."""
    constant_ops_net(tmp_path / "n.onnx")
    model = tinycc_ml.load_model(tmp_path / "n.onnx")
    ops = {model.graph.op(n) for n in model.graph.order()}
    assert {"tensor_sub", "tensor_mul", "tensor_maximum", "tensor_minimum", "strided_slice", "pad"} <= ops
    check_builds(tmp_path / "n.onnx", tmp_path)


@pytest.mark.parametrize("starts, ends, steps", [([0], [2 ** 63 - 1], [2]), ([1], [2 ** 63 - 1], [3]),
                                                  ([-1], [-(2 ** 63)], [-2])])
def test_an_open_ended_slice_takes_what_onnxruntime_takes(starts, ends, steps, tmp_path):
    """PyTorch's x[:, ::2] is a Slice to int64's largest value (its open end): read as an integer, never through a
    float (which overflowed it into an empty slice)."""
    from onnx import helper

    inits = {"starts": np.array(starts), "ends": np.array(ends), "axes": np.array([1]), "steps": np.array(steps),
             "W": np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32)}
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"], name="slice"),
             helper.make_node("Flatten", ["s"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
    width = len(range(*slice(starts[0], None if abs(ends[0]) > 99 else ends[0], steps[0]).indices(16)))
    inits["W"] = inits["W"][:, :width].T.copy()
    save_net(tmp_path / "s.onnx", nodes, inits, [1, 16])
    X = np.random.default_rng(3).normal(size=(6, 16)).astype(np.float32)
    np.testing.assert_allclose(tinycc_ml.load_model(tmp_path / "s.onnx").scores(X),
                               onnxruntime_scores(tmp_path / "s.onnx", X), rtol=1e-5, atol=1e-6)


def float_functions_net(path: Path, exponent: float = 2.0) -> None:
    """A Gemm clamped to [-0.5, 0.7] (a Clip no ReLU fuses), then Abs, Neg, Floor, Ceil, Sqrt, Exp, Log, Sin, Cos,
    Pow by constants and Div by a computed tensor of the data (torch.abs, torch.sqrt, x.pow(2), x / (1 + |x|)),
    summed into a Gemm."""
    from onnx import helper

    rng = np.random.default_rng(12)
    f32 = np.float32
    inits = {"W": rng.normal(size=(8, 8)).astype(f32), "V": rng.normal(size=(8, 3)).astype(f32),
             "lo": np.array(-0.5, f32), "hi": np.array(0.7, f32), "one": np.array(1, f32), "three": np.array(3, f32),
             "two": np.array(exponent, f32), "half": np.array(0.5, f32)}
    nodes = [helper.make_node("Gemm", ["x", "W"], ["g"], name="gemm"),
             helper.make_node("Clip", ["g", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("Sqrt", ["a"], ["sq"], name="sqrt"),
             helper.make_node("Add", ["sq", "one"], ["sq1"], name="add1"),
             helper.make_node("Log", ["sq1"], ["lg"], name="log"),
             helper.make_node("Neg", ["c"], ["ng"], name="neg"),
             helper.make_node("Exp", ["ng"], ["ex"], name="exp"),
             helper.make_node("Sin", ["x"], ["sn"], name="sin"),
             helper.make_node("Cos", ["g"], ["cs"], name="cos"),
             helper.make_node("Mul", ["x", "three"], ["x3"], name="mul3"),
             helper.make_node("Floor", ["x3"], ["fl"], name="floor"),
             helper.make_node("Ceil", ["x3"], ["ce"], name="ceil"),
             helper.make_node("Pow", ["c", "two"], ["p2"], name="square"),
             helper.make_node("Pow", ["a", "half"], ["ph"], name="root"),
             helper.make_node("Add", ["a", "one"], ["a1"], name="add_a1"),
             helper.make_node("Div", ["g", "a1"], ["q"], name="softsign"),
             *[helper.make_node("Add", [a, b], [o], name=f"sum_{o}") for a, b, o in
               [("lg", "ex", "s1"), ("s1", "sn", "s2"), ("s2", "cs", "s3"), ("s3", "fl", "s4"), ("s4", "ce", "s5"),
                ("s5", "p2", "s6"), ("s6", "ph", "s7"), ("s7", "q", "s8")]],
             helper.make_node("Gemm", ["s8", "V"], ["y"], name="head")]
    save_net(path, nodes, inits, [1, 8])


def test_float_functions_of_the_data_compile_as_onnxruntime_runs_them(tmp_path):
    """float builds to float32 rounding of onnxruntime; the fixed-point builds refused by name."""
    from tinycc_ml.errors import CompileError, ModelFileError

    require_target("host")
    float_functions_net(tmp_path / "f.onnx")
    model = tinycc_ml.load_model(tmp_path / "f.onnx")
    functions = {model.graph.node(n).attrs["function"] for n in model.graph.order()
                 if model.graph.op(n) == "float_unary"}
    assert functions == {"abs", "sqrt", "log", "neg", "exp", "sin", "cos", "floor", "ceil", "square"}
    X = np.random.default_rng(4).normal(size=(32, 8)).astype(np.float32)
    want = onnxruntime_scores(tmp_path / "f.onnx", X)
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-5, atol=1e-5)
    scores, _ = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path / "c").load().run_raw(X)
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(CompileError, match=r"float_unary \(function \w+\) has no form in the project's fixed point"):
        tinycc_ml.compile(model, target="host", precision="int16", calibration=X)
    float_functions_net(tmp_path / "p.onnx", exponent=3.0)
    with pytest.raises(ModelFileError, match=r"Pow node 'square': exponent \[3.0\]; only a constant 2.0 or 0.5"):
        tinycc_ml.load_model(tmp_path / "p.onnx")


def attention_net(path: Path) -> None:
    """Self-attention as a user writes it over a (batch, 6 tokens, 8 features) input: q, k, v Linear layers,
    softmax(q k^T / sqrt(8)) v (MatMul of two computed tensors), a mean over the tokens, a head."""
    from onnx import helper

    rng = np.random.default_rng(13)
    f32 = np.float32
    inits = {**{f"W{n}": rng.normal(size=(8, 8)).astype(f32) / 2 for n in "qkvo"},
             "bq": rng.normal(size=8).astype(f32) / 4, "root": np.array(np.sqrt(8), f32), "axes": np.array([1])}
    nodes = [*[helper.make_node("MatMul", ["x", f"W{n}"], [n if n != "q" else "q0"], name=f"proj_{n}") for n in "qkv"],
             helper.make_node("Add", ["q0", "bq"], ["q"], name="bias_q"),
             helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
             helper.make_node("Div", ["qk", "root"], ["logits"], name="scaled"),
             helper.make_node("Softmax", ["logits"], ["weights"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["weights", "v"], ["mixed"], name="mix"),
             helper.make_node("ReduceMean", ["mixed", "axes"], ["pooled"], name="pool", keepdims=0),
             helper.make_node("MatMul", ["pooled", "Wo"], ["y"], name="head")]
    save_net(path, nodes, inits, [1, 6, 8], opset=18)


def test_attention_of_computed_tensors_compiles_to_batch_matmul(tmp_path):
    """MatMul of two computed tensors is batch_matmul: float to float32 rounding of onnxruntime, TFLite's int8
    equal to its interpreter; the project's fixed point refuses it by name."""
    from tinycc_ml.errors import CompileError

    attention_net(tmp_path / "a.onnx")
    model = tinycc_ml.load_model(tmp_path / "a.onnx")
    assert sum(model.graph.op(n) == "batch_matmul" for n in model.graph.order()) == 2
    check_builds(tmp_path / "a.onnx", tmp_path, builds=("float", "int8"))
    with pytest.raises(CompileError, match=r"batch_matmul has no form in the project's fixed point"):
        tinycc_ml.compile(model, target="host", precision="int16",
                          calibration=np.random.default_rng(1).normal(size=(32, 48)))


def erf_gelu_net(path: Path, form: str) -> None:
    """A Gemm, then GELU spelled with Erf as the TorchScript exporter writes it below opset 20 (``form``: "div" as
    it does, x / sqrt 2; "mul", x * (1 / sqrt 2) with every product's operands swapped; "other", 2 + erf: no GELU),
    then a Gemm."""
    from onnx import helper

    rng = np.random.default_rng(14)
    f32 = np.float32
    inits = {"W": rng.normal(size=(6, 8)).astype(f32), "V": rng.normal(size=(8, 3)).astype(f32),
             "root": np.array(np.sqrt(2), f32), "inverse": np.array(np.sqrt(0.5), f32),
             "one": np.array(2.0 if form == "other" else 1.0, f32), "half": np.array(0.5, f32)}
    swap = form == "mul"
    nodes = [helper.make_node("Gemm", ["x", "W"], ["g"], name="gemm"),
             helper.make_node("Mul", ["g", "inverse"], ["d"], name="scale") if swap else
             helper.make_node("Div", ["g", "root"], ["d"], name="scale"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["one", "e"] if swap else ["e", "one"], ["a"], name="plus_one"),
             helper.make_node("Mul", ["a", "g"] if swap else ["g", "a"], ["m"], name="times_x"),
             helper.make_node("Mul", ["half", "m"] if swap else ["m", "half"], ["h"], name="half"),
             helper.make_node("Gemm", ["h", "V"], ["y"], name="head")]
    save_net(path, nodes, inits, [1, 6])


@pytest.mark.parametrize("form", ["div", "mul"])
def test_gelu_spelled_with_erf_is_one_gelu(form, tmp_path):
    erf_gelu_net(tmp_path / "g.onnx", form)
    model = tinycc_ml.load_model(tmp_path / "g.onnx")
    ops = [model.graph.op(n) for n in model.graph.order()]
    assert "gelu" in ops and "tensor_mul" not in ops
    check_builds(tmp_path / "g.onnx", tmp_path, builds=("float", "int16"))


def test_erf_that_is_no_gelu_stays_and_is_refused_by_name(tmp_path):
    from tinycc_ml.errors import ModelFileError

    erf_gelu_net(tmp_path / "g.onnx", "other")
    with pytest.raises(ModelFileError, match=r"op Erf \(node 'erf'\) is not supported"):
        tinycc_ml.load_model(tmp_path / "g.onnx")


def instance_norm_net(path: Path, groups: bool) -> None:
    """nn.InstanceNorm1d(affine) after a Conv1d, or nn.GroupNorm(2, 4) after a Conv2d as both exporters write it:
    Reshape to (1, 2, -1), InstanceNormalization of unit scale, Reshape back, Mul and Add per channel."""
    from onnx import helper

    rng = np.random.default_rng(15)
    f32 = np.float32
    if groups:
        inits = {"W": rng.normal(size=(4, 2, 3, 3)).astype(f32), "grouped": np.array([1, 2, -1]),
                 "unit": np.ones(2, f32), "zero": np.zeros(2, f32), "back": np.array([1, 4, 5, 5]),
                 "gamma": rng.uniform(0.5, 2, size=(4, 1, 1)).astype(f32),
                 "beta": rng.normal(size=(4, 1, 1)).astype(f32), "V": rng.normal(size=(4, 3)).astype(f32)}
        nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Reshape", ["c", "grouped"], ["g"], name="groups"),
                 helper.make_node("InstanceNormalization", ["g", "unit", "zero"], ["n"], name="norm", epsilon=1e-5),
                 helper.make_node("Reshape", ["n", "back"], ["b"], name="back"),
                 helper.make_node("Mul", ["b", "gamma"], ["m"], name="gamma"),
                 helper.make_node("Add", ["m", "beta"], ["a"], name="beta"),
                 helper.make_node("Relu", ["a"], ["r"], name="relu"),
                 helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
                 helper.make_node("Flatten", ["p"], ["f"], name="flat"),
                 helper.make_node("MatMul", ["f", "V"], ["y"], name="head")]
        save_net(path, nodes, inits, [1, 2, 5, 5])
        return
    inits = {"W": rng.normal(size=(4, 3, 3)).astype(f32), "scale": rng.uniform(0.5, 2, size=4).astype(f32),
             "bias": rng.normal(size=4).astype(f32), "axes": np.array([2]), "V": rng.normal(size=(4, 3)).astype(f32)}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
             helper.make_node("InstanceNormalization", ["c", "scale", "bias"], ["n"], name="norm", epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("ReduceMean", ["r", "axes"], ["p"], name="pool", keepdims=0),
             helper.make_node("MatMul", ["p", "V"], ["y"], name="head")]
    save_net(path, nodes, inits, [1, 3, 12], opset=18)


@pytest.mark.parametrize("groups", [False, True], ids=["instance_norm", "group_norm"])
def test_instance_and_group_norm_compile(groups, tmp_path):
    """float to float32 rounding of onnxruntime and TFLite's int8 equal to its interpreter (layer_norm over the
    channel's values); the project's fixed point refuses layer_norm by name."""
    instance_norm_net(tmp_path / "n.onnx", groups)
    model = tinycc_ml.load_model(tmp_path / "n.onnx")
    assert "layer_norm" in {model.graph.op(n) for n in model.graph.order()}
    check_builds(tmp_path / "n.onnx", tmp_path, builds=("float", "int8"))


@pytest.mark.parametrize("nodes, inits, message", [
    ([("Div", ["x", "x"], {})], {}, None),  # float32 division by a computed tensor (float_binary)
    ([("Pad", ["x", "pads"], {"mode": "reflect"})], {"pads": np.array([0, 0, 1, 0, 0, 1])},
     r"Pad \(node 'n0'\): mode='reflect' is not supported \(supported: constant\)"),
    ([("Pad", ["x", "pads", "fill"], {})], {"pads": np.array([0, 0, 1, 0, 0, 1]), "fill": np.array(1.5, np.float32)},
     r"Pad node 'n0': constant value 1.5; only zero padding"),
    ([("Relu", ["x"], {}), ("Gather", ["x", "n0_out"], {"axis": 2})],
     {}, r"Gather node 'n1' takes its indices 'n0_out' from a computed value; only constants"),
    ([("Add", ["x", "row"], {}), ("Add", ["n0_out", "x"], {})], {"row": np.ones((1, 3, 1), np.float32)},
     None),
    ([("ReduceSum", ["x", "all"], {"keepdims": 0})], {"all": np.array([0, 1, 2])},
     r"ReduceSum node 'n0' over axes \[0, 1, 2\] of shape \[1, 3, 5\] removes the batch axis"),
], ids=["div_by_tensor_ok", "reflect_pad", "nonzero_pad", "gather_of_data", "add_broadcast_ok", "reduce_batch"])
def test_tensor_op_refusals_name_node_op_and_value(nodes, inits, message, tmp_path):
    from onnx import helper

    from tinycc_ml.errors import ModelFileError

    made = []
    for k, (op, ins, attrs) in enumerate(nodes):
        last = k == len(nodes) - 1
        made.append(helper.make_node(op, ins, ["y" if last else f"n{k}_out"], name=f"n{k}", **attrs))
    save_net(tmp_path / "r.onnx", made, inits, [1, 3, 5], opset=18)
    if message is None:
        model = tinycc_ml.load_model(tmp_path / "r.onnx")
        assert model.graph is not None
        return
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(tmp_path / "r.onnx")


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("axes", [[1], [2], [3], [1, 2], [2, 3], [1, 3], [1, 2, 3]], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_mean_and_sum_over_any_axes_compile_in_the_projects_fixed_point(op, axes, keepdims, tmp_path):
    """A Conv2d's (1, 3, 4, 5) output reduced over any of its axes but the batch's (a mean: a sum and a product by
    1 / count), flattened, a Gemm: int16 and pow2 int8 bit for bit with the interpreter, near onnxruntime."""
    from onnx import helper

    rng = np.random.default_rng(len(axes) + keepdims)
    kept = int(np.prod([n for a, n in enumerate((1, 3, 4, 5)) if a not in axes]))
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c", "axes"], ["r"], name="reduce", keepdims=keepdims),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "Wd"], ["y"], name="dense", transB=1)]
    save_net(tmp_path / "r.onnx", nodes, {"W": rng.normal(size=(3, 2, 3, 3)).astype(np.float32),
                                          "axes": np.array(axes), "Wd": rng.normal(size=(3, kept)).astype(np.float32)},
             [1, 2, 4, 5], opset=18)
    check_builds(tmp_path / "r.onnx", tmp_path, builds=("float", "int16", "int8_pow2"))


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_tensor_ops_run_bit_for_bit_in_the_simulators(target, tmp_path):
    """The shared C of SUB / MUL / MAXIMUM / MINIMUM (pow2 and TFLite's int8), slices, pads, concatenations of two
    scales, reduce_sum / reduce_max, pools with ceil_mode and count_include_pad on each chip: every score the
    interpreter's."""
    require_target(target)
    constant_ops_net(tmp_path / "n.onnx")
    for path, labels in ((DATA / "elementwise.onnx", ("int16",)), (DATA / "reductions.onnx", ("int8_pow2",)),
                         (DATA / "shapes_ts.onnx", ("int16",)), (DATA / "pools2d.onnx", ("int8",)),
                         (tmp_path / "n.onnx", ("int8", "int8_pow2"))):
        model = tinycc_ml.load_model(path)
        rows = np.random.default_rng(7).normal(size=(40, model.input_dim))
        for label in labels:
            assert_chip_equals_interpreter(model, rows, label, target, tmp_path / f"{path.stem}_{label}")


# ---------------------------------------------------------------- Resize (F.interpolate)

@pytest.mark.parametrize("exporter", ["", "_ts"])
def test_interpolate_nearest_and_bilinear_compile(exporter, tmp_path):
    """F.interpolate nearest by a scale factor, bilinear to sizes with align_corners False and True: resize_nearest
    (each source index as onnxruntime computes it) and resize_bilinear (TFLite's coordinate modes), at float, TFLite's
    int8 (both keep their input's quantisation) and in the project's fixed point (the copies and TFLite's integer
    interpolation at the input's type)."""
    check_builds(DATA / f"interpolate{exporter}.onnx", tmp_path, builds=("float", "int8", "int16", "int8_pow2"))


@pytest.mark.parametrize("transform, rounding, scales, sizes", [
    ("half_pixel", "round_prefer_ceil", [1, 1, 1.5, 0.75], None),
    ("asymmetric", "ceil", None, [1, 2, 5, 13]),
    ("align_corners", "round_prefer_floor", None, [1, 2, 9, 3]),
    ("pytorch_half_pixel", "floor", None, [1, 2, 1, 11])], ids=str)
def test_nearest_resize_reads_the_sources_onnxruntime_reads(transform, rounding, scales, sizes, tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(scales if scales else [], np.float32), "scales")]
    if sizes:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    node = helper.make_node("Resize", ["x", "", "scales", *(["sizes"] if sizes else [])], ["y"], name="resize",
                            mode="nearest", coordinate_transformation_mode=transform, nearest_mode=rounding)
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits[1:] if sizes else inits)
    import onnx

    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "r.onnx"))
    if sizes:  # an empty scales input with sizes, as the exporters write it
        model = onnx.load(str(tmp_path / "r.onnx"))
        model.graph.node[0].input[2] = ""
        onnx.save(model, str(tmp_path / "r.onnx"))
    X = np.random.default_rng(9).normal(size=(3, 1, 2, 6, 8)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(tmp_path / "r.onnx"), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x})[0].reshape(1, -1) for x in X])
    np.testing.assert_array_equal(tinycc_ml.load_model(tmp_path / "r.onnx").scores(X.reshape(3, -1)), want)
