"""Compiled probabilities against scikit-learn's on letter-26 (26 classes): float builds on the host, every
test row.

    python benchmarks/letter_proba.py [--train-rows 4000]

Each model is trained on the first --train-rows of UCI's training split (benchmarks/letter.py), compiled at
precision float for the host, and run on all 4,000 test rows: the largest |C predict_proba - scikit-learn's|
over every row and class, how many rows differ by more than 1e-4 in some class, and how many predicted labels
differ. "compile and build s": tinycc_ml.compile and the host build of its C (gcc), on the machine it ran on.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from letter import letter26  # noqa: E402
from results_table import write_table  # noqa: E402
from sklearn.calibration import CalibratedClassifierCV  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.multiclass import OneVsRestClassifier  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC, LinearSVC  # noqa: E402

import tinycc_ml  # noqa: E402


def models():
    yield "LogisticRegression (multinomial)", make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    yield "LogisticRegression one-vs-rest", make_pipeline(StandardScaler(),
                                                         OneVsRestClassifier(LogisticRegression(max_iter=2000)))
    yield "SVC(probability=True), RBF", make_pipeline(StandardScaler(), SVC(probability=True, random_state=0))
    yield "StandardScaler + PCA(12) + SVC(probability=True)", make_pipeline(
        StandardScaler(), PCA(12, random_state=0), SVC(probability=True, random_state=0))
    yield "CalibratedClassifierCV(LinearSVC), sigmoid", make_pipeline(
        StandardScaler(), CalibratedClassifierCV(LinearSVC(max_iter=5000), method="sigmoid"))
    yield "CalibratedClassifierCV(LinearSVC), isotonic", make_pipeline(
        StandardScaler(), CalibratedClassifierCV(LinearSVC(max_iter=5000), method="isotonic"))
    # over other classifiers (their folds' graphs composed; sigmoid, scikit-learn's default, 5 folds)
    yield "CalibratedClassifierCV(RandomForest(50 trees, depth 12))", CalibratedClassifierCV(
        RandomForestClassifier(50, max_depth=12, random_state=0))
    yield "CalibratedClassifierCV(SVC), RBF", make_pipeline(StandardScaler(), CalibratedClassifierCV(SVC()))
    yield "CalibratedClassifierCV(GaussianNB)", CalibratedClassifierCV(GaussianNB())
    yield "CalibratedClassifierCV(MLP(64))", make_pipeline(StandardScaler(), CalibratedClassifierCV(
        MLPClassifier((64,), max_iter=300, random_state=0)))
    yield "CalibratedClassifierCV(HistGradientBoosting(50 iterations))", CalibratedClassifierCV(
        HistGradientBoostingClassifier(max_iter=50, random_state=0))
    yield "CalibratedClassifierCV(RandomForest(50 trees, depth 12)), isotonic", CalibratedClassifierCV(
        RandomForestClassifier(50, max_depth=12, random_state=0), method="isotonic")
    yield "CalibratedClassifierCV(GaussianNB), isotonic", CalibratedClassifierCV(GaussianNB(), method="isotonic")
    yield "CalibratedClassifierCV(HistGradientBoosting(50 iterations)), isotonic", CalibratedClassifierCV(
        HistGradientBoostingClassifier(max_iter=50, random_state=0), method="isotonic")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=4000)
    args = parser.parse_args()
    Xtr, ytr, Xte, yte = letter26()
    Xtr, ytr = Xtr[:args.train_rows], ytr[:args.train_rows]
    # the compiled C reads float32 inputs: both sides see the same values (letter's are small integers anyway)
    Xtr, Xte = (X.astype(np.float32).astype(np.float64) for X in (Xtr, Xte))
    rows = []
    for name, model in models():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # LinearSVC / OvR convergence on unscaled duals: the model is as trained
            model.fit(Xtr, ytr)
        start = time.perf_counter()
        try:
            compiled = tinycc_ml.compile(model, precision="float").load()
        except tinycc_ml.TinyccError as exc:
            rows.append([name, f"{model.score(Xte, yte):.2%}", "refused", str(exc)[:80], "", ""])
            continue
        seconds = time.perf_counter() - start
        got, want = compiled.predict_proba(Xte), model.predict_proba(Xte)
        differ = int(np.sum(compiled.predict(Xte) != model.predict(Xte)))
        beyond = int(np.sum(np.max(np.abs(got - want), axis=1) > 1e-4))
        rows.append([name, f"{model.score(Xte, yte):.2%}", f"{np.max(np.abs(got - want)):.1e}", f"{beyond}",
                     f"{differ}", f"{seconds:.1f}"])
    write_table("letter_proba", ["model (float, host)", "test accuracy", "max abs difference from scikit-learn",
                                 "rows beyond 1e-4", "labels differing (of 4,000)", "compile and build s"], rows,
                script=f"benchmarks/letter_proba.py --train-rows {args.train_rows}", align=[None] + ["right"] * 5)
    return 0 if all(r[2] != "refused" and float(r[2]) <= 1e-4 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
