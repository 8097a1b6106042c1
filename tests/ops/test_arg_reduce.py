"""ARG_MAX and ARG_MIN (tinycc_ml/ir/ops/network/arg_reduce.py) against tflite-micro: every axis, ties (the first
index), int8 and float32 with NaNs; the microcontrollers too; types tflite-micro does not take refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

SHAPE = (1, 3, 4, 5)


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def arg(code, axis, kind="int8", out_kind="int32") -> bytes:
    b = TfliteBuilder()
    x = b.tensor(SHAPE, kind, scale=0.05 / 256 if kind == "int16" else 0.05, zero_point=0 if kind == "int16" else -3,
                 name="x")
    a = b.tensor((1,), "int32", scale=None, data=np.asarray([axis], dtype=np.int32), name="axis")
    y = b.tensor([d for k, d in enumerate(SHAPE) if k != axis % 4], out_kind, scale=None, name="y")
    name = "ArgMaxOptions" if code == OPS.ARG_MAX else "ArgMinOptions"
    b.op(code, [x, a], [y], getattr(OPTIONS, name), options(name, outputType=2))
    return b.finish([x], [y])


def tied_rows(kind: str) -> np.ndarray:
    """Random rows, then rows of few distinct values (ties everywhere); float rows with NaNs and infinities."""
    rng = np.random.default_rng(7)
    size = int(np.prod(SHAPE))
    if kind == "float32":
        rows = rng.normal(0, 2, size=(12, size)).astype(np.float32)
        rows[6:] = rng.choice(np.asarray([np.nan, -np.inf, np.inf, 0.0, 1.0], dtype=np.float32), size=(6, size))
        rows[11] = np.nan
        return rows
    return np.concatenate([random_rows(rng, 6, size), rng.integers(-2, 2, size=(6, size)).astype(np.int8)])


@pytest.mark.parametrize("code", [OPS.ARG_MAX, OPS.ARG_MIN])
@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("axis", [1, 2, -1, 0])
def test_equals_tflite_micro(code, kind, axis, tmp_path):
    data = arg(code, axis, kind)
    X = tied_rows(kind)
    want = tflite_micro(data, X, SHAPE)
    model, result = compiled(data, tmp_path)
    got = model.scores(X) if kind == "float32" else model.run_quantised(X.reshape(len(X), *SHAPE))
    np.testing.assert_array_equal(np.asarray(got).reshape(len(X), -1), want)
    host = result.load().scores(X) if kind == "float32" else result.load().run_raw(X)[0]
    np.testing.assert_array_equal(np.asarray(host).reshape(len(X), -1), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_indices(target, tmp_path):
    require_target(target)
    data = arg(OPS.ARG_MAX, -1)
    X = tied_rows("int8")[4:8]
    np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path), tflite_micro(data, X, SHAPE))


@pytest.mark.parametrize("data, problem", [
    (arg(OPS.ARG_MAX, 1, "int16"), "int16 tensors \\(TFLite Micro takes float32 and int8\\)"),
    (arg(OPS.ARG_MIN, 1, out_kind="int64"), "int64 indices"),
])
def test_what_tflite_micro_does_not_take_is_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
