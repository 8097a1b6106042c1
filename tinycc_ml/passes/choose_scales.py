"""Scale selection: turn a float graph with ranges (see range_analysis) into a fixed-point graph.

Activations are 16-bit. Each gets the largest scale at which its range fits:
- the proven static range when that costs at most one bit against the calibrated range (the
  value then provably never saturates for inputs in the declared range),
- else the calibrated range (the value may saturate - never wrap - on inputs unlike the
  calibration rows; regression graphs keep one bit of headroom above it, as no argmax absorbs a
  saturated value); ``ctx.options.scale_adjust`` {node: bits} nudges individual choices
  (the search in fixed_pipeline uses it).
Weights (matrices of matvec) are 16-bit, or 8-bit at precision int8; their scale is the
largest that fits, lowered where needed so that the 32-bit accumulator provably never
overflows; only if that would leave fewer than MIN_WEIGHT_BITS significant bits do the
products get shifted right instead. Prototypes of sqdist share the point's scale (at int8, with 8
significant bits when the target asks for it: TargetAttributes.prototype_bits). A per-class nearest
distance and its negation keep the distances' scale (their values are the distances' own).
Every int32 intermediate is proven to stay within +-2^30 by a max-abs analysis on the integers.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tinycc_ml.ir.fixed import const_ints, significant_bits
from tinycc_ml.ir.graph import Graph, Node
from tinycc_ml.ir.ops import OPS, BoundCall, dense_to_sparse_attrs
from tinycc_ml.ir.ops.arith import rshift_bound
from tinycc_ml.ir.types import TensorType, fixed
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

ACT_BITS = 16
ACC_LIMIT = 2**30  # headroom below 2^31 so the rounding constant of a shift cannot overflow
MIN_WEIGHT_BITS = 6
SCALE_RANGE = (-24, 30)
MIN_LIKE = ("segment_min", "kvote")
CONSTANT_OPS = ("const", "sparse_const")
MIN_LIKE_HEADROOM = 4.0
MEMO_BYTES = 1 << 26  # ScaleMemo: the constants its kept steps hold, at most
REGRESSION_HEADROOM = 2.0  # one bit above a regression value's calibrated range
# TFLite's data-movement ops (a front end's framing, reshapes, per-axis minimum and maximum): the operand's integers
# as they are, at its scale
KEEP_SCALE = ("reshape", "transpose", "take", "reduce_max", "reduce_min")
# TFLite's ops with the project's power-of-two semantics (ir/ops/pow2_arith.py, network/broadcast.py) that front ends
# use: their rounding shifts are right shifts, so the result is no finer than its operands (MUL: their product;
# FULLY_CONNECTED: its accumulator)
NO_FINER = ("tensor_sub", "concatenation", "reduce_sum")


def best_scale(abs_max: float, bits: int) -> int:
    """Largest s with abs_max * 2^s <= 2^(bits-1) - 1."""
    top = 2 ** (bits - 1) - 1
    if abs_max <= 0 or not math.isfinite(abs_max):
        return SCALE_RANGE[1] if abs_max == 0 else SCALE_RANGE[0]
    s = math.floor(math.log2(top / abs_max))
    while abs_max * 2.0**s > top:
        s -= 1
    return int(min(max(s, SCALE_RANGE[0]), SCALE_RANGE[1]))


def quantise_array(values: np.ndarray, scale: int, bits: int) -> np.ndarray:
    top = 2 ** (bits - 1) - 1
    q = np.clip(np.floor(values * 2.0**scale + 0.5), -top - 1, top)
    return q.astype({8: np.int8, 16: np.int16, 32: np.int32}[bits])


class ScaleMemo:
    """The steps of choose_scales that the scale search's trials share (fixed_pipeline.search_scales makes one per
    search: one source graph, one set of options). A node's step reads only the source graph and its ranges, the
    node's own adjustments (``name``, ``name.weights``), its operands' scale, bound and safety, and which names
    the build holds so far (fresh_name's choices): a trial whose step of a node has the key of an earlier trial's
    step adds the nodes that step added, with their types, instead of choosing again. A trial changes one value's
    adjustment, so the nodes before it, and those after it that the change does not reach, are replayed; the
    build is the one choosing again would give (same nodes, names, types, attributes, in the same order)."""

    def __init__(self, graph: Graph, limit_bytes: int = MEMO_BYTES):
        self.graph = graph
        self.options = None  # (weight bits, prototype bits, byte shift bits) of the builds it holds
        self.steps: dict[tuple, tuple] = {}
        self.prefixes: dict[tuple, int] = {}  # (prefix before a step, the names it added) -> prefix after it
        self.limit_bytes, self.kept_bytes = limit_bytes, 0
        self.pure: dict[tuple, object] = {}  # what a step reads of the source graph alone (ChooseScales._pure)

    def holds(self, graph: Graph, options: tuple) -> bool:
        """Whether this memo is the one for building ``graph`` with these options (the first build sets them)."""
        if self.options is None:
            self.options = options
        return graph is self.graph and options == self.options

    def weights_at_cap(self, build: Graph, name: str, adjust: dict[str, int]) -> bool:
        """Whether the mat-vec ``name``'s weights in ``build`` (chosen with ``adjust``, through this memo) sit below
        the scale the adjustment asks: the accumulator's bound lowered them (ChooseScales._matvec), and it lowers any
        finer request to that same scale, so a build with a larger ``name.weights`` adjustment and the same others is
        ``build`` again (the same step, the same steps after it)."""
        source = self.graph
        if name not in source or source.op(name) != "matvec" or name not in build or build.op(name) != "matvec":
            return False
        matrix = self.pure.get(("matrix", source.node(name).inputs[0]))
        if matrix is None or self.options is None:
            return False
        asked = best_scale(matrix[1], self.options[0]) + int(adjust.get(f"{name}.weights", 0))
        return build.type(build.node(name).inputs[0]).dtype.scale < asked

    def replay(self, key: tuple, out: Graph, scale: dict, bound: dict, safety: dict) -> int | None:
        """The nodes and figures an earlier step with ``key`` added, added again; the prefix after them (None:
        no such step kept, or a name it added is taken)."""
        step = self.steps.get(key)
        if step is None or any(node.name in out for node in step[0]):
            return None
        nodes, (scales, bounds, safeties), after = step
        for node in nodes:
            out.add_as(node)
        scale.update(scales)
        bound.update(bounds)
        safety.update(safeties)
        return after

    def record(self, key: tuple, out: Graph, before: int, scale: dict, bound: dict, safety: dict) -> int:
        """Keep what the step with ``key`` added to ``out`` (which held ``before`` nodes); the prefix after it."""
        added = out.added_since(before)
        after = self.prefixes.setdefault((key[0], tuple(added)), len(self.prefixes) + 1)
        nodes = tuple(out.node(name) for name in added)
        size = sum(v.nbytes for node in nodes for v in node.attrs.values() if isinstance(v, np.ndarray))
        if self.kept_bytes + size > self.limit_bytes:
            return after  # a wide graph's constants (kNN's prototypes): not kept past the limit
        self.kept_bytes += size
        self.steps[key] = (tuple(Node(n.name, n.op, n.inputs, dict(n.attrs), n.type) for n in nodes),
                           tuple({name: d[name] for name in added if name in d} for d in (scale, bound, safety)),
                           after)
        return after


@register_pass
class ChooseScales(Pass):
    name = "choose_scales"
    description = "assign fixed-point types and quantise constants from calibrated and proven ranges"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        self.weight_bits = 8 if ctx.options.precision == "int8" else 16
        self.prototype_bits = ctx.options.target.prototype_bits
        self.byte_shift_bits = ctx.options.target.byte_shift_bits
        adjust = self.adjust = ctx.options.scale_adjust
        ranges = graph.analyses.ranges
        out = Graph(graph.name)
        scale: dict[str, int] = {}
        bound: dict[str, int] = {}  # max |int| each value can hold
        safety: dict[str, str] = {}
        memo = ctx.options.scale_memo
        if memo is not None and not memo.holds(graph, (self.weight_bits, self.prototype_bits, self.byte_shift_bits)):
            memo = None
        self.pure = memo.pure if memo is not None else {}
        prefix = 0  # the names ``out`` holds so far (ScaleMemo.prefix): fresh_name's choices follow from them
        for name in graph.order():
            node = graph.node(name)
            if node.op in CONSTANT_OPS:
                continue  # quantised where used, at the scale the use needs
            if memo is None:
                self._step(graph, out, node, ranges, scale, bound, safety)
                continue
            key = (prefix, name, int(adjust.get(name, 0)), int(adjust.get(f"{name}.weights", 0)),
                   tuple((scale.get(i), bound.get(i), safety.get(i)) for i in node.inputs))
            prefix = memo.replay(key, out, scale, bound, safety)
            if prefix is None:
                before = len(out)
                self._step(graph, out, node, ranges, scale, bound, safety)
                prefix = memo.record(key, out, before, scale, bound, safety)
        out.outputs = list(graph.outputs)
        out.analyses = graph.analyses.copy()
        out.analyses.safety = safety
        ctx.log.append(f"choose_scales: {sum(v == 'proven' for v in safety.values())} values proven safe, "
                       f"{sum(v == 'calibration' for v in safety.values())} rely on calibration")
        return out

    def _step(self, graph: Graph, out: Graph, node, ranges, scale: dict, bound: dict, safety: dict) -> None:
        """Node ``node`` of ``graph`` into ``out``: its type and scale, its constant operands quantised for it;
        its (and their) scale, bound and safety into the dicts."""
        name, weight_bits, adjust = node.name, self.weight_bits, self.adjust
        ins = list(node.inputs)
        attrs = dict(node.attrs)
        if node.type.dtype.kind in ("idx", "bool"):
            for i in ins:
                self._materialise(graph, out, i, scale, bound, ins, None)
            out.add(node.op, ins, attrs, type=node.type, name=name)
            bound[name] = 2**31 - 1
            return
        s, proven = self._pure(("activation", name), lambda: self._activation_scale(graph, name, ranges))
        if self._within_operand(graph, node) and ins[0] in scale:
            # its integer range lies within its operand's, so the operand's scale holds it exactly:
            # a coarser one would only round together distances the operand kept apart
            s = max(s, scale[ins[0]])
        s += int(adjust.get(name, 0))
        cap = self._pure(("cap", name), lambda: self._distance_cap(graph, name, ranges))
        if cap is not None:
            s = min(s, cap)
        if node.op == "input":
            out.add("input", [], attrs, type=TensorType(node.type.shape, fixed(ACT_BITS, s)), name=name)
            scale[name], bound[name], safety[name] = s, 2 ** (ACT_BITS - 1), "input"
            return
        if node.op == "clip" and graph.op(ins[0]) == "input":
            s = scale[ins[0]]  # the input clamp keeps the input's scale
        if node.op in KEEP_SCALE:
            out.add(node.op, ins, attrs, type=node.type.with_dtype(fixed(ACT_BITS, scale[ins[0]])), name=name)
            scale[name], bound[name], safety[name] = scale[ins[0]], bound[ins[0]], safety.get(ins[0], "proven")
            return
        self._quantise_operands(graph, out, node, ins, attrs, scale, bound, weight_bits, s)
        s = self._no_finer(node.op, ins, scale, s)
        call = BoundCall([bound.get(i) for i in ins], [scale.get(i, 0) for i in ins],
                         [const_ints(out, i) if out.op(i) in CONSTANT_OPS else None for i in ins],
                         attrs, s, ACT_BITS, [graph.type(i) for i in node.inputs])
        if OPS[node.op].acc_bound is None:
            raise OverflowError(f"%{name}: op {node.op} has no overflow proof in the project's fixed point")
        acc, acc_scale = OPS[node.op].acc_bound(call)
        if s > acc_scale and acc > 0 and acc << (s - acc_scale) > ACC_LIMIT:
            # a finer output than the accumulator is a left shift in int32 C: keep it within
            # ACC_LIMIT (the value saturates to 16 bits after it either way)
            s = acc_scale + max(0, math.floor(math.log2(ACC_LIMIT / acc)))
            call = replace(call, out_scale=s)
            acc, acc_scale = OPS[node.op].acc_bound(call)
        dtype = fixed(ACT_BITS, s)
        bound[name] = min(2 ** (ACT_BITS - 1), rshift_bound(int(acc), acc_scale - s) + 1)
        scale[name] = s
        narrow = self._point_bound(ranges, name, s) if cap is not None and node.op != "clip" else None
        if narrow is not None and narrow < bound[name]:
            # saturate the point at its calibrated range, so its distances need no shift (see _distance_cap)
            wide = out.add(node.op, ins, attrs, type=TensorType(node.type.shape, dtype), name=f"{name}_wide")
            limit = narrow * 2.0**-s
            out.add("clip", [wide], {"lo": -limit, "hi": limit}, type=TensorType(node.type.shape, dtype),
                    name=name)
            bound[name] = narrow
        else:
            out.add(node.op, ins, attrs, type=node.type.with_dtype(dtype), name=name)
        r = ranges.get(name)
        static = r.static_abs_max if r is not None else None
        fits = static is not None and static * 2.0**s <= 2 ** (ACT_BITS - 1) - 1
        safety[name] = "proven" if (proven or fits) else "calibration"

    @staticmethod
    def _no_finer(op: str, ins: list[str], scale: dict, s: int) -> int:
        if op in NO_FINER:
            return min([s] + [scale[i] for i in ins])
        if op == "tensor_mul":
            return min(s, scale[ins[0]] + scale[ins[1]])
        if op == "fully_connected":
            return min(s, scale[ins[0]] + scale[ins[1]])
        return s

    def _quantise_operands(self, graph, out, node, ins, attrs, scale, bound, weight_bits, s) -> None:
        """Quantise the constant operands for this use, as the op's kind of constant operand says."""
        kind = OPS[node.op].constant_operand
        if node.op == "fully_connected":
            self._fully_connected(graph, out, node, ins, scale, bound)
        elif node.op == "tensor_mul":  # a window: each constant at its own finest scale (the product is rounded)
            for operand in list(ins):
                self._materialise(graph, out, operand, scale, bound, ins, None)
        elif kind == "weights":
            self._matvec(graph, out, node, ins, scale, bound, weight_bits, attrs)
        elif kind == "prototypes":
            self._sqdist(graph, out, node, ins, scale, bound, attrs)
        elif kind == "weighted_targets":
            self._wsqdist(graph, out, node, ins, scale, bound, ACT_BITS, attrs, s)
        elif kind == "factor":
            f = float(attrs["factor"])
            fs = best_scale(abs(f), ACT_BITS)
            attrs["factor_q"], attrs["factor_scale"] = int(quantise_array(np.array(f), fs, ACT_BITS)), fs
        else:
            for i, operand in enumerate(list(ins)):
                other = ins[1 - i] if len(ins) == 2 else None
                like = scale.get(other) if other is not None and other in scale else s
                self._materialise(graph, out, operand, scale, bound, ins, like)

    # ---- activations
    @staticmethod
    def _within_operand(graph: Graph, node) -> bool:
        """A per-class nearest distance, or its negation: every output is (minus) one of the operand's values."""
        return node.op == "segment_min" or (node.op == "scale" and abs(float(node.attrs["factor"])) == 1.0
                                            and graph.op(node.inputs[0]) == "segment_min")

    @staticmethod
    def _sqdist_uses(graph: Graph, name: str):
        """(k, max |prototype|) of each sqdist taking ``name`` (or the input's clamp) as its point."""
        points = [name] + [u for u in graph.users(name) if graph.op(name) == "input" and graph.op(u) == "clip"]
        for point in points:
            for user in graph.users(point):
                u = graph.node(user)
                if u.op == "sqdist" and u.inputs[0] == point and graph.op(u.inputs[1]) == "const":
                    M = graph.node(u.inputs[1]).attrs["value"]
                    yield M.shape[0], float(np.max(np.abs(M)))

    def _distance_cap(self, graph: Graph, name: str, ranges) -> int | None:
        """The finest scale at which the distances from this point to its prototypes fit the int32
        accumulator without shifting the differences: k * (|M| + |p|)^2 * 4^s <= 2^30. A finer
        scale would only be shifted away again inside sqdist, which costs time on every term."""
        caps = [math.floor(math.log2((2**15 - 2) / (math.sqrt(k) * (m_max + ranges[name].abs_max))))
                for k, m_max in self._sqdist_uses(graph, name) if m_max + ranges[name].abs_max > 0]
        return min(caps) if caps else None

    @staticmethod
    def _point_bound(ranges, name: str, s: int) -> int | None:
        r = ranges.get(name)
        return None if r is None else min(int(math.ceil(r.abs_max * 2.0**s)) + 1, 2 ** (ACT_BITS - 1))

    @staticmethod
    def _activation_scale(graph: Graph, name: str, ranges) -> tuple[int, bool]:
        r = ranges[name]
        need = r.abs_max
        # read only through minimum-like ops: resolve the small values, let the far ones saturate
        users = [graph.node(u) for u in graph.users(name)]
        if users and r.low_order and all(u.op in MIN_LIKE for u in users):
            k = max(int(u.attrs.get("k", 1)) for u in users)
            low = r.low_order
            # the 2k-th smallest too: calibration rows that are reference points (kNN over its own
            # training set) have a k-th smallest of zero
            need = max(MIN_LIKE_HEADROOM * low[min(k, len(low)) - 1], low[min(2 * k, len(low)) - 1], 1e-30)
            return best_scale(need, ACT_BITS), False
        # read only through clips that bind: saturating at the clips' widest bound is the clip itself, so
        # resolve that range only (the values beyond it all clip alike)
        if users and name not in [n for _, n in graph.outputs] and all(u.op == "clip" for u in users):
            widest = max(float(np.max(np.abs(np.concatenate([np.ravel(u.attrs["lo"]), np.ravel(u.attrs["hi"])]))))
                         for u in users)
            if widest < need:
                return best_scale(widest, ACT_BITS), False
        # a point whose distances to constant prototypes are taken shares their scale (the input
        # shares the scale of its clamp, so look through that)
        for _, m_max in ChooseScales._sqdist_uses(graph, name):
            need = max(need, m_max)
        if graph.analyses.task_kind == "regression":
            need *= REGRESSION_HEADROOM  # no argmax absorbs a saturated value: room beyond the calibration rows
        s_cal = best_scale(need, ACT_BITS)
        static = r.static_abs_max
        if static is not None:
            s_static = best_scale(max(static, need), ACT_BITS)
            if s_static >= s_cal - 1:
                return s_static, True
        return s_cal, False

    def _pure(self, key: tuple, compute):
        """``compute()``, which reads only the source graph and its ranges: kept for the search's later trials."""
        if key not in self.pure:
            self.pure[key] = compute()
        return self.pure[key]

    @staticmethod
    def _constant(node) -> tuple[np.ndarray, int]:
        """A constant's values and the finest 16-bit scale that holds them."""
        values = OPS[node.op].evaluate([], node.attrs)
        return values, best_scale(float(np.max(np.abs(values))) if values.size else 0.0, ACT_BITS)

    @staticmethod
    def _matrix(a) -> tuple[np.ndarray, float, float]:
        """A matrix constant's values, largest |entry| and largest row L1 norm."""
        A = OPS[a.op].evaluate([], a.attrs)
        return A, float(np.max(np.abs(A))), float(np.max(np.sum(np.abs(A), axis=-1)))

    # ---- constants
    def _add_const(self, out: Graph, name: str, values: np.ndarray, s: int, bits: int, sparse_like=None,
                   raw: bool = False) -> str:
        """``values`` quantised at scale ``s`` as the constant ``{name}_q`` (``raw``: ``values`` are the source
        constant ``name``'s own, so the integers are kept for the search's later trials)."""
        q = self._pure(("quantised", name, s, bits), lambda: quantise_array(values, s, bits)) if raw else \
            quantise_array(values, s, bits)
        cname = out.fresh_name(f"{name}_q")
        if sparse_like is not None:
            attrs = dense_to_sparse_attrs(q)
            # keep the float pattern so the code shape does not depend on rounding
            mask = OPS["sparse_const"].evaluate([], {**sparse_like, "values": np.ones(len(sparse_like["values"]))})
            attrs["row_indices"], attrs["col_ptr"] = sparse_like["row_indices"], sparse_like["col_ptr"]
            attrs["values"] = q.T[mask.T != 0]
            out.add("sparse_const", [], attrs, type=TensorType(values.shape, fixed(bits, s)), name=cname)
        else:
            out.add("const", [], {"value": q}, type=TensorType(values.shape, fixed(bits, s)), name=cname)
        return cname

    def _materialise(self, graph, out, operand, scale, bound, ins, like_scale):
        """Quantise a constant operand (at ``like_scale`` if it fits 16 bits) and rename it in ``ins``."""
        node = graph.node(operand)
        if node.op not in ("const", "sparse_const"):
            return
        if node.type.dtype.kind == "idx":
            if operand not in out:
                out.add("const", [], dict(node.attrs), type=node.type, name=operand)
            return
        values, s = self._pure(("constant", operand), lambda: self._constant(node))
        if like_scale is not None:
            s = min(s, like_scale)
        cname = self._add_const(out, operand, values, s, ACT_BITS, raw=True)
        scale[cname] = s
        bound[cname] = self._pure(("bound", operand, s), lambda: int(np.max(np.abs(const_ints(out, cname))))
                                  if values.size else 0)
        for i, v in enumerate(ins):
            if v == operand:
                ins[i] = cname

    def _matvec(self, graph, out, node, ins, scale, bound, weight_bits, attrs):
        a_name, x_name = node.inputs[0], node.inputs[-1]
        for selector in node.inputs[1:-1]:  # matvec_at's node index
            self._materialise(graph, out, selector, scale, bound, ins, None)
        a = graph.node(a_name)
        A, a_max, row_l1 = self._pure(("matrix", a_name), lambda: self._matrix(a))
        bx = bound[x_name]
        # a positive adjustment saturates the largest weights to resolve the rest (outliers)
        sa = best_scale(a_max, weight_bits) + int(self.adjust.get(f"{node.name}.weights", 0))
        # a bias (matvec_at's) joins the accumulator at its scale: 2^sx times the weights' units
        bias = np.asarray(attrs["bias"], dtype=np.float64) if "bias" in attrs else np.zeros(1)
        bias_units = float(np.max(np.abs(bias))) * 2.0 ** scale[x_name]  # times 2^(sa - h) at the accumulator
        h = 0
        # lower the weight scale until the accumulator provably fits ...
        while (row_l1 * bx + bias_units) * 2.0**sa > ACC_LIMIT \
                and a_max * 2.0 ** (sa - 1) >= 2**MIN_WEIGHT_BITS:
            sa -= 1
        # ... and past MIN_WEIGHT_BITS, shift the products instead
        while ((row_l1 * 2.0**sa + A.shape[-1]) * bx + bias_units * 2.0**sa) / 2.0**h > ACC_LIMIT:
            h += 1
        sparse = a.attrs if a.op == "sparse_const" else None
        cname = self._add_const(out, a_name, A, sa, weight_bits, sparse, raw=True)
        if h:
            attrs["shift"] = h
        if "bias" in attrs:
            attrs["bias_q"] = np.round(bias * 2.0 ** (sa + scale[x_name] - h)).astype(np.int32)
        ins[0] = cname
        scale[cname] = sa

    def _fully_connected(self, graph, out, node, ins, scale, bound):
        """A front end's per-frame matrix (mel filter bank, DCT) as TFLite's layer in the project's fixed point: 16-bit
        weights at the finest scale whose accumulator provably fits (ACC_LIMIT; no finer than MIN_WEIGHT_BITS allows),
        the bias int32 at the accumulator's scale."""
        x_name, w_name, b_name = node.inputs
        W = OPS[graph.op(w_name)].evaluate([], graph.node(w_name).attrs)
        bias = OPS[graph.op(b_name)].evaluate([], graph.node(b_name).attrs)
        bx, sx = bound[x_name], scale[x_name]
        sw = best_scale(float(np.max(np.abs(W))), ACT_BITS)
        row_l1 = float(np.max(np.sum(np.abs(W), axis=1)))
        while (row_l1 * bx + float(np.max(np.abs(bias))) * 2.0**sx) * 2.0**sw > ACC_LIMIT \
                and float(np.max(np.abs(W))) * 2.0 ** (sw - 1) >= 2**MIN_WEIGHT_BITS:
            sw -= 1
        w_q = quantise_array(W, sw, ACT_BITS)
        cw = out.fresh_name(f"{w_name}_q")
        out.add("const", [], {"value": w_q}, type=graph.type(w_name).with_dtype(fixed(ACT_BITS, sw)), name=cw)
        cb = out.fresh_name(f"{b_name}_q")
        b_q = np.round(bias * 2.0 ** (sx + sw)).astype(np.int32)
        out.add("const", [], {"value": b_q}, type=graph.type(b_name).with_dtype(fixed(32, sx + sw)), name=cb)
        ins[1], ins[2] = cw, cb
        scale[cw], scale[cb] = sw, sx + sw

    def _wsqdist(self, graph, out, node, ins, scale, bound, weight_bits, attrs, s_out):
        """Weights at the finest 16-bit scale that fits, at every precision (GaussianNB's 1 / sigma: 8 bits lose
        the small ones, and the kernels' cost is the same). The terms (w x - t, saturated to 16 bits) at the
        finest scale s_T at which the targets fit and 2 s_T - s_out <= 14: a saturated term's square alone then
        saturates the result (rshift(32767^2, 14) > 32767), so saturation never changes it."""
        x_name, w_name, t_name = node.inputs
        sx = scale[x_name]
        W = OPS[graph.op(w_name)].evaluate([], graph.node(w_name).attrs)
        T = OPS[graph.op(t_name)].evaluate([], graph.node(t_name).attrs)
        sw = best_scale(float(np.max(np.abs(W))), weight_bits)
        st = min(sw + sx, best_scale(float(np.max(np.abs(T))), ACT_BITS), (14 + s_out) // 2)
        for coarser in range(self.byte_shift_bits + 1):  # a target's cheap shifts (TargetAttributes)
            if (sw + sx - st + coarser) % 8 in (0, 7):
                st -= coarser
                break
        ins[1] = self._add_const(out, w_name, W, sw, weight_bits)
        ins[2] = self._add_const(out, t_name, T, st, ACT_BITS)
        scale[ins[1]], scale[ins[2]] = sw, st

    def _sqdist(self, graph, out, node, ins, scale, bound, attrs):
        x_name, m_name = node.inputs
        sx = scale[x_name]
        M = OPS[graph.op(m_name)].evaluate([], graph.node(m_name).attrs)
        bits = self.prototype_bits
        if self.weight_bits == 8 and bits:  # the target's significant bits, exact in float (8-bit kernels store M8)
            M = significant_bits(quantise_array(M, sx, ACT_BITS), bits) * 2.0**-sx
        cname = self._add_const(out, m_name, M, sx, ACT_BITS)
        Mq = const_ints(out, cname)
        k = M.shape[0]
        d = int(np.max(np.abs(Mq))) + bound[x_name]
        h = 0
        while k * (rshift_bound(d, h) ** 2) > ACC_LIMIT:
            h += 1
        if h:
            attrs["shift"] = h
        ins[:] = [x_name, cname]
        scale[cname] = sx
