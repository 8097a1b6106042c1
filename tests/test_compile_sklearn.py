"""scikit-learn's own fitted objects compiled through tinycc_ml.compile: the compiled C predicts what
scikit-learn predicts (float), integer builds stay close, labels carry through, the rest is refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.decomposition import PCA
from sklearn.ensemble import AdaBoostClassifier
from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler
from sklearn.svm import LinearSVC

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import as_model, load_model
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models import KNNClassifier
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.runtime.simulate import run_on_target

ESTIMATORS = {
    "knn": lambda: KNeighborsClassifier(n_neighbors=3),
    "centroid": NearestCentroid,
    "logistic": lambda: LogisticRegression(max_iter=3000),
    "linear_svc": lambda: LinearSVC(max_iter=5000, random_state=0),
    "ridge": RidgeClassifier,
    "sgd": lambda: SGDClassifier(random_state=0),
}


def _split(loader):
    X, y = loader(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


DATA = {"digits": _split(load_digits), "cancer": _split(load_breast_cancer)}


def _fit(make, scaler, Xtr, ytr):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings on unscaled data: the fit is still a fit
        return (make() if scaler is None else make_pipeline(scaler(), make())).fit(Xtr, ytr)


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("scaler", [None, StandardScaler], ids=["raw", "standard"])
@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_compiled_predictions_equal_scikit_learn(kind, scaler, data):
    Xtr, Xte, ytr, yte = DATA[data]
    est = _fit(ESTIMATORS[kind], scaler, Xtr, ytr)
    expected = est.predict(Xte)
    model = as_model(est)
    assert model.family == ("prototype" if kind in ("knn", "centroid") else "linear")
    assert np.mean(model.predict(Xte) == expected) == 1.0  # the numpy reference (float64)
    compiled = tinycc_ml.compile(est).load().predict(Xte)
    assert np.mean(compiled == expected) >= 0.999
    reference = np.mean(expected == yte)
    q = tinycc_ml.compile(est, precision="int16", calibration=Xtr).load().predict(Xte)
    # Known gap: kNN on raw breast_cancer features (ranges 0.001 .. 2500) in int16 keeps squared
    # distances in 16 bits, so near neighbours tie and the k-vote shifts (-1.8 pp); with a scaler
    # Pipeline it is within 0.5 pp like every other case.
    max_loss = 0.02 if (kind, scaler, data) == ("knn", None, "cancer") else 0.005
    assert np.mean(q == yte) >= reference - max_loss, (np.mean(q == yte), reference)


@pytest.mark.parametrize("scaler", [MinMaxScaler, MaxAbsScaler, lambda: MinMaxScaler((-2, 3))])
@pytest.mark.parametrize("kind", ["logistic", "knn", "sgd"])
def test_other_scalers_fold_into_the_input(kind, scaler):
    Xtr, Xte, ytr, _ = DATA["cancer"]
    est = _fit(ESTIMATORS[kind], scaler, Xtr, ytr)
    assert np.mean(tinycc_ml.compile(est).load().predict(Xte) == est.predict(Xte)) >= 0.999


def test_two_scalers_and_own_estimator_in_a_pipeline():
    Xtr, Xte, ytr, _ = DATA["cancer"]
    est = make_pipeline(MinMaxScaler(), StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xtr, ytr)
    assert np.mean(tinycc_ml.compile(est).load().predict(Xte) == est.predict(Xte)) >= 0.999
    own = make_pipeline(StandardScaler(), KNNClassifier(k=3, standardize=True)).fit(Xtr, ytr)
    assert np.mean(tinycc_ml.compile(own).load().predict(Xte) == own.predict(Xte)) >= 0.999


def test_search_objects_compile_their_best_estimator():
    Xtr, Xte, ytr, _ = DATA["cancer"]
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    grid = GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0]}, cv=3).fit(Xtr, ytr)
    assert np.mean(tinycc_ml.compile(grid).load().predict(Xte) == grid.predict(Xte)) >= 0.999
    rand = RandomizedSearchCV(KNeighborsClassifier(), {"n_neighbors": [1, 3, 5]}, n_iter=2, cv=3,
                              random_state=0).fit(Xtr, ytr)
    assert np.mean(tinycc_ml.compile(rand).load().predict(Xte) == rand.predict(Xte)) >= 0.999


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_labels_carry_through(tmp_path, kind):
    X, y = load_iris(return_X_y=True)
    for labels in (np.array([3, 5, 9]), np.array(["setosa", "versicolor", "virginica"])):
        est = _fit(ESTIMATORS[kind], StandardScaler, X, labels[y])
        model = as_model(est)
        assert model.classes.tolist() == est.classes_.tolist()
        model.save(tmp_path / "m.npz")
        back = load_model(tmp_path / "m.npz")
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_array_equal(tinycc_ml.compile(back).load().predict(X), est.predict(X))


def test_binary_linear_uses_the_sign_rule():
    Xtr, Xte, ytr, _ = DATA["cancer"]
    est = _fit(ESTIMATORS["logistic"], StandardScaler, Xtr, np.array(["no", "yes"])[ytr])
    model = as_model(est)
    assert isinstance(model, LinearModel) and model.binary and model.n_classes == 2
    np.testing.assert_allclose(model.scores(Xte)[:, 0], est.decision_function(Xte), rtol=1e-9, atol=1e-9)
    header = tinycc_ml.compile(est, name="cancer").files["cancer.h"]
    assert '#define CANCER_LABEL_NAMES { "no", "yes" }' in header and "#define CANCER_N_SCORES 1" in header


@pytest.mark.parametrize("target, data", [("avr", "cancer"), ("cortex-m0", "digits")])
def test_linear_family_on_simulated_targets(tmp_path, target, data):
    require_target(target)
    Xtr, Xte, ytr, _ = DATA[data]
    est = _fit(ESTIMATORS["logistic"], StandardScaler, Xtr, ytr)
    rows = Xte[:60]
    result = tinycc_ml.compile(est, target=target, precision="int16", calibration=Xtr, out_dir=tmp_path,
                               name="lin")
    out = result.output
    xin = quantise(rows, out.input_scale, 16).astype(np.int16)
    run = run_on_target(target, [tmp_path / "lin.c"], tmp_path / "lin.h", "lin", xin, out.n_scores,
                        out.input_ctype, out.score_ctype)
    host = tinycc_ml.compile(est, precision="int16", calibration=Xtr).load()
    host_scores, host_pred = host.run_raw(xin)
    np.testing.assert_array_equal(run.predictions, host_pred)  # bit-exact with the host build
    np.testing.assert_array_equal(run.scores, host_scores)
    assert np.mean(est.classes_[run.predictions] == est.predict(rows)) >= 0.95


@pytest.mark.parametrize("make, message", [
    (lambda: AdaBoostClassifier(n_estimators=2).fit([[0], [1]], [0, 1]),
     "cannot compile a AdaBoostClassifier; supported"),
    (lambda: LogisticRegression(), "LogisticRegression is not fitted"),
    (lambda: KNNClassifier(), "KNNClassifier is not fitted"),
    (lambda: KNeighborsClassifier(1, weights="distance").fit([[0], [1]], [0, 1]), "weights='distance'"),
    (lambda: KNeighborsClassifier(1, p=1).fit([[0], [1]], [0, 1]), "metric='minkowski', p=1"),
    (lambda: KNeighborsClassifier(1, metric="cosine").fit([[0], [1]], [0, 1]), "metric='cosine'"),
    (lambda: NearestCentroid(metric="manhattan").fit([[0], [1]], [0, 1]), "metric='manhattan'"),
    (lambda: NearestCentroid(priors=[0.9, 0.1]).fit([[0], [1]], [0, 1]), "non-uniform class priors"),
    (lambda: make_pipeline(PCA(1), GaussianNB()).fit([[0, 1], [1, 0], [2, 2], [3, 1]], [0, 1, 1, 0]),
     "a PCA step cannot be folded into a gaussian_nb model"),
    (lambda: make_pipeline(Normalizer(), LogisticRegression()).fit([[0, 1], [1, 0], [2, 2]], [0, 1, 1]),
     "step 'normalizer' is a Normalizer, which is not supported"),
    (lambda: make_pipeline(MinMaxScaler(clip=True), LogisticRegression()).fit([[0], [1]], [0, 1]), "clip=True"),
    (lambda: GridSearchCV(LogisticRegression(), {"C": [1]}, cv=2, refit=False).fit([[0], [1]] * 4, [0, 1] * 4),
     "no best_estimator_"),
    (lambda: object(), "cannot compile a object"),
])
def test_unsupported_objects_are_refused(make, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = make()
    with pytest.raises(CompileError, match=message):
        tinycc_ml.compile(obj)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_knn_ties_of_repeated_training_rows(algorithm):
    """Repeated training rows with other labels tie exactly. The points were sorted by label, so a tie went to the
    smaller label; now the build keeps the training order and, among equal distances, the lower training index
    (scikit-learn's rule wherever its float64 distances of equal rows come out equal). Where the k-th and the
    next distance tie, which row scikit-learn keeps depends on the rounding of its own distance computation (its
    BLAS's, its tree's): the build's answer there is the documented rule, checked here directly; on every other
    row, ties inside the k included, it is scikit-learn's."""
    rng = np.random.default_rng(49)
    points = rng.normal(size=(40, 3))
    X = np.repeat(points, 3, axis=0)[rng.permutation(120)]  # every position three times, in shuffled order
    y = rng.integers(0, 3, size=120)
    rows = np.concatenate([rng.normal(size=(300, 3)), points + 1e-3 * rng.normal(size=(40, 3))])
    d = np.sum((rows[:, None, :] - X[None]) ** 2, axis=2)
    nearest = np.lexsort((np.broadcast_to(np.arange(120), d.shape), d), axis=1)  # by distance, then index
    inside_ties = 0
    for k in (2, 3, 4, 5, 6):
        est = KNeighborsClassifier(n_neighbors=k, algorithm=algorithm).fit(X, y)
        predictor = tinycc_ml.compile(est, precision="float").load()
        ranked = np.take_along_axis(d, nearest, axis=1)
        group = np.abs(d - ranked[:, k - 1:k]) <= 1e-9 * ranked[:, k - 1:k]  # the rows tied with the k-th
        mixed = np.array([len(set(y[g])) > 1 for g in group])
        boundary = (ranked[:, k] - ranked[:, k - 1] <= 1e-9 * ranked[:, k]) & mixed  # which ones are kept matters
        inside_ties += int(np.sum(~boundary & (ranked[:, 1] - ranked[:, 0] <= 1e-9 * ranked[:, 1])))
        np.testing.assert_array_equal(predictor.predict(rows[~boundary]), est.predict(rows[~boundary]))
        votes = np.zeros((len(rows), 3))
        np.add.at(votes, (np.arange(len(rows))[:, None], y[nearest[:, :k]]), 1.0)
        np.testing.assert_array_equal(predictor.predict(rows), np.argmax(votes, axis=1))  # the rule, every row
        np.testing.assert_allclose(as_model(est).scores(rows), votes)
    assert inside_ties > 0
