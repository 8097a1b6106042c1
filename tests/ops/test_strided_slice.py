"""STRIDED_SLICE and SLICE (tinycc_ml/ir/ops/network/strided_slice.py) against tflite-micro: the masks, negative
indices and strides, shrunk axes, SLICE's -1 size; int8 and float32 equal element for element (host C and the
interpreter; the M4 and M0 too); what TFLite Micro would ignore or refuse, refused by name."""

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

Q = (0.05, -3)
SHAPE = (1, 5, 6, 3)


def strided(begin, end, strides, out_shape, kind="int8", shape=SHAPE, **masks) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(shape, kind, scale=Q[0], zero_point=Q[1], name="x")
    consts = [b.tensor((len(v),), "int32", scale=None, data=np.asarray(v, dtype=np.int32))
              for v in (begin, end, strides)]
    y = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="y")
    fields = {"beginMask": 0, "endMask": 0, "shrinkAxisMask": 0, **masks}
    b.op(OPS.STRIDED_SLICE, [x, *consts], [y], OPTIONS.StridedSliceOptions, options("StridedSliceOptions", **fields))
    z = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="z")
    b.op(OPS.RELU, [y], [z])
    return b.finish([x], [z])


def sliced(begin, size, out_shape, kind="int8") -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=Q[0], zero_point=Q[1], name="x")
    consts = [b.tensor((len(v),), "int32", scale=None, data=np.asarray(v, dtype=np.int32)) for v in (begin, size)]
    y = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="y")
    b.op(OPS.SLICE, [x, *consts], [y])
    z = b.tensor(out_shape, kind, scale=Q[0], zero_point=Q[1], name="z")
    b.op(OPS.RELU, [y], [z])
    return b.finish([x], [z])


CASES = {
    "box": lambda kind: strided([0, 1, 2, 0], [1, 4, 6, 3], [1, 1, 1, 1], (1, 3, 4, 3), kind),
    "steps": lambda kind: strided([0, 0, 1, 0], [1, 5, 6, 3], [1, 2, 3, 2], (1, 3, 2, 2), kind),
    "negative": lambda kind: strided([0, -4, -1, 0], [1, -1, 0, 3], [1, 1, -2, 1], (1, 3, 3, 3), kind),
    "masks": lambda kind: strided([0, 3, 9, 1], [0, 0, -9, 2], [1, 1, -1, 1], (1, 2, 6, 1), kind, beginMask=4,
                                  endMask=3),
    "shrink": lambda kind: strided([0, 2, 0, 1], [1, 3, 6, 2], [1, 1, 2, 1], (3,), kind, shrinkAxisMask=11),
    "slice": lambda kind: sliced([0, 1, 2, 0], [1, -1, 3, 2], (1, 4, 3, 2), kind),
}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_equals_tflite_micro(case, tmp_path):
    assert_int8_equal(CASES[case]("int8"), random_rows(np.random.default_rng(0), 10, int(np.prod(SHAPE))), SHAPE,
                      tmp_path)


@pytest.mark.parametrize("case", ["steps", "negative", "shrink", "slice"])
def test_float_equals_tflite_micro(case, tmp_path):
    assert_float_equal(CASES[case]("float32"), random_rows(np.random.default_rng(1), 10, int(np.prod(SHAPE)),
                                                            "float32"), SHAPE, tmp_path)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0"])
def test_the_microcontrollers_copy_the_same_elements(target, tmp_path):
    require_target(target)
    data = CASES["negative"]("int8")
    X = random_rows(np.random.default_rng(2), 3, int(np.prod(SHAPE)))[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


@pytest.mark.parametrize("data, match", [
    (strided([0, 0, 0, 0], [1, 5, 6, 3], [1, 0, 1, 1], (1, 5, 6, 3)), "stride 0"),
    (strided([0, 0, 0, 0], [1, 5, 6, 3], [1, 1, 1, 1], (1, 5, 6, 3), ellipsisMask=1), "ellipsis_mask"),
    (strided([0, 0, 0, 0], [1, 4, 6, 3], [1, 1, 1, 1], (1, 5, 6, 3)), "declares shape"),
    (sliced([0, 4, 0, 0], [1, 3, 6, 3], (1, 3, 6, 3)), "leave it"),
])
def test_slices_tflite_micro_would_not_run_as_declared_are_refused(data, match, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=match):
        tinycc_ml.load_model(path)
