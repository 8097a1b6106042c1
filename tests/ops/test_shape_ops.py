"""TRANSPOSE, SQUEEZE and EXPAND_DIMS lowered from .tflite files (to the transpose and reshape ops) against
tflite-micro: int8 and float32 equal on every element; bad permutations, axes and declared shapes refused."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_float_equal, assert_int8_equal, random_rows
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

Q = (0.05, -3)


def shape_model(code, in_shape, out_shape, kind="int8", const=None, options_type=0, fields=None, name=None) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(in_shape, kind, scale=Q[0], zero_point=Q[1], name="x")
    ins = [x]
    if const is not None:
        ins.append(b.tensor((len(const),), "int32", scale=None, data=np.asarray(const), name="c"))
    y = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="y")
    b.op(code, ins, [y], options_type, options(name, **(fields or {})) if name else None)
    z = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="z")  # a model computes something
    b.op(OPS.RELU, [y], [z])
    return b.finish([x], [z])


CASES = {
    "transpose": lambda kind: shape_model(OPS.TRANSPOSE, (1, 3, 4, 5), (1, 5, 3, 4), kind, const=[0, 3, 1, 2]),
    "squeeze": lambda kind: shape_model(OPS.SQUEEZE, (1, 1, 6, 1), (1, 6), kind, options_type=OPTIONS.SqueezeOptions,
                                        fields={"squeezeDims": [1, 3]}, name="SqueezeOptions"),
    "squeeze_all": lambda kind: shape_model(OPS.SQUEEZE, (1, 1, 6), (6,), kind),
    "expand_dims": lambda kind: shape_model(OPS.EXPAND_DIMS, (1, 6), (1, 6, 1), kind, const=[-1]),
}
SHAPES = {"transpose": (1, 3, 4, 5), "squeeze": (1, 1, 6, 1), "squeeze_all": (1, 1, 6), "expand_dims": (1, 6)}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_equals_tflite_micro(case, tmp_path):
    shape = SHAPES[case]
    assert_int8_equal(CASES[case]("int8"), random_rows(np.random.default_rng(0), 10, int(np.prod(shape))), shape,
                      tmp_path)


@pytest.mark.parametrize("case", ["transpose", "squeeze", "expand_dims"])
def test_float_equals_tflite_micro(case, tmp_path):
    shape = SHAPES[case]
    data = CASES[case]("float32")
    assert_float_equal(data, random_rows(np.random.default_rng(1), 10, int(np.prod(shape)), "float32"), shape,
                       tmp_path)


@pytest.mark.parametrize("data, match", [
    (shape_model(OPS.TRANSPOSE, (1, 3, 4), (1, 4, 3), const=[0, 2, 2]), "not a permutation"),
    (shape_model(OPS.TRANSPOSE, (1, 3, 4), (1, 4, 3), const=[0, 2]), "not a permutation"),
    (shape_model(OPS.TRANSPOSE, (2, 3, 4), (4, 2, 3), const=[-1, 0, 1]), "not a permutation"),  # tflite-micro too
    (shape_model(OPS.SQUEEZE, (1, 2, 3), (2, 3), options_type=OPTIONS.SqueezeOptions, fields={"squeezeDims": [1]},
                 name="SqueezeOptions"), "not all 1"),
    (shape_model(OPS.SQUEEZE, (1, 2, 3), (2, 3), options_type=OPTIONS.SqueezeOptions, fields={"squeezeDims": [7]},
                 name="SqueezeOptions"), "outside"),
    (shape_model(OPS.EXPAND_DIMS, (2, 3), (2, 3, 1), const=[0]), "declares shape"),
    (shape_model(OPS.EXPAND_DIMS, (2, 3), (2, 3, 1), const=[5]), "axis"),
])
def test_bad_operators_are_refused_by_name(data, match, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=match):
        tinycc_ml.load_model(path)
