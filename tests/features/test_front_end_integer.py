"""Integer (int16) front ends: the steps' fixed-point ops against exact oracles, Pipelines compiled at int16 bit-exact
with the fixed-point interpreter on the host and the simulated chips, and as accurate as the Python pipeline."""

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
from tests.features.front_end_data import AUDIO_RATE, motions, sensor_pipeline, tones
from tinycc_ml.features import DCT, FrameNormalizer, Framer, Log, MelFilterBank, PowerSpectrum, Window
from tinycc_ml.importers.sklearn import from_sklearn
from tinycc_ml.ir.ops.front_end.power_spectrum import fixed_power
from tinycc_ml.ir.ops.front_end.sqrt import fixed_sqrt
from tinycc_ml.testing import check_model


def mfcc_int16_pipeline(X, y):
    """The MFCC pipeline with a per-frame mean removal only (its spread's 1 / sqrt has no integer form)."""
    return make_pipeline(Framer(256, 128), Window(256), PowerSpectrum(256), MelFilterBank(AUDIO_RATE, 256, 20),
                         Log(), DCT(20, 10), FrameNormalizer(10, with_std=False),
                         LogisticRegression(max_iter=3000)).fit(X, y)


@settings(max_examples=300, deadline=None)
@given(q=st.integers(-5, 2**15 - 1), s_in=st.integers(-12, 20), s_out=st.integers(-8, 20))
@example(q=5120, s_in=-11, s_out=20)  # q 2^e past int64 (e = 51): saturates, once overflowed to -2^62
@example(q=0, s_in=-11, s_out=20)  # e past 30: only q >= 1 saturates
def test_the_integer_square_root_rounds_exactly(q, s_in, s_out):
    e = 2 * s_out - s_in  # y = round(sqrt(q 2^e)) = floor((isqrt(4 q 2^e) + 1) / 2), computed on exact integers
    if q <= 0:
        want = 0
    elif e >= 0:
        want = (math.isqrt(4 * q << e) + 1) >> 1
    else:  # sqrt(q 2^e) = sqrt(q 2^(e + 2j)) 2^-j: an even power of two taken out of the root exactly
        j = (-e + 1) // 2
        want = ((math.isqrt(4 * q << (e + 2 * j)) >> j) + 1) >> 1
    assert fixed_sqrt(np.array([q]), s_in, s_out)[0] == min(want, 2**15 - 1)


def test_block_scaling_keeps_a_quiet_frames_bits():
    """A frame 2^9 times quieter is shifted up before the FFT: its power spectrum keeps the loud frame's relative
    accuracy (without the block exponent the q15 FFT's per-stage division would leave it a few units)."""
    t = np.arange(256)
    loud = np.round(20000 * np.sin(2 * np.pi * 19.3 * t / 256)).astype(np.int64)
    quiet = np.round(loud / 512).astype(np.int64)
    for frame, s_out in ((loud, -28), (quiet, -10)):  # each peak about 18,000 units of its scale
        want = np.abs(np.fft.rfft(frame)) ** 2
        got = fixed_power(frame[None], 0, s_out, 256)[0] * 2.0**-s_out
        peak = np.argmax(want)
        assert abs(got[peak] - want[peak]) < 0.01 * want[peak]


@pytest.mark.parametrize("model", ["nb", "forest"])
def test_sensor_pipelines_at_int16_are_exact_and_as_accurate_as_python(model, tmp_path):
    require_target("host")
    X, y = motions(300, seed=0)
    X_test, y_test = motions(120, seed=1)
    pipe = sensor_pipeline(X, y, model)
    result = tinycc_ml.compile(pipe, precision="int16", calibration=X)
    int16 = np.mean(result.load().predict(X_test) == y_test)
    assert int16 >= pipe.score(X_test, y_test) - 0.01
    check_model("host", from_sklearn(pipe), X_test[:40], "int16", tmp_path, calibration=X)


def test_an_mfcc_pipeline_at_int16_is_exact_and_as_accurate_as_python(tmp_path):
    require_target("host")
    X, y = tones(120, seed=0)
    X_test, y_test = tones(60, seed=1)
    pipe = mfcc_int16_pipeline(X, y)
    result = tinycc_ml.compile(pipe, precision="int16", calibration=X)
    assert np.mean(result.load().predict(X_test) == y_test) >= pipe.score(X_test, y_test) - 0.01
    assert "log_mel" in result.graph.order()  # power spectrum, mel filter bank and log fused (log_mel_power)
    check_model("host", from_sklearn(pipe), X_test[:20], "int16", tmp_path, calibration=X)


@pytest.mark.parametrize("target", ["avr", "cortex-m4"])
def test_int16_front_ends_are_exact_on_the_simulated_chips(target, tmp_path):
    require_target(target)
    X, y = motions(200, seed=0, window=32)
    check_model(target, from_sklearn(sensor_pipeline(X, y, "nb")), motions(12, seed=1, window=32)[0], "int16",
                tmp_path / "sensor", calibration=X)
    if target == "cortex-m4":  # the MFCC pipeline's 1024 samples take more than the ATmega328P's 2 KB
        A, a = tones(80, seed=0)
        check_model(target, from_sklearn(mfcc_int16_pipeline(A, a)), tones(8, seed=1)[0], "int16",
                    tmp_path / "mfcc", calibration=A)


def test_the_m4_front_end_kernels_are_exact_on_edge_frames(tmp_path):
    """The Cortex-M4's window product, power spectrum (block exponent, shift, q15 FFT, SMUAD powers) on frames that
    reach each case: silence (no shift), the calibration's extremes alternating, a frame 300 and 5,000 times
    quieter than a tone (shifts of 8 and more), against the fixed-point interpreter."""
    require_target("cortex-m4")
    A, a = tones(80, seed=0)
    model = from_sklearn(mfcc_int16_pipeline(A, a))
    t = np.arange(A.shape[1])
    edges = np.stack([np.zeros_like(A[0]), np.where(t % 2, A.max(), A.min()), A[0] / 300, A[1] / 5000, A[2]])
    source = tinycc_ml.compile(model, target="cortex-m4", precision="int16", calibration=A, name="fe").files["fe.c"]
    assert all(kernel in source for kernel in ("fe_m4_minmax16(", "fe_m4_shift16(", "__smlabb(", "__smuad("))
    check_model("cortex-m4", model, edges, "int16", tmp_path, calibration=A)


def test_the_c_square_root_saturates_past_31_bits_and_keeps_zero(tmp_path):
    """sqrt at s_in=-11, s_out=20 (e = 51, beyond int64 before the fix): every q >= 1 saturates, q <= 0 gives 0, in
    the C as in fixed_sqrt."""
    require_target("host")
    from tinycc_ml.api import write_files
    from tinycc_ml.host.backend import HostBackend
    from tinycc_ml.host.build import load_host_build
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.types import IDX, TensorType, fixed
    from tinycc_ml.passes.plan_memory import fused_chains, plan

    g = Graph("sqrt_edge")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((5,), fixed(16, -11)), name="x")
    root = g.add("sqrt", [x], type=TensorType((5,), fixed(16, 20)), name="root")
    g.set_output("scores", root)
    g.set_output("prediction", g.add("argmax", [root], type=TensorType((), IDX), name="prediction"))
    g.analyses.fused = fused_chains(g)
    g.analyses.memory_plan, g.analyses.arenas = plan(g, g.analyses.fused)
    output = HostBackend().emit(g, "sqrt_edge", [])
    write_files(tmp_path, output.files)
    q = np.array([0, 1, 5120, 32767, -3], dtype=np.int16)
    scores, _ = load_host_build(tmp_path, output).run_raw(q)
    assert scores[0].tolist() == fixed_sqrt(q, -11, 20).tolist() == [0, 32767, 32767, 32767, 0]
