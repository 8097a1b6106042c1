"""scikit-learn's trees and tree ensembles as ``TreeEnsembleModel``s (the "trees" family).

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

Single-output models only. Inputs are compared after rounding to float32, as scikit-learn's trees do
(HistGradientBoosting compares float64 inputs; the two agree except for an input within float32
rounding of a threshold). A NaN input goes where scikit-learn sends it: the node's
``missing_go_to_left`` (trees and HistGradientBoosting's predictors); a threshold of +inf (a split of
the present values from the missing ones) becomes the largest float32 (an input of +inf then goes
right, where scikit-learn sends it left).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.models.trees import TreeEnsembleModel

FOREST_CLASSIFIERS = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier")
FOREST_REGRESSORS = ("DecisionTreeRegressor", "RandomForestRegressor", "ExtraTreesRegressor")
BOOSTING = ("GradientBoostingClassifier", "GradientBoostingRegressor")
HIST_BOOSTING = ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
TREE_ESTIMATORS = FOREST_CLASSIFIERS + FOREST_REGRESSORS + BOOSTING + HIST_BOOSTING
REGRESSION = {"kind": "regression"}


class _Builder:
    """Concatenates trees into one node table."""

    def __init__(self, width: int):
        self.width = width
        self.feature, self.threshold, self.left, self.right, self.value = [], [], [], [], []
        self.roots, self.tree_output, self.default_left, self.n = [], [], [], 0

    def add(self, feature, threshold, left, right, value, output: int = -1, default_left=None) -> None:
        leaf = np.asarray(left) < 0
        dl = np.zeros(len(leaf), dtype=np.int64) if default_left is None else np.asarray(default_left, np.int64)
        self.default_left.append(np.where(leaf, 0, dl))
        self.roots.append(self.n)
        self.tree_output.append(output)
        self.feature.append(np.where(leaf, -1, feature))
        # +inf: scikit-learn's split of the present values (left) from the missing ones (default side);
        # the largest float32 makes the same decision on every finite input
        threshold = np.where(np.asarray(threshold) == np.inf, float(np.finfo(np.float32).max), threshold)
        self.threshold.append(np.where(leaf, 0.0, threshold))
        self.left.append(np.where(leaf, -1, np.asarray(left) + self.n))
        self.right.append(np.where(leaf, -1, np.asarray(right) + self.n))
        self.value.append(np.where(leaf[:, None], np.asarray(value, dtype=np.float64).reshape(len(leaf), -1), 0.0))
        self.n += len(leaf)

    def model(self, base, input_dim: int, binary: bool, source: str, proba: str | None = None) -> TreeEnsembleModel:
        cat = np.concatenate
        return TreeEnsembleModel(cat(self.feature), cat(self.threshold), cat(self.left), cat(self.right),
                                 cat(self.value), np.array(self.roots), np.array(self.tree_output),
                                 np.asarray(base, dtype=np.float64).reshape(-1), input_dim=input_dim,
                                 binary=binary, source=source, default_left=cat(self.default_left), proba=proba)


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
    b = _Builder(k)
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
    b = _Builder(1)
    for tree in trees:
        t = tree.tree_
        b.add(t.feature, t.threshold, t.children_left, t.children_right,
              np.asarray(t.value, dtype=np.float64)[:, 0, :1] / len(trees), output=0, default_left=_missing_left(t))
    return b.model([0.0], estimator.n_features_in_, False, name).with_task(REGRESSION)


def _gradient_boosting(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    init = estimator.init_
    if not (init == "zero" or type(init).__name__ in ("DummyClassifier", "DummyRegressor")):
        raise CompileError(f"{name} with init={type(init).__name__} is not supported; only the default prior "
                           "(DummyClassifier / DummyRegressor) or 'zero' (a constant base score)")
    dim = estimator.n_features_in_
    base = np.asarray(estimator._raw_predict_init(np.zeros((1, dim))), dtype=np.float64)[0]
    stages = np.asarray(estimator.estimators_)
    b = _Builder(1)
    lr = float(estimator.learning_rate)
    for stage in stages:
        for k, tree in enumerate(stage):
            t = tree.tree_
            b.add(t.feature, t.threshold, t.children_left, t.children_right,
                  lr * np.asarray(t.value, dtype=np.float64)[:, 0, :1], output=k, default_left=_missing_left(t))
    classifier = hasattr(estimator, "classes_")
    binary = classifier and stages.shape[1] == 1
    model = b.model(base, dim, binary, name, proba=("logistic" if binary else "softmax") if classifier else None)
    return model if classifier else model.with_task(REGRESSION)


def _hist_gradient_boosting(estimator) -> TreeEnsembleModel:
    name = type(estimator).__name__
    if getattr(estimator, "is_categorical_", None) is not None and np.any(estimator.is_categorical_):
        raise CompileError(f"{name} with categorical features is not supported: categorical splits (bitsets) "
                           "cannot be compiled; use numeric (ordinal) features")
    b = _Builder(1)
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
                    proba=("logistic" if binary else "softmax") if classifier else None)
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
    raise CompileError(f"{name} is not a supported tree model ({', '.join(TREE_ESTIMATORS)})")


# ---------------------------------------------------------------- scalers before trees

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

    def goes_left(keys):
        X = np.zeros((len(keys), dim))
        X[np.arange(len(keys)), feats] = _from_keys(keys).astype(np.float64)
        for scaler in scalers:
            X = scaler.transform(X)
        with np.errstate(over="ignore"):  # beyond the float32 range: +-inf, still ordered
            z = np.asarray(X, dtype=np.float64)[np.arange(len(keys)), feats].astype(np.float32).astype(np.float64)
        return z <= t

    lo = np.full(len(t), _ordered_keys(np.array([-top], dtype=np.float32))[0])
    hi = np.full(len(t), _ordered_keys(np.array([top], dtype=np.float32))[0])
    left_at_lo, left_at_hi = goes_left(lo), goes_left(hi)
    # invariant: lo goes left, hi does not (where both ends agree, the answer is an end)
    for _ in range(34):
        mid = (lo + hi) // 2
        go = goes_left(mid)
        lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
    keys = np.where(left_at_hi, hi, np.where(left_at_lo, lo, lo))
    folded = model.threshold.copy()
    folded[internal] = _from_keys(keys).astype(np.float64)
    return TreeEnsembleModel(model.feature, folded, model.left, model.right, model.value, model.roots,
                             model.tree_output, model.base, input_dim=dim, compare=model.compare,
                             binary=model.binary, source="Pipeline",
                             default_left=model.default_left, proba=model.proba).with_task(model.task)
