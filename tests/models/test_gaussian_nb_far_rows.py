"""GaussianNB float builds compute scikit-learn's joint log-likelihood without clipping (issue 36, item 5):
rows 3 to 6 sigma from a class, and far beyond, get scikit-learn's class and probabilities, never NaN.
The model is fitted on designed data (every class's points at +-sigma around its mean: exact variances,
no BLAS involved)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

import tinycc_ml
from tinycc_ml.errors import DataError

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


def test_float_build_answers_no_class_where_its_distances_could_leave_float32(nb):
    """Rows whose distances could overflow float32 (where scikit-learn's float64 does not) get no class, not
    float32's answer: -1 and NaN scores from the C, a DataError from the predictor (the input bound)."""
    rows = np.array([[1e30] * D, [-3e38] * D, [1e20] * D])
    compiled = tinycc_ml.compile(nb)
    predictor = compiled.load()
    scores, predictions = predictor.run_raw(rows.astype(np.float32))
    assert np.all(predictions == -1) and np.all(np.isnan(scores))
    with pytest.raises(DataError, match="row 0, feature 0 is 1e"):
        predictor.predict_proba(rows)
    near = rows[:1] * 0 + compiled.report["input_bound"]["bound"] / 2  # within the bound: scikit-learn's answer
    np.testing.assert_array_equal(predictor.predict(near), nb.predict(near))


def test_integer_build_agrees_within_its_documented_bound(nb):
    """Integer builds saturate far distances (16-bit code); on rows within 2 sigma of a class they
    predict scikit-learn's labels."""
    rng = np.random.default_rng(1)
    c = rng.integers(0, len(MEANS), size=300)
    rows = MEANS[c, None] + SIGMAS[c, None] * rng.uniform(-2, 2, size=(300, D))
    compiled = tinycc_ml.compile(nb, precision="int16", calibration=rows).load()
    assert np.mean(compiled.predict(rows) == nb.predict(rows)) >= 0.99


def test_float_probabilities_keep_the_soft_terms_beside_the_hard_ones():
    """digits: a row breaking the same constant pixels of its three best classes (joint log-likelihoods near
    -1.18e7, 4.3 apart) had probabilities 4.4e-2 off scikit-learn's when every term went into one float32 sum;
    the hard features summed apart keep them within 1e-4."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    model = GaussianNB().fit(X_train, y_train)
    jll = np.sort(model.predict_joint_log_proba(X_test), axis=1)
    assert np.any((jll[:, -1] < -1e6) & (jll[:, -1] - jll[:, -2] < 10))  # the case is there to be tested
    compiled = tinycc_ml.compile(model, calibration=X_train).load()
    np.testing.assert_allclose(compiled.predict_proba(X_test), model.predict_proba(X_test), atol=1e-4)
    np.testing.assert_array_equal(compiled.predict(X_test), model.predict(X_test))
