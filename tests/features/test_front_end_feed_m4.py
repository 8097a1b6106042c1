"""<name>_feed on the Cortex-M4 (MPS2 AN386 in QEMU): a firmware built from the project layout's start-up, board and
linker script feeds a stored stream of raw int16 samples in chunks of uneven sizes (one sample, more than a window)
to ``<name>_feed_i16`` and prints each decision; they are the host's ``predictor.feed`` decisions on the same
chunks, and the Python reference's (the front end's transform, tflite-micro) on every window whose features are
clear of the input quantisation's rounding boundaries."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import tinycc_ml
from tests.features.front_end_data import tones
from tests.features.front_end_networks import int8_cnn, log_mel
from tests.features.test_front_end_network import clear_rows, reference_int8
from tinycc_ml.features import stream_windows

CHUNKS = [1, 1, 160, 2000, 7, 333, 128, 1, 1024, 90]  # 3745 samples: one at a time, hops, more than a window

FEED_MAIN = """\
/* feeds stream_samples to kws_feed_i16 in the chunks of stream_chunks, printing each decision */
#include <stdint.h>
#include "board.h"
#include "kws.h"
#include "stream.h"

static void print_int(int v)
{
    char text[12];
    char *p = text + sizeof text - 1;
    *p = 0;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    board_print(p);
}

int main(void)
{
    static int decisions[STREAM_MOST_DECISIONS];
    long at = 0;
    board_init();
    for (int k = 0; k < STREAM_CHUNKS; ++k) {
        const int made = kws_feed_i16(stream_samples + at, stream_chunks[k], decisions);
        at += stream_chunks[k];
        for (int d = 0; d < made; ++d) {
            board_print("decision ");
            print_int(decisions[d]);
            board_print("\\r\\n");
        }
    }
    board_print("end\\r\\n");
    board_exit(0);
    return 0;
}
"""


def stream_header(samples: np.ndarray) -> str:
    values = ", ".join(str(int(v)) for v in samples)
    return (f"#define STREAM_CHUNKS {len(CHUNKS)}\n#define STREAM_MOST_DECISIONS {max(CHUNKS) // 128 + 1}\n"
            f"static const int16_t stream_samples[{len(samples)}] = {{{values}}};\n"
            f"static const long stream_chunks[{len(CHUNKS)}] = {{{', '.join(map(str, CHUNKS))}}};\n")


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_the_m4_stream_decides_as_the_host_and_the_reference(sim_target, tmp_path):
    X, _ = tones(60)
    X = np.round(X * 3000)  # int16 counts
    front = log_mel(X)
    data = int8_cnn(tmp_path / "kws.tflite")
    samples = np.round(tones(4, seed=9)[0].ravel()[:sum(CHUNKS)] * 3000).astype(np.int16)
    project = tmp_path / "project"
    tinycc_ml.compile(tmp_path / "kws.tflite", target=sim_target, front_end=front, name="kws", layout="project",
                      examples=X[:4], out_dir=project)
    (project / "main.c").write_text(FEED_MAIN)
    (project / "stream.h").write_text(stream_header(samples))
    subprocess.run(["make", "-s", "firmware.elf"], cwd=project, check=True, capture_output=True, timeout=300)
    run = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-display", "none", "-monitor", "none", "-serial",
                          "stdio", "-semihosting-config", "enable=on,target=native", "-kernel", "firmware.elf"],
                         cwd=project, capture_output=True, text=True, timeout=300)
    lines = run.stdout.replace("\r", "").split("\n")
    assert "end" in lines, run.stdout[-500:]
    on_m4 = [int(line.split()[1]) for line in lines if line.startswith("decision ")]

    predictor = tinycc_ml.compile(tmp_path / "kws.tflite", front_end=front, name="kws").load()
    predictor.reset()
    bounds = np.cumsum(CHUNKS)[:-1]
    on_host = [d for chunk in np.split(samples, bounds) for d in predictor.feed(chunk)]
    windows = stream_windows(samples.astype(np.float64), 1024, 128)
    assert on_m4 == on_host and len(on_m4) == len(windows) == 1 + (len(samples) - 1024) // 128
    clear = clear_rows(front.transform(windows))
    assert clear.sum() >= len(windows) - 2
    assert np.array(on_m4)[clear].tolist() == np.argmax(reference_int8(front, data, windows[clear]), axis=1).tolist()


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_an_int16_m4_stream_on_the_codes_decides_as_the_host_feed_on_float_samples(sim_target, tmp_path):
    """An int16 frame-stack build (MFCC, logistic regression): the firmware feeds ``kws_feed`` the stream's codes
    (each sample at the input scale, as predict quantises it); the host's ``predictor.feed`` takes the float samples
    (quiet ones, whose codes cast as they are would decide otherwise) and gives the same decisions, those of
    ``predict`` on every window."""
    from tests.features.test_front_end_frame_stack import _pipeline
    from tinycc_ml.target import quantise

    pipe, X = _pipeline(with_std=False)
    samples = tones(4, seed=9)[0].ravel()[:sum(CHUNKS)] * 90.0
    project = tmp_path / "project"
    result = tinycc_ml.compile(pipe, target=sim_target, precision="int16", calibration=X[::3], name="kws",
                               layout="project", examples=X[:4], out_dir=project)
    assert result.report["stream"]["frame_stack"].startswith("7 frames of 10 features kept")
    scale = np.unique(result.report["input_scale"])
    assert scale.size == 1  # one scale for every sample of the window
    codes = quantise(samples, int(scale[0]), 16)
    (project / "main.c").write_text(FEED_MAIN.replace("kws_feed_i16", "kws_feed"))
    (project / "stream.h").write_text(stream_header(codes))
    subprocess.run(["make", "-s", "firmware.elf"], cwd=project, check=True, capture_output=True, timeout=300)
    run = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-display", "none", "-monitor", "none", "-serial",
                          "stdio", "-semihosting-config", "enable=on,target=native", "-kernel", "firmware.elf"],
                         cwd=project, capture_output=True, text=True, timeout=300)
    lines = run.stdout.replace("\r", "").split("\n")
    assert "end" in lines, run.stdout[-500:]
    on_m4 = [int(line.split()[1]) for line in lines if line.startswith("decision ")]

    predictor = tinycc_ml.compile(pipe, precision="int16", calibration=X[::3], name="kws").load()
    predictor.reset()
    on_host = [d for chunk in np.split(samples, np.cumsum(CHUNKS)[:-1]) for d in predictor.feed(chunk)]
    windows = stream_windows(samples, 1024, 128)
    assert np.asarray(predictor.classes)[on_m4].tolist() == on_host == predictor.predict(windows).tolist()
    assert len(on_m4) == len(windows) == 1 + (len(samples) - 1024) // 128
