"""Labelled synthetic signals for the front-end tests: tones in noise (audio) and 3-axis accelerometer windows."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tinycc_ml.features import (
    DCT,
    FrameNormalizer,
    Framer,
    Log,
    MelFilterBank,
    PowerSpectrum,
    SensorFeatures,
    Window,
)

AUDIO_RATE, AUDIO_WINDOW = 8000, 1024
SENSOR_RATE, SENSOR_WINDOW, SENSOR_BANDS = 50.0, 64, [(0.5, 3.0), (3.0, 8.0), (8.0, 25.0)]


def tones(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of AUDIO_WINDOW samples: a tone of 300, 1000 or 1700 Hz (the class) at a random phase, in noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(AUDIO_WINDOW) / AUDIO_RATE
    y = rng.integers(0, 3, n)
    X = np.array([np.sin(2 * np.pi * (300 + 700 * c) * t + rng.uniform(0, 6)) for c in y])
    return X + 0.3 * rng.standard_normal(X.shape), y


def motions(n: int, seed: int = 0, window: int = SENSOR_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``window`` 3-axis samples (interleaved): rest, walking (2 Hz sway) or shaking (10 Hz), gravity on z."""
    rng = np.random.default_rng(seed)
    t = np.arange(window) / SENSOR_RATE
    y = rng.integers(0, 3, n)
    rows = []
    for c in y:
        freq, amplitude = [(0.0, 0.0), (2.0, 2.0), (10.0, 1.5)][c]
        phase = rng.uniform(0, 2 * np.pi, 3)
        axes = amplitude * np.sin(2 * np.pi * freq * t[:, None] + phase) + 0.4 * rng.standard_normal((window, 3))
        rows.append((axes + [0.0, 0.0, 9.81]).ravel())
    return np.array(rows), y


def mfcc_pipeline(X, y):
    return make_pipeline(Framer(256, 128), Window(256), PowerSpectrum(256), MelFilterBank(AUDIO_RATE, 256, 20),
                         Log(), DCT(20, 10), FrameNormalizer(10), LogisticRegression(max_iter=3000)).fit(X, y)


def sensor_pipeline(X, y, model: str = "forest"):
    last = {"forest": lambda: RandomForestClassifier(12, max_depth=6, random_state=0),
            "nb": GaussianNB, "scaled_logistic": lambda: make_pipeline(StandardScaler(), LogisticRegression())}[model]
    steps = [SensorFeatures(3, SENSOR_RATE, bands=SENSOR_BANDS)]
    if model == "scaled_logistic":
        steps += [StandardScaler(), LogisticRegression(max_iter=2000)]
    else:
        steps.append(last())
    return make_pipeline(*steps).fit(X, y)
