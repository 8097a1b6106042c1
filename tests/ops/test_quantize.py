"""QUANTIZE and DEQUANTIZE against tflite-micro: networks with float32 input and output (a converter's
inference_input_type / inference_output_type float32) computed from real rows as tflite-micro computes them, rows on
the rounding ties included; requantisation between int8 and int16 inside a network; the float entry point of the C
quantising as QUANTIZE does."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import compiled
from tests.tflite_builder import NetBuilder, tflm_outputs, tflm_raw_outputs
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.fixed import quantise_affine


def float_io_network(bits: int, seed: int = 0) -> tuple[bytes, float]:
    """float32 -> QUANTIZE -> FULLY_CONNECTED (relu) -> FULLY_CONNECTED -> DEQUANTIZE -> float32; ``bits``: the
    activations' width (16: TFLite's 16x8)."""
    net = NetBuilder(seed=seed, activation_bits=bits, bias_bits=64 if bits == 16 else 32)
    x = net.input((20,), real=True)
    return net.finish(net.dequantize(net.fc(net.fc(x, 12, activation="relu"), 4))), net.scales[x]


def real_rows(rng, n: int, scale: float, bits: int) -> np.ndarray:
    """Rows spread over the input's codes; the first ten exactly on rounding ties (k + 1/2 steps)."""
    X = rng.normal(0, 40 * scale * (256 if bits == 16 else 1), size=(n, 20)).astype(np.float32)
    ties = (np.round(X[:10] / np.float32(scale)) + np.float32(0.5)) * np.float32(scale)
    X[:10] = ties.astype(np.float32)
    return X


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("bits", [8, 16])
def test_float_input_and_output_networks_equal_tflite_micro(bits, tmp_path):
    data, scale = float_io_network(bits, seed=bits)
    X = real_rows(np.random.default_rng(bits), 80, scale, bits)
    want = tflm_raw_outputs(data, X.reshape(len(X), 1, 20)).reshape(len(X), -1)
    assert want.dtype == np.float32
    model, result = compiled(data, tmp_path)
    assert model.reference == f"int{bits}" and result.output.score_ctype == "float"
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X), want)


def test_real_rows_quantise_as_tflite_micro_quantize(tmp_path):
    """quantise_affine is TFLite's AffineQuantize: a QUANTIZE alone, on ties and ordinary values."""
    for bits in (8, 16):
        net = NetBuilder(seed=1, activation_bits=bits)
        x = net.input((64,), real=True)
        data = net.finish(x)
        scale, zero = net.scales[x], int(net.tensors[x].quantization.zeroPoint[0])
        rng = np.random.default_rng(bits)
        X = np.concatenate([(np.arange(-100, 156) + 0.5).astype(np.float32) * np.float32(scale),
                            rng.normal(0, 60 * scale, 256).astype(np.float32)]).reshape(-1, 1, 64)
        want = tflm_raw_outputs(data, X).reshape(len(X), -1)
        np.testing.assert_array_equal(quantise_affine(X.reshape(len(X), -1), scale, zero, bits), want)


def test_requantize_between_widths_equals_tflite_micro(tmp_path):
    """int16 -> QUANTIZE int8 -> QUANTIZE int16 (another scale) inside a 16x8 network."""
    net = NetBuilder(seed=4, activation_bits=16, bias_bits=64)
    x = net.input((24,))
    y = net.requantize(net.fc(x, 10), 0.011, 8)
    y = net.requantize(y, 0.0007, 16)
    data = net.finish(net.fc(y, 3))
    rng = np.random.default_rng(4)
    X = rng.integers(-32768, 32768, size=(100, 24)).astype(np.int16)
    want = tflm_raw_outputs(data, X.reshape(len(X), 1, 24)).reshape(len(X), -1)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), 1, 24)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0", "avr"])
def test_float_io_in_simulators(target, tmp_path):
    require_target(target)
    data, scale = float_io_network(8, seed=7)
    X = real_rows(np.random.default_rng(7), 6, scale, 8)
    want = tflm_raw_outputs(data, X.reshape(len(X), 1, 20)).reshape(len(X), -1)
    _, result = compiled(data, tmp_path, "fio", target)
    run = get_backend(target).simulate(tmp_path / target, result.output, X)
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(X), -1), want)


def test_quantize_of_a_float_tensor_inside_the_network_equals_tflite_micro(tmp_path):
    """Refused before; a float island (DEQUANTIZE ... QUANTIZE) inside an int8 network now computes as
    AffineQuantize does (tests/ops/test_elementwise_tflite.py has more)."""
    net = NetBuilder(seed=2)
    x = net.input((8,))
    real = net.dequantize(net.fc(x, 6))
    data = net.finish(net.operator(114, [real], net.tensor((1, 6), 0.02, 0)))
    X = np.random.default_rng(3).integers(-128, 128, size=(20, 8)).astype(np.int8)
    model, result = compiled(data, tmp_path)
    want = tflm_outputs(data, X)
    np.testing.assert_array_equal(result.load().run_raw(X)[0].reshape(len(X), -1), want)
