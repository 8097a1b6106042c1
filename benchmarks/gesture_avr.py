"""The gesture tutorial's pipeline (docs/tutorials/gesture-avr.md) measured: raw int16 3-axis accelerometer windows
(labelled synthetic) -> SensorFeatures -> GaussianNB or a RandomForest, compiled as one float build and as one int16
build (calibrated on the training windows); accuracy of the Python pipeline, the host builds and the simulated chips
side by side, cycles (ATmega328P, simavr) or instructions (Cortex-M4F, QEMU) per window, flash, static RAM and the
stream's state.

    python benchmarks/gesture_avr.py [--rows 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.features import SensorFeatures  # noqa: E402

RATE, WINDOW, COUNTS_PER_G = 25.0, 32, 4096  # the tutorial's: 25 Hz, 1.28 s windows, a +-8 g int16 accelerometer
BANDS = [(0.5, 2.0), (2.0, 3.5), (3.5, 6.0), (6.0, 12.5)]
PRECISIONS = ("float", "int16")
CHIPS = (("avr", "ATmega328P", "cycles"), ("cortex-m4", "Cortex-M4F", "instructions"))


def motions(n, seed):
    """The tutorial's data: windows of raw int16 counts, x y z interleaved: at rest, walking (a 1.4-2.4 Hz sway),
    running (2.2-3.4 Hz, stronger), shaking (5-10 Hz); gravity on z, sensor noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(WINDOW) / RATE
    labels = rng.integers(0, 4, n)
    rows = []
    for c in labels:
        freq = [0.0, rng.uniform(1.4, 2.4), rng.uniform(2.2, 3.4), rng.uniform(5.0, 10.0)][c]
        size = [0.0, rng.uniform(0.1, 0.5), rng.uniform(0.3, 0.9), rng.uniform(0.1, 0.6)][c]
        g = size * np.sin(2 * np.pi * freq * t[:, None] + rng.uniform(0, 6, 3))
        g = g + [0.0, 0.0, 1.0] + 0.08 * rng.standard_normal((WINDOW, 3))
        rows.append(np.round(g * COUNTS_PER_G).astype(np.int16).ravel())
    return np.array(rows), np.array(["rest", "walk", "run", "shake"])[labels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="test rows run on each chip")
    args = parser.parse_args()
    X_train, y_train = motions(400, seed=0)
    X_test, y_test = motions(200, seed=1)
    rows = X_test[:args.rows]
    models = {"GaussianNB": GaussianNB(), "RandomForest(10, depth 6)": RandomForestClassifier(10, max_depth=6,
                                                                                              random_state=0)}
    print(f"{'model':<26} {'where':<11} {'precision':<9} {'accuracy':>8} {'per window (mean, max)':>32} {'flash':>7} "
          f"{'RAM':>6} {'stream':>6}")
    for label, model in models.items():
        pipe = make_pipeline(SensorFeatures(3, RATE, bands=BANDS), model).fit(X_train, y_train)
        print(f"{label:<26} {'python':<11} {'float64':<9} {pipe.score(rows, y_test[:len(rows)]):>8.3f}")
        for precision in PRECISIONS:
            calibration = None if precision == "float" else X_train
            host = tinycc_ml.compile(pipe, precision=precision, calibration=calibration).load()
            print(f"{label:<26} {'host':<11} {precision:<9} {np.mean(host.predict(rows) == y_test[:len(rows)]):>8.3f}")
            for target, chip, unit in CHIPS:
                with tempfile.TemporaryDirectory() as tmp:
                    result = tinycc_ml.compile(pipe, target=target, name="gesture", out_dir=tmp, precision=precision,
                                               calibration=calibration)
                    run = get_backend(target).simulate(Path(tmp), result.output, rows)
                counts = np.asarray(run.cycles if unit == "cycles" else run.instructions)
                accuracy = np.mean(pipe.classes_[np.asarray(run.predictions)] == y_test[:len(rows)])
                fit = result.report["fit"]
                print(f"{label:<26} {chip:<11} {precision:<9} {accuracy:>8.3f} {int(np.mean(counts)):>11,} "
                      f"{int(np.max(counts)):>9,} {unit:<10} {fit['flash_bytes']:>7} {fit['ram_bytes']:>6} "
                      f"{result.report['stream']['state_bytes']:>6}")


if __name__ == "__main__":
    main()
