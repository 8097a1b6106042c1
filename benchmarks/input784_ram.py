"""784-feature models on the ATmega328P within 2 KB of RAM: the input clamp applied on read.

    python benchmarks/input784_ram.py [--rows 20]

Data: Fashion-MNIST is not available offline, so scikit-learn's digits (8x8, 0-16) are upsampled to
28x28 = 784 features (bilinear, scipy.ndimage.zoom by 3.5) and scaled to 0-255, MNIST's shape and range;
the first 1,400 rows train, the rest test. Models: ProtoNNClassifier(budget_bytes=16 KB) (its W comes out
about 23% dense) and scikit-learn's LogisticRegression on x / 255, compiled at int16 and int8 for the
ATmega328P (calibration: 400 training rows). Without the clamp on read each needs a 1,568-byte RAM copy of
its clamped input besides the caller's 1,568-byte input and is refused (3.2 KB of RAM); the backend now
applies the clamp where the input is read (its readers on the shared C). Per build: the firmware's static
RAM (model + harness, which holds the 1,568-byte input) and the measured peak stack, simavr cycles,
accuracy on the test rows run, and whether scores and predictions equal run_fixed's bit for bit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulated import print_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

N_TRAIN = 1400


def digits784():
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = np.stack([zoom(im.reshape(8, 8), 3.5, order=1) for im in X]).reshape(len(X), -1)
    X = np.clip(X * 16, 0, 255)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


def main(argv=None) -> None:
    from sklearn.linear_model import LogisticRegression

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20)
    args = ap.parse_args(argv)
    X, y, Xt, yt = digits784()
    Xt, yt = Xt[: args.rows], yt[: args.rows]
    protonn = ProtoNNClassifier(budget_bytes=16 * 1024, random_state=0, n_iter=20).fit(X, y)
    W = protonn.to_model().W
    logistic = LogisticRegression(max_iter=300).fit(X / 255, y)
    models = [(f"ProtoNN 16 KB (W {W.shape[0]}x{W.shape[1]}, {np.mean(W != 0):.0%} dense)", protonn, 1.0),
              ("LogisticRegression", logistic, 1 / 255)]
    table = []
    for label, est, unit in models:
        for precision in ("int16", "int8"):
            d = tempfile.mkdtemp(prefix="tinycc-ml-784-")
            try:
                res = tinycc_ml.compile(est, target="avr", precision=precision, calibration=X[:400] * unit,
                                        out_dir=d, name="m")
                xq = quantise(Xt * unit, res.output.input_scale, 16).astype(np.int16)
                run = run_on_target("avr", [os.path.join(d, "m.c")], os.path.join(d, "m.h"), "m", xq,
                                    res.output.n_scores, res.output.input_ctype, res.output.score_ctype,
                                    extra_cflags=("-Werror",))
                want = run_fixed(res.graph, xq.astype(np.int64))
                exact = (np.array_equal(run.predictions, want["prediction"])
                         and np.array_equal(np.asarray(run.scores, np.int64), want["scores"]))
                on_read = any(k.get("kernel") == "clamp on read" for k in res.report["kernels"])
                table.append((label, precision, on_read, float(np.mean(run.cycles)), run.flash_bytes, run.ram_bytes,
                              run.stack_bytes, float(np.mean(run.predictions == yt)), exact))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    print(f"digits upsampled to 28x28 (784 features, 0-255), ATmega328P (32 KB flash, 2 KB RAM); {len(Xt)} test rows")
    print_table([("model", lambda r: r[0], -38), ("prec", lambda r: r[1], -6),
                 ("clamp", lambda r: "on read" if r[2] else "copy", -8), ("cycles", lambda r: f"{r[3]:.0f}", 9),
                 ("flash", lambda r: str(r[4]), 6), ("RAM", lambda r: str(r[5]), 5), ("stack", lambda r: str(r[6]), 5),
                 ("RAM+stack", lambda r: str(r[5] + r[6]), 9), ("acc", lambda r: f"{r[7]:.3f}", 6),
                 ("= run_fixed", lambda r: "yes" if r[8] else "NO", 11)], table)

if __name__ == "__main__":
    main()
