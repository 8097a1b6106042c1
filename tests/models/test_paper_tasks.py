"""The papers' other tasks: SNC's k-NN vote over the compressed set, the paper's γ schedule of the
nearest-prototype classifier."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

import tinycc_ml
from tinycc_ml.errors import DataError
from tinycc_ml.models.npc import paper_gamma_schedule
from tinycc_ml.models.snc import SNCClassifier


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:900] / 16.0, y[:900], X[900:1300] / 16.0, y[900:1300]


def test_snc_votes_over_the_k_nearest_compressed_points(digits):
    X, y, Xt, yt = digits
    clf = SNCClassifier(compression=0.05, n_neighbors=3, max_iter=10, random_state=0).fit(X, y)
    model = clf.to_model()
    assert model.k == 3
    # the vote, computed here from the learned points (ties: lowest class; nearest: lowest index)
    d = ((Xt[:, None, :] - model.prototypes[None]) ** 2).sum(-1)
    nearest = np.argsort(d, axis=1, kind="stable")[:, :3]
    votes = np.stack([np.bincount(model.labels[row], minlength=10) for row in nearest])
    np.testing.assert_array_equal(clf.predict(Xt), np.argmax(votes, axis=1))
    assert clf.score(Xt, yt) > 0.85
    graph = model.lower()
    assert any(graph.op(n) == "kvote" for n in graph.order())
    compiled = tinycc_ml.compile(model, precision="float").load()
    np.testing.assert_array_equal(compiled.predict(Xt), clf.predict(Xt))


@pytest.mark.parametrize("k", [0, 2.5, 10_000])
def test_snc_neighbour_count_is_checked(digits, k):
    X, y, _, _ = digits
    with pytest.raises(DataError, match="n_neighbors"):
        SNCClassifier(compression=0.05, n_neighbors=k, max_iter=2).fit(X, y)


def test_paper_gamma_schedule_follows_the_rule():
    rng = np.random.default_rng(0)
    X, P = rng.normal(size=(400, 5)), rng.normal(size=(30, 5))
    d = ((X[:, None] - P[None]) ** 2).sum(-1)
    schedule = paper_gamma_schedule(d)
    assert len(schedule) == 12 and np.all(np.diff(np.log(schedule)) > 0)
    np.testing.assert_allclose(np.diff(np.log(schedule)), np.log(schedule[1] / schedule[0]), rtol=1e-9)

    def top2_gap(gamma):
        w = np.sort(softmax(-gamma * d, axis=1), axis=1)
        return w[:, -1] - w[:, -2]

    # first value: the largest γ with gap < 0.5 on >= 80% of samples (a bit more breaks it)
    assert np.mean(top2_gap(schedule[0]) < 0.5) >= 0.8
    assert np.mean(top2_gap(schedule[0] * 1.05) < 0.5) < 0.8
    # last value: nearly every sample's weight sits on one prototype
    rest = 1 - softmax(-schedule[-1] * d, axis=1).max(axis=1)
    assert np.mean(rest < 1e-3) >= 0.99
