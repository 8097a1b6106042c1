"""Decision-tree ensembles: one op, ``tree_ensemble``, for single trees, forests and boosting.

Attributes (all nodes of all trees in one table, ``n`` nodes):
- ``feature`` (n,) int32: the feature an internal node tests; -1 marks a leaf;
- ``threshold`` (n,) float32: the node's threshold (0 at leaves);
- ``left``, ``right`` (n,) int32: child node indices (-1 at leaves);
- ``value`` (n, W) float32: a leaf's values (rows of internal nodes are 0); W is the number of
  outputs (vector leaves: a forest's class probabilities) or 1 (scalar leaves of boosting);
- ``roots`` (T,) int32: the root node of each tree;
- ``tree_output`` (T,) int32: the output a scalar-leaf tree adds to (-1 for vector leaves: the leaf
  adds to every output);
- ``n_outputs``: the length of the result; ``compare``: "le" (go left when x[f] <= t: scikit-learn,
  LightGBM) or "lt" (x[f] < t: XGBoost);
- ``default_left`` (n,) int, optional: 1 where a missing (NaN) input goes left at the node, 0 where it
  goes right (absent: every NaN goes right). The importers read it from the libraries: scikit-learn's
  ``missing_go_to_left``, XGBoost's ``default_left``, LightGBM's decision type (missing type NaN: its
  default-left bit; missing type None: LightGBM compares 0 instead of the NaN, so the side of 0).

Float semantics: the operand is rounded to float32 first (as scikit-learn does for trees), every tree
is walked from its root (a NaN feature goes to the node's default side, ``default_left``; any other
value is compared), and the result is the sum of the leaves reached (out[tree_output[t]] +=
value[leaf, 0], or out += value[leaf] for vector leaves). Importers store thresholds as float32 values
that make the same decision on every float32 input as the library's own (see
``models.trees.float32_threshold``).

Integer semantics (operand x_q at scale S, its real value x_q * 2^-S; result at scale O):
- **Missing values.** The quantiser (``ir.fixed.quantise``, the C's ``<prefix>_quantise_feature``)
  gives a NaN the code M = -2^(b-1) of a b-bit operand, which no real value gets (real values saturate
  to [M + 1, 2^(b-1) - 1]). A node sends x_q = M to its default side (``default_left``) and compares
  every other x_q as below.
- **Decisions are exact.** A node goes left when ``x_q <= T`` with the integer threshold
  ``T = floor(t * 2^S)`` ("le"; for "lt", ``T = ceil(t * 2^S) - 1``), because for an integer x_q,
  x_q * 2^-S <= t  <=>  x_q <= t * 2^S  <=>  x_q <= floor(t * 2^S); and x_q * 2^-S < t  <=>
  x_q < t * 2^S  <=>  x_q <= ceil(t * 2^S) - 1. t is a float32 and 2^S a power of two, so t * 2^S
  is exact in float64 and so are floor and ceil. T is clipped to [M, 2^(b-1) - 1] for a b-bit
  operand (which changes no decision: every real x_q lies in [M + 1, 2^(b-1) - 1]), so it fits the
  operand's type; the C stores T in the narrowest of int8/int16 that holds every T of the ensemble
  (``threshold_ints``), and tests x_q != M only at nodes whose default side is right (M <= T, so
  x_q <= T sends M left by itself).
  So the integer walk reaches the leaf that the float walk reaches on x_q's real value.
- **Leaves** are stored as ints at the leaf scale L (``leaf_scale``: the finest scale at which every
  leaf fits ``leaf_bits`` bits (optional attribute, default 16; 8 is allowed but no pipeline sets it: 8-bit
  leaves moved 0.2-0.7% of the digits predictions of boosting and extra-trees ensembles away from the float
  build, against the exact decisions on grid inputs that int16 leaves keep), at most O + LEAF_GUARD_BITS),
  summed in int32, then shifted to O with one
  rounding shift and saturated: the error against the float sum of the same leaves is at most
  T * 2^-(L+1) (leaf rounding) + 2^-(O+1) (final rounding) when nothing saturates.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, float_or_fixed, need, register_op, result_dtype
from tinycc_ml.ir.types import TensorType

LEAF_BITS = 16
LEAF_GUARD_BITS = 8  # leaves at most this much finer than the result (the sum's rounding dominates)
MAX_TREE_DEPTH = 64


def _infer(ts, attrs, declared):
    (x,) = ts
    float_or_fixed(x, "operand")
    need(x.rank == 1, f"operand has shape {x.shape}, expected a vector")
    feature, threshold = attrs["feature"], attrs["threshold"]
    left, right, value, roots = attrs["left"], attrs["right"], attrs["value"], attrs["roots"]
    n = feature.shape[0]
    need(n >= 1 and feature.ndim == 1, "feature must be a non-empty vector")
    for name, arr in (("threshold", threshold), ("left", left), ("right", right)):
        need(arr.shape == (n,), f"{name} has shape {arr.shape}, expected ({n},)")
    need(value.ndim == 2 and value.shape[0] == n, f"value has shape {value.shape}, expected ({n}, W)")
    need(threshold.dtype == np.float32 and value.dtype == np.float32, "threshold and value must be float32")
    k = int(attrs["n_outputs"])
    need(k >= 1, f"n_outputs = {k} must be >= 1")
    tree_output = attrs["tree_output"]
    need(roots.ndim == 1 and roots.size >= 1 and tree_output.shape == roots.shape,
         "roots and tree_output must be vectors of one entry per tree")
    need(attrs["compare"] in ("le", "lt"), f"compare must be 'le' or 'lt', got {attrs['compare']!r}")
    once_per_tables(attrs, ("feature", "threshold", "left", "right", "value", "roots"), x.shape[0],
                    lambda: _check_tables(attrs, x.shape[0]))
    if np.all(tree_output < 0):
        need(value.shape[1] == k, f"vector leaves have {value.shape[1]} values for {k} outputs")
    else:
        need(value.shape[1] == 1 and np.all((tree_output >= 0) & (tree_output < k)),
             "scalar-leaf trees need value (n, 1) and tree_output in [0, n_outputs)")
    dl = attrs.get("default_left")
    need(dl is None or (dl.shape == (n,) and dl.dtype.kind in "iub" and np.all((dl == 0) | (dl == 1))),
         f"default_left must be ({n},) of 0/1")
    need(int(attrs.get("leaf_bits", LEAF_BITS)) in (8, 16), "leaf_bits must be 8 or 16")
    return TensorType((k,), result_dtype(ts, declared))


def _check_tables(attrs, n_features: int) -> bool:
    feature, left, right, n = attrs["feature"], attrs["left"], attrs["right"], len(attrs["feature"])
    internal = feature >= 0
    need(np.all(feature[internal] < n_features), f"a feature index is beyond the operand's {n_features} elements")
    need(np.all(np.isfinite(attrs["threshold"])) and np.all(np.isfinite(attrs["value"])),
         "thresholds and leaf values must be finite")
    need(np.all((left[internal] >= 0) & (left[internal] < n) & (right[internal] >= 0) & (right[internal] < n)),
         "a child index is out of range")
    need(tree_depth(attrs) <= MAX_TREE_DEPTH, f"a tree is deeper than {MAX_TREE_DEPTH} levels")
    return True


def kept(cache: OrderedDict, key, limit: int, compute):
    """``cache[key]``, computed by ``compute()`` when absent; the ``limit`` most recently used entries stay."""
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    cache[key] = value = compute()
    while len(cache) > limit:
        cache.popitem(last=False)
    return value


def once_per_tables(attrs, names: tuple[str, ...], extra, compute):
    """``compute()``, kept for the attributes' very arrays (the same objects, passed on from graph to graph as a
    build's passes copy it) and ``extra``: a build checks and measures the same tables many times. The entry holds
    the arrays, so their ids name them while it is kept."""
    arrays = tuple(attrs[name] for name in names)
    return kept(KEPT_FOR_TABLES, (names, tuple(map(id, arrays)), extra), 32, lambda: (arrays, compute()))[1]


KEPT_FOR_TABLES: OrderedDict = OrderedDict()


def forget_kept() -> None:
    """Drop every walk and table result kept in this process: the next build computes them as a first build
    (benchmarks/compile_time.py measures first builds)."""
    for cache in (KEPT_FOR_TABLES, RECENT_WALKS, RECENT_LEAVES, RECENT_LEVELS):
        cache.clear()


def forest_levels(feature, left, right, roots, limit: int = MAX_TREE_DEPTH,
                  max_nodes: int | None = None) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The trees' nodes level by level, all trees at once: per level (nodes, owner) with the owners (tree
    indices) ascending and, within a tree, the level's nodes in breadth-first order (a node's left child
    before its right, children in their parents' order). Stops after level ``limit + 1`` (a cycle, or a tree
    deeper than the limit). With ``max_nodes``: None once more than that many nodes were listed, which in a
    forest (every node one parent at most) cannot happen for max_nodes = the table's size: a shared subtree
    or a cycle then. Kept for the very arrays given (a build's checks, depths, layouts and host tables ask for
    the same levels several times); the caller must not change them."""
    tables = (feature, left, right, roots)
    key = (tuple(map(id, tables)), limit, max_nodes)
    return kept(RECENT_LEVELS, key, RECENT_LEVELS_KEPT, lambda: (tables, _forest_levels(
        feature, left, right, roots, limit, max_nodes)))[1]


RECENT_LEVELS: OrderedDict = OrderedDict()
RECENT_LEVELS_KEPT = 8


def _forest_levels(feature, left, right, roots, limit: int, max_nodes: int | None
                   ) -> list[tuple[np.ndarray, np.ndarray]] | None:
    feature, left, right = (np.asarray(a, dtype=np.int64) for a in (feature, left, right))
    nodes = np.asarray(roots, dtype=np.int64)
    owner = np.arange(len(nodes), dtype=np.int64)
    levels, listed = [], 0
    while nodes.size:
        levels.append((nodes, owner))
        listed += nodes.size
        if len(levels) > limit + 1 or (max_nodes is not None and listed > max_nodes):
            return None if max_nodes is not None and listed > max_nodes else levels
        inner = feature[nodes] >= 0
        parents, owner = nodes[inner], owner[inner]
        nodes = np.stack([left[parents], right[parents]], axis=1).reshape(-1)
        owner = np.repeat(owner, 2)
    return levels


def tree_depths(feature, left, right, roots, limit: int = MAX_TREE_DEPTH) -> np.ndarray:
    """The depth of each tree (a single leaf: 0), level by level over all trees at once; a tree deeper than
    ``limit`` (a cycle included) gets limit + 1. A table that is not a forest (shared subtrees) keeps each
    node once per tree and level, so the work is bounded by the nodes even in a hostile table."""
    depths = np.zeros(len(roots), dtype=np.int64)
    levels = forest_levels(feature, left, right, roots, limit, max_nodes=len(feature))
    if levels is not None:
        for depth, (_, owner) in enumerate(levels):
            depths[owner] = depth
        return depths
    feature, left, right = (np.asarray(a, dtype=np.int64) for a in (feature, left, right))
    nodes = np.asarray(roots, dtype=np.int64)
    owner = np.arange(len(nodes), dtype=np.int64)
    depth = 0
    while nodes.size:
        depths[owner] = depth
        if depth > limit:
            break
        inner = feature[nodes] >= 0
        nodes, owner = nodes[inner], owner[inner]
        keys = np.unique(np.concatenate([owner * len(feature) + left[nodes], owner * len(feature) + right[nodes]]))
        owner, nodes = np.divmod(keys, len(feature))
        depth += 1
    return depths


def tree_depth(attrs) -> int:
    """The depth of the deepest tree (a single leaf: 0); a cycle counts as beyond the limit."""
    depths = tree_depths(attrs["feature"], attrs["left"], attrs["right"], attrs["roots"])
    return int(depths.max(initial=0))


def walk(attrs, goes_left) -> np.ndarray:
    """The leaf each tree reaches for each row: (rows, T). ``goes_left(nodes, rows)`` gives whether each row goes
    left at its node. A build's passes walk the same trees on the same rows several times (ranges, agreement,
    the scale search on a subset of them, the integer interpreter on the rows' grid values): the leaves of the
    last walks are kept per row, by ``goes_left.rule_fingerprint()`` and the tables', and only rows not walked
    yet under that rule are walked."""
    key = goes_left.rule_fingerprint() + tables_fingerprint(attrs)
    return kept(RECENT_WALKS, key, RECENT_WALKS_KEPT, lambda: KeptLeaves(len(attrs["roots"]))).leaves(attrs,
                                                                                                   goes_left)


class KeptLeaves:
    """The leaves rows reached under one decision rule and one set of tables, by the row's bytes."""

    def __init__(self, n_trees: int):
        self.index: dict[bytes, int] = {}
        self.table = np.zeros((0, n_trees), dtype=np.int64)

    def leaves(self, attrs, decide) -> np.ndarray:
        keys = decide.row_keys()
        index = self.index
        fresh: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in index and key not in fresh:
                fresh[key] = i
        if fresh:
            found = _walk(attrs, decide.subset(np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh))))
            start = len(self.table)
            self.table = np.concatenate([self.table, found]) if start else found
            for j, key in enumerate(fresh):
                index[key] = start + j
        return self.table[np.fromiter((index[key] for key in keys), dtype=np.int64, count=len(keys))]


RECENT_WALKS: OrderedDict[bytes, KeptLeaves] = OrderedDict()


def tables_fingerprint(attrs) -> bytes:
    """The trees' shape (feature, children, roots), hashed."""
    def digest() -> bytes:
        h = hashlib.blake2b(digest_size=20)
        for name in ("feature", "left", "right", "roots"):
            h.update(np.ascontiguousarray(attrs[name], dtype=np.int64).tobytes() + b"|")
        return h.digest()

    return once_per_tables(attrs, ("feature", "left", "right", "roots"), "fingerprint", digest)
RECENT_WALKS_KEPT = 3


def _walk(attrs, goes_left: NodeDecisions) -> np.ndarray:
    """walk's work: a block of trees and every row step at once, tree after tree in the lanes (a tree's nodes and
    the rows' values are then read from a small part of memory each). A node n is carried as 2n: its feature and
    threshold at 2n, its children at 2n (right) and 2n + 1 (left). A leaf leads to itself, so a finished walk
    may step on until the finished ones are worth dropping (looked at every WALK_DONE_EVERY steps)."""
    feature = np.asarray(attrs["feature"])
    leaf = feature < 0
    own = np.arange(len(feature), dtype=np.int64)
    kids = 2 * np.stack([np.where(leaf, own, attrs["right"]), np.where(leaf, own, attrs["left"])],
                        axis=1).astype(np.int64).reshape(-1)  # node 2n goes to kids[2n + goes_left]
    feature2 = np.repeat(goes_left.feature.astype(np.int64), 2)
    threshold2, leaf2 = np.repeat(goes_left.t, 2), np.repeat(leaf, 2)
    default2 = np.repeat(np.broadcast_to(goes_left.default, leaf.shape), 2) if goes_left.any_missing else None
    values, width, strict = goes_left.values, goes_left.width, goes_left.strict
    if values.dtype == np.float64 and threshold2.dtype == np.float64:  # float32 where every value is one: half
        # the bytes read, the same comparisons; a value beyond float32's range is not one (kept float64)
        with np.errstate(over="ignore"):
            values32, threshold32 = values.astype(np.float32), threshold2.astype(np.float32)
        if np.array_equal(values32, values, equal_nan=True) and np.array_equal(threshold32, threshold2):
            values, threshold2 = values32, threshold32
    roots = np.asarray(attrs["roots"], dtype=np.int64)
    n_rows, n_trees = goes_left.rows, len(roots)
    out = np.empty(n_trees * n_rows, dtype=np.int64)
    block = max(1, WALK_BLOCK // max(n_rows, 1))
    for first in range(0, n_trees, block):
        count = min(block, n_trees - first)
        lane = np.arange(first * n_rows, (first + count) * n_rows, dtype=np.int64)
        node, at = np.repeat(2 * roots[first:first + count], n_rows), (lane % n_rows) * width
        step = 0
        while node.size:
            if step % WALK_DONE_EVERY == 0:
                done = np.take(leaf2, node)
                if np.count_nonzero(done) * 8 >= node.size:
                    out[lane[done]] = node[done] >> 1
                    keep = ~done
                    lane, node, at = lane[keep], node[keep], at[keep]
                    if not node.size:
                        break
            step += 1
            v = np.take(values, at + np.take(feature2, node))
            with np.errstate(invalid="ignore"):
                go = v < np.take(threshold2, node) if strict else v <= np.take(threshold2, node)
            if default2 is not None:
                go = np.where(goes_left.missing(v), np.take(default2, node), go)
            node = np.take(kids, node + go)
    return out.reshape(n_trees, n_rows).T.copy()


WALK_BLOCK = 1 << 16  # rows x trees walked at once: a few trees' nodes stay in the cache
WALK_DONE_EVERY = 4


def default_left(attrs) -> np.ndarray:
    """The side a missing input goes at each node (bool, (n,)): the attribute, or right everywhere."""
    dl = attrs.get("default_left")
    return np.zeros(len(attrs["feature"]), dtype=bool) if dl is None else np.asarray(dl) != 0


def threshold_units(thresholds: np.ndarray, feature: np.ndarray, width: int) -> tuple | None:
    """NodeDecisions' canonical form of float decisions, its part that depends on the tables only (a build keeps
    it for them; value_units applies it to rows): feature f's thresholds (and values) times 2^-e_f, e_f the
    exponent of its largest |threshold| (frexp); a feature whose thresholds are all 0 decided by its values'
    signs; the values of features no node reads 0. A power of two changes no comparison where it is exact, which
    is checked (unscaled otherwise). Returns (the thresholds scaled, the exponents e_f (None: unscaled), the
    features read, the features compared with 0 only, the thresholds unscaled); None where a feature index is
    beyond the rows (no canonical form)."""
    internal = feature >= 0
    used_feature, used_t = feature[internal].astype(np.int64), thresholds[internal]
    if np.any(used_feature >= width):
        return None
    read = np.zeros(width, dtype=bool)
    read[used_feature] = True
    plain = np.where(internal, thresholds, 0.0)
    if not np.all(np.isfinite(used_t)):
        return plain, None, read, None, plain
    peak = np.zeros(width)  # each feature's largest |threshold| (0 where no node reads it)
    np.maximum.at(peak, used_feature, np.abs(used_t).astype(np.float64))
    exponent = np.frexp(peak)[1].astype(np.int64)
    t = np.where(internal, np.ldexp(thresholds, -exponent[np.maximum(feature, 0)]), 0.0)
    if not np.array_equal(np.ldexp(t[internal], exponent[used_feature]), used_t):  # into the subnormals
        return plain, None, read, None, plain
    return t, exponent, read, read & (peak == 0), plain


def value_units(X: np.ndarray, units: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows X and the thresholds in the canonical form ``units`` (threshold_units, not None) gives."""
    t, exponent, read, signs, plain = units
    if exponent is None:
        return np.where(read, X, 0.0), t
    scaled = np.where(read, np.ldexp(X, -exponent), 0.0)
    with np.errstate(over="ignore"):
        exact = np.array_equal(np.ldexp(scaled[:, read], exponent[read]), X[:, read], equal_nan=True)
    if not exact:  # a value scaled into the subnormals or beyond the range: unscaled
        return np.where(read, X, 0.0), plain
    # a feature compared with 0 only is decided by its values' signs; -0.0 decides as +0.0 everywhere
    scaled[:, signs] = np.sign(scaled[:, signs])
    return scaled + 0.0, t


class NodeDecisions:
    """Decisions of rows (default: each row, in order) at one node each, from comparisons ``x[f] <= t`` (or
    ``<``); a missing input (NaN, or the integer ``missing_code``) goes to the node's default side. ``feature``
    is the table's (-1 at leaves, where no decision is read: a leaf leads to itself either way).

    Float decisions are taken in a canonical form (``threshold_units``): each feature's values and thresholds
    scaled by the one power of two that brings its largest |threshold| to [0.5, 1), where that is exact, and the
    values of features no node reads set to 0. The decisions are the same; the form is the same for a model and
    for its graph whose input scales (passes/input_scales.py) multiplied a feature and its thresholds by a power
    of two, so their walks of the same rows are one (walk keeps them by the rule and the rows)."""

    def __init__(self, X, thresholds, feature, strict: bool, default, missing_code: int | None = None,
                 canonical: bool = False, units: tuple | None = None, rule: bytes | None = None):
        """``canonical``: X and thresholds are in the canonical form already; ``units``: threshold_units of the
        thresholds (kept for the tables), ``rule``: the rule_fingerprint (both computed here when None)."""
        X, thresholds = np.ascontiguousarray(X), np.asarray(thresholds)
        if not canonical and missing_code is None and X.dtype.kind == "f" and thresholds.dtype.kind == "f":
            units = threshold_units(thresholds, np.asarray(feature), X.shape[1]) if units is None else units
            if units is not None:
                X, thresholds = value_units(X, units)
        self.rule = rule
        self.X, self.values, self.width, self.rows = X, X.reshape(-1), X.shape[1], len(X)
        self.t, self.strict, self.default, self.missing_code = thresholds, strict, default, missing_code
        self.table_feature = np.asarray(feature)
        self.feature = np.maximum(feature, 0)
        self.any_missing = bool(np.any(self.missing(self.values)))

    def missing(self, v: np.ndarray) -> np.ndarray:
        return np.isnan(v) if self.missing_code is None else v == self.missing_code

    def __call__(self, node, rows=None):
        rows = np.arange(self.rows) if rows is None else rows
        v = self.values[rows * self.width + self.feature[node]]
        t = self.t[node]
        with np.errstate(invalid="ignore"):
            go = v < t if self.strict else v <= t
        return np.where(self.missing(v), self.default[node], go) if self.any_missing else go

    def subset(self, rows: np.ndarray) -> NodeDecisions:
        """The same decisions for the given rows of X only."""
        return NodeDecisions(self.X[rows], self.t, self.table_feature, self.strict, self.default, self.missing_code,
                             canonical=True, rule=self.rule)

    def rule_fingerprint(self) -> bytes:
        """What a row's decisions depend on besides the row, hashed: equal fingerprints decide every equal row
        alike. Canonical where the form does not change a decision (the thresholds' and features' integer or
        float width; what leaves hold)."""
        if self.rule is None:
            self.rule = self._rule()
        return self.rule

    def _rule(self) -> bytes:
        internal = self.table_feature >= 0
        h = hashlib.blake2b(repr((self.values.dtype.str, self.width, self.t.dtype.kind, self.strict,
                                  self.missing_code)).encode(), digest_size=20)
        t = np.where(internal, self.t, 0).astype(np.float64 if self.t.dtype.kind == "f" else np.int64)
        default = np.broadcast_to(np.asarray(self.default, dtype=bool), internal.shape) & internal
        for part in (t, np.where(internal, self.feature, 0).astype(np.int64), default):
            h.update(np.ascontiguousarray(part).tobytes())
        return h.digest()

    def row_keys(self) -> list[bytes]:
        """Each row's bytes (rows equal in every byte are decided alike)."""
        return self.X.reshape(self.rows, -1).view(np.dtype((np.void, self.width * self.X.itemsize))).reshape(
            -1).tolist() if self.width else [b""] * self.rows


def leaf_sums(attrs, leaves: np.ndarray, values: np.ndarray, dtype=None, initial: np.ndarray | None = None
              ) -> np.ndarray:
    """Sum over trees of the leaves' values into the outputs: (rows, n_outputs), trees in order, after ``initial``
    (n_outputs,) where given (default 0). ``values``: attrs["value"] or a row-by-row function of it (leaf_ints, a
    cast), in ``dtype`` (default: its own). Vector leaves that repeat (a forest's pure leaves) are read from the
    table of their distinct rows (leaf_groups): the same values in the same order, so the same sums. Where few
    distinct rows hold values whose every partial sum is exact (``exact_in_any_order``: integers, or a forest's
    one-hot leaves), the sums are each row's counts of the distinct rows times that table: exact, so equal to the
    sums in tree order."""
    dtype = values.dtype if dtype is None else np.dtype(dtype)
    k = int(attrs["n_outputs"])
    tree_output = attrs["tree_output"]
    groups = leaf_groups(attrs) if leaves.size and np.all(tree_output < 0) else None
    if groups is not None:
        row_of, firsts = groups
        values, leaves = values[firsts].astype(dtype), row_of[leaves]
        if len(firsts) <= COUNTED_GROUPS_PER_TREE * leaves.shape[1] and exact_in_any_order(
                values, leaves.shape[1], initial):
            return _counted_sums(leaves, values, dtype, initial)
    elif values.dtype != dtype:
        values = values.astype(dtype)
    out = np.zeros((leaves.shape[0], k), dtype=dtype)
    if initial is not None:
        out += np.asarray(initial, dtype=dtype)
    rows = np.empty((leaves.shape[0],) + values.shape[1:], dtype=values.dtype)
    for t in range(leaves.shape[1]):
        if tree_output[t] < 0:
            out += np.take(values, leaves[:, t], axis=0, out=rows)
        else:
            out[:, tree_output[t]] += values[leaves[:, t], 0]
    return out


COUNTED_GROUPS_PER_TREE = 4  # distinct leaf rows per tree at most for the counted sums (their matrix product)
COUNTED_ELEMENTS = 1 << 22  # rows x distinct leaf rows counted at once


def exact_in_any_order(table: np.ndarray, n_trees: int, initial: np.ndarray | None = None) -> bool:
    """Whether every sum of ``initial`` and ``n_trees`` rows of ``table`` (int64 or float64), and every partial sum
    on the way, is exact in float64 (and in the table's dtype): the values are multiples of one power of two 2^g
    and n_trees times the largest |value| (plus |initial|) stays below 2^(53 + g). Then the order of the terms
    changes no sum, and a float64 matrix product of counts and the table gives the sums exactly."""
    if table.dtype not in (np.dtype(np.int64), np.dtype(np.float64)) or not table.size:
        return False
    parts = table.reshape(-1) if initial is None else np.concatenate([table.reshape(-1),
                                                                       np.asarray(initial, dtype=np.float64)])
    if not np.all(np.isfinite(parts)):
        return False
    peak = float(np.max(np.abs(table))) * n_trees + (0.0 if initial is None else float(np.max(np.abs(initial))))
    if table.dtype.kind == "i":
        return peak < 2.0**53
    nonzero = parts[parts != 0]
    if not nonzero.size:
        return True
    _, exponent = np.frexp(nonzero)  # |v| = m 2^e, m in [0.5, 1): v 2^(53 - e) is an integer below 2^53
    ints = np.abs(np.ldexp(nonzero, 53 - exponent)).astype(np.int64)
    low = exponent - 53 + _trailing_zeros(ints)  # each value's lowest set bit
    return peak < 2.0 ** (53 + int(np.min(low)))


def _trailing_zeros(ints: np.ndarray) -> np.ndarray:
    lowest = ints & -ints  # the lowest set bit (ints > 0)
    return np.frexp(lowest.astype(np.float64))[1] - 1


def _counted_sums(groups: np.ndarray, table: np.ndarray, dtype, initial) -> np.ndarray:
    """Each row's counts of the distinct leaf rows ``groups`` (rows, T) reached, times ``table``: the exact sums
    (exact_in_any_order holds)."""
    n, n_groups = groups.shape[0], len(table)
    out = np.empty((n, table.shape[1]), dtype=dtype)
    as_float = table.astype(np.float64)
    step = max(1, COUNTED_ELEMENTS // n_groups)
    for first in range(0, n, step):
        part = groups[first:first + step]
        m = len(part)
        counts = np.bincount((part + (np.arange(m, dtype=np.int64) * n_groups)[:, None]).reshape(-1),
                             minlength=m * n_groups).reshape(m, n_groups)
        sums = counts.astype(np.float64) @ as_float
        if initial is not None:
            sums += np.asarray(initial, dtype=np.float64)
        out[first:first + step] = sums + 0.0 if dtype.kind == "f" else sums  # -0.0 as the ordered sums give it
    return out


def leaf_groups(attrs) -> tuple[np.ndarray, np.ndarray] | None:
    """(each node's row in the table of distinct leaf rows (0 at decision nodes), the first leaf of each row), or
    None where the leaves' rows are mostly distinct. Kept for the tables."""
    def group() -> tuple[np.ndarray, np.ndarray] | None:
        leaves = np.flatnonzero(np.asarray(attrs["feature"]) < 0)
        _, first, inverse = distinct_rows(np.asarray(attrs["value"])[leaves])
        if 4 * len(first) > len(leaves):
            return None
        row_of = np.zeros(len(attrs["feature"]), dtype=np.int64)
        row_of[leaves] = inverse
        return row_of, leaves[first]

    return once_per_tables(attrs, ("feature", "value"), "leaf_groups", group)


def _evaluate_rows(ins, batched, attrs, n, rank):
    X = np.asarray(ins[0], dtype=np.float64)
    if not batched[0]:
        X = np.broadcast_to(X, (n,) + X.shape)
    return leaf_sums(attrs, walk(attrs, float_decisions(attrs, X)), attrs["value"], np.float64)


def float_decisions(attrs, X) -> NodeDecisions:
    """The float semantics' decisions on rows X (rounded to float32 first, as the trees' own input)."""
    X = np.asarray(X, dtype=np.float64).astype(np.float32).astype(np.float64)
    width, strict = X.shape[1], attrs["compare"] == "lt"
    names = ("feature", "threshold") + (("default_left",) if attrs.get("default_left") is not None else ())
    # the canonical thresholds and the rule's fingerprint, kept for the tables (a build decides on them often)
    units = once_per_tables(attrs, names, ("units", width), lambda: threshold_units(
        attrs["threshold"].astype(np.float64), np.asarray(attrs["feature"]), width))
    thresholds = attrs["threshold"].astype(np.float64) if units is None else units[0]
    decide = NodeDecisions(X, thresholds, attrs["feature"], strict, default_left(attrs), units=units)
    if units is not None:  # the rule of the thresholds' form these rows took (scaled, or plain where not exact)
        form = "scaled" if decide.t is units[0] else "plain"
        decide.rule = once_per_tables(attrs, names, ("rule", width, strict, form), decide.rule_fingerprint)
    return decide


def _evaluate(xs, attrs):
    return _evaluate_rows([np.asarray(xs[0])[None, :]], [True], attrs, 1, 1)[0]


def threshold_ints(attrs, in_scale: int, in_bits: int) -> np.ndarray:
    """The integer thresholds T of the module doc (0 at leaves), int64, in [M, 2^(b-1) - 1]."""
    t = attrs["threshold"].astype(np.float64) * 2.0**in_scale
    q = np.ceil(t) - 1 if attrs["compare"] == "lt" else np.floor(t)
    top = 2 ** (in_bits - 1)
    q = np.clip(q, -top, top - 1).astype(np.int64)
    return np.where(attrs["feature"] >= 0, q, 0)


def missing_code(bits: int) -> int:
    """The integer a NaN input is quantised to (no real value is): -2^(bits-1)."""
    return -(2 ** (bits - 1))


def leaf_scale(attrs, out_scale: int) -> int:
    """The scale L the leaves are stored at (see the module doc)."""
    peak = once_per_tables(attrs, ("value",), "peak", lambda: float(np.max(np.abs(attrs["value"])))
                           if attrs["value"].size else 0.0)
    if peak == 0:
        return out_scale
    bits = int(attrs.get("leaf_bits", LEAF_BITS))
    fits = math.floor(math.log2((2 ** (bits - 1) - 1) / peak))
    while peak * 2.0**fits > 2 ** (bits - 1) - 1:
        fits -= 1
    return min(fits, out_scale + LEAF_GUARD_BITS)


def leaf_ints(attrs, out_scale: int) -> np.ndarray:
    """Leaf values at the leaf scale, rounded to nearest (halves up). Read-only: the array is kept for the
    tables (a build asks for it several times)."""
    lq = leaf_scale(attrs, out_scale)

    def ints() -> np.ndarray:
        q = np.multiply(attrs["value"], 2.0**lq, dtype=np.float64)  # v 2^L in float64, in one array
        np.add(q, 0.5, out=q)
        q = np.floor(q, out=q).astype(np.int64)
        q.flags.writeable = False
        return q

    return once_per_tables(attrs, ("value",), ("ints", lq), ints)


def _fixed(call: FixedCall):
    (x,) = call.ins
    at = call.attrs
    bits = call.in_types[0].dtype.bits
    # the integer decisions x_q <= T reach the leaf the float decisions reach on x_q's real value x_q 2^-S (the
    # module doc; the missing code stands for a NaN, real values lie in [M + 1, 2^(b-1) - 1], so T's clipping
    # changes nothing): the walk is taken in that form, which the build's float runs over the same (grid) rows
    # have walked already. x_q 2^-S is exact in float32 for b <= 24 (|S| is far from float32's exponent
    # range).
    code = missing_code(bits)
    if bits <= 24:
        leaves = walk(at, float_decisions(at, np.where(x == code, np.nan, x * 2.0**-call.in_scale(0))))
    else:
        leaves = walk(at, NodeDecisions(x, threshold_ints(at, call.in_scale(0), bits), at["feature"], False,
                                        default_left(at), code))
    acc = check32(leaf_sums(at, leaves, leaf_ints(at, call.scale)), call.where)
    return saturate(rshift(acc, leaf_scale(at, call.scale) - call.scale), call.bits)


def leaf_argmax(attrs, out_scale: int | None = None, out_bits: int = 16) -> np.ndarray:
    """Per node of a single-tree ensemble, the argmax (first maximum) of the op's result for a row
    reaching that node when it is a leaf, -1 at decision nodes: float (``out_scale`` None) the float32
    leaf values, integer the leaf ints shifted to the result's scale and saturated to ``out_bits``, exactly
    as ``_fixed`` computes them (a single tree's result is its leaf's contribution alone)."""
    need(len(attrs["roots"]) == 1, "leaf_argmax is for a single tree")
    leaves = np.flatnonzero(attrs["feature"] < 0)
    if out_scale is None:
        out = leaf_sums(attrs, leaves[:, None], attrs["value"], np.float32)
    else:
        acc = leaf_sums(attrs, leaves[:, None], leaf_ints(attrs, out_scale))
        out = saturate(rshift(acc, leaf_scale(attrs, out_scale) - out_scale), out_bits)
    classes = np.full(len(attrs["feature"]), -1, dtype=np.int64)
    classes[leaves] = np.argmax(out, axis=1)
    return classes


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique`` of the rows compared by their bytes, with return_index and return_inverse: (the distinct
    rows in the order of their bytes, each one's first row, each row's distinct one). The rows are grouped by a
    64-bit hash of their words first (a forest's 10^5 leaf rows mostly repeat a few), only the groups' first
    rows sorted by their bytes; the grouping is checked (every row equals its group's first), with the full sort
    of every row's bytes where a hash was shared."""
    rows = np.ascontiguousarray(rows)
    n = len(rows)
    width = rows.dtype.itemsize * int(np.prod(rows.shape[1:], dtype=np.int64))
    as_bytes = rows.reshape(n, -1).view(np.uint8).reshape(n, width) if n else np.zeros((0, width), np.uint8)
    if width % 8:
        words = np.zeros((n, -(-width // 8) * 8), dtype=np.uint8)
        words[:, :width] = as_bytes
        words = words.view(np.uint64)
    else:
        words = as_bytes.view(np.uint64)
    multipliers = np.random.default_rng(width).integers(1, 2**63, words.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        # each word's high half folded into its low one first: a float64's sign, exponent and leading mantissa
        # bits (a one-hot leaf's 1.0 and 0.0) would otherwise reach only the product's top bits
        hashed = (words ^ (words >> np.uint64(32))) @ multipliers if n else np.zeros(0, np.uint64)
    _, group_first, group = np.unique(hashed, return_index=True, return_inverse=True)
    group = np.asarray(group).reshape(-1)
    void = np.dtype((np.void, width))
    if not np.array_equal(words, words[group_first][group]):  # two different rows share a hash
        _, first, inverse = np.unique(as_bytes.view(void).reshape(-1), return_index=True, return_inverse=True)
        first, inverse = np.asarray(first), np.asarray(inverse).reshape(-1)
        return rows[first], first, inverse
    # the groups' first rows in the order of their bytes (np.unique's order), each the first of its rows
    _, order, rank = np.unique(as_bytes[group_first].view(void).reshape(-1), return_index=True,
                               return_inverse=True)
    first = group_first[np.asarray(order)]
    return rows[first], first, np.asarray(rank).reshape(-1)[group]


def leaves_by_tree(attrs) -> tuple[np.ndarray, np.ndarray] | None:
    """(every tree's leaves, tree after tree; where each tree's leaves start), or None for a table that is not a
    forest (shared subtrees). Kept for the last tables asked (a build asks for the same ones many times)."""
    def group() -> tuple[np.ndarray, np.ndarray] | None:
        feature = np.asarray(attrs["feature"])
        levels = forest_levels(feature, attrs["left"], attrs["right"], attrs["roots"], limit=len(feature),
                               max_nodes=len(feature))
        if levels is None:
            return None
        nodes = np.concatenate([n for n, _ in levels])
        owner = np.concatenate([o for _, o in levels])
        leaf = feature[nodes] < 0
        order = np.argsort(owner[leaf], kind="stable")
        leaves, owners = nodes[leaf][order], owner[leaf][order]
        return leaves, np.searchsorted(owners, np.arange(len(attrs["roots"])))

    return kept(RECENT_LEAVES, tables_fingerprint(attrs), RECENT_WALKS_KEPT, group)


RECENT_LEAVES: OrderedDict[bytes, tuple[np.ndarray, np.ndarray] | None] = OrderedDict()


def tree_leaf_ranges(attrs) -> tuple[np.ndarray, np.ndarray]:
    """Per tree, the smallest and largest leaf value of each of its value columns: (T, W) each. Kept for the
    tables' very arrays (a build asks for the same ones several times); the caller must not change them."""
    return once_per_tables(attrs, ("feature", "left", "right", "roots", "value"), "leaf_ranges",
                           lambda: _tree_leaf_ranges(attrs))


def leaf_int_ranges(attrs, out_scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Per tree, the smallest and largest leaf int (``leaf_ints``) of each value column: (T, W) each. The
    rounding is monotone, so they are the roundings of the smallest and largest leaf values."""
    lq = leaf_scale(attrs, out_scale)
    return tuple(np.floor(v * 2.0**lq + 0.5).astype(np.int64) for v in tree_leaf_ranges(attrs))


def leaf_int_peaks(attrs, out_scale: int) -> np.ndarray:
    """Per tree, the largest |leaf int| of each value column: (T, W)."""
    lo, hi = leaf_int_ranges(attrs, out_scale)
    return np.maximum(np.abs(lo), np.abs(hi))


def _tree_leaf_ranges(attrs) -> tuple[np.ndarray, np.ndarray]:
    feature, left, right = attrs["feature"], attrs["left"], attrs["right"]
    grouped = leaves_by_tree(attrs)
    if grouped is not None:  # the extremes of the rows (the distinct ones where leaves repeat) each tree reaches
        leaves, starts = grouped
        rows, table = leaves, np.asarray(attrs["value"])
        groups = leaf_groups(attrs) if leaves.size else None
        if groups is not None:
            row_of, firsts = groups
            owner = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, len(leaves))))
            pairs = np.unique(owner * len(firsts) + row_of[leaves])  # (tree, distinct row), trees ascending
            rows, table, starts = pairs % len(firsts), table[firsts], np.searchsorted(pairs // len(firsts),
                                                                                          np.arange(len(starts)))
        picked = table[rows]  # min and max are exact: taken in the table's dtype, then float64
        return (np.minimum.reduceat(picked, starts).astype(np.float64),
                np.maximum.reduceat(picked, starts).astype(np.float64))
    value = attrs["value"].astype(np.float64)
    lo, hi = [], []
    for root in attrs["roots"]:  # shared subtrees: each tree's leaves by a walk of its own
        stack, found = [int(root)], []
        while stack:
            i = stack.pop()
            if feature[i] < 0:
                found.append(i)
            else:
                stack += [int(left[i]), int(right[i])]
        lo.append(value[found].min(axis=0))
        hi.append(value[found].max(axis=0))
    return np.array(lo), np.array(hi)


def _interval(attrs, ivs, shape):
    lo_t, hi_t = tree_leaf_ranges(attrs)
    k = int(attrs["n_outputs"])
    lo, hi = np.zeros(k), np.zeros(k)
    for t, out in enumerate(attrs["tree_output"]):
        if out < 0:
            lo, hi = lo + lo_t[t], hi + hi_t[t]
        else:
            lo[out] += lo_t[t, 0]
            hi[out] += hi_t[t, 0]
    return lo, hi


def _acc_bound(call):
    """The int32 sum: each tree adds at most its largest |leaf int| to an output."""
    at = call.attrs
    lq = leaf_scale(at, call.out_scale)

    return int(np.sum(np.max(leaf_int_peaks(at, call.out_scale), axis=1))), lq


register_op(OpDef(
    "tree_ensemble", 1, _infer, _evaluate,
    {"feature": "array", "threshold": "array", "left": "array", "right": "array", "value": "array",
     "roots": "array", "tree_output": "array", "n_outputs": "int", "compare": "str", "default_left": "array?",
     "leaf_bits": "int?"},
    "sum of the leaves a float32-rounded input reaches in each tree (x[f] <= t, or < t, goes left; NaN to "
    "the default side); fixed point: exact integer decisions x_q <= floor(t * 2^S), NaN's code to the "
    "default side, leaves summed in int32",
    evaluate_rows=_evaluate_rows, fixed=_fixed, interval=_interval, acc_bound=_acc_bound))
