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

import math

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
    internal = feature >= 0
    need(np.all(feature[internal] < x.shape[0]), f"a feature index is beyond the operand's {x.shape[0]} elements")
    need(np.all(np.isfinite(threshold)) and np.all(np.isfinite(value)), "thresholds and leaf values must be finite")
    need(np.all((left[internal] >= 0) & (left[internal] < n) & (right[internal] >= 0) & (right[internal] < n)),
         "a child index is out of range")
    if np.all(tree_output < 0):
        need(value.shape[1] == k, f"vector leaves have {value.shape[1]} values for {k} outputs")
    else:
        need(value.shape[1] == 1 and np.all((tree_output >= 0) & (tree_output < k)),
             "scalar-leaf trees need value (n, 1) and tree_output in [0, n_outputs)")
    dl = attrs.get("default_left")
    need(dl is None or (dl.shape == (n,) and dl.dtype.kind in "iub" and np.all((dl == 0) | (dl == 1))),
         f"default_left must be ({n},) of 0/1")
    need(int(attrs.get("leaf_bits", LEAF_BITS)) in (8, 16), "leaf_bits must be 8 or 16")
    need(tree_depth(attrs) <= MAX_TREE_DEPTH, f"a tree is deeper than {MAX_TREE_DEPTH} levels")
    return TensorType((k,), result_dtype(ts, declared))


def tree_depths(feature, left, right, roots, limit: int = MAX_TREE_DEPTH) -> np.ndarray:
    """The depth of each tree (a single leaf: 0), level by level over all trees at once; a tree deeper than
    ``limit`` (a cycle included) gets limit + 1. Each level keeps a node once per tree, so the work is bounded
    by the nodes even in a hostile table."""
    feature, left, right = (np.asarray(a, dtype=np.int64) for a in (feature, left, right))
    nodes = np.asarray(roots, dtype=np.int64)
    owner = np.arange(len(nodes), dtype=np.int64)
    depths = np.zeros(len(nodes), dtype=np.int64)
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
    """The leaf each tree reaches for each row: (rows, T). ``goes_left(node_indices)`` gives, per row,
    whether the row goes left at the given node (one node per row)."""
    feature, left, right, roots = attrs["feature"], attrs["left"], attrs["right"], attrs["roots"]
    leaves = []
    for root in roots:
        node = np.full(goes_left.rows, int(root), dtype=np.int64)
        while True:
            active = feature[node] >= 0
            if not active.any():
                break
            go = goes_left(node)
            node = np.where(active, np.where(go, left[node], right[node]), node)
        leaves.append(node)
    return np.stack(leaves, axis=1)


def default_left(attrs) -> np.ndarray:
    """The side a missing input goes at each node (bool, (n,)): the attribute, or right everywhere."""
    dl = attrs.get("default_left")
    return np.zeros(len(attrs["feature"]), dtype=bool) if dl is None else np.asarray(dl) != 0


class _Decide:
    """Per-row decisions at one node per row, from comparisons ``x[f] <= t`` (or ``<``); a missing input
    (``missing(v)`` true) goes to the node's default side."""

    def __init__(self, X, thresholds, feature, strict: bool, default, missing):
        self.X, self.t, self.feature, self.strict, self.rows = X, thresholds, feature, strict, len(X)
        self.default, self.missing = default, missing

    def __call__(self, node):
        f = np.maximum(self.feature[node], 0)
        v = self.X[np.arange(self.rows), f]
        with np.errstate(invalid="ignore"):
            go = v < self.t[node] if self.strict else v <= self.t[node]
        return np.where(self.missing(v), self.default[node], go)


def leaf_sums(attrs, leaves: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sum over trees of the leaves' values into the outputs: (rows, n_outputs)."""
    k = int(attrs["n_outputs"])
    out = np.zeros((leaves.shape[0], k), dtype=values.dtype)
    tree_output = attrs["tree_output"]
    for t in range(leaves.shape[1]):
        if tree_output[t] < 0:
            out += values[leaves[:, t]]
        else:
            out[:, tree_output[t]] += values[leaves[:, t], 0]
    return out


def _evaluate_rows(ins, batched, attrs, n, rank):
    X = np.asarray(ins[0], dtype=np.float64)
    if not batched[0]:
        X = np.broadcast_to(X, (n,) + X.shape)
    X = X.astype(np.float32).astype(np.float64)  # the trees' own input rounding
    decide = _Decide(X, attrs["threshold"].astype(np.float64), attrs["feature"], attrs["compare"] == "lt",
                     default_left(attrs), np.isnan)
    return leaf_sums(attrs, walk(attrs, decide), attrs["value"].astype(np.float64))


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
    peak = float(np.max(np.abs(attrs["value"]))) if attrs["value"].size else 0.0
    if peak == 0:
        return out_scale
    bits = int(attrs.get("leaf_bits", LEAF_BITS))
    fits = math.floor(math.log2((2 ** (bits - 1) - 1) / peak))
    while peak * 2.0**fits > 2 ** (bits - 1) - 1:
        fits -= 1
    return min(fits, out_scale + LEAF_GUARD_BITS)


def leaf_ints(attrs, out_scale: int) -> np.ndarray:
    """Leaf values at the leaf scale, rounded to nearest (halves up)."""
    lq = leaf_scale(attrs, out_scale)
    return np.floor(attrs["value"].astype(np.float64) * 2.0**lq + 0.5).astype(np.int64)


def _fixed(call: FixedCall):
    (x,) = call.ins
    at = call.attrs
    bits = call.in_types[0].dtype.bits
    T = threshold_ints(at, call.in_scale(0), bits)
    code = missing_code(bits)
    leaves = walk(at, _Decide(x, T, at["feature"], False, default_left(at), lambda v: v == code))
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
        out = leaf_sums(attrs, leaves[:, None], attrs["value"].astype(np.float32))
    else:
        acc = leaf_sums(attrs, leaves[:, None], leaf_ints(attrs, out_scale))
        out = saturate(rshift(acc, leaf_scale(attrs, out_scale) - out_scale), out_bits)
    classes = np.full(len(attrs["feature"]), -1, dtype=np.int64)
    classes[leaves] = np.argmax(out, axis=1)
    return classes


def tree_leaf_ranges(attrs) -> tuple[np.ndarray, np.ndarray]:
    """Per tree, the smallest and largest leaf value of each of its value columns: (T, W) each."""
    feature, left, right = attrs["feature"], attrs["left"], attrs["right"]
    value = attrs["value"].astype(np.float64)
    lo, hi = [], []
    for root in attrs["roots"]:
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
    q = np.abs(leaf_ints(at, call.out_scale))
    lo_t, hi_t = tree_leaf_ranges({**at, "value": q.astype(np.float64)})
    return int(np.sum(np.max(hi_t, axis=1))), lq


register_op(OpDef(
    "tree_ensemble", 1, _infer, _evaluate,
    {"feature": "array", "threshold": "array", "left": "array", "right": "array", "value": "array",
     "roots": "array", "tree_output": "array", "n_outputs": "int", "compare": "str", "default_left": "array?",
     "leaf_bits": "int?"},
    "sum of the leaves a float32-rounded input reaches in each tree (x[f] <= t, or < t, goes left; NaN to "
    "the default side); fixed point: exact integer decisions x_q <= floor(t * 2^S), NaN's code to the "
    "default side, leaves summed in int32",
    evaluate_rows=_evaluate_rows, fixed=_fixed, interval=_interval, acc_bound=_acc_bound))
