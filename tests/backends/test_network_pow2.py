"""Float networks compiled at precision float (float C for every network op) and in the project's own fixed point
(int16, and int8 with int8_dialect="pow2": power-of-two scales from calibration rows, int32 accumulators with
overflow proofs; ir/ops/pow2_arith.py, passes/network_scales.py, codegen/c_network_pow2.py).

The C is held to the interpreters: bit for bit to the fixed-point interpreter on random small conv graphs
(hypothesis), within float32 rounding to the float one; the sensor CNN's int16 build is held to the float
network's accuracy and to the ATmega328P's 2 KB of RAM."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import CompileError, FitError, IRError
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.types import F32, TensorType, fixed
from tinycc_ml.ir.verify import verify
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.network_fixed import quantise_rows
from tinycc_ml.passes.network_scales import NetworkOverflowError

REPO = Path(__file__).resolve().parents[2]
SENSOR = REPO / "tests" / "data" / "sensor_cnn.onnx"
POW2 = {"int16": {}, "int8": {"int8_dialect": "pow2"}}


@pytest.fixture(scope="module", autouse=True)
def host():
    require_target("host")


# ---------------------------------------------------------------- random small conv graphs


@st.composite
def conv_graphs(draw):
    """A float conv network: maybe a pad, conv2d (window, stride, dilation, padding, activation), then any of a
    depthwise convolution, a pool, a relu or relu6, a residual add of a 1x1 convolution; a mean, a flatten, or a
    transpose to channels-first and a flatten; a dense layer."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    h, w, c = draw(st.integers(1, 5)), draw(st.integers(3, 9)), draw(st.integers(1, 4))
    magnitude = draw(st.sampled_from([0.05, 1.0, 30.0]))  # the weights' size: the overflow proofs' scale choice
    g = Graph("net")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, h, w, c), F32, "NHWC"), name="x")

    def const(value, layout=""):
        value = np.asarray(value, dtype=np.float32)
        return g.add("const", [], {"value": value}, type=TensorType(value.shape, F32, layout), name="w")

    def conv(v, kind, kernel, channels, attrs):
        in_c = g.type(v).shape[3]
        if kind == "conv2d":
            filt = const(rng.normal(size=(channels, *kernel, in_c)) * magnitude, "OHWI")
        else:
            filt = const(rng.normal(size=(1, *kernel, in_c)) * magnitude, "IHWO")
            attrs = {**attrs, "depth_multiplier": 1}
        bias = const(rng.normal(size=g.type(filt).shape[0 if kind == "conv2d" else 3]) * magnitude)
        return g.add(kind, [v, filt, bias], attrs, name=kind)

    def window(v):
        size = g.type(v).shape[1:3]
        kernel = tuple(draw(st.integers(1, max(1, min(3, s)))) for s in size)
        padding = draw(st.sampled_from(["same", "valid", "explicit"]))
        attrs = {"stride": [draw(st.integers(1, 2)) for _ in size], "dilation": [1, 1], "padding": padding,
                 "activation": draw(st.sampled_from(["none", "relu", "relu6"]))}
        if padding == "explicit":
            attrs["pads"] = [draw(st.integers(0, k - 1)) for k in (*kernel, *kernel)]
        if all(k == 1 for k in kernel) and draw(st.booleans()):
            attrs["dilation"] = [2, 2]
        return kernel, attrs

    if draw(st.booleans()):
        before = [draw(st.integers(0, 2)) for _ in range(4)]
        x = g.add("pad", [x], {"pads": [0, 0, before[0], before[1], before[2], before[3], 0, 0]}, name="pad")
    kernel, attrs = window(x)
    v = conv(x, "conv2d", kernel, draw(st.integers(1, 4)), attrs)
    if draw(st.booleans()):
        kernel, attrs = window(v)
        v = conv(v, "depthwise_conv2d", kernel, 0, attrs)
    if draw(st.booleans()):
        pool = draw(st.sampled_from(["max_pool2d", "average_pool2d"]))
        size = g.type(v).shape[1:3]
        v = g.add(pool, [v], {"filter": [min(2, s) for s in size], "stride": [min(2, s) for s in size],
                             "padding": draw(st.sampled_from(["same", "valid"])), "activation": "none"}, name=pool)
    if draw(st.booleans()):
        v = g.add(draw(st.sampled_from(["relu", "relu6"])), [v], name="activation")
    if draw(st.booleans()):
        branch = conv(v, "conv2d", (1, 1), g.type(v).shape[3], {"stride": [1, 1], "dilation": [1, 1],
                                                                  "padding": "valid", "activation": "none"})
        v = g.add("tensor_add", [v, branch], {"activation": draw(st.sampled_from(["none", "relu"]))}, name="add")
    flatten = draw(st.sampled_from(["mean", "reshape", "transpose"]))
    if flatten == "mean":
        v = g.add("mean", [v], {"axes": [1, 2], "keep_dims": 0}, name="mean")
    else:
        if flatten == "transpose":  # to channels-first before the flatten, as an ONNX import does
            v = g.add("transpose", [v], {"perm": [0, 3, 1, 2]}, name="channels_first")
        v = g.add("reshape", [v], {"shape": [1, g.type(v).size]}, name="flat")
    depth = g.type(v).shape[1]
    dense = g.add("fully_connected", [v, const(rng.normal(size=(3, depth)), "OI"), const(rng.normal(size=3))],
                  {"activation": "none"}, name="dense")
    g.set_output("scores", dense)
    verify(g)
    return g


def rows_for(graph: Graph, n: int, seed: int, spread: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=spread, size=(n, graph.type("x").size))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=conv_graphs(), precision=st.sampled_from(sorted(POW2)))
def test_random_conv_graphs_in_c_equal_the_fixed_interpreter_bit_for_bit(graph, precision):
    model = NetworkModel(graph, "random")
    calibration = rows_for(graph, 30, 1)
    try:
        result = tinycc_ml.compile(model, target="host", precision=precision, calibration=calibration, name="net",
                                   **POW2[precision])
    except NetworkOverflowError as exc:  # a drawn bias beyond what int32 sums can hold: refused by name, as it must
        assert "accumulator can reach" in str(exc)
        reject()
    fixed_graph = result.graph
    assert all(fixed_graph.type(n).dtype.is_fixed for n in fixed_graph.order() if fixed_graph.op(n) != "argmax")
    # rows like the calibration's, and three times wider: saturation, never wrapping, in both
    Xq = quantise_rows(fixed_graph, np.concatenate([rows_for(graph, 20, 2), rows_for(graph, 10, 3, spread=3.0)]))
    want = run_fixed(fixed_graph, Xq)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, want["scores"])
    np.testing.assert_array_equal(predictions, want["prediction"])


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(graph=conv_graphs(), precision=st.sampled_from(sorted(POW2)))
def test_random_conv_graphs_on_microcontrollers_equal_the_fixed_interpreter(target, graph, precision, tmp_path_factory):
    """The simulators run the targets' C (their layer kernels: AVR assembly, the M0's and the M4's): bit for
    bit."""
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend  # noqa: PLC0415

    folder = tmp_path_factory.mktemp(target)
    calibration = rows_for(graph, 30, 1)
    try:
        result = tinycc_ml.compile(NetworkModel(graph, "random"), target=target, precision=precision, name="net",
                                   calibration=calibration, out_dir=folder, **POW2[precision])
    except FitError:
        return  # a random graph too big for the chip's RAM (the ATmega328P's 2 KB)
    except NetworkOverflowError as exc:  # a drawn bias beyond what int32 sums can hold: refused by name
        assert "accumulator can reach" in str(exc)
        reject()
    X = np.concatenate([rows_for(graph, 4, 2), rows_for(graph, 2, 3, spread=3.0)])
    run = get_backend(target).simulate(folder, result.output, X)
    want = run_fixed(result.graph, quantise_rows(result.graph, X))
    np.testing.assert_array_equal(run.scores, want["scores"])
    np.testing.assert_array_equal(run.predictions, want["prediction"])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=conv_graphs())
def test_random_conv_graphs_in_float_c_equal_the_float_interpreter(graph):
    result = tinycc_ml.compile(NetworkModel(graph, "random"), target="host", precision="float", name="net")
    X = rows_for(graph, 20, 4)
    want = run_float(graph, X.reshape(len(X), *graph.type("x").shape))["scores"].reshape(len(X), -1)
    scores, _ = result.load().run_raw(X.astype(np.float32))
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4 * (1 + np.max(np.abs(want))))


# ---------------------------------------------------------------- the fixed-point graph's text and verifier


def sensor_int16() -> tuple[tinycc_ml.CompileResult, np.ndarray]:
    sys.path.insert(0, str(REPO / "examples" / "sensor_cnn"))
    from dataset import make_rows  # noqa: PLC0415

    X, _ = make_rows(200, 1)
    rows = X.reshape(200, -1)
    return tinycc_ml.compile(SENSOR, target="host", precision="int16", calibration=rows, name="sensor"), rows


def test_fixed_network_text_round_trips():
    result, _ = sensor_int16()
    text = print_graph(result.graph)
    assert "fx16." in text and "fx32." in text and "@NHWC" in text
    assert parse_graph(text).structurally_equal(result.graph)


def retyped(graph: Graph, name: str, dtype) -> Graph:
    """A copy of ``graph`` with node ``name`` declaring ``dtype``."""
    bad = graph.copy()
    bad.nx.nodes[name]["type"] = bad.type(name).with_dtype(dtype)
    return bad


def test_verifier_rejects_bad_shifts_and_misscaled_biases():
    result, _ = sensor_int16()
    g = result.graph
    conv = next(n for n in g.order() if g.op(n) == "conv2d")
    x, w, b = g.node(conv).inputs
    acc_scale = g.type(x).dtype.scale + g.type(w).dtype.scale
    with pytest.raises(IRError, match=rf"%{conv} \(conv2d\): output: a right shift of -1 bits is outside \[0, 31\]"):
        verify(retyped(g, conv, fixed(16, acc_scale + 1)))  # finer than its accumulator
    with pytest.raises(IRError, match="a right shift of 32 bits is outside"):
        verify(retyped(g, conv, fixed(16, acc_scale - 32)))
    with pytest.raises(IRError, match=rf"bias must be fx32.{acc_scale}"):
        verify(retyped(g, b, fixed(32, acc_scale - 1)))
    pool = next(n for n in g.order() if g.op(n) == "max_pool2d")
    with pytest.raises(IRError, match="keeps its input's type"):
        verify(retyped(g, pool, fixed(16, g.type(pool).dtype.scale - 1)))


# ---------------------------------------------------------------- overflow proof


def test_a_layer_whose_accumulator_cannot_be_proven_is_refused_by_name():
    """1024 equal weights: any weight scale keeping 6 significant bits lets sum |w| |x| pass 2^30 at int16."""
    g = Graph("wide")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, 1024), F32, "NC"), name="x")
    w = g.add("const", [], {"value": np.ones((2, 1024), np.float32)}, type=TensorType((2, 1024), F32, "OI"))
    b = g.add("const", [], {"value": np.zeros(2, np.float32)}, type=TensorType((2,), F32))
    g.set_output("scores", g.add("fully_connected", [x, w, b], {"activation": "none"}, name="wide_fc"))
    model = NetworkModel(g, "wide")
    rows = np.random.default_rng(0).normal(size=(20, 1024))
    with pytest.raises(NetworkOverflowError, match=r"node %wide_fc \(fully_connected\): its int32 accumulator can "
                                                   r"reach \d+ \(over the proven limit 2\^30; its bias alone 0\)"):
        tinycc_ml.compile(model, target="host", precision="int16", calibration=rows)
    # at int8 the same layer is proven: 1024 x 127 x 128 < 2^30
    result = tinycc_ml.compile(model, target="host", precision="int8", int8_dialect="pow2", calibration=rows)
    assert result.graph.type("wide_fc").dtype.bits == 8


# ---------------------------------------------------------------- the sensor CNN


@pytest.fixture(scope="module")
def sensor_data():
    sys.path.insert(0, str(REPO / "examples" / "sensor_cnn"))
    from dataset import make_rows  # noqa: PLC0415

    X_train, _ = make_rows(1200, 1)
    X_test, y_test = make_rows(400, 2)
    return X_train[:200].reshape(200, -1), X_test.reshape(400, -1), y_test


def test_sensor_cnn_int16_is_within_half_a_point_of_float(sensor_data):
    calibration, X, y = sensor_data
    model = tinycc_ml.load_model(SENSOR)
    float_accuracy = np.mean(np.argmax(model.scores(X), axis=1) == y)
    result = tinycc_ml.compile(model, target="host", precision="int16", calibration=calibration, name="sensor")
    Xq = quantise_rows(result.graph, X)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, run_fixed(result.graph, Xq)["scores"])
    assert abs(np.mean(predictions == y) - float_accuracy) <= 0.005
    assert result.report["dialect"] == "pow2" and result.report["agreement_with_float"] >= 0.99
    # the channels-first input is read in place, the pools run in place: two layer outputs of int16 at most
    assert result.report["arena_bytes"] == 2 * (64 * 8)


def test_sensor_cnn_float_c_agrees_with_onnxruntime(sensor_data):
    import onnxruntime

    _, X, _ = sensor_data
    result = tinycc_ml.compile(SENSOR, target="host", precision="float", name="sensor")
    scores, predictions = result.load().run_raw(X.astype(np.float32))
    session = onnxruntime.InferenceSession(str(SENSOR), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    want = np.concatenate([session.run(None, {name: x.reshape(1, 3, 128).astype(np.float32)})[0] for x in X])
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4)
    top_two = np.sort(want, axis=1)[:, -2:]
    clear = top_two[:, 1] - top_two[:, 0] > 1e-3  # rows whose two best scores float32 rounding cannot swap
    np.testing.assert_array_equal(predictions[clear], np.argmax(want, axis=1)[clear])


def test_sensor_cnn_int16_and_int8_run_in_the_atmega328p_2kb_bit_for_bit(sensor_data, tmp_path):
    require_target("avr")
    from tinycc_ml.codegen.backend import get_backend  # noqa: PLC0415

    calibration, X, _ = sensor_data
    for precision, bits in (("int16", 16), ("int8", 8)):
        folder = tmp_path / precision
        result = tinycc_ml.compile(SENSOR, target="avr", precision=precision, calibration=calibration, name="sensor",
                                   out_dir=folder, **POW2[precision])
        assert f"sensor_avr_dot{bits}(" in result.files["sensor.c"]  # the layers' assembly dot products
        run = get_backend("avr").simulate(folder, result.output, X[:5])
        want = run_fixed(result.graph, quantise_rows(result.graph, X[:5]))["scores"]
        np.testing.assert_array_equal(run.scores, want)
        assert run.ram_bytes + run.stack_bytes <= 2048


def test_int8_dialect_is_chosen_alike_from_python_and_the_cli(sensor_data, tmp_path):
    calibration, _, _ = sensor_data
    np.save(tmp_path / "cal.npy", calibration)
    for dialect, marker in (("tflite", "tfl_requantise"), ("pow2", "fx_clamp8")):
        assert cli.main(["compile", str(SENSOR), "-o", str(tmp_path / dialect), "--calibration",
                         str(tmp_path / "cal.npy"), "--precision", "int8", "--int8-dialect", dialect]) == 0
        source = (tmp_path / dialect / "sensor_cnn.c").read_text()
        assert marker in source
        api = tinycc_ml.compile(SENSOR, precision="int8", calibration=calibration, int8_dialect=dialect)
        assert api.files["sensor_cnn.c"] == source
    with pytest.raises(CompileError, match="int8_dialect chooses how a float network"):
        tinycc_ml.compile(SENSOR, precision="int16", calibration=calibration, int8_dialect="pow2")


def test_builds_are_deterministic_and_clean_c99(sensor_data, tmp_path):
    import subprocess

    calibration, _, _ = sensor_data
    for precision, options in (("float", {}), ("int16", {}), ("int8", {"int8_dialect": "pow2"})):
        kwargs = {"precision": precision, "name": "sensor", **options,
                  "calibration": None if precision == "float" else calibration}
        first, second = (tinycc_ml.compile(SENSOR, **kwargs).files for _ in range(2))
        assert first == second
        (tmp_path / "sensor.c").write_text(first["sensor.c"])
        (tmp_path / "sensor.h").write_text(first["sensor.h"])
        subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-c", str(tmp_path / "sensor.c"),
                        "-o", str(tmp_path / "sensor.o")], check=True)


@pytest.mark.parametrize("target,core", [("cortex-m0", "m0"), ("cortex-m4", "m4"), ("cortex-m33", "m4")])
def test_sensor_cnn_on_arm_runs_its_layer_kernels_bit_for_bit(target, core, sensor_data, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend  # noqa: PLC0415

    calibration, X, _ = sensor_data
    for precision, bits in (("int16", 16), ("int8", 8)):
        folder = tmp_path / precision
        result = tinycc_ml.compile(SENSOR, target=target, precision=precision, calibration=calibration,
                                   name="sensor", out_dir=folder, **POW2[precision])
        # the helper, then the two convolutions and the dense layer
        assert result.files["sensor.c"].count(f"sensor_{core}_dot{bits}x2(") == 1 + 3
        run = get_backend(target).simulate(folder, result.output, X[:20])
        want = run_fixed(result.graph, quantise_rows(result.graph, X[:20]))["scores"]
        np.testing.assert_array_equal(run.scores, want)


@pytest.mark.parametrize("precision", sorted(POW2))
def test_a_softmax_compiles_in_the_projects_fixed_point(precision, tmp_path):
    """Its C equal to the fixed-point interpreter; its probabilities within the stated bound of the softmax of the
    fixed-point logits (ir/ops/fixed_softmax.py), and near the float network's."""
    from tinycc_ml.ir.ops import fixed_softmax  # noqa: PLC0415

    g = Graph("soft")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, 4), F32, "NC"), name="x")
    w = g.add("const", [], {"value": np.eye(4, dtype=np.float32) * 2}, type=TensorType((4, 4), F32, "OI"))
    b = g.add("const", [], {"value": np.zeros(4, np.float32)}, type=TensorType((4,), F32))
    dense = g.add("fully_connected", [x, w, b], {"activation": "none"}, name="dense")
    g.set_output("scores", g.add("softmax", [dense], {"beta": 1.0}, name="probabilities"))
    rows = np.random.default_rng(0).normal(size=(40, 4))
    result = tinycc_ml.compile(NetworkModel(g, "soft"), precision=precision, calibration=rows, out_dir=tmp_path,
                               **POW2[precision])
    Xq = quantise_rows(result.graph, rows)
    scores, _ = result.load().run_raw(Xq)
    fixed_values = run_fixed(result.graph, Xq)
    np.testing.assert_array_equal(scores, fixed_values["scores"])
    logits_graph = result.graph.copy()
    (soft,) = [n for n in logits_graph.order() if logits_graph.op(n) == "softmax"]
    logits_graph.outputs = [("logits", logits_graph.node(soft).inputs[0])]
    logits = run_fixed(logits_graph, Xq)["logits"].reshape(40, 4) * 2.0**-logits_graph.type(
        logits_graph.node(soft).inputs[0]).dtype.scale
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    bits = 16 if precision == "int16" else 8
    got = scores * 2.0**-fixed_softmax.output_scale(bits)
    assert np.all(np.abs(got - p) <= fixed_softmax.error_bound(p, 4, bits))
    np.testing.assert_allclose(got, NetworkModel(g, "soft").scores(rows), atol=0.002 if bits == 16 else 0.1)


@pytest.mark.parametrize("softmax", [True, False])
def test_a_float_tflite_file_compiles_at_float_and_at_int16(softmax, tmp_path):
    """Its float C within float32 rounding of tflite-micro's float outputs; its int16 C (a softmax in the project's
    fixed point: ir/ops/fixed_softmax.py) equal to the fixed-point interpreter on every score and predicting what
    tflite-micro's floats do."""
    from tflite_micro.python.tflite_micro import runtime

    from tests.tflite_builder import float_model

    path = tmp_path / "float_net.tflite"
    path.write_bytes(float_model(seed=4, softmax=softmax))
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 8 * 8 * 2)).astype(np.float32)
    interpreter = runtime.Interpreter.from_bytes(path.read_bytes())
    want = []
    for row in X:
        interpreter.set_input(row.reshape(1, 8, 8, 2), 0)
        interpreter.invoke()
        want.append(interpreter.get_output(0).reshape(-1))
    want = np.array(want)
    scores, _ = tinycc_ml.compile(path, precision="float").load().run_raw(X)
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)
    calibration = rng.normal(size=(200, 128))
    result = tinycc_ml.compile(path, precision="int16", calibration=calibration)
    Xq = quantise_rows(result.graph, X)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, run_fixed(result.graph, Xq)["scores"])
    assert np.mean(predictions == np.argmax(want, axis=1)) >= 0.95


def test_a_mean_whose_int32_sum_cannot_be_proven_is_refused_by_name():
    """A global mean of 2^16 + 1 int16 values: their sum can pass 2^30."""
    g = Graph("big")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, 257, 256, 1), F32, "NHWC"), name="x")
    mean = g.add("mean", [x], {"axes": [1, 2], "keep_dims": 0}, name="wide_mean")
    w = g.add("const", [], {"value": np.ones((2, 1), np.float32)}, type=TensorType((2, 1), F32, "OI"))
    b = g.add("const", [], {"value": np.zeros(2, np.float32)}, type=TensorType((2,), F32))
    g.set_output("scores", g.add("fully_connected", [mean, w, b], {"activation": "none"}, name="dense"))
    rows = np.random.default_rng(0).normal(size=(20, 257 * 256))
    with pytest.raises(NetworkOverflowError, match=r"node %wide_mean \(mean\): its int32 sum can reach \d+"):
        tinycc_ml.compile(NetworkModel(g, "big"), precision="int16", calibration=rows, search=False)
