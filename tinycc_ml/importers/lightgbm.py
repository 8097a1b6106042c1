"""LightGBM models as ``TreeEnsembleModel``s, read from LightGBM's text model (never unpickled):
``Booster.save_model("m.txt")``, or ``model_to_string()`` of ``LGBMClassifier`` / ``LGBMRegressor`` /
``Booster``. The library is needed only to convert live objects (``pip install 'tinycc-ml[lightgbm]'``);
model files are parsed with the standard library.

A node goes left when x[f] <= t (numerical splits; missing type None or NaN), leaves include the
shrinkage; tree i adds to class i mod num_tree_per_iteration; ``average_output`` (random forest mode)
averages. Objectives (LGB_LINKS): regressors' value = the inverse link of the margin, as ``predict``:
identity for regression (l2, l1, huber, fair, quantile, mape) and the ranking objectives (lambdarank,
rank_xendcg), exp for poisson, gamma, tweedie, the sigmoid for cross_entropy, margin x |margin| for
``reg_sqrt`` (the l2-family objectives); classifiers: binary (class 1 where the margin > 0), multiclass
/ multiclassova (argmax). cross_entropy_lambda (log1p(exp(m)): no such op), custom objectives,
categorical splits, zero-as-missing splits and linear trees are refused.

LightGBM's predict reads an input x with |x| <= kZeroThreshold (1e-35) as 0 before any split: a
threshold t within [-1e-35, 1e-35) is moved to the one deciding as LightGBM does on every input
(``zero_threshold``), so float and integer builds (which quantise such x to 0) both match it.

Missing values (NaN) go to each node's default side as LightGBM sends them: missing type NaN: the
default-left bit of ``decision_type``; missing type None: LightGBM compares 0.0 in place of the NaN,
so the side of 0 <= t.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tree_tables import REGRESSION, TreeTable, read_model_text
from tinycc_ml.models.trees import MAX_NODES, TreeEnsembleModel

# regressors: objective -> the inverse link predict applies to the margin (the names its model text holds)
LGB_LINKS = {**dict.fromkeys(("regression", "regression_l2", "regression_l1", "l2", "l1", "mse", "mae", "huber",
                              "fair", "quantile", "mape", "lambdarank", "rank_xendcg"), "identity"),
             **dict.fromkeys(("poisson", "gamma", "tweedie"), "exp"), "cross_entropy": "sigmoid"}
# reg_sqrt (a "sqrt" word after the objective): LightGBM's l2-family objectives square the margin back
SQRT_OBJECTIVES = ("regression", "regression_l2", "regression_l1", "l2", "l1", "mse", "mae", "huber", "fair",
                   "quantile", "mape")
LGB_OBJECTIVES = tuple(LGB_LINKS) + ("binary", "multiclass", "multiclassova")
K_ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (1e-35f): |x| <= it reads as 0


def load_lightgbm_file(path) -> TreeEnsembleModel:
    """A LightGBM ``.txt`` model file."""
    path = Path(path)
    return from_lightgbm_text(read_model_text(path, "LightGBM text model"), str(path))


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
        elif line and current is not header:  # LightGBM reads such a tree as another one (seen: shrinkage<1)
            raise ModelFileError(f"{source}: tree {len(trees) - 1}: line {line[:40]!r} is not key=value")
        elif line:
            current[line] = ""
    _check_tree_sizes(text, header, len(trees), source)
    return header, trees


def _check_tree_sizes(text: str, header: dict, n_trees: int, source: str) -> None:
    """LightGBM reads a file's trees at the byte offsets its ``tree_sizes`` line gives (as many trees as it
    lists), not by their ``Tree=`` lines: a file whose blocks are not there (a tree added, removed or edited
    to another length by hand) would be another model in LightGBM than here, so it is refused."""
    if "tree_sizes" not in header:
        return  # files without it are read tree by tree, by LightGBM too
    try:
        sizes = [int(v) for v in header["tree_sizes"].split()]
    except ValueError:
        raise ModelFileError(f"{source}: tree_sizes holds a value that is not an integer") from None
    data = text.encode("utf-8")
    starts = [m.start() for m in re.finditer(rb"(?m)^Tree=", data)]
    end = data.find(b"\nend of trees")
    starts = [s for s in starts if end < 0 or s < end]
    if len(sizes) != n_trees or len(starts) != n_trees or any(
            b - a != size for a, b, size in zip(starts, starts[1:], sizes)):
        raise ModelFileError(f"{source}: tree_sizes lists {len(sizes)} tree(s) whose sizes do not match the "
                             f"{n_trees} tree block(s) in the file (edited by hand?); LightGBM reads the trees at "
                             "those offsets, so this file is another model there: save it again with LightGBM, or "
                             "delete the tree_sizes line")


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


def _lgb_child(c: np.ndarray, m: int) -> np.ndarray:
    """LightGBM's child references (>= 0: internal node, < 0: leaf ~c) as node indices."""
    return np.where(c >= 0, c, m + (-c - 1))


def _lgb_proba(objective: list[str]) -> str | None:
    """LightGBM's predict_proba as a rule on the margins: binary (sigmoid:1) the logistic, multiclass the
    softmax; multiclassova, another sigmoid parameter and regression: none."""
    if objective[0] == "multiclass":
        return "softmax"
    if objective[0] == "binary" and all(p != "sigmoid" or v in ("1", "1.0", "1.000000")
                                        for p, _, v in (o.partition(":") for o in objective[1:])):
        return "logistic"
    return None


def zero_threshold(threshold: np.ndarray) -> np.ndarray:
    """Thresholds deciding on x as LightGBM's ``x' <= t`` does on x' = (0 if |x| <= kZeroThreshold else x):
    t in [-kZ, 0) sends every x >= -kZ right (x' >= 0 > t), so it becomes the largest value < -kZ; t in [0, kZ)
    sends every x <= kZ left (x' <= t there), so it becomes kZ; others decide alike on x and x'."""
    below = np.nextafter(-K_ZERO_THRESHOLD, -np.inf)
    threshold = np.where((threshold >= -K_ZERO_THRESHOLD) & (threshold < 0), below, threshold)
    return np.where((threshold >= 0) & (threshold < K_ZERO_THRESHOLD), K_ZERO_THRESHOLD, threshold)


def _lgb_link(objective: list[str], source: str) -> str:
    link = LGB_LINKS.get(objective[0], "identity")
    if "sqrt" in objective[1:]:
        if objective[0] not in SQRT_OBJECTIVES:
            raise ModelFileError(f"{source}: LightGBM objective {' '.join(objective)!r}: reg_sqrt is supported with "
                                 f"{', '.join(SQRT_OBJECTIVES)} only")
        return "signed_square"
    return link


def _check_outputs(header: dict, objective: list[str], per_iteration: int, source: str) -> None:
    """The objective, num_class (the header's and the objective's own) and the trees per iteration agree:
    multiclass models have one tree per class and iteration (two classes or more), the others one."""
    counts = [header.get("num_class", "1"), *(v for p, _, v in (o.partition(":") for o in objective[1:])
                                               if p == "num_class")]
    try:
        classes = {int(c) for c in counts}
    except ValueError:
        raise ModelFileError(f"{source}: num_class {' / '.join(counts)} is not an integer") from None
    multiclass = objective[0] in ("multiclass", "multiclassova")
    want = per_iteration if multiclass else 1
    if classes != {want} or per_iteration != want or (multiclass and want < 2):
        rule = "a multiclass model has one tree per class (two or more)" if multiclass else \
            "one tree per iteration, one class"
        raise ModelFileError(f"{source}: LightGBM objective {' '.join(objective)!r} with num_class "
                             f"{' / '.join(counts)} and {per_iteration} tree(s) per iteration: {rule}")


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
    _check_outputs(header, objective, per_iteration, source)
    average = "average_output" in header
    scale = per_iteration / len(trees) if average else 1.0
    table = TreeTable(1)
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
            threshold = zero_threshold(_floats(tree, "threshold", where, m, plus_inf=True))
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
        # nodes: the m internal ones, then the leaves (a child < 0 is leaf ~child); the root is internal
        # node 0, or the single leaf
        table.add(np.concatenate([feature, np.full(n_leaves, -1)]), np.concatenate([threshold, np.zeros(n_leaves)]),
                  np.concatenate([_lgb_child(left, m), np.full(n_leaves, -1)]),
                  np.concatenate([_lgb_child(right, m), np.full(n_leaves, -1)]),
                  np.concatenate([np.zeros(m), leaf_values]), output=t % per_iteration,
                  default_left=np.concatenate([dl, np.zeros(n_leaves, dtype=np.int64)]))
    binary = objective[0] == "binary"
    k = per_iteration
    regression = objective[0] in LGB_LINKS
    out = table.model(np.zeros(k), dim, binary, source, proba=_lgb_proba(objective),
                      link=_lgb_link(objective, source) if regression else "identity")
    return out.with_task(REGRESSION) if regression else out


def from_lightgbm(obj) -> TreeEnsembleModel:
    """A live LGBMClassifier / LGBMRegressor / Booster, through its text form."""
    name = type(obj).__name__
    booster = obj if name == "Booster" else obj.booster_
    model = from_lightgbm_text(booster.model_to_string(), name)
    if hasattr(obj, "classes_") and model.task.get("kind") != "regression":
        model.set_classes(obj.classes_, name)
    return model
