"""RESIZE_NEAREST_NEIGHBOR (tinycc_ml/ir/ops/network/resize_nearest.py) against tflite-micro: up- and downsampling by
whole and fractional factors, align_corners and half_pixel_centers, at int8, int16 and float32 (interpreter, host
C, the microcontrollers), bad sizes refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, assert_equal, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def resize(in_shape, size, kind="int8", align=False, half=False, declared=None) -> bytes:
    b = TfliteBuilder()
    q = (0.05 / 256, 0) if kind == "int16" else (0.05, -3)
    x = b.tensor(in_shape, kind, scale=q[0], zero_point=q[1], name="x")
    s = b.tensor((len(size),), "int32", scale=None, data=np.asarray(size, dtype=np.int32), name="size")
    y = b.tensor(declared or (1, *size[:2], in_shape[3]), kind, scale=q[0], zero_point=q[1], name="y")
    b.op(OPS.RESIZE_NEAREST_NEIGHBOR, [x, s], [y], OPTIONS.ResizeNearestNeighborOptions,
         options("ResizeNearestNeighborOptions", alignCorners=align, halfPixelCenters=half))
    return b.finish([x], [y])


CASES = [((1, 3, 4, 2), [6, 8], False, False), ((1, 3, 4, 2), [7, 5], False, True),
         ((1, 3, 4, 2), [7, 9], True, False), ((1, 5, 6, 3), [3, 4], True, True),
         ((1, 4, 4, 1), [10, 3], False, False), ((1, 1, 8, 4), [1, 16], False, True)]


@pytest.mark.parametrize("kind", ["int8", "int16", "float32"])
@pytest.mark.parametrize("in_shape, size, align, half", CASES)
def test_equals_tflite_micro(in_shape, size, align, half, kind, tmp_path):
    data = resize(in_shape, size, kind, align, half)
    assert_equal(data, random_rows(np.random.default_rng(0), 6, int(np.prod(in_shape)), kind), in_shape, tmp_path,
                 kind)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_copy_the_same_bytes(target, tmp_path):
    require_target(target)
    data = resize((1, 3, 4, 2), [7, 5], half=True)
    X = random_rows(np.random.default_rng(1), 3, 24)[:3]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, (1, 3, 4, 2)))


@pytest.mark.parametrize("data, problem", [
    (resize((1, 3, 4, 2), [0, 8], declared=(1, 1, 8, 2)), "two positive sizes"),
    (resize((1, 3, 4, 2), [6, 8], declared=(1, 6, 9, 2)), "declares shape"),
])
def test_bad_sizes_are_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
