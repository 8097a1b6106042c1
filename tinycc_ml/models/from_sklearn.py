"""Fitted scikit-learn objects as tinycc-ml models, so ``tinycc_ml.compile`` takes them directly.

- ``KNeighborsClassifier`` (uniform weights, Euclidean distance) and ``NearestCentroid``
  (Euclidean, uniform priors): the prototype family (1-NN or a k-vote over reference points);
- ``LogisticRegression``, ``LinearSVC``, ``RidgeClassifier``, ``SGDClassifier``: the linear family;
- a ``Pipeline`` whose leading steps are ``StandardScaler``, ``MinMaxScaler`` (without clipping)
  or ``MaxAbsScaler`` and whose last step is any supported classifier (tinycc-ml's own
  estimators included): the scalers are folded into the model's input normalisation
  ``(x - mean) / std``;
- a fitted ``GridSearchCV`` / ``RandomizedSearchCV``: its ``best_estimator_``.

Class labels (``classes_``) are carried into the model. Anything else is refused with a
CompileError naming the class and listing what is supported.
"""

from __future__ import annotations

import copy

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.models.base import Model

LINEAR = ("LogisticRegression", "LinearSVC", "RidgeClassifier", "SGDClassifier")
SCALERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler")
SEARCHES = ("GridSearchCV", "RandomizedSearchCV")
TREES = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier", "DecisionTreeRegressor",
         "RandomForestRegressor", "ExtraTreesRegressor", "GradientBoostingClassifier", "GradientBoostingRegressor",
         "HistGradientBoostingClassifier", "HistGradientBoostingRegressor")  # models/trees_sklearn.py
BOOSTERS = ("XGBClassifier", "XGBRegressor", "LGBMClassifier", "LGBMRegressor", "Booster")  # trees_boosters.py
SUPPORTED = (
    f"{', '.join(TREES)}, XGBoost's and LightGBM's {', '.join(BOOSTERS)}, "
    "KNeighborsClassifier (weights='uniform', Euclidean / Minkowski p=2), NearestCentroid (Euclidean, uniform "
    f"priors), {', '.join(LINEAR)}, LinearRegression / Ridge / Lasso / ElasticNet / SGDRegressor / LinearSVR, "
    f"MLPClassifier / MLPRegressor, GaussianNB, SVC / NuSVC, a Pipeline of {' / '.join(SCALERS)} (and PCA / "
    "TruncatedSVD before a linear or MLP model) steps ending in a "
    f"supported estimator, a fitted {' / '.join(SEARCHES)} (its best_estimator_), and tinycc-ml's own estimators"
)


def is_sklearn_object(obj) -> bool:
    return type(obj).__module__.split(".")[0] in ("sklearn", "xgboost", "lightgbm")


def from_sklearn(estimator) -> Model:
    """The tinycc-ml model computing what the fitted ``estimator`` predicts (see module doc)."""
    name = type(estimator).__name__
    if name in SEARCHES:
        if not hasattr(estimator, "best_estimator_"):
            raise CompileError(f"{name} has no best_estimator_: it is not fitted, or was fitted with refit=False")
        return _convert(estimator.best_estimator_)
    if name == "Pipeline":
        return _from_pipeline(estimator)
    return _convert(estimator)


def _convert(estimator) -> Model:
    name = type(estimator).__name__
    if hasattr(estimator, "to_model") and not is_sklearn_object(estimator):
        return estimator.to_model()
    if name in SEARCHES or name == "Pipeline":
        return from_sklearn(estimator)
    from tinycc_ml.models.from_sklearn_more import converters as more_converters

    converters = {"KNeighborsClassifier": _from_kneighbors, "NearestCentroid": _from_nearest_centroid,
                  **dict.fromkeys(LINEAR, _from_linear), **dict.fromkeys(TREES, _from_trees),
                  **dict.fromkeys(BOOSTERS, _from_booster), **more_converters()}
    if name not in converters:
        raise CompileError(f"cannot compile a {name}; supported: {SUPPORTED}")
    if name != "Booster":  # a Booster is trained by construction
        _require_fitted(estimator)
    model = converters[name](estimator)
    if model.task["kind"] != "classification" or not hasattr(estimator, "classes_"):
        return model  # a regressor (or a multilabel network: labels are the indicator columns)
    try:
        return model.set_classes(getattr(estimator, "classes_", None), name)
    except ModelFileError as exc:
        raise CompileError(f"{exc}; only integer or string class labels can be compiled") from None


def _require_fitted(estimator) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise CompileError(f"{type(estimator).__name__} is not fitted; call fit(X, y) before compiling") from None


def _dense(array, what: str) -> np.ndarray:
    from scipy import sparse

    if sparse.issparse(array):
        raise CompileError(f"{what} is a sparse matrix; fit on dense data to compile")
    return np.asarray(array, dtype=np.float64)


def _from_linear(estimator) -> Model:
    from tinycc_ml.models.linear import LinearModel

    name = type(estimator).__name__
    coef = _dense(estimator.coef_, f"{name}.coef_")
    if coef.ndim == 1:  # RidgeClassifier keeps a binary problem's weights as one vector
        coef = coef[None, :]
    if coef.ndim != 2 or coef.shape[0] not in (1, len(estimator.classes_)):
        raise CompileError(f"{name}: coef_ has shape {coef.shape}; only single-output classifiers are supported")
    intercept = np.broadcast_to(np.asarray(estimator.intercept_, dtype=np.float64), (coef.shape[0],))
    return LinearModel(coef, intercept, source=name)


def _from_trees(estimator) -> Model:
    from tinycc_ml.models.trees_sklearn import from_sklearn_trees

    return from_sklearn_trees(estimator)


def _from_booster(estimator) -> Model:
    from tinycc_ml.models import trees_boosters

    library = type(estimator).__module__.split(".")[0]
    if library == "xgboost":
        return trees_boosters.from_xgboost(estimator)
    if library == "lightgbm":
        return trees_boosters.from_lightgbm(estimator)
    raise CompileError(f"cannot compile a {type(estimator).__name__} from {library}; supported: {SUPPORTED}")


def _from_kneighbors(estimator) -> Model:
    from tinycc_ml.models.prototypes import PrototypeModel

    name = type(estimator).__name__
    if estimator.weights != "uniform":
        raise CompileError(f"{name} with weights={estimator.weights!r} is not supported; only weights='uniform'")
    metric, params = estimator.effective_metric_, estimator.effective_metric_params_ or {}
    if metric != "euclidean" or params:
        described = f"metric={estimator.metric!r}" + (f", p={estimator.p}" if estimator.metric == "minkowski" else "")
        raise CompileError(f"{name} with {described} is not supported; only the Euclidean distance "
                           "(metric='euclidean', or 'minkowski' with p=2)")
    labels = np.asarray(estimator._y)  # scikit-learn's class index per training row
    if labels.ndim != 1:
        raise CompileError(f"{name} fitted on multi-output y is not supported")
    points = _dense(estimator._fit_X, f"{name}'s training data")
    return PrototypeModel(points, labels, len(estimator.classes_), k=int(estimator.n_neighbors), source=name)


def _from_nearest_centroid(estimator) -> Model:
    from tinycc_ml.models.prototypes import PrototypeModel

    name = type(estimator).__name__
    if estimator.metric != "euclidean":
        raise CompileError(f"{name} with metric={estimator.metric!r} is not supported; only metric='euclidean'")
    n_classes = len(estimator.classes_)
    if not np.allclose(getattr(estimator, "class_prior_", np.full(n_classes, 1 / n_classes)), 1 / n_classes):
        raise CompileError(f"{name} with non-uniform class priors is not supported (it predicts by a discriminant, "
                           "not the nearest centroid); use priors='uniform'")
    centroids = _dense(estimator.centroids_, f"{name}.centroids_")
    return PrototypeModel(centroids, np.arange(n_classes), n_classes, k=1, source=name)


def scaler_affine(scaler) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) with ``scaler.transform(x) == (x - mean) / std``."""
    name = type(scaler).__name__
    _require_fitted(scaler)
    dim = int(scaler.n_features_in_)
    if name == "StandardScaler":
        mean = scaler.mean_ if scaler.with_mean else np.zeros(dim)
        std = scaler.scale_ if scaler.with_std else np.ones(dim)
    elif name == "MinMaxScaler":
        if scaler.clip:
            raise CompileError("MinMaxScaler with clip=True is not supported (clipping is not an affine map)")
        # x * scale_ + min_ == (x - (-min_ / scale_)) / (1 / scale_)
        mean, std = -scaler.min_ / scaler.scale_, 1.0 / scaler.scale_
    elif name == "MaxAbsScaler":
        mean, std = np.zeros(dim), scaler.scale_
    else:
        raise CompileError(f"a Pipeline step {name} is not supported; leading steps may be {', '.join(SCALERS)}")
    return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)


def fold_input_affine(model: Model, mean: np.ndarray, std: np.ndarray) -> Model:
    """A copy of ``model`` that first maps its input by ``(x - mean) / std``: composed with the
    model's own normalisation ``(x' - m) / s`` it is ``(x - (mean + std * m)) / (std * s)``."""
    if not (hasattr(model, "mean") and hasattr(model, "std")):
        raise CompileError(f"a scaler cannot be folded into a {model.family} model (it has no input normalisation)")
    if mean.shape != (model.input_dim,):
        raise CompileError(f"the scaler has {mean.shape[0]} features but the model takes {model.input_dim}")
    own_mean = np.zeros(model.input_dim) if model.mean is None else model.mean
    own_std = np.ones(model.input_dim) if model.std is None else model.std
    folded = copy.copy(model)
    folded.mean, folded.std = mean + std * own_mean, std * own_std
    return folded


def _from_pipeline(pipeline) -> Model:
    steps = [(name, step) for name, step in pipeline.steps if step not in (None, "passthrough")]
    if not steps:
        raise CompileError("the Pipeline has no steps to compile")
    *scalers, (_, last) = steps
    from tinycc_ml.models.from_sklearn_more import LINEAR_TRANSFORMS, fold_linear_transform

    for name, step in scalers:
        if type(step).__name__ not in SCALERS + LINEAR_TRANSFORMS:
            raise CompileError(f"Pipeline step {name!r} is a {type(step).__name__}, which is not supported; leading "
                               f"steps may be {', '.join(SCALERS + LINEAR_TRANSFORMS)}, the last a supported "
                               f"estimator ({SUPPORTED})")
    model = _convert(last)
    if model.family == "trees":  # thresholds moved onto the raw inputs, exactly (see fold_scalers)
        from tinycc_ml.models.trees_sklearn import fold_scalers

        for _, scaler in scalers:
            scaler_affine(scaler)  # refuses what is not a supported scaler
        return fold_scalers(model, [s for _, s in scalers]).set_classes(
            None if model._classes is None else model.classes, "Pipeline") if scalers else model
    for _, step in reversed(scalers):
        if type(step).__name__ in LINEAR_TRANSFORMS:
            model = fold_linear_transform(model, step)
        else:
            model = fold_input_affine(model, *scaler_affine(step))
    return model
