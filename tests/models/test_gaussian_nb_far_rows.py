"""GaussianNB float builds compute scikit-learn's joint log-likelihood without clipping (issue 36, item 5):
rows 3 to 6 sigma from a class, and far beyond, get scikit-learn's class and probabilities, never NaN.
The model is fitted on designed data (every class's points at +-sigma around its mean: exact variances,
no BLAS involved)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

import tinycc_ml

D = 8
MEANS = np.array([0.0, 0.0, 2.0, -3.0])
SIGMAS = np.array([0.1, 1.0, 0.5, 2.0])  # a tight class has a large constant: clipping its distance flipped rows


@pytest.fixture(scope="module")
def nb():
    signs = np.array([[1, -1] * (D // 2), [-1, 1] * (D // 2)] * 8, dtype=np.float64)  # 16 rows, mean 0, var 1
    X = np.vstack([m + s * signs for m, s in zip(MEANS, SIGMAS)])
    y = np.repeat(np.arange(len(MEANS)), len(signs))
    return GaussianNB().fit(X, y)


def _rows(n: int, seed: int) -> np.ndarray:
    """Rows k sigma (k in 0..6) from a class's mean on every feature, random signs; and far rows."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, len(MEANS), size=n)
    k = rng.choice([0.5, 1.0, 2.0, 3.0, 4.0, 5.5, 6.0], size=(n, 1))
    rows = MEANS[c, None] + k * SIGMAS[c, None] * rng.choice([-1.0, 1.0], size=(n, D))
    far = np.array([[1e3] * D, [-1e3] * D, [1e6] * D, [1e15] * D, [-1e17] * D])
    return np.vstack([rows, far])


def test_float_build_predicts_what_scikit_learn_predicts_on_far_rows(nb):
    rows = _rows(400, 0)
    compiled = tinycc_ml.compile(nb, precision="float").load()
    np.testing.assert_array_equal(compiled.predict(rows), nb.predict(rows))
    proba = compiled.predict_proba(rows)
    assert not np.isnan(proba).any()
    np.testing.assert_allclose(proba, nb.predict_proba(rows), atol=1e-5)


def test_float_build_has_no_nan_beyond_float32_range(nb):
    """A distance beyond float32's range is read as its largest value: finite probabilities (documented:
    such rows get the class of the largest constant among the overflowing ones)."""
    rows = np.array([[1e30] * D, [-3e38] * D, [1e20] * D])
    proba = tinycc_ml.compile(nb).load().predict_proba(rows)
    assert np.all(np.isfinite(proba)) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)


def test_integer_build_agrees_within_its_documented_bound(nb):
    """Integer builds saturate far distances (16-bit code); on rows within 2 sigma of a class they
    predict scikit-learn's labels."""
    rng = np.random.default_rng(1)
    c = rng.integers(0, len(MEANS), size=300)
    rows = MEANS[c, None] + SIGMAS[c, None] * rng.uniform(-2, 2, size=(300, D))
    compiled = tinycc_ml.compile(nb, precision="int16", calibration=rows).load()
    assert np.mean(compiled.predict(rows) == nb.predict(rows)) >= 0.99
