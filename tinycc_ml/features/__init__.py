"""Front ends: scikit-learn transformers from raw samples to a model's features, compiled with the model.

Put them first in a ``Pipeline`` before any supported model; ``tinycc_ml.compile(pipeline)`` then gives one C
entry point taking the raw samples (float builds), and ``<name>_feed`` for streams (see docs/guide/front_ends.md).
Every step's conventions are stated in its docstring against scipy, librosa and python_speech_features.
"""

from tinycc_ml.features.base import FrontEndStep
from tinycc_ml.features.sensor import STATISTICS, SensorFeatures
from tinycc_ml.features.spec import load_front_end, save_front_end
from tinycc_ml.features.spectral import (
    DCT,
    FrameNormalizer,
    Framer,
    Log,
    MelFilterBank,
    PowerSpectrum,
    Window,
    hz_to_mel,
    mel_to_hz,
)
from tinycc_ml.features.stream import stream_windows

__all__ = ["DCT", "STATISTICS", "FrameNormalizer", "Framer", "FrontEndStep", "Log", "MelFilterBank",
           "PowerSpectrum", "SensorFeatures", "Window", "hz_to_mel", "load_front_end", "mel_to_hz", "save_front_end",
           "stream_windows"]
