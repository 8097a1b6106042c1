"""XGBoost and LightGBM models as ``TreeEnsembleModel``s, read from their own text formats (never
unpickled): XGBoost's JSON model (``Booster.save_model("m.json")``, or ``save_raw("json")`` of a live
``XGBClassifier`` / ``XGBRegressor`` / ``Booster``) and LightGBM's text model
(``Booster.save_model("m.txt")``, or ``model_to_string()`` of ``LGBMClassifier`` / ``LGBMRegressor`` /
``Booster``). The libraries are needed only to convert live objects (``pip install
'tinycc-ml[xgboost]'``, ``[lightgbm]``); model files are parsed with the standard library.

XGBoost: a node goes left when x[f] < t (float32, as XGBoost compares), leaves hold the learning-rate
scaled values; the margin is base_score (logit of it for binary:logistic / reg:logistic) plus the trees of
each class (``tree_info``). Objectives: reg:squarederror, reg:linear, reg:absoluteerror,
reg:pseudohubererror, reg:logistic / binary:logistic (class 1 where the margin > 0), binary:logitraw,
multi:softprob / multi:softmax (argmax of the margins). Categorical splits and other objectives are
refused.

LightGBM: a node goes left when x[f] <= t (numerical splits; missing type None or NaN), leaves include
the shrinkage; tree i adds to class i mod num_tree_per_iteration; ``average_output`` (random forest
mode) averages. Objectives: regression (l2, l1, huber, fair, quantile, mape), binary (class 1 where the
margin > 0), multiclass / multiclassova (argmax). Categorical splits, zero-as-missing splits, linear
trees and other objectives are refused.

Missing values (NaN) go to each node's default side as the libraries send them: XGBoost's
``default_left`` (XGBoost's default ``missing=NaN``); LightGBM's missing type NaN: the default-left bit
of ``decision_type``; missing type None: LightGBM compares 0.0 in place of the NaN, so the side of
0 <= t.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.models.trees import MAX_NODES, TreeEnsembleModel

REGRESSION = {"kind": "regression"}
XGB_IDENTITY = ("reg:squarederror", "reg:linear", "reg:absoluteerror", "reg:pseudohubererror", "binary:logitraw",
                "multi:softprob", "multi:softmax")
XGB_LOGIT = ("binary:logistic", "reg:logistic")
XGB_OBJECTIVES = XGB_IDENTITY + XGB_LOGIT
LGB_REGRESSION = ("regression", "regression_l2", "regression_l1", "l2", "l1", "mse", "mae", "huber", "fair",
                  "quantile", "mape")
LGB_OBJECTIVES = LGB_REGRESSION + ("binary", "multiclass", "multiclassova")
MAX_FILE_BYTES = 256 << 20


def _read_text(path: Path, what: str) -> str:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ModelFileError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MB; not a {what}")
    data = path.read_bytes()
    if data[:6] == b"\x93NUMPY" or data[:2] == b"PK" or data[:1] == b"\x80":
        raise ModelFileError(f"{path}: this is a binary file (npz/zip or a pickle), not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not UTF-8 text, so not a {what}") from None


def load_booster_file(path) -> TreeEnsembleModel:
    """An XGBoost ``.json`` or LightGBM ``.txt`` model file (by its extension; its contents must agree)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        text = _read_text(path, "XGBoost JSON model")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected an XGBoost "
                                 "model saved with Booster.save_model('model.json')") from None
        return from_xgboost_json(doc, str(path))
    if path.suffix.lower() == ".txt":
        return from_lightgbm_text(_read_text(path, "LightGBM text model"), str(path))
    raise ModelFileError(f"{path}: unknown model file type {path.suffix!r}; expected .npz (tinycc-ml), .json "
                         "(XGBoost) or .txt (LightGBM)")


# ---------------------------------------------------------------- XGBoost

def _get(doc, keys: list[str], source: str):
    node = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            raise ModelFileError(f"{source}: not an XGBoost JSON model (no {'/'.join(keys)})")
        node = node[key]
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


def from_xgboost_json(doc, source: str = "XGBoost model") -> TreeEnsembleModel:
    learner = _get(doc, ["learner"], source)
    objective = _get(learner, ["objective", "name"], source)
    if objective not in XGB_OBJECTIVES:
        raise ModelFileError(f"{source}: XGBoost objective {objective!r} is not supported; supported: "
                             f"{', '.join(XGB_OBJECTIVES)}")
    booster = _get(learner, ["gradient_booster"], source)
    if booster.get("name") != "gbtree":
        raise ModelFileError(f"{source}: XGBoost booster {booster.get('name')!r} is not supported; only gbtree")
    params = _get(learner, ["learner_model_param"], source)
    dim = int(_number(params.get("num_feature"), "num_feature", source))
    n_class = int(_number(params.get("num_class", 0), "num_class", source))
    if int(_number(params.get("num_target", 1), "num_target", source)) != 1:
        raise ModelFileError(f"{source}: multi-target XGBoost models are not supported")
    k = max(n_class, 1)
    raw = params.get("base_score", "0.5")
    bases = [_number(v, "base_score", source) for v in (json.loads(raw) if str(raw).startswith("[") else [raw])]
    if len(bases) not in (1, k):
        raise ModelFileError(f"{source}: base_score has {len(bases)} values for {k} outputs")
    base = np.broadcast_to(np.asarray(bases, dtype=np.float64), (k,)).copy()
    if objective in XGB_LOGIT:
        if np.any((base <= 0) | (base >= 1)):
            raise ModelFileError(f"{source}: base_score {base[0]} of {objective} is not a probability in (0, 1)")
        base = np.log(base / (1 - base))
    model = _get(booster, ["model"], source)
    trees = _get(model, ["trees"], source)
    info = _int_list(model.get("tree_info", [0] * len(trees)), "tree_info", source, len(trees))
    if not trees:
        raise ModelFileError(f"{source}: the model has no trees")
    if np.any((info < 0) | (info >= k)):
        raise ModelFileError(f"{source}: tree_info names an output outside [0, {k})")
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
        if any(int(s) != 0 for s in tree.get("split_type", [])):
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


# ---------------------------------------------------------------- LightGBM

def _lgb_blocks(text: str, source: str) -> tuple[dict, list[dict]]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "tree":
        raise ModelFileError(f"{source}: not a LightGBM text model (its first line is not 'tree'); expected a model "
                             "saved with Booster.save_model('model.txt')")
    header: dict = {}
    trees: list[dict] = []
    current = header
    for line in lines[1:]:
        line = line.strip()
        if line.startswith("end of trees"):
            break
        if line.startswith("Tree="):
            current = {}
            trees.append(current)
            continue
        if "=" in line:
            key, _, value = line.partition("=")
            current[key] = value
        elif line:
            current[line] = ""
    return header, trees


def _floats(tree: dict, key: str, where: str, n: int, plus_inf: bool = False) -> np.ndarray:
    """``plus_inf``: +inf (LightGBM's split of the present values from the missing ones) becomes the largest
    float32, which makes the same decision on every finite float32 input."""
    try:
        values = np.array([float(v) for v in tree.get(key, "").split()], dtype=np.float64)
    except ValueError:
        raise ModelFileError(f"{where}: {key} holds a value that is not a number") from None
    if plus_inf:
        values = np.where(values == np.inf, float(np.finfo(np.float32).max), values)
    if values.size != n:
        raise ModelFileError(f"{where}: {key} has {values.size} values, expected {n}")
    if not np.all(np.isfinite(values)):
        raise ModelFileError(f"{where}: {key} holds a value that is not finite")
    return values


def _lgb_child(c: np.ndarray, m: int, offset: int) -> np.ndarray:
    """LightGBM's child references (>= 0: internal node, < 0: leaf ~c) as node indices."""
    return np.where(c >= 0, c, m + (-c - 1)) + offset


def _lgb_proba(objective: list[str]) -> str | None:
    """LightGBM's predict_proba as a rule on the margins: binary (sigmoid:1) the logistic, multiclass the
    softmax; multiclassova, another sigmoid parameter and regression: none."""
    if objective[0] == "multiclass":
        return "softmax"
    if objective[0] == "binary" and all(p != "sigmoid" or v in ("1", "1.0", "1.000000")
                                        for p, _, v in (o.partition(":") for o in objective[1:])):
        return "logistic"
    return None


def from_lightgbm_text(text: str, source: str = "LightGBM model") -> TreeEnsembleModel:
    header, trees = _lgb_blocks(text, source)
    objective = header.get("objective", "").split()
    if not objective or objective[0] not in LGB_OBJECTIVES:
        raise ModelFileError(f"{source}: LightGBM objective {' '.join(objective) or '(none)'!r} is not supported; "
                             f"supported: {', '.join(LGB_OBJECTIVES)}")
    try:
        per_iteration = int(header.get("num_tree_per_iteration", "1"))
        dim = int(header.get("max_feature_idx", "")) + 1
    except ValueError:
        raise ModelFileError(f"{source}: num_tree_per_iteration or max_feature_idx is not an integer") from None
    if not trees:
        raise ModelFileError(f"{source}: the model has no trees")
    if per_iteration < 1 or len(trees) % per_iteration:
        raise ModelFileError(f"{source}: {len(trees)} trees for {per_iteration} per iteration")
    average = "average_output" in header
    scale = per_iteration / len(trees) if average else 1.0
    parts = {key: [] for key in ("feature", "threshold", "left", "right", "value", "default_left")}
    roots, outs, offset = [], [], 0
    for t, tree in enumerate(trees):
        where = f"{source}: tree {t}"
        if tree.get("is_linear", "0") != "0":
            raise ModelFileError(f"{where}: linear trees are not supported")
        try:
            n_leaves = int(tree.get("num_leaves", ""))
        except ValueError:
            raise ModelFileError(f"{where}: num_leaves is not an integer") from None
        if n_leaves < 1 or n_leaves > MAX_NODES:
            raise ModelFileError(f"{where}: num_leaves {n_leaves} is out of range")
        leaf_values = _floats(tree, "leaf_value", where, n_leaves) * scale
        m = n_leaves - 1  # internal nodes
        if m:
            feature = _floats(tree, "split_feature", where, m).astype(np.int64)
            threshold = _floats(tree, "threshold", where, m, plus_inf=True)
            decision = _floats(tree, "decision_type", where, m).astype(np.int64)
            left = _floats(tree, "left_child", where, m).astype(np.int64)
            right = _floats(tree, "right_child", where, m).astype(np.int64)
            if np.any(decision & 1):
                raise ModelFileError(f"{where}: categorical splits are not supported")
            if np.any(((decision >> 2) & 3) == 1):
                raise ModelFileError(f"{where}: zero-as-missing splits are not supported (train with "
                                     "zero_as_missing=false)")
            # missing type NaN (2): the default-left bit (1); None (0): LightGBM compares 0.0 instead
            dl = np.where(((decision >> 2) & 3) == 2, (decision >> 1) & 1, (0.0 <= threshold).astype(np.int64))
        else:
            feature = threshold = left = right = dl = np.zeros(0, dtype=np.int64)
        # nodes: the m internal ones, then the leaves; a child < 0 is leaf ~child
        n = m + n_leaves

        parts["feature"].append(np.concatenate([feature, np.full(n_leaves, -1)]))
        parts["threshold"].append(np.concatenate([threshold, np.zeros(n_leaves)]))
        parts["default_left"].append(np.concatenate([dl, np.zeros(n_leaves, dtype=np.int64)]))
        parts["left"].append(np.concatenate([_lgb_child(left, m, offset), np.full(n_leaves, -1)]))
        parts["right"].append(np.concatenate([_lgb_child(right, m, offset), np.full(n_leaves, -1)]))
        parts["value"].append(np.concatenate([np.zeros(m), leaf_values])[:, None])
        roots.append(offset)  # the root is internal node 0, or the single leaf
        outs.append(t % per_iteration)
        offset += n
    binary = objective[0] == "binary"
    k = per_iteration
    out = TreeEnsembleModel(*(np.concatenate(parts[p]) for p in ("feature", "threshold", "left", "right", "value")),
                            roots, outs, np.zeros(k), input_dim=dim, compare="le", binary=binary, source=source,
                            default_left=np.concatenate(parts["default_left"]), proba=_lgb_proba(objective))
    return out.with_task(REGRESSION) if objective[0] in LGB_REGRESSION else out


def from_lightgbm(obj) -> TreeEnsembleModel:
    """A live LGBMClassifier / LGBMRegressor / Booster, through its text form."""
    name = type(obj).__name__
    booster = obj if name == "Booster" else obj.booster_
    model = from_lightgbm_text(booster.model_to_string(), name)
    if hasattr(obj, "classes_") and model.task.get("kind") != "regression":
        model.set_classes(obj.classes_, name)
    return model
