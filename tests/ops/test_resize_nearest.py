"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR (tinycc_ml/ir/ops/network/resize_*.py) against tflite-micro: up- and
downsampling by whole and fractional factors, align_corners and half_pixel_centers, at int8, int16 and float32
(interpreter, host C, the microcontrollers), bad sizes refused by name."""

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


def resize(in_shape, size, kind="int8", align=False, half=False, declared=None, code=OPS.RESIZE_NEAREST_NEIGHBOR,
           ) -> bytes:
    b = TfliteBuilder()
    q = (0.05 / 256, 0) if kind == "int16" else (0.05, -3)
    x = b.tensor(in_shape, kind, scale=q[0], zero_point=q[1], name="x")
    s = b.tensor((len(size),), "int32", scale=None, data=np.asarray(size, dtype=np.int32), name="size")
    y = b.tensor(declared or (1, *size[:2], in_shape[3]), kind, scale=q[0], zero_point=q[1], name="y")
    name = "ResizeNearestNeighborOptions" if code == OPS.RESIZE_NEAREST_NEIGHBOR else "ResizeBilinearOptions"
    b.op(code, [x, s], [y], getattr(OPTIONS, name), options(name, alignCorners=align, halfPixelCenters=half))
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


BILINEAR = [c for c in CASES if not (c[2] and c[3])]  # align_corners with half_pixel_centers: refused (below)


@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("in_shape, size, align, half", BILINEAR)
def test_bilinear_equals_tflite_micro(in_shape, size, align, half, kind, tmp_path):
    data = resize(in_shape, size, kind, align, half, code=OPS.RESIZE_BILINEAR)
    assert_equal(data, random_rows(np.random.default_rng(5), 6, int(np.prod(in_shape)), kind), in_shape, tmp_path,
                 kind)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_interpolate_alike(target, tmp_path):
    require_target(target)
    for kind in ("int8", "float32"):
        data = resize((1, 3, 4, 2), [7, 5], kind, half=True, code=OPS.RESIZE_BILINEAR)
        X = random_rows(np.random.default_rng(6), 3, 24, kind)[:3]
        (tmp_path / kind).mkdir()
        got = simulated_scores(target, data, X, tmp_path / kind)
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float64),
                                      tflite_micro(data, X, (1, 3, 4, 2)).astype(np.float64))


def test_bilinear_with_both_corner_rules_is_refused(tmp_path):
    path = tmp_path / "both.tflite"
    path.write_bytes(resize((1, 3, 4, 2), [6, 8], align=True, half=True, code=OPS.RESIZE_BILINEAR))
    with pytest.raises(ModelFileError, match=r"both\.tflite.*align_corners and half_pixel_centers exclude"):
        tinycc_ml.load_model(path)
