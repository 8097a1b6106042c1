"""The five estimators by scikit-learn's book: importable from tinycc_ml.models, scikit-learn's own
check_estimator suite, NotFittedError, DataError as ValueError, clone / Pipeline / GridSearchCV."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import tinycc_ml.models
from tinycc_ml.errors import DataError, DataTypeError, TinyccError
from tinycc_ml.models import (
    BonsaiClassifier,
    KNNClassifier,
    NearestPrototypeClassifier,
    ProtoNNClassifier,
    SNCClassifier,
)

# At their defaults, as a user constructs them: defaults must work on check_estimator's data sets of a
# few hundred rows as on tens of thousands (Bonsai's "auto" batch size, for one).
CHECKED = [ProtoNNClassifier(), BonsaiClassifier(), SNCClassifier(), NearestPrototypeClassifier(), KNNClassifier()]


@parametrize_with_checks(CHECKED)
def test_scikit_learn_check_estimator(estimator, check):
    check(estimator)


def test_all_five_importable_from_models():
    assert sorted(tinycc_ml.models.__all__) == sorted(
        ["BonsaiClassifier", "KNNClassifier", "NearestPrototypeClassifier", "ProtoNNClassifier", "SNCClassifier",
         "ProtoNNRegressor", "BonsaiRegressor"])
    for name in tinycc_ml.models.__all__:
        assert getattr(tinycc_ml.models, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tinycc_ml.models.Nope  # noqa: B018


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError) and issubclass(DataError, TinyccError)
    assert issubclass(DataTypeError, TypeError) and issubclass(DataTypeError, DataError)


@pytest.mark.parametrize("estimator", CHECKED, ids=lambda e: type(e).__name__)
def test_unfitted_raises_not_fitted(estimator):
    X = np.zeros((2, 4))
    for method in ("predict", "decision_function"):
        with pytest.raises(NotFittedError):
            getattr(clone(estimator), method)(X)
    with pytest.raises(NotFittedError):
        clone(estimator).to_model()


@pytest.mark.parametrize("estimator", CHECKED, ids=lambda e: type(e).__name__)
def test_clone_pipeline_and_grid_search(estimator):
    if "random_state" in estimator.get_params():  # a fixed seed: the scores below are thresholds
        estimator = clone(estimator).set_params(random_state=0)
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    pipe = make_pipeline(StandardScaler(), clone(estimator)).fit(X, labels)
    assert pipe.score(X, labels) > 0.85
    assert set(pipe.predict(X)) <= set(labels)
    step = type(estimator).__name__.lower()
    grid_param = {"KNNClassifier": ("k", [1, 5]), "SNCClassifier": ("max_iter", [3, 10]),
                  "NearestPrototypeClassifier": ("prototypes_per_class", [1, 3]),
                  "ProtoNNClassifier": ("n_iter", [3, 10]), "BonsaiClassifier": ("epochs", [20, 40])}
    name, values = grid_param[type(estimator).__name__]
    search = GridSearchCV(make_pipeline(StandardScaler(), clone(estimator)), {f"{step}__{name}": values},
                          cv=3).fit(X, labels)
    assert search.best_params_[f"{step}__{name}"] in values
    assert search.best_estimator_.score(X, labels) > 0.85
    twin = clone(search.best_estimator_)
    assert twin.get_params()[f"{step}__{name}"] == search.best_params_[f"{step}__{name}"]
    assert not hasattr(twin[-1], "classes_")
