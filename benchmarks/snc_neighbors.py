"""SNC's k-NN vote over the compressed set: test accuracy of k = 1, 3, 5 at 4% and 10% compression.

    python benchmarks/snc_neighbors.py [--usps data/usps/usps10.npz]

SNCClassifier trains the compressed points for the stochastic 1-NN objective (Kusner et al. 2014) whatever
``n_neighbors`` is; k > 1 only changes the vote at prediction. This measures what that costs on USPS-10
(7,291 training rows, 2,007 test rows), float model and int16 C on the host.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tinycc_ml  # noqa: E402
from tinycc_ml.models import SNCClassifier  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--usps", default=str(ROOT / "data" / "usps" / "usps10.npz"))
    args = parser.parse_args()
    d = np.load(args.usps)
    X, y, Xt, yt = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    print("| compression | points | k | float % | int16 C % |")
    print("|---|---:|---:|---:|---:|")
    for compression in (0.04, 0.10):
        for k in (1, 3, 5):
            est = SNCClassifier(compression=compression, n_neighbors=k, random_state=0).fit(X, y)
            float_acc = 100 * np.mean(est.predict(Xt) == yt)
            c = tinycc_ml.compile(est, precision="int16", calibration=X).load()
            c_acc = 100 * np.mean(c.predict(Xt) == yt)
            points = len(est.to_model().prototypes) if hasattr(est.to_model(), "prototypes") else "-"
            print(f"| {compression:.0%} | {points} | {k} | {float_acc:.2f} | {c_acc:.2f} |", flush=True)


if __name__ == "__main__":
    main()
