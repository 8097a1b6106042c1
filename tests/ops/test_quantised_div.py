"""int8 DIV from .tflite files (ir/ops/network/quantised_div.py) against tflite-micro, over every pair of int8
dividend and divisor codes: equal wherever TFLite Micro's shifts stay within 31 bits (the interpreter and the host C);
where its shift passes 31 bits (undefined behaviour in its C++), the rounded quotient instead: within one step of the
real quotient. Broadcast operands and a fused RELU; the microcontrollers' C equal to the host's."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled
from tests.tflite_builder import tflm_joined_outputs
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.ops.network.quantised_div import leading_sign_bits, multiplier
from tinycc_ml.ir.ops.tflite_arith import get_reciprocal
from tinycc_ml.ir.types import quantised

N = 256


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def div_model(qa, qb, qo, activation: int = 0, b_shape=(N,), n: int = N) -> bytes:
    b = TfliteBuilder()
    a = b.tensor((n,), "int8", scale=qa[0], zero_point=qa[1], name="a")
    d = b.tensor(b_shape, "int8", scale=qb[0], zero_point=qb[1], name="d")
    y = b.tensor((n,), "int8", scale=qo[0], zero_point=qo[1], name="y")
    b.op(OPS.DIV, [a, d], [y], OPTIONS.DivOptions, options("DivOptions", fusedActivationFunction=activation))
    return b.finish([a, d], [y])


def every_pair(zero_point_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (dividend, divisor) code pair but a divisor of zero, as rows of N."""
    A, D = (v.ravel().astype(np.int8) for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    keep = D != zero_point_b
    n = keep.sum() // N * N
    return A[keep][:n].reshape(-1, N), D[keep][:n].reshape(-1, N)


def within_31_bits(A, D, qa, qb, qo) -> np.ndarray:
    """Where TFLite Micro's total shift stays a shift of at most 31 bits."""
    x1, x2 = A.astype(np.int64) - qa[1], D.astype(np.int64) - qb[1]
    x1 = np.where(x2 < 0, -x1, x1)
    _, bits = get_reciprocal(np.abs(x2), 31)
    shift = multiplier(quantised(8, [qa[0]], qa[1]), quantised(8, [qb[0]], qb[1]), quantised(8, [qo[0]], qo[1]))[1]
    return leading_sign_bits(x1) + bits - shift <= 31


@pytest.mark.parametrize("qa, qb, qo", [((0.05, -3), (0.04, 5), (0.05, 0)), ((0.1, 0), (0.02, -10), (0.3, 7)),
                                        ((0.01, 20), (0.1, 3), (0.02, -1)), ((0.5, 0), (0.001, 0), (2.0, 0))])
def test_every_pair_equals_tflite_micro_where_its_shifts_are_defined(qa, qb, qo, tmp_path):
    data = div_model(qa, qb, qo)
    A, D = every_pair(qb[1])
    want = tflm_joined_outputs(data, [[a, d] for a, d in zip(A, D)])
    model, result = compiled(data, tmp_path)
    X = np.concatenate([A, D], axis=1)
    host = np.asarray(result.load().run_raw(X)[0])
    np.testing.assert_array_equal(model.run_quantised(X), host)
    defined = within_31_bits(A, D, qa, qb, qo)
    assert defined.mean() > 0.5
    np.testing.assert_array_equal(host[defined], want[defined])
    real = ((A[~defined] - qa[1]) * qa[0]) / ((D[~defined] - qb[1]) * qb[0])
    assert np.all(np.abs(host[~defined] - (qo[1] + real / qo[0])) <= 1.0)  # below one output step from the quotient


def test_a_broadcast_divisor_and_a_fused_relu(tmp_path):
    qa, qb, qo = (0.05, -3), (0.04, 5), (0.05, 0)
    data = div_model(qa, qb, qo, activation=1, b_shape=(1,))
    rng = np.random.default_rng(3)
    A = rng.integers(-128, 128, size=(40, N)).astype(np.int8)
    D = rng.integers(-128, 128, size=(40, 1)).astype(np.int8)
    D[D == qb[1]] = qb[1] + 1
    want = tflm_joined_outputs(data, [[a, d] for a, d in zip(A, D)])
    _, result = compiled(data, tmp_path)
    host = np.asarray(result.load().run_raw(np.concatenate([A, D], axis=1))[0])
    defined = within_31_bits(A, np.broadcast_to(D, A.shape), qa, qb, qo)
    np.testing.assert_array_equal(host[defined], want[defined])
    assert host.min() >= qo[1]  # RELU


@pytest.mark.parametrize("target", ["cortex-m4", "avr"])
def test_the_microcontrollers_divide_as_the_host(target, tmp_path):
    require_target(target)
    qa, qb, qo = (0.1, 0), (0.02, -10), (0.3, 7)
    data = div_model(qa, qb, qo, b_shape=(32,), n=32)
    A, D = every_pair(qb[1])
    X = np.concatenate([A.reshape(-1, 32), D.reshape(-1, 32)], axis=1)[::97][:4]  # plain codes: the inputs differ
    model, result = compiled(data, tmp_path, target=target)
    run = get_backend(target).simulate(tmp_path / target, result.output, X.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(len(X), -1), model.run_quantised(X))
