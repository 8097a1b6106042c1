"""ONNX's recurrent layers (GRU, LSTM, RNN) as torch.nn exports them (scripts/export_pytorch_nets.py, both
exporters), unrolled over the sequence or stepped one time step per call, held to onnxruntime: the float graph and
the float C to float32 rounding, a stream of steps to the whole sequence; the initial states given as inputs are
carried from call to call as onnxruntime is given them. The suite does not import torch: the files are committed.
It also runs what docs/guide/networks.md's recurrent-layer blocks show (stepping the exports, the command-line
options), which the docs runner leaves to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.interp import run_float

onnxruntime = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
SEQUENCES = 6
# name -> whether it can be stepped (its recurrent layer reads the network's input, forwards)
NETS = {"conv1d_gru": False, "lstm_classifier": True, "bidirectional_gru": False, "lstm_2layer": True,
        "rnn_tanh": True, "gru_keyword": True, "lstm_activity": True}


def assert_float_close(got, want):
    """float32 rounding over a few dozen time steps."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * (1 + np.max(np.abs(want))))


def onnxruntime_stream(path: Path, X: np.ndarray) -> np.ndarray:
    """The first output of each call on the rows of X (each the data input's elements); the inputs after the first
    start at zero and are given the outputs after the first of the call before (as a stream carries h0 -> h_n)."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    data, *states = session.get_inputs()
    shape = [d if isinstance(d, int) else 1 for d in data.shape]
    carried = [np.zeros([d if isinstance(d, int) else 1 for d in s.shape], np.float32) for s in states]
    scores = []
    for x in X:
        outputs = session.run(None, {data.name: x.reshape(shape).astype(np.float32),
                                     **{s.name: v for s, v in zip(states, carried)}})
        scores.append(outputs[0].reshape(-1))
        carried = outputs[1:]
    return np.array(scores)


def sequences(path: Path, seed: int = 0) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    return np.random.default_rng(seed).normal(size=(SEQUENCES, int(np.prod(shape))))


def time_steps(model, X: np.ndarray, path: Path) -> np.ndarray:
    """The sequences of X as one time step per row, in order."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    axis = model.graph.type(model.input_name).layout.index("T")
    steps = np.moveaxis(X.reshape(len(X), *shape), axis + 1, 1)
    return steps.reshape(len(X) * shape[axis], -1)


@pytest.mark.parametrize("exporter", ["", "_ts"])
@pytest.mark.parametrize("name", list(NETS))
def test_unrolled_recurrent_nets_match_onnxruntime(name, exporter, tmp_path):
    """GRU (after a Conv1d; bidirectional; 49 steps), LSTM (one and two layers, the initial states given and
    carried), RNN(tanh) (the dynamo exporter unrolls it into MatMul / Tanh nodes, read back as one RNN node:
    importers/onnx_unrolled_rnn.py): the float interpreter and the float C against onnxruntime, labels equal."""
    require_target("host")
    path = DATA / f"{name}{exporter}.onnx"
    model = tinycc_ml.load_model(path)
    X = sequences(path)
    want = onnxruntime_stream(path, X)
    assert_float_close(model.scores(X), want)
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path)
    assert "Recurrent layers: unrolled, the whole sequence per call." in result.files["net.h"]
    scores, labels = result.load().run_raw(X.astype(np.float32))
    assert_float_close(scores, want)
    np.testing.assert_array_equal(labels, np.argmax(want, axis=1))


@pytest.mark.parametrize("name", [f"{n}{e}" for n, steppable in NETS.items() if steppable for e in ("", "_ts")])
def test_a_stream_of_steps_equals_the_unrolled_sequence(name, tmp_path):
    """recurrent="step": one time step per call, the states in static RAM; after a sequence's last step the scores
    are onnxruntime's on the whole sequence (reset between sequences, or carried where the network takes its
    initial states as inputs, as onnxruntime was given them)."""
    require_target("host")
    path = DATA / f"{name}.onnx"
    model = tinycc_ml.load_model(path, recurrent="step")
    X = sequences(path, seed=1)
    want = onnxruntime_stream(path, X)
    steps = time_steps(model, X, path)
    length = len(steps) // SEQUENCES
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    carried = len(session.get_inputs()) > 1  # the initial states are inputs: carried across the sequences
    assert model.input_dim == steps.shape[1]
    result = tinycc_ml.compile(path, target="host", name="net", out_dir=tmp_path, recurrent="step")
    assert "Recurrent layers: stepped, one time step per call" in result.files["net.h"]
    assert "void net_reset(void);" in result.files["net.h"]
    predictor = result.load()
    got = []
    for k in range(SEQUENCES):
        if not carried:
            predictor.reset()
        scores, _ = predictor.run_raw(steps[k * length:(k + 1) * length].astype(np.float32))
        got.append(scores[-1])
    assert_float_close(np.array(got), want)
    if not carried:  # the interpreter's stream, from the model's state at reset
        assert_float_close(model.scores(steps[:length])[-1], want[0])


def test_compile_reads_the_recurrent_option_for_a_loaded_model_and_refuses_it_elsewhere():
    model = tinycc_ml.load_model(DATA / "gru_keyword.onnx")
    assert model.recurrent == "unroll" and model.input_dim == 490
    stepped = tinycc_ml.compile(model, target="host", recurrent="step")
    assert stepped.graph.type(stepped.graph.inputs()[0]).size == 10
    with pytest.raises(CompileError, match=r"recurrent: options of ONNX networks with recurrent layers"):
        tinycc_ml.compile(tinycc_ml.load_model(DATA / "sigmoid.onnx"), target="host", recurrent="step")
    with pytest.raises(CompileError, match=r"recurrent='sideways' is not one of unroll, step"):
        tinycc_ml.load_model(DATA / "gru_keyword.onnx", recurrent="sideways")


@pytest.mark.parametrize("name, message", [
    ("conv1d_gru", r"no recurrent layer reads the input as its sequence \(GRU node 'node_gru__1' reads 'relu' "
                   r"\(Relu node 'node_relu'\), over the whole sequence\): compile it unrolled"),
    ("bidirectional_gru_ts", r"GRU node '/layer/GRU': direction 'bidirectional' reads the sequence backwards, which a "
                             r"stepped build \(one time step per call\) cannot"),
])
def test_stepping_refusals(name, message):
    with pytest.raises((CompileError, ModelFileError), match=message):
        tinycc_ml.load_model(DATA / f"{name}.onnx", recurrent="step")


def test_tflite_int8_of_a_stepped_layer_is_refused_by_name():
    """TFLite's int8 has no quantisation of a state kept between calls; the project's int16 and pow2 int8 give it
    its next value's scale (tests/importers/test_onnx_recurrent_fixed.py)."""
    rows = np.random.default_rng(0).normal(size=(20, 10))
    with pytest.raises(CompileError, match=r"GRU node 'node_gru__1': no int8 quantisation \(TFLite's dialect\): a "
                                           r"state kept between calls .* compile it at precision int16"):
        tinycc_ml.compile(DATA / "gru_keyword.onnx", target="host", precision="int8", calibration=rows,
                          recurrent="step")


# ---------------------------------------------------------------- hand-written graphs: every attribute

def recurrent_file(path: Path, op: str, attrs: dict | None = None, *, hidden: int = 4, features: int = 3,
                   steps: int | str = 5, initial: np.ndarray | None = None, reader: str = "final",
                   seed: int = 0) -> Path:
    """X (steps, 1, features) -> op -> its final hidden state (``reader="final"``), or its output Y averaged over
    time (``"mean"``), flattened -> Gemm to 3 scores."""
    from onnx import TensorProto, helper, numpy_helper

    attrs = dict(attrs or {})
    gates = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, size=s).astype(np.float32), n) for n, s in (
        ("W", (dirs, gates * hidden, features)), ("R", (dirs, gates * hidden, hidden)),
        ("B", (dirs, 2 * gates * hidden)), ("Wd", (3, dirs * hidden)))]
    inputs = ["x", "W", "R", "B"]
    if initial is not None:
        inits.append(numpy_helper.from_array(initial.astype(np.float32), "h0"))
        inputs += ["", "h0"]
    nodes = [helper.make_node(op, inputs, ["y", "h"], name="layer", hidden_size=hidden, **attrs)]
    if reader == "final":
        nodes.append(helper.make_node("Flatten", ["h"] if dirs == 1 else ["h"], ["f"], name="flat", axis=0))
    else:
        nodes += [helper.make_node("ReduceMean", ["y"], ["m"], name="mean_over_time", axes=[0], keepdims=0),
                  helper.make_node("Flatten", ["m"], ["f"], name="flat", axis=0)]
    nodes.append(helper.make_node("Gemm", ["f", "Wd"], ["scores"], name="head", transB=1))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, features])
    graph = helper.make_graph(nodes, "rnn", [x], [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("op, attrs", [
    ("GRU", {"linear_before_reset": 0}), ("GRU", {"direction": "reverse", "linear_before_reset": 1}),
    ("LSTM", {"direction": "bidirectional"}), ("RNN", {"activations": ["Relu"]}),
    ("RNN", {"direction": "bidirectional", "activations": ["Tanh", "Tanh"]})], ids=str)
def test_every_direction_and_activation_unrolled(op, attrs, tmp_path):
    path = recurrent_file(tmp_path / "n.onnx", op, attrs, reader="mean")
    model = tinycc_ml.load_model(path)
    X = sequences(path, seed=2)
    want = onnxruntime_stream(path, X)
    assert_float_close(model.scores(X), want)
    rows = X.reshape(len(X), *model.graph.type(model.input_name).shape)
    assert_float_close(run_float(model.graph, rows)["scores"].reshape(len(X), -1), want)


def test_a_constant_initial_state_is_where_a_stepped_stream_starts_after_a_reset(tmp_path):
    require_target("host")
    initial = np.random.default_rng(7).normal(size=(1, 1, 4))
    path = recurrent_file(tmp_path / "n.onnx", "GRU", {"linear_before_reset": 1}, initial=initial)
    X = sequences(path, seed=3)
    want = onnxruntime_stream(path, X)
    model = tinycc_ml.load_model(path, recurrent="step")
    predictor = tinycc_ml.compile(model, target="host").load()
    for k, x in enumerate(X.reshape(SEQUENCES, 5, 3)):
        predictor.reset()
        assert_float_close(predictor.run_raw(x.astype(np.float32))[0][-1], want[k])


@pytest.mark.parametrize("name", ["lstm_classifier", "lstm_activity", "bidirectional_gru", "lstm_bidirectional_h0"])
def test_tflite_int8_of_unrolled_layers_is_the_interpreter_in_c_and_near_onnxruntime(name, tmp_path):
    """TFLite's int8 of an unrolled GRU / LSTM, quantised as the converter does (an LSTM: weights per tensor,
    the hidden state int8 at its output's quantisation, the cell state int16 at a power-of-two scale; a GRU's
    states joined by concatenation at one quantisation): the host C equals the int8 interpreter on every byte, its
    scores onnxruntime's to within a tenth of their spread."""
    require_target("host")
    if name == "lstm_bidirectional_h0":
        path = recurrent_file(tmp_path / "n.onnx", "LSTM", {"direction": "bidirectional"}, reader="mean",
                              initial=np.random.default_rng(5).normal(size=(2, 1, 4)), steps=7)
    else:
        path = DATA / f"{name}.onnx"
    model = tinycc_ml.load_model(path)
    X = np.random.default_rng(4).normal(size=(64, model.input_dim))
    want = onnxruntime_stream(path, X)
    result = tinycc_ml.compile(model, target="host", precision="int8", calibration=X[:48], name="net",
                               out_dir=tmp_path / "out")
    int8 = model.quantise(X[:48])
    g = int8.graph
    for cell in [n for n in g.order() if g.op(n) == "lstm_cell"]:
        scale = g.type(cell).dtype.qscales[0]
        assert g.type(cell).dtype.bits == 16 and scale == 2.0 ** round(np.log2(scale))
    Xq = int8.quantise_input(X)
    scores, _ = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, int8.run_int8(Xq.reshape(len(X), *int8.input_shape)).reshape(len(X), -1))
    got = int8.scores(X)
    assert np.max(np.abs(got - want)) < 0.1 * (np.max(want) - np.min(want))


def test_a_dynamic_sequence_asks_for_its_length(tmp_path):
    path = recurrent_file(tmp_path / "n.onnx", "LSTM", steps="seq")
    with pytest.raises(ModelFileError, match=r"input 'x' dimension 0 is the sequence of LSTM node 'layer', of dynamic "
                                             r"length \(seq\): give its length \(--sequence-length"):
        tinycc_ml.load_model(path)
    model = tinycc_ml.load_model(path, sequence_length=7)
    X = np.random.default_rng(4).normal(size=(SEQUENCES, 21))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x.reshape(7, 1, 3).astype(np.float32)})[0] for x in X])
    assert_float_close(model.scores(X), want)
    assert tinycc_ml.load_model(path, recurrent="step").input_dim == 3  # any length, one step at a time
    fixed = recurrent_file(tmp_path / "fixed.onnx", "LSTM")
    with pytest.raises(CompileError, match=r"sequence_length=7, but input 'x' has a sequence of 5 time steps fixed"):
        tinycc_ml.load_model(fixed, sequence_length=7)


@pytest.mark.parametrize("op, attrs, reader, message", [
    ("GRU", {}, "mean", r"ReduceMean node 'mean_over_time' reads 'y', a recurrent layer's sequence, across its time "
                        r"steps; a stepped build"),
    ("LSTM", {"clip": 3.0}, "final", r"LSTM \(node 'layer'\): attribute clip is not supported"),
    ("GRU", {"activations": ["Sigmoid", "Relu"]}, "final", r"GRU node 'layer': activations \['Sigmoid', 'Relu'\] "
                                                           r"\(supported: \['Sigmoid', 'Tanh'\] per direction\)"),
    ("LSTM", {"input_forget": 1}, "final", r"LSTM \(node 'layer'\): input_forget=1 is not supported"),
], ids=["mean_over_time", "clip", "activations", "input_forget"])
def test_recurrent_refusals_name_node_op_and_attribute(op, attrs, reader, message, tmp_path):
    path = recurrent_file(tmp_path / "n.onnx", op, attrs, reader=reader)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path, recurrent="step")


def test_the_command_line_steps_and_asks_for_the_sequence_length(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "tinycc_ml", "compile"]
    done = subprocess.run([*command, str(DATA / "lstm_activity_ts.onnx"), "--recurrent", "step", "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "out" / "lstm_activity_ts.h").read_text()
    assert "Recurrent layers: stepped" in header and "#define LSTM_ACTIVITY_TS_INPUT_DIM 3" in header
    path = recurrent_file(tmp_path / "n.onnx", "GRU", steps="seq")
    refused = subprocess.run([*command, str(path), "-o", str(tmp_path / "refused")], capture_output=True, text=True,
                             env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "give its length (--sequence-length" in refused.stderr and not (tmp_path / "refused").exists()
    done = subprocess.run([*command, str(path), "--sequence-length", "9", "-o", str(tmp_path / "nine")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "#define N_INPUT_DIM 27" in (tmp_path / "nine" / "n.h").read_text()


@pytest.mark.parametrize("name, target", [("gru_keyword", "cortex-m4"), ("lstm_activity", "avr"),
                                          ("lstm_activity_ts", "cortex-m0")])
def test_stepped_models_run_on_the_chips_as_the_interpreter_does(name, target, tmp_path):
    """The GRU keyword-style model (49 x 10) on the Cortex-M4, the LSTM activity model in the ATmega328P's 2 KB of
    RAM: one time step per call in the simulator, every step's scores the float interpreter's (to float32
    rounding), the last step's onnxruntime's on the whole sequence."""
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend

    path = DATA / f"{name}.onnx"
    X = sequences(path, seed=5)[:1]
    want = onnxruntime_stream(path, X)
    model = tinycc_ml.load_model(path, recurrent="step")
    steps = time_steps(model, X, path)
    result = tinycc_ml.compile(model, target=target, name="net", out_dir=tmp_path)
    if target == "avr":
        assert result.report["fit"]["chip"] == "ATmega328P" and result.report["fit"]["ram_bytes"] < 2048
    run = get_backend(target).simulate(tmp_path, result.output, steps)
    scores = np.asarray(run.scores, dtype=np.float64).reshape(len(steps), -1)
    assert_float_close(scores, model.scores(steps))
    assert_float_close(scores[-1], want[0])


def test_a_long_unrolled_sequence_plans_its_memory_without_recursing_per_value():
    """The zoo's bidirectional GRU unrolled over 32 steps: over a thousand values in one arena, on which the
    placement search (one Python frame per value) overflowed the interpreter's stack (a RecursionError); the best
    placement order stands."""
    from tinycc_ml.passes import PassContext, run_passes
    from tinycc_ml.passes.plan_memory import SEARCH_MAX_VALUES

    model = tinycc_ml.load_model(DATA.parent / "pytorch_zoo" / "bigru_activity.onnx")
    graph = run_passes(model.lower_for("float"), ["fold_channels_first", "dce", "plan_memory"], PassContext())
    slots = graph.analyses.memory_plan
    assert len(slots) > 2 * SEARCH_MAX_VALUES
    assert sum(graph.analyses.arenas.values()) < sum(slot.length for slot in slots.values())  # values share bytes
