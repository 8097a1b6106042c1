"""Audio-style front-end steps: framing, windows, real-FFT spectra, mel filter banks, log, DCT-II (MFCC) and
per-frame normalisation. Each states its conventions against scipy (the float64 reference the tests use) and
against librosa / python_speech_features (not dependencies: which of their options each matches)."""

from __future__ import annotations

import numpy as np
import scipy.fft
import scipy.signal

from tinycc_ml.errors import FrontEndError
from tinycc_ml.features.base import (
    FrontEndStep,
    add_const,
    elementwise,
    flat,
    frames_of,
    mean_over,
    need_choice,
    need_int,
    need_positive,
    need_power_of_two,
    per_frame_linear,
    reshape,
)
from tinycc_ml.ir.graph import Graph

WINDOWS = ("hann", "hamming")
SCALES = ("htk", "slaney")


class Framer(FrontEndStep):
    """Frames of ``frame_length`` samples every ``hop_length`` samples: a row of N samples gives
    ``1 + (N - frame_length) // hop_length`` frames, one after another; samples after the last whole frame are
    dropped. librosa: ``librosa.util.frame(y, frame_length, hop_length)`` and ``stft(..., center=False)`` (no
    padding); python_speech_features pads a last partial frame with zeros instead (not matched)."""

    def __init__(self, frame_length: int = 256, hop_length: int = 128):
        self.frame_length, self.hop_length = frame_length, hop_length

    def check_params(self) -> None:
        length = need_int("frame_length", self.frame_length)
        hop = need_int("hop_length", self.hop_length)
        if hop > length:
            raise FrontEndError(f"hop_length={hop} is longer than frame_length={length}: samples between frames "
                                "would never be read")

    def output_width(self, width: int) -> int:
        if width < self.frame_length:
            raise FrontEndError(f"Framer: rows of {width} samples are shorter than frame_length={self.frame_length}")
        return self.n_frames(width) * self.frame_length

    def n_frames(self, width: int) -> int:
        return 1 + (width - self.frame_length) // self.hop_length

    def indices(self) -> np.ndarray:
        starts = np.arange(self.n_frames(self.n_features_in_)) * self.hop_length
        return (starts[:, None] + np.arange(self.frame_length)[None, :]).ravel()

    def transform_rows(self, X):
        return X[:, self.indices()]

    def lower(self, g: Graph, x: str) -> str:
        return g.add("take", [x], {"axis": 0, "indices": self.indices().tolist()}, name="frames")


def window_values(window: str, length: int, periodic: bool) -> np.ndarray:
    """scipy.signal.get_window(window, length, fftbins=periodic): periodic (the DFT-even window, librosa's and
    TensorFlow's default) or symmetric (numpy's np.hanning / np.hamming)."""
    return scipy.signal.get_window(window, length, fftbins=periodic)


class Window(FrontEndStep):
    """Each frame of ``frame_length`` samples times a window: ``window`` "hann" or "hamming" (0.54 - 0.46 cos),
    ``periodic`` True for the periodic window (scipy's ``fftbins=True``; librosa's ``stft`` windows are periodic,
    as TensorFlow's ``tf.signal.hann_window(periodic=True)``) or False for the symmetric one (scipy's
    ``fftbins=False``, numpy's ``np.hanning``; python_speech_features' ``winfunc=np.hamming``)."""

    def __init__(self, frame_length: int = 256, window: str = "hann", periodic: bool = True):
        self.frame_length, self.window, self.periodic = frame_length, window, periodic

    def check_params(self) -> None:
        need_int("frame_length", self.frame_length)
        need_choice("window", self.window, WINDOWS)
        need_choice("periodic", self.periodic, (True, False))

    def output_width(self, width: int) -> int:
        frames_of(self, width, self.frame_length)
        return width

    def values(self) -> np.ndarray:
        return window_values(self.window, self.frame_length, bool(self.periodic))

    def transform_rows(self, X):
        return (X.reshape(len(X), -1, self.frame_length) * self.values()).reshape(len(X), -1)

    def lower(self, g: Graph, x: str) -> str:
        frames = frames_of(self, self.n_features_in_, self.frame_length)
        w = add_const(g, "window", self.values())
        return flat(g, g.add("tensor_mul", [reshape(g, x, [frames, self.frame_length]), w], {"activation": "none"},
                             name="windowed"))


class PowerSpectrum(FrontEndStep):
    """Per frame of ``frame_length`` samples (default ``n_fft``; shorter frames are zero-padded to ``n_fft``): the
    ``n_fft // 2 + 1`` bins of the real FFT (``scipy.fft.rfft(frame, n_fft)``), as ``|X|**power``: ``power=2``
    the power spectrum, ``power=1`` the magnitude. Unnormalised, as librosa's ``np.abs(stft(...))**power``;
    python_speech_features' ``powspec`` is this power spectrum divided by ``n_fft``. The compiled FFT is
    kissfft's float real FFT (TFLite Micro's signal RFFT), which agrees with scipy to float32 rounding; the integer
    builds' a block-scaled q15 kissfft (the ``power_spectrum`` op)."""

    def __init__(self, n_fft: int = 256, frame_length: int | None = None, power: float = 2.0):
        self.n_fft, self.frame_length, self.power = n_fft, frame_length, power

    def length(self) -> int:
        return self.n_fft if self.frame_length is None else self.frame_length

    def check_params(self) -> None:
        n_fft = need_power_of_two("n_fft", self.n_fft)
        length = need_int("frame_length", self.length())
        if length > n_fft:
            raise FrontEndError(f"frame_length={length} is longer than n_fft={n_fft}: the FFT would drop samples")
        need_choice("power", self.power, (1, 2, 1.0, 2.0))

    def output_width(self, width: int) -> int:
        return frames_of(self, width, self.length()) * (self.n_fft // 2 + 1)

    def transform_rows(self, X):
        frames = X.reshape(len(X), -1, self.length())
        return (np.abs(scipy.fft.rfft(frames, n=self.n_fft, axis=-1)) ** float(self.power)).reshape(len(X), -1)

    def lower(self, g: Graph, x: str) -> str:
        frames = frames_of(self, self.n_features_in_, self.length())
        power = g.add("power_spectrum", [reshape(g, x, [frames, self.length()])], {"fft_length": self.n_fft},
                      name="power")  # (frames, bins)
        return flat(g, power if float(self.power) == 2.0 else elementwise(g, "sqrt", power))


def hz_to_mel(hz, scale: str):
    """HTK: 2595 log10(1 + f / 700). Slaney (the Auditory Toolbox's, librosa's default): linear below 1 kHz
    (f / (200 / 3)), logarithmic above (15 + 27 ln(f / 1000) / ln 6.4)."""
    hz = np.asarray(hz, dtype=np.float64)
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + hz / 700.0)
    step, knee, log_step = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    return np.where(hz >= knee, knee / step + np.log(np.maximum(hz, knee) / knee) / log_step, hz / step)


def mel_to_hz(mel, scale: str):
    mel = np.asarray(mel, dtype=np.float64)
    if scale == "htk":
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    step, knee, log_step = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    return np.where(mel >= knee / step, knee * np.exp(log_step * (mel - knee / step)), mel * step)


class MelFilterBank(FrontEndStep):
    """Per frame of ``n_fft // 2 + 1`` spectrum bins: ``n_mels`` triangular filters, centres equally spaced on the
    mel ``scale`` ("htk" or "slaney") between ``fmin`` and ``fmax`` (default sample_rate / 2), each rising from its
    left neighbour's centre to its own and falling to its right neighbour's, evaluated at the bins' frequencies
    k * sample_rate / n_fft; ``norm="slaney"`` divides each filter by half its band width in Hz (equal area),
    ``norm=None`` leaves peaks of 1. This is librosa's ``filters.mel(sr, n_fft, n_mels, fmin, fmax, htk=scale ==
    "htk", norm=norm)`` (its defaults: scale "slaney", norm "slaney"). python_speech_features' ``get_filterbanks``
    (HTK scale, filter edges rounded to whole bins) is not matched. Refused by name: more mel bands than FFT bins,
    fmax above sample_rate / 2, and a band holding no FFT bin (a sample rate / n_fft too coarse for it)."""

    def __init__(self, sample_rate: float = 16000.0, n_fft: int = 512, n_mels: int = 40, fmin: float = 0.0,
                 fmax: float | None = None, scale: str = "slaney", norm: str | None = "slaney"):
        self.sample_rate, self.n_fft, self.n_mels = sample_rate, n_fft, n_mels
        self.fmin, self.fmax, self.scale, self.norm = fmin, fmax, scale, norm

    def top(self) -> float:
        return self.sample_rate / 2.0 if self.fmax is None else float(self.fmax)

    def check_params(self) -> None:
        rate = need_positive("sample_rate", self.sample_rate)
        n_fft = need_power_of_two("n_fft", self.n_fft)
        n_mels = need_int("n_mels", self.n_mels)
        need_choice("scale", self.scale, SCALES)
        need_choice("norm", self.norm, ("slaney", None))
        bins = n_fft // 2 + 1
        if n_mels > bins:
            raise FrontEndError(f"n_mels={n_mels} is more mel bands than the {bins} FFT bins of n_fft={n_fft}")
        if isinstance(self.fmin, bool) or not isinstance(self.fmin, (int, float, np.number)) or self.fmin < 0:
            raise FrontEndError(f"fmin={self.fmin!r}: expected a number >= 0")
        top = need_positive("fmax", self.top())
        if top > rate / 2 or top <= self.fmin:
            raise FrontEndError(f"fmax={top}: expected fmin={self.fmin} < fmax <= sample_rate / 2 = {rate / 2}")
        empty = np.flatnonzero(~self.weights().any(axis=1))
        if empty.size:
            edges = self.edges()
            i = int(empty[0])
            raise FrontEndError(f"mel band {i} ({edges[i]:.1f} to {edges[i + 2]:.1f} Hz) holds no FFT bin at "
                                f"sample_rate={rate:g}, n_fft={n_fft} (bins {rate / n_fft:.1f} Hz apart): fewer "
                                "n_mels, a higher fmin or a longer n_fft")

    def edges(self) -> np.ndarray:
        """The n_mels + 2 filter corners in Hz."""
        lo, hi = hz_to_mel(float(self.fmin), self.scale), hz_to_mel(self.top(), self.scale)
        return mel_to_hz(np.linspace(lo, hi, int(self.n_mels) + 2), self.scale)

    def weights(self) -> np.ndarray:
        """(n_mels, n_fft // 2 + 1), float64."""
        edges = self.edges()
        freqs = np.arange(int(self.n_fft) // 2 + 1) * float(self.sample_rate) / int(self.n_fft)
        width = np.diff(edges)
        offsets = edges[:, None] - freqs[None, :]  # corner - bin frequency
        rising = -offsets[:-2] / width[:-1, None]
        falling = offsets[2:] / width[1:, None]
        weights = np.maximum(0.0, np.minimum(rising, falling))
        if self.norm == "slaney":
            weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
        return weights

    def output_width(self, width: int) -> int:
        return frames_of(self, width, int(self.n_fft) // 2 + 1, "n_fft // 2 + 1") * int(self.n_mels)

    def transform_rows(self, X):
        bins = int(self.n_fft) // 2 + 1
        return (X.reshape(len(X), -1, bins) @ self.weights().T).reshape(len(X), -1)

    def lower(self, g: Graph, x: str) -> str:
        frames = frames_of(self, self.n_features_in_, int(self.n_fft) // 2 + 1, "n_fft // 2 + 1")
        return per_frame_linear(g, x, frames, self.weights(), "mel_weights")


class Log(FrontEndStep):
    """``log(max(x, floor))`` of every value: ``scale="natural"`` the natural log (python_speech_features'
    ``logfbank`` takes ``np.log`` after replacing exact zeros by eps; with floor=eps the two agree wherever the
    values are zero or >= eps), ``scale="db"`` 10 log10 (librosa's ``power_to_db(S, ref=1.0, amin=floor,
    top_db=None)``)."""

    def __init__(self, floor: float = 1e-10, scale: str = "natural"):
        self.floor, self.scale = floor, scale

    def check_params(self) -> None:
        need_positive("floor", self.floor)
        need_choice("scale", self.scale, ("natural", "db"))

    def output_width(self, width: int) -> int:
        return width

    def transform_rows(self, X):
        logs = np.log(np.maximum(X, float(self.floor)))
        return logs * (10.0 / np.log(10.0)) if self.scale == "db" else logs

    def lower(self, g: Graph, x: str) -> str:
        top = float(np.finfo(np.float32).max)  # max(x, floor) for every finite x
        floored = g.add("clip", [x], {"lo": float(self.floor), "hi": top}, name="floored")
        logs = elementwise(g, "log", floored)
        if self.scale == "db":
            logs = g.add("scale", [logs], {"factor": 10.0 / np.log(10.0)}, name="decibels")
        return logs


def fuses_log_mel(steps) -> bool:
    """Whether ``steps`` (three of them) are a power spectrum, a mel filter bank on its bins and a log, which integer
    builds compute as one ``log_mel_power`` op (each frame's block exponent kept up to the log)."""
    if len(steps) != 3:
        return False
    power, mel, log = steps
    return (isinstance(power, PowerSpectrum) and isinstance(mel, MelFilterBank) and isinstance(log, Log)
            and float(power.power) == 2.0 and int(power.n_fft) == int(mel.n_fft))


def lower_log_mel(g: Graph, x: str, power: PowerSpectrum, mel: MelFilterBank, log: Log) -> str:
    """PowerSpectrum -> MelFilterBank -> Log (``fuses_log_mel``) as the fused ``log_mel_power`` op: the same values
    as their three lowerings (in float: the op's float semantics are theirs), for integer builds."""
    frames = frames_of(power, power.n_features_in_, power.length())
    logs = flat(g, g.add("log_mel_power", [reshape(g, x, [frames, power.length()])],
                         {"fft_length": int(power.n_fft), "weights": mel.weights(), "floor": float(log.floor)},
                         name="log_mel"))
    if log.scale == "db":
        logs = g.add("scale", [logs], {"factor": 10.0 / np.log(10.0)}, name="decibels")
    return logs


def dct_matrix(n_inputs: int, n_coefficients: int, norm: str | None) -> np.ndarray:
    """(n_coefficients, n_inputs): row k of the DCT-II, ``scipy.fft.dct(x, type=2, norm=norm)[k]`` =
    sum_n x[n] 2 cos(pi k (2n + 1) / (2 N)); "ortho" scales row 0 by sqrt(1 / (4 N)), the others by
    sqrt(1 / (2 N))."""
    n = np.arange(n_inputs)
    k = np.arange(n_coefficients)[:, None]
    matrix = 2.0 * np.cos(np.pi * k * (2 * n + 1) / (2.0 * n_inputs))
    if norm == "ortho":
        matrix[0] *= np.sqrt(1.0 / (4 * n_inputs))
        matrix[1:] *= np.sqrt(1.0 / (2 * n_inputs))
    return matrix


class DCT(FrontEndStep):
    """The first ``n_coefficients`` of the DCT-II of each frame of ``n_inputs`` values (log mel energies: MFCC),
    ``scipy.fft.dct(frame, type=2, norm=norm)[:n_coefficients]``; ``norm="ortho"`` is librosa's
    ``feature.mfcc`` (dct_type=2, norm="ortho") and python_speech_features' ``mfcc`` (before its lifter and its
    appendEnergy, not applied here); ``norm=None`` scipy's unnormalised DCT-II."""

    def __init__(self, n_inputs: int = 40, n_coefficients: int = 13, norm: str | None = "ortho"):
        self.n_inputs, self.n_coefficients, self.norm = n_inputs, n_coefficients, norm

    def check_params(self) -> None:
        n_inputs = need_int("n_inputs", self.n_inputs)
        need_int("n_coefficients", self.n_coefficients)
        need_choice("norm", self.norm, ("ortho", None))
        if self.n_coefficients > n_inputs:
            raise FrontEndError(f"n_coefficients={self.n_coefficients} is more than the n_inputs={n_inputs} values "
                                "each frame has")

    def output_width(self, width: int) -> int:
        return frames_of(self, width, self.n_inputs, "n_inputs") * int(self.n_coefficients)

    def matrix(self) -> np.ndarray:
        return dct_matrix(int(self.n_inputs), int(self.n_coefficients), self.norm)

    def transform_rows(self, X):
        return (X.reshape(len(X), -1, self.n_inputs) @ self.matrix().T).reshape(len(X), -1)

    def lower(self, g: Graph, x: str) -> str:
        frames = frames_of(self, self.n_features_in_, self.n_inputs, "n_inputs")
        return per_frame_linear(g, x, frames, self.matrix(), "dct")


class FrameNormalizer(FrontEndStep):
    """Each frame of ``frame_length`` values less its mean and, with ``with_std``, divided by
    ``sqrt(variance + epsilon)`` (the population variance, ddof=0): a per-frame (cepstral) mean and variance
    normalisation."""

    def __init__(self, frame_length: int = 13, with_std: bool = True, epsilon: float = 1e-8):
        self.frame_length, self.with_std, self.epsilon = frame_length, with_std, epsilon

    def check_params(self) -> None:
        need_int("frame_length", self.frame_length)
        need_choice("with_std", self.with_std, (True, False))
        need_positive("epsilon", self.epsilon)

    def output_width(self, width: int) -> int:
        frames_of(self, width, self.frame_length)
        return width

    def integer_refusal(self) -> str | None:
        if self.with_std:
            return "with_std=True divides by each frame's spread (1 / sqrt), which has no fixed-point form"
        return None

    def transform_rows(self, X):
        frames = X.reshape(len(X), -1, self.frame_length)
        centred = frames - frames.mean(axis=2, keepdims=True)
        if self.with_std:
            centred = centred / np.sqrt((centred ** 2).mean(axis=2, keepdims=True) + float(self.epsilon))
        return centred.reshape(len(X), -1)

    def lower(self, g: Graph, x: str) -> str:
        frames = frames_of(self, self.n_features_in_, self.frame_length)
        rows = reshape(g, x, [frames, self.frame_length])
        centred = g.add("tensor_sub", [rows, mean_over(g, rows, 1, keep=True)], {"activation": "none"},
                        name="centred")
        if self.with_std:
            variance = mean_over(g, elementwise(g, "square", centred), 1, keep=True)
            epsilon = add_const(g, "epsilon", np.full(g.type(variance).shape, float(self.epsilon)))
            spread = elementwise(g, "rsqrt", g.add("tensor_add", [variance, epsilon], {"activation": "none"},
                                                   name="variance"))
            centred = g.add("tensor_mul", [centred, spread], {"activation": "none"}, name="normalised")
        return flat(g, centred)
