"""The Cortex-M4 ADD kernel (tinycc_ml/arm/m4_add.py): x and a requantised copy of it (QUANTIZE int8 -> int8, so
the two inputs have their own scales and zero points) added, in QEMU, every output byte equal to tflite-micro's:
element counts of each unroll (4, 2, 1 a step), every input byte and both extremes, output right shifts of 0 and
more, the activations' clamps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, simulated_scores, tflite_micro
from tests.tflite_builder import ACTIVATIONS
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.arm import m4_add

pytestmark = pytest.mark.toolchain


@pytest.fixture(autouse=True)
def every_size_takes_the_kernel(monkeypatch):
    """The default build keeps the kernel for tensors of 2 K elements or more: small ones here to test its loop."""
    monkeypatch.setattr(m4_add, "TABLE_BYTES", 1)

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def add_model(shape, qx, qb, qo, activation: str) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(shape, "int8", scale=qx[0], zero_point=qx[1], name="x")
    r = b.tensor(shape, "int8", scale=qb[0], zero_point=qb[1], name="r")
    b.op(OPS.QUANTIZE, [x], [r])
    y = b.tensor(shape, "int8", scale=qo[0], zero_point=qo[1], name="y")
    b.op(OPS.ADD, [x, r], [y], OPTIONS.AddOptions,
         options("AddOptions", fusedActivationFunction=ACTIVATIONS[activation]))
    return b.finish([x], [y])


def rows(size: int, seed: int) -> np.ndarray:
    every = np.resize(np.arange(-128, 128), (max(1, -(-256 // size)), size))
    ends = np.stack([np.full(size, -128), np.full(size, 127)])
    rng = np.random.default_rng(seed)
    return np.concatenate([every, ends, rng.integers(-128, 128, size=(2, size))]).astype(np.int8)


def check(data: bytes, shape, tmp_path) -> str:
    size = int(np.prod(shape))
    X = rows(size, size)
    got = simulated_scores("cortex-m4", data, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(data, X, shape).reshape(len(X), -1))
    return (tmp_path / "cortex-m4" / "op.c").read_text()


@pytest.mark.parametrize("shape, qo, activation", [
    ((1, 4, 4, 8), (0.09, -128), "relu"),  # ResNet-8's form: output zero point -128, 4 a step
    ((1, 3, 2, 3), (0.05, 7), "relu"),  # 18 elements: 2 a step; ReLU's bound above -128
    ((1, 5, 1, 3), (0.01, -3), "relu6"),  # 15: 1 a step; both bounds
    ((2, 7), (0.1, 100), "none"),
])
def test_add_equals_tflite_micro_on_the_m4(shape, qo, activation, tmp_path):
    """Each unroll (4, 2, 1 elements a step), both clamps, output zero points at and above -128."""
    require_target("cortex-m4")
    source = check(add_model(shape, (0.05, -3), (0.03, 11), qo, activation), shape, tmp_path)
    assert "op_m4_add_" in source


@pytest.mark.parametrize("qo, activation", [((0.09, -128), "relu"), ((0.01, 5), "relu6"), ((0.2, 90), "none")])
def test_the_default_build_computes_small_adds_without_tables(qo, activation, monkeypatch, tmp_path):
    """2 KB of tables for a 128-element ADD: the default build rescales on SMMLAR in a C loop instead (no tables),
    every byte tflite-micro's."""
    require_target("cortex-m4")
    monkeypatch.setattr(m4_add, "TABLE_BYTES", 2048)
    shape = (1, 4, 4, 8)
    source = check(add_model(shape, (0.05, -3), (0.03, 11), qo, activation), shape, tmp_path)
    assert "op_m4_addc_" in source and "op_m4_add_" not in source and "_m4a[" not in source


@SETTINGS
@given(size=st.integers(1, 40), sx=st.floats(0.002, 0.5), sb=st.floats(0.002, 0.5), so=st.floats(0.002, 2.0),
       zx=st.integers(-128, 127), zb=st.integers(-128, 127), zo=st.integers(-128, 127),
       activation=st.sampled_from(sorted(ACTIVATIONS)))
def test_drawn_adds_equal_tflite_micro_on_the_m4(size, sx, sb, so, zx, zb, zo, activation, tmp_path_factory):
    """Scales far apart (output shifts from about 0 to 17 and beyond) and every zero point; a layer the kernel
    cannot prove exact takes the shared C, also checked."""
    require_target("cortex-m4")
    shape = (1, size)
    check(add_model(shape, (sx, zx), (sb, zb), (so, zo), activation), shape, tmp_path_factory.mktemp("add"))
