"""A PCA / TruncatedSVD step before a kernel SVM or a distance model (kNN, NearestCentroid) is folded into
the model's first map: the compiled model predicts what the pipeline predicts, and its integer builds run
bit-exact on the chips."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import as_model
from tinycc_ml.testing import check_model

ESTIMATORS = {"svc-rbf": lambda: SVC(), "svc-poly": lambda: SVC(kernel="poly", degree=2),
              "svc-linear": lambda: SVC(kernel="linear"), "knn": lambda: KNeighborsClassifier(3),
              "centroid": lambda: NearestCentroid()}
STEPS = {"scaler+pca": lambda: (StandardScaler(), PCA(10, random_state=0)),
         "whitened-pca": lambda: (PCA(8, whiten=True, random_state=0),),
         "scaler+svd": lambda: (StandardScaler(), TruncatedSVD(6, random_state=0))}


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:600], y[:600], X[600:900]


@pytest.mark.parametrize("steps", sorted(STEPS))
@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_the_pipeline_compiles_to_what_it_predicts(digits, estimator, steps, tmp_path):
    require_target("host")
    X, y, X_test = digits
    pipeline = make_pipeline(*STEPS[steps](), ESTIMATORS[estimator]()).fit(X, y)
    model = as_model(pipeline)
    assert model.input_dim == 64
    np.testing.assert_array_equal(model.predict(X_test), pipeline.predict(X_test))
    got = tinycc_ml.compile(pipeline, target="host").load().predict(X_test)
    np.testing.assert_array_equal(got, pipeline.predict(X_test))
    path = tinycc_ml.save_model(pipeline, tmp_path / "m.npz")
    np.testing.assert_array_equal(tinycc_ml.load_model(path).predict(X_test), pipeline.predict(X_test))


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_integer_builds_are_exact_on_the_chips(digits, target, tmp_path):
    require_target(target)
    X, y, _ = digits
    X, y = X[:150], y[:150]  # the kernel values of 150 support vectors at most: within the ATmega328P's RAM
    for estimator in ("svc-rbf", "knn"):
        pipeline = make_pipeline(*STEPS["scaler+pca"](), ESTIMATORS[estimator]()).fit(X, y)
        check_model(target, as_model(pipeline), X[:20], "int16", tmp_path / estimator, calibration=X)
