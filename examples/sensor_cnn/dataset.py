"""A synthetic accelerometer data set (numpy only; no real recordings): windows of 128 samples of the three
axes at 50 Hz, each one of four activities. It is generated, not measured: a fixed seed gives the same
rows on every machine, so the example and the tests need no download.

- still: gravity along a random direction, sensor noise
- walk: gravity, a periodic movement at 1.4-2.3 Hz with a harmonic, amplitude 0.25-0.6 g
- run: as walk at 2.1-3.3 Hz, amplitude 0.5-1.1 g (it overlaps walk a little: not every row is easy)
- shake: bursts of 5-9 Hz movement, amplitude 0.3-0.9 g
"""

from __future__ import annotations

import numpy as np

CLASSES = ("still", "walk", "run", "shake")
AXES, SAMPLES, RATE = 3, 128, 50.0


def _direction(rng) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def make_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` windows (n, 3, 128) float32 in g, and their labels (n,) in 0..3, balanced."""
    rng = np.random.default_rng(seed)
    t = np.arange(SAMPLES) / RATE
    X = np.empty((n, AXES, SAMPLES), dtype=np.float32)
    y = np.arange(n) % len(CLASSES)
    rng.shuffle(y)
    for i, label in enumerate(y):
        window = _direction(rng)[:, None] * np.ones(SAMPLES)  # gravity
        noise = 0.05
        if label in (1, 2):
            freq = rng.uniform(1.4, 2.3) if label == 1 else rng.uniform(2.1, 3.3)
            amp = rng.uniform(0.25, 0.6) if label == 1 else rng.uniform(0.5, 1.1)
            phase = rng.uniform(0, 2 * np.pi)
            wave = np.sin(2 * np.pi * freq * t + phase) + 0.35 * np.sin(4 * np.pi * freq * t + 2 * phase)
            window += amp * _direction(rng)[:, None] * wave
            noise = 0.1
        elif label == 3:
            freq = rng.uniform(5.0, 9.0)
            envelope = (np.sin(2 * np.pi * rng.uniform(0.4, 1.0) * t + rng.uniform(0, 2 * np.pi)) > 0).astype(float)
            window += rng.uniform(0.3, 0.9) * _direction(rng)[:, None] * envelope * np.sin(2 * np.pi * freq * t)
            noise = 0.08
        X[i] = window + rng.normal(scale=noise, size=window.shape)
    return X, y.astype(np.int64)
