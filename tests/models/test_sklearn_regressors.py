"""scikit-learn's linear regressors, and PCA / TruncatedSVD steps folded into a linear model: the
compiled value equals the estimator's (float) and keeps R² within 0.01 (int16)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, LogisticRegression, Ridge, SGDRegressor
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVR

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import CompileError, ModelFileError

REGRESSORS = {
    "linear": LinearRegression,
    "ridge": Ridge,
    "lasso": lambda: Lasso(alpha=0.01),
    "elastic": lambda: ElasticNet(alpha=0.001),
    "sgd": lambda: make_pipeline(StandardScaler(), SGDRegressor(random_state=0)),
    "linear_svr": lambda: make_pipeline(StandardScaler(), LinearSVR(C=10.0, max_iter=20000, random_state=0)),
    "pca": lambda: make_pipeline(StandardScaler(), PCA(6, whiten=True), StandardScaler(), Ridge()),
    "svd": lambda: make_pipeline(TruncatedSVD(5, random_state=0), LinearRegression()),
}


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X[:300], y[:300], X[300:], y[300:]


@pytest.mark.parametrize("kind", sorted(REGRESSORS))
def test_compiled_regressor_keeps_r2(kind, diabetes):
    require_target("host")
    X, y, Xt, yt = diabetes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = REGRESSORS[kind]().fit(X, y)
    want = est.predict(Xt)
    float_c = tinycc_ml.compile(est, name="reg").load().predict(Xt)
    np.testing.assert_allclose(float_c, want, rtol=1e-5, atol=1e-3)
    assert r2_score(yt, float_c) == pytest.approx(r2_score(yt, want), abs=1e-6)
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X, name="reg").load().predict(Xt)
    assert abs(r2_score(yt, int16) - r2_score(yt, want)) <= 0.01


def test_pca_before_a_classifier_folds_into_its_weights():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    est = make_pipeline(StandardScaler(), PCA(20), LogisticRegression(max_iter=2000)).fit(X[:1000], y[:1000])
    model = tinycc_ml.api.as_model(est)
    assert model.family == "linear" and model.W.shape == (10, 64)
    np.testing.assert_array_equal(model.predict(X[1000:]), est.predict(X[1000:]))


@pytest.mark.parametrize("make, error, message", [
    (lambda: LinearRegression().fit(np.eye(3), np.eye(3)), CompileError, "only a single-target regressor"),
    (lambda: Ridge(), CompileError, "Ridge is not fitted"),
    (lambda: make_pipeline(PCA(1)).fit(np.eye(3)), CompileError, "cannot compile a PCA"),
])
def test_bad_regressors_are_refused(make, error, message):
    with pytest.raises(error, match=message):
        tinycc_ml.compile(make())


def test_non_finite_coefficients_are_refused(tmp_path):
    est = LinearRegression().fit(np.eye(3), [1.0, 2.0, 3.0])
    est.coef_[1] = np.nan
    with pytest.raises(ModelFileError, match="LinearRegression: W holds a non-finite value"):
        tinycc_ml.compile(est, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
