"""The .tflite reader: the four MLPerf Tiny int8 reference models lowered to the IR, whose integer
semantics equal tflite-micro's interpreter (TFLite Micro's reference kernels) on every output byte;
hostile files give one ModelFileError naming the file and the problem; unsupported operators and
attributes are named."""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from tflite_micro.python.tflite_micro import runtime

import tinycc_ml
from tests.tflite_builder import tflm_raw_outputs
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.importers.tflite import load_tflite, read_tflite
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.verify import verify

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "data" / "mlperf-tiny"  # MLPerf Tiny's int8 models (data/mlperf-tiny/README.md)
MLPERF = ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8"]
schema = runtime.schema_fb


def model_path(name: str) -> Path:
    return MODELS / f"{name}.tflite"


tflm_outputs = tflm_raw_outputs  # the rows as they are given, the outputs as the interpreter shapes them


@pytest.mark.parametrize("name", MLPERF)
def test_int8_semantics_equal_tflite_micro_on_every_output_byte(name):
    path = model_path(name)
    graph = load_tflite(path)
    shape = graph.type(graph.inputs()[0]).shape
    rng = np.random.default_rng(35)
    X = rng.integers(-128, 128, size=(6, *shape)).astype(np.int8)
    X[0] = -128  # the extremes too
    X[1] = 127
    ours = run_fixed(graph, X)["scores"]
    want = tflm_outputs(path.read_bytes(), X)
    assert ours.shape == want.shape
    assert np.array_equal(ours, want), f"{name}: {(ours != want).sum()} of {ours.size} output bytes differ"


def test_load_model_gives_the_network_and_compile_names_what_is_missing(tmp_path):
    model = tinycc_ml.load_model(model_path("kws_ref_model"))
    assert model.input_shape == (1, 49, 10, 1) and model.n_outputs == 12
    assert "conv2d x5" in model.describe() and "depthwise_conv2d x4" in model.describe()
    X = np.zeros((2, 1, 49, 10, 1), dtype=np.int8)
    assert model.run_int8(X).shape == (2, 1, 12)
    assert np.allclose(model.scores(np.zeros((1, 490))).sum(), 1.0, atol=0.05)  # softmax probabilities
    # C on the host (tests/backends/test_network_c.py) and the microcontrollers (test_network_mcu.py); the
    # ATmega328P's 2 KB of RAM cannot hold its activations
    with pytest.raises(CompileError, match="does not fit the ATmega328P.*activation arena"):
        tinycc_ml.compile(model_path("kws_ref_model"), target="avr", out_dir=tmp_path)


def test_imported_graphs_round_trip_through_the_text_form():
    graph = load_tflite(model_path("kws_ref_model"))
    back = parse_graph(print_graph(graph))
    assert back.structurally_equal(graph)
    verify(back)


def test_truncated_files_give_one_model_file_error_naming_the_file(tmp_path):
    data = model_path("ad01_int8").read_bytes()
    for length in [0, 3, 8, 12, 40, 400, len(data) // 2, len(data) * 9 // 10]:
        path = tmp_path / f"cut{length}.tflite"
        path.write_bytes(data[:length])
        with pytest.raises(ModelFileError, match=f"cut{length}.tflite: "):
            load_tflite(path)


def test_hostile_bytes_give_a_model_file_error_or_a_valid_graph(tmp_path):
    data = model_path("kws_ref_model").read_bytes()
    rng = np.random.default_rng(0)
    path = tmp_path / "hostile.tflite"
    for _ in range(60):
        mutated = bytearray(data)
        for at in rng.integers(0, 2048, size=4):  # the tables and vectors' offsets live near the start
            mutated[at] = rng.integers(0, 256)
        path.write_bytes(bytes(mutated))
        try:
            verify(load_tflite(path))
        except ModelFileError as exc:
            assert str(exc).startswith(str(path))


def test_a_huge_declared_shape_is_refused_before_allocation(tmp_path):
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model_path("ad01_int8").read_bytes(), 0))
    model.subgraphs[0].tensors[0].shape = [1 << 20, 1 << 20]
    with pytest.raises(ModelFileError, match="elements, over the limit"):
        read_or_error(tmp_path, model)


def packed(model) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def read_or_error(tmp_path, model):
    path = tmp_path / "edited.tflite"
    path.write_bytes(packed(model))
    return load_tflite(path)


def edited_kws():
    return schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model_path("kws_ref_model").read_bytes(), 0))


def test_an_unsupported_operator_is_named(tmp_path):
    model = edited_kws()
    softmax = next(c for c in model.operatorCodes if max(c.builtinCode, c.deprecatedBuiltinCode) == 25)
    softmax.deprecatedBuiltinCode, softmax.builtinCode = 127, 131  # RFFT2D (127: "see builtin_code")
    with pytest.raises(ModelFileError, match="edited.tflite: operator RFFT2D is not supported"):
        read_or_error(tmp_path, model)


def test_an_unsupported_fused_activation_is_named(tmp_path):
    model = edited_kws()
    model.subgraphs[0].operators[0].builtinOptions.fusedActivationFunction = 4  # TANH
    with pytest.raises(ModelFileError, match="CONV_2D: fused activation TANH is not supported"):
        read_or_error(tmp_path, model)


def test_a_repacked_model_reads_the_same(tmp_path):
    graph = read_or_error(tmp_path, edited_kws())
    assert graph.structurally_equal(read_tflite(model_path("kws_ref_model").read_bytes(), "edited"))


def test_not_a_tflite_file(tmp_path):
    path = tmp_path / "x.tflite"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelFileError, match="x.tflite: not a TFLite flatbuffer"):
        tinycc_ml.load_model(path)


def test_a_float_tflite_file_is_quantised_by_the_project(tmp_path):
    """A float32 .tflite (a converter's output without quantisation): its float graph computes tflite-micro's
    float outputs; compiled with calibration rows it becomes TFLite's int8 (the project's quantisation), its C
    equal to the int8 interpreter on every byte and within the quantisation's error of tflite-micro's floats."""
    from tests.tflite_builder import float_model

    path = tmp_path / "float_net.tflite"
    path.write_bytes(float_model(seed=4))
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 8 * 8 * 2)).astype(np.float32)
    interpreter = runtime.Interpreter.from_bytes(path.read_bytes())
    want = []
    for row in X:
        interpreter.set_input(row.reshape(1, 8, 8, 2), 0)
        interpreter.invoke()
        want.append(interpreter.get_output(0).reshape(-1))
    want = np.array(want)
    model = tinycc_ml.load_model(path)
    assert not model.is_quantised
    np.testing.assert_allclose(model.scores(X), want, rtol=1e-5, atol=1e-6)
    calibration = rng.normal(size=(200, 128))
    result = tinycc_ml.compile(path, precision="int8", calibration=calibration)
    assert result.report["quantised_from_float"] and result.prefix == "float_net"
    int8 = model.quantise(calibration)
    rows = int8.quantise_input(X)
    scores, _ = result.load().run_raw(rows)
    np.testing.assert_array_equal(scores, int8.run_int8(rows.reshape(40, 1, 8, 8, 2)).reshape(40, -1))
    assert np.max(np.abs(int8.scores(X) - want)) < 0.05  # softmax outputs, 1/256 steps after requantisation
