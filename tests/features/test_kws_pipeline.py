"""The keyword-spotting pipeline of benchmarks/kws_pipeline.py (docs/tutorials/kws-m4.md) at a small size: the
committed synthetic 16 kHz clips and the log-mel front end before the committed Keras CNN (.tflite, float and int8:
scripts/train_keyword_cnn.py) and before a scikit-learn MLP trained here (an ONNX file); each build deciding as the
Python pipeline (tflite-micro or onnxruntime on the front end's features) on held-out voices, and the Cortex-M4 build
fed 20 ms chunks of a stream of spoken keywords in QEMU deciding as the host's stream and as predict on every
window."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.features import stream_windows

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "kws_pipeline.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("kws_pipeline", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_clips_are_what_the_readme_says():
    data = np.load(BENCHMARK.parents[1] / "data" / "keywords" / "keywords.npz")
    assert data["clips"].shape == (90, 16000) and data["clips"].dtype == np.int16 and int(data["rate"]) == 16000
    assert data["words"].tolist() == ["yes", "no", "up", "down", "left", "right"]
    assert np.bincount(data["labels"]).tolist() == [15] * 6 and len(set(data["voices"].tolist())) == 15
    assert np.all(np.abs(data["clips"]).max(axis=1) > 5000)  # every clip holds a spoken word


def test_the_float_keyword_build_decides_as_the_python_pipeline(tmp_path):
    require_target("host")
    kws = _benchmark()
    X, y = kws.keyword_rows(8, slice(0, -kws.HELD_OUT), seed=0)
    X_test, y_test = kws.keyword_rows(4, slice(-kws.HELD_OUT, None), seed=1)
    front = kws.log_mel_front_end(X)
    kws.keyword_network(front.transform(X), y, tmp_path / "keywords.onnx", hidden=16)
    python = kws.onnxruntime_labels(tmp_path / "keywords.onnx", front.transform(X_test))
    predictor = tinycc_ml.compile(tmp_path / "keywords.onnx", front_end=front, name="kws").load()
    assert predictor.predict(X_test).tolist() == python.tolist()
    assert np.mean(python == y_test) >= 0.8  # held-out voices: the network learnt the words, not the voices


def test_the_keyword_cnn_builds_decide_as_tflite_micro(tmp_path):
    """The committed CNN after the front end: the float file's build decides as tflite-micro on the float64
    features, the int8 file's as tflite-micro on them quantised (the C's float32 features round alike away from a
    quantisation boundary: every row here), and both learnt the words (held-out voices)."""
    require_target("host")
    kws = _benchmark()
    X_test, y_test = kws.keyword_rows(2, slice(-kws.HELD_OUT, None), seed=1)
    front = kws.log_mel_front_end(X_test)
    features = front.transform(X_test)
    for name in ("keyword_cnn.tflite", "keyword_cnn_int8.tflite"):
        path = kws.DATA.parent / name
        python = kws.tflite_micro_labels(path, features)
        predictor = tinycc_ml.compile(path, front_end=front, name="kws").load()
        assert predictor.predict(X_test).tolist() == python.tolist(), name
        assert np.mean(python == y_test) >= 0.85, name


def _stream_of_words(kws, clips: int) -> np.ndarray:
    """Held-out voices' words one after another with 0.25 s of quiet noise between them, as int16 counts."""
    data = np.load(kws.DATA)
    rng = np.random.default_rng(3)
    words = data["clips"][-clips:].astype(np.float64)  # the last word's held-out voices
    gap = np.zeros(kws.RATE // 4)
    parts = [part for word in words for part in (word, gap)]
    signal = np.concatenate(parts)
    signal = signal + rng.standard_normal(len(signal)) * 30.0
    return np.clip(np.round(signal), -32768, 32767).astype(np.int16)


STREAM_MAIN = """\
/* feeds stream_samples to kws_feed_i16 in 20 ms chunks (320 samples at 16 kHz), printing each decision */
#include <stdint.h>
#include "board.h"
#include "kws.h"
#include "stream.h"

int main(void)
{
    int decisions[2];
    board_init();
    for (long at = 0; at + 320 <= STREAM_SAMPLES; at += 320) {
        const int made = kws_feed_i16(stream_samples + at, 320, decisions);
        for (int d = 0; d < made; ++d) {
            char text[3] = {(char)('0' + decisions[d]), ' ', 0};
            board_print(text);
        }
    }
    board_print("end\\r\\n");
    board_exit(0);
    return 0;
}
"""


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_the_m4_keyword_stream_in_20_ms_chunks_decides_as_the_host(sim_target, tmp_path):
    """The int8 CNN's build for the Cortex-M4 fed a stream of spoken keywords 20 ms at a time in QEMU: a decision
    every hop once a second has arrived, each the host stream's and predict's on that window; the window holding a
    whole word decides that word."""
    kws = _benchmark()
    samples = _stream_of_words(kws, 2)
    front = kws.log_mel_front_end(samples[None, :kws.CLIP].astype(np.float64))
    path = kws.DATA.parent / "keyword_cnn_int8.tflite"
    project = tmp_path / "project"
    tinycc_ml.compile(path, target=sim_target, front_end=front, name="kws", layout="project",
                      examples=samples[None, :kws.CLIP].astype(np.float64), out_dir=project)
    (project / "main.c").write_text(STREAM_MAIN)
    values = ", ".join(str(int(v)) for v in samples)
    (project / "stream.h").write_text(f"#define STREAM_SAMPLES {len(samples)}L\n"
                                      f"static const int16_t stream_samples[{len(samples)}] = {{{values}}};\n")
    subprocess.run(["make", "-s", "firmware.elf"], cwd=project, check=True, capture_output=True, timeout=300)
    run = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-display", "none", "-monitor", "none", "-serial",
                          "stdio", "-semihosting-config", "enable=on,target=native", "-kernel", "firmware.elf"],
                         cwd=project, capture_output=True, text=True, timeout=600)
    assert "end" in run.stdout, run.stdout[-500:]
    on_m4 = [int(d) for d in run.stdout.split("end")[0].split()]

    predictor = tinycc_ml.compile(path, front_end=front, name="kws").load()
    predictor.reset()
    usable = len(samples) // kws.HOP * kws.HOP
    on_host = [d for at in range(0, usable, kws.HOP) for d in predictor.feed(samples[at:at + kws.HOP])]
    windows = stream_windows(samples[:usable].astype(np.float64), kws.CLIP, kws.HOP)
    assert on_m4 == on_host == predictor.predict(windows).tolist()
    assert len(on_m4) == 1 + (usable - kws.CLIP) // kws.HOP
    assert on_m4[0] == 5  # the first window is the first clip: "right" in a held-out voice
