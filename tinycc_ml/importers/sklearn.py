"""Fitted scikit-learn objects (and XGBoost's and LightGBM's scikit-learn estimators) as tinycc-ml
models, so ``tinycc_ml.compile`` takes them directly.

- ``KNeighborsClassifier`` (uniform weights, Euclidean distance) and ``NearestCentroid``
  (Euclidean, uniform priors): the prototype family (1-NN or a k-vote over reference points);
- ``LogisticRegression``, ``LinearSVC``, ``RidgeClassifier``, ``SGDClassifier``: the linear family;
- linear regressors ``LinearRegression``, ``Ridge``, ``Lasso``, ``ElasticNet``, ``SGDRegressor``,
  ``LinearSVR`` (one target): the linear family with the regression task, one score = the value;
- ``MLPClassifier`` / ``MLPRegressor`` (relu, tanh, logistic, identity): the mlp family;
- ``GaussianNB``: the gaussian_nb family; ``SVC`` / ``NuSVC`` (rbf, linear, poly): the svm family;
- trees and tree ensembles: the trees family (see "Trees" below); XGBoost's and LightGBM's estimators
  through their own model text (``importers/xgboost.py``, ``importers/lightgbm.py``);
- a ``Pipeline`` whose leading steps are ``StandardScaler``, ``MinMaxScaler`` (without clipping)
  or ``MaxAbsScaler`` and whose last step is any supported estimator (tinycc-ml's own
  estimators included): the scalers are folded into the model's input normalisation
  ``(x - mean) / std`` (trees: into their thresholds, exactly); ``PCA`` (also whitened) and
  ``TruncatedSVD`` steps are folded exactly into the following model's first mat-vec (linear and MLP
  models); other models refuse them by name;
- a ``Pipeline`` whose first steps are ``tinycc_ml.features``' front-end steps (framing, windows, spectra, mel
  filter banks, log, DCT, sensor features), then any Pipeline above: a ``FrontEndModel`` whose C takes the raw
  samples (float builds);
- a fitted ``GridSearchCV`` / ``RandomizedSearchCV``: its ``best_estimator_``;
- ``CalibratedClassifierCV`` (sigmoid, isotonic) over a linear classifier (the calibrated family) or over a
  tree, forest, boosting, SVC / NuSVC, GaussianNB, MLP or k-neighbours classifier (calibrated_folds), in a
  Pipeline either way.

Class labels (``classes_``) are carried into the model. Every converter checks that the estimator is
fitted and that its arrays are finite (a ``ModelFileError`` naming the array otherwise, from
``models.saved.check_array``). Anything else is refused with a CompileError naming the class and
listing what is supported.

Trees:

- ``DecisionTreeClassifier``, ``RandomForestClassifier``, ``ExtraTreesClassifier``: vector leaves, each
  tree's class probabilities (``predict_proba`` of the tree); the scores are their sum, n_trees x the
  forest's ``predict_proba``, and the prediction its argmax, as scikit-learn's ``predict``;
- ``DecisionTreeRegressor``, ``RandomForestRegressor``, ``ExtraTreesRegressor``: scalar leaves, each
  divided by the number of trees (the forest's mean);
- ``GradientBoostingClassifier`` / ``Regressor``: one scalar-leaf tree per stage and class, leaves times
  the learning rate (as scikit-learn adds them), base = the init estimator's constant raw prediction
  (its prior); binary: one score, class 1 where it is > 0;
- ``HistGradientBoostingClassifier`` / ``Regressor``: the same from its predictors (leaves already
  shrunk) and baseline; categorical splits are refused.

Single-output trees only. Inputs are compared after rounding to float32, as scikit-learn's trees do
(HistGradientBoosting compares float64 inputs; the two agree except for an input within float32
rounding of a threshold). A NaN input goes where scikit-learn sends it: the node's
``missing_go_to_left`` (trees and HistGradientBoosting's predictors); a threshold of +inf (a split of
the present values from the missing ones) becomes the largest float32 (an input of +inf then goes
right, where scikit-learn sends it left).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.features.base import FrontEndStep
from tinycc_ml.importers import lightgbm, xgboost
from tinycc_ml.importers.tree_tables import REGRESSION, TreeTable
from tinycc_ml.models.base import Model
from tinycc_ml.models.calibrated import METHODS as CALIBRATION_METHODS
from tinycc_ml.models.calibrated import CalibratedFoldsModel, CalibratedModel
from tinycc_ml.models.front_end import FrontEndModel
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.models.lowering import absorb_normalisation
from tinycc_ml.models.mlp import ACTIVATIONS, OUTPUTS, MLPModel
from tinycc_ml.models.naive_bayes import GaussianNBModel
from tinycc_ml.models.proba import proba_from_scores
from tinycc_ml.models.prototypes import PrototypeModel
from tinycc_ml.models.saved import check_array
from tinycc_ml.models.svm import KERNELS, SVMModel, pair_matrix
from tinycc_ml.models.trees import TreeEnsembleModel

LINEAR = ("LogisticRegression", "LinearSVC", "RidgeClassifier", "SGDClassifier")
LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "Lasso", "ElasticNet", "SGDRegressor", "LinearSVR")
LINEAR_TRANSFORMS = ("PCA", "TruncatedSVD")
MLPS = ("MLPClassifier", "MLPRegressor")
SVMS = ("SVC", "NuSVC")
CALIBRATED = "CalibratedClassifierCV"
ONE_VS_REST = "OneVsRestClassifier"
SCALERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler")
SEARCHES = ("GridSearchCV", "RandomizedSearchCV")
FOREST_CLASSIFIERS = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier")
FOREST_REGRESSORS = ("DecisionTreeRegressor", "RandomForestRegressor", "ExtraTreesRegressor")
BOOSTING = ("GradientBoostingClassifier", "GradientBoostingRegressor")
HIST_BOOSTING = ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
TREES = FOREST_CLASSIFIERS + FOREST_REGRESSORS + BOOSTING + HIST_BOOSTING
BOOSTERS = ("XGBClassifier", "XGBRegressor", "LGBMClassifier", "LGBMRegressor", "Booster")
SUPPORTED = (
    f"{', '.join(TREES)}, XGBoost's and LightGBM's {', '.join(BOOSTERS)}, "
    "KNeighborsClassifier (weights='uniform', Euclidean / Minkowski p=2), NearestCentroid (Euclidean, uniform "
    f"priors), {', '.join(LINEAR)}, LinearRegression / Ridge / Lasso / ElasticNet / SGDRegressor / LinearSVR, "
    f"MLPClassifier / MLPRegressor, GaussianNB, SVC / NuSVC, {CALIBRATED} (sigmoid or isotonic) over any of these "
    f"classifiers but NearestCentroid and the boosters, {ONE_VS_REST} over a linear classifier, a Pipeline of "
    f"{' / '.join(SCALERS)} (and PCA / TruncatedSVD before a linear, MLP, kernel SVM or distance model) steps "
    f"ending in a supported estimator, a fitted {' / '.join(SEARCHES)} (its best_estimator_), and tinycc-ml's own "
    "estimators"
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
    if name not in CONVERTERS:
        raise CompileError(f"cannot compile a {name}; supported: {SUPPORTED}")
    if name != "Booster":  # a Booster is trained by construction
        require_fitted(estimator)
    model = CONVERTERS[name](estimator)
    if model.task["kind"] != "classification" or not hasattr(estimator, "classes_"):
        return model  # a regressor (or a multilabel network: labels are the indicator columns)
    try:
        return model.set_classes(getattr(estimator, "classes_", None), name)
    except ModelFileError as exc:
        raise CompileError(f"{exc}; only integer or string class labels can be compiled") from None


def require_fitted(estimator) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise CompileError(f"{type(estimator).__name__} is not fitted; call fit(X, y) before compiling") from None


def dense(array, what: str) -> np.ndarray:
    from scipy import sparse

    if sparse.issparse(array):
        raise CompileError(f"{what} is a sparse matrix; fit on dense data to compile")
    return np.asarray(array, dtype=np.float64)


def _from_linear(estimator) -> Model:
    name = type(estimator).__name__
    coef = dense(estimator.coef_, f"{name}.coef_")
    if coef.ndim == 1:  # RidgeClassifier keeps a binary problem's weights as one vector
        coef = coef[None, :]
    if coef.ndim != 2 or coef.shape[0] not in (1, len(estimator.classes_)):
        raise CompileError(f"{name}: coef_ has shape {coef.shape}; only single-output classifiers are supported")
    intercept = np.broadcast_to(np.asarray(estimator.intercept_, dtype=np.float64), (coef.shape[0],))
    model = LinearModel(coef, intercept, source=name)
    return model.with_proba(linear_proba_rule(estimator, model), name)


def linear_proba_rule(estimator, model: LinearModel) -> str | None:
    """The rule by which the estimator's own ``predict_proba`` reads its decision values (binary logistic,
    multinomial softmax, or one-vs-rest logistic normalised: the solver, the loss and the scikit-learn
    version decide), found by asking it on probe rows; None when it has no predict_proba or none of the
    rules gives its answer."""
    try:
        predict_proba = estimator.predict_proba  # SGDClassifier: only for log_loss / modified_huber
    except AttributeError:
        return None
    # rows whose decision values spread over [-4, 4] (where the rules differ: far below 0 a logistic is an
    # exponential, and one-vs-rest normalised logistics a softmax)
    targets = np.random.default_rng(0).uniform(-4.0, 4.0, size=(32, model.n_outputs))
    probe = np.linalg.lstsq(model.W, (targets - model.b).T, rcond=None)[0].T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a model fitted on a DataFrame warns about the probe's missing names
        want = np.asarray(predict_proba(probe), dtype=np.float64)
    scores = model.scores(probe)
    for rule in (("logistic", "modified_huber") if model.binary else ("softmax", "logistic_ovr", "modified_huber")):
        if want.shape == (len(probe), model.n_classes) and np.allclose(proba_from_scores(scores, rule), want,
                                                                        rtol=1e-9, atol=1e-12):
            return rule
    return None


def _from_linear_regressor(estimator) -> Model:
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


def _from_kneighbors(estimator) -> Model:
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
    points = dense(estimator._fit_X, f"{name}'s training data")
    return PrototypeModel(points, labels, len(estimator.classes_), k=int(estimator.n_neighbors), source=name,
                          proba=True)


def _from_nearest_centroid(estimator) -> Model:
    name = type(estimator).__name__
    if estimator.metric != "euclidean":
        raise CompileError(f"{name} with metric={estimator.metric!r} is not supported; only metric='euclidean'")
    n_classes = len(estimator.classes_)
    if not np.allclose(getattr(estimator, "class_prior_", np.full(n_classes, 1 / n_classes)), 1 / n_classes):
        raise CompileError(f"{name} with non-uniform class priors is not supported (it predicts by a discriminant, "
                           "not the nearest centroid); use priors='uniform'")
    centroids = dense(estimator.centroids_, f"{name}.centroids_")
    return PrototypeModel(centroids, np.arange(n_classes), n_classes, k=1, source=name,
                          proba_head=_nearest_centroid_proba_head(estimator, centroids))


def _nearest_centroid_proba_head(estimator, centroids: np.ndarray):
    """(W, b) whose softmax(W x + b) is NearestCentroid's predict_proba: its discriminant
    -||(x - c_k) / sigma||^2 + 2 log prior_k (sigma the within-class spread, 1 where it is 0) less the term
    -||x / sigma||^2 that every class shares; None for a scikit-learn without the spread (no predict_proba)."""
    spread = getattr(estimator, "within_class_std_dev_", None)
    if spread is None:
        return None
    spread = check_array(spread, "within_class_std_dev_", type(estimator).__name__)
    inverse_variance = 1.0 / np.where(spread != 0, spread, 1.0) ** 2
    prior = np.asarray(estimator.class_prior_, dtype=np.float64)
    weights = 2.0 * centroids * inverse_variance
    bias = -(centroids**2) @ inverse_variance + 2.0 * np.log(prior)
    return weights, bias


def _from_mlp(estimator) -> MLPModel:
    """The network of a fitted MLPClassifier / MLPRegressor."""
    name = type(estimator).__name__
    require_fitted(estimator)
    if estimator.activation not in ACTIVATIONS:
        raise CompileError(f"{name} with activation={estimator.activation!r} is not supported; supported: "
                           f"{', '.join(ACTIVATIONS)}")
    out = getattr(estimator, "out_activation_", None)
    if out not in OUTPUTS:
        raise CompileError(f"{name} with output activation {out!r} is not supported; supported: {', '.join(OUTPUTS)}")
    if out == "identity" and estimator.n_outputs_ != 1:
        raise CompileError(f"{name} fitted on {estimator.n_outputs_} targets; only a single-target regressor can "
                           "be compiled (fit one per target)")
    weights = [dense(W, f"{name}.coefs_[{i}]").T for i, W in enumerate(estimator.coefs_)]
    biases = [np.asarray(b, dtype=np.float64) for b in estimator.intercepts_]
    return MLPModel(weights, biases, estimator.activation, out, source=name)


def _from_gaussian_nb(estimator) -> GaussianNBModel:
    name = type(estimator).__name__
    require_fitted(estimator)
    var = getattr(estimator, "var_", None)
    if var is None:  # scikit-learn < 1.0 called it sigma_
        var = estimator.sigma_
    prior = check_array(estimator.class_prior_, "class_prior_", name)
    if np.any(prior <= 0):
        raise ModelFileError(f"{name}: class_prior_ holds a prior <= 0 ({prior.min()}); its log is not finite")
    return GaussianNBModel(estimator.theta_, var, np.log(prior), source=name)


def _from_svc(estimator) -> SVMModel:
    name = type(estimator).__name__
    require_fitted(estimator)
    kernel = estimator.kernel
    if kernel not in KERNELS:
        described = "a callable kernel" if callable(kernel) else f"kernel={kernel!r}"
        raise CompileError(f"{name} with {described} is not supported; supported kernels: {', '.join(KERNELS)}")
    shape = estimator.decision_function_shape
    if shape not in ("ovo", "ovr"):
        raise CompileError(f"{name} with decision_function_shape={shape!r} is not supported; 'ovo' or 'ovr'")
    break_ties = bool(estimator.break_ties) and len(estimator.classes_) > 2
    if break_ties and shape == "ovo":
        raise CompileError(f"{name} with break_ties=True and decision_function_shape='ovo': scikit-learn refuses "
                           "to predict with it")
    sv = dense(estimator.support_vectors_, f"{name}.support_vectors_")
    dual = dense(estimator.dual_coef_, f"{name}.dual_coef_")
    intercept = np.asarray(estimator.intercept_, dtype=np.float64)
    n_classes = len(estimator.classes_)
    if n_classes == 2:  # scikit-learn's public dual_coef_ / intercept_ already give class 1 for > 0
        pair = dual.reshape(1, -1)
    else:
        pair = pair_matrix(dual, np.asarray(estimator.n_support_))
    gamma = float(estimator._gamma) if kernel != "linear" else 1.0
    prob_a = prob_b = None
    if getattr(estimator, "probability", False):
        with warnings.catch_warnings():  # scikit-learn >= 1.9 deprecates the attributes with the option
            warnings.simplefilter("ignore", FutureWarning)
            prob_a, prob_b = (np.asarray(getattr(estimator, k), dtype=np.float64) for k in ("probA_", "probB_"))
        if prob_a.size == 0:  # probability set after fit: libsvm fitted no Platt constants
            prob_a = prob_b = None
        elif n_classes == 2:  # libsvm's decision is minus scikit-learn's public one
            prob_a = -prob_a
    return SVMModel(sv, pair, intercept, n_classes, kernel, gamma, float(estimator.coef0), int(estimator.degree),
                    prob_a=prob_a, prob_b=prob_b, decision_shape=shape, break_ties=break_ties, source=name)


# ---------------------------------------------------------------- trees


def _missing_left(t):
    """A fitted ``tree_``'s side for missing values (scikit-learn >= 1.3; before, NaN was refused)."""
    return getattr(t, "missing_go_to_left", None)


def _trees_of(estimator) -> list:
    return list(estimator.estimators_) if hasattr(estimator, "estimators_") else [estimator]


def _single_output(estimator, name: str) -> None:
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise CompileError(f"{name} fitted on {estimator.n_outputs_} outputs is not supported; only single-output "
                           "models")


def _forest_classifier(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    _single_output(estimator, name)
    k = len(estimator.classes_)
    b = TreeTable(k)
    for tree in _trees_of(estimator):
        t = tree.tree_
        value = np.asarray(t.value, dtype=np.float64)[:, 0, :k]
        total = value.sum(axis=1, keepdims=True)
        proba = np.divide(value, total, out=np.zeros_like(value), where=total > 0)  # as predict_proba
        b.add(t.feature, t.threshold, t.children_left, t.children_right, proba, default_left=_missing_left(t))
    return b.model(np.zeros(k), estimator.n_features_in_, False, name, proba="normalise")


def _forest_regressor(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    _single_output(estimator, name)
    trees = _trees_of(estimator)
    b = TreeTable(1)
    for tree in trees:
        t = tree.tree_
        b.add(t.feature, t.threshold, t.children_left, t.children_right,
              np.asarray(t.value, dtype=np.float64)[:, 0, :1] / len(trees), output=0, default_left=_missing_left(t))
    return b.model([0.0], estimator.n_features_in_, False, name).with_task(REGRESSION)


# each loss: (the regressor's inverse link, the factor folded into the margin); the exponential loss's
# predict_proba is expit(2 raw), so its margins are doubled (exact in float) for the logistic rule
GB_LOSSES = {"squared_error": ("identity", 1.0), "absolute_error": ("identity", 1.0), "huber": ("identity", 1.0),
             "quantile": ("identity", 1.0), "log_loss": ("identity", 1.0), "exponential": ("identity", 2.0)}
HIST_GB_LOSSES = {"squared_error": ("identity", 1.0), "absolute_error": ("identity", 1.0),
                  "quantile": ("identity", 1.0), "gamma": ("exp", 1.0), "poisson": ("exp", 1.0),
                  "log_loss": ("identity", 1.0)}


def boosting_link(estimator, losses: dict) -> tuple[str, float]:
    """The link and margin factor of a gradient-boosting estimator's loss; CompileError for another loss."""
    loss = getattr(estimator, "loss", None)
    if not isinstance(loss, str) or loss not in losses:
        raise CompileError(f"{type(estimator).__name__} with loss={loss!r} is not supported; supported: "
                           f"{', '.join(losses)}")
    return losses[loss]


def _gradient_boosting(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    init = estimator.init_
    if not (init == "zero" or type(init).__name__ in ("DummyClassifier", "DummyRegressor")):
        raise CompileError(f"{name} with init={type(init).__name__} is not supported; only the default prior "
                           "(DummyClassifier / DummyRegressor) or 'zero' (a constant base score)")
    link, margin_factor = boosting_link(estimator, GB_LOSSES)
    dim = estimator.n_features_in_
    base = margin_factor * np.asarray(estimator._raw_predict_init(np.zeros((1, dim))), dtype=np.float64)[0]
    stages = np.asarray(estimator.estimators_)
    b = TreeTable(1)
    lr = margin_factor * float(estimator.learning_rate)
    for stage in stages:
        for k, tree in enumerate(stage):
            t = tree.tree_
            b.add(t.feature, t.threshold, t.children_left, t.children_right,
                  lr * np.asarray(t.value, dtype=np.float64)[:, 0, :1], output=k, default_left=_missing_left(t))
    classifier = hasattr(estimator, "classes_")
    binary = classifier and stages.shape[1] == 1
    model = b.model(base, dim, binary, name, proba=("logistic" if binary else "softmax") if classifier else None,
                    link=link)
    return model if classifier else model.with_task(REGRESSION)


def _hist_gradient_boosting(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    if getattr(estimator, "is_categorical_", None) is not None and np.any(estimator.is_categorical_):
        raise CompileError(f"{name} with categorical features is not supported: categorical splits (bitsets) "
                           "cannot be compiled; use numeric (ordinal) features")
    link, _ = boosting_link(estimator, HIST_GB_LOSSES)
    b = TreeTable(1)
    for stage in estimator._predictors:
        for k, predictor in enumerate(stage):
            nodes = predictor.nodes
            if np.any(nodes["is_categorical"]):
                raise CompileError(f"{name}: a tree has a categorical split, which is not supported")
            leaf = nodes["is_leaf"].astype(bool)
            left = np.where(leaf, -1, nodes["left"].astype(np.int64))
            right = np.where(leaf, -1, nodes["right"].astype(np.int64))
            b.add(nodes["feature_idx"], nodes["num_threshold"], left, right, nodes["value"][:, None], output=k,
                  default_left=nodes["missing_go_to_left"])
    base = np.asarray(estimator._baseline_prediction, dtype=np.float64).reshape(-1)
    classifier = hasattr(estimator, "classes_")
    binary = classifier and base.size == 1
    model = b.model(base, estimator.n_features_in_, binary, name,
                    proba=("logistic" if binary else "softmax") if classifier else None, link=link)
    return model if classifier else model.with_task(REGRESSION)


def from_sklearn_trees(estimator) -> TreeEnsembleModel:
    """The model of a fitted scikit-learn tree or tree ensemble (see the module doc)."""
    name = type(estimator).__name__
    if name in FOREST_CLASSIFIERS:
        return _forest_classifier(estimator)
    if name in FOREST_REGRESSORS:
        return _forest_regressor(estimator)
    if name in BOOSTING:
        return _gradient_boosting(estimator)
    if name in HIST_BOOSTING:
        return _hist_gradient_boosting(estimator)
    raise CompileError(f"{name} is not a supported tree model ({', '.join(TREES)})")


def _from_booster(estimator) -> Model:
    library = type(estimator).__module__.split(".")[0]
    if library == "xgboost":
        return xgboost.from_xgboost(estimator)
    if library == "lightgbm":
        return lightgbm.from_lightgbm(estimator)
    raise CompileError(f"cannot compile a {type(estimator).__name__} from {library}; supported: {SUPPORTED}")


# the classifiers CalibratedClassifierCV may calibrate here (the last step of a fold's Pipeline): the linear ones
# through CalibratedModel (one stacked mat-vec), the others through CalibratedFoldsModel (their graphs composed)
CALIBRATED_BASES = (LINEAR + (ONE_VS_REST,) + FOREST_CLASSIFIERS + ("GradientBoostingClassifier",
                    "HistGradientBoostingClassifier") + SVMS + ("GaussianNB", "MLPClassifier", "KNeighborsClassifier"))
# those whose response is their decision_function (scikit-learn's first choice); the others' is predict_proba
DECISION_BASES = LINEAR + (ONE_VS_REST, "GradientBoostingClassifier", "HistGradientBoostingClassifier") + SVMS


def _calibrators(fold, method: str, name: str) -> list:
    """A fold's calibrators: (a, b) per column (sigmoid) or its knots (x, y) (isotonic, clipped to their ends)."""
    out = []
    for calibrator in fold.calibrators:
        if method == "sigmoid":
            out.append([float(calibrator.a_), float(calibrator.b_)])
            continue
        x, y = (np.asarray(getattr(calibrator, a), dtype=np.float64) for a in ("X_thresholds_", "y_thresholds_"))
        if (getattr(calibrator, "out_of_bounds", "clip") != "clip" or len(x) == 0
                or (float(calibrator.X_min_), float(calibrator.X_max_)) != (float(x[0]), float(x[-1]))):
            raise CompileError(f"{name}: an isotonic calibrator's knots do not span its clipped range "
                               f"[{calibrator.X_min_}, {calibrator.X_max_}]")
        out.append((x, y))
    return out


def _padded(knots: list) -> tuple[np.ndarray, np.ndarray]:
    """Knot rows padded to one length by repeating their last knot (a segment of width 0)."""
    length = max(len(x) for x, _ in knots)
    return tuple(np.array([np.pad(v[i], (0, length - len(v[i])), mode="edge") for v in knots]) for i in (0, 1))


def _fold_classifier(fold):
    """A fold's fitted classifier (a FrozenEstimator's, cv="prefit"'s successor) and its last step's class name."""
    base = fold.estimator
    if type(base).__name__ == "FrozenEstimator":
        base = base.estimator
    last = base
    while type(last).__name__ in ("Pipeline", "FrozenEstimator"):
        last = last.steps[-1][1] if hasattr(last, "steps") else last.estimator
    return base, type(last).__name__, last


def _from_calibrated(estimator) -> Model:
    """Every fold's classifier (what scikit-learn's _get_response_values gives of it: its decision_function, else
    predict_proba; two classes: the second's column) and its calibrators, as one model: linear folds as a
    CalibratedModel, others as a CalibratedFoldsModel."""
    name = type(estimator).__name__
    method = estimator.method
    if method not in CALIBRATION_METHODS:
        raise CompileError(f"{name}(method={method!r}) is not supported; supported: "
                           f"{', '.join(CALIBRATION_METHODS)}")
    classes = list(estimator.classes_)
    k = len(classes)
    folds = [_fold_classifier(fold) for fold in estimator.calibrated_classifiers_]
    for base, base_name, _ in folds:
        if base_name not in CALIBRATED_BASES:
            raise CompileError(f"{name} over a {base_name} is not supported: supported over "
                               f"{', '.join(CALIBRATED_BASES)} (in a Pipeline too)")
        if hasattr(base, "decision_function") != (base_name in DECISION_BASES):
            which = "has" if hasattr(base, "decision_function") else "has no"
            raise CompileError(f"{name} over a {base_name}: this scikit-learn's {base_name} {which} decision_function, "
                               "so it calibrates another response than the one compiled")
    models, responses, column_class, calibrators = [], [], [], []
    for fold, (base, base_name, last) in zip(estimator.calibrated_classifiers_, folds):
        model = from_sklearn(base)
        base_classes = list(base.classes_)
        if base_name in LINEAR + (ONE_VS_REST,):
            kind, factor, n_values = "scores", 1.0, model.n_outputs
        else:
            kind, factor = _response_kind(last, base_name, model)
            n_values = CalibratedFoldsModel._n_values(model, {"kind": kind}, name)
        # two classes: one column (the second class's); more: one per class, in order (an SVC's one-vs-one
        # decisions: the first of its pairs, as scikit-learn pairs them with its classes)
        columns = ([n_values - 1] if len(base_classes) == 2 else list(range(len(base_classes))))
        if n_values < len(columns) or len(fold.calibrators) != len(columns):
            raise CompileError(f"{name}: a fold's {base_name} gives {n_values} values and has "
                               f"{len(fold.calibrators)} calibrators for its {len(base_classes)} classes; cannot pair "
                               "them as scikit-learn does")
        models.append(model)
        responses.append({"kind": kind, "factor": factor, "columns": columns})
        # a fold that saw two of more classes: scikit-learn pairs its one column with its first class
        column_class.append([1] if k == 2 else [classes.index(c) for c in base_classes[:len(columns)]])
        calibrators.append(_calibrators(fold, method, name))
    if all(isinstance(m, LinearModel) for m in models):
        arrays: dict = {}
        if method == "isotonic":
            arrays["knots_x"], arrays["knots_y"] = _padded([c for fold in calibrators for c in fold])
        else:
            arrays["ab"] = np.array([c for fold in calibrators for c in fold])
        W, b = zip(*(absorb_normalisation(m.W, m.b, m.mean, m.std) for m in models))
        return CalibratedModel(np.vstack(W), np.concatenate(b), [c for cc in column_class for c in cc],
                               [len(cc) for cc in column_class], k, method, source=name, **arrays)
    calibrated = {"ab": [np.array(c) for c in calibrators]} if method == "sigmoid" else {
        "knots": [_padded(c) for c in calibrators]}
    return CalibratedFoldsModel(models, responses, column_class, k, method, source=name, **calibrated)


def _response_kind(last, base_name: str, model: Model) -> tuple[str, float]:
    """(kind, factor) of the response scikit-learn calibrates of a fold's classifier (CalibratedFoldsModel's
    RESPONSES), from its model's scores."""
    if base_name in SVMS:
        if len(last.classes_) == 2:
            return "decision", 1.0
        return ("ovr" if last.decision_function_shape == "ovr" else "decision"), 1.0
    if base_name == "GradientBoostingClassifier":  # its decision_function is the margin the model may have doubled
        return "scores", 1.0 / boosting_link(last, GB_LOSSES)[1]
    if base_name == "HistGradientBoostingClassifier":
        return "scores", 1.0
    if base_name in FOREST_CLASSIFIERS:  # predict_proba: the mean of the trees' probabilities
        return "scores", 1.0 / len(_trees_of(last))
    if base_name == "KNeighborsClassifier":  # predict_proba: the k votes' fractions (uniform weights)
        return "votes", 1.0 / model.k
    if base_name == "GaussianNB":  # predict_proba: the normalised joint likelihoods
        return "softmax", 1.0
    if base_name == "MLPClassifier":
        if model.output == "softmax":
            return "softmax", 1.0
        if model.output == "logistic" and model.n_outputs == 1:
            return "logistic", 1.0
    raise CompileError(f"CalibratedClassifierCV over a {base_name} ({model.describe()}): its predict_proba is not "
                       "reproduced")


def _from_one_vs_rest(estimator) -> Model:
    """One binary linear classifier per class (one for two classes) as one linear model: the classes' decision
    values stacked, its predict_proba's rule found by asking it (one-vs-rest logistic, normalised)."""
    name = type(estimator).__name__
    if getattr(estimator, "multilabel_", False):
        raise CompileError(f"{name} fitted on multilabel targets is not supported: fit one classifier per label")
    rows, intercepts = [], []
    for i, binary in enumerate(estimator.estimators_):
        inner = type(binary).__name__
        if inner not in LINEAR:
            raise CompileError(f"{name} over a {inner} (class {estimator.classes_[i]!r}) is not supported: only over "
                               f"linear classifiers ({', '.join(LINEAR)}); a class seen in every or no training "
                               "row gives a constant predictor")
        coef = dense(binary.coef_, f"{name}.estimators_[{i}].coef_").reshape(-1)
        rows.append(coef)
        intercepts.append(float(np.asarray(binary.intercept_, dtype=np.float64).reshape(-1)[0]))
    model = LinearModel(np.vstack(rows), np.array(intercepts), source=name)
    return model.with_proba(linear_proba_rule(estimator, model), name)


CONVERTERS = {"KNeighborsClassifier": _from_kneighbors, "NearestCentroid": _from_nearest_centroid,
              **dict.fromkeys(LINEAR, _from_linear), **dict.fromkeys(TREES, from_sklearn_trees),
              **dict.fromkeys(BOOSTERS, _from_booster), **dict.fromkeys(LINEAR_REGRESSORS, _from_linear_regressor),
              **dict.fromkeys(MLPS, _from_mlp), "GaussianNB": _from_gaussian_nb, **dict.fromkeys(SVMS, _from_svc),
              CALIBRATED: _from_calibrated, ONE_VS_REST: _from_one_vs_rest}


# ---------------------------------------------------------------- pipelines


def scaler_affine(scaler) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) with ``scaler.transform(x) == (x - mean) / std``."""
    name = type(scaler).__name__
    require_fitted(scaler)
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
    if mean.shape != (model.input_dim,):
        raise CompileError(f"the scaler has {mean.shape[0]} features but the model takes {model.input_dim}")
    if not (hasattr(model, "mean") and hasattr(model, "std")):
        if hasattr(model, "with_input_map"):  # no normalisation of its own: folded into its first mat-vec
            return model.with_input_map(np.diag(1.0 / std), -mean / std)
        raise CompileError(f"a scaler cannot be folded into a {model.family} model (it has no input normalisation)")
    own_mean = np.zeros(model.input_dim) if model.mean is None else model.mean
    own_std = np.ones(model.input_dim) if model.std is None else model.std
    folded = copy.copy(model)
    folded.mean, folded.std = mean + std * own_mean, std * own_std
    return folded


def transform_affine(step) -> tuple[np.ndarray, np.ndarray]:
    """(A, c) with ``step.transform(x) == A x + c`` for PCA and TruncatedSVD."""
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


def _ordered_keys(values32: np.ndarray) -> np.ndarray:
    """float32 values to int64 keys in the same order (-0.0 just below +0.0)."""
    bits = values32.view(np.int32).astype(np.int64)
    return np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF) - 1)


def _from_keys(keys: np.ndarray) -> np.ndarray:
    bits = np.where(keys >= 0, keys, (-(keys + 1)) | 0x80000000).astype(np.int64)
    return bits.astype(np.uint32).view(np.float32)


def fold_scalers(model: TreeEnsembleModel, scalers: list) -> TreeEnsembleModel:
    """The model on raw inputs x, for trees fitted on ``transform(x)`` of the ``scalers`` (in order).

    Each decision ``float32(transform(x)[f]) <= t`` is monotone in x (the scalers map each feature by
    an increasing affine function), so on float32 inputs it equals ``x[f] <= t'`` for the largest
    float32 t' going left, found by bisection over the float32 values with the scalers' own
    ``transform`` (so its float64 rounding is the same as scikit-learn's). A NaN stays NaN through
    the scalers, so the default sides carry over."""
    internal = np.flatnonzero(model.feature >= 0)
    feats = model.feature[internal]
    t = model.threshold[internal]
    dim = model.input_dim
    top = float(np.finfo(np.float32).max)
    for scaler in scalers:
        width = scaler_affine(scaler)[0].shape[0]
        if width != dim:
            raise CompileError(f"the Pipeline's {type(scaler).__name__} has {width} features but the trees "
                               f"take {dim}")

    def goes_left(keys):
        X = np.zeros((len(keys), dim))
        X[np.arange(len(keys)), feats] = _from_keys(keys).astype(np.float64)
        for scaler in scalers:
            X = scaler.transform(X)
        with np.errstate(over="ignore"):  # beyond the float32 range: +-inf, still ordered
            z = np.asarray(X, dtype=np.float64)[np.arange(len(keys)), feats].astype(np.float32).astype(np.float64)
        return z <= t

    folded = model.threshold.copy()
    if internal.size:  # trees without a split (a constant model) read no input: nothing to move
        lo = np.full(len(t), _ordered_keys(np.array([-top], dtype=np.float32))[0])
        hi = np.full(len(t), _ordered_keys(np.array([top], dtype=np.float32))[0])
        left_at_lo, left_at_hi = goes_left(lo), goes_left(hi)
        # invariant: lo goes left, hi does not (where both ends agree, the answer is an end)
        for _ in range(34):
            mid = (lo + hi) // 2
            go = goes_left(mid)
            lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
        keys = np.where(left_at_hi, hi, np.where(left_at_lo, lo, lo))
        folded[internal] = _from_keys(keys).astype(np.float64)
    return TreeEnsembleModel(model.feature, folded, model.left, model.right, model.value, model.roots,
                             model.tree_output, model.base, input_dim=dim, compare=model.compare,
                             binary=model.binary, source="Pipeline",
                             default_left=model.default_left, proba=model.proba, link=model.link).with_task(model.task)


def _from_pipeline(pipeline) -> Model:
    steps = [(name, step) for name, step in pipeline.steps if step not in (None, "passthrough")]
    if not steps:
        raise CompileError("the Pipeline has no steps to compile")
    front = 0
    while front < len(steps) and isinstance(steps[front][1], FrontEndStep):
        front += 1
    if front:  # front-end steps read the raw samples; the steps after them take their features
        if front == len(steps):
            raise CompileError("the Pipeline has front-end steps but no model after them")
        return FrontEndModel([step for _, step in steps[:front]], _from_steps(steps[front:]), source="Pipeline")
    return _from_steps(steps)


def _from_steps(steps: list) -> Model:
    *scalers, (_, last) = steps
    for name, step in scalers:
        if type(step).__name__ not in SCALERS + LINEAR_TRANSFORMS:
            raise CompileError(f"Pipeline step {name!r} is a {type(step).__name__}, which is not supported; leading "
                               f"steps may be tinycc_ml.features' front-end steps (first), then "
                               f"{', '.join(SCALERS + LINEAR_TRANSFORMS)}, the last a supported "
                               f"estimator ({SUPPORTED})")
    model = _convert(last)
    if isinstance(model, CalibratedFoldsModel):  # each fold takes the steps as it would alone (trees: exactly)
        folded = copy.copy(model)
        folded.folds = [_after_steps(fold, scalers) for fold in model.folds]
        return folded
    return _after_steps(model, scalers)


def _after_steps(model: Model, scalers: list) -> Model:
    """``model`` reading the raw inputs of the Pipeline steps ``scalers`` ((name, step) pairs) before it."""
    if model.family == "trees":  # thresholds moved onto the raw inputs, exactly (see fold_scalers)
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
