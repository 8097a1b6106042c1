"""CalibratedClassifierCV over every classifier the scikit-learn importer reads (issue 38 item 4): the compiled
host C's probabilities within 1e-4 of scikit-learn's predict_proba and its labels scikit-learn's predict, on
held-out rows, per base family, two classes and more, sigmoid and isotonic, ensemble either way.

Inputs are rounded to float32 first (the compiled C reads float32; trees compare against thresholds between the
training values), so both sides see the same rows."""

from __future__ import annotations

import shutil
import subprocess
import warnings

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.decomposition import PCA
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC, NuSVC
from sklearn.tree import DecisionTreeClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import as_model
from tinycc_ml.errors import CompileError

BASES = {
    "tree": lambda: DecisionTreeClassifier(max_depth=4, random_state=0),
    "forest": lambda: RandomForestClassifier(10, max_depth=4, random_state=0),
    "extra_trees": lambda: ExtraTreesClassifier(10, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=10, random_state=0),
    "hist_boosting": lambda: HistGradientBoostingClassifier(max_iter=10, random_state=0),
    "svc_ovr": lambda: make_pipeline(StandardScaler(), SVC()),
    "svc_ovo": lambda: make_pipeline(StandardScaler(), SVC(kernel="poly", degree=2, decision_function_shape="ovo")),
    "nu_svc_pca": lambda: make_pipeline(StandardScaler(), PCA(5, random_state=0), NuSVC(nu=0.3)),
    "gaussian_nb": GaussianNB,
    "mlp": lambda: make_pipeline(StandardScaler(), MLPClassifier((8,), max_iter=300, random_state=0)),
    "knn": lambda: make_pipeline(MinMaxScaler(), KNeighborsClassifier(5)),
    "knn1": lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(1)),
}


def _data(name: str):
    if name == "iris_binary":  # versicolor against virginica
        X, y = load_iris(return_X_y=True)
        X, y = X[y > 0], y[y > 0]
    else:
        X, y = {"wine": load_wine, "breast_cancer": load_breast_cancer, "iris": load_iris,
                "digits": load_digits}[name](return_X_y=True)
    return X.astype(np.float32).astype(np.float64), y


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence of the small MLPs
        return est.fit(X, y)


def _check(est, test, atol=1e-4):
    want = est.predict_proba(test)
    model = as_model(est)
    np.testing.assert_allclose(model.predict_proba(test), want, atol=1e-9)
    result = tinycc_ml.compile(est, name="cal")
    host = result.load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= atol
    assert host.predict(test).tolist() == est.predict(test).tolist()
    return result


# (binary data, multi-class data) per family and method: the isotonic calibrators a float build refuses (knots
# float32 cannot tell apart) are checked on other data below
DATA = {("gaussian_nb", "isotonic"): ("iris_binary", "wine"), ("hist_boosting", "isotonic"): ("iris_binary", "wine"),
        ("boosting", "isotonic"): ("breast_cancer", "iris")}


@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
@pytest.mark.parametrize("classes", ["binary", "multi"])
def test_calibrated_classifiers_over_each_family_follow_scikit_learn(base, method, classes):
    require_target("host")
    data = DATA.get((base, method), ("breast_cancer", "wine"))[classes == "multi"]
    X, y = _data(data)
    ensemble = (method == "sigmoid") == (classes == "binary")  # both ways over each family
    est = _fit(CalibratedClassifierCV(BASES[base](), method=method, ensemble=ensemble, cv=3), X[::2], y[::2])
    _check(est, X[1::2])


def test_digits_ten_classes_and_front_steps():
    """Ten classes, a scaler and PCA in front of the calibrated classifier (a front map before the folds)."""
    require_target("host")
    X, y = _data("digits")
    est = _fit(make_pipeline(StandardScaler(), PCA(20, random_state=0),
                             CalibratedClassifierCV(SVC(), method="sigmoid", cv=3)), X[::2], y[::2])
    _check(est, X[1::2])
    forest = _fit(make_pipeline(MinMaxScaler(), CalibratedClassifierCV(
        RandomForestClassifier(10, max_depth=6, random_state=0), method="isotonic", cv=3)), X[::2], y[::2])
    _check(forest, X[1::2])


def test_saturated_probabilities_are_calibrated_through_their_complements():
    """GaussianNB on breast cancer: probabilities within 1e-11 of 1 whose isotonic knots float32 cannot tell apart
    but their complements 1 - p can (isotonic_calibrate_pq); scikit-learn's own float64 rounding there moves its
    answer by ~1e-5, so the model is held to 1e-4 too."""
    require_target("host")
    X, y = _data("breast_cancer")
    est = _fit(CalibratedClassifierCV(GaussianNB(), method="isotonic", cv=3), X[::2], y[::2])
    test, want = X[1::2], est.predict_proba(X[1::2])
    assert np.max(np.abs(as_model(est).predict_proba(test) - want)) <= 1e-4
    host = tinycc_ml.compile(est, name="cal").load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= 1e-4
    assert host.predict(test).tolist() == est.predict(test).tolist()


@pytest.mark.parametrize("base", ["gaussian_nb", "forest", "svc_ovr", "logistic"])
def test_a_fold_that_saw_two_of_three_classes_pairs_as_scikit_learn_does(base):
    """A fold trained without class 2: its one column (the second class's response) is calibrated against its
    first class, which scikit-learn then normalises to probability 1 (or uniform where it is 0)."""
    require_target("host")
    X, y = _data("wine")
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    half = order[: len(y) // 2]
    no_two = np.array([i for i in half if y[i] != 2])
    cv = [(no_two, order[len(y) // 2:]), (order[len(y) // 2:], half)]
    classifier = make_pipeline(StandardScaler(), LogisticRegression()) if base == "logistic" else BASES[base]()
    est = _fit(CalibratedClassifierCV(classifier, method="sigmoid", cv=cv), X, y)
    assert len(est.calibrated_classifiers_[0].calibrators) == 1
    _check(est, X)


def test_the_model_file_keeps_it(tmp_path):
    X, y = _data("wine")
    est = _fit(CalibratedClassifierCV(BASES["forest"](), method="isotonic", cv=3), X[::2], y[::2])
    saved = tinycc_ml.load_model(tinycc_ml.save_model(est, tmp_path / "cal.npz"))
    assert saved.family == "calibrated_folds"
    np.testing.assert_allclose(saved.predict_proba(X[1::2]), est.predict_proba(X[1::2]), atol=1e-9)


def test_what_a_float_build_cannot_reproduce_is_refused():
    X, y = _data("breast_cancer")
    saturated = _fit(CalibratedClassifierCV(GaussianNB(), method="isotonic", cv=3, ensemble=False), X[::2], y[::2])
    with pytest.raises(CompileError, match="gaussian_nb model's response at knots .* closer than a float build tells"):
        tinycc_ml.compile(saturated)
    X, y = _data("wine")
    forest = _fit(CalibratedClassifierCV(BASES["forest"](), cv=3), X, y)
    with pytest.raises(CompileError, match="precision float only"):
        tinycc_ml.compile(forest, precision="int16", calibration=X)
    centroid = _fit(CalibratedClassifierCV(NearestCentroid(), cv=3), X, y)
    with pytest.raises(CompileError, match="over a NearestCentroid is not supported"):
        tinycc_ml.compile(centroid)


@pytest.mark.parametrize("base", ["knn1", "svc_ovr", "gaussian_nb"])
def test_the_c_is_strict_prefixed_and_the_same_each_time(base, tmp_path):
    """-Wall -Wextra -Werror -pedantic, every symbol the model's prefix, byte-identical files for one input."""
    gcc, nm = shutil.which("gcc"), shutil.which("nm")
    assert gcc and nm, "gcc and nm are needed (binutils)"
    X, y = _data("wine")
    est = _fit(CalibratedClassifierCV(BASES[base](), method="isotonic", cv=3), X, y)
    first, second = (tinycc_ml.compile(est, name="cal_b", out_dir=tmp_path / f"out{i}") for i in range(2))
    assert first.files == second.files
    obj = tmp_path / "cal_b.o"
    subprocess.run([gcc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2", "-c",
                    str(tmp_path / "out0" / "cal_b.c"), "-o", str(obj)], check=True, capture_output=True, text=True)
    defined = subprocess.run([nm, "--defined-only", str(obj)], check=True, capture_output=True, text=True).stdout
    named = [line.split()[-1] for line in defined.splitlines() if line.strip()]
    assert all(s.startswith("cal_b_") for s in named if not s.startswith(".")), named


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_calibrated_folds_run_on_the_m4(sim_target, tmp_path):
    """Boosting, an SVC and an MLP (probabilities read with their complements) under CalibratedClassifierCV, float
    builds in the Cortex-M4 simulator: their scores (the probabilities) within 1e-4 of scikit-learn's, their labels
    scikit-learn's."""
    from tinycc_ml.codegen.backend import get_backend

    X, y = _data("wine")
    rows = X[1::2][:10]
    for i, base in enumerate(["hist_boosting", "svc_ovr", "mlp"]):
        est = _fit(CalibratedClassifierCV(BASES[base](), method="isotonic", cv=3), X[::2], y[::2])
        out = tmp_path / base
        result = tinycc_ml.compile(est, target=sim_target, out_dir=out, name=f"cal{i}")
        run = get_backend(sim_target).simulate(out, result.output, rows)
        assert np.max(np.abs(np.asarray(run.scores) - est.predict_proba(rows))) <= 1e-4
        assert est.classes_[np.asarray(run.predictions)].tolist() == est.predict(rows).tolist()


def test_a_frozen_classifier_is_calibrated_as_fitted():
    """FrozenEstimator (cv="prefit"'s successor): one fold, the classifier as it was fitted."""
    require_target("host")
    from sklearn.frozen import FrozenEstimator

    X, y = _data("wine")
    forest = BASES["forest"]().fit(X[::3], y[::3])
    est = _fit(CalibratedClassifierCV(FrozenEstimator(forest), method="isotonic"), X[1::3], y[1::3])
    _check(est, X[2::3])


@pytest.mark.parametrize("corrupt", ["response", "column_class", "family", "calibrator", "folds"])
def test_a_damaged_model_file_is_a_model_file_error(corrupt, tmp_path):
    from tinycc_ml.errors import ModelFileError
    from tinycc_ml.models.saved import save_model_file

    X, y = _data("wine")
    model = as_model(_fit(CalibratedClassifierCV(BASES["svc_ovr"](), method="sigmoid", cv=2), X, y))
    arrays, meta = model.arrays(), model.meta()
    if corrupt == "response":
        meta["folds"][0]["response"] = {"kind": "ovr", "factor": 1.0, "columns": [7]}
    elif corrupt == "column_class":
        meta["folds"][1]["column_class"] = ["a", "b", "c"]
    elif corrupt == "family":
        meta["folds"][0]["family"] = "calibrated_folds"
    elif corrupt == "calibrator":
        del arrays["c1.ab"]
    else:
        meta["folds"] = "all of them"
    path = save_model_file(tmp_path / "bad.npz", "calibrated_folds", arrays, {**meta, "classes": [0, 1, 2]})
    with pytest.raises(ModelFileError):
        tinycc_ml.load_model(path)
