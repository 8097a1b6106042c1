"""XGBoost models as ``TreeEnsembleModel``s, read from XGBoost's JSON model (never unpickled):
``Booster.save_model("m.json")`` or its binary form ``"m.ubj"`` (UBJSON, importers/ubjson.py), or
``save_raw("json")`` of a live ``XGBClassifier`` / ``XGBRegressor`` / ``Booster``. The library is needed
only to convert live objects (``pip install 'tinycc-ml[xgboost]'``); model files are parsed with the standard
library.

A node goes left when x[f] < t (float32, as XGBoost compares), leaves hold the learning-rate scaled
values; the margin is base_score (in the margin space: its logit for the logistic objectives, its log
for the exp ones) plus the trees of each class (``tree_info``), or, for vector-leaf trees
(``multi_strategy="multi_output_tree"``), each leaf's vector of class values. Objectives (XGB_LINKS):
regressors' value = the inverse link of the margin, as ``predict``: identity for reg:squarederror,
reg:squaredlogerror, reg:pseudohubererror, reg:absoluteerror, reg:quantileerror (one quantile) and the
rank:* objectives, exp for reg:gamma, reg:tweedie, count:poisson, survival:cox, survival:aft, the
sigmoid for reg:logistic; classifiers: binary:logistic and binary:hinge (class 1 where the margin > 0),
binary:logitraw (class 1 where the margin > 0.5, as ``XGBClassifier.predict`` thresholds the raw
margin it returns), multi:softprob / multi:softmax (argmax of the margins). Categorical splits,
multi-target models and other objectives are refused. Missing values (NaN) go to each node's
``default_left`` side, as XGBoost (``missing=NaN``) sends them.

Early stopping: the scikit-learn estimators' ``predict`` uses the trees up to ``best_iteration`` (a
learner attribute in the JSON), so a model file and a live XGBClassifier / XGBRegressor compile those
trees only; a live ``Booster``'s ``predict`` uses every tree, and so does its compiled C.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tree_tables import MAX_FILE_BYTES, REGRESSION, read_model_text
from tinycc_ml.importers.ubjson import read_ubjson
from tinycc_ml.models.trees import MAX_NODES, TreeEnsembleModel

# regressors: objective -> the inverse link predict applies to the margin
XGB_LINKS = {**dict.fromkeys(("reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror",
                              "reg:absoluteerror", "reg:quantileerror", "rank:pairwise", "rank:ndcg", "rank:map"),
                             "identity"),
             **dict.fromkeys(("reg:gamma", "reg:tweedie", "count:poisson", "survival:cox", "survival:aft"), "exp"),
             "reg:logistic": "sigmoid"}
XGB_CLASSIFIERS = ("binary:logistic", "binary:logitraw", "binary:hinge", "multi:softprob", "multi:softmax")
XGB_OBJECTIVES = tuple(XGB_LINKS) + XGB_CLASSIFIERS
XGB_LOGIT = ("binary:logistic", "reg:logistic")  # base_score is a probability: the margin is its logit
LOGITRAW_THRESHOLD = 0.5  # XGBClassifier.predict: class 1 where the value predict returns (the margin) > 0.5


def load_xgboost_file(path) -> TreeEnsembleModel:
    """An XGBoost ``.json`` or ``.ubj`` (Universal Binary JSON) model file."""
    path = Path(path)
    if path.suffix.lower() == ".ubj":
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ModelFileError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MB; not an XGBoost UBJSON model")
        return from_xgboost_json(read_ubjson(path.read_bytes(), str(path)), str(path))
    text = read_model_text(path, "XGBoost JSON model")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected an XGBoost "
                             "model saved with Booster.save_model('model.json')") from None
    return from_xgboost_json(doc, str(path))


def _get(doc, keys: list[str], source: str):
    node = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            raise ModelFileError(f"{source}: not an XGBoost JSON model (no {'/'.join(keys)})")
        node = node[key]
    return node


def _object(doc, keys: list[str], source: str) -> dict:
    node = _get(doc, keys, source)
    if not isinstance(node, dict):
        raise ModelFileError(f"{source}: {'/'.join(keys)} is a {type(node).__name__}, not an object")
    return node


def _number(text, what: str, source: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ModelFileError(f"{source}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ModelFileError(f"{source}: {what} is not finite ({value})")
    return value


MAX_COUNT = 2**31 - 1  # features, classes, iterations: more than any model (or C int index) holds


def _shown(text) -> str:
    """A file's value for a message: a long one (a 300-digit number) cut to its start and its length."""
    shown = repr(text)
    return shown if len(shown) <= 40 else f"{shown[:24]}... ({len(shown)} characters)"


def _count(text, what: str, source: str, least: int = 0) -> int:
    """A whole number of the file in [least, MAX_COUNT] (JSON numbers or their text), else ModelFileError
    naming the file and the field."""
    value = None
    if not isinstance(text, bool):
        try:
            value = float(text)
        except (TypeError, ValueError, OverflowError):
            pass
    if value is None or not math.isfinite(value) or value != int(value) or not least <= value <= MAX_COUNT:
        raise ModelFileError(f"{source}: {what} {_shown(text)} is not a whole number from {least} to {MAX_COUNT}")
    return int(value)


def _int_list(values, what: str, source: str, n: int | None = None) -> np.ndarray:
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in values):
        raise ModelFileError(f"{source}: {what} is not a list of numbers")
    array = np.asarray(values, dtype=np.float64)
    if n is not None and array.size != n:
        raise ModelFileError(f"{source}: {what} has {array.size} entries, expected {n}")
    if array.size and (np.any(array != np.round(array)) or np.abs(array).max() > MAX_NODES):
        raise ModelFileError(f"{source}: {what} holds a value that is not a node index")
    return array.astype(np.int64)


def _base_scores(raw, source: str) -> list[float]:
    """base_score: a number, its decimal text, or (XGBoost 2+) the text of a JSON list of numbers."""
    if isinstance(raw, str) and raw.lstrip().startswith("["):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise ModelFileError(f"{source}: base_score {raw[:40]!r} is not a number or a list of numbers") from None
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
        raise ModelFileError(f"{source}: base_score {str(raw)[:40]!r} is not a number or a list of numbers")
    return [_number(v, "base_score", source) for v in values]


def _base_margin(base: np.ndarray, objective: str, source: str) -> np.ndarray:
    """base_score (the output space) as a margin: logit for the logistic objectives, log for the exp ones."""
    if objective in XGB_LOGIT:
        if np.any((base <= 0) | (base >= 1)):
            raise ModelFileError(f"{source}: base_score {base[0]} of {objective} is not a probability in (0, 1)")
        return np.log(base / (1 - base))
    if XGB_LINKS.get(objective) == "exp":
        if np.any(base <= 0):
            raise ModelFileError(f"{source}: base_score {base[0]} of {objective} is not positive")
        return np.log(base)
    return base


def _trees_predict_uses(model: dict, learner: dict, trees: list, source: str) -> int:
    """How many trees the scikit-learn estimators' predict adds up: those of the iterations up to
    ``best_iteration`` (a learner attribute after early stopping), else all."""
    attributes = learner.get("attributes", {})
    best = attributes.get("best_iteration") if isinstance(attributes, dict) else None
    indptr = model.get("iteration_indptr")
    if indptr is not None:  # XGBoost predicts with the trees of these iterations: from the first to the last
        indptr = _int_list(indptr, "iteration_indptr", source)
        if indptr.size < 2 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(trees):
            raise ModelFileError(f"{source}: iteration_indptr {indptr.tolist()[:8]} does not split the "
                                 f"{len(trees)} trees into iterations (0 first, non-decreasing, {len(trees)} last)")
    if best is None:
        return len(trees)
    best = _count(best, "best_iteration", source)
    if indptr is not None:
        if best < 0 or best + 1 >= indptr.size:
            raise ModelFileError(f"{source}: best_iteration {best} does not match iteration_indptr "
                                 f"({indptr.size - 1} iterations of {len(trees)} trees)")
        return int(indptr[best + 1])
    per_iteration = _count(_get(model, ["gbtree_model_param", "num_parallel_tree"], source), "num_parallel_tree",
                          source)
    n_class = _count(learner.get("learner_model_param", {}).get("num_class", 0), "num_class", source)
    used = (best + 1) * max(per_iteration, 1) * max(n_class, 1)
    if best < 0 or used > len(trees):
        raise ModelFileError(f"{source}: best_iteration {best} names more trees than the {len(trees)} stored")
    return used


def _by_id(trees: list, source: str) -> list:
    """The trees in the order of their ``id``s, where XGBoost places each tree when it loads the file (the list's
    order is not the model's: a list reversed predicts the same). The ids must be 0..n-1 once each: XGBoost refuses
    an id out of range and crashes on a repeated one."""
    ids = []
    for t, tree in enumerate(trees):
        tree_id = tree.get("id") if isinstance(tree, dict) else None
        if not isinstance(tree_id, int) or isinstance(tree_id, bool):
            raise ModelFileError(f"{source}: tree {t} has no integer id ({tree_id!r}); XGBoost places each tree by "
                                 "its id")
        ids.append(tree_id)
    if sorted(ids) != list(range(len(trees))):
        wrong = sorted(set(ids) - set(range(len(trees)))) or sorted({i for i in ids if ids.count(i) > 1})
        raise ModelFileError(f"{source}: the trees' ids are not 0..{len(trees) - 1} once each (e.g. {wrong[:3]}); "
                             "XGBoost refuses or crashes on such a file")
    order = np.argsort(ids, kind="stable")
    return [trees[i] for i in order]


def _leaf_vector_size(trees: list) -> int | None:
    """The first tree's size_leaf_vector (vector leaves: > 1), None where it is not readable."""
    param = trees[0].get("tree_param") if trees and isinstance(trees[0], dict) else None
    try:
        return int(param.get("size_leaf_vector", 1)) if isinstance(param, dict) else None
    except (TypeError, ValueError, OverflowError):
        return None


def _leaf_values(tree: dict, leaf: np.ndarray, cond: np.ndarray, width: int, where: str) -> np.ndarray:
    """(n, width) leaf values: scalar leaves hold theirs in split_conditions; vector leaves (multi_output_tree)
    hold the index of their vector in leaf_weights in right_children."""
    if width == 1:
        return np.where(leaf, cond, 0.0)[:, None]
    raw = tree.get("leaf_weights", [])
    if not isinstance(raw, list):
        raise ModelFileError(f"{where}: leaf_weights is a {type(raw).__name__}, not a list of numbers")
    weights = np.array([_number(v, "a leaf weight", where) for v in raw], dtype=np.float32).astype(np.float64)
    index = _int_list(tree.get("right_children"), "right_children", where)
    if weights.size % width or np.any(leaf & ((index < 0) | (index >= weights.size // width))):
        raise ModelFileError(f"{where}: leaf_weights holds {weights.size} values, not a vector of {width} for "
                             "each leaf")
    return np.where(leaf[:, None], weights.reshape(-1, width)[np.where(leaf, index, 0)], 0.0)


def from_xgboost_json(doc, source: str = "XGBoost model", best_iteration: bool = True) -> TreeEnsembleModel:
    """``best_iteration``: compile the trees up to the learner's best_iteration, as the scikit-learn
    estimators' predict (False: every tree, as ``Booster.predict``)."""
    learner = _get(doc, ["learner"], source)
    objective = _get(learner, ["objective", "name"], source)
    if objective not in XGB_OBJECTIVES:
        raise ModelFileError(f"{source}: XGBoost objective {objective!r} is not supported; supported: "
                             f"{', '.join(XGB_OBJECTIVES)}")
    booster = _object(learner, ["gradient_booster"], source)
    if booster.get("name") != "gbtree":
        raise ModelFileError(f"{source}: XGBoost booster {booster.get('name')!r} is not supported; only gbtree")
    params = _object(learner, ["learner_model_param"], source)
    dim = _count(params.get("num_feature"), "num_feature", source, least=1)
    n_class = _count(params.get("num_class", 0), "num_class", source)
    if _count(params.get("num_target", 1), "num_target", source) != 1:
        raise ModelFileError(f"{source}: multi-target XGBoost models (several targets or quantiles) are not "
                             "supported")
    k = max(n_class, 1)
    model = _object(booster, ["model"], source)
    trees = _get(model, ["trees"], source)
    if not isinstance(trees, list):
        raise ModelFileError(f"{source}: model/trees is not a list of trees")
    # checked before anything of k values is allocated: scalar-leaf models have trees of each class; a
    # vector-leaf model's (multi_output_tree) leaves hold k values each, which the file must then hold
    if k > max(len(trees), 1) and not (_leaf_vector_size(trees) == k and k <= MAX_NODES):
        raise ModelFileError(f"{source}: num_class {n_class} exceeds the model's {len(trees)} tree(s); each class "
                             "has trees of its own")
    bases = _base_scores(params.get("base_score", "0.5"), source)
    if len(bases) not in (1, k):
        raise ModelFileError(f"{source}: base_score has {len(bases)} values for {k} outputs")
    base = _base_margin(np.broadcast_to(np.asarray(bases, dtype=np.float64), (k,)).copy(), objective, source)
    binary = n_class <= 1 and objective in XGB_CLASSIFIERS
    if objective == "binary:logitraw":  # class 1 where margin - 0.5 > 0
        base = base - LOGITRAW_THRESHOLD
    if not trees:
        raise ModelFileError(f"{source}: the model has no trees")
    for t, tree in enumerate(trees):
        if not isinstance(tree, dict):
            raise ModelFileError(f"{source}: tree {t} is a {type(tree).__name__}, not a tree object")
        if not isinstance(tree.get("tree_param", {}), dict):
            raise ModelFileError(f"{source}: tree {t}: tree_param is a {type(tree['tree_param']).__name__}, not an "
                                 "object")
    trees = _by_id(trees, source)
    info = _int_list(model.get("tree_info", [0] * len(trees)), "tree_info", source, len(trees))
    if np.any((info < 0) | (info >= k)):
        raise ModelFileError(f"{source}: tree_info names an output outside [0, {k})")
    used = _trees_predict_uses(model, learner, trees, source) if best_iteration else len(trees)
    trees, info = trees[:used], info[:used]
    widths = {_count(tree.get("tree_param", {}).get("size_leaf_vector", 1) or 1, "size_leaf_vector", source)
              for tree in trees}
    width = max(widths)
    if len(widths) > 1 or width not in (1, k):
        raise ModelFileError(f"{source}: trees with leaf vectors of sizes {sorted(widths)} for {k} outputs")
    parts = {key: [] for key in ("feature", "threshold", "left", "right", "value", "default_left")}
    roots, offset = [], 0
    for t, tree in enumerate(trees):
        where = f"{source}: tree {t}"
        left = _int_list(tree.get("left_children"), "left_children", where)
        n = left.size
        right = _int_list(tree.get("right_children"), "right_children", where, n)
        feature = _int_list(tree.get("split_indices"), "split_indices", where, n)
        cond = tree.get("split_conditions")
        if not isinstance(cond, list) or len(cond) != n:
            raise ModelFileError(f"{where}: split_conditions has not {n} entries")
        # XGBoost's conditions are float32 values written in decimal: the nearest float32 is the value
        cond = np.array([_number(c, "a split condition", where) for c in cond]).astype(np.float32).astype(np.float64)
        split_type = tree.get("split_type", [])
        if not isinstance(split_type, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                       for v in split_type):
            raise ModelFileError(f"{where}: split_type is not a list of integers")
        if any(v != 0 for v in split_type):
            raise ModelFileError(f"{where}: categorical splits are not supported")
        leaf = left < 0
        dl = tree.get("default_left", [0] * n)
        if not isinstance(dl, list) or len(dl) != n or any(v not in (0, 1) or isinstance(v, bool) for v in dl):
            raise ModelFileError(f"{where}: default_left is not a list of {n} 0/1 values")
        parts["default_left"].append(np.where(leaf, 0, np.asarray(dl, dtype=np.int64)))
        parts["feature"].append(np.where(leaf, -1, feature))
        parts["threshold"].append(np.where(leaf, 0.0, cond))
        parts["left"].append(np.where(leaf, -1, left + offset))
        parts["right"].append(np.where(leaf, -1, right + offset))
        parts["value"].append(_leaf_values(tree, leaf, cond, width, where))
        roots.append(offset)
        offset += n
    out = TreeEnsembleModel(*(np.concatenate(parts[p]) for p in ("feature", "threshold", "left", "right", "value")),
                            roots, info if width == 1 else np.full(len(roots), -1), base, input_dim=dim,
                            compare="lt", binary=binary, source=source,
                            default_left=np.concatenate(parts["default_left"]),
                            proba={"binary:logistic": "logistic", "multi:softprob": "softmax"}.get(objective),
                            link=XGB_LINKS.get(objective, "identity"))
    return out if (n_class > 1 or binary) else out.with_task(REGRESSION)


def from_xgboost(obj) -> TreeEnsembleModel:
    """A live XGBClassifier / XGBRegressor (the trees its predict uses: up to best_iteration) or Booster
    (every tree, as Booster.predict), through its JSON form."""
    name = type(obj).__name__
    booster = obj if name == "Booster" else obj.get_booster()
    model = from_xgboost_json(json.loads(bytes(booster.save_raw("json"))), name, best_iteration=name != "Booster")
    if hasattr(obj, "classes_") and not model.task.get("kind") == "regression":
        model.set_classes(obj.classes_, name)
    return model
