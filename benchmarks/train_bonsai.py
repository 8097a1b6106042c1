"""Train Bonsai on USPS and print a table: dataset, setting, test accuracy, model bytes, train seconds.

    python benchmarks/train_bonsai.py [--data /work/shared/datasets/usps10.npz] [--seed 0] [--quick]

Targets: USPS-10 >= 93%; binary USPS (digits 0-4 vs 5-9) >= 92% within 2 KB and >= 95% within 16 KB;
each fit <= 5 minutes. All rows use the estimator's defaults except the stated budget.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tinycc_ml.models.bonsai_trainer import BonsaiClassifier

TARGETS = {"USPS-10 / no budget": 0.93, "USPS-2 / 2 KB": 0.92, "USPS-2 / 16 KB": 0.95}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/work/shared/datasets/usps10.npz")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="fewer epochs (a smoke run, not the figures)")
    args = parser.parse_args(argv)
    with np.load(args.data, allow_pickle=False) as data:
        Xtr, ytr, Xte, yte = (data[k] for k in ("X_train", "y_train", "X_test", "y_test"))
    btr, bte = (ytr >= 5).astype(np.int64), (yte >= 5).astype(np.int64)
    runs = [
        ("USPS-10", "no budget", {}, ytr, yte),
        ("USPS-10", "16 KB", {"budget_bytes": 16384}, ytr, yte),
        ("USPS-2", "2 KB", {"budget_bytes": 2048}, btr, bte),
        ("USPS-2", "16 KB", {"budget_bytes": 16384}, btr, bte),
    ]
    extra = {"epochs": 8} if args.quick else {}
    rows = []
    for dataset, setting, params, y_train, y_test in runs:
        clf = BonsaiClassifier(random_state=args.seed, **params, **extra)
        start = time.perf_counter()
        clf.fit(Xtr, y_train)
        seconds = time.perf_counter() - start
        acc = clf.score(Xte, y_test)
        model = clf.to_model()
        np.testing.assert_allclose(model.scores(Xte).squeeze(), clf.decision_function(Xte), atol=1e-8)
        plan = clf.plan_
        detail = f"d̂={plan['d_hat']} depth={plan['depth']} nnz(Z)={np.count_nonzero(model.Z)}/{model.Z.size}"
        rows.append((dataset, setting, acc, clf.model_bytes, seconds, detail))
        print(f"done: {dataset} {setting}: {acc:.4f} in {seconds:.1f}s", file=sys.stderr, flush=True)
    print(f"{'dataset':<8} {'setting':<10} {'test acc':>8} {'bytes':>7} {'train s':>8}  {'target':<8} details")
    ok = True
    for dataset, setting, acc, nbytes, seconds, detail in rows:
        target = TARGETS.get(f"{dataset} / {setting}")
        met = target is None or (acc >= target and seconds <= 300)
        ok &= met
        mark = "-" if target is None else f">={target:.0%} {'ok' if met else 'MISSED'}"
        print(f"{dataset:<8} {setting:<10} {acc:>8.2%} {nbytes:>7} {seconds:>8.1f}  {mark:<8} {detail}")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
