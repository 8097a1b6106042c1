"""Train ProtoNN on USPS under the paper's model-size budgets and print a table.

    python benchmarks/train_protonn.py [--dataset PATH] [--only usps10|binary] [--n-iter T]

Rows: USPS-10 within 64 kB (paper: 94.92%), binary USPS (digits 0-4 vs 5-9) within 2 kB and 16 kB.
Model bytes are counted as the paper counts them (see tinycc_ml.models.protonn_trainer).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

DEFAULT_DATA = "/work/shared/datasets/usps10.npz"

# (dataset, budget in bytes, target test accuracy)
RUNS = [
    ("usps-10", 64 * 1024, 0.945),
    ("usps-binary", 2 * 1024, 0.92),
    ("usps-binary", 16 * 1024, 0.95),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=DEFAULT_DATA)
    parser.add_argument("--only", choices=["usps10", "binary"])
    parser.add_argument("--n-iter", type=int, default=None, help="override the estimator's n_iter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=1)
    args = parser.parse_args(argv)

    data = np.load(args.dataset)
    Xtr, ytr, Xte, yte = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    rows = []
    for name, budget, target in RUNS:
        if args.only == "usps10" and name != "usps-10" or args.only == "binary" and name == "usps-10":
            continue
        if name == "usps-binary":
            ya, yb = (ytr >= 5).astype(int), (yte >= 5).astype(int)
        else:
            ya, yb = ytr, yte
        extra = {} if args.n_iter is None else {"n_iter": args.n_iter}
        clf = ProtoNNClassifier(budget_bytes=budget, random_state=args.seed, verbose=args.verbose, **extra)
        start = time.perf_counter()
        clf.fit(Xtr, ya)
        seconds = time.perf_counter() - start
        acc = clf.score(Xte, yb)
        plan = clf.plan_
        setting = f"{budget // 1024} kB (d={plan.projection_dim}, m={plan.n_prototypes}, nnzW={plan.nnz_w})"
        rows.append((name, setting, acc, clf.model_bytes, seconds, acc >= target and clf.model_bytes <= budget))
        print(f"done {name} {setting}: {acc:.4f} in {seconds:.1f}s", file=sys.stderr)

    print(f"{'dataset':<12} {'setting':<40} {'test acc':>8} {'bytes':>7} {'train s':>8}  target")
    for name, setting, acc, nbytes, seconds, ok in rows:
        print(f"{name:<12} {setting:<40} {100 * acc:7.2f}% {nbytes:7d} {seconds:8.1f}  {'met' if ok else 'MISSED'}")
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
