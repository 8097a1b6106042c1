"""Host builds against numpy: predictions per second of the compiled model (float, int16, int8) and of the
same model's numpy ``predict``, on one 10,000-row batch, median of --repeat runs, measured in one run.

    python benchmarks/host_throughput.py [--rows 10000] [--repeat 7]

Models (synthetic data: letter and Fashion-MNIST are not available offline):
  protonn-16   ProtoNNClassifier(projection_dim=12, n_prototypes=52) on make_classification with the UCI letter
               data set's shape (16 features, 26 classes)
  logreg-784   scikit-learn LogisticRegression on make_classification with Fashion-MNIST's shape (784
               features, 10 classes); numpy: the converted model's predict (sklearn's own predict also shown)
Host builds are compiled with tinycc_ml.host.build.HOST_CFLAGS (printed): they are loaded on the machine
that builds them. One foreign call per batch (the module's batch entry point).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tinycc_ml  # noqa: E402
from tinycc_ml.host.build import HOST_CFLAGS  # noqa: E402


def rate(fn, X, repeat: int) -> float:
    fn(X[:100])  # warm up (first call builds / loads)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(X)
        times.append(time.perf_counter() - t0)
    return len(X) / float(np.median(times))


def models(rows: int):
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

    X, y = make_classification(n_samples=4000 + rows, n_features=16, n_informative=12, n_redundant=2, n_classes=26,
                               n_clusters_per_class=1, random_state=0)
    clf = ProtoNNClassifier(projection_dim=12, n_prototypes=52, random_state=0).fit(X[:4000], y[:4000])
    yield "protonn-16", clf.to_model(), None, X[:4000], X[4000:]
    X, y = make_classification(n_samples=2000 + rows, n_features=784, n_informative=60, n_classes=10,
                               random_state=0)
    lr = LogisticRegression(max_iter=300).fit(X[:2000], y[:2000])
    from tinycc_ml.importers.sklearn import from_sklearn

    yield "logreg-784", from_sklearn(lr), lr, X[:2000], X[2000:]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"host C flags: {' '.join(HOST_CFLAGS)}; {args.rows:,}-row batches, median of {args.repeat}")
    head = f"{'model':<11} {'build':<14} {'predictions/s':>14} {'vs numpy':>9} {'agree':>6}"
    print(head)
    print("-" * len(head))
    for name, model, sk, Xc, X in models(args.rows):
        X = X.astype(np.float64)
        ref = model.predict(X)
        base = rate(model.predict, X, args.repeat)
        print(f"{name:<11} {'numpy':<14} {base:>14,.0f} {1.0:>9.2f} {'-':>6}", flush=True)
        if sk is not None:
            r = rate(sk.predict, X, args.repeat)
            print(f"{name:<11} {'scikit-learn':<14} {r:>14,.0f} {r / base:>9.2f} {'-':>6}", flush=True)
        for precision in ("float", "int16", "int8"):
            pred = tinycc_ml.compile(model, target="host", precision=precision, calibration=Xc, name="hb").load()
            r = rate(pred.predict, X, args.repeat)
            agree = float(np.mean(pred.predict(X) == ref))
            print(f"{name:<11} {'C ' + precision:<14} {r:>14,.0f} {r / base:>9.2f} {agree:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
