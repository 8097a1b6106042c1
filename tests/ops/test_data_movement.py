"""Operators that move elements and compute nothing, lowered onto strided_slice, reshape, transpose and
concatenation: SPLIT, SPLIT_V, UNPACK (several outputs), PACK, REVERSE_V2, DEPTH_TO_SPACE, SPACE_TO_DEPTH; against
tflite-micro at int8, 16x8 and float32 (interpreter, host C, the microcontrollers), bad files refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_equal, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

Q = (0.05, -3)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def tensor(b, shape, kind, name=None):
    if kind == "int16":
        return b.tensor(shape, "int16", scale=Q[0] / 256, zero_point=0, name=name)
    return b.tensor(shape, kind, scale=Q[0], zero_point=Q[1], name=name)


def axis_const(b, values):
    return b.tensor((len(values),) if len(values) != 1 else (), "int32", scale=None,
                    data=np.asarray(values, dtype=np.int32))


def concat(b, parts, shape, axis, kind):
    """The parts joined again (in the given order) along ``axis``: the model's one output."""
    z = tensor(b, shape, kind, "z")
    b.op(OPS.CONCATENATION, parts, [z], OPTIONS.ConcatenationOptions, options("ConcatenationOptions", axis=axis))
    return z


def split_model(kind):
    """SPLIT of (1, 4, 6, 3) into 3 along axis -2, joined in the order 2, 0, 1."""
    b = TfliteBuilder()
    x = tensor(b, (1, 4, 6, 3), kind, "x")
    parts = [tensor(b, (1, 4, 2, 3), kind) for _ in range(3)]
    b.op(OPS.SPLIT, [axis_const(b, [-2]), x], parts, OPTIONS.SplitOptions, options("SplitOptions", numSplits=3))
    return b.finish([x], [concat(b, [parts[2], parts[0], parts[1]], (1, 4, 6, 3), 2, kind)]), (1, 4, 6, 3)


def split_v_model(kind):
    """SPLIT_V of (1, 5, 4) along axis 1 into 2, 1 and the rest (-1), joined as 1, 2, 0."""
    b = TfliteBuilder()
    x = tensor(b, (1, 5, 4), kind, "x")
    parts = [tensor(b, (1, n, 4), kind) for n in (2, 1, 2)]
    sizes = b.tensor((3,), "int32", scale=None, data=np.asarray([2, 1, -1], dtype=np.int32))
    b.op(OPS.SPLIT_V, [x, sizes, axis_const(b, [1])], parts, OPTIONS.SplitVOptions,
         options("SplitVOptions", numSplits=3))
    return b.finish([x], [concat(b, [parts[1], parts[2], parts[0]], (1, 5, 4), 1, kind)]), (1, 5, 4)


def unpack_pack_model(kind):
    """UNPACK (1, 3, 4) along axis 1, PACK of the three in reverse along axis -1."""
    b = TfliteBuilder()
    x = tensor(b, (1, 3, 4), kind, "x")
    parts = [tensor(b, (1, 4), kind) for _ in range(3)]
    b.op(OPS.UNPACK, [x], parts, OPTIONS.UnpackOptions, options("UnpackOptions", num=3, axis=1))
    z = tensor(b, (1, 4, 3), kind, "z")
    b.op(OPS.PACK, parts[::-1], [z], OPTIONS.PackOptions, options("PackOptions", valuesCount=3, axis=-1))
    return b.finish([x], [z]), (1, 3, 4)


def reverse_model(kind, axes=(-2, 1)):
    b = TfliteBuilder()
    x = tensor(b, (1, 3, 4, 5), kind, "x")
    y = tensor(b, (1, 3, 4, 5), kind, "y")
    b.op(OPS.REVERSE_V2, [x, b.tensor((len(axes),), "int32", scale=None, data=np.asarray(axes, dtype=np.int32))], [y])
    return b.finish([x], [y]), (1, 3, 4, 5)


def depth_to_space_model(kind):
    b = TfliteBuilder()
    x = tensor(b, (1, 2, 3, 8), kind, "x")
    y = tensor(b, (1, 4, 6, 2), kind, "y")
    b.op(OPS.DEPTH_TO_SPACE, [x], [y], OPTIONS.DepthToSpaceOptions, options("DepthToSpaceOptions", blockSize=2))
    return b.finish([x], [y]), (1, 2, 3, 8)


def space_to_depth_model(kind):
    b = TfliteBuilder()
    x = tensor(b, (1, 4, 6, 2), kind, "x")
    y = tensor(b, (1, 2, 3, 8), kind, "y")
    b.op(OPS.SPACE_TO_DEPTH, [x], [y], OPTIONS.SpaceToDepthOptions, options("SpaceToDepthOptions", blockSize=2))
    return b.finish([x], [y]), (1, 4, 6, 2)


MODELS = {"split": split_model, "split_v": split_v_model, "unpack_pack": unpack_pack_model,
          "reverse": reverse_model, "depth_to_space": depth_to_space_model, "space_to_depth": space_to_depth_model}
NO_INT16 = ("depth_to_space", "space_to_depth")  # TFLite Micro's kernels take int8 and float32 only


@pytest.mark.parametrize("op, kind", [(op, kind) for op in MODELS for kind in ("int8", "int16", "float32")
                                      if not (kind == "int16" and op in NO_INT16)])
def test_equals_tflite_micro_on_every_value(op, kind, tmp_path):
    data, shape = MODELS[op](kind)
    assert_equal(data, random_rows(np.random.default_rng(4), 5, int(np.prod(shape)), kind), shape, tmp_path, kind)


@pytest.mark.parametrize("op", NO_INT16)
def test_int16_block_moves_are_refused_as_tflite_micro_refuses_them(op, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(MODELS[op]("int16")[0])
    with pytest.raises(ModelFileError, match=r"bad\.tflite.*int16 tensors \(TFLite Micro takes int8 and float32\)"):
        tinycc_ml.load_model(path)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_move_the_same_bytes(target, tmp_path):
    require_target(target)
    for op in ("split", "unpack_pack", "reverse", "depth_to_space"):
        data, shape = MODELS[op]("int8")
        X = random_rows(np.random.default_rng(5), 3, int(np.prod(shape)))[:3]
        (tmp_path / op).mkdir()
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / op, name=op),
                                      tflite_micro(data, X, shape))


def bad_split(num_splits=3, parts=3, axis=-2, part_width=2):
    b = TfliteBuilder()
    x = tensor(b, (1, 4, 6, 3), "int8", "x")
    outs = [tensor(b, (1, 4, part_width, 3), "int8") for _ in range(parts)]
    b.op(OPS.SPLIT, [axis_const(b, [axis]), x], outs, OPTIONS.SplitOptions,
         options("SplitOptions", numSplits=num_splits))
    return b.finish([x], [outs[0]])


@pytest.mark.parametrize("data, problem", [
    (bad_split(num_splits=2), "num_splits 2 for 3 outputs"),
    (bad_split(axis=4), "axis 4 of a 4-dimensional input"),
    (bad_split(parts=4, num_splits=4), "does not split into 4 equal parts"),
    (bad_split(part_width=3), "declares shape"),
    (reverse_model("int8", axes=(1, 3))[0], "not contiguous"),
])
def test_bad_splits_are_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
