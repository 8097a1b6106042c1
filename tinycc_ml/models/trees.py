"""Decision trees and tree ensembles (forests, gradient boosting) as one model family, "trees".

scores(x) = base + sum over trees t of leaf_t(x), where the leaf is found by walking tree t from its
root: at an internal node go left when x[feature] <= threshold ("le", scikit-learn) or < threshold
("lt", XGBoost), the input first rounded to float32 as scikit-learn does for trees. A tree's leaf is
either a vector added to all outputs (a forest's class probabilities: the scores are then
n_trees x predict_proba) or a scalar added to one output (boosting: one tree per class and stage).

A NaN input (a missing value) goes to the node's default side, ``default_left`` (1: left), as the
libraries do (scikit-learn's ``missing_go_to_left``, XGBoost's ``default_left``, LightGBM's decision
type); integer builds receive it as the quantiser's missing code (``ir/ops/ensembles.py``).

prediction: argmax of the scores (the first maximum), or, for a binary model with one score
(``binary``), class 1 where the score is > 0. Regression: scores[0] is the value, the margin through the
library's inverse link ``link`` (LINKS: identity; exp for Poisson, gamma, Tweedie; the logistic sigmoid;
LightGBM's reg_sqrt, margin x |margin|). A link other than the identity is computed in float builds
only: integer builds refuse it (``check_precision``), as no table of exp or sigmoid is exact.

Arrays (``n`` nodes of all trees in one table; the importers fold averaging and learning rates into
the leaves): ``feature`` (n,) int (-1 at leaves), ``threshold`` (n,) float64, ``left``/``right`` (n,) int
(-1 at leaves), ``value`` (n, W), ``roots`` (T,), ``tree_output`` (T,) (-1: vector leaves), ``base`` (K,),
optional ``default_left`` (n,) of 0/1 (absent in files of earlier versions: every NaN goes right).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.ensembles import MAX_TREE_DEPTH, NodeDecisions, forest_levels, leaf_sums, tree_depths, walk
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_input
from tinycc_ml.models.saved import check_array

ARRAYS = ("feature", "threshold", "left", "right", "value", "roots", "tree_output", "base")
OPTIONAL_ARRAYS = ("default_left",)
# class probabilities from the scores (models/proba.py): forests "normalise" (the mean of the trees' class
# probabilities), boosting "softmax" / "logistic" of the margins, None: the library defines none this way
PROBA_RULES = (None, "normalise", "softmax", "logistic")
# a regressor's value from its margin m: m, exp(m), 1 / (1 + exp(-m)), m |m| (LightGBM's reg_sqrt)
LINKS = ("identity", "exp", "sigmoid", "signed_square")
MAX_NODES = 2**20


def float32_threshold(t, compare: str = "le") -> np.ndarray:
    """The float32 threshold t32 making the same decision as the float64 ``t`` on every float32 x:
    "le": the largest float32 <= t (no float32 lies in (t32, t], so x <= t <=> x <= t32);
    "lt": the smallest float32 >= t (none lies in [t, t32), so x < t <=> x < t32)."""
    t = np.asarray(t, dtype=np.float64)
    top = np.float32(np.finfo(np.float32).max)
    t32 = np.clip(t, -float(top), float(top)).astype(np.float32)
    with np.errstate(under="ignore", over="ignore"):  # steps to or from subnormals are exact
        return _step(t, t32, compare)


def _step(t: np.ndarray, t32: np.ndarray, compare: str) -> np.ndarray:
    if compare == "le":
        t32 = np.where(t32.astype(np.float64) > t, np.nextafter(t32, np.float32(-np.inf)), t32)
    else:
        t32 = np.where(t32.astype(np.float64) < t, np.nextafter(t32, np.float32(np.inf)), t32)
    return np.asarray(t32, dtype=np.float32)


def _int_array(value, name: str, source, shape) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "iub" and not (array.dtype.kind == "f" and np.all(np.isfinite(array))
                                               and np.all(array == np.round(array))):
        raise ModelFileError(f"{source}: {name} has dtype {array.dtype}; expected integers")
    if array.shape != shape:
        raise ModelFileError(f"{source}: {name} has shape {array.shape}, expected {shape}")
    if array.size and (array.min() < -(2**31) or array.max() >= 2**31):
        raise ModelFileError(f"{source}: {name} holds a value beyond int32")
    return array.astype(np.int64)


class TreeEnsembleModel(Model):
    family = "trees"

    def __init__(self, feature, threshold, left, right, value, roots, tree_output, base, input_dim: int,
                 compare: str = "le", binary: bool = False, source: str = "TreeEnsembleModel", default_left=None,
                 proba: str | None = None, link: str = "identity"):
        if compare not in ("le", "lt"):
            raise ModelFileError(f"{source}: compare {compare!r} is not 'le' or 'lt'")
        if not isinstance(input_dim, (int, np.integer)) or isinstance(input_dim, bool) or not 1 <= input_dim < 2**31:
            shown = repr(input_dim) if len(repr(input_dim)) <= 40 else f"of {len(repr(input_dim))} digits"
            raise ModelFileError(f"{source}: input_dim {shown} is not a positive integer below 2^31")
        if proba not in PROBA_RULES:
            raise ModelFileError(f"{source}: proba {proba!r} is not one of {PROBA_RULES}")
        self.compare, self.binary, self._input_dim = compare, bool(binary), int(input_dim)
        self.proba = proba
        if link not in LINKS:
            raise ModelFileError(f"{source}: link {link!r} is not one of {LINKS}")
        self.link = link
        feature = np.asarray(feature)
        n = feature.shape[0] if feature.ndim == 1 else -1
        if n < 1 or n > MAX_NODES:
            raise ModelFileError(f"{source}: feature has shape {feature.shape}, "
                                 f"expected (n,) with 1 <= n <= {MAX_NODES}")
        self.feature = _int_array(feature, "feature", source, (n,))
        self.left = _int_array(left, "left", source, (n,))
        self.right = _int_array(right, "right", source, (n,))
        self.threshold = check_array(threshold, "threshold", source, shape=(n,))
        self.value = check_array(value, "value", source, ndim=2)
        if self.value.shape[0] != n or self.value.shape[1] < 1:
            raise ModelFileError(f"{source}: value has shape {self.value.shape}, expected ({n}, W >= 1)")
        self.roots = _int_array(roots, "roots", source, np.shape(roots))
        if self.roots.ndim != 1 or self.roots.size < 1:
            raise ModelFileError(f"{source}: roots has shape {self.roots.shape}, expected (T,) with T >= 1")
        self.tree_output = _int_array(tree_output, "tree_output", source, self.roots.shape)
        self.base = check_array(base, "base", source, ndim=1)
        if default_left is None:
            default_left = np.zeros(n, dtype=np.int64)
        self.default_left = _int_array(default_left, "default_left", source, (n,))
        if np.any((self.default_left != 0) & (self.default_left != 1)):
            raise ModelFileError(f"{source}: default_left holds a value other than 0 and 1")
        self.default_left = np.where(self.feature >= 0, self.default_left, 0)
        k = self.base.shape[0]
        if k < 1:
            raise ModelFileError(f"{source}: base is empty; it holds one value per output")
        self._check_structure(source, k)

    def _check_structure(self, source, k: int) -> None:
        internal = self.feature >= 0
        bad = np.flatnonzero((self.feature < -1) | (self.feature >= self._input_dim))
        if bad.size:
            raise ModelFileError(f"{source}: node {bad[0]} tests feature {self.feature[bad[0]]}, outside "
                                 f"[0, {self._input_dim}) (-1 marks a leaf)")
        n = self.feature.size
        for name, child in (("left", self.left), ("right", self.right)):
            wrong = np.flatnonzero(internal & ((child < 0) | (child >= n)))
            if wrong.size:
                raise ModelFileError(f"{source}: {name} child {child[wrong[0]]} of node {wrong[0]} is outside [0, {n})")
        if np.any(~np.isfinite(self.threshold[internal])):
            raise ModelFileError(f"{source}: a threshold is not finite")
        if np.any((self.roots < 0) | (self.roots >= n)):
            raise ModelFileError(f"{source}: a root index is outside [0, {n})")
        # every node reached once and no tree too deep: a forest (else the walk below names the first fault)
        levels = forest_levels(self.feature, self.left, self.right, self.roots, limit=MAX_TREE_DEPTH, max_nodes=n)
        forest = False
        if levels is not None and len(levels) <= MAX_TREE_DEPTH + 1:
            listed = np.concatenate([nodes for nodes, _ in levels])
            forest = len(listed) == n and bool(np.all(np.bincount(listed, minlength=n) == 1))
        seen = np.zeros(n, dtype=bool)
        for t, root in enumerate(() if forest else self.roots):
            level, depth = [int(root)], 0
            while level:
                if depth > MAX_TREE_DEPTH:
                    raise ModelFileError(f"{source}: tree {t} is deeper than {MAX_TREE_DEPTH} levels")
                nxt = []
                for i in level:
                    if seen[i]:
                        raise ModelFileError(f"{source}: node {i} is reached twice (a cycle or a shared subtree); "
                                             "each node must belong to one tree, reached once")
                    seen[i] = True
                    if internal[i]:
                        nxt += [int(self.left[i]), int(self.right[i])]
                level, depth = nxt, depth + 1
        if not forest and not seen.all():
            raise ModelFileError(f"{source}: node {int(np.flatnonzero(~seen)[0])} is not reached from any root")
        if np.all(self.tree_output < 0):
            if self.value.shape[1] != k:
                raise ModelFileError(f"{source}: vector leaves hold {self.value.shape[1]} values for {k} outputs")
        elif self.value.shape[1] != 1 or np.any((self.tree_output < 0) | (self.tree_output >= k)):
            raise ModelFileError(f"{source}: scalar-leaf trees need value of shape (n, 1) and tree_output in [0, {k})")
        if self.binary and k != 1:
            raise ModelFileError(f"{source}: a binary model has one score, not {k}")
        if self.link != "identity" and (k != 1 or self.binary):
            raise ModelFileError(f"{source}: link {self.link!r} applies to a regressor's single score, not {k} "
                                 "score(s) of a classifier")

    # --- Model interface ---
    @property
    def input_dim(self) -> int:
        return self._input_dim

    @property
    def n_outputs(self) -> int:
        return self.base.shape[0]

    @property
    def n_classes(self) -> int:
        return 2 if self.binary else self.n_outputs

    @property
    def n_trees(self) -> int:
        return self.roots.size

    def arrays(self) -> dict[str, np.ndarray]:
        return {"feature": self.feature.astype(np.int32), "threshold": self.threshold,
                "left": self.left.astype(np.int32), "right": self.right.astype(np.int32), "value": self.value,
                "roots": self.roots.astype(np.int32), "tree_output": self.tree_output.astype(np.int32),
                "base": self.base, "default_left": self.default_left.astype(np.int8)}

    def meta(self) -> dict:
        out = {"compare": self.compare, "binary": self.binary, "input_dim": self._input_dim}
        if self.proba is not None:
            out["proba"] = self.proba
        if self.link != "identity":
            out["link"] = self.link
        return out

    @property
    def proba_rule(self) -> str | None:
        """The rule turning the scores into class probabilities (classifiers only)."""
        return self.proba if self.task.get("kind", "classification") == "classification" else None

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> TreeEnsembleModel:
        missing = [a for a in ARRAYS if a not in arrays]
        if missing:
            raise ModelFileError(f"{source}: missing array(s) {missing}")
        unknown = set(arrays) - set(ARRAYS) - set(OPTIONAL_ARRAYS)
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {sorted(unknown)}")
        if not isinstance(meta, dict) or not isinstance(meta.get("binary", False), bool):
            raise ModelFileError(f"{source}: metadata 'binary' must be true or false")
        return cls(*(arrays[a] for a in ARRAYS), input_dim=meta.get("input_dim"),
                   compare=meta.get("compare", "le"), binary=meta.get("binary", False), source=source,
                   default_left=arrays.get("default_left"), proba=meta.get("proba"),
                   link=meta.get("link", "identity"))

    def leaves(self, X) -> np.ndarray:
        """The leaf each tree reaches, (n, T), by the library's rule on float32-rounded inputs."""
        X = self._check_input(X).astype(np.float32).astype(np.float64)
        tables = {"feature": self.feature, "left": self.left, "right": self.right, "roots": self.roots}
        thresholds = self.threshold
        if np.all(np.isfinite(thresholds[self.feature >= 0])):
            # the float32 thresholds the op compares (op_attrs), which decide every float32 x as these do (an
            # infinite one would not decide an infinite x alike): the walk is then the one the build's graph
            # takes of the same rows
            thresholds = np.where(self.feature >= 0, float32_threshold(thresholds, self.compare), 0).astype(np.float64)
        return walk(tables, NodeDecisions(X, thresholds, self.feature, self.compare == "lt", self.default_left != 0))

    def scores(self, X) -> np.ndarray:
        tables = {"feature": self.feature, "value": self.value, "tree_output": self.tree_output,
                  "n_outputs": self.n_outputs}
        out = leaf_sums(tables, self.leaves(X), self.value, np.float64, initial=self.base)
        return apply_link(out, self.link)

    def check_precision(self, precision: str) -> None:
        if self.link != "identity" and precision != "float":
            raise CompileError(f"{self.describe()}: the value is the margin through the link {self.link!r}, which "
                               f"{precision} code cannot compute exactly (no exact integer {self.link}); compile at "
                               "precision float")

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        # the tables at worst: a decision node its feature, threshold and two 16-bit child references; every
        # leaf a row of its own (deduplicated rows only make it smaller)
        node = (1 if self.input_dim <= 256 else 2) + value_bytes + 4
        leaf = self.value.shape[1] * value_bytes
        n_trees = int(self.roots.size)
        now = int(np.count_nonzero(self.feature < 0)) / n_trees

        def leaves(trees: int) -> int:  # per tree, L leaves cost (L - 1) nodes + L leaf rows
            return int((room_bytes / trees + node) // (node + leaf))

        options = [f"{trees} trees of at most {leaves(trees)} leaves (max_leaf_nodes={leaves(trees)}, or "
                   f"max_depth={int(np.log2(leaves(trees)))})"
                   for trees in sorted({n_trees, max(1, n_trees // 10)}, reverse=True) if leaves(trees) >= 2]
        if not options:
            return None
        return (f"this model has {n_trees} trees of {now:.0f} leaves on average; what fits: " + ", or ".join(options)
                + " (XGBoost: max_leaves, LightGBM: num_leaves; boosting counts rounds x classes trees)")

    def predict_index(self, X) -> np.ndarray:
        s = self.scores(X)
        return (s[:, 0] > 0).astype(np.int64) if self.binary else np.argmax(s, axis=1)

    def op_attrs(self) -> dict:
        """The tree_ensemble op's attributes (float32 thresholds deciding as the float64 ones do)."""
        return {"feature": self.feature.astype(np.int32), "threshold": np.where(
                    self.feature >= 0, float32_threshold(self.threshold, self.compare), 0).astype(np.float32),
                "left": self.left.astype(np.int32), "right": self.right.astype(np.int32),
                "value": self.value.astype(np.float32), "roots": self.roots.astype(np.int32),
                "tree_output": self.tree_output.astype(np.int32), "n_outputs": int(self.n_outputs),
                "compare": self.compare, "default_left": self.default_left.astype(np.int8)}

    def lower(self) -> Graph:
        g = Graph("trees")
        x = add_input(g, self.input_dim)
        scores = g.add("tree_ensemble", [x], self.op_attrs(), name="trees")
        if np.any(self.base != 0):
            scores = g.add("add", [scores, add_const(g, "base", self.base)], name="scores")
        scores = add_link(g, scores, self.link)
        g.set_output("scores", scores)
        if self.binary:  # class 1 where the score is > 0: argmax of (0, score) picks 0 on ties
            pair = g.add("matvec", [add_const(g, "binary_pair", [[0.0], [1.0]]), scores], name="binary_pair_scores")
            g.set_output("prediction", g.add("argmax", [pair], name="prediction"))
        else:
            g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g

    def describe(self) -> str:
        depth = max(self._depths()) if self.n_trees else 0
        link = "" if self.link == "identity" else f", link {self.link}"
        return (f"trees ({self.n_trees} tree(s), {int(np.sum(self.feature >= 0))} decision nodes, depth {depth}, "
                f"{self.n_outputs} output(s){link})")

    def _depths(self) -> list[int]:
        return tree_depths(self.feature, self.left, self.right, self.roots).tolist()


def apply_link(margin: np.ndarray, link: str) -> np.ndarray:
    """The value of each margin through ``link`` (float64)."""
    if link == "exp":
        with np.errstate(over="ignore"):
            return np.exp(margin)
    if link == "sigmoid":
        return 0.5 * np.tanh(0.5 * margin) + 0.5
    if link == "signed_square":
        return margin * np.abs(margin)
    return margin


def add_link(g: Graph, margin: str, link: str) -> str:
    """The graph's value of ``margin`` through ``link``; the sigmoid as 0.5 tanh(m / 2) + 1/2 (no division
    op; its absolute error is float32's near 1, 6e-8), |m| as 2 max(m, 0) - m (exact in float)."""
    if link == "exp":
        return g.add("exp", [margin], name="value")
    if link == "sigmoid":
        half = g.add("scale", [margin], {"factor": 0.5}, name="half_margin")
        tanh = g.add("scale", [g.add("tanh", [half], name="tanh_half_margin")], {"factor": 0.5}, name="half_tanh")
        return g.add("add", [tanh, add_const(g, "one_half", [0.5])], name="value")
    if link == "signed_square":
        top = float(np.finfo(np.float32).max)
        positive = g.add("scale", [g.add("clip", [margin], {"lo": 0.0, "hi": top}, name="margin_positive")],
                         {"factor": 2.0}, name="twice_positive")
        magnitude = g.add("sub", [positive, margin], name="margin_magnitude")
        return g.add("mul", [margin, magnitude], name="value")
    return margin
