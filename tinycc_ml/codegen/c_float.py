"""C for float ops: the shared code table of precision "float" (see C_CODE in emitter.py).
Each entry writes one node's C from the emitter's helpers; float builds match the float
semantics of the op registry to float32 rounding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tinycc_ml.codegen import trees
from tinycc_ml.codegen.emitter import C_CODE, PREDICT_CODE, PREDICT_FLOAT_CODE, c_float, ctype_of
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.linalg import wsqdist_terms


def matvec(em, node: Node) -> list[str]:
    a_name, x_name = node.inputs
    a = em.graph.node(a_name)
    out = em.var(node.name)
    rows, cols = a.type.shape
    if a.op == "sparse_const":
        vals, rix, idx_type, cptr, ptr_type = em.sparse_arrays(a_name)
        rd = em.target.read_const
        return [
            f"for (int i = 0; i < {rows}; ++i) {out}[i] = 0.0f;",
            f"for (int j = 0; j < {cols}; ++j) {{",
            f"    const float xj = {em.at(x_name, 'j')};",
            f"    for (int p = {rd(cptr, 'j', ptr_type)}; p < {rd(cptr, 'j + 1', ptr_type)}; ++p)",
            f"        {out}[{rd(rix, 'p', idx_type)}] += {rd(vals, 'p', 'float')} * xj;",
            "}",
        ]
    product = f"{em.at(a_name, f'i * {cols} + k')} * {em.at(x_name, 'k')}"
    return [
        f"for (int i = 0; i < {rows}; ++i) {{",
        "    float acc = 0.0f;",
        f"    for (int k = 0; k < {cols}; ++k) acc += {product};",
        f"    {out}[i] = acc;",
        "}",
    ]


def sqdist(em, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    k, m = em.graph.type(m_name).shape
    if em.graph.op(m_name) == "const":
        mt = em.const_transposed(m_name)
        elem = em.target.read_const(mt, f"j * {k} + k", "float")
    else:
        elem = em.at(m_name, f"k * {m} + j")
    return [
        f"for (int j = 0; j < {m}; ++j) {{",
        "    float acc = 0.0f;",
        f"    for (int k = 0; k < {k}; ++k) {{",
        f"        const float d = {elem} - {em.at(x_name, 'k')};",
        "        acc += d * d;",
        "    }",
        f"    {em.var(node.name)}[j] = acc;",
        "}",
    ]


def wsqdist_arrays(em, node: Node) -> tuple[str, str, str, str, list[int]]:
    """The stored terms of a wsqdist, class after class (w = t = 0 terms left out: they are 0): symbols of
    their features, weights, targets and the classes' end offsets, and those ends."""
    x_name, w_name, t_name = node.inputs
    g = em.graph
    W, T = g.node(w_name).attrs["value"], g.node(t_name).attrs["value"]
    cols = wsqdist_terms(W, T)
    flat = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    rows = np.repeat(np.arange(W.shape[0]), [len(c) for c in cols])
    ends = np.cumsum([len(c) for c in cols]).tolist()
    D = W.shape[1]
    col = em.add_const_array(em.sym(f"{node.name}_col"), flat, "uint8_t" if D <= 256 else "uint16_t",
                             f"%{node.name}: the feature of each term (of {D})")
    w = em.add_const_array(em.sym(f"{node.name}_w"), W[rows, flat], ctype_of(g.type(w_name).dtype),
                           f"%{w_name}: {g.type(w_name)}, the weight of each term")
    t = em.add_const_array(em.sym(f"{node.name}_t"), T[rows, flat], ctype_of(g.type(t_name).dtype),
                           f"%{t_name}: {g.type(t_name)}, the target of each term")
    end = em.add_const_array(em.sym(f"{node.name}_end"), np.asarray(ends), "uint16_t",
                             f"%{node.name}: where each class's terms end")
    return col, w, t, end, ends


def wsqdist(em, node: Node) -> list[str]:
    col, w, t, end, ends = wsqdist_arrays(em, node)
    rd = em.target.read_const
    ct = "uint8_t" if em.graph.type(node.inputs[0]).size <= 256 else "uint16_t"
    return [
        "{",
        "    int i = 0;",
        f"    for (int c = 0; c < {len(ends)}; ++c) {{",
        "        float acc = 0.0f;",
        f"        for (; i < {rd(end, 'c', 'uint16_t')}; ++i) {{",
        f"            const float e = {rd(w, 'i', 'float')} * {em.at(node.inputs[0], rd(col, 'i', ct))} - "
        f"{rd(t, 'i', 'float')};",
        "            acc += e * e;",
        "        }",
        f"        {em.var(node.name)}[c] = acc;",
        "    }",
        "}",
    ]


def elementwise(em, node: Node, expr: Callable[..., str]) -> list[str]:
    operands = [lambda i, n=n: em.at(n, i) for n in node.inputs]
    if node.type.rank == 0:
        return [f"{em.var(node.name)} = {expr(*[f('0') for f in operands])};"]
    return [f"for (int i = 0; i < {node.type.size}; ++i) "
            f"{em.var(node.name)}[i] = {expr(*[f('i') for f in operands])};"]


def add(em, node):
    return elementwise(em, node, lambda a, b: f"{a} + {b}")


def sub(em, node):
    return elementwise(em, node, lambda a, b: f"{a} - {b}")


def mul(em, node):
    return elementwise(em, node, lambda a, b: f"{a} * {b}")


def scale(em, node):
    factor = c_float(node.attrs["factor"])
    return elementwise(em, node, lambda a: f"{a} * {factor}")


def exp(em, node):
    return elementwise(em, node, lambda a: f"expf({a})")


def tanh(em, node):
    return elementwise(em, node, lambda a: f"tanhf({a})")


def clip(em, node):
    lo, hi = c_float(node.attrs["lo"]), c_float(node.attrs["hi"])
    return elementwise(em, node, lambda a: f"({a} < {lo} ? {lo} : ({a} > {hi} ? {hi} : {a}))")


def total(em, node):
    (a,) = node.inputs
    n = em.graph.type(a).size
    return [f"{em.var(node.name)} = 0.0f;",
            f"for (int i = 0; i < {n}; ++i) {em.var(node.name)} += {em.at(a, 'i')};"]


def arg(em, node, better: str) -> list[str]:
    (a,) = node.inputs
    n = em.graph.type(a).size
    ctype = ctype_of(em.graph.type(a).dtype)
    out = em.var(node.name)
    return [
        f"{out} = 0;",
        "{",
        f"    {ctype} best = {em.at(a, '0')};",
        f"    for (int i = 1; i < {n}; ++i) {{",
        f"        if ({em.at(a, 'i')} {better} best) {{ best = {em.at(a, 'i')}; {out} = i; }}",
        "    }",
        "}",
    ]


def argmax(em, node):
    return arg(em, node, ">")


def matvec_at(em, node: Node) -> list[str]:
    m_name, k_name, x_name = node.inputs
    _, rows, cols = em.graph.type(m_name).shape
    product = f"{em.at(m_name, f'base + i * {cols} + k')} * {em.at(x_name, 'k')}"
    start = "0.0f"
    if "bias" in node.attrs:
        bias = em.add_const_array(em.sym(f"{node.name}_bias"), np.asarray(node.attrs["bias"], np.float32), "float",
                                  f"%{node.name}: each matrix's bias row")
        start = em.target.read_const(bias, f"{em.at(k_name, '0')} * {rows} + i", "float")
    return [
        "{",
        f"    const int32_t base = (int32_t){em.at(k_name, '0')} * {rows * cols};",
        f"    for (int i = 0; i < {rows}; ++i) {{",
        f"        float acc = {start};",
        f"        for (int k = 0; k < {cols}; ++k) acc += {product};",
        f"        {em.var(node.name)}[i] = acc;",
        "    }",
        "}",
    ]


def branch(em, node: Node) -> list[str]:
    k_name, s_name = node.inputs
    value = em.at(s_name, "0")
    return [f"{em.var(node.name)} = 2 * {em.at(k_name, '0')} + ({value} > 0 ? 1 : 2);"]


def segment_min(em, node: Node, store_best=None) -> list[str]:
    """Per-segment minimum; ``store_best(c)`` writes best into element c (fixed point: shifted)."""
    (a,) = node.inputs
    offs = [int(o) for o in node.attrs["offsets"]]
    bounds = em.add_const_array(em.sym(f"{node.name}_offsets"), np.asarray(offs),
                                "uint16_t" if offs[-1] < 65536 else "int32_t",
                                f"%{node.name}: segment start offsets")
    rd = lambda i: em.target.read_const(bounds, i, "uint16_t" if offs[-1] < 65536 else "int32_t")  # noqa: E731
    ctype = ctype_of(em.graph.type(a).dtype)
    return [
        f"for (int c = 0; c < {len(offs) - 1}; ++c) {{",
        f"    {ctype} best = {em.at(a, rd('c'))};",
        f"    for (int32_t j = (int32_t){rd('c')} + 1; j < (int32_t){rd('c + 1')}; ++j)",
        f"        if ({em.at(a, 'j')} < best) best = {em.at(a, 'j')};",
        "    " + (store_best("c") if store_best else f"{em.var(node.name)}[c] = best;"),
        "}",
    ]


def ovo_votes(em, node: Node, store_vote=lambda out: f"{out}[c] = (float)votes[c];") -> list[str]:
    """One-vs-one votes (libsvm's order and rule); ``store_vote(out)`` writes votes[c] into out[c]."""
    (d,) = node.inputs
    n_classes = int(node.attrs["n_classes"])
    return [
        "{",
        f"    int32_t votes[{n_classes}];",
        "    int p = 0;",
        f"    for (int c = 0; c < {n_classes}; ++c) votes[c] = 0;",
        f"    for (int i = 0; i < {n_classes}; ++i)",
        f"        for (int j = i + 1; j < {n_classes}; ++j, ++p)",
        f"            ++votes[{em.at(d, 'p')} > 0 ? i : j];",
        f"    for (int c = 0; c < {n_classes}; ++c) " + store_vote(em.var(node.name)),
        "}",
    ]


def kbest_start(ctype: str, k: int, itype: str = "int32_t") -> list[str]:
    """Declarations of the k best (distance, index) pairs, kept sorted by distance."""
    if k == 1:  # initialised: compilers cannot see that n_best < 1 guards the first read
        return [f"{ctype} best_d[1] = {{0}};", f"{itype} best_i[1] = {{0}};", "int n_best = 0;"]
    return [f"{ctype} best_d[{k}];", f"{itype} best_i[{k}];", "int n_best = 0;"]


def kbest_insert(k: int, dj: str, j: str) -> list[str]:
    """Insert (dj, j) into the k best; rows come in index order and strict < keeps the lower index first
    among equal distances (kvote's rule)."""
    return [
        f"if (n_best < {k} || {dj} < best_d[{k - 1}]) {{",
        f"    int pos = n_best < {k} ? n_best++ : {k - 1};",
        f"    while (pos > 0 && {dj} < best_d[pos - 1]) {{",
        "        best_d[pos] = best_d[pos - 1];",
        "        best_i[pos] = best_i[pos - 1];",
        "        --pos;",
        "    }",
        f"    best_d[pos] = {dj};",
        f"    best_i[pos] = {j};",
        "}",
    ]


def kbest_votes(em, node: Node, store_vote) -> list[str]:
    """Votes of the k best's labels (the node's ``labels`` attribute, in flash); ``store_vote(out)`` writes
    votes[c] into out[c]."""
    k, n_classes = int(node.attrs["k"]), int(node.attrs["n_classes"])
    label_type = "uint8_t" if n_classes <= 256 else "uint16_t"
    labels = em.add_const_array(em.sym(f"{node.name}_labels"), node.attrs["labels"], label_type,
                                f"%{node.name}: label of each reference point")
    vtype = "uint8_t" if k < 256 else "int32_t"
    return [
        f"{vtype} votes[{n_classes}];",
        f"for (int c = 0; c < {n_classes}; ++c) votes[c] = 0;",
        f"for (int i = 0; i < {k}; ++i) ++votes[{em.target.read_const(labels, 'best_i[i]', label_type)}];",
        f"for (int c = 0; c < {n_classes}; ++c) " + store_vote(em.var(node.name)),
    ]


def kvote(em, node: Node, store_vote=lambda out: f"{out}[c] = (float)votes[c];") -> list[str]:
    """k nearest votes; ``store_vote(out)`` writes votes[c] into out[c] (fixed point: saturated)."""
    (d,) = node.inputs
    k = int(node.attrs["k"])
    m = em.graph.type(d).size
    ctype = ctype_of(em.graph.type(d).dtype)
    return ["{", *("    " + ln for ln in kbest_start(ctype, k)),
            f"    for (int32_t j = 0; j < {m}; ++j) {{",
            f"        const {ctype} dj = {em.at(d, 'j')};",
            *("        " + ln for ln in kbest_insert(k, "dj", "j")),
            "    }",
            *("    " + ln for ln in kbest_votes(em, node, store_vote)), "}"]


def sqdist_kvote(em, node: Node, store_vote=lambda out: f"{out}[c] = (float)votes[c];", distance=None,
                 dtype: str = "float") -> list[str]:
    """kvote(sqdist(x, M)) keeping only the k best: one pass over the prototypes. ``distance(j)``: lines
    leaving the distance to prototype j in dj (default: the float sum of squares)."""
    x_name, m_name = node.inputs
    r, m = em.graph.type(m_name).shape
    k = int(node.attrs["k"])
    if distance is None:
        mt = em.const_transposed(m_name)

        def distance(j):
            elem = em.target.read_const(mt, f"{j} * {r} + i", "float")
            return ["float dj = 0.0f;", f"for (int i = 0; i < {r}; ++i) {{",
                    f"    const float t = {elem} - {em.at(x_name, 'i')};",
                    "    dj += t * t;", "}"]
    return ["{", *("    " + ln for ln in kbest_start(dtype, k)),
            f"    for (int32_t j = 0; j < {m}; ++j) {{",
            *("        " + ln for ln in distance("j")),
            *("        " + ln for ln in kbest_insert(k, "dj", "j")),
            "    }",
            *("    " + ln for ln in kbest_votes(em, node, store_vote)), "}"]


def largest(em, node: Node, store_best=None) -> list[str]:
    """The largest element; ``store_best()`` writes best into the result (fixed point: shifted)."""
    (a,) = node.inputs
    n = em.graph.type(a).size
    ctype = ctype_of(em.graph.type(a).dtype)
    return ["{", f"    {ctype} best = {em.at(a, '0')};",
            f"    for (int32_t i = 1; i < {n}; ++i) if ({em.at(a, 'i')} > best) best = {em.at(a, 'i')};",
            "    " + (store_best() if store_best else f"{em.var(node.name)} = best;"), "}"]


def tanh_clamp(em, node):
    return elementwise(em, node, lambda a: f"({a} < -1.0f ? -1.0f : ({a} > 1.0f ? 1.0f : {a}))")


def sigmoid_calibrate(em, node: Node) -> list[str]:
    t, ab = node.inputs
    return [f"for (int i = 0; i < {node.type.size}; ++i) "
            f"{em.var(node.name)}[i] = 1.0f / (1.0f + expf({em.at(ab, 'i * 2')} * {em.at(t, 'i')} + "
            f"{em.at(ab, 'i * 2 + 1')}));"]


def isotonic_calibrate(em, node: Node) -> list[str]:
    """Clip to the knots' ends, then interpolate on the first segment whose right end is >= t (the knots
    are padded by repeating the last: a segment of width 0 gives its left y)."""
    t, kx, ky = node.inputs
    return [f"for (int i = 0; i < {node.type.size}; ++i) {{",
            *("    " + line for line in _isotonic_body(em, node, em.at(t, "i"), kx, ky, "")), "}"]


def _isotonic_body(em, node: Node, t: str, kx: str, ky: str, sign: str) -> list[str]:
    """One column's isotonic regression of ``t`` into ``out[i]``, its knots ``sign`` kx (a minus: mirrored)."""
    n_knots = em.graph.type(kx).shape[1]
    x = lambda j: f"{sign}{em.at(kx, f'i * {n_knots} + {j}')}"  # noqa: E731
    y = lambda j: em.at(ky, f"i * {n_knots} + {j}")  # noqa: E731
    value = "x_hi > x_lo ? (y_hi - y_lo) / (x_hi - x_lo) * (v - x_lo) + y_lo : y_lo"
    if "snap" in node.attrs:  # beside a knot by float32 rounding: the knot's y
        snap = em.add_const_array(em.sym(f"{node.name}_snap"), np.asarray(node.attrs["snap"], np.float32), "float",
                                  f"%{node.name}: how near a knot reads its y, per column")
        near = em.target.read_const(snap, "i", "float")
        value = f"v - x_lo <= {near} ? y_lo : (x_hi - v <= {near} ? y_hi : ({value}))"
    return [
        f"float v = {t};",
        "int j = 1;",
        f"if (v < {x(0)}) v = {x(0)};",
        f"if (v > {x(n_knots - 1)}) v = {x(n_knots - 1)};",
        f"while (j < {n_knots - 1} && v > {x('j')}) ++j;",
        "{",
        f"    const float x_lo = {x('j - 1') if n_knots > 1 else x(0)}, "
        f"x_hi = {x('j') if n_knots > 1 else x(0)};",
        f"    const float y_lo = {y('j - 1') if n_knots > 1 else y(0)}, "
        f"y_hi = {y('j') if n_knots > 1 else y(0)};",
        f"    {em.var(node.name)}[i] = {value};",
        "}",
    ]


def isotonic_calibrate_pq(em, node: Node) -> list[str]:
    """Through p where p <= 1/2, else through -q against the mirrored complements of the knots."""
    p, q, kx, kq, ky = node.inputs
    return [f"for (int i = 0; i < {node.type.size}; ++i) {{",
            f"    if ({em.at(p, 'i')} <= 0.5f) {{",
            *("        " + line for line in _isotonic_body(em, node, em.at(p, "i"), kx, ky, "")),
            "    } else {",
            *("        " + line for line in _isotonic_body(em, node, f"-{em.at(q, 'i')}", kq, ky, "-")),
            "    }", "}"]


def calibrated_mean(em, node: Node) -> list[str]:
    (p,) = node.inputs
    k, classes, folds = int(node.attrs["n_classes"]), list(node.attrs["column_class"]), node.attrs["fold_columns"]
    out = em.var(node.name)
    lines = [f"for (int c = 0; c < {k}; ++c) {out}[c] = 0.0f;", "{", f"    float proba[{k}], total;"]
    start = 0
    for count in folds:
        if k == 2:
            lines += [f"    proba[1] = {em.at(p, str(start))};", "    proba[0] = 1.0f - proba[1];"]
        else:
            lines += [f"    for (int c = 0; c < {k}; ++c) proba[c] = 0.0f;"]
            lines += [f"    proba[{classes[c]}] = {em.at(p, str(c))};" for c in range(start, start + count)]
            lines += ["    total = 0.0f;", f"    for (int c = 0; c < {k}; ++c) total += proba[c];",
                      f"    for (int c = 0; c < {k}; ++c) proba[c] = total != 0.0f ? proba[c] / total : "
                      f"{c_float(1.0 / k)};"]
        lines += [f"    for (int c = 0; c < {k}; ++c) {out}[c] += proba[c] > 1.0f && proba[c] <= "
                  f"{c_float(1.0 + 1e-5)} ? 1.0f : proba[c];"]
        start += count
    lines += ["    (void)total;" if k == 2 else "",
              f"    for (int c = 0; c < {k}; ++c) {out}[c] /= {c_float(float(len(folds)))};", "}"]
    return [line for line in lines if line]


def ovr_decision(em, node: Node) -> list[str]:
    """Votes and summed confidences pair by pair, in scikit-learn's order (its sums' rounding too)."""
    (d,) = node.inputs
    k = int(node.attrs["n_classes"])
    out = em.var(node.name)
    return [
        "{",
        f"    float votes[{k}], total[{k}];",
        "    int p = 0;",
        f"    for (int c = 0; c < {k}; ++c) votes[c] = total[c] = 0.0f;",
        f"    for (int i = 0; i < {k}; ++i)",
        f"        for (int j = i + 1; j < {k}; ++j, ++p) {{",
        f"            const float d = {em.at(d, 'p')};",
        "            total[i] += d;",
        "            total[j] -= d;",
        "            votes[d >= 0.0f ? i : j] += 1.0f;",
        "        }",
        f"    for (int c = 0; c < {k}; ++c)",
        f"        {out}[c] = votes[c] + total[c] / (3.0f * (fabsf(total[c]) + 1.0f));",
        "}",
    ]


C_CODE["float"].update({
    "ovr_decision": ovr_decision,
    "sigmoid_calibrate": sigmoid_calibrate,
    "isotonic_calibrate": isotonic_calibrate,
    "isotonic_calibrate_pq": isotonic_calibrate_pq,
    "calibrated_mean": calibrated_mean,
    "matvec": matvec,
    "sqdist": sqdist,
    "wsqdist": wsqdist,
    "add": add,
    "sub": sub,
    "mul": mul,
    "scale": scale,
    "exp": exp,
    "tanh": tanh,
    "clip": clip,
    "sum": total,
    "argmax": argmax,
    "matvec_at": matvec_at,
    "branch": branch,
    "segment_min": segment_min,
    "kvote": kvote,
    "sqdist_kvote": sqdist_kvote,
    "ovo_votes": ovo_votes,
    "tanh_clamp": tanh_clamp,
    "max": largest,
    "tree_ensemble": trees.ensemble_code,
})
PREDICT_CODE["tree_ensemble"] = lambda em, node: trees.predict_code(em, node, node.type.dtype.is_fixed)
PREDICT_FLOAT_CODE["tree_ensemble"] = trees.predict_float_code
