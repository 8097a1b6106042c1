"""The host batch kernel of ``tree_ensemble``: a block of rows walks each tree level by level without a
branch on the data (the layout XGBoost's and treelite's predictors use).

Each tree's nodes are stored breadth first, the two children of a node next to each other, as four int32
words: the feature (bit 31: a missing value goes right), the threshold (float32 bits, or the integer
threshold), the left child's index, and the leaf's word (a scalar leaf's value: float32 bits or its int; a
vector leaf: its row in the deduplicated leaf table). A leaf is a node that leads to itself: feature 0,
threshold NaN (float: no compare is true) or INT32_MAX (integer), left child itself. So every row takes
exactly the tree's depth in steps, ``i = left[i] + goes_right``, with

    float:   goes_right = (x[f] >= t) | (isnan(x[f]) & missing_right)     ("lt"; "le": x[f] > t)
    integer: goes_right = (x[f] > T) | ((x[f] == M) & missing_right)      (M: the missing code)

which is the op's decision at every node (tinycc_ml/ir/ops/ensembles.py), NaN and the missing code included.
The block's rows step in turn (independent chains of loads the CPU overlaps), then each adds its leaf:
float sums per row and output in tree order from zero, as the single-row C adds them (a zero leaf value
changes no sum: the sums start at +0 and never become -0), integer sums exact in any order; the result's
rounding shift and saturation are the single-row C's.
"""

from __future__ import annotations

import re

import numpy as np

from tinycc_ml.target import (
    CEmitter,
    Node,
    default_left,
    distinct_rows,
    forest_levels,
    leaf_ints,
    leaf_scale,
    missing_code,
    threshold_ints,
)

MAX_BLOCK_NODES = 1 << 22  # larger ensembles keep the lock-step table walk
MISSING_RIGHT = 1 << 31
INT32_MAX = 2**31 - 1


def level_order(at, thr_words: np.ndarray, leaf_words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nodes (n, 4) int64 words, each tree's root index, each tree's depth) in the layout of the docstring;
    ``thr_words``/``leaf_words``: each original node's threshold and leaf word. Each tree's nodes are numbered
    breadth first from its root's index (trees one after another), so a node's children, listed next to each
    other on the level below, take consecutive indices."""
    feature = np.asarray(at["feature"], dtype=np.int64)
    n_trees = len(at["roots"])
    levels = forest_levels(feature, at["left"], at["right"], at["roots"], limit=len(feature))
    counts = np.array([np.bincount(owner, minlength=n_trees) for _, owner in levels])  # (levels, trees)
    starts = np.concatenate([[0], np.cumsum(counts.sum(axis=0))[:-1]])  # each tree's first index
    before = np.cumsum(counts, axis=0) - counts  # each tree's nodes on the levels above
    index = []  # per level, each listed node's index
    for level, (_, owner) in enumerate(levels):
        first_of_owner = np.cumsum(counts[level]) - counts[level]  # the level's list is ordered by tree
        index.append(starts[owner] + before[level, owner] + np.arange(len(owner)) - first_of_owner[owner])
    rows = np.zeros((int(counts.sum()), 4), dtype=np.int64)
    missing_right = np.where(default_left(at), 0, MISSING_RIGHT)
    for level, (nodes, _) in enumerate(levels):
        idx, inner = index[level], feature[nodes] >= 0
        leaf = ~inner
        rows[idx[leaf]] = np.stack([np.zeros(int(leaf.sum()), np.int64), np.full(int(leaf.sum()), thr_words[-1]),
                                    idx[leaf], leaf_words[nodes[leaf]]], axis=1)
        if inner.any():  # the left children: every other entry of the level below, in this level's order
            parents = nodes[inner]
            rows[idx[inner]] = np.stack([feature[parents] | missing_right[parents], thr_words[parents],
                                         index[level + 1][0::2], np.zeros(len(parents), np.int64)], axis=1)
    depths = np.array([np.flatnonzero(counts[:, t]).max() for t in range(n_trees)], dtype=np.int64)
    return rows, starts.astype(np.int64), depths


def distinct_leaves(values: np.ndarray, is_leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of the leaves' values, each node's row in them: 0 at decision nodes), rows compared
    by their bytes, in the order of their bytes (``distinct_rows``)."""
    leaves = np.flatnonzero(is_leaf)
    rows = np.ascontiguousarray(values[leaves])
    distinct, _, inverse = distinct_rows(rows)
    words = np.zeros(len(values), dtype=np.int64)
    words[leaves] = np.asarray(inverse, dtype=np.int64)
    return distinct.reshape(-1, rows.shape[1]), words


def as_int32(words: np.ndarray) -> np.ndarray:
    """int64 words (unsigned 32-bit patterns or ints) as the int32 values C stores."""
    return (np.asarray(words, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)


def walk_block(em: CEmitter, node: Node, rows: int, lane: str, fixed_c) -> list[str] | None:
    """The node's C for a block of ``rows`` rows (``lane`` names a row in em's per-row C), or None where the
    layout does not apply (constants read as words, mixed leaf forms, too many nodes). ``fixed_c``: c_fixed's
    (rshift_c, saturate_c) for integer builds."""
    at, g = node.attrs, em.graph
    (x_name,) = node.inputs
    x_type, out_type = g.type(x_name), node.type
    fixed = not out_type.dtype.is_float
    tree_out = np.asarray(at["tree_output"])
    vector_leaves = bool(np.all(tree_out < 0))
    if em.target.word_flash is not None or len(at["feature"]) + len(at["roots"]) > MAX_BLOCK_NODES:
        return None
    if not vector_leaves and (np.any(tree_out < 0) or at["value"].shape[1] != 1):
        return None
    k = int(at["n_outputs"])
    if fixed:
        thr = threshold_ints(at, x_type.dtype.scale, x_type.dtype.bits).astype(np.int64)
        values = leaf_ints(at, out_type.dtype.scale).astype(np.int64)
        thr_words = np.append(thr, INT32_MAX)
    else:
        thr = np.asarray(at["threshold"], dtype=np.float32)
        values = np.asarray(at["value"], dtype=np.float32)
        thr_words = np.append(thr.view(np.uint32), np.float32(np.nan).view(np.uint32)).astype(np.int64)
    if vector_leaves:  # leaf word: its row in the table of distinct leaves
        table, leaf_words = distinct_leaves(values, np.asarray(at["feature"]) < 0)
    else:
        table = None
        leaf_words = values[:, 0].astype(np.int64) if fixed else values[:, 0].view(np.uint32).astype(np.int64)
    nodes, roots, depths = level_order(at, thr_words, leaf_words)
    sym = em.sym
    nodes_sym = em.add_const_array(sym(f"{node.name}_level_nodes"), as_int32(nodes), "int32_t",
                                   f"%{node.name}: the trees' nodes breadth first (feature | missing-goes-right "
                                   "<< 31, threshold, left child, leaf word; a leaf leads to itself), see "
                                   "host/tree_block.py")
    roots_sym = em.add_const_array(sym(f"{node.name}_level_roots"), roots, "int32_t",
                                   f"%{node.name}: each tree's root")
    depth_sym = em.add_const_array(sym(f"{node.name}_level_depths"), depths, "uint8_t" if depths.max() < 256
                                   else "int32_t", f"%{node.name}: each tree's depth (steps of every row)")
    acc_t, val_t = ("int32_t", "int32_t") if fixed else ("float", "float")
    any_right = bool(np.any(nodes[:, 0] & MISSING_RIGHT))
    x_at = em.at(x_name, "(w0 & 0x7fffffff)" if any_right else "w0")
    if fixed:
        m = missing_code(x_type.dtype.bits)
        test = "(v > n[1])" + (f" | ((v == {m}) & (int32_t)((uint32_t)w0 >> 31))" if any_right else "")
        v_decl = "const int32_t v = (int32_t){x};"
    else:
        cmp = ">=" if at["compare"] == "lt" else ">"
        test = f"(v {cmp} th)" + (" | ((v != v) & (int32_t)((uint32_t)w0 >> 31))" if any_right else "")
        v_decl = "const float v = {x}; float th; __builtin_memcpy(&th, n + 1, sizeof th);"

    def row(text: str, r: int) -> str:
        return re.sub(rf"\b{lane}\b", str(r), text)

    steps = [f"            {{ const int32_t *n = {nodes_sym} + 4 * (long)i{r}; const int32_t w0 = n[0]; "
             + v_decl.format(x=row(x_at, r)) + f" i{r} = n[2] + ({test}); }}" for r in range(rows)]
    lines = ["{", f"    {acc_t} acc[{rows}][{k}];",
             f"    for (int r = 0; r < {rows}; ++r) for (int c = 0; c < {k}; ++c) acc[r][c] = 0;",
             f"    for (int t = 0; t < {len(roots)}; ++t) {{",
             f"        const int32_t root = {roots_sym}[t];",
             f"        int32_t {', '.join(f'i{r} = root' for r in range(rows))};",
             f"        for (int level = {depth_sym}[t]; level > 0; --level) {{", *steps, "        }"]
    leaf = lambda r: f"{nodes_sym}[4 * (long)i{r} + 3]"  # noqa: E731
    if vector_leaves:
        w = table.shape[1]
        leaves_sym = em.add_const_array(sym(f"{node.name}_level_leaves"), table, val_t,
                                        f"%{node.name}: the distinct leaves, {w} value(s) each")
        for r in range(rows):
            lines += [f"        {{ const {val_t} *lv = {leaves_sym} + (long){leaf(r)} * {w};",
                      f"          for (int c = 0; c < {k}; ++c) acc[{r}][c] += lv[c]; }}"]
    else:
        out_sym = em.add_const_array(sym(f"{node.name}_level_outputs"), tree_out,
                                     "uint8_t" if k <= 256 else "uint16_t", f"%{node.name}: the output each tree "
                                     "adds to")
        lines.append(f"        const int c = {out_sym}[t];")
        for r in range(rows):
            if fixed:
                lines.append(f"        acc[{r}][c] += {leaf(r)};")
            else:
                lines.append(f"        {{ const int32_t lw = {leaf(r)}; float lv; "
                             f"__builtin_memcpy(&lv, &lw, sizeof lv); acc[{r}][c] += lv; }}")
    lines.append("    }")
    out = em.var(node.name)
    for r in range(rows):
        if fixed:
            rshift_c, saturate_c = fixed_c
            shift = leaf_scale(at, out_type.dtype.scale) - out_type.dtype.scale
            value = saturate_c(em, node, rshift_c(f"acc[{r}][c]", shift))
        else:
            value = f"acc[{r}][c]"
        lines.append(f"    for (int c = 0; c < {k}; ++c) {row(out, r)}[c] = {value};")
    return lines + ["}"]
