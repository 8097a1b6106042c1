"""Per-feature input scales.

Raw features can span very different ranges (breast_cancer: areas in the thousands next to
smoothness around 0.1); one 16-bit scale for the whole input vector would flush the small ones
to zero. Where every use of the input can absorb a per-feature factor into a constant -
a mat-vec whose matrix is constant (scale its columns), a weighted distance (wsqdist) whose weights are
constant (the same), or a normalisation
``mul(sub(x, mean), c)`` with constant mean and c - each feature k gets its own scale s_k:
the device takes x_int[k] = round(x[k] * 2^s_k), and the graph is rewritten to consume x_int.
Otherwise (e.g. distances taken on the raw input) all features share one scale: the graph is
left in real units (s_k = 0 here) and the input's fixed-point type carries that scale.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.choose_scales import best_scale
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

FEATURE_SCALE_RANGE = (-16, 24)
# trees only compare each feature with its own thresholds, so each feature takes the finest scale its own
# range allows, independent of the others; the bound: the C quantiser's factor 2^s is a normal float32
TREE_FEATURE_SCALE_RANGE = (-126, 127)
INPUT_BITS = 16


def _const(graph: Graph, name: str) -> bool:
    return graph.op(name) in ("const", "sparse_const")


def _scales_columns(graph: Graph, user: str, value: str) -> bool:
    """Whether ``user`` is a mat-vec (or a stack's) of a constant matrix reading ``value`` as its vector, or a
    wsqdist of constant weights reading it as its point: scaling the matrix's columns absorbs a per-feature
    factor."""
    return _scaled_matrix(graph, user, value) is not None


def _scaled_matrix(graph: Graph, user: str, value: str) -> str | None:
    """The constant matrix whose columns absorb ``value``'s per-feature factors in ``user`` (_scales_columns)."""
    node = graph.node(user)
    if node.op in ("matvec", "matvec_at") and node.inputs[-1] == value and _const(graph, node.inputs[0]):
        return node.inputs[0]
    if node.op == "wsqdist" and node.inputs[0] == value and _const(graph, node.inputs[1]):
        return node.inputs[1]  # w x - t = (w 2^-s) (x 2^s) - t
    return None


def _scales_by_constant(graph: Graph, user: str, value: str) -> bool:
    """Whether ``user`` multiplies ``value`` by a constant of its shape (a normalisation's 1 / std)."""
    return graph.op(user) == "mul" and graph.op(next(i for i in graph.node(user).inputs if i != value)) == "const" \
        and graph.type(user) == graph.type(value)


def _absorbing_uses(graph: Graph, x: str) -> bool:
    for user in graph.users(x):
        node = graph.node(user)
        if _scales_columns(graph, user, x):
            continue
        if node.op == "tree_ensemble":  # thresholds scale with their feature
            continue
        if node.op == "sub" and node.inputs[0] == x and graph.op(node.inputs[1]) == "const" and all(
            _scales_by_constant(graph, u, user) or _scales_columns(graph, u, user) for u in graph.users(user)
        ):
            continue
        return False
    return True


def _scale_columns(graph: Graph, name: str, step: np.ndarray, done: set) -> None:
    """Multiply the columns (last axis) of the constant matrix ``name`` by ``step``, once however many
    mat-vecs read it (``done``: the matrices already scaled; e.g. Bonsai's node stack at every level)."""
    if name in done:
        return
    done.add(name)
    a = graph.node(name)
    attrs = dict(a.attrs)
    if a.op == "sparse_const":
        cols = np.repeat(np.arange(len(attrs["col_ptr"]) - 1), np.diff(attrs["col_ptr"]))
        attrs["values"] = (attrs["values"] * step[cols]).astype(np.float32)
    else:
        attrs["value"] = (attrs["value"] * step).astype(np.float32)
    graph.nx.nodes[name]["attrs"] = attrs


def finest_scale(peak: float, bits: int = INPUT_BITS) -> int:
    """The largest s with peak * 2^s <= 2^(bits-1) - 1 (peak > 0, finite), unclipped."""
    top = 2 ** (bits - 1) - 1
    s = math.floor(math.log2(top / peak))
    while peak * 2.0**s > top:
        s -= 1
    while peak * 2.0 ** (s + 1) <= top:
        s += 1
    return s


def tree_feature_scales(peak: np.ndarray) -> np.ndarray:
    """Each feature's own finest scale (features without calibrated values: the finest of the others');
    CompileError naming a feature too small for a float32 factor to lift to integers."""
    scales = np.array([finest_scale(float(p)) if p > 0 else 0 for p in peak], dtype=np.int64)
    lo, hi = TREE_FEATURE_SCALE_RANGE
    beyond = np.flatnonzero((peak > 0) & (scales > hi))
    if beyond.size:
        k = int(beyond[0])
        raise CompileError(f"feature {k}: its calibrated values reach only {float(peak[k]):.3g}; an integer build "
                           f"would need the scale 2^{int(scales[k])}, beyond the 2^{hi} a float32 factor holds, and "
                           "would lose the trees' decisions on it; use precision='float' or rescale the feature")
    known = peak > 0
    fallback = int(np.min(scales[known])) if known.any() else 0
    return np.clip(np.where(known, scales, fallback), lo, hi)


def feature_scales(graph: Graph, X: np.ndarray) -> np.ndarray:
    (x,) = graph.inputs()
    if graph.users(x) and all(graph.op(u) == "tree_ensemble" for u in graph.users(x)):
        return tree_feature_scales(np.max(np.abs(X), axis=0))
    if not _absorbing_uses(graph, x):
        # one scale for all: the graph stays in real units and the input's type carries the scale
        return np.zeros(X.shape[1], dtype=np.int64)
    peak = np.max(np.abs(X), axis=0)
    uniform = best_scale(float(np.max(peak)), 16)
    scales = np.array([best_scale(float(p), 16) if p > 0 else uniform for p in peak], dtype=np.int64)
    return np.clip(scales, *FEATURE_SCALE_RANGE)


def _set_const(graph: Graph, name: str, value: np.ndarray) -> None:
    graph.nx.nodes[name]["attrs"] = {"value": value.astype(np.float32)}


def apply_feature_scales(graph: Graph, scales: np.ndarray) -> Graph:
    """Rewrite ``graph`` so its input is x * 2^scales (powers of two: exact in float32)."""
    (x,) = graph.inputs()
    if not np.any(scales):  # also where some use cannot absorb a factor (feature_scales gave all zeros)
        return graph
    step = 2.0 ** -scales.astype(np.float64)
    scaled: set[str] = set()
    for user in graph.users(x):
        node = graph.node(user)
        if _scales_columns(graph, user, x):
            _scale_columns(graph, _scaled_matrix(graph, user, x), step, scaled)
        elif node.op == "tree_ensemble":
            attrs = dict(node.attrs)
            factor = 2.0 ** scales[np.maximum(attrs["feature"], 0)]
            top = float(np.finfo(np.float32).max)
            attrs["threshold"] = np.clip(attrs["threshold"] * factor, -top, top).astype(np.float32)
            graph.nx.nodes[user]["attrs"] = attrs
        elif node.op == "sub":
            mean = graph.node(node.inputs[1]).attrs["value"].astype(np.float64)
            _set_const(graph, node.inputs[1], np.broadcast_to(mean, step.shape) / step)
            for u in graph.users(user):
                if _scales_columns(graph, u, user):
                    _scale_columns(graph, _scaled_matrix(graph, u, user), step, scaled)
                    continue
                c_name = next(i for i in graph.node(u).inputs if i != user)
                c = graph.node(c_name).attrs["value"].astype(np.float64)
                _set_const(graph, c_name, np.broadcast_to(c, step.shape) * step)
    return graph


@register_pass
class InputScales(Pass):
    name = "input_scales"
    description = "give each input feature its own power-of-two scale where its uses can absorb it"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        scales = feature_scales(graph, ctx.options.calibration)
        graph = apply_feature_scales(graph, scales)
        graph.analyses.input_scale = scales
        distinct = sorted(set(scales.tolist()))
        ctx.log.append(f"input_scales: {len(distinct)} distinct feature scale(s) {distinct[:6]}"
                       f"{'...' if len(distinct) > 6 else ''}")
        return graph
