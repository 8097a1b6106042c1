"""Small networks after a log-mel front end, for ``compile(network, front_end=...)``: a TFLite int8 CNN (the
test builder's, random int8 weights) and a float ONNX CNN, both on (frames x mel bins) of 8 kHz tones in noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.pipeline import make_pipeline

from tests.tflite_builder import NetBuilder
from tinycc_ml.features import Framer, Log, MelFilterBank, PowerSpectrum, Window

AUDIO_RATE, FRAME, HOP, MELS = 8000, 256, 128, 16
FEATURE_SCALE = 0.08  # the int8 network's input step: log-mel values of the tones span about [-5, 5]


def log_mel(X) -> object:
    """A fitted log-mel front end: 7 frames of 16 mel bins from rows of 1024 samples."""
    return make_pipeline(Framer(FRAME, HOP), Window(FRAME), PowerSpectrum(FRAME),
                         MelFilterBank(AUDIO_RATE, FRAME, MELS), Log()).fit(X)


def int8_cnn(path: Path, frames: int = 7, seed: int = 1) -> bytes:
    """A TFLite int8 CNN on (1, frames, MELS, 1): conv 3x3 + relu, fully connected to 3 classes, softmax."""
    net = NetBuilder(seed=seed)
    x = net.input((frames, MELS, 1), scale=FEATURE_SCALE, zero_point=-2)
    h = net.conv(x, 4, (3, 3), padding="same", activation="relu")
    data = net.finish(net.softmax(net.fc(net.flatten(h), 3)))
    path.write_bytes(data)
    return data


def float_cnn(path: Path, frames: int = 7, seed: int = 0) -> list[int]:
    """A float ONNX CNN on (1, 1, frames, MELS): conv 3x3 + relu, global average pool, Gemm to 3 classes.
    Returns its input shape."""
    from onnx import helper

    from tests.onnx_oracle import _init, _save

    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    inits = [_init("cw", rng.normal(size=(4, 1, 3, 3))), _init("cb", rng.normal(size=4)),
             _init("fw", rng.normal(size=(3, 4))), _init("fb", rng.normal(size=3))]
    shape = [1, 1, frames, MELS]
    _save(path, nodes, inits, shape, "y")
    return shape
