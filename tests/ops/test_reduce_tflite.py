"""SUM, REDUCE_MAX and REDUCE_MIN from .tflite files (ir/ops/network/reduce.py) against tflite-micro: any axes
(negative ones counted from the end, repeated ones once), keep_dims, at int8, int16 (SUM) and float32; the
microcontrollers too; what tflite-micro refuses refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_equal, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 3, 4, 5)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def reducer(code, axes, keep, kind="int8", out_q=(0.3, 7), shape=SHAPE) -> bytes:
    b = TfliteBuilder()
    in_q = (0.05 / 256, 0) if kind == "int16" else (0.05, -3)
    x = b.tensor(shape, kind, scale=in_q[0], zero_point=in_q[1], name="x")
    a = b.tensor((len(axes),), "int32", scale=None, data=np.asarray(axes, dtype=np.int32), name="axes")
    rank = len(shape)
    resolved = {v % rank for v in axes}
    out_shape = [1 if k in resolved else d for k, d in enumerate(shape) if keep or k not in resolved]
    if code in (OPS.REDUCE_MAX, OPS.REDUCE_MIN):
        out_q = in_q
    elif kind == "int16":
        out_q = (out_q[0] / 256, 0)
    y = b.tensor(out_shape, kind, scale=out_q[0], zero_point=out_q[1], name="y")
    b.op(code, [x, a], [y], OPTIONS.ReducerOptions, options("ReducerOptions", keepDims=keep))
    return b.finish([x], [y])


AXES = [([1], True), ([-1], False), ([1, 2], True), ([2, -3], False), ([0, 1, 2, 3], False), ([3, 3], True)]


@pytest.mark.parametrize("code, kind", [(OPS.SUM, "int8"), (OPS.SUM, "int16"), (OPS.SUM, "float32"),
                                        (OPS.REDUCE_MAX, "int8"), (OPS.REDUCE_MAX, "float32"),
                                        (OPS.REDUCE_MIN, "int8"), (OPS.REDUCE_MIN, "float32")])
@pytest.mark.parametrize("axes, keep", AXES)
def test_equals_tflite_micro(code, kind, axes, keep, tmp_path):
    data = reducer(code, axes, keep, kind)
    X = random_rows(np.random.default_rng(2), 20, int(np.prod(SHAPE)), kind)
    assert_equal(data, X, SHAPE, tmp_path, kind, spread=3)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    for name, code in (("sum", OPS.SUM), ("max", OPS.REDUCE_MAX), ("min", OPS.REDUCE_MIN)):
        data = reducer(code, [1, 2], False)
        X = random_rows(np.random.default_rng(3), 3, int(np.prod(SHAPE)))[:3]
        (tmp_path / name).mkdir()
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / name, name),
                                      tflite_micro(data, X, SHAPE))


@pytest.mark.parametrize("data, problem", [
    (reducer(OPS.REDUCE_MAX, [1], True, "int16"), "int16 tensors \\(TFLite Micro takes float32 and int8\\)"),
    (reducer(OPS.SUM, [4], True), "axes \\[4\\] of a 4-dimensional input"),
    (reducer(OPS.SUM, [1, 2], False, "int16", shape=(1, 200, 200, 1)), "TFLite's int32 sums can wrap"),
])
def test_what_tflite_micro_refuses_or_wraps_is_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
