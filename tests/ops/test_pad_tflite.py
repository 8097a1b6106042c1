"""PADV2 (the pad op's ``fill``) and MIRROR_PAD (the take op) from .tflite files against tflite-micro at int8, int16
and float32 (interpreter, host C, the microcontrollers); constants tflite-micro's Prepare refuses refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_equal, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 3, 4, 2)
PADS = [[0, 0], [1, 2], [2, 0], [0, 1]]


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def q_of(kind):
    return (0.05 / 256, 0) if kind == "int16" else (0.05, -3)


def padv2(kind="int8", value=100, constant_q=None) -> bytes:
    b = TfliteBuilder()
    q = q_of(kind)
    x = b.tensor(SHAPE, kind, scale=q[0], zero_point=q[1], name="x")
    paddings = b.tensor((4, 2), "int32", scale=None, data=np.asarray(PADS, dtype=np.int32))
    cq = constant_q or q
    data = np.asarray([value], dtype=np.float32 if kind == "float32" else np.int64)
    c = b.tensor((1,), kind, scale=None if kind == "float32" else cq[0], zero_point=cq[1], data=data)
    out_shape = [d + a + z for d, (a, z) in zip(SHAPE, PADS)]
    y = b.tensor(out_shape, kind, scale=q[0], zero_point=q[1], name="y")
    b.op(OPS.PADV2, [x, paddings, c], [y], OPTIONS.PadV2Options, options("PadV2Options"))
    return b.finish([x], [y])


@pytest.mark.parametrize("kind, value", [("int8", 100), ("int8", -128), ("int16", -32768), ("float32", -1.5)])
def test_padv2_equals_tflite_micro(kind, value, tmp_path):
    X = random_rows(np.random.default_rng(1), 6, int(np.prod(SHAPE)), kind)
    assert_equal(padv2(kind, value), X, SHAPE, tmp_path, kind)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_pad_alike(target, tmp_path):
    require_target(target)
    data = padv2()
    X = random_rows(np.random.default_rng(2), 3, int(np.prod(SHAPE)))[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_a_constant_of_another_quantisation_is_refused(tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(padv2(constant_q=(0.1, 0)))
    with pytest.raises(ModelFileError, match=r"bad\.tflite.*the constant value's quantisation must be the output's"):
        tinycc_ml.load_model(path)


def mirror(kind="int8", mode=0, pads=((0, 0), (1, 2), (2, 1), (0, 1))) -> bytes:
    b = TfliteBuilder()
    q = q_of(kind)
    x = b.tensor(SHAPE, kind, scale=q[0], zero_point=q[1], name="x")
    paddings = b.tensor((4, 2), "int32", scale=None, data=np.asarray(pads, dtype=np.int32))
    out_shape = [d + a + z for d, (a, z) in zip(SHAPE, pads)]
    y = b.tensor(out_shape, kind, scale=q[0], zero_point=q[1], name="y")
    b.op(OPS.MIRROR_PAD, [x, paddings], [y], OPTIONS.MirrorPadOptions, options("MirrorPadOptions", mode=mode))
    return b.finish([x], [y])


@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("mode, pads", [(0, ((0, 0), (1, 2), (2, 1), (0, 1))), (1, ((0, 0), (3, 3), (4, 1), (2, 2))),
                                        (1, ((0, 0), (0, 5), (0, 0), (0, 0))), (0, ((0, 0), (0, 0), (0, 0), (0, 0)))])
def test_mirror_pad_equals_tflite_micro(kind, mode, pads, tmp_path):
    X = random_rows(np.random.default_rng(3), 6, int(np.prod(SHAPE)), kind)
    assert_equal(mirror(kind, mode, pads), X, SHAPE, tmp_path, kind)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_mirror_alike(target, tmp_path):
    require_target(target)
    data = mirror(mode=1, pads=((0, 0), (1, 1), (2, 0), (0, 1)))  # 90 outputs: the Uno's harness holds them
    X = random_rows(np.random.default_rng(4), 3, int(np.prod(SHAPE)))[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


def test_a_reflection_wider_than_its_axis_is_refused(tmp_path):
    path = tmp_path / "wide.tflite"
    path.write_bytes(mirror(mode=0, pads=((0, 0), (3, 0), (0, 0), (0, 0))))
    with pytest.raises(ModelFileError, match=r"wide\.tflite.*padding \(3, 0\) of axis 1 of 3 reads outside it"):
        tinycc_ml.load_model(path)
