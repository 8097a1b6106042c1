"""C for the ``tree_ensemble`` op (float and fixed point), two kernels chosen by a cost model:

- **table**: the decision nodes of all trees in flash, in depth-first preorder, as four arrays in the
  narrowest types that hold them: the feature tested (uint8, uint16 or uint32, with a bit to spare
  when it flags default-left nodes), the threshold
  (fixed point: int8, int16 or int32 integer thresholds, see the op's integer semantics; float:
  float32), the left and the right child as a signed reference (>= 0: a decision node, < 0: leaf
  ~ref). Leaves are deduplicated into one table of their values (the rows of equal leaves are stored
  once). A tight loop walks each tree: ``while (i >= 0) i = x[f[i]] <= t[i] ? l[i] : r[i];``.
- **straight**: each tree as nested ``if (x[f] <= T) ... else ...`` with the thresholds as literals,
  ending in the leaf's number; the leaves' values are added from the same leaf table.

Missing values (NaN; the integer code M = the input type's lowest value): a node goes to its default
side. Integer code: x <= T already sends M left (T >= M), so only default-right nodes also test x != M
(on the left-going path); float code: a default-left node tests !(x > t), true for NaN. When an
ensemble mixes both sides, the table marks default-left nodes by the top bit of their feature entry.

Both compute exactly the op's semantics (the same integer thresholds and leaf ints; float builds add
the leaves in tree order in float32). Every input feature is read only where a node tests it.
The choice: straight-line code where its predicted flash is at most STRAIGHT_FLASH_FACTOR times the
table's (it is always faster); microcontroller builds report it in ``result.report["kernels"]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.codegen.emitter import CEmitter, c_float, ctype_of
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.arith import rshift_bound
from tinycc_ml.ir.ops.ensembles import (
    default_left,
    distinct_rows,
    forest_levels,
    leaf_argmax,
    leaf_int_peaks,
    leaf_int_ranges,
    leaf_ints,
    leaf_scale,
    missing_code,
    threshold_ints,
)

STRAIGHT_FLASH_FACTOR = 1.25
# predicted cost per decision node: (AVR cycles, AVR flash bytes) of each kernel, and per leaf
# ATmega328P, int16: the table walk fitted on simavr runs of the digits forest of benchmarks/trees.py
# (per row: 1,245 + 44.7 per level walked + 60.3 per leaf value added; within 15 cycles on 150 rows);
# straight-line code's per-level cost and both kernels' flash are estimates
COST = {"table": {"level": 45.0, "loop_flash": 120},
        "straight": {"level": 12.0, "flash_per_node": 14.0, "flash_per_leaf": 6.0, "tree_flash": 8.0,
                     "flash_per_value": 10.0},
        "leaf_value": 60.0, "tree": 60.0, "output": 60.0}


def feature_type(top: int, marked: bool) -> str:
    """The narrowest unsigned type holding feature indices up to ``top``, with its top bit free when
    ``marked`` (it then flags default-left nodes)."""
    for bits in (8, 16, 32):
        if top < 2 ** (bits - 1 if marked else bits):
            return f"uint{bits}_t"
    raise ValueError("a feature index beyond 2^31")


def int_type(lo: int, hi: int) -> str:
    for bits in (8, 16, 32):
        if -(2 ** (bits - 1)) <= lo and hi <= 2 ** (bits - 1) - 1:
            return f"int{bits}_t"
    raise ValueError("beyond int32")


@dataclass
class Layout:
    feature: np.ndarray  # per decision node (preorder)
    threshold: np.ndarray  # ints (fixed) or float32
    left: np.ndarray  # references: >= 0 decision node, < 0 leaf ~ref
    right: np.ndarray
    roots: np.ndarray  # reference of each tree's root
    leaves: np.ndarray  # (n_unique, W) leaf values (ints or float32)
    depth: int
    default_left: np.ndarray  # per decision node: a missing value goes left

    @property
    def ref_type(self) -> str:
        refs = np.concatenate([self.left, self.right, self.roots])
        return int_type(int(refs.min()), int(refs.max()))


def tree_layout(attrs, thresholds: np.ndarray, values: np.ndarray) -> Layout:
    """Preorder decision nodes and deduplicated leaves (numbered in the order the decision nodes' left, then right
    children, then the roots first reach them) of the op's node table."""
    feature = np.asarray(attrs["feature"])
    levels = forest_levels(feature, attrs["left"], attrs["right"], attrs["roots"], limit=len(feature),
                           max_nodes=len(feature))
    if levels is None:  # shared subtrees: each tree walked on its own
        return _shared_tree_layout(attrs, thresholds, values)
    left, right = np.asarray(attrs["left"], np.int64), np.asarray(attrs["right"], np.int64)
    roots = np.asarray(attrs["roots"], np.int64)
    inner = feature >= 0
    below = np.zeros(len(feature), dtype=np.int64)  # the decision nodes of each node's subtree
    for nodes, _ in reversed(levels):
        parents = nodes[inner[nodes]]
        below[parents] = 1 + below[left[parents]] + below[right[parents]]
    index = np.zeros(len(feature), dtype=np.int64)  # preorder: a node, its left subtree, its right subtree
    index[roots] = np.concatenate([[0], np.cumsum(below[roots])[:-1]])
    for nodes, _ in levels:
        parents = nodes[inner[nodes]]
        index[left[parents]] = index[parents] + 1
        index[right[parents]] = index[parents] + 1 + below[left[parents]]
    decision = np.concatenate([nodes[inner[nodes]] for nodes, _ in levels])
    idx = np.empty(len(decision), dtype=np.int64)
    idx[index[decision]] = decision
    children = [left[idx], right[idx], roots]
    reached = np.concatenate(children)
    at_leaf = reached[~inner[reached]]  # in the order the leaves are first reached
    rows = np.ascontiguousarray(values[at_leaf])
    _, first, which = distinct_rows(rows)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    refs = np.where(inner[reached], index[reached], 0)
    refs[~inner[reached]] = -1 - rank[np.asarray(which).reshape(-1)]
    lefts, rights, root_refs = np.split(refs, [len(idx), 2 * len(idx)])
    leaf_rows = rows[np.sort(first)] if len(first) else np.zeros((0,) + values.shape[1:], dtype=values.dtype)
    return Layout(feature[idx].astype(np.int64), thresholds[idx], lefts, rights, root_refs, leaf_rows,
                  len(levels) - 1, default_left(attrs)[idx])


def _shared_tree_layout(attrs, thresholds: np.ndarray, values: np.ndarray) -> Layout:
    """tree_layout of a table whose trees share subtrees: a node reached twice is listed twice."""
    feature, left, right = attrs["feature"], attrs["left"], attrs["right"]
    order: list[int] = []
    new_index: dict[int, int] = {}
    leaf_key: dict[bytes, int] = {}
    leaf_rows: list[np.ndarray] = []
    depth = 0

    def ref(i: int) -> int:
        if feature[i] >= 0:
            return new_index[i]
        key = values[i].tobytes()
        if key not in leaf_key:
            leaf_key[key] = len(leaf_rows)
            leaf_rows.append(values[i])
        return -1 - leaf_key[key]

    for root in attrs["roots"]:
        stack = [(int(root), 0)]
        while stack:  # preorder: a node, then its left subtree, then its right
            i, d = stack.pop()
            depth = max(depth, d)
            if feature[i] >= 0:
                new_index[i] = len(order)
                order.append(i)
                stack += [(int(right[i]), d + 1), (int(left[i]), d + 1)]
    idx = np.array(order, dtype=np.int64)
    lefts = np.array([ref(int(left[i])) for i in idx], dtype=np.int64)
    rights = np.array([ref(int(right[i])) for i in idx], dtype=np.int64)
    roots = np.array([ref(int(r)) for r in attrs["roots"]], dtype=np.int64)
    return Layout(feature[idx].astype(np.int64), thresholds[idx], lefts, rights, roots,
                  np.array(leaf_rows), depth, default_left(attrs)[idx])


def sparse_leaves(layout: Layout) -> tuple[np.ndarray, np.ndarray, Layout]:
    """Vector leaves as runs of (output, value) entries for their non-zero values (at least one per
    leaf), the last entry of a run flagged by bit 7 of its output byte; references to leaves become
    ~(first entry). Returns (output bytes, values, the re-referenced layout)."""
    outs, vals, starts = [], [], []
    for row in layout.leaves:
        starts.append(len(outs))
        nz = np.flatnonzero(row) if np.any(row) else np.array([0])
        outs += [int(c) for c in nz]
        vals += [row[c] for c in nz]
        outs[-1] |= 0x80
    starts = np.array(starts, dtype=np.int64)

    def remap(refs):
        return np.where(refs < 0, -1 - starts[np.maximum(-1 - refs, 0)], refs)

    relaid = Layout(layout.feature, layout.threshold, remap(layout.left), remap(layout.right), remap(layout.roots),
                    layout.leaves, layout.depth, layout.default_left)
    return np.array(outs, dtype=np.int64), np.array(vals, dtype=layout.leaves.dtype), relaid


def predicted(layout: Layout, threshold_bytes: int, n_trees: int, n_outputs: int, values_per_leaf: float) -> dict:
    """Predicted AVR cycles (one prediction, every tree walked to its deepest leaf) and flash bytes of the
    decision nodes (the leaves cost the same in both)."""
    n = len(layout.feature)
    ref_bytes = int(layout.ref_type[3:-2]) // 8
    feat_bytes = int(feature_type(int(layout.feature.max()) if layout.feature.size else 0, False)[4:-2]) // 8
    table_flash = n * (feat_bytes + threshold_bytes + 2 * ref_bytes) + n_trees * ref_bytes + COST["table"]["loop_flash"]
    n_leaves = n + n_trees
    straight_flash = (n * COST["straight"]["flash_per_node"] + n_leaves * COST["straight"]["flash_per_leaf"]
                      + n_trees * COST["straight"]["tree_flash"])
    rest = n_trees * (COST["tree"] + values_per_leaf * COST["leaf_value"]) + n_outputs * COST["output"]
    return {"table": {"cycles": round(COST["table"]["level"] * layout.depth * n_trees + rest),
                      "flash": int(table_flash)},
            "straight": {"cycles": round(COST["straight"]["level"] * layout.depth * n_trees + rest),
                         "flash": int(straight_flash)}}


def choose(cands: dict, budget: int = 0, compact: bool = False) -> str:
    """Straight-line code where its flash is within STRAIGHT_FLASH_FACTOR of the table's, or within the
    target's ``budget`` (CTarget.tree_code_budget: bytes a chip with flash to spare lets it take); the
    table when ``compact`` (a build that does not fit otherwise)."""
    if compact:
        return "table"
    flash = cands["straight"]["flash"]
    return "straight" if flash <= STRAIGHT_FLASH_FACTOR * cands["table"]["flash"] or flash <= budget else "table"


def _report(em: CEmitter, node: Node, layout: Layout, chosen: str, cands: dict, leaf_form: str) -> None:
    if hasattr(em, "kernel_report"):
        em.kernel_report.append({
            # "matrix": what the report's kernel rows name (the constant the kernel reads)
            "node": node.name, "op": "tree_ensemble", "matrix": f"{node.name} node table",
            "trees": int(len(node.attrs["roots"])),
            "decision_nodes": int(len(layout.feature)), "unique_leaves": int(len(layout.leaves)),
            "depth": layout.depth, "kernel": f"trees-{chosen}",
            "leaves": leaf_form, "predicted_cycles": cands[chosen]["cycles"],
            "flash_bytes": cands[chosen]["flash"],
            "candidates": {f"trees-{k}": v for k, v in cands.items()},
            "note": "predicted: ATmega328P cycles of integer code along the deepest path of every tree; "
                    "flash of the decision nodes"})


def input_range(em: CEmitter, bits: int) -> tuple[int, int, bool]:
    """(the missing code M, the largest value, whether int has 32 bits) of an integer build's ``bits``-bit input."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, not getattr(em.target, "int16_arith", False)


def _test(layout: Layout, ref: int, x: str, literal, x_range, cmp: str) -> str | bool:
    """The C condition for going left at decision node ``ref``, or True / False where every input
    (missing included) goes one way. ``x_range`` (integer builds): input_range's (M, top, wide): the input
    type's lowest value is the missing code M (integer thresholds lie in [M, top]); wide: int is 32 bits."""
    t, dl = layout.threshold[ref], bool(layout.default_left[ref])
    if x_range is None:  # float: NaN fails every comparison, so !(x > t) sends it left
        flip = {"<=": ">", "<": ">="}[cmp]
        return f"!({x} {flip} {literal(t)})" if dl else f"{x} {cmp} {literal(t)}"
    m, top, wide = x_range
    if dl:  # M <= T: x <= T sends M left already
        return True if t >= top else f"{x} <= {literal(t)}"
    if t <= m:  # no real value is <= M, and M goes right
        return False
    if t >= top:
        return f"{x} != {m}"
    if wide:  # one unsigned compare: x - M - 1 puts M last (an int of 32 bits: no overflow)
        return f"(uint32_t)({x} + {-m - 1}) <= {t - m - 1}u"
    return f"{x} <= {literal(t)} && {x} != {m}"


def _straight_tree(layout: Layout, x_at, literal, ref: int, indent: str, x_range=None, cmp: str = "<=",
                   at_leaf="leaf = {};", levels: int | None = None, enter=None, test=None) -> list[str]:
    """Nested ifs; ``x_range`` (integer builds): the input type's range, where a threshold at an end
    decides every input alike (no compare is written: C would warn it is always true/false); ``at_leaf``:
    the statement at a leaf, formatted with the leaf's number, or a function of the leaf's number giving its
    statements; ``levels``: decision nodes this many levels down are not written but handed on, the
    statement ``enter(node)``; ``test(node)``: the condition of going left (or True / False) in place of
    _test's."""
    if ref < 0:
        if callable(at_leaf):  # the leaf's statements
            return [indent + line for line in at_leaf(-1 - ref)]
        return [indent + at_leaf.format(-1 - ref)]
    if levels == 0:
        return [indent + enter(ref)]
    f = int(layout.feature[ref])
    left, right = int(layout.left[ref]), int(layout.right[ref])
    goes_left = _test(layout, ref, x_at(str(f)), literal, x_range, cmp) if test is None else test(ref)
    below = None if levels is None else levels - 1

    def sub(child: int, at: str) -> list[str]:
        return _straight_tree(layout, x_at, literal, child, at, x_range, cmp, at_leaf, below, enter, test)

    if goes_left is True:
        return sub(left, indent)
    if goes_left is False:
        return sub(right, indent)
    return [f"{indent}if ({goes_left}) {{", *sub(left, indent + "    "), f"{indent}}} else {{",
            *sub(right, indent + "    "), f"{indent}}}"]


@dataclass
class Walk:
    roots: str  # the roots array's symbol
    loop: list[str]  # ``while (i >= 0) {...}``: from i, a node reference, to the leaf's reference


def _table_walk(em: CEmitter, node: Node, layout: Layout, fixed: bool, thr_type: str, cmp_op: str,
                leaf_word: str, suffix: str, roots: bool = True) -> Walk:
    """The node table's arrays (symbols ``<node>{suffix}_feature`` ...) and the loop walking one tree."""
    sym, rd, ref_type = em.sym, em.target.read_const, layout.ref_type
    (x_name,) = node.inputs
    x_type = em.graph.type(x_name)
    x_at = lambda i: em.at(x_name, i)  # noqa: E731
    dl = layout.default_left
    # float: default-left nodes test !(x > t); integer: default-right nodes also test x != M
    marked = bool(dl.any() and not dl.all())
    feat_type = feature_type(int(layout.feature.max()), marked)
    flag = 1 << (int(feat_type[4:-2]) - 1) if marked else 0
    name = node.name + suffix
    feat = em.add_const_array(sym(f"{name}_feature"), layout.feature | np.where(dl, flag, 0), feat_type,
                              f"%{node.name}: feature tested by each decision node (preorder)"
                              + (f"; bit {flag.bit_length() - 1}: a missing value goes left" if flag else ""))
    thr = em.add_const_array(sym(f"{name}_threshold"), layout.threshold, thr_type,
                             f"%{node.name}: threshold of each decision node (go left when x {cmp_op} it)")
    lft = em.add_const_array(sym(f"{name}_left"), layout.left, ref_type,
                             f"%{node.name}: left child (>= 0: decision node, < 0: {leaf_word})")
    rgt = em.add_const_array(sym(f"{name}_right"), layout.right, ref_type,
                             f"%{node.name}: right child (>= 0: decision node, < 0: {leaf_word})")
    roots = em.add_const_array(sym(f"{name}_roots"), layout.roots, ref_type,
                               f"%{node.name}: root of each tree") if roots else ""
    x_type_c = ctype_of(x_type.dtype)
    f_read = rd(feat, "i", feat_type)
    cmp = x_at(f"(f & {flag - 1:#x})" if flag else "f")
    if thr_type == "int32_t":
        cmp = f"(int32_t){cmp}"
    t_read = rd(thr, "i", thr_type)
    if fixed:
        m = missing_code(x_type.dtype.bits)
        go = (f"v <= {t_read}" if dl.all() else f"v <= {t_read} && v != {m}" if not dl.any()
              else f"v <= {t_read} && (v != {m} || (f & {flag:#x}))")
    else:
        flip = {"<=": ">", "<": ">="}[cmp_op]
        go = (f"v {cmp_op} {t_read}" if not dl.any() else f"!(v {flip} {t_read})" if dl.all()
              else f"(f & {flag:#x}) ? !(v {flip} {t_read}) : v {cmp_op} {t_read}")
    return Walk(roots, ["        while (i >= 0) {",
                        f"            const {feat_type} f = {f_read};",
                        f"            const {'int32_t' if thr_type == 'int32_t' else x_type_c} v = {cmp};",
                        f"            i = ({go})",
                        f"                ? {rd(lft, 'i', ref_type)} : {rd(rgt, 'i', ref_type)};",
                        "        }"])


def _types(em: CEmitter, node: Node, fixed: bool):
    """(thresholds: integer or float32, literal, compare) of the node's decisions."""
    at = node.attrs
    x_type = em.graph.type(node.inputs[0])
    if fixed:
        return threshold_ints(at, x_type.dtype.scale, x_type.dtype.bits), lambda v: str(int(v)), "<="
    return at["threshold"].astype(np.float32), c_float, "<" if at["compare"] == "lt" else "<="


def class_tree(attrs, classes: np.ndarray) -> dict:
    """The op's attributes with every subtree whose leaves all have one class (``classes``: per node, -1 at
    decision nodes) made a leaf of it: a row reaches one of those leaves, so the class is the same."""
    feature = attrs["feature"].copy()
    classes = classes.copy()
    left, right = attrs["left"], attrs["right"]

    def settle(i: int) -> int:  # depth <= MAX_TREE_DEPTH
        if feature[i] < 0:
            return int(classes[i])
        a, b = settle(int(left[i])), settle(int(right[i]))
        if a == b >= 0:
            feature[i], classes[i] = -1, a
            return a
        return -1

    for root in attrs["roots"]:
        settle(int(root))
    return {**attrs, "feature": feature, "class": classes}


def _class_layout(ct: dict, thresholds: np.ndarray) -> Layout:
    """The layout of a class tree (``class_tree``) with each leaf reference -1 - its class."""
    layout = tree_layout(ct, thresholds, ct["class"][:, None])
    cls = layout.leaves[:, 0].astype(np.int64)

    def remap(refs):
        return np.where(refs < 0, -1 - cls[np.maximum(-1 - refs, 0)], refs)

    return Layout(layout.feature, layout.threshold, remap(layout.left), remap(layout.right), remap(layout.roots),
                  layout.leaves, layout.depth, layout.default_left)


def predict_code(em: CEmitter, node: Node, fixed: bool) -> list[str] | None:
    """The body of ``<prefix>_predict`` when the prediction is the argmax of this node's result and the
    node is a single tree reading the input: the class of each leaf (the op's argmax of its result at that
    leaf, ties as the op resolves them: ``leaf_argmax``) returned directly, no scores summed; the subtrees
    of one class made leaves (``class_tree``). The same kernel rule as the scores: straight-line ifs
    returning constants, or the table walk with leaves referencing their class (-1 - class)."""
    at = node.attrs
    if len(at["roots"]) > 1:
        forest = forest_sums(em, node, fixed)
        return None if forest is None else forest_predict(forest)
    if int(at["n_outputs"]) < 2:
        return None
    out_dtype = node.type.dtype
    classes = leaf_argmax(at, out_dtype.scale if fixed else None, out_dtype.bits if fixed else 16)
    thresholds, literal, cmp_op = _types(em, node, fixed)
    layout = _class_layout(class_tree(at, classes), thresholds)
    (x_name,) = node.inputs
    x_type = em.graph.type(x_name)

    def thr_ctype(lay: Layout) -> str:
        return int_type(int(lay.threshold.min()), int(lay.threshold.max())) if fixed and len(lay.feature) \
            else "float" if not fixed else "int8_t"

    thr_bytes = {"float": 4, "int8_t": 1, "int16_t": 2, "int32_t": 4}[thr_ctype(layout)]
    cands = predicted(layout, thr_bytes, 1, 0, 0)
    chosen = choose(cands, getattr(em.target, "tree_code_budget", 0), getattr(em, "compact_trees", False))
    if hasattr(em, "kernel_report"):
        em.kernel_report.append({
            "node": node.name, "op": "tree_ensemble", "matrix": f"{node.name} class tree",
            "entry": "predict", "decision_nodes": int(len(layout.feature)), "depth": layout.depth,
            "kernel": f"trees-{chosen}-class", "predicted_cycles": cands[chosen]["cycles"],
            "flash_bytes": cands[chosen]["flash"], "candidates": {f"trees-{k}-class": v for k, v in cands.items()},
            "note": "predict returns each leaf's class (the argmax of the scores there); scores() is unchanged"})
    if not len(layout.feature):
        return [f"    (void){em.var(x_name)};", f"    return {int(-1 - layout.roots[0])};"]
    x_t = ctype_of(x_type.dtype)
    # a stream of its own (the scores keep their tables): faster, about 4 bytes more a node, so not when compact
    compact = getattr(em, "compact_trees", False)
    stream = (node_stream(layout, x_type.dtype.bits, [int(layout.roots[0])])
              if fixed and chosen == "table" and not compact else None)
    # asked only with a stream to walk: the target's walk function is emitted when asked
    walk = em.target.stream_walk(em, x_t) if stream is not None else None
    if walk is not None:  # the target's own walk of a node stream whose leaves are the classes
        words = em.add_const_array(em.sym(f"{node.name}_class_nodes"), stream.words.view(np.int16), "int16_t",
                                   f"%{node.name}: the class tree's nodes (trees.NodeStream; leaf: 0x8000 | class)")
        return [f"    return (int)({walk}({words}, {em.var(x_name)}, {words}) & 0x7fffu);"]
    if chosen == "table":
        # every decision node kept: the feature and threshold arrays are the scores' own (stored once)
        layout = _class_layout({**at, "class": classes}, thresholds)
        walk = _table_walk(em, node, layout, fixed, thr_ctype(layout), cmp_op, "class -1-ref", "_class", roots=False)
        return [f"    {layout.ref_type} i = {int(layout.roots[0])};",
                *(line[4:] for line in walk.loop), "    return (int)(-1 - i);"]
    bits = x_type.dtype.bits
    x_range = input_range(em, bits) if fixed else None
    return [f"    (void){em.var(x_name)};",
            *_straight_tree(layout, lambda i: em.at(x_name, i), literal, int(layout.roots[0]), "    ", x_range,
                            cmp_op, "return {};")]


# the float bits' order (sign and magnitude): +0.0 and every positive float below +infinity's bits, the negative
# ones from -0.0 (0x80000000) up to -infinity's; a NaN lies beyond either infinity, on its sign's side
POSITIVE_INFINITY_BITS, NEGATIVE_INFINITY_BITS = 0x7F800000, 0xFF800000
# predicted cost of a decision node of predict_float's walk on the float bits (ATmega328P: four loads, a 32-bit
# compare with immediates, a branch; a NaN check on one side) and of quantising one feature (avr.float_quantise)
FLOAT_WALK = {"level": 24.0, "flash_per_node": 40.0, "quantise_feature": 40.0}
# flash the float bits' walk may take (it is compiled with the float entry points only: the fit check does not
# see it): beyond, predict_float quantises every feature and calls predict
FLOAT_WALK_FLASH = 8 * 1024


def float_bits_threshold(threshold: int, shift: int, bits: int) -> np.float32 | bool:
    """The largest float32 t whose quantised value (``ir.fixed.quantise`` at scale ``shift``, ``bits``-bit input)
    is at most the integer ``threshold``: x <= t exactly when quantise(x) <= threshold, for every float32 x but
    NaN. True where every real value is at most the threshold, False where none is."""
    top = 2 ** (bits - 1)
    if threshold >= top - 1:
        return True
    if threshold < -top + 1:
        return False
    # quantise(x) = floor(x 2^s + 1/2) <= T  <=>  x < (T + 1/2) 2^-s, exact in float64 (T has at most 17 bits)
    bound = (threshold + 0.5) * 2.0 ** -shift
    t = np.float32(bound)
    if not t < bound:  # rounded up (or exact): the float below it is the largest below the bound
        t = np.nextafter(t, np.float32(-np.inf), dtype=np.float32)
    return t


def float_bits_test(b: str, threshold: int, shift: int, bits: int, missing_left: bool) -> str | bool:
    """The C condition, on a float's bits ``b`` (uint32_t), of going left at a node whose integer threshold is
    ``threshold`` (x_int <= T): the bits compared with the threshold's float (float_bits_threshold) as
    sign-magnitude (a positive t: b as int32 <= t's bits, every negative float below; a negative t: b as uint32
    >= t's bits, positive floats and -0.0 below), so no conversion of x. A compare sends +NaN right and -NaN
    left; a NaN (the missing value: quantise gives it the missing code) goes to the node's default side,
    ``missing_left``, as predict's walk sends it."""
    t = float_bits_threshold(threshold, shift, bits)
    nan = f"({b} & 0x7FFFFFFFUL) > {POSITIVE_INFINITY_BITS:#x}UL"
    if t is True:
        return True if missing_left else f"({b} & 0x7FFFFFFFUL) <= {POSITIVE_INFINITY_BITS:#x}UL"
    if t is False:
        return nan if missing_left else False
    t_bits = int(np.float32(t).view(np.uint32))
    if t > 0:
        compare = f"(int32_t){b} <= {t_bits}L"
        return (f"({compare} || (int32_t){b} > {POSITIVE_INFINITY_BITS:#x}L)" if missing_left
                else f"({compare} && {b} <= {NEGATIVE_INFINITY_BITS:#x}UL)")
    compare = f"{b} >= {t_bits:#x}UL"
    return (f"({compare} || (int32_t){b} > {POSITIVE_INFINITY_BITS:#x}L)" if missing_left
            else f"({compare} && {b} <= {NEGATIVE_INFINITY_BITS:#x}UL)")


def predict_float_code(em: CEmitter, node: Node, shifts) -> tuple[list[str], list[str]] | None:
    """(static functions, body) of ``<prefix>_predict_float`` for a single tree of an integer build whose predict
    returns its leaf's class (predict_code): the class tree's nodes compare the float bits of only the features
    a row's path reads (float_bits_test: the thresholds as floats at compile time) instead of quantising every
    feature, where the cost model finds that faster and its code within FLOAT_WALK_FLASH. Exactly predict of
    the quantised row (NaN included). Split into functions within CTarget.function_code_bytes where the target
    sets it (each subtree below the cut a function of its own, called at the end of its parent's path)."""
    at = node.attrs
    if len(at["roots"]) != 1 or int(at["n_outputs"]) < 2:
        return None
    (x_name,) = node.inputs
    x_type = em.graph.type(x_name)
    bits, out_dtype = x_type.dtype.bits, node.type.dtype
    classes = leaf_argmax(at, out_dtype.scale, out_dtype.bits)
    layout = _class_layout(class_tree(at, classes), threshold_ints(at, x_type.dtype.scale, bits))
    n = len(layout.feature)
    walk = layout.depth * FLOAT_WALK["level"]
    whole = len(shifts) * FLOAT_WALK["quantise_feature"] + layout.depth * COST["table"]["level"]
    if not n or walk >= whole or n * FLOAT_WALK["flash_per_node"] > FLOAT_WALK_FLASH:
        return None
    P = em.sym
    read = P("float_bits")
    sizes: dict[int, float] = {}

    def size(ref: int) -> float:
        if ref < 0:
            return 4.0
        if ref not in sizes:
            sizes[ref] = FLOAT_WALK["flash_per_node"] + size(int(layout.left[ref])) + size(int(layout.right[ref]))
        return sizes[ref]

    def goes_left(ref: int):
        f = int(layout.feature[ref])
        return float_bits_test(f"{read}(x, {f})", int(layout.threshold[ref]), int(shifts[f]), bits,
                               bool(layout.default_left[ref]))

    limit = getattr(em.target, "function_code_bytes", 0)
    functions: list[str] = []

    def function_body(ref: int) -> list[str]:
        """The statements returning the class of the subtree at ``ref``, its subtrees past the limit in
        functions of their own."""
        levels = None
        if limit and size(ref) > limit:  # the most levels whose nodes stay within the limit
            depth = _subtree_depths(layout, ref)
            levels = 1
            while (levels <= max(depth.values())
                   and sum(FLOAT_WALK["flash_per_node"] for d in depth.values() if d < levels + 1) <= limit):
                levels += 1
        entries: dict[int, str] = {}

        def enter(child: int) -> str:
            entries[child] = P(f"{node.name}_float_walk{len(functions) + len(entries)}")
            return f"return {entries[child]}(x);"

        lines = _straight_tree(layout, None, None, ref, "    ", at_leaf="return {};", levels=levels, enter=enter,
                               test=goes_left)
        for child, name in entries.items():
            functions.extend([f"static int __attribute__((noinline)) {name}(const float *x)", "{",
                              *function_body(child), "}", ""])
        return lines

    body = function_body(int(layout.roots[0]))
    helper = [f"/* a float's bits (the float walk of %{node.name} compares them with its thresholds' floats) */",
              f"static inline __attribute__((always_inline)) uint32_t {read}(const float *x, int k)", "{",
              "    union { float f; uint32_t u; } bits;", "    bits.f = x[k];", "    return bits.u;", "}", ""]
    if hasattr(em, "kernel_report"):
        em.kernel_report.append({
            "node": node.name, "op": "tree_ensemble", "matrix": f"{node.name} class tree", "entry": "predict_float",
            "decision_nodes": n, "depth": layout.depth, "kernel": "trees-float-bits",
            "predicted_cycles": round(walk), "flash_bytes": round(size(int(layout.roots[0]))),
            "note": "predict_float compares the float bits of the features a row's path reads (compiled with "
                    "the float entry points only)"})
    return helper + functions, body


def _subtree_depths(layout: Layout, ref: int) -> dict[int, int]:
    """The depth of each decision node of the subtree at ``ref`` below it (``ref``: 0)."""
    depth, stack = {}, [(ref, 0)]
    while stack:
        i, d = stack.pop()
        if i >= 0:
            depth[i] = d
            stack += [(int(layout.left[i]), d + 1), (int(layout.right[i]), d + 1)]
    return depth


def ensemble_code(em: CEmitter, node: Node, fixed=None) -> list[str]:
    """The node's C; ``fixed``: None for float, else c_fixed's (rshift_c, saturate_c)."""
    at = node.attrs
    (x_name,) = node.inputs
    x_type = em.graph.type(x_name)
    forest = forest_sums(em, node, bool(fixed))
    if forest is not None:  # the sums <prefix>_predict shares
        out, k = em.var(node.name), forest.n_outputs
        if fixed:
            rshift_c, saturate_c = fixed
            value = saturate_c(em, node, rshift_c("acc[c]", forest.shift))
        else:
            value = "acc[c]"
        return ["{", f"    {forest.acc_type} acc[{k}];", f"    {forest.function}({em.var(x_name)}, acc);",
                f"    for (int c = 0; c < {k}; ++c) {out}[c] = {value};", "}"]
    if fixed:
        thresholds = threshold_ints(at, x_type.dtype.scale, x_type.dtype.bits)
        values = leaf_ints(at, node.type.dtype.scale)
        lq = leaf_scale(at, node.type.dtype.scale)
    else:
        thresholds, values = at["threshold"].astype(np.float32), at["value"].astype(np.float32)
    layout = tree_layout(at, thresholds, values)
    n_trees, k = len(at["roots"]), int(at["n_outputs"])
    if fixed:
        t_lo, t_hi = (int(layout.threshold.min()), int(layout.threshold.max())) if layout.threshold.size else (0, 0)
        thr_type = int_type(t_lo, t_hi)
        leaf_type = int_type(int(values.min()), int(values.max())) if values.size else "int8_t"
        acc_type = "int32_t"
        literal = lambda v: str(int(v))  # noqa: E731
    else:
        thr_type, leaf_type, acc_type = "float", "float", "float"
        literal = c_float
    # integer thresholds always mean x <= T (the op's rule turns < t into <= ceil(t 2^S) - 1)
    cmp_op = "<" if not fixed and at["compare"] == "lt" else "<="
    thr_bytes = {"float": 4, "int8_t": 1, "int16_t": 2, "int32_t": 4}[thr_type]
    rd = em.target.read_const
    sym = em.sym
    leaf_count = len(layout.leaves)
    tree_out = at["tree_output"]
    width = layout.leaves.shape[1]
    scale_note = f", scale 2^-{lq}" if fixed else ""
    value_bytes = {"float": 4, "int8_t": 1, "int16_t": 2, "int32_t": 4}[leaf_type]
    sparse = bool(np.all(tree_out < 0)) and k <= 128
    if sparse:
        entry_outs, entry_vals, sparse_layout = sparse_leaves(layout)
        sparse = len(entry_outs) * (1 + value_bytes) < layout.leaves.size * value_bytes
    values_per_leaf = len(entry_outs) / leaf_count if sparse else (width if np.all(tree_out < 0) else 1)
    cands = predicted(layout, thr_bytes, n_trees, k, values_per_leaf)
    chosen = choose(cands, getattr(em.target, "tree_code_budget", 0), getattr(em, "compact_trees", False))
    if sparse:
        layout = sparse_layout
        leaf_out = em.add_const_array(sym(f"{node.name}_leaf_output"), entry_outs, "uint8_t",
                                      f"%{node.name}: output of each non-zero leaf value (bit 7: a leaf's last)")
        leaf_tab = em.add_const_array(sym(f"{node.name}_leaf_value"), entry_vals, leaf_type,
                                      f"%{node.name}: the non-zero values of the {leaf_count} distinct leaves"
                                      + scale_note)
    else:
        leaf_tab = em.add_const_array(sym(f"{node.name}_leaves"), layout.leaves, leaf_type,
                                      f"%{node.name}: the {leaf_count} distinct leaves, {width} value(s) each"
                                      + scale_note)
    _report(em, node, layout, chosen, cands, "sparse (output, value) runs" if sparse else "dense")
    ref_type = layout.ref_type
    x_at = lambda i: em.at(x_name, i)  # noqa: E731
    lines = ["{", f"    {acc_type} acc[{k}];", f"    for (int c = 0; c < {k}; ++c) acc[c] = 0;"]
    if not len(layout.feature) or chosen != "table":  # every compare may be decided at compile time
        lines.append(f"    (void){em.var(x_name)};")
    # the leaf index reaches the last leaf row, or in sparse form the last (output, value) entry (the
    # run loop steps through a leaf's entries past its start)
    last_leaf = len(entry_outs) - 1 if sparse else leaf_count - 1
    leaf_idx_type = "int16_t" if last_leaf < 32766 else "int32_t"

    def add_leaf(t_expr: str, indent: str) -> list[str]:
        if sparse:
            return [f"{indent}for (;; ++leaf) {{",
                    f"{indent}    const uint8_t c = {rd(leaf_out, 'leaf', 'uint8_t')};",
                    f"{indent}    acc[c & 0x7f] += {rd(leaf_tab, 'leaf', leaf_type)};",
                    f"{indent}    if (c & 0x80) break;",
                    f"{indent}}}"]
        if np.all(tree_out < 0):
            # an AVR int is 16 bits: the row's offset in int32 where it may pass 32,767
            row = "(int32_t)leaf" if leaf_count * width > 32767 else "leaf"
            value = rd(leaf_tab, f"{row} * {width} + c", leaf_type)
            return [f"{indent}for (int c = 0; c < {k}; ++c) acc[c] += {value};"]
        return [f"{indent}acc[{t_expr}] += {rd(leaf_tab, 'leaf', leaf_type)};"]

    if chosen == "table" and len(layout.feature):
        walk = _table_walk(em, node, layout, bool(fixed), thr_type, cmp_op, "leaf -1-ref", "")
        outs = None
        if not np.all(tree_out < 0):
            outs = em.add_const_array(sym(f"{node.name}_outputs"), tree_out, "uint8_t" if k <= 256 else "uint16_t",
                                      f"%{node.name}: the output each tree adds to")
        lines += [
            f"    for (int t = 0; t < {n_trees}; ++t) {{",
            f"        {ref_type} i = {rd(walk.roots, 't', ref_type)};",
            *walk.loop,
            f"        {leaf_idx_type} leaf = ({leaf_idx_type})(-1 - i);",
            *add_leaf(rd(outs, "t", "uint8_t" if k <= 256 else "uint16_t") if outs else "0", "        "),
            "    }",
        ]
    else:
        bits = x_type.dtype.bits
        x_range = input_range(em, bits) if fixed else None
        for t in range(n_trees):
            lines += [f"    {{ /* tree {t} */", f"        {leaf_idx_type} leaf;",
                      *_straight_tree(layout, x_at, literal, int(layout.roots[t]), "        ", x_range,
                                     cmp_op),
                      *add_leaf(str(int(tree_out[t])), "        "), "    }"]
    out = em.var(node.name)
    if fixed:
        rshift_c, saturate_c = fixed
        shift = lq - node.type.dtype.scale
        lines.append(f"    for (int c = 0; c < {k}; ++c) {out}[c] = {saturate_c(em, node, rshift_c('acc[c]', shift))};")
    else:
        lines.append(f"    for (int c = 0; c < {k}; ++c) {out}[c] = acc[c];")
    lines.append("}")
    return lines



@dataclass
class ForestSums:
    """A forest's leaf sums in a function of their own, shared by <prefix>_predict and the scores."""
    function: str  # static void function(const x_t *x, acc_t *acc): acc[c] = the sum of output c's leaf ints
    acc_type: str
    n_outputs: int
    shift: int  # the op's rounding shift from the sums to the result (fixed point; 0 for float)
    saturation: int | None = None  # the result's bits where a rounded sum may reach beyond them
    argmax: bool = False  # function returns the first maximum of the results (and stores no sums given null)


def forest_shortcut(em: CEmitter, node: Node, fixed: bool) -> tuple[np.ndarray, str, int] | None:
    """(leaf values, accumulator type, shift, saturation bits) when <prefix>_predict may take the forest's
    argmax from its sums directly: a forest of vector leaves (class probabilities) reading the input, whose
    result the prediction is the argmax of; the first maximum of the rounded (and, where the bound reaches
    the result's range, saturated: bits) sums is then the op's. The sums are int16 where every partial sum
    and the rounding add fit it (the largest leaf of each tree, summed per output), else int32."""
    at, g = node.attrs, em.graph
    pred = g.node(em.prediction_node)
    if (not em.tree_predict or em.read_clamp or pred.op != "argmax" or pred.inputs[0] != node.name
            or g.op(node.inputs[0]) != "input" or len(at["roots"]) < 2 or int(at["n_outputs"]) < 2
            or np.any(at["tree_output"] >= 0)):
        return None
    if not fixed:
        return at["value"].astype(np.float32), "float", 0, None
    out = node.type.dtype
    values = leaf_ints(at, out.scale)
    shift = leaf_scale(at, out.scale) - out.scale
    bound = int(np.max(np.sum(leaf_int_peaks(at, out.scale), axis=0)))
    saturates = rshift_bound(bound, shift) > 2 ** (out.bits - 1) - 1
    half = 1 << (shift - 1) if shift > 0 else 0
    # int_fast16_t: 16 bits on the AVR, a register's width on ARM (no sign extension of int16 locals)
    int24 = getattr(em.target, "int24_type", "")
    acc_type = ("int_fast16_t" if bound + half <= 2 ** 15 - 1 else
                int24 if int24 and bound + half <= 2 ** 23 - 1 else "int32_t")
    return values, acc_type, shift, out.bits if saturates else None


def _depths(layout: Layout) -> np.ndarray:
    """The depth of each decision node in its tree (roots: 0), level by level over all trees."""
    depth = np.zeros(len(layout.feature), dtype=np.int64)
    level, d = layout.roots[layout.roots >= 0], 0
    while level.size:
        depth[level] = d
        children = np.concatenate([layout.left[level], layout.right[level]])
        level, d = children[children >= 0], d + 1
    return depth


def forest_candidates(layout: Layout, entries: int, value_bytes: int, n_trees: int, n_outputs: int) -> dict:
    """Predicted AVR cycles (every tree walked to its deepest leaf) and flash of a forest's sums for each kernel:
    ``table`` (the node stream, leaves as (output, value) runs), ``straight`` (nested ifs, leaf values as
    constants) and ``top<k>`` (the top k levels of every tree straight-line, the rest from the node stream)."""
    cost, straight = COST, COST["straight"]
    depth = _depths(layout)
    # each reference to a leaf: the depth it is reached at and the leaf's non-zero values
    refs = np.concatenate([layout.left[layout.left < 0], layout.right[layout.right < 0]])
    reached = np.concatenate([depth[layout.left < 0], depth[layout.right < 0]]) + 1
    non_zero = np.count_nonzero(layout.leaves, axis=1)[-1 - refs] if refs.size else np.zeros(0, np.int64)
    levels = layout.depth + 2
    values_by_depth = np.cumsum(np.bincount(reached, weights=non_zero, minlength=levels)).astype(np.int64)
    leaves_by_depth = np.cumsum(np.bincount(reached, minlength=levels))
    nodes_by_depth = np.cumsum(np.bincount(depth, minlength=levels))
    rest = n_trees * cost["tree"] + n_outputs * cost["output"]
    out = {}
    for k in range(layout.depth + 1):
        upper = int(nodes_by_depth[k - 1]) if k else 0
        lower = len(layout.feature) - upper
        inline_values = int(values_by_depth[k])
        stream_leaves = len(refs) - int(leaves_by_depth[k])
        flash = (upper * straight["flash_per_node"] + inline_values * straight["flash_per_value"]
                 + n_trees * straight["tree_flash"])
        if lower:
            flash += lower * 6 + stream_leaves * 2 + entries * (1 + value_bytes) + cost["table"]["loop_flash"]
        levels_table = max(layout.depth - k, 0)
        cycles = (n_trees * (min(k, layout.depth) * straight["level"] + levels_table * cost["table"]["level"])
                  + rest + n_trees * cost["leaf_value"] * (entries / max(len(layout.leaves), 1)))
        name = "table" if k == 0 else "straight" if not lower else f"top{k}"
        out[name] = {"cycles": round(cycles), "flash": int(flash)}
    return out


def choose_forest(cands: dict, budget: int = 0, compact: bool = False) -> str:
    """The fastest kernel whose flash is within STRAIGHT_FLASH_FACTOR of the table's or the ``budget``; the
    table walk when ``compact``."""
    if compact:
        return "table"
    limit = max(STRAIGHT_FLASH_FACTOR * cands["table"]["flash"], budget)
    fits = [name for name, c in cands.items() if c["flash"] <= limit or name == "table"]
    return min(fits, key=lambda name: (cands[name]["cycles"], cands[name]["flash"]))


def use_asm(cands: dict, budget: int) -> bool:
    """The target's own code of the forest (the cost model's fastest by far: no table read) where its flash is
    within the target's budget for it (the backend's fit check retries without it when the build does not fit)."""
    return "asm" in cands and cands["asm"]["flash"] <= budget


def forest_sums(em: CEmitter, node: Node, fixed: bool) -> ForestSums | None:
    """The forest's sums function (emitted once, see forest_shortcut), or None where it does not apply.
    Straight-line code adds each leaf's non-zero values as constants (``acc[c] += v``: a pure leaf adds
    to its one class); the table walk reads the node stream (integer builds, NodeStream) and adds the leaf
    table's (output, value) runs; ``top<k>`` runs the top k levels of each tree as straight-line code, which
    hands the subtree below to the stream walk; ``asm``: the target's own code (CTarget.forest_asm: the AVR's
    straight-line assembly with the sums in registers, returning the argmax too). The cost model
    (forest_candidates, use_asm) picks the kernel."""
    found = forest_shortcut(em, node, fixed)
    if found is None:
        return None
    values, acc_type, shift, saturation = found
    at = node.attrs
    name = em.sym(f"{node.name}_sums")
    (x_name,) = node.inputs
    x_type = em.graph.type(x_name)
    k, n_trees = int(at["n_outputs"]), len(at["roots"])
    forest = ForestSums(name, acc_type, k, shift, saturation)
    if name in em.helpers:
        forest.argmax = em.helpers[name].startswith("int ")  # the target's own code (forest_asm) returns it
        return forest
    thresholds, literal, cmp_op = _types(em, node, fixed)
    layout = tree_layout(at, thresholds, values)
    entry_outs, entry_vals, sparse_layout = sparse_leaves(layout)
    leaf_type = "float" if not fixed else int_type(int(values.min()), int(values.max()))
    value_bytes = {"float": 4, "int8_t": 1, "int16_t": 2, "int32_t": 4}[leaf_type]
    bits = x_type.dtype.bits
    stream = node_stream(sparse_layout, bits, list(sparse_layout.roots)) if fixed else None
    cands = forest_candidates(layout, len(entry_outs), value_bytes, n_trees, k)
    if stream is None:  # the table walk of float builds: no top<k>
        cands = {name: c for name, c in cands.items() if not name.startswith("top")}
    chosen = (choose_forest(cands, getattr(em.target, "tree_code_budget", 0), getattr(em, "compact_trees", False))
              if len(layout.feature) else "straight")
    asm = None
    if fixed and bits == 16 and len(layout.feature) and not getattr(em, "compact_trees", False):
        # the target's own code of the whole forest (the AVR's assembly), where its flash is within the budget
        _, peak = leaf_int_ranges(at, node.type.dtype.scale)
        bounds = np.sum(np.maximum(peak, 0), axis=0).astype(np.int64)
        acc_bytes = {"int_fast16_t": 2, "int32_t": 4}.get(acc_type, 3)
        asm = em.target.forest_asm(em, name, layout, k, int(x_type.shape[0]), acc_bytes, bounds, shift, saturation)
        if asm is not None:
            cands["asm"] = {"cycles": round(asm[2]), "flash": int(asm[1])}
            if use_asm(cands, em.target.forest_asm_budget):
                chosen = "asm"
    if chosen == "asm":
        forest.argmax = True
        em.helpers[name] = asm[0]
        _report(em, node, layout, chosen, cands, "sums: leaf values added to accumulators in registers")
        return forest
    x_t = ctype_of(x_type.dtype)
    x_at = lambda i: em.at(x_name, i)  # noqa: E731
    x_range = input_range(em, bits) if fixed else None
    value = c_float if not fixed else (lambda v: str(int(v)))
    rd = em.target.read_const

    def adds(leaf: int) -> list[str]:
        row = layout.leaves[leaf]
        return [f"acc[{c}] += {value(row[c])};" for c in np.flatnonzero(row)] or ["/* no value */"]

    def leaf_tables() -> tuple[str, str, list[str]]:
        leaf_out = em.add_const_array(em.sym(f"{node.name}_leaf_output"), entry_outs, "uint8_t",
                                      f"%{node.name}: output of each non-zero leaf value (bit 7: a leaf's last)")
        leaf_tab = em.add_const_array(em.sym(f"{node.name}_leaf_value"), entry_vals, leaf_type,
                                      f"%{node.name}: the non-zero values of the {len(layout.leaves)} distinct "
                                      "leaves")
        idx_type = "int16_t" if len(entry_outs) < 32766 else "int32_t"
        start = "w & 0x7fff" if stream is not None else "-1 - i"
        return leaf_out, leaf_tab, [
            f"for ({idx_type} leaf = ({idx_type})({start});; ++leaf) {{",
            f"    const uint8_t c = {rd(leaf_out, 'leaf', 'uint8_t')};",
            f"    acc[c & 0x7f] += {rd(leaf_tab, 'leaf', leaf_type)};",
            "    if (c & 0x80) break;",
            "}"]

    signature = f"(const {x_t} *x, {acc_type} *acc)"
    lines = [f"static void {name}{signature}", "{"]
    if chosen.startswith("top"):
        levels = int(chosen[3:])
        entries = [int(i) for i in np.flatnonzero(_depths(sparse_layout) == levels)]
        stream = node_stream(sparse_layout, bits, entries)
        words = _stream_arrays(em, node, stream, roots=False)
        walk_name = em.sym(f"{node.name}_walk")
        _, _, run = leaf_tables()
        em.helpers[walk_name] = "\n".join([
            f"/* %{node.name}: the leaf values of the subtree at p added to acc */",
            f"static void {walk_name}(const int16_t *p, const {x_t} *x, {acc_type} *acc)", "{",
            *_stream_loop(em, x_name, x_t, stream, "    "), *("    " + line for line in run), "}", ""])
        offsets = dict(zip(entries, stream.roots.tolist()))
        leaf_rows = _leaf_rows(layout, sparse_layout)
        trees = [["    p = 0;",
                  *_straight_tree(sparse_layout, x_at, literal, int(sparse_layout.roots[t]), "    ", x_range, cmp_op,
                                  lambda e: adds(leaf_rows[e]), levels=levels,
                                  enter=lambda i: f"p = {words} + {offsets[i]};"),
                  f"    if (p) {walk_name}(p, x, acc);"] for t in range(n_trees)]
        flash = [_straight_flash(sparse_layout, int(sparse_layout.roots[t]), levels,
                                 lambda e: int(np.count_nonzero(layout.leaves[leaf_rows[e]])))
                 for t in range(n_trees)]
        lines += [f"    for (int c = 0; c < {k}; ++c) acc[c] = 0;",
                  *_tree_functions(em, name, signature, trees, flash, "    const int16_t *p;")]
    elif chosen == "straight":
        flash = [_straight_flash(layout, int(layout.roots[t]), None,
                                 lambda e: int(np.count_nonzero(layout.leaves[e]))) for t in range(n_trees)]
        limit = getattr(em.target, "function_code_bytes", 0)
        if not limit or sum(flash) <= limit:  # one function: the sums in locals (registers where they fit)
            sums = [f"a{c}" for c in range(k)]

            def local_adds(leaf: int) -> list[str]:
                row = layout.leaves[leaf]
                return [f"{sums[c]} += {value(row[c])};" for c in np.flatnonzero(row)] or ["/* no value */"]

            lines += ["    (void)x;", f"    {acc_type} {', '.join(f'{a} = 0' for a in sums)};"]
            for t in range(n_trees):
                lines += [f"    /* tree {t} */", *_straight_tree(layout, x_at, literal, int(layout.roots[t]), "    ",
                                                                 x_range, cmp_op, local_adds)]
            lines += [f"    acc[{c}] = {a};" for c, a in enumerate(sums)]
        else:
            trees = [_straight_tree(layout, x_at, literal, int(layout.roots[t]), "    ", x_range, cmp_op, adds)
                     for t in range(n_trees)]
            lines += [f"    for (int c = 0; c < {k}; ++c) acc[c] = 0;",
                      *_tree_functions(em, name, signature, trees, flash, "    (void)x;")]
    else:
        lines.append(f"    for (int c = 0; c < {k}; ++c) acc[c] = 0;")
        if stream is not None:
            words = _stream_arrays(em, node, stream, roots=True)
            loop = [f"        const int16_t *p = {words} + {rd(em.sym(node.name + '_node_roots'), 't', 'int16_t')};",
                    *_stream_loop(em, x_name, x_t, stream, "        ")]
        else:
            thr_type = ("float" if not fixed else int_type(int(layout.threshold.min()), int(layout.threshold.max())))
            walk = _table_walk(em, node, sparse_layout, fixed, thr_type, cmp_op, "leaf -1-ref", "")
            loop = [f"        {sparse_layout.ref_type} i = {rd(walk.roots, 't', sparse_layout.ref_type)};", *walk.loop]
        _, _, run = leaf_tables()
        lines += [f"    for (int t = 0; t < {n_trees}; ++t) {{", *loop, *("        " + line for line in run), "    }"]
    lines += ["}", ""]
    em.helpers[name] = "\n".join(lines)
    leaves_note = {"straight": "leaf values as constants", "table": "sparse (output, value) runs"}
    _report(em, node, layout, chosen, cands, "sums: " + leaves_note.get(chosen, "top levels' leaf values as "
                                                                         "constants, then (output, value) runs"))
    return forest


def _straight_flash(layout: Layout, ref: int, levels: int | None, values) -> float:
    """Predicted flash of a tree's straight-line code from ``ref`` (COST["straight"]): its decision nodes, the
    leaf values it adds as constants (``values(leaf)``: how many), the subtrees ``levels`` down handed on."""
    straight = COST["straight"]
    if ref < 0:
        return straight["flash_per_leaf"] + straight["flash_per_value"] * values(-1 - ref)
    if levels == 0:
        return straight["flash_per_node"]  # the subtree's entry and its walk's call
    below = None if levels is None else levels - 1
    return (straight["flash_per_node"] + _straight_flash(layout, int(layout.left[ref]), below, values)
            + _straight_flash(layout, int(layout.right[ref]), below, values))


def _tree_functions(em: CEmitter, name: str, signature: str, trees: list[list[str]], flash: list[float],
                    locals_line: str) -> list[str]:
    """The statements of a forest's sums adding every tree's leaves (``trees``: each tree's statements, their
    predicted ``flash``): inline where the target sets no limit to a function's code, else calls of functions
    ``<name>_part<i>`` each holding consecutive trees within CTarget.function_code_bytes (avr-gcc sizes some
    branches a word short, so a longer function may not link)."""
    limit = getattr(em.target, "function_code_bytes", 0)
    if not limit or sum(flash) <= limit:
        return [locals_line, *(line for t, tree in enumerate(trees) for line in [f"    /* tree {t} */", *tree])]
    parts: list[list[int]] = [[]]
    used = 0.0
    for t, size in enumerate(flash):
        if parts[-1] and used + size > limit:
            parts.append([])
            used = 0.0
        parts[-1].append(t)
        used += size
    calls = []
    for i, part in enumerate(parts):
        part_name = f"{name}_part{i}"
        em.helpers[part_name] = "\n".join([
            f"/* trees {part[0]}-{part[-1]} of {name} (a function's code within "
            f"{limit} bytes) */", f"static void __attribute__((noinline)) {part_name}{signature}", "{", locals_line,
            *(line for t in part for line in [f"    /* tree {t} */", *trees[t]]), "}", ""])
        calls.append(f"    {part_name}(x, acc);")
    return calls


def _leaf_rows(layout: Layout, sparse: Layout) -> dict[int, int]:
    """The leaf row (of ``layout``) of each run start (sparse_leaves' ~ref of ``sparse``)."""
    rows = {}
    for refs_sparse, refs in ((sparse.left, layout.left), (sparse.right, layout.right), (sparse.roots, layout.roots)):
        for a, b in zip(refs_sparse.tolist(), refs.tolist()):
            if a < 0:
                rows[-1 - a] = -1 - b
    return rows


@dataclass
class NodeStream:
    """Subtrees of the forest as one array of 16-bit words, each in preorder: a decision node is three words
    (the feature's byte offset in x, with bit 14 set where a missing value goes right; the threshold T' as
    int16; the byte offset of the right child in the array), followed by its left subtree; a leaf is one
    word, 0x8000 | its first (output, value) entry. A node goes left when x' <= T', with x' = x where missing
    values go left (the missing code M is below every threshold) and x' = x - 1 (wrapping: M - 1 is the
    largest value) and T' = T - 1 where they go right; a node no input goes left at (T <= M, missing going
    right) is its right subtree."""
    words: np.ndarray  # uint16
    roots: np.ndarray  # the first word of each subtree
    flagged: bool  # some node sends missing values right


def node_stream(layout: Layout, bits: int, entries: list[int]) -> NodeStream | None:
    """The NodeStream of the subtrees at decision nodes (or leaves) ``entries`` of a sparse-leaf layout
    (references ~entry) of an integer build, or None where a feature index, leaf entry or offset does not fit
    its field."""
    m = missing_code(bits)
    size = bits // 8  # the input element's bytes: features as byte offsets
    if layout.feature.size and int(layout.feature.max()) * size >= 1 << 14:
        return None
    leaf_refs = [-1 - r[r < 0] for r in (layout.left, layout.right, layout.roots)]
    if any(r.size and int(r.max()) >= 1 << 15 for r in leaf_refs):
        return None  # a leaf entry beyond a word's 15 bits (known before the stream is written)
    words: list[int] = []
    flagged = False

    def emit(ref: int) -> None:  # depth <= MAX_TREE_DEPTH
        nonlocal flagged
        if ref < 0:
            words.append(0x8000 | (-1 - ref))
            return
        t, dl = int(layout.threshold[ref]), bool(layout.default_left[ref])
        if not dl and t <= m:  # only missing values are <= M, and they go right
            emit(int(layout.right[ref]))
            return
        flagged |= not dl
        at = len(words)
        words.extend([int(layout.feature[ref]) * size | (0 if dl else 0x4000), (t if dl else t - 1) & 0xFFFF, 0])
        emit(int(layout.left[ref]))
        words[at + 2] = 2 * len(words)
        emit(int(layout.right[ref]))

    roots = []
    for entry in entries:
        roots.append(len(words))
        if len(words) >= 1 << 15:
            return None  # offsets beyond 15 bits: no stream (a large forest stops here, not after writing it)
        emit(int(entry))
    if len(words) >= 1 << 15:
        return None
    return NodeStream(np.array(words, dtype=np.uint16), np.array(roots, dtype=np.int64), flagged)


def _stream_arrays(em: CEmitter, node: Node, stream: NodeStream, roots: bool) -> str:
    """The node stream's array (and, with ``roots``, each subtree's first word: ``<node>_node_roots``)."""
    words = em.add_const_array(em.sym(f"{node.name}_nodes"), stream.words.view(np.int16), "int16_t",
                               f"%{node.name}: the trees' nodes (feature's byte offset | missing-goes-right << 14, "
                               "threshold, right child's byte offset; leaf: 0x8000 | its first entry), see "
                               "trees.NodeStream")
    if roots:
        em.add_const_array(em.sym(f"{node.name}_node_roots"), stream.roots, "int16_t",
                           f"%{node.name}: each tree's first word")
    return words


def _stream_loop(em: CEmitter, x_name: str, x_t: str, stream: NodeStream, indent: str) -> list[str]:
    """From the node at word pointer ``p`` to its leaf's word ``w``: a pointer walks the words (each read
    at a small offset from it: the AVR's LPM Z+ reads)."""
    rd = em.target.read_const
    read = (lambda i: f"(uint16_t){rd('p', i, 'int16_t')}")  # noqa: E731
    words = em.sym(f"{em.graph.node(em.prediction_node).inputs[0]}_nodes")
    walk = em.target.stream_walk(em, x_t)
    if walk is not None:  # the target's own walk (the AVR's in assembly)
        return [f"{indent}const uint16_t w = {walk}(p, x, {words});"]
    unsigned = "uint8_t" if x_t == "int8_t" else "uint16_t"
    shifted = ([f"    if (w & 0x4000u) v = ({x_t})({unsigned})((uint16_t)v - 1u); /* missing values go right */"]
               if stream.flagged else [])
    return [indent + line for line in [
        f"uint16_t w = {read('0')};",
        "while (!(w & 0x8000u)) {",
        f"    {x_t} v = *(const {x_t} *)((const char *)x + (w & 0x3fffu));",
        *shifted,
        f"    if (v <= ({x_t})(int16_t){read('1')}) p += 3;",
        f"    else p = (const int16_t *)((const char *){words} + {read('2')});",
        f"    w = {read('0')};",
        "}"]]


def _rounded(forest: ForestSums, acc: str) -> str:
    """The op's result of a sum: its rounding shift (a left shift, or none, keeps the sums' order)."""
    if forest.shift <= 0:
        return acc
    return f"({forest.acc_type})(({acc} + {1 << (forest.shift - 1)}) >> {forest.shift})"


def forest_predict(forest: ForestSums) -> list[str]:
    """<prefix>_predict of a forest: the first maximum of the op's results from the sums (rounded, saturated
    where they may reach beyond the result's range)."""
    t = forest.acc_type
    if forest.argmax:
        return [f"    return {forest.function}(x, 0);"]

    def result(acc: str, var: str) -> list[str]:
        lines = [f"{t} {var} = {_rounded(forest, acc)};"]
        if forest.saturation is not None:
            hi, lo = 2 ** (forest.saturation - 1) - 1, -(2 ** (forest.saturation - 1))
            lines += [f"if ({var} > {hi}) {var} = {hi};", f"if ({var} < {lo}) {var} = {lo};"]
        return lines

    return [f"    {t} acc[{forest.n_outputs}];",
            f"    {forest.function}(x, acc);",
            "    {",
            *("        " + line for line in result("acc[0]", "best")),
            "        int cls = 0;",
            f"        for (int c = 1; c < {forest.n_outputs}; ++c) {{",
            *("            " + line for line in result("acc[c]", "v")),
            "            if (v > best) { best = v; cls = c; }",
            "        }",
            "        return cls;",
            "    }"]
