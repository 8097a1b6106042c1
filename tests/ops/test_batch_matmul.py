"""BATCH_MATMUL (tinycc_ml/ir/ops/network/batch_matmul.py) against tflite-micro: int8 with zero points, 16x8-style
int16, float32 in TFLite Micro's order of summation; adj_x / adj_y; batch axes broadcast; a constant or a computed
right-hand side; the microcontrollers; what tflite-micro refuses refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import ModelFileError

Q = {"int8": ({"scale": 0.05, "zero_point": -3}, {"scale": 0.02, "zero_point": 5}, {"scale": 0.6, "zero_point": 2}),
     "int16": ({"scale": 0.05 / 256, "zero_point": 0}, {"scale": 0.02 / 256, "zero_point": 0},
               {"scale": 0.3 / 256, "zero_point": 0}),
     "float32": ({"scale": None},) * 3}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def _matrix(kind, shape, rng):
    if kind == "float32":
        return rng.normal(0, 1, size=shape).astype(np.float32)
    top = 128 if kind == "int8" else 32768
    return rng.integers(-top, top, size=shape)


def matmul(kind: str, x_shape, y_shape, out_shape, adj_x=False, adj_y=False, computed_rhs=False) -> bytes:
    """x @ c (c constant), or x @ transpose-free reshape of x itself when ``computed_rhs`` (both computed)."""
    rng = np.random.default_rng(21)
    b = TfliteBuilder()
    qx, qy, qo = Q[kind]
    x = b.tensor(x_shape, kind, name="x", **qx)
    if computed_rhs:
        y = b.tensor(y_shape, kind, name="y", **qx)
        b.op(OPS.RESHAPE, [x], [y])
    else:
        y = b.tensor(y_shape, kind, data=_matrix(kind, y_shape, rng), name="y", **qy)
    z = b.tensor(out_shape, kind, name="z", **qo)
    b.op(OPS.BATCH_MATMUL, [x, y], [z], OPTIONS.BatchMatMulOptions,
         options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y))
    return b.finish([x], [z])


CASES = {
    "2-D": ((3, 5), (5, 4), (3, 4), {}),
    "adj_y": ((3, 5), (4, 5), (3, 4), {"adj_y": True}),
    "adj_x": ((5, 3), (5, 4), (3, 4), {"adj_x": True}),
    "batch broadcast": ((2, 1, 3, 5), (1, 4, 5, 2), (2, 4, 3, 2), {}),
    "both computed": ((1, 4, 4), (1, 4, 4), (1, 4, 4), {"computed_rhs": True, "adj_x": True}),
}


def rows(kind, size, n=10):
    rng = np.random.default_rng(23)
    return rng.normal(0, 2, size=(n, size)).astype(np.float32) if kind == "float32" else random_rows(rng, n, size,
                                                                                                    kind)


@pytest.mark.parametrize("kind", ["int8", "int16", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_equals_tflite_micro(kind, case, tmp_path):
    x_shape, y_shape, out_shape, flags = CASES[case]
    data = matmul(kind, x_shape, y_shape, out_shape, **flags)
    X = rows(kind, int(np.prod(x_shape)))
    want = tflite_micro(data, X, x_shape)
    assert np.unique(want).size > 4  # not all saturated
    model, result = compiled(data, tmp_path)
    if kind == "float32":
        got = [model.scores(X), result.load().scores(X)]
    else:
        got = [model.run_quantised(X.reshape(len(X), *x_shape)), result.load().run_raw(X)[0]]
    for g in got:
        np.testing.assert_array_equal(np.asarray(g).reshape(len(X), -1).astype(want.dtype), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_multiply_the_same(target, tmp_path):
    require_target(target)
    for k, (kind, case) in enumerate((("int8", "batch broadcast"), ("int16", "adj_y"), ("float32", "adj_x"))):
        x_shape, y_shape, out_shape, flags = CASES[case]
        data = matmul(kind, x_shape, y_shape, out_shape, **flags)
        X = rows(kind, int(np.prod(x_shape)), 3)
        want = tflite_micro(data, X, x_shape)
        (tmp_path / str(k)).mkdir()
        if kind == "int16":  # the simulators take real rows: int16 codes at the input's scale
            from tinycc_ml.codegen.backend import get_backend

            model, result = compiled(data, tmp_path / str(k), "op", target)
            real = X.astype(np.float64) * Q["int16"][0]["scale"]
            got = np.asarray(get_backend(target).simulate(tmp_path / str(k) / target, result.output, real).scores)
        else:
            got = simulated_scores(target, data, X, tmp_path / str(k))
        np.testing.assert_array_equal(np.asarray(got).reshape(len(X), -1).astype(want.dtype), want)


@pytest.mark.parametrize("data, problem", [
    (matmul("int8", (3, 5), (4, 4), (3, 4)), "sums 5 columns of lhs against 4 rows"),
    (matmul("int8", (2, 3, 5), (3, 5, 4), (2, 3, 4)), "do not broadcast"),
], ids=["inner sizes differ", "batch axes differ"])
def test_what_tflite_micro_refuses_is_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
