"""Accuracy of integer-only ProtoNN code against its float model (host build, test splits).

    python benchmarks/fixed_point_accuracy.py [--quick]

Targets (issue: fixed-point compilation): at most 0.3 points lost at int16 and 1.5 points with
int8 weights, on digits, breast_cancer and USPS-10. SeeDot reports an average loss of 1.855
points for ProtoNN at 16 bits on the Uno.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

import tinycc_ml

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"


def datasets(quick: bool):
    for name, loader in (("digits", load_digits), ("breast_cancer", load_breast_cancer)):
        X, y = loader(return_X_y=True)
        yield name, *train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    if USPS.exists() and not quick:
        d = np.load(USPS)
        yield "usps10", d["X_train"], d["X_test"], d["y_train"], d["y_test"]


def train(name, X, y):
    try:
        from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
    except ImportError:
        from tinycc_ml.models.protonn import init_protonn

        return init_protonn(X, y, projection_dim=15, prototypes_per_class=5), "init_protonn"
    budget = 64 * 1024 if name == "usps10" else 16 * 1024
    clf = ProtoNNClassifier(budget_bytes=budget, random_state=0, verbose=0).fit(X, y)
    return clf.to_model(), f"ProtoNNClassifier(budget_bytes={budget})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip USPS-10")
    args = parser.parse_args()
    header = (f"{'dataset':<14}{'model':<34}{'float %':>9}{'int16 %':>9}{'loss':>7}{'int8 %':>9}{'loss':>7}"
              f"{'exp B':>7}{'flash16':>9}{'flash8':>8}{'compile s':>10}")
    print(header)
    print("-" * len(header))
    for name, X_train, X_test, y_train, y_test in datasets(args.quick):
        model, how = train(name, X_train, y_train)
        float_acc = 100 * np.mean(model.predict(X_test) == y_test)
        row = {}
        for precision in ("int16", "int8"):
            start = time.perf_counter()
            result = tinycc_ml.compile(model, precision=precision, calibration=X_train, name=f"{name}_{precision}")
            elapsed = time.perf_counter() - start
            acc = 100 * np.mean(result.load().predict(X_test) == y_test)
            row[precision] = (acc, result.report, elapsed)
        (a16, r16, t16), (a8, r8, t8) = row["int16"], row["int8"]
        exp_bytes = sum(t["table_bytes"] for t in r16["exp_tables"])
        print(f"{name:<14}{how[:33]:<34}{float_acc:>9.2f}{a16:>9.2f}{float_acc - a16:>7.2f}{a8:>9.2f}"
              f"{float_acc - a8:>7.2f}{exp_bytes:>7}{r16['const_bytes']:>9}{r8['const_bytes']:>8}{t16 + t8:>10.1f}")


if __name__ == "__main__":
    main()
