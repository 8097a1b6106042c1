"""XGBoost models as ``TreeEnsembleModel``s, read from XGBoost's JSON model (never unpickled):
``Booster.save_model("m.json")``, or ``save_raw("json")`` of a live ``XGBClassifier`` / ``XGBRegressor`` /
``Booster``. The library is needed only to convert live objects (``pip install 'tinycc-ml[xgboost]'``);
model files are parsed with the standard library.

A node goes left when x[f] < t (float32, as XGBoost compares), leaves hold the learning-rate scaled
values; the margin is base_score (logit of it for binary:logistic / reg:logistic) plus the trees of
each class (``tree_info``). Objectives: reg:squarederror, reg:linear, reg:absoluteerror,
reg:pseudohubererror, reg:logistic / binary:logistic (class 1 where the margin > 0), binary:logitraw,
multi:softprob / multi:softmax (argmax of the margins). Categorical splits and other objectives are
refused. Missing values (NaN) go to each node's ``default_left`` side, as XGBoost (``missing=NaN``)
sends them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tree_tables import REGRESSION, read_model_text
from tinycc_ml.models.trees import MAX_NODES, TreeEnsembleModel

XGB_IDENTITY = ("reg:squarederror", "reg:linear", "reg:absoluteerror", "reg:pseudohubererror", "binary:logitraw",
                "multi:softprob", "multi:softmax")
XGB_LOGIT = ("binary:logistic", "reg:logistic")
XGB_OBJECTIVES = XGB_IDENTITY + XGB_LOGIT


def load_xgboost_file(path) -> TreeEnsembleModel:
    """An XGBoost ``.json`` model file."""
    path = Path(path)
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


def from_xgboost_json(doc, source: str = "XGBoost model") -> TreeEnsembleModel:
    learner = _get(doc, ["learner"], source)
    objective = _get(learner, ["objective", "name"], source)
    if objective not in XGB_OBJECTIVES:
        raise ModelFileError(f"{source}: XGBoost objective {objective!r} is not supported; supported: "
                             f"{', '.join(XGB_OBJECTIVES)}")
    booster = _object(learner, ["gradient_booster"], source)
    if booster.get("name") != "gbtree":
        raise ModelFileError(f"{source}: XGBoost booster {booster.get('name')!r} is not supported; only gbtree")
    params = _object(learner, ["learner_model_param"], source)
    dim = int(_number(params.get("num_feature"), "num_feature", source))
    n_class = int(_number(params.get("num_class", 0), "num_class", source))
    if int(_number(params.get("num_target", 1), "num_target", source)) != 1:
        raise ModelFileError(f"{source}: multi-target XGBoost models are not supported")
    k = max(n_class, 1)
    model = _object(booster, ["model"], source)
    trees = _get(model, ["trees"], source)
    if not isinstance(trees, list):
        raise ModelFileError(f"{source}: model/trees is not a list of trees")
    if k > max(len(trees), 1):  # checked before anything of k values is allocated
        raise ModelFileError(f"{source}: num_class {n_class} exceeds the model's {len(trees)} tree(s); each class "
                             "has trees of its own")
    bases = _base_scores(params.get("base_score", "0.5"), source)
    if len(bases) not in (1, k):
        raise ModelFileError(f"{source}: base_score has {len(bases)} values for {k} outputs")
    base = np.broadcast_to(np.asarray(bases, dtype=np.float64), (k,)).copy()
    if objective in XGB_LOGIT:
        if np.any((base <= 0) | (base >= 1)):
            raise ModelFileError(f"{source}: base_score {base[0]} of {objective} is not a probability in (0, 1)")
        base = np.log(base / (1 - base))
    info = _int_list(model.get("tree_info", [0] * len(trees)), "tree_info", source, len(trees))
    if not trees:
        raise ModelFileError(f"{source}: the model has no trees")
    if np.any((info < 0) | (info >= k)):
        raise ModelFileError(f"{source}: tree_info names an output outside [0, {k})")
    parts = {key: [] for key in ("feature", "threshold", "left", "right", "value", "default_left")}
    roots, offset = [], 0
    for t, tree in enumerate(trees):
        where = f"{source}: tree {t}"
        if not isinstance(tree, dict):
            raise ModelFileError(f"{where} is a {type(tree).__name__}, not a tree object")
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
        parts["value"].append(np.where(leaf, cond, 0.0)[:, None])
        roots.append(offset)
        offset += n
    binary = n_class <= 1 and objective in ("binary:logistic", "binary:logitraw")
    out = TreeEnsembleModel(*(np.concatenate(parts[p]) for p in ("feature", "threshold", "left", "right", "value")),
                            roots, info, base, input_dim=dim, compare="lt", binary=binary, source=source,
                            default_left=np.concatenate(parts["default_left"]),
                            proba={"binary:logistic": "logistic", "multi:softprob": "softmax"}.get(objective))
    return out if (n_class > 1 or binary) else out.with_task(REGRESSION)


def from_xgboost(obj) -> TreeEnsembleModel:
    """A live XGBClassifier / XGBRegressor / Booster, through its JSON form."""
    name = type(obj).__name__
    booster = obj if name == "Booster" else obj.get_booster()
    model = from_xgboost_json(json.loads(bytes(booster.save_raw("json"))), name)
    if hasattr(obj, "classes_") and not model.task.get("kind") == "regression":
        model.set_classes(obj.classes_, name)
    return model
