"""Tree predict cycles on the simulated ATmega328P (simavr, exact cycles), int16, digits (70/30 split,
random_state=0): DecisionTreeClassifier(max_depth=8) and RandomForestClassifier(10, max_depth=8), mean
cycles of ``<prefix>_predict`` over the first ``--rows`` test rows, and whether every prediction equals
scikit-learn's. ``--scores-path`` measures predict through the scores (the code before the class-tree
shortcut of single trees) for a before/after table.

    python benchmarks/trees_predict.py [--rows 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402


def models():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    yield "DecisionTree(depth 8)", DecisionTreeClassifier(max_depth=8, random_state=0).fit(X_tr, y_tr), X_tr, X_te
    yield ("RandomForest(10, depth 8)",
           RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X_tr, y_tr), X_tr, X_te)


def measure(clf, X_tr, rows, work: Path, shortcut: bool):
    from unittest import mock

    from tinycc_ml.codegen import trees

    with mock.patch.object(trees, "predict_code", trees.predict_code if shortcut else lambda *a: None):
        result = tinycc_ml.compile(clf, target="avr", precision="int16", name="m", out_dir=work, calibration=X_tr)
    o = result.output
    x = quantise(rows, o.input_scale, 16).astype(np.int16)
    run = run_on_target("avr", [str(work / "m.c")], str(work / "m.h"), "m", x, o.n_scores, o.input_ctype,
                        o.score_ctype)
    kernels = ",".join(k["kernel"] for k in result.report.get("kernels", []))
    return float(np.mean(run.cycles)), run.flash_bytes, np.array_equal(clf.classes_[run.predictions],
                                                                       clf.predict(rows)), kernels


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    args = ap.parse_args(argv)
    print("| model | predict path | AVR cycles (mean) | firmware flash | = scikit-learn | kernels |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, clf, X_tr, X_te in models():
        for shortcut in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                cycles, flash, same, kernels = measure(clf, X_tr, X_te[:args.rows], Path(tmp), shortcut)
            path = "class tree (where it applies)" if shortcut else "through the scores"
            print(f"| {label} | {path} | {cycles:,.0f} | {flash:,} B | {'yes' if same else 'NO'} | {kernels} |",
                  flush=True)


if __name__ == "__main__":
    main()
