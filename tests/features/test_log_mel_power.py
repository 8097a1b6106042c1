"""The fused log mel power (ir/ops/front_end/log_mel_power.py): its log stage within the stated bound of float64, its
float semantics those of the unfused chain, quiet frames as accurate as loud ones in integer builds, and its C
bit-exact with the interpreter on every target, on silent, quiet and full-scale frames."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

import tinycc_ml
from tests.conftest import require_target
from tests.features.front_end_data import AUDIO_RATE, tones
from tinycc_ml.features import Framer, Log, MelFilterBank, PowerSpectrum, Window
from tinycc_ml.features.spectral import lower_log_mel
from tinycc_ml.importers.sklearn import from_sklearn
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.ops.front_end.log_mel_power import (
    WEIGHT_MAX,
    exponent_range,
    fixed_log_mel,
    log_floor_q,
    log_of_sums,
    log_stage_error_bound,
)
from tinycc_ml.ir.ops.front_end.power_spectrum import fixed_power
from tinycc_ml.models.lowering import add_input
from tinycc_ml.testing import check_model

MEL = MelFilterBank(AUDIO_RATE, 256, 20)


@settings(max_examples=400, deadline=None)
@given(s_in=st.integers(-8, 16), s_w=st.integers(0, 40), size=st.sampled_from([4, 64, 512, 4096]),
       b=st.integers(0, 15), acc_bits=st.integers(0, 56), fraction=st.floats(0.5, 1.0), log2_floor=st.floats(-60, 60))
@example(s_in=0, s_w=24, size=256, b=0, acc_bits=56, fraction=1.0, log2_floor=-60)  # the largest sum
@example(s_in=0, s_w=24, size=256, b=15, acc_bits=1, fraction=1.0, log2_floor=-60)  # acc = 1: left shifts only
def test_the_log_stage_is_within_its_stated_bound_of_float64(s_in, s_w, size, b, acc_bits, fraction, log2_floor):
    bins = size // 2 + 1
    acc = min(int(fraction * 2**acc_bits), 2**31 * WEIGHT_MAX * bins)
    exponent = s_w + 2 * b + 2 * s_in - 2 * (size.bit_length() - 1)
    floor = 2.0**log2_floor
    got = int(log_of_sums(np.array([acc]), np.array([exponent]), log_floor_q(floor))[0]) * 2.0**-15
    value = math.log(acc) - exponent * math.log(2) if acc else -math.inf  # ln(acc 2^-E), float64
    want = max(value, math.log(floor))
    assert abs(got - want) <= log_stage_error_bound(s_in, s_w, size, bins) + 1e-12
    assert exponent_range(s_in, s_w, size)[0] <= exponent <= exponent_range(s_in, s_w, size)[1]


def chain(fused: bool) -> tuple[Graph, list]:
    """Framer -> Window -> PowerSpectrum -> MelFilterBank -> Log(floor=1) lowered as three ops or fused, float."""
    X, _ = tones(4, seed=2)
    steps = [Framer(256, 128), Window(256), PowerSpectrum(256), MEL, Log(floor=1.0)]
    for step in steps:
        X = step.fit_transform(X)
    g = Graph("chain")
    node = add_input(g, steps[0].n_features_in_)
    node = steps[1].lower(g, steps[0].lower(g, node))
    node = lower_log_mel(g, node, *steps[2:]) if fused else steps[4].lower(g, steps[3].lower(g, steps[2].lower(g,
                                                                                                               node)))
    g.set_output("y", node)
    return g, steps


def test_the_float_op_is_the_unfused_chain():
    g_fused, _ = chain(True)
    g_chain, _ = chain(False)
    assert "log_mel_power" in [g_fused.op(n) for n in g_fused.order()]
    assert "log_mel_power" not in [g_chain.op(n) for n in g_chain.order()]
    X, _ = tones(6, seed=3)
    X = np.concatenate([X * 8000, np.zeros((1, X.shape[1])), X[:1] * 1e-3])  # a silent row: every value the floor
    fused, unfused = run_float(g_fused, X)["y"], run_float(g_chain, X)["y"]
    np.testing.assert_allclose(fused, unfused, rtol=0, atol=1e-9)
    assert np.all(fused[-2] == 0.0)  # log(floor = 1)


def test_quiet_frames_keep_their_bits_to_the_log():
    """A frame 2^10 times quieter than a loud one: its log mel values are as close to float64 as the loud frame's;
    resolving the block exponent at one output scale (the unfused power_spectrum) leaves it far off."""
    t = np.arange(256)
    loud = np.round(20000 * np.sin(2 * np.pi * 19.3 * t / 256) + 300 * np.sin(2 * np.pi * 71.1 * t / 256))
    weights = MEL.weights()
    for frame in (loud, np.round(loud / 1024)):
        want = np.log(np.maximum(weights @ np.abs(np.fft.rfft(frame)) ** 2, 1.0))
        got = fixed_log_mel(frame[None].astype(np.int64), 0, 256, weights, 1.0)[0] * 2.0**-15
        clear = want > 2.0  # bands well above the floor
        assert clear.sum() >= 15 and np.max(np.abs(got - want)[clear]) < 0.03  # the q15 FFT's noise, ~90 dB down
    # the unfused way: powers at the scale that holds the loud frame (its peak below 2^15), the log after the sums
    quiet = np.round(loud / 1024)
    peak = np.max(np.abs(np.fft.rfft(loud)) ** 2)
    s_out = math.floor(math.log2(32767 / peak))
    powers = fixed_power(quiet[None].astype(np.int64), 0, s_out, 256)[0] * 2.0**-s_out
    want = np.log(np.maximum(weights @ np.abs(np.fft.rfft(quiet)) ** 2, 1.0))
    assert np.max(np.abs(np.log(np.maximum(weights @ powers, 1.0)) - want)[want > 2.0]) > 1.0


def small_pipeline(X, y):
    """A log-mel pipeline small enough for the ATmega328P: 128 samples, 64-sample frames, 8 mel bands."""
    return make_pipeline(Framer(64, 64), Window(64), PowerSpectrum(64), MelFilterBank(AUDIO_RATE, 64, 8),
                         Log(floor=1.0), LogisticRegression(max_iter=2000)).fit(X, y)


def edge_rows(A: np.ndarray) -> np.ndarray:
    """Silence, full scale (the calibration's extremes alternating), frames 300 and 5,000 times quieter than a tone
    (block exponents of 8 and more), a tone as it is."""
    t = np.arange(A.shape[1])
    return np.stack([np.zeros_like(A[0]), np.where(t % 2, A.max(), A.min()), A[0] / 300, A[1] / 5000, A[2]])


@pytest.mark.parametrize("target", ["host", "cortex-m4", "avr", "cortex-m0"])
def test_the_c_is_exact_on_silent_quiet_and_full_scale_frames(target, tmp_path):
    require_target(target)
    A, a = tones(80, seed=0)
    A, rows = A[:, :128] * 1000, tones(6, seed=1)[0][:, :128] * 1000
    model = from_sklearn(small_pipeline(A, a))
    result = tinycc_ml.compile(model, precision="int16", calibration=A)
    assert "log_mel_power" in [result.graph.op(n) for n in result.graph.order()]
    check_model(target, model, np.concatenate([edge_rows(A), rows]), "int16", tmp_path, calibration=A)


def test_the_m4_kernel_is_exact_on_the_mfcc_front_end(tmp_path):
    """The Cortex-M4 kernel (SIMD block exponent and shift, q15 FFT kernel, SMUAD energies) on 256-point frames."""
    require_target("cortex-m4")
    from tests.features.test_front_end_integer import mfcc_int16_pipeline

    A, a = tones(80, seed=0)
    model = from_sklearn(mfcc_int16_pipeline(A, a))
    source = tinycc_ml.compile(model, target="cortex-m4", precision="int16", calibration=A, name="fe").files["fe.c"]
    assert all(k in source for k in ("fe_m4_minmax16(", "fe_m4_shift16(", "__smuad(", "fe_log_sum_q15("))
    check_model("cortex-m4", model, edge_rows(A), "int16", tmp_path, calibration=A)


def test_a_decibel_log_fuses_too_and_stays_exact(tmp_path):
    """Log(scale="db"): the fused natural log, then the factor 10 / ln 10; the C bit-exact with the interpreter."""
    require_target("host")
    A, a = tones(80, seed=0)
    A = A[:, :128] * 1000
    pipe = make_pipeline(Framer(64, 64), Window(64), PowerSpectrum(64), MelFilterBank(AUDIO_RATE, 64, 8),
                         Log(floor=1e-3, scale="db"), LogisticRegression(max_iter=2000)).fit(A, a)
    result = tinycc_ml.compile(pipe, precision="int16", calibration=A)
    ops = [result.graph.op(n) for n in result.graph.order()]
    assert "log_mel_power" in ops and "power_spectrum" not in ops and "log" not in ops
    assert np.mean(result.load().predict(A) == a) >= pipe.score(A, a) - 0.01
    check_model("host", from_sklearn(pipe), np.concatenate([edge_rows(A), A[:10]]), "int16", tmp_path, calibration=A)


@pytest.mark.parametrize("largest", [5e-324, 2.0**-40])
def test_log_mel_power_refuses_tiny_weights(largest):
    """A largest weight below 2^-32 would take a 16-bit scale past the sums' shifts (a denormal one overflowed the
    scale's computation): refused by name when the op is built."""
    from tinycc_ml.ir.types import F32, TensorType

    g = Graph("tiny")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((8,), F32), name="x")
    framed = g.add("reshape", [x], {"shape": [1, 8]}, type=TensorType((1, 8), F32), name="framed")
    weights = np.zeros((2, 5))
    weights[0, 1] = largest
    with pytest.raises(ValueError, match="largest weight .* is below 2\\^-32"):
        g.add("log_mel_power", [framed], {"fft_length": 8, "weights": weights, "floor": 1.0}, name="y")
    weights[0, 1] = 2.0**-32  # the smallest accepted
    g.add("log_mel_power", [framed], {"fft_length": 8, "weights": weights, "floor": 1.0}, name="y")
