"""tinycc_ml.features' steps against their float64 oracles (scipy, closed forms), their refusals by name, and
scikit-learn's estimator checks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import scipy.signal
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import check_estimator

from tinycc_ml.errors import FrontEndError
from tinycc_ml.features import (
    DCT,
    FrameNormalizer,
    Framer,
    Log,
    MelFilterBank,
    PowerSpectrum,
    SensorFeatures,
    Window,
    hz_to_mel,
    mel_to_hz,
    stream_windows,
)

RNG = np.random.default_rng(46)


def test_framer_takes_whole_frames_every_hop_and_drops_the_tail():
    X = np.arange(20.0)[None, :]
    out = Framer(8, 5).fit_transform(X)
    assert out.shape == (1, 3 * 8)  # 1 + (20 - 8) // 5 frames; samples 18, 19 never read
    assert out.reshape(3, 8)[:, 0].tolist() == [0.0, 5.0, 10.0]
    assert out.reshape(3, 8)[-1].tolist() == list(np.arange(10.0, 18.0))


@pytest.mark.parametrize("window", ["hann", "hamming"])
@pytest.mark.parametrize("periodic", [True, False])
def test_window_is_scipys(window, periodic):
    X = RNG.standard_normal((2, 3 * 16))
    out = Window(16, window, periodic).fit_transform(X)
    w = scipy.signal.get_window(window, 16, fftbins=periodic)
    np.testing.assert_allclose(out, (X.reshape(2, 3, 16) * w).reshape(2, -1), rtol=0, atol=1e-15)
    if not periodic:  # symmetric windows are numpy's
        np.testing.assert_allclose(w, np.hanning(16) if window == "hann" else np.hamming(16), atol=1e-15)


@pytest.mark.parametrize("power", [1, 2])
def test_power_spectrum_is_scipys_rfft_of_zero_padded_frames(power):
    X = RNG.standard_normal((3, 2 * 12))
    out = PowerSpectrum(16, frame_length=12, power=power).fit_transform(X)
    frames = np.concatenate([X.reshape(3, 2, 12), np.zeros((3, 2, 4))], axis=2)
    expected = np.abs(scipy.fft.rfft(frames, axis=2)) ** power
    np.testing.assert_allclose(out, expected.reshape(3, -1), rtol=1e-12, atol=1e-12)


def test_mel_scales_at_their_defining_points():
    assert hz_to_mel(700.0, "htk") == pytest.approx(2595.0 * np.log10(2.0))
    assert hz_to_mel(1000.0, "slaney") == pytest.approx(15.0)  # linear below the knee: 1000 / (200 / 3)
    assert hz_to_mel(6400.0, "slaney") == pytest.approx(15.0 + 27.0)  # 27 steps per factor 6.4 above it
    f = np.array([0.0, 123.0, 999.0, 1000.0, 4321.0, 8000.0])
    for scale in ("htk", "slaney"):
        np.testing.assert_allclose(mel_to_hz(hz_to_mel(f, scale), scale), f, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("scale", ["htk", "slaney"])
def test_mel_filters_are_triangles_between_their_neighbours(scale):
    """norm=None: each filter is 1 at its centre and 0 at its neighbours' centres, linear between (in Hz); the
    Slaney norm divides it by half its width, so every filter's integral over frequency is 1."""
    bank = MelFilterBank(16000, 512, 24, fmin=100.0, scale=scale, norm=None).fit(np.zeros((1, 257)))
    edges, weights = bank.edges(), bank.weights()
    freqs = np.arange(257) * 16000 / 512
    for i in range(24):
        lo, mid, hi = edges[i:i + 3]
        expected = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
        np.testing.assert_allclose(weights[i], expected, atol=1e-12)
    normed = MelFilterBank(16000, 512, 24, fmin=100.0, scale=scale).fit(np.zeros((1, 257))).weights()
    np.testing.assert_allclose(normed, weights * (2.0 / (edges[2:] - edges[:-2]))[:, None], rtol=1e-12)
    X = RNG.random((2, 2 * 257))
    np.testing.assert_allclose(bank.fit_transform(X), (X.reshape(2, 2, 257) @ weights.T).reshape(2, -1), rtol=1e-12)


def test_log_floor_and_decibels():
    X = np.array([[0.0, 1e-12, 1.0, 100.0]])
    np.testing.assert_allclose(Log(1e-10).fit_transform(X), np.log([[1e-10, 1e-10, 1.0, 100.0]]))
    np.testing.assert_allclose(Log(1e-10, "db").fit_transform(X), [[-100.0, -100.0, 0.0, 20.0]], atol=1e-12)


@pytest.mark.parametrize("norm", ["ortho", None])
def test_dct_is_scipys_dct_ii(norm):
    X = RNG.standard_normal((3, 4 * 20))
    out = DCT(20, 7, norm).fit_transform(X)
    expected = scipy.fft.dct(X.reshape(3, 4, 20), type=2, norm=norm, axis=2)[:, :, :7]
    np.testing.assert_allclose(out, expected.reshape(3, -1), rtol=1e-12, atol=1e-12)


def test_frame_normaliser_centres_and_scales_each_frame():
    X = RNG.standard_normal((2, 3 * 10)) * 5 + 2
    out = FrameNormalizer(10, epsilon=1e-12).fit_transform(X).reshape(2, 3, 10)
    np.testing.assert_allclose(out.mean(axis=2), 0, atol=1e-12)
    np.testing.assert_allclose(out.std(axis=2), 1, atol=1e-9)
    kept = FrameNormalizer(10, with_std=False).fit_transform(X).reshape(2, 3, 10)
    np.testing.assert_allclose(kept.std(axis=2), X.reshape(2, 3, 10).std(axis=2), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 40), st.integers(1, 3), st.floats(10.0, 200.0), st.integers(0, 2**31))
@example(n=14, axes=1, rate=74.00122241454909, seed=0)  # k * rate / n put the Nyquist bin below rate / 2
def test_sensor_band_powers_share_out_the_mean_square(n, axes, rate, seed):
    """Parseval: bands covering [0, rate / 2) and the Nyquist bin's own band sum to mean(x^2) per axis; each band is
    its bins' c_k |X_k|^2 / N^2 (X from scipy's rfft)."""
    x = np.random.default_rng(seed).standard_normal((1, n * axes))
    bins = rate * (np.arange(n // 2 + 1) / n)
    cut = float(bins[len(bins) // 2]) if len(bins) > 2 else rate / 4
    bands = [(0.0, cut), (cut, rate / 2)]
    step = SensorFeatures(axes, rate, features=("rms",), bands=bands).fit(x)
    out = step.transform(x)[0]
    rms, powers = out[:axes], out[axes:].reshape(2, axes)
    nyquist = np.zeros(axes)
    if n % 2 == 0:  # the Nyquist bin (f = rate / 2) lies in no half-open band
        nyquist = np.abs(scipy.fft.rfft(x.reshape(n, axes), axis=0)[-1]) ** 2 / n ** 2
    np.testing.assert_allclose(powers.sum(axis=0) + nyquist, rms ** 2, rtol=1e-9)


def test_sensor_statistics_per_axis():
    x = RNG.standard_normal((64, 3)) + [0.0, 0.0, 9.8]
    step = SensorFeatures(3, 50.0).fit(x.reshape(1, -1))
    out = step.transform(x.reshape(1, -1))[0].reshape(7, 3)
    centred = x - x.mean(axis=0)
    crossings = np.sum((centred[1:] >= 0) != (centred[:-1] >= 0), axis=0)
    expected = [x.mean(0), x.std(0), x.min(0), x.max(0), np.sqrt((x ** 2).mean(0)), np.abs(x).max(0), crossings]
    np.testing.assert_allclose(out, np.array(expected), rtol=1e-12)
    assert step.get_feature_names_out()[:4].tolist() == ["mean_axis0", "mean_axis1", "mean_axis2", "std_axis0"]


@pytest.mark.parametrize("step, width, says", [
    (PowerSpectrum(300), 300, "n_fft=300: the FFT length must be a power of two"),
    (MelFilterBank(16000, 64, 40), 33, "n_mels=40 is more mel bands than the 33 FFT bins"),
    (Framer(100, 150), 400, "hop_length=150 is longer than frame_length=100"),
    (MelFilterBank(8000, 64, 24, scale="htk"), 33, "mel band 0 (0.0 to 115.2 Hz) holds no FFT bin"),
    (MelFilterBank(8000, 256, 10, fmax=5000), 129, "fmax=5000"),
    (SensorFeatures(3, 50.0, bands=[(0.1, 0.5)]), 3 * 32, "band (0.1, 0.5) Hz holds no DFT bin of a 32-sample"),
    (SensorFeatures(3, 50.0, bands=[(5, 30)]), 3 * 32, "band (5, 30) Hz: expected 0 <= low < high <= sample_rate"),
    (Window(16, "blackman"), 32, "window='blackman': expected one of 'hann', 'hamming'"),
    (Window(10), 25, "Window: rows of 25 values are not whole frames of frame_length=10"),
    (DCT(10, 12), 10, "n_coefficients=12 is more than the n_inputs=10"),
])
def test_parameters_that_cannot_work_are_refused_by_name(step, width, says):
    with pytest.raises(FrontEndError, match=None) as caught:
        step.fit(np.zeros((2, width)))
    assert says in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_the_mel_refusal_names_the_resolution():
    with pytest.raises(FrontEndError, match=r"bins 125.0 Hz apart\): fewer n_mels, a higher fmin or a longer n_fft"):
        MelFilterBank(8000, 64, 24, scale="htk").fit(np.zeros((1, 33)))
    MelFilterBank(8000, 256, 24, scale="htk").fit(np.zeros((1, 129)))  # 31.25 Hz bins resolve them


@pytest.mark.parametrize("step", [Framer(1, 1), Window(1), PowerSpectrum(4, frame_length=1), Log(), DCT(1, 1),
                                  FrameNormalizer(1), SensorFeatures(1, 10.0, features=("mean", "rms", "peak"))],
                         ids=lambda s: type(s).__name__)
def test_scikit_learns_estimator_checks(step):
    """Configured to read rows of any width (MelFilterBank reads whole spectra only: not applicable)."""
    check_estimator(step)


def test_stream_windows_end_every_hop():
    signal = np.arange(2 * 10.0)  # 10 samples of 2 axes
    windows = stream_windows(signal, 4, 3, 2)
    assert windows[:, 0].tolist() == [0.0, 6.0, 12.0]
    assert windows.shape == (3, 8)
