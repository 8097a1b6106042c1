"""More fitted scikit-learn objects as tinycc-ml models (used by :mod:`tinycc_ml.models.from_sklearn`):

- linear regressors ``LinearRegression``, ``Ridge``, ``Lasso``, ``ElasticNet``, ``SGDRegressor``,
  ``LinearSVR`` (one target): the linear family with the regression task, one score = the value;
- ``MLPClassifier`` / ``MLPRegressor`` (relu, tanh, logistic, identity): the mlp family;
- ``GaussianNB``: the gaussian_nb family; ``SVC`` / ``NuSVC`` (rbf, linear, poly): the svm family;
- the linear Pipeline steps ``PCA`` (also whitened) and ``TruncatedSVD``: folded exactly into the
  following model's first mat-vec (linear and MLP models); other models refuse them by name.

Every converter checks that the estimator is fitted and that its arrays are finite (a
``ModelFileError`` naming the array otherwise, from ``models.saved.check_array``).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.models.sklearn_checks import dense, require_fitted

LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "Lasso", "ElasticNet", "SGDRegressor", "LinearSVR")
LINEAR_TRANSFORMS = ("PCA", "TruncatedSVD")
MLPS = ("MLPClassifier", "MLPRegressor")
SVMS = ("SVC", "NuSVC")
MORE = (*LINEAR_REGRESSORS, *MLPS, "GaussianNB", *SVMS)
REGRESSION = {"kind": "regression"}


def converters() -> dict:
    """Estimator class name -> converter (fitted estimator -> Model), for from_sklearn."""
    return {**dict.fromkeys(LINEAR_REGRESSORS, linear_regressor), **dict.fromkeys(MLPS, _mlp),
            "GaussianNB": _gaussian_nb, **dict.fromkeys(SVMS, _svc)}


def _mlp(estimator):
    from tinycc_ml.models.mlp import from_sklearn_mlp

    return from_sklearn_mlp(estimator)


def _gaussian_nb(estimator):
    from tinycc_ml.models.naive_bayes import from_sklearn_gnb

    return from_sklearn_gnb(estimator)


def _svc(estimator):
    from tinycc_ml.models.svm import from_sklearn_svc

    return from_sklearn_svc(estimator)


def linear_regressor(estimator):
    from tinycc_ml.models.linear import LinearModel

    name = type(estimator).__name__
    coef = dense(estimator.coef_, f"{name}.coef_")
    if coef.ndim == 2 and coef.shape[0] == 1:
        coef = coef[0]
    if coef.ndim != 1:
        raise CompileError(f"{name}: coef_ has shape {coef.shape}; only a single-target regressor can be compiled "
                           "(fit one regressor per target)")
    intercept = np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)
    if intercept.size not in (0, 1):
        raise CompileError(f"{name}: intercept_ has {intercept.size} values; only a single-target regressor "
                           "can be compiled")
    b = intercept if intercept.size else np.zeros(1)
    return LinearModel(coef[None, :], b, source=name).with_task(REGRESSION)


def transform_affine(step) -> tuple[np.ndarray, np.ndarray]:
    """(A, c) with ``step.transform(x) == A x + c`` for PCA and TruncatedSVD."""
    from tinycc_ml.models.saved import check_array

    name = type(step).__name__
    require_fitted(step)
    A = check_array(step.components_, "components_", name, ndim=2)
    if name == "PCA":
        if step.whiten:
            spread = np.sqrt(check_array(step.explained_variance_, "explained_variance_", name))
            if np.any(spread <= 0):
                raise CompileError("PCA(whiten=True) has a component of zero variance; it cannot be whitened")
            A = A / spread[:, None]
        mean = check_array(step.mean_, "mean_", name, shape=(A.shape[1],))
        return A, -A @ mean
    return A, np.zeros(A.shape[0])


def fold_linear_transform(model, step):
    """``model`` preceded by the linear map of ``step`` (PCA, TruncatedSVD), folded into its first
    mat-vec; models without one refuse by name."""
    A, c = transform_affine(step)
    if not hasattr(model, "with_input_map"):
        raise CompileError(f"a {type(step).__name__} step cannot be folded into a {model.family} model (no first "
                           "mat-vec to fold it into); compile the transform's output with a model fitted on it")
    if A.shape[0] != model.input_dim:
        raise CompileError(f"the {type(step).__name__} step gives {A.shape[0]} features but the model takes "
                           f"{model.input_dim}")
    return model.with_input_map(A, c)
