"""Forms TFLite Micro's own models use (its models/ and integration_tests/ folders, measured by
benchmarks/tflite_corpus.py) that the reader once refused: an int8 SOFTMAX with an int16 result (scale 1/65536, zero
point -32768: keyword_scrambled.tflite) and QUANTIZE to and from int32 (int16 -> int32 -> int16: the seanet quantize
models), each against tflite-micro on every output value, on the host and the microcontrollers."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError


def softmax_to_int16(depth: int, in_q=(0.1, 3), beta: float = 1.0, out_q=(1 / 65536, -32768)) -> bytes:
    b = TfliteBuilder()
    x = b.tensor((1, depth), "int8", scale=in_q[0], zero_point=in_q[1], name="x")
    y = b.tensor((1, depth), "int16", scale=out_q[0], zero_point=out_q[1], name="y")
    b.op(OPS.SOFTMAX, [x], [y], OPTIONS.SoftmaxOptions, options("SoftmaxOptions", beta=beta))
    return b.finish([x], [y])


def requantize(kind_in: str, kind_out: str, in_q, out_q, size: int = 64) -> bytes:
    b = TfliteBuilder()
    x = b.tensor((1, size), kind_in, scale=in_q[0], zero_point=in_q[1], name="x")
    y = b.tensor((1, size), kind_out, scale=out_q[0], zero_point=out_q[1], name="y")
    b.op(OPS.QUANTIZE, [x], [y])
    return b.finish([x], [y])


def host_outputs(data: bytes, X: np.ndarray, tmp_path) -> np.ndarray:
    path = tmp_path / "op.tflite"
    path.write_bytes(data)
    return np.asarray(tinycc_ml.compile(path, name="op").load().run_raw(X)[0]).reshape(len(X), -1)


@pytest.mark.parametrize("depth, in_q, beta", [(12, (0.1, 3), 1.0), (2, (0.05, -128), 1.0), (40, (0.3, 10), 0.5),
                                               (1, (0.1, 0), 1.0)])
def test_an_int8_softmax_with_an_int16_result_equals_tflite_micro(depth, in_q, beta, tmp_path):
    require_target("host")
    data = softmax_to_int16(depth, in_q, beta)
    rng = np.random.default_rng(depth)
    X = np.concatenate([random_rows(rng, 60, depth), np.full((2, depth), 127), np.full((2, depth), -128)]).astype(
        np.int8)
    want = tflite_micro(data, X, (1, depth))
    assert want.dtype == np.int16
    np.testing.assert_array_equal(host_outputs(data, X, tmp_path), want)


def test_an_int16_softmax_result_other_than_tflites_is_refused(tmp_path):
    (tmp_path / "bad.tflite").write_bytes(softmax_to_int16(8, out_q=(1 / 32768, 0)))
    with pytest.raises(ModelFileError, match="scale 1/65536, zero point -32768"):
        tinycc_ml.load_model(tmp_path / "bad.tflite")


CASES = [("int16", "int32", (0.002, 0), (0.0005, 3)), ("int32", "int16", (0.0005, 0), (0.002, 0)),
         ("int8", "int32", (0.1, -5), (0.001, 100)), ("int32", "int8", (0.001, 20), (0.1, -3)),
         ("int16", "int32", (0.01, 0), (0.0001, -40000))]


@pytest.mark.parametrize("kind_in, kind_out, in_q, out_q", CASES)
def test_quantize_to_and_from_int32_equals_tflite_micro(kind_in, kind_out, in_q, out_q, tmp_path):
    require_target("host")
    data = requantize(kind_in, kind_out, in_q, out_q)
    info = np.iinfo(kind_in)
    rng = np.random.default_rng(0)
    reach = min(info.max, 1 << 24)
    X = rng.integers(max(info.min, -reach), reach + 1, size=(40, 64))
    X[0, :4] = [info.min, info.max, 0, -1]
    X = X.astype(kind_in)
    want = tflite_micro(data, X, (1, 64))
    assert want.dtype == np.dtype(kind_out)
    np.testing.assert_array_equal(host_outputs(data, X, tmp_path), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_agree(target, tmp_path):
    """The int8 -> int16 softmax and the int16 -> int32 QUANTIZE in the simulators (their inputs as real values)."""
    require_target(target)
    for k, (data, kind, width) in enumerate([(softmax_to_int16(10), "int8", 10), (requantize(*CASES[0]), "int16", 64)]):
        info = np.iinfo(kind)
        X = np.random.default_rng(k).integers(info.min, info.max + 1, size=(6, width)).astype(kind)
        want = tflite_micro(data, X, (1, width))
        (tmp_path / f"m{k}").mkdir()
        got = simulated_scores(target, data, X, tmp_path / f"m{k}")
        np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)


def transpose_conv_shape_input(in_shape=(1, 3, 4, 2), out_shape=(1, 6, 8, 3)) -> bytes:
    """A 16x8 TRANSPOSE_CONV whose output_shape is the network's first input (int32, as the seanet tests have it)
    beside its int16 data: TFLite Micro never reads output_shape (the output tensor's shape is the shape)."""
    rng = np.random.default_rng(6)
    b = TfliteBuilder()
    shape = b.tensor((4,), "int32", scale=None, name="output_shape")
    x = b.tensor(in_shape, "int16", scale=0.05 / 256, zero_point=0, name="x")
    w = b.filters(rng, (out_shape[3], 3, 3, in_shape[3]), 0)
    y = b.tensor(out_shape, "int16", scale=0.08 / 256, zero_point=0, name="y")
    b.op(OPS.TRANSPOSE_CONV, [shape, w, x], [y], OPTIONS.TransposeConvOptions,
         options("TransposeConvOptions", padding=0, strideW=2, strideH=2))
    return b.finish([shape, x], [y])


def test_inputs_of_several_integer_widths_share_the_widest_vector(tmp_path):
    """The int32 output shape and the int16 values in one int32 input vector; <prefix>_invoke takes each input at its
    own type; every output value is tflite-micro's whatever the unread shape input holds."""
    require_target("host")
    from tests.tflite_builder import tflm_joined_outputs

    data = transpose_conv_shape_input()
    path = tmp_path / "tc.tflite"
    path.write_bytes(data)
    rng = np.random.default_rng(2)
    rows = [[rng.integers(-1000, 1000, size=4).astype(np.int32),
             rng.integers(-32768, 32768, size=(1, 3, 4, 2)).astype(np.int16)] for _ in range(20)]
    want = tflm_joined_outputs(data, rows)
    result = tinycc_ml.compile(path, name="tc")
    header = result.files["tc.h"]
    assert "const int32_t *output_shape" in header and "const int16_t *x" in header, header[-800:]
    model = tinycc_ml.load_model(path)
    inputs = [np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])]
    got = result.load().run_raw(model.join_inputs(inputs))[0]  # the C
    np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)
    np.testing.assert_array_equal(model.run_tensors(inputs)["y"].reshape(want.shape), want)  # the interpreter


def test_inputs_of_float_and_integer_types_are_refused_naming_them(tmp_path):
    b = TfliteBuilder()
    a = b.tensor((1, 4), "float32", scale=None, name="a")
    i = b.tensor((1, 4), "int32", scale=None, name="i")
    y = b.tensor((1, 4), "float32", scale=None, name="y")
    b.op(OPS.ADD, [a, a], [y], OPTIONS.AddOptions, options("AddOptions"))
    (tmp_path / "mixed.tflite").write_bytes(b.finish([a, i], [y]))
    with pytest.raises(ModelFileError, match="float32, int32: the inputs of a network must share one element type"):
        tinycc_ml.load_model(tmp_path / "mixed.tflite")


@pytest.mark.toolchain
def test_a_large_output_runs_on_the_m4_as_tflite_micro(tmp_path):
    """Two 128 x 128 int8 images added (TFLite Micro's memory_footprint example): predict's 16 KB score vector is
    static, not on the stack (where it faulted in QEMU)."""
    require_target("cortex-m4")
    from tests.tflite_builder import tflm_joined_outputs
    from tinycc_ml.codegen.backend import get_backend

    b = TfliteBuilder()
    a = b.tensor((1, 128, 128, 1), "int8", scale=0.04, zero_point=-2, name="a")
    c = b.tensor((1, 128, 128, 1), "int8", scale=0.05, zero_point=-1, name="c")
    y = b.tensor((1, 128, 128, 1), "int8", scale=0.06, zero_point=-3, name="y")
    b.op(OPS.ADD, [a, c], [y], OPTIONS.AddOptions, options("AddOptions"))
    data = b.finish([a, c], [y])
    path = tmp_path / "add.tflite"
    path.write_bytes(data)
    rng = np.random.default_rng(4)
    rows = [[rng.integers(-128, 128, (1, 128, 128, 1)).astype(np.int8) for _ in range(2)] for _ in range(2)]
    want = tflm_joined_outputs(data, rows)
    result = tinycc_ml.compile(path, target="cortex-m4", name="add", out_dir=tmp_path / "m4")
    assert "static int8_t add_scores_buffer[16384]" in result.files["add.c"]
    codes = np.stack([np.concatenate([v.reshape(-1) for v in r]) for r in rows]).astype(np.float64)
    run = get_backend("cortex-m4").simulate(tmp_path / "m4", result.output, codes)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(want.shape), want)
