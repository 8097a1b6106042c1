"""Features of a multi-axis sensor window (an accelerometer's x, y, z): statistics, RMS, peak, zero crossings and
spectral power in frequency bands, per axis."""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import FrontEndError
from tinycc_ml.features.base import (
    FrontEndStep,
    concatenate,
    elementwise,
    mean_over,
    need_choice,
    need_int,
    need_positive,
    per_frame_linear,
    reduce,
    reshape,
)
from tinycc_ml.ir.graph import Graph

# the most cos and sin values the bands' DFT rows may take (4 KB of float32) before a 2^k window takes the FFT
DFT_ROWS_MAX = 1024
STATISTICS = ("mean", "std", "min", "max", "rms", "peak", "zero_crossings")


class SensorFeatures(FrontEndStep):
    """A window of N samples of ``n_axes`` axes, interleaved as sensors deliver them (x0, y0, z0, x1, ...), to
    features per axis, in the order of ``features`` (each one value per axis), then the band powers (per band,
    one value per axis):

    - "mean", "std" (population, ddof=0), "min", "max" of each axis;
    - "rms": sqrt(mean(x^2)); "peak": max |x|;
    - "zero_crossings": how many neighbouring samples lie on different sides of zero (a sample >= 0 counts as
      above: librosa's ``zero_crossings(zero_pos=True)``), of the axis less its mean when ``center`` (an
      accelerometer axis carrying gravity crosses its mean, not zero);
    - ``bands``: (low, high) pairs in Hz; each band's power is the share of mean(x^2) its DFT bins carry
      (Parseval): sum over the bins k with low <= k * sample_rate / N < high of c_k |X_k|^2 / N^2, X =
      ``scipy.fft.rfft(axis)``, c_k = 1 for the DC and Nyquist bins and 2 for the others (the bins of all bands
      of [0, sample_rate / 2] sum to mean(x^2)). Any N: compiled as a mat-vec of the bands' DFT rows, or, when
      those rows would be many and N is 2^k, with the real FFT.

    Refused by name: a band with low >= high, beyond sample_rate / 2, or holding no DFT bin (N / sample_rate too
    short a window to resolve it)."""

    def __init__(self, n_axes: int = 3, sample_rate: float = 50.0, features=STATISTICS, bands=(),
                 center: bool = True):
        self.n_axes, self.sample_rate, self.features, self.bands, self.center = (n_axes, sample_rate, features,
                                                                                  bands, center)

    def values_per_sample(self) -> int:
        return int(self.n_axes)

    def check_params(self) -> None:
        need_int("n_axes", self.n_axes)
        rate = need_positive("sample_rate", self.sample_rate)
        need_choice("center", self.center, (True, False))
        names = list(self.features)
        for name in names:
            need_choice("features", name, STATISTICS)
        if len(set(names)) != len(names) or not (names or len(self.bands)):
            raise FrontEndError(f"features={tuple(names)!r}: expected distinct names of {', '.join(STATISTICS)} "
                                "(or bands)")
        for band in self.bands:
            if len(band) != 2 or not all(isinstance(f, (int, float, np.number)) and np.isfinite(f) for f in band):
                raise FrontEndError(f"bands: {band!r} is not a (low, high) pair of frequencies in Hz")
            low, high = (float(f) for f in band)
            if not 0 <= low < high <= rate / 2:
                raise FrontEndError(f"band ({low:g}, {high:g}) Hz: expected 0 <= low < high <= sample_rate / 2 = "
                                    f"{rate / 2:g}")

    def n_samples(self, width: int) -> int:
        axes = int(self.n_axes)
        if width % axes or width < 2 * axes:
            raise FrontEndError(f"SensorFeatures: rows of {width} feature(s) are not a window of 2 or more samples of "
                                f"n_axes={axes}")
        return width // axes

    def output_width(self, width: int) -> int:
        n = self.n_samples(width)
        self.band_weights(n)  # refuses a band no bin of an n-sample window falls in
        return (len(self.features) + len(self.bands)) * int(self.n_axes)

    def band_bins(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The DFT bins some band reads, and (n_bands, len(bins)) weights c_k / N^2 of their |X_k|^2."""
        freqs = float(self.sample_rate) * (np.arange(n // 2 + 1) / n)  # the Nyquist bin at exactly rate / 2
        inside = np.array([(freqs >= lo) & (freqs < hi) for lo, hi in self.bands], dtype=bool).reshape(-1, len(freqs))
        for i, row in enumerate(inside):
            if not row.any():
                lo, hi = self.bands[i]
                raise FrontEndError(f"band ({lo:g}, {hi:g}) Hz holds no DFT bin of a {n}-sample window at "
                                    f"sample_rate={float(self.sample_rate):g} (bins {self.sample_rate / n:.3g} Hz "
                                    "apart): a wider band or a longer window")
        bins = np.flatnonzero(inside.any(axis=0))
        c = np.where((bins == 0) | ((n % 2 == 0) & (bins == n // 2)), 1.0, 2.0) / float(n) ** 2
        return bins, inside[:, bins] * c[None, :]

    def band_weights(self, n: int):
        return self.band_bins(n) if len(self.bands) else None

    def transform_rows(self, X):
        n, axes = self.n_samples(X.shape[1]), int(self.n_axes)
        x = X.reshape(len(X), n, axes)
        parts = []
        for name in self.features:
            if name == "mean":
                parts.append(x.mean(axis=1))
            elif name == "std":
                parts.append(x.std(axis=1))
            elif name == "min":
                parts.append(x.min(axis=1))
            elif name == "max":
                parts.append(x.max(axis=1))
            elif name == "rms":
                parts.append(np.sqrt((x ** 2).mean(axis=1)))
            elif name == "peak":
                parts.append(np.abs(x).max(axis=1))
            else:
                above = (x - x.mean(axis=1, keepdims=True) if self.center else x) >= 0
                parts.append(np.sum(above[:, 1:] != above[:, :-1], axis=1).astype(np.float64))
        if len(self.bands):
            bins, weights = self.band_bins(n)
            spectrum = np.fft.rfft(x, axis=1)[:, bins, :]  # (rows, bins, axes)
            power = np.einsum("bk,rka->rba", weights, np.abs(spectrum) ** 2)
            parts.extend(power[:, b, :] for b in range(len(self.bands)))
        return np.concatenate(parts, axis=1)

    def get_feature_names_out(self, input_features=None):
        axes = [f"axis{a}" for a in range(int(self.n_axes))]
        names = [f"{feature}_{axis}" for feature in self.features for axis in axes]
        names += [f"power_{lo:g}_{hi:g}Hz_{axis}" for lo, hi in self.bands for axis in axes]
        return np.asarray(names, dtype=object)

    def lower(self, g: Graph, x: str) -> str:
        return self.lower_scaled(g, x, None)

    def lower_scaled(self, g: Graph, x: str, factors) -> str:
        n, axes = self.n_samples(self.n_features_in_), int(self.n_axes)
        samples = reshape(g, x, [n, axes])
        cache: dict[str, str] = {}

        def mean():
            if "mean" not in cache:
                cache["mean"] = mean_over(g, samples, 0)
            return cache["mean"]

        def centred():
            if "centred" not in cache:
                cache["centred"] = g.add("tensor_sub", [samples, mean()], {"activation": "none"}, name="centred")
            return cache["centred"]

        parts = []
        for name in self.features:
            if name == "mean":
                parts.append(mean())
            elif name == "std":
                parts.append(elementwise(g, "sqrt", mean_over(g, elementwise(g, "square", centred()), 0)))
            elif name in ("min", "max"):
                parts.append(reduce(g, f"reduce_{name}", samples, 0))
            elif name == "rms":
                parts.append(elementwise(g, "sqrt", mean_over(g, elementwise(g, "square", samples), 0)))
            elif name == "peak":
                parts.append(reduce(g, "reduce_max", elementwise(g, "abs", samples), 0))
            else:
                parts.append(g.add("zero_crossings", [centred() if self.center else samples], name="crossings"))
        if len(self.bands):
            parts.append(self._lower_bands(g, samples, n, axes))
        return concatenate(g, parts, factors)

    def _lower_bands(self, g: Graph, samples: str, n: int, axes: int) -> str:
        """Per axis: the spectrum's |X_k|^2 at the bands' bins, weighted by band: the DFT of the bands' bins alone
        (their cos and sin rows, one mat-vec: the least RAM) while those rows are at most DFT_ROWS_MAX values, else,
        for a window of 2^k samples, the real FFT (kissfft's float FFT: O(N log N), N twiddles stored)."""
        bins, weights = self.band_bins(n)
        per_axis = g.add("transpose", [samples], {"perm": [1, 0]}, name="axes_first")
        if n >= 4 and n & (n - 1) == 0 and 2 * len(bins) * n > DFT_ROWS_MAX:
            squares = g.add("power_spectrum", [per_axis], {"fft_length": n}, name="power")  # (axes, bins)
            every_bin = np.zeros((len(self.bands), n // 2 + 1))
            every_bin[:, bins] = weights
            power = per_frame_linear(g, squares, axes, every_bin, "band_weights")
        else:
            angle = 2.0 * np.pi * np.outer(bins, np.arange(n)) / n
            dft = np.concatenate([np.cos(angle), np.sin(angle)])  # (2 bins, n): re and -im of each bin
            squares = elementwise(g, "square", per_frame_linear(g, per_axis, axes, dft, "band_dft"))
            power = per_frame_linear(g, squares, axes, np.concatenate([weights, weights], axis=1), "band_weights")
        return g.add("transpose", [reshape(g, power, [axes, len(self.bands)])], {"perm": [1, 0]}, name="bands_first")
