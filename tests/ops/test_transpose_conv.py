"""TRANSPOSE_CONV (tinycc_ml/ir/ops/network/transpose_conv.py) against tflite-micro: int8 (per-channel filters) on
every byte and float32 bit for bit, SAME and VALID padding, strides 1 to 3, with and without a bias, a fused
activation; the M4 and M0 too; output shapes that disagree refused."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import (
    OPS,
    OPTIONS,
    assert_float_equal,
    assert_int8_equal,
    random_rows,
    simulated_scores,
    tflite_micro,
)
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError


def transpose_conv(in_shape, out_shape, kernel, stride, padding, kind="int8", bias=True, activation=0,
                   declared=None) -> bytes:
    rng = np.random.default_rng(5)
    b = TfliteBuilder()
    x = b.tensor(in_shape, kind, scale=0.05, zero_point=-3, name="x")
    shape = b.tensor((4,), "int32", scale=None, data=np.asarray(out_shape, dtype=np.int32), name="output_shape")
    w_shape = (out_shape[3], kernel[0], kernel[1], in_shape[3])
    if kind == "float32":
        w = b.tensor(w_shape, kind, scale=None, data=rng.normal(0, 0.3, size=w_shape).astype(np.float32))
        bias_t = b.tensor((out_shape[3],), kind, scale=None,
                          data=rng.normal(0, 0.2, size=out_shape[3]).astype(np.float32))
    else:
        w = b.filters(rng, w_shape, 0)
        bias_t = b.bias(rng, x, w, out_shape[3])
    y = b.tensor(declared or out_shape, kind, scale=0.08, zero_point=4, name="y")
    fields = {"padding": padding, "strideW": stride[1], "strideH": stride[0], "fusedActivationFunction": activation}
    b.op(OPS.TRANSPOSE_CONV, [shape, w, x] + ([bias_t] if bias else []), [y], OPTIONS.TransposeConvOptions,
         options("TransposeConvOptions", **fields))
    return b.finish([x], [y])


CASES = [  # (input, output, kernel, stride, padding: 0 SAME 1 VALID)
    ((1, 3, 4, 2), (1, 6, 8, 3), (3, 3), (2, 2), 0),
    ((1, 3, 4, 2), (1, 7, 9, 3), (3, 3), (2, 2), 1),
    ((1, 4, 4, 3), (1, 4, 4, 2), (3, 3), (1, 1), 0),
    ((1, 2, 5, 4), (1, 6, 15, 2), (4, 3), (3, 3), 0),
    ((1, 5, 1, 2), (1, 10, 1, 4), (4, 1), (2, 1), 0),  # a 1-D upsampling, as audio U-Nets use
]


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("in_shape, out_shape, kernel, stride, padding", CASES)
def test_int8_equals_tflite_micro_on_every_byte(in_shape, out_shape, kernel, stride, padding, tmp_path):
    data = transpose_conv(in_shape, out_shape, kernel, stride, padding)
    assert_int8_equal(data, random_rows(np.random.default_rng(0), 12, int(np.prod(in_shape))), in_shape, tmp_path)


@pytest.mark.parametrize("in_shape, out_shape, kernel, stride, padding", CASES[:3])
def test_float_equals_tflite_micro_bit_for_bit(in_shape, out_shape, kernel, stride, padding, tmp_path):
    data = transpose_conv(in_shape, out_shape, kernel, stride, padding, kind="float32")
    X = random_rows(np.random.default_rng(1), 12, int(np.prod(in_shape)), "float32")
    assert_float_equal(data, X, in_shape, tmp_path)


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_no_bias_and_a_fused_relu(kind, tmp_path):
    data = transpose_conv((1, 3, 3, 2), (1, 6, 6, 2), (2, 2), (2, 2), 0, kind=kind, bias=False, activation=1)
    X = random_rows(np.random.default_rng(2), 12, 18, kind)
    (assert_float_equal if kind == "float32" else assert_int8_equal)(data, X, (1, 3, 3, 2), tmp_path)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0"])
def test_the_microcontrollers_compute_the_same_bytes(target, tmp_path):
    require_target(target)
    in_shape = CASES[0][0]
    data = transpose_conv(*CASES[0])
    X = random_rows(np.random.default_rng(3), 3, int(np.prod(in_shape)))[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, in_shape))


def test_an_output_shape_tensor_that_disagrees_is_refused(tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(transpose_conv((1, 3, 4, 2), (1, 6, 8, 3), (3, 3), (2, 2), 0, declared=(1, 6, 9, 3)))
    with pytest.raises(ModelFileError, match=r"bad\.tflite.*output_shape"):
        tinycc_ml.load_model(path)


def transpose_conv_16x8(in_shape, out_shape, kernel, stride, padding, bias_kind="int64", zero_point=0) -> bytes:
    """TFLite's 16x8: int16 activations (zero point 0), int8 filters, an int64 or int16 bias (or none)."""
    rng = np.random.default_rng(6)
    b = TfliteBuilder()
    x = b.tensor(in_shape, "int16", scale=0.05 / 256, zero_point=zero_point, name="x")
    shape = b.tensor((4,), "int32", scale=None, data=np.asarray(out_shape, dtype=np.int32), name="output_shape")
    w_shape = (out_shape[3], kernel[0], kernel[1], in_shape[3])
    w = b.filters(rng, w_shape, 0)
    w_scales = np.asarray(b.sub.tensors[w].quantization.scale)
    reach = {"int64": 3000 * 256, "int16": 30000, "int32": 3000}.get(bias_kind, 0)
    ins = [shape, w, x]
    if bias_kind is not None:
        ins.append(b.tensor((out_shape[3],), bias_kind, scale=np.float32(0.05 / 256 * w_scales),
                            data=rng.integers(-reach, reach, size=out_shape[3])))
    y = b.tensor(out_shape, "int16", scale=0.08 / 256, zero_point=0, name="y")
    b.op(OPS.TRANSPOSE_CONV, ins, [y], OPTIONS.TransposeConvOptions,
         options("TransposeConvOptions", padding=padding, strideW=stride[1], strideH=stride[0]))
    return b.finish([x], [y])


@pytest.mark.parametrize("bias_kind", ["int64", "int16", None])
@pytest.mark.parametrize("in_shape, out_shape, kernel, stride, padding", CASES[:2] + CASES[4:])
def test_16x8_equals_tflite_micro_on_every_value(in_shape, out_shape, kernel, stride, padding, bias_kind, tmp_path):
    from tests.ops.single_op import compiled

    data = transpose_conv_16x8(in_shape, out_shape, kernel, stride, padding, bias_kind)
    X = random_rows(np.random.default_rng(3), 12, int(np.prod(in_shape)), "int16")
    want = tflite_micro(data, X, in_shape)
    assert np.unique(want).size > 20
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *in_shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


@pytest.mark.parametrize("bias_kind, zero_point, problem", [
    ("int32", 0, "a 16x8 layer's bias is int16 or int64"),
    ("int64", 5, "zero point"),
])
def test_16x8_files_tflite_micro_computes_otherwise_are_refused(bias_kind, zero_point, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(transpose_conv_16x8(*CASES[0], bias_kind=bias_kind, zero_point=zero_point))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
