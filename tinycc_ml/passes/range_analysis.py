"""Range analysis: what every value of a float graph spans.

- profile: run the float interpreter on calibration rows and record each value's min and max;
- static: propagate the declared input interval through the ops with interval arithmetic,
  giving bounds that hold for every input in that interval (None where an op has no rule).

Both are stored on the graph as ``graph.ranges`` = {node: Range}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_batch, row_chunks
from tinycc_ml.ir.ops import OPS
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


@dataclass
class Range:
    lo: float  # calibrated minimum over all elements
    hi: float
    static_lo: float | None = None  # proven interval, if known
    static_hi: float | None = None
    # i-th entry: the largest, over calibration rows, of the row's (i+1)-th smallest element; what a
    # value read only through minimum-like ops (argmin, segment_min, kvote) needs to resolve
    low_order: tuple[float, ...] = ()

    @property
    def abs_max(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def static_abs_max(self) -> float | None:
        if self.static_lo is None:
            return None
        return max(abs(self.static_lo), abs(self.static_hi))


LOW_ORDER = 8


def profile(graph: Graph, X: np.ndarray) -> dict[str, tuple[float, float, tuple[float, ...]]]:
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    low: dict[str, np.ndarray] = {}
    for rows in row_chunks(graph, len(X)):
        for name, value in evaluate_batch(graph, np.asarray(X[rows], dtype=np.float64)).items():
            if graph.type(name).dtype.kind != "f32":
                continue
            vmin, vmax = float(np.min(value)), float(np.max(value))
            lo[name] = min(lo.get(name, vmin), vmin)
            hi[name] = max(hi.get(name, vmax), vmax)
            per_row = value.reshape(len(value), -1)
            smallest = np.max(np.sort(per_row, axis=1)[:, :LOW_ORDER], axis=0)
            low[name] = smallest if name not in low else np.maximum(low[name], smallest)
    return {n: (lo[n], hi[n], tuple(float(v) for v in low[n])) for n in lo}


def _interval_matmul(A, lo, hi):
    pos, neg = np.maximum(A, 0), np.minimum(A, 0)
    return pos @ lo + neg @ hi, pos @ hi + neg @ lo


def static_intervals(graph: Graph, input_lo: float, input_hi: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Elementwise proven intervals for every value reachable with known rules."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in graph.order():
        node = graph.node(name)
        op = node.op
        shape = node.type.shape
        if op == "input":
            out[name] = (np.full(shape, input_lo), np.full(shape, input_hi))
            continue
        if op in ("const", "sparse_const"):
            v = OPS[op].evaluate([], node.attrs)
            out[name] = (v, v)
            continue
        if any(i not in out for i in node.inputs):
            continue
        ivs = [out[i] for i in node.inputs]
        if op == "matvec":
            A = ivs[0][0]
            out[name] = _interval_matmul(A, *ivs[1])
        elif op == "matvec_at":
            stack = ivs[0][0]
            los, his = zip(*(_interval_matmul(stack[j], *ivs[2]) for j in range(stack.shape[0])))
            out[name] = (np.min(los, axis=0), np.max(his, axis=0))
        elif op == "sqdist":
            (xl, xh), (M, _) = ivs
            dl, dh = M - xh[:, None], M - xl[:, None]
            sq_hi = np.maximum(dl**2, dh**2)
            sq_lo = np.where((dl <= 0) & (dh >= 0), 0.0, np.minimum(dl**2, dh**2))
            out[name] = (sq_lo.sum(axis=0), sq_hi.sum(axis=0))
        elif op == "scale":
            f = node.attrs["factor"]
            lo, hi = ivs[0][0] * f, ivs[0][1] * f
            out[name] = (np.minimum(lo, hi), np.maximum(lo, hi))
        elif op in ("add", "sub"):
            (al, ah), (bl, bh) = ivs
            out[name] = (al + bl, ah + bh) if op == "add" else (al - bh, ah - bl)
        elif op == "mul":
            (al, ah), (bl, bh) = ivs
            cands = np.stack(np.broadcast_arrays(al * bl, al * bh, ah * bl, ah * bh))
            out[name] = (cands.min(axis=0), cands.max(axis=0))
        elif op in ("exp", "exp_lut"):
            out[name] = (np.exp(ivs[0][0]), np.exp(ivs[0][1]))
        elif op in ("tanh", "tanh_clamp", "tanh_lut"):
            f = np.tanh if op == "tanh" else (lambda v: np.clip(v, -1, 1))
            out[name] = (f(ivs[0][0]), f(ivs[0][1]))
        elif op == "clip":
            lo, hi = node.attrs["lo"], node.attrs["hi"]
            out[name] = (np.clip(ivs[0][0], lo, hi), np.clip(ivs[0][1], lo, hi))
        elif op == "sign":
            out[name] = (np.sign(ivs[0][0]), np.sign(ivs[0][1]))
        elif op == "segment_min":
            offs = node.attrs["offsets"]
            out[name] = tuple(np.array([v[lo:hi].min() for lo, hi in zip(offs, offs[1:])]) for v in ivs[0])
        elif op == "kvote":
            out[name] = (np.zeros(shape), np.full(shape, float(node.attrs["k"])))
        elif op == "sum":
            out[name] = (np.sum(ivs[0][0]), np.sum(ivs[0][1]))
        elif op == "select":
            (_, _), (al, ah), (bl, bh) = ivs
            out[name] = (np.minimum(al, bl), np.maximum(ah, bh))
    return out


@register_pass
class RangeAnalysis(Pass):
    name = "range_analysis"
    description = "profile value ranges on calibration rows and prove static bounds from the input range"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        X = ctx.options["calibration"]
        lo, hi = ctx.options.get("input_range", (float(np.min(X)), float(np.max(X))))
        prof = profile(graph, X)
        static = static_intervals(graph, lo, hi)
        graph.ranges = {}
        for name, (plo, phi, low) in prof.items():
            s = static.get(name)
            graph.ranges[name] = Range(plo, phi, *(None, None) if s is None else (float(np.min(s[0])),
                                                                                   float(np.max(s[1]))), low)
        ctx.log.append(f"range_analysis: {len(prof)} values profiled on {len(X)} rows, "
                       f"{sum(r.static_lo is not None for r in graph.ranges.values())} with static bounds")
        return graph
