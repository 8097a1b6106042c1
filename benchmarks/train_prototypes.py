"""Train the reference-point models (kNN, nearest-prototype, SNC) on USPS and print one table:
dataset, model, setting, test accuracy, model bytes, train seconds.

    python benchmarks/train_prototypes.py [--data PATH] [--quick] [--only knn,kmeans,npc,snc,snc-lowrank]
                                         [--binary/--no-binary] [--seeds 0,1,2] [--save-dir DIR]

BLAS is held to one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS are set: on a shared
machine threaded BLAS spin-waits and runs these (small) products up to 10x slower.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from tinycc_ml.models.knn import KNNClassifier  # noqa: E402
from tinycc_ml.models.npc import NearestPrototypeClassifier  # noqa: E402
from tinycc_ml.models.snc import SNCClassifier  # noqa: E402

DEFAULT_DATA = "/work/shared/datasets/usps10.npz"


def load(path: str, quick: bool):
    data = np.load(path, allow_pickle=False)
    X, y, Xt, yt = (data[k] for k in ("X_train", "y_train", "X_test", "y_test"))
    if quick:  # every 5th sample: a smoke run in seconds
        X, y = X[::5], y[::5]
    return X, y, Xt, yt


def runs(selected):
    """(key, model name, setting, factory) in table order."""
    table = [
        ("knn", "kNN", "k=1, full train set", lambda: KNNClassifier(k=1)),
        ("kmeans", "k-means", "15/class, no training", lambda: NearestPrototypeClassifier(15, max_stages=0)),
        ("npc", "nearest-prototype", "15/class, exp loss", lambda: NearestPrototypeClassifier(15)),
        ("snc", "SNC", "4% compression", lambda: SNCClassifier(compression=0.04)),
        ("snc-lowrank", "SNC", "4%, low-rank r=32", lambda: SNCClassifier(0.04, metric="low-rank", n_components=32)),
    ]
    return [row for row in table if row[0] in selected]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="train on a 1/5 subsample")
    parser.add_argument("--only", default="knn,kmeans,npc,snc,snc-lowrank")
    parser.add_argument("--binary", action=argparse.BooleanOptionalAction, default=True,
                        help="also digits 0-4 against 5-9")
    parser.add_argument("--save-dir", help="save each model as DIR/<dataset>-<model>.npz")
    parser.add_argument("--seeds", default="0", help="comma-separated random_state values; with several, "
                        "accuracy is mean +- std over them (kNN is deterministic and runs once)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)

    X, y, Xt, yt = load(args.data, args.quick)
    datasets = [("usps10", y, yt)]
    if args.binary:
        datasets.append(("usps-binary", (y >= 5).astype(int), (yt >= 5).astype(int)))
    selected = set(args.only.split(","))
    seeds = [int(v) for v in args.seeds.split(",")]
    header = (f"{'dataset':<12} {'model':<18} {'setting':<22} {'test acc %':>13} {'bytes':>10} {'train s':>8}"
              f"  seeds")
    rows = [header, "-" * len(header)]
    print(header, file=sys.stderr)
    for name, ytr, yte in datasets:
        for key, model, setting, make in runs(selected):
            accs, times = [], []
            for seed in seeds if "random_state" in make().get_params() else seeds[:1]:
                est = make().set_params(verbose=args.verbose)
                if "random_state" in est.get_params():
                    est.set_params(random_state=seed)
                start = time.perf_counter()
                est.fit(X, ytr)
                times.append(time.perf_counter() - start)
                accs.append(100 * est.score(Xt, yte))
                if args.save_dir:
                    est.save(Path(args.save_dir) / f"{name}-{key}-{seed}.npz")
            acc = f"{np.mean(accs):.2f}" + (f" +-{np.std(accs):.2f}" if len(accs) > 1 else "")
            line = (f"{name:<12} {model:<18} {setting:<22} {acc:>13} {est.model_bytes:>10,} "
                    f"{np.mean(times):8.1f}  {' '.join(f'{a:.2f}' for a in accs)}")
            rows.append(line)
            print(line, file=sys.stderr, flush=True)  # progress while the rest trains
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
