"""One-operator .tflite files and their checks against tflite-micro, shared by the op modules' tests
(tests/ops/test_<op>.py): the file is built with TFLite's flatbuffer schema (tests/tflite_models.py), run by
tflite-micro (TFLite Micro's reference kernels: the definition) and by tinycc-ml's interpreter and C."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tinycc_ml
from tests.tflite_builder import ACTIVATIONS, PADDINGS, tflm_raw_outputs
from tests.tflite_models import TfliteBuilder, options, schema

OPS = schema.BuiltinOperator
OPTIONS = schema.BuiltinOptions


def unary_model(code: int, shape, kind: str = "int8", in_q=(0.05, -3), out_q=(0.05, -3), options_type: int = 0,
                option_fields: dict | None = None, options_name: str | None = None) -> bytes:
    """x -> OP -> y, one operator of one input of ``shape`` (``kind``: "int8" or "float32")."""
    b = TfliteBuilder()
    x = b.tensor(shape, kind, scale=in_q[0], zero_point=in_q[1], name="x")
    y = b.tensor(shape, kind, scale=out_q[0], zero_point=out_q[1], name="y")
    made = options(options_name, **(option_fields or {})) if options_name else None
    b.op(code, [x], [y], options_type, made)
    return b.finish([x], [y])


def binary_model(code: int, a_shape, b_shape, out_shape, kind: str = "int8", a_q=(0.05, -3), b_q=(0.04, 5),
                 out_q=(0.05, -3), options_type: int = 0, option_fields: dict | None = None,
                 options_name: str | None = None, b_data: np.ndarray | None = None) -> bytes:
    """(x, y) -> OP -> z: the model's input is ``x``; ``y`` a constant of ``b_data`` (random int8 or floats when
    None: one input per model is what the reader takes)."""
    rng = np.random.default_rng(11)
    b = TfliteBuilder()
    x = b.tensor(a_shape, kind, scale=a_q[0], zero_point=a_q[1], name="x")
    if b_data is None:
        top = 32768 if kind == "int16" else 128
        b_data = (rng.normal(0, 2, size=b_shape).astype(np.float32) if kind == "float32"
                  else rng.integers(-top, top, size=b_shape))
    y = b.tensor(b_shape, kind, scale=b_q[0], zero_point=b_q[1], data=b_data, name="y")
    z = b.tensor(out_shape, kind, scale=out_q[0], zero_point=out_q[1], name="z")
    made = options(options_name, **(option_fields or {})) if options_name else None
    b.op(code, [x, y], [z], options_type, made)
    return b.finish([x], [z])


def pool_model(code: int, shape, window, stride, padding: str, activation: str, q) -> tuple[bytes, tuple]:
    """x (1, h, w, c) int8 -> MAX_POOL_2D or AVERAGE_POOL_2D (``code``) -> y of x's quantisation q = (scale,
    zero point): (the model, y's shape)."""
    b = TfliteBuilder()
    _, h, w, c = shape
    size = [-(-n // s) if padding == "same" else (n - k) // s + 1 for n, k, s in zip((h, w), window, stride)]
    x = b.tensor(shape, "int8", scale=q[0], zero_point=q[1], name="x")
    y = b.tensor((1, *size, c), "int8", scale=q[0], zero_point=q[1], name="y")
    b.op(code, [x], [y], OPTIONS.Pool2DOptions,
         options("Pool2DOptions", padding=PADDINGS[padding], strideW=stride[1], strideH=stride[0],
                 filterWidth=window[1], filterHeight=window[0], fusedActivationFunction=ACTIVATIONS[activation]))
    return b.finish([x], [y]), (1, *size, c)


def int32_constant(b, values, name: str) -> int:
    """A constant int32 tensor (axes, shapes, block sizes) in the model ``b`` builds."""
    values = np.asarray(values, dtype=np.int32)
    return b.tensor(values.shape, "int32", scale=None, data=values, name=name)


def random_rows(rng, n: int, size: int, kind: str = "int8") -> np.ndarray:
    """n rows: every int8 value in the first rows (for int8; the extremes for int16), then uniform ones; floats
    spread over +-8."""
    if kind == "float32":
        return rng.normal(0, 4, size=(n, size)).astype(np.float32)
    if kind == "int16":  # the extremes, then uniform values
        ends = np.stack([np.full(size, -32768), np.full(size, 32767), np.resize([-32768, 32767, 0, -1], size)])
        return np.concatenate([ends, rng.integers(-32768, 32768, size=(n, size))]).astype(np.int16)
    every = np.resize(np.arange(-128, 128, dtype=np.int8), (max(1, 256 // size + 1), size))
    return np.concatenate([every, rng.integers(-128, 128, size=(n, size))]).astype(np.int8)[:max(n, len(every))]


def tflite_micro(data: bytes, X: np.ndarray, shape) -> np.ndarray:
    return tflm_raw_outputs(data, [x.reshape(shape) for x in X]).reshape(len(X), -1)


def compiled(data: bytes, tmp_path: Path, name: str = "op", target: str = "host", precision: str | None = None):
    """The model file written to ``tmp_path``, loaded, and compiled for ``target``: (model, compile result)."""
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    model = tinycc_ml.load_model(path)
    kwargs = {} if precision is None else {"precision": precision}
    return model, tinycc_ml.compile(path, target=target, name=name, out_dir=tmp_path / target, **kwargs)


def assert_int8_equal(data: bytes, X: np.ndarray, shape, tmp_path: Path) -> None:
    """Every output byte of the interpreter and of the host C equal to tflite-micro's on the int8 rows X."""
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path)
    np.testing.assert_array_equal(model.run_int8(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    assert result.precision == "int8"
    scores, _ = result.load().run_raw(X)
    np.testing.assert_array_equal(scores, want)


def assert_equal(data: bytes, X: np.ndarray, shape, tmp_path: Path, kind: str, spread: int = 0) -> np.ndarray:
    """The interpreter's and the host C's outputs equal to tflite-micro's on the rows X of ``kind`` ("int8",
    "int16": every value; "float32": bit for bit); ``spread``: how many distinct values tflite-micro's outputs
    must have (rows that reach the rounding, not all saturated). Returns tflite-micro's outputs."""
    want = tflite_micro(data, X, shape)
    assert np.unique(want).size > spread
    model, result = compiled(data, tmp_path)
    if kind == "float32":
        np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
        np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)
        return want
    np.testing.assert_array_equal(model.run_quantised(X.reshape(len(X), *shape)).reshape(len(X), -1), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)
    return want


def assert_float_equal(data: bytes, X: np.ndarray, shape, tmp_path: Path) -> None:
    """The float C's outputs equal to tflite-micro's float32 outputs (an op of one rounding: bit for bit)."""
    want = tflite_micro(data, X, shape)
    model, result = compiled(data, tmp_path, precision="float")
    np.testing.assert_array_equal(model.scores(X).astype(np.float32), want)
    np.testing.assert_array_equal(result.load().scores(X).astype(np.float32), want)


def simulated_scores(target: str, data: bytes, X: np.ndarray, tmp_path: Path, name: str = "op") -> np.ndarray:
    """The int8 model's output bytes for the int8 rows X in ``target``'s simulator: the rows given as the real
    values they stand for (a build quantises real rows with its input's scale and zero point: the same codes)."""
    from tinycc_ml.codegen.backend import get_backend

    model, result = compiled(data, tmp_path, name, target)
    x = model.graph.type(model.input_name).dtype
    if x.is_float:  # a float model takes the rows as they are
        return np.asarray(get_backend(target).simulate(tmp_path / target, result.output, X).scores).reshape(len(X), -1)
    real = (X.astype(np.float64) - x.zero_point) * x.qscales[0]
    assert np.array_equal(model.quantise_input(real), X.reshape(len(X), -1))  # the round trip is exact
    run = get_backend(target).simulate(tmp_path / target, result.output, real)
    return np.asarray(run.scores).reshape(len(X), -1)
