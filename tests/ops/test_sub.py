"""SUB (tinycc_ml/ir/ops/network/sub.py) against tflite-micro: int8 on every byte, broadcast or not, each fused
activation, float32 bit for bit; scales TFLite Micro cannot rescale refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_float_equal, assert_int8_equal, binary_model, random_rows
from tests.tflite_builder import ACTIVATIONS
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError


def sub(a_shape, b_shape, out_shape, activation="none", **kw) -> bytes:
    return binary_model(OPS.SUB, a_shape, b_shape, out_shape, options_type=OPTIONS.SubOptions,
                        option_fields={"fusedActivationFunction": ACTIVATIONS[activation]}, options_name="SubOptions",
                        **kw)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("a_shape, b_shape", [((1, 4, 4, 3), (1, 4, 4, 3)), ((1, 4, 4, 3), (3,)), ((1, 7), ())])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_int8_equals_tflite_micro_on_every_byte(a_shape, b_shape, activation, tmp_path):
    data = sub(a_shape, b_shape, a_shape, activation, a_q=(0.05, -3), b_q=(0.02, 9), out_q=(0.06, 4))
    assert_int8_equal(data, random_rows(np.random.default_rng(0), 20, int(np.prod(a_shape))), a_shape, tmp_path)


@pytest.mark.parametrize("code", [OPS.SUB, OPS.MUL, OPS.MAXIMUM])
def test_a_constant_of_more_axes_than_the_input_equals_tflite_micro(code, tmp_path):
    """x [1, 7] less (times, the larger of it and) a constant [1, 1, 7], reshaped to [7, 1] after (a GRU's step, as
    the ONNX reader writes it): the result has the constant's rank; the interpreter aligns the rows' axis before
    broadcasting (it was broadcast against the constant's first axis: the reshape after it failed)."""
    b = TfliteBuilder()
    q = {"scale": 0.05, "zero_point": -3}
    x = b.tensor((1, 7), "int8", name="x", **q)
    y = b.tensor((1, 1, 7), "int8", data=np.random.default_rng(3).integers(-128, 128, size=(1, 1, 7)), name="y", **q)
    z = b.tensor((1, 1, 7), "int8", name="z", **q)
    r = b.tensor((7, 1), "int8", name="r", **q)
    b.op(code, [x, y], [z])
    b.op(OPS.RESHAPE, [z], [r])
    assert_int8_equal(b.finish([x], [r]), random_rows(np.random.default_rng(2), 20, 7), (1, 7), tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_random_quantisations_equal_tflite_micro(seed, tmp_path):
    rng = np.random.default_rng(seed)
    q = [(float(rng.uniform(0.005, 0.2)), int(rng.integers(-128, 128))) for _ in range(2)]
    out_q = (max(q[0][0], q[1][0]) * float(rng.uniform(0.5, 3.0)), int(rng.integers(-128, 128)))
    data = sub((1, 8, 3), (8, 1), (1, 8, 3), ["none", "relu", "relu6"][seed % 3], a_q=q[0], b_q=q[1], out_q=out_q)
    assert_int8_equal(data, random_rows(rng, 20, 24), (1, 8, 3), tmp_path)


def test_float_equals_tflite_micro_bit_for_bit(tmp_path):
    data = sub((1, 4, 4, 3), (1, 1, 1, 3), (1, 4, 4, 3), "relu6", kind="float32")
    assert_float_equal(data, random_rows(np.random.default_rng(1), 20, 48, "float32"), (1, 4, 4, 3), tmp_path)


def test_an_output_scale_too_fine_is_refused(tmp_path):
    path = tmp_path / "fine.tflite"
    path.write_bytes(sub((1, 4), (1, 4), (1, 4), a_q=(0.5, 0), b_q=(0.5, 0), out_q=(1e-9, 0)))
    with pytest.raises(ModelFileError, match=r"fine\.tflite.*SUB multipliers"):
        tinycc_ml.load_model(path)
