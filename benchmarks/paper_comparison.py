"""The seed papers' tables beside ours, at the same model size, for every row the data here allows
(USPS, scikit-learn's bundled sets), plus the papers' other tasks (regression, multilabel, label
noise) measured the same way. Every estimator runs with its defaults except the stated setting.

    python benchmarks/paper_comparison.py [--quick] [--only SECTION ...] [--rows TEXT]

Sections:
  usps        ProtoNN (Gupta et al. 2017, Tables 1-2), Bonsai (Kumar et al. 2017, Table 2),
              SNC and kNN as quoted in ProtoNN's tables, nearest-prototype (Wohlhart et al. 2013,
              Table 1, error %); test accuracy of the float model and of the int16 C build;
              scikit-learn's logistic regression and random forest on the same splits.
  letter      letter-26 (UCI's 16,000 / 4,000 split, benchmarks/letter.py): every family beside the
              papers' letter-26 figures (ProtoNN T2, nearest-prototype T1, SNC and kNN as quoted by
              ProtoNN) and scikit-learn's logistic regression and random forest; float models.
  noise       SNC (Kusner et al. 2014, Fig. 4 right: label noise, k = 1 and 3 on the compressed set;
              the paper plots Letter, not available here, so USPS with the same corruption).
  regression  diabetes, 5-fold R²: Ridge, ProtoNNRegressor, BonsaiRegressor (float and int16 C), the
              int16 value's error; checks the issue's figures (R² >= Ridge, float/int16 within 0.01).
  multilabel-seeds  ProtoNN against scikit-learn's OneVsRestClassifier(LogisticRegression()) on the
              multilabel section's data over seeds 0-2 (data, split and model), precision@1/3/5.
  multilabel  ProtoNN on make_multilabel_classification (the paper's sets are not shipped):
              precision@1/3/5, float and int16 C, against always ranking the most frequent labels;
              agreement of the compiled rankings and label vectors (tinycc_ml.target_report); the
              paper's SLEEC start (init_w="sleec") beside the default PCA start;
              checks the issue's figures (float C ranking >= 99% of rows, int16 P@1 loss <= 1 point).

--quick trains on a quarter of the rows (a smoke run; figures are not comparable). "train s" is
CPU seconds of ``fit`` (``time.process_time``) with one BLAS thread.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # threaded BLAS spin-waits on a shared 2-core machine

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier  # noqa: E402
from tinycc_ml.models.knn import KNNClassifier  # noqa: E402
from tinycc_ml.models.npc import NearestPrototypeClassifier  # noqa: E402
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier  # noqa: E402
from tinycc_ml.models.prototypes import PrototypeModel  # noqa: E402
from tinycc_ml.models.regressors import BonsaiRegressor, ProtoNNRegressor  # noqa: E402
from tinycc_ml.models.snc import SNCClassifier  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"

# (data, paper, paper's setting, paper figure (accuracy %), paper size (KB), our estimator)
USPS_ROWS = [
    ("usps-2", "ProtoNN T1", "11.6 KB", 95.67, 11.6,
     lambda: ProtoNNClassifier(budget_bytes=int(11.625 * 1024), random_state=0)),
    ("usps-10", "ProtoNN T2", "64 KB", 94.92, 63.83, lambda: ProtoNNClassifier(budget_bytes=64 * 1024, random_state=0)),
    ("usps-2", "Bonsai T2", "2 KB", 94.42, 2.0, lambda: BonsaiClassifier(budget_bytes=2048, random_state=0)),
    ("usps-2", "Bonsai T2", "16 KB", 95.72, 16.0, lambda: BonsaiClassifier(budget_bytes=16 * 1024, random_state=0)),
    ("usps-2", "SNC (ProtoNN T1)", "568.8 KB", 97.16, 568.8,
     lambda: SNCClassifier(n_prototypes=int(568.8 * 1024 / 4 / 257), random_state=0)),
    ("usps-10", "SNC (ProtoNN T2)", "568.8 KB", 94.77, 568.8,
     lambda: SNCClassifier(n_prototypes=int(568.8 * 1024 / 4 / 257), random_state=0)),
    ("usps-2", "kNN (ProtoNN T1)", "all, k=1", 96.70, 7291, lambda: KNNClassifier(k=1)),
    ("usps-10", "kNN (ProtoNN T2)", "all, k=1", 94.07, 7291, lambda: KNNClassifier(k=1)),
    ("usps-10", "NPC T1", "k-means 15/cl.", 100 - 7.67, None,
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, max_stages=0, n_restarts=1, random_state=0)),
    ("usps-10", "NPC T1", "NPC-h 15/cl.", 100 - 6.23, None,
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, loss="hinge", random_state=0)),
    ("usps-10", "NPC T1", "NPC-e 15/cl.", 100 - 5.38, None,
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, random_state=0)),
    ("usps-10", "NPC T1", "NPC-e 50/cl.", 100 - 4.58, None,
     lambda: NearestPrototypeClassifier(prototypes_per_class=50, random_state=0)),
]


def usps(binary: bool, quick: bool):
    with np.load(USPS, allow_pickle=False) as d:
        X, y, Xt, yt = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    if binary:
        y, yt = (y >= 5).astype(int), (yt >= 5).astype(int)
    if quick:
        X, y = X[::4], y[::4]
    return X, y, Xt, yt


def int16_accuracy(model, X, Xt, yt) -> float:
    predictor = tinycc_ml.compile(model, precision="int16", calibration=X, name="paper").load()
    return 100 * float(np.mean(predictor.predict(Xt) == yt))


def section_usps(quick: bool, rows: str | None = None) -> None:
    print("USPS (test accuracy %; model bytes as the papers count them)")
    head = (f"{'data':<8}{'paper':<18}{'setting':<16}{'paper %':>8}{'ours %':>8}{'int16 %':>8}{'bytes':>10}"
            f"{'train s':>8}")
    print(head)
    print("-" * len(head))
    for data, paper, setting, figure, _, make in USPS_ROWS:
        if rows is not None and rows not in f"{paper} {setting}":
            continue
        X, y, Xt, yt = usps(data == "usps-2", quick)
        est = make()
        start = time.process_time()
        est.fit(X, y)
        seconds = time.process_time() - start
        ours = 100 * est.score(Xt, yt)
        model = est.to_model()
        # kNN over the whole training set is 7 MB of constants: no C build
        fixed = "-" if isinstance(est, KNNClassifier) else f"{int16_accuracy(model, X, Xt, yt):.2f}"
        print(f"{data:<8}{paper:<18}{setting:<16}{figure:>8.2f}{ours:>8.2f}{fixed:>8}{est.model_bytes:>10}"
              f"{seconds:>8.1f}", flush=True)
    if rows is None:
        for data in ("usps-2", "usps-10"):
            X, y, Xt, yt = usps(data == "usps-2", quick)
            for name, make in BASELINES:
                acc, seconds = fit_and_score(make(), X, y, Xt, yt)
                print(f"{data:<8}{'scikit-learn':<18}{name:<16}{'-':>8}{acc:>8.2f}{'-':>8}{'-':>10}{seconds:>8.1f}",
                      flush=True)
    print()


def fit_and_score(est, X, y, Xt, yt) -> tuple[float, float]:
    """Test accuracy % and CPU seconds of ``fit``."""
    start = time.process_time()
    est.fit(X, y)
    seconds = time.process_time() - start
    return 100 * float(est.score(Xt, yt)), seconds


def _logistic():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _forest():
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=100, random_state=0, n_jobs=1)


BASELINES = [("logistic regr.", _logistic), ("random forest", _forest)]

# letter-26: (paper, paper's setting, paper figure (accuracy %) or None, our estimator)
LETTER_ROWS = [
    ("NPC T1", "k-means 15/cl.", 100 - 13.75,
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, max_stages=0, n_restarts=1, random_state=0)),
    ("NPC T1", "NPC-e 15/cl.", 100 - 3.13, lambda: NearestPrototypeClassifier(prototypes_per_class=15, random_state=0)),
    ("NPC T1", "15/cl. 50 ep.", 100 - 3.13,
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, epochs_per_stage=50, random_state=0)),
    ("ProtoNN T2", "64 KB", 97.10, lambda: ProtoNNClassifier(budget_bytes=64 * 1024, random_state=0)),
    ("ProtoNN", "16 KB", None, lambda: ProtoNNClassifier(budget_bytes=16 * 1024, random_state=0)),
    ("Bonsai", "64 KB", None, lambda: BonsaiClassifier(budget_bytes=64 * 1024, random_state=0)),
    ("SNC (ProtoNN T2)", "145.1 KB", 96.36,
     lambda: SNCClassifier(n_prototypes=int(145.08 * 1024 / 4 / 17), random_state=0)),
    ("SNC", "4%", None, lambda: SNCClassifier(compression=0.04, random_state=0)),
    ("kNN (ProtoNN T2)", "all, k=1", 95.26, lambda: KNNClassifier(k=1)),
]


def section_letter(quick: bool, rows: str | None = None) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from letter import letter26

    X, y, Xt, yt = letter26()
    if quick:
        X, y = X[::4], y[::4]
    print(f"letter-26 (UCI's split: {len(X)} training / {len(Xt)} test rows; test accuracy %, float models; "
          "train s: CPU seconds of fit, one thread)")
    head = f"{'paper':<18}{'setting':<16}{'paper %':>8}{'ours %':>8}{'bytes':>10}{'train s':>8}"
    print(head)
    print("-" * len(head))
    for paper, setting, figure, make in LETTER_ROWS:
        if rows is not None and rows not in f"{paper} {setting}":
            continue
        est = make()
        acc, seconds = fit_and_score(est, X, y, Xt, yt)
        shown = f"{figure:>8.2f}" if figure is not None else f"{'-':>8}"
        print(f"{paper:<18}{setting:<16}{shown}{acc:>8.2f}{est.model_bytes:>10}{seconds:>8.1f}", flush=True)
    if rows is None:
        for name, make in BASELINES:
            acc, seconds = fit_and_score(make(), X, y, Xt, yt)
            print(f"{'scikit-learn':<18}{name:<16}{'-':>8}{acc:>8.2f}{'-':>10}{seconds:>8.1f}", flush=True)
    print()


def section_noise(quick: bool) -> None:
    print("Label noise (USPS-10, test accuracy %): a share of training labels replaced by random ones")
    head = f"{'noise':>6}{'kNN all k=1':>13}{'kNN all k=3':>13}{'SNC 4% k=1':>12}{'SNC 4% k=3':>12}"
    print(head)
    print("-" * len(head))
    X, y, Xt, yt = usps(False, quick)
    rng = np.random.default_rng(0)
    for noise in (0.0, 0.16, 0.32):
        noisy = y.copy()
        flip = rng.random(len(y)) < noise
        noisy[flip] = rng.integers(0, 10, int(flip.sum()))
        row = [100 * KNNClassifier(k=k).fit(X, noisy).score(Xt, yt) for k in (1, 3)]
        snc = SNCClassifier(compression=0.04, random_state=0).fit(X, noisy).to_model()
        # training does not depend on k: the same points, voted over
        vote3 = PrototypeModel(snc.prototypes, snc.labels, snc.n_classes, k=3, mean=snc.mean, std=snc.std,
                               transform=snc.transform)
        row += [100 * float(np.mean(m.predict(Xt) == yt)) for m in (snc, vote3)]
        print(f"{noise:>6.2f}" + "".join(f"{v:>13.2f}" for v in row[:2]) + "".join(f"{v:>12.2f}" for v in row[2:]),
              flush=True)
    print()


def section_regression(quick: bool) -> None:
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold

    from tinycc_ml.target_report import target_report

    print("Regression (diabetes, R² on held-out folds, 5-fold mean; int16: <prefix>_predict_value of the C build;\n"
          "error: |int16 value - float value| in the target's units, largest and mean over the test rows)")
    head = (f"{'model':<18}{'float R²':>9}{'int16 R²':>9}{'|ΔR²|':>7}{'max err':>9}{'mean err':>9}{'bytes':>8}"
            f"{'train s':>8}  per fold (float)")
    print(head)
    print("-" * len(head))
    X, y = load_diabetes(return_X_y=True)
    folds = list(KFold(2 if quick else 5, shuffle=True, random_state=0).split(X))
    results = {}
    for name, make in (("Ridge", Ridge), ("ProtoNNRegressor", lambda: ProtoNNRegressor(random_state=0)),
                       ("BonsaiRegressor", lambda: BonsaiRegressor(random_state=0))):
        floats, ints, errors, sizes, seconds = [], [], [], [], 0.0
        for train, test in folds:
            est = make()
            start = time.process_time()
            est.fit(X[train], y[train])
            seconds += time.process_time() - start
            floats.append(r2_score(y[test], est.predict(X[test])))
            if hasattr(est, "to_model"):
                rep = target_report(est.to_model(), "host", X[test], y[test], precision="int16",
                                    calibration=X[train], name="reg")["regression"]
                ints.append(rep["target_r2"])
                errors.append((rep["max_abs_error"], rep["mean_abs_error"]))
                sizes.append(est.model_bytes)
        results[name] = (np.mean(floats), np.mean(ints) if ints else None)
        if ints:
            fixed = (f"{np.mean(ints):>9.3f}{abs(np.mean(ints) - np.mean(floats)):>7.3f}"
                     f"{max(e[0] for e in errors):>9.2f}{np.mean([e[1] for e in errors]):>9.3f}")
        else:
            fixed = f"{'-':>9}{'-':>7}{'-':>9}{'-':>9}"
        size = f"{int(np.mean(sizes)):>8}" if sizes else f"{4 * (X.shape[1] + 1):>8}"
        print(f"{name:<18}{np.mean(floats):>9.3f}{fixed}{size}{seconds / len(folds):>8.1f}  "
              + " ".join(f"{v:.3f}" for v in floats), flush=True)
    ridge = results["Ridge"][0]
    for name in ("ProtoNNRegressor", "BonsaiRegressor"):
        r_float, r_int = results[name]
        print(f"    {name}: R² {'>=' if r_float >= ridge else '<'} Ridge's ({r_float:.3f} vs {ridge:.3f}); "
              f"float and int16 {'within' if abs(r_float - r_int) <= 0.01 else 'NOT within'} 0.01 R²")
    print()


def precision_at(k: int, scores: np.ndarray, Y: np.ndarray) -> float:
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return 100 * float(np.mean(np.take_along_axis(Y, top, axis=1)))


def multilabel_data(quick: bool, seed: int = 0):
    from sklearn.datasets import make_multilabel_classification
    from sklearn.model_selection import train_test_split

    X, Y = make_multilabel_classification(n_samples=1000 if quick else 4000, n_features=50, n_classes=20,
                                          n_labels=4, random_state=seed)
    return train_test_split(X, Y, test_size=0.25, random_state=seed)


def section_multilabel_seeds(quick: bool) -> None:
    import warnings

    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    models = [
        ("ProtoNN, defaults", lambda seed: ProtoNNClassifier(random_state=seed)),
        ("ProtoNN, 16 KB", lambda seed: ProtoNNClassifier(budget_bytes=16 * 1024, random_state=seed)),
        ("one-vs-rest logistic", lambda seed: OneVsRestClassifier(LogisticRegression(max_iter=2000))),
    ]
    print("Multilabel precision@k % against one-vs-rest logistic regression (the multilabel section's data, "
          "seeds 0-2 for data, split and model; mean and per seed; train s: CPU seconds, all seeds)")
    head = f"{'model':<24}{'P@1':>7}{'P@3':>7}{'P@5':>7}{'train s':>8}  per seed (P@1/P@3/P@5)"
    print(head)
    print("-" * len(head))
    for name, make in models:
        figures, seconds = [], 0.0
        for seed in range(3):
            X, Xt, Y, Yt = multilabel_data(quick, seed)
            est = make(seed)
            start = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a label column without positives after the split
                est.fit(X, Y)
            seconds += time.process_time() - start
            S = est.decision_function(Xt)
            figures.append([precision_at(k, S, Yt) for k in (1, 3, 5)])
        mean = np.mean(figures, axis=0)
        print(f"{name:<24}" + "".join(f"{v:>7.2f}" for v in mean) + f"{seconds:>8.1f}  "
              + "  ".join("/".join(f"{v:.1f}" for v in row) for row in figures), flush=True)
    print()


def section_multilabel(quick: bool) -> None:
    from tinycc_ml.target_report import target_report

    X, Xt, Y, Yt = multilabel_data(quick)
    print(f"Multilabel ProtoNN (make_multilabel_classification: {len(X)} train / {len(Xt)} test rows, "
          f"{X.shape[1]} features, {Y.shape[1]} labels, {Y.sum(1).mean():.1f} per row); C builds on the host:\n"
          "rank: share of test rows whose compiled scores rank all labels as the float model's do;\n"
          "labels: share whose <prefix>_predict_labels 0/1 vector (top 3) equals the float model's")
    head = f"{'model':<28}{'P@1':>7}{'P@3':>7}{'P@5':>7}{'rank %':>8}{'labels %':>9}{'bytes':>8}{'train s':>8}"
    print(head)
    print("-" * len(head))
    prior = np.tile(Y.mean(axis=0), (len(Xt), 1))
    print(f"{'most frequent labels':<28}" + "".join(f"{precision_at(k, prior, Yt):>7.2f}" for k in (1, 3, 5)))
    for budget in (4 * 1024, 16 * 1024):
        est = ProtoNNClassifier(budget_bytes=budget, multilabel_rule="top_k", multilabel_k=3, random_state=0)
        start = time.process_time()
        est.fit(X, Y)
        seconds = time.process_time() - start
        model = est.to_model()
        kb = budget // 1024
        reports = {precision: target_report(model, "host", Xt, Yt, precision=precision,
                                            calibration=None if precision == "float" else X, name="ml")["multilabel"]
                   for precision in ("float", "int16")}
        float_p = reports["float"]["float_precision_at"]
        print(f"{f'ProtoNN {kb} KB float model':<28}" + "".join(f"{100 * float_p[k]:>7.2f}" for k in "135")
              + f"{'':>8}{'':>9}{est.model_bytes:>8}{seconds:>8.1f}")
        for precision, rep in reports.items():
            p = rep["target_precision_at"]
            print(f"{f'ProtoNN {kb} KB {precision} C':<28}" + "".join(f"{100 * p[k]:>7.2f}" for k in "135")
                  + f"{100 * rep['ranking_agreement']:>8.1f}{100 * rep['label_agreement']:>9.1f}", flush=True)
        start = time.process_time()
        sleec = ProtoNNClassifier(budget_bytes=budget, multilabel_rule="top_k", multilabel_k=3, init_w="sleec",
                                  random_state=0).fit(X, Y)
        seconds = time.process_time() - start
        S = sleec.decision_function(Xt)
        print(f"{'  SLEEC start, float model':<28}" + "".join(f"{precision_at(k, S, Yt):>7.2f}" for k in (1, 3, 5))
              + f"{'':>8}{'':>9}{sleec.model_bytes:>8}{seconds:>8.1f}", flush=True)
        loss = 100 * (float_p["1"] - reports["int16"]["target_precision_at"]["1"])
        print(f"    float C ranks as the float model on {100 * reports['float']['ranking_agreement']:.1f}% of rows "
              f"({'>=' if reports['float']['ranking_agreement'] >= 0.99 else '<'} 99%); int16 P@1 loss "
              f"{loss:.2f} points ({'<=' if loss <= 1 else '>'} 1)")
    print()


SECTIONS = {"usps": section_usps, "letter": section_letter, "noise": section_noise,
            "regression": section_regression, "multilabel-seeds": section_multilabel_seeds,
            "multilabel": section_multilabel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="train on a quarter of the rows (smoke run)")
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="run these sections only")
    parser.add_argument("--rows", metavar="TEXT",
                        help="usps, letter: only the rows whose paper or setting holds TEXT (no baselines)")
    args = parser.parse_args()
    for name in args.only or SECTIONS:
        if name in ("usps", "letter"):
            SECTIONS[name](args.quick, args.rows)
        else:
            SECTIONS[name](args.quick)


if __name__ == "__main__":
    main()
