"""SNC, nearest-prototype and kNN estimators and their shared PrototypeModel container."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from tinycc_ml.errors import DataError, ModelFileError
from tinycc_ml.models.base import MODEL_FAMILIES
from tinycc_ml.models.knn import KNNClassifier
from tinycc_ml.models.npc import NearestPrototypeClassifier
from tinycc_ml.models.prototypes import PrototypeModel
from tinycc_ml.models.saved import read_model_file
from tinycc_ml.models.snc import SNCClassifier, stratified_sample


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    # small matrices: threaded BLAS on a shared machine only adds spin-waiting (10x slower)
    with threadpool_limits(limits=1):
        yield


def sqdist(A, B):
    return np.maximum((A * A).sum(1)[:, None] - 2 * A @ B.T + (B * B).sum(1)[None], 0)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def fitted(digits):
    Xtr, _, ytr, _ = digits
    return {
        "snc": SNCClassifier(n_prototypes=30, random_state=0).fit(Xtr, ytr),
        "npc": NearestPrototypeClassifier(prototypes_per_class=3, epochs_per_stage=4, n_restarts=1,
                                          random_state=0).fit(Xtr, ytr),
        "knn": KNNClassifier(k=3).fit(Xtr, ytr),
    }


def kmeans_accuracy(Xtr, ytr, Xte, yte, per_class):
    P = np.concatenate([KMeans(per_class, n_init=3, random_state=0).fit(Xtr[ytr == c]).cluster_centers_
                        for c in range(10)])
    lab = np.repeat(np.arange(10), per_class)
    d = sqdist(Xte, P)
    return float((lab[d.argmin(1)] == yte).mean())


def test_npc_beats_kmeans_prototypes(digits, fitted):
    Xtr, Xte, ytr, yte = digits
    base = kmeans_accuracy(Xtr, ytr, Xte, yte, 3)
    acc = fitted["npc"].score(Xte, yte)
    assert acc >= 0.93
    assert acc > base


def test_snc_close_to_full_1nn(digits, fitted):
    Xtr, Xte, ytr, yte = digits
    full = KNNClassifier(k=1).fit(Xtr, ytr).score(Xte, yte)
    acc = fitted["snc"].score(Xte, yte)  # 30 points = 2.4% of the training set
    assert acc >= 0.92
    assert acc >= full - 0.06
    # the stratified sample SNC starts from does clearly worse than the optimised points
    idx = stratified_sample(ytr, 30, np.random.default_rng(0))
    assert acc > KNNClassifier(k=1).fit(Xtr[idx], ytr[idx]).score(Xte, yte) + 0.03


@pytest.mark.parametrize("metric", ["diagonal", "low-rank"])
def test_snc_metrics(digits, metric):
    Xtr, Xte, ytr, yte = digits
    est = SNCClassifier(n_prototypes=30, metric=metric, n_components=16, random_state=0).fit(Xtr, ytr)
    assert est.score(Xte, yte) >= 0.88
    model = est.to_model()
    np.testing.assert_array_equal(model.predict(Xte), est.predict(Xte))
    if metric == "low-rank":
        assert model.prototypes.shape == (30, 16) and model.transform.shape == (16, 64)
        assert est.model_bytes == 4 * (30 * 16 + 30 + 16 * 64)


@pytest.mark.parametrize("name", ["snc", "npc", "knn"])
def test_model_matches_estimator_and_scores(digits, fitted, name):
    _, Xte, _, _ = digits
    est = fitted[name]
    model = est.to_model()
    pred = est.predict(Xte)
    np.testing.assert_array_equal(model.predict(Xte), pred)
    scores = model.scores(Xte)
    assert scores.shape == (len(Xte), 10)
    np.testing.assert_array_equal(np.argmax(scores, axis=1), pred)
    assert model.input_dim == 64 and model.n_outputs == 10


def test_scores_definition(fitted, digits):
    _, Xte, _, _ = digits
    model = fitted["npc"].to_model()
    d = ((Xte[:5, None, :] - model.prototypes[None]) ** 2).sum(-1)
    expect = np.stack([-d[:, model.labels == c].min(1) for c in range(10)], axis=1)
    np.testing.assert_allclose(model.scores(Xte[:5]), expect, atol=1e-9)
    votes = fitted["knn"].to_model().scores(Xte)
    assert np.all(votes.sum(1) == 3)


def brute_knn(Xtr, ytr, Xte, k, n_classes):
    out = []
    for x in Xte[:200]:
        d = ((Xtr - x) ** 2).sum(1)
        near = np.argsort(d, kind="stable")[:k]
        votes = np.bincount(ytr[near], minlength=n_classes)
        out.append(int(np.argmax(votes)))
    return np.array(out)


@pytest.mark.parametrize("k", [1, 3, 4, 5])
def test_knn_equals_brute_force_and_sklearn(digits, k):
    Xtr, Xte, ytr, yte = digits
    est = KNNClassifier(k=k).fit(Xtr, ytr)
    pred = est.predict(Xte)
    np.testing.assert_array_equal(pred[:200], brute_knn(Xtr, ytr, Xte, k, 10))
    ref = KNeighborsClassifier(n_neighbors=k, algorithm="brute").fit(Xtr, ytr).predict(Xte)
    # sklearn picks among equal distances in its own order; compare where the k-th distance is unique
    d = np.sort(sqdist(Xte, Xtr), axis=1)
    clear = d[:, k - 1] < d[:, k] - 1e-9
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(pred[clear], ref[clear])
    if k == 1:
        assert est.score(Xte, yte) >= 0.97
        assert est.model_bytes == 4 * (len(ytr) * 64 + len(ytr))


def test_tie_rules():
    # two points at the same distance from the query, labels 1 and 0: the smaller label wins
    model = PrototypeModel([[1.0, 0.0], [-1.0, 0.0], [5.0, 5.0]], [1, 0, 2], n_classes=3)
    assert model.predict([[0.0, 0.0]])[0] == 0
    assert list(model.labels) == [0, 1, 2]  # stored sorted by label
    # tied vote (one each of classes 2 and 1 with k = 2) goes to the smaller class id
    knn = PrototypeModel([[0.0, 0.0], [1.0, 0.0], [9.0, 9.0]], [2, 1, 0], n_classes=3, k=2)
    assert knn.predict([[0.1, 0.0]])[0] == 1
    np.testing.assert_array_equal(knn.scores([[0.1, 0.0]])[0], [0, 1, 1])


def test_breast_cancer_binary_standardized(cancer):
    Xtr, Xte, ytr, yte = cancer
    raw = KNNClassifier(k=1).fit(Xtr, ytr).score(Xte, yte)
    std = KNNClassifier(k=1, standardize=True).fit(Xtr, ytr)
    assert std.score(Xte, yte) >= 0.92 and std.score(Xte, yte) > raw
    snc = SNCClassifier(compression=0.05, standardize=True, random_state=0).fit(Xtr, ytr)
    assert snc.score(Xte, yte) >= 0.92
    model = snc.to_model()
    assert model.mean is not None and model.n_outputs == 2
    np.testing.assert_array_equal(model.predict(Xte), snc.predict(Xte))
    npc = NearestPrototypeClassifier(prototypes_per_class=2, standardize=True, epochs_per_stage=4,
                                     n_restarts=1).fit(Xtr, ytr)
    assert npc.score(Xte, yte) >= 0.92


@pytest.mark.parametrize("name", ["snc", "npc", "knn"])
def test_save_load_round_trip(tmp_path, digits, fitted, name):
    _, Xte, _, _ = digits
    model = fitted[name].to_model()
    path = fitted[name].save(tmp_path / f"{name}.npz")
    family, arrays, meta = read_model_file(path)
    assert family == "prototype" and MODEL_FAMILIES[family] is PrototypeModel
    loaded = PrototypeModel.from_arrays(arrays, meta, str(path))
    np.testing.assert_array_equal(loaded.scores(Xte), model.scores(Xte))
    assert loaded.k == model.k and loaded.model_bytes == model.model_bytes


def test_round_trip_with_transform(tmp_path):
    rng = np.random.default_rng(1)
    model = PrototypeModel(rng.normal(size=(6, 3)), [0, 1, 2, 0, 1, 2], 3, mean=rng.normal(size=5),
                           std=rng.uniform(0.5, 2, size=5), transform=rng.normal(size=(3, 5)))
    path = model.save(tmp_path / "m.npz")
    loaded = PrototypeModel.from_arrays(*read_model_file(path)[1:], source=str(path))
    X = rng.normal(size=(20, 5))
    np.testing.assert_array_equal(loaded.scores(X), model.scores(X))
    assert model.model_bytes == 4 * (18 + 6 + 5 + 5 + 15)


def test_bad_model_arrays_name_source_and_array():
    good = {"prototypes": np.zeros((2, 3)), "labels": np.array([0, 1])}
    meta = {"k": 1, "n_classes": 2}
    bad_cases = [
        ({**good, "prototypes": np.array([[0, 0, np.nan], [0, 0, 0]])}, meta, "prototypes"),
        ({**good, "labels": np.array([0, 5])}, meta, "labels"),
        ({**good, "labels": np.array([0, 0])}, meta, "class 1"),
        ({**good, "mean": np.zeros(3)}, meta, "mean and std"),
        ({**good, "transform": np.zeros((4, 5))}, meta, "transform"),
        (good, {"k": 3, "n_classes": 2}, "k"),
        (good, {"n_classes": 2}, "k"),
        ({"labels": good["labels"]}, meta, "prototypes"),
    ]
    for arrays, m, word in bad_cases:
        with pytest.raises(ModelFileError, match="file.npz") as info:
            PrototypeModel.from_arrays(arrays, m, "file.npz")
        assert word in str(info.value)


@pytest.mark.parametrize("make", [
    lambda: SNCClassifier(n_prototypes=4),
    lambda: NearestPrototypeClassifier(prototypes_per_class=1, max_stages=1, epochs_per_stage=1, n_restarts=1),
    lambda: KNNClassifier(k=1),
])
def test_bad_input_raises_data_error(make):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.arange(40) % 4
    cases = {
        "nan": (np.where(np.arange(120).reshape(40, 3) == 7, np.nan, X), y),
        "inf": (np.where(np.arange(120).reshape(40, 3) == 7, np.inf, X), y),
        "float labels": (X, y + 0.5),
        "2-D labels": (X, np.ones((40, 4))),
        "single class": (X, np.zeros(40, dtype=int)),
        "length": (X, y[:-1]),
        "1-D X": (X[:, 0], y),
    }
    for name, (Xb, yb) in cases.items():
        with pytest.raises(DataError):
            make().fit(Xb, yb)
        assert name  # names the case in a failing traceback
    # any label values: the same fit, predictions mapped to the labels
    labels = np.array(["east", "north", "south", "west"])  # sorted: same class order
    plain, named = make().fit(X, y), make().fit(X, labels[y])
    np.testing.assert_array_equal(named.predict(X), labels[plain.predict(X)])
    gapped = make().fit(X, 10 * y - 5)
    np.testing.assert_array_equal(gapped.predict(X), 10 * plain.predict(X) - 5)


def test_too_few_samples_raise_data_error():
    X = np.random.default_rng(0).normal(size=(10, 2))
    y = np.arange(10) % 2
    with pytest.raises(DataError, match="prototypes"):
        SNCClassifier(n_prototypes=11).fit(X, y)
    small = NearestPrototypeClassifier(prototypes_per_class=6, max_stages=1, n_restarts=1).fit(X, y)
    assert small.prototype_counts_.tolist() == [5, 5]  # capped at the class size
    with pytest.raises(DataError, match="k = 11"):
        KNNClassifier(k=11).fit(X, y)


def test_sklearn_conventions(digits):
    est = NearestPrototypeClassifier(prototypes_per_class=4, random_state=3)
    params = est.get_params()
    assert params["prototypes_per_class"] == 4 and params["random_state"] == 3
    est.set_params(prototypes_per_class=2)
    assert est.prototypes_per_class == 2
    from sklearn.base import clone
    assert clone(SNCClassifier(compression=0.1)).compression == 0.1
    with pytest.raises(NotFittedError):
        KNNClassifier().predict(np.zeros((1, 2)))


def test_verbose_progress_is_logged(digits, caplog, capsys):
    Xtr, _, ytr, _ = digits
    caplog.set_level(logging.INFO, logger="tinycc_ml")
    SNCClassifier(n_prototypes=20, max_iter=5, verbose=1).fit(Xtr, ytr)
    NearestPrototypeClassifier(prototypes_per_class=2, max_stages=1, epochs_per_stage=1, n_restarts=1,
                               verbose=1).fit(Xtr, ytr)
    assert capsys.readouterr().out == ""
    assert "SNCClassifier" in caplog.text and "gamma" in caplog.text and "stage 0" in caplog.text


def test_kmeans_only_and_restarts(digits):
    Xtr, Xte, ytr, yte = digits
    km = NearestPrototypeClassifier(prototypes_per_class=3, max_stages=0, n_restarts=1).fit(Xtr, ytr)
    assert len(km.stages_) == 1 and km.score(Xte, yte) >= 0.85
    two = NearestPrototypeClassifier(prototypes_per_class=3, epochs_per_stage=2, n_restarts=2).fit(Xtr, ytr)
    one = NearestPrototypeClassifier(prototypes_per_class=3, epochs_per_stage=2, n_restarts=1).fit(Xtr, ytr)
    assert two.stages_[-1][1] <= one.stages_[-1][1]  # restart 0 is the single run; the best loss is kept
