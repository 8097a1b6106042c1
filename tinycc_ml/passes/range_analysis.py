"""Range analysis: what every value of a float graph spans.

- profile: run the float interpreter on calibration rows and record each value's min and max;
- static: propagate the declared input interval through the ops with interval arithmetic,
  giving bounds that hold for every input in that interval (None where an op has no rule).

Both are stored in ``graph.analyses.ranges`` = {node: Range}.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.analyses import Range
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_batch, row_chunks
from tinycc_ml.ir.ops import OPS
from tinycc_ml.passes.choose_scales import MIN_LIKE
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

LOW_ORDER = 8


def read_by_minimum(graph: Graph, name: str) -> bool:
    """Whether every reader of ``name`` is a minimum-like op (choose_scales reads its smallest values only)."""
    users = graph.users(name)
    return bool(users) and all(graph.op(u) in MIN_LIKE for u in users)


def profile(graph: Graph, X: np.ndarray,
            outputs: dict[str, np.ndarray] | None = None) -> dict[str, tuple[float, float, tuple[float, ...]]]:
    """Each float value's (min, max, its LOW_ORDER smallest values' largest over the rows) on the rows X; the
    smallest values only of values that minimum-like ops read (read_by_minimum), () for the others. ``outputs``:
    filled with the graph's outputs on the rows, as ir.interp.run_float gives them (the same chunks of rows)."""
    parts: list[dict[str, np.ndarray]] = []
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    low: dict[str, np.ndarray] = {}
    wanted = {name for name in graph.order() if read_by_minimum(graph, name)}
    for rows in row_chunks(graph, len(X)):
        values = evaluate_batch(graph, np.asarray(X[rows], dtype=np.float64))
        if outputs is not None:
            parts.append({label: values[node] for label, node in graph.outputs})
        for name, value in values.items():
            if graph.type(name).dtype.kind != "f32":
                continue
            vmin, vmax = float(np.min(value)), float(np.max(value))
            lo[name] = min(lo.get(name, vmin), vmin)
            hi[name] = max(hi.get(name, vmax), vmax)
            if name not in wanted:
                continue
            per_row = value.reshape(len(value), -1)
            head = min(LOW_ORDER, per_row.shape[1])
            part = np.partition(per_row, head - 1, axis=1) if per_row.shape[1] > head else per_row
            smallest = np.max(np.sort(part[:, :head], axis=1), axis=0)
            low[name] = smallest if name not in low else np.maximum(low[name], smallest)
    if outputs is not None and parts:
        outputs.update({label: np.concatenate([p[label] for p in parts]) for label, _ in graph.outputs})
    return {n: (lo[n], hi[n], tuple(float(v) for v in low.get(n, ()))) for n in lo}


def static_intervals(graph: Graph, input_lo, input_hi,
                     float_check: bool = False) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Elementwise proven intervals for every value reachable with the ops' interval rules. ``float_check``
    (the float32 range check of float builds; the scale choice keeps its proofs as they were): also
    x - max(x) <= 0, and sparse matrices' products taken over their non-zeros (never made dense)."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    sparse: dict[str, dict] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "input":  # one interval for all features, or one per feature
            out[name] = tuple(np.broadcast_to(np.asarray(v, dtype=np.float64), node.type.shape).copy()
                              for v in (input_lo, input_hi))
            continue
        if float_check and node.op == "sparse_const":
            sparse[name] = node.attrs
            continue
        if float_check and node.op == "matvec" and node.inputs[0] in sparse and node.inputs[1] in out:
            out[name] = _sparse_matvec_interval(sparse[node.inputs[0]], *out[node.inputs[1]])
            continue
        if any(i not in out for i in node.inputs) or OPS[node.op].interval is None:  # no rule (network ops): unproven
            continue
        interval = OPS[node.op].interval(node.attrs, [out[i] for i in node.inputs], node.type.shape)
        if interval is not None:
            out[name] = _below_its_max(graph, node, interval) if float_check else interval
    return out


def _sparse_matvec_interval(attrs, lo, hi):
    rows = int(attrs["shape"][0])
    values = np.asarray(attrs["values"], dtype=np.float64)
    columns = np.repeat(np.arange(len(attrs["col_ptr"]) - 1), np.diff(np.asarray(attrs["col_ptr"], dtype=np.int64)))
    row = np.asarray(attrs["row_indices"], dtype=np.int64)
    low, high = values * lo[columns], values * hi[columns]
    return (np.bincount(row, np.minimum(low, high), minlength=rows),
            np.bincount(row, np.maximum(low, high), minlength=rows))


def _below_its_max(graph: Graph, node, interval):
    """x - max(x) is at most 0, which interval arithmetic alone cannot see (x and its max move together):
    the stable forms of exp (stable_argmax, softmax-like rescaling) are bounded by exp(0) = 1."""
    x, top = node.inputs if node.op == "sub" else (None, None)
    if x is not None and graph.op(top) == "max" and graph.node(top).inputs[0] == x:
        lo, hi = interval
        return lo, np.minimum(hi, 0.0)
    return interval


@register_pass
class RangeAnalysis(Pass):
    name = "range_analysis"
    description = "profile value ranges on calibration rows and prove static bounds from the input range"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        X = ctx.options.calibration
        lo, hi = ctx.options.input_bounds or (float(np.min(X)), float(np.max(X)))
        outputs: dict[str, np.ndarray] = {}
        prof = profile(graph, X, None if graph.states() else outputs)
        graph.analyses.profile_outputs = (X, tuple(graph.order()), outputs) if outputs else None
        static = static_intervals(graph, lo, hi)
        ranges = graph.analyses.ranges = {}
        for name, (plo, phi, low) in prof.items():
            s = static.get(name)
            ranges[name] = Range(plo, phi, *(None, None) if s is None else (float(np.min(s[0])),
                                                                                   float(np.max(s[1]))), low)
        ctx.log.append(f"range_analysis: {len(prof)} values profiled on {len(X)} rows, "
                       f"{sum(r.static_lo is not None for r in ranges.values())} with static bounds")
        return graph
