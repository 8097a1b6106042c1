"""Scale choice for float networks in the project's fixed point (power-of-two scales; ir/ops/pow2_arith.py).

From calibration rows (``ctx.options.calibration``: rows of the graph's input) the input, each layer's result
and each ADD's result get the largest scale at which their calibrated range fits the width (``network_bits``: 16
at precision int16, 8 at int8), nudged by ``ctx.options.scale_adjust`` (models/network_fixed.py's search); an
ADD's result is no finer than its operands (their rounding shifts stay >= 0). Pools, copies, resizes and the
relus keep their input's type; the smooth activations take their calibrated range (fx16 sigmoid and tanh: steps of
2^-15), a softmax steps of 2^-15 (fx16) or 2^-7 (fx8). A layer's (transpose_conv2d's too) weights get one
power-of-two scale of the same width, and its bias is int32 at the input's scale plus the weights'. Overflow
proof: the layer's int32 accumulator is bounded by its op's ``acc_bound`` (per output channel, sum |w| times the
input's largest |int|, plus |bias|); while that bound passes ACC_LIMIT the weights' scale is lowered, and a layer
whose weights would keep fewer than MIN_WEIGHT_BITS significant bits is refused (NetworkOverflowError) rather than
left to wrap; a pool's or mean's window sum is proven the same way. A layer's result is never finer than its
accumulator (its shift is >= 0), nor more than 31 bits coarser.
"""
from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_batch, row_chunks
from tinycc_ml.ir.ops import OPS, BoundCall, fixed16_activations, fixed_softmax
from tinycc_ml.ir.ops.arith import rshift_bound
from tinycc_ml.ir.ops.network.activations import FIXED16_FUNCTIONS, FIXED16_OWN_SCALE, FUNCTIONS, INT16_REFUSAL
from tinycc_ml.ir.ops.pow2_arith import MAX_SHIFT
from tinycc_ml.ir.types import fixed
from tinycc_ml.passes.choose_scales import ACC_LIMIT, MIN_WEIGHT_BITS, best_scale, quantise_array
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

LAYERS = ("conv2d", "grouped_conv2d", "depthwise_conv2d", "fully_connected", "transpose_conv2d")
KEEP_TYPE = ("reshape", "transpose", "max_pool2d", "average_pool2d", "mean", "pad", "relu", "relu6", "concatenation",
             "strided_slice", "reduce_max", "reduce_min", "resize_nearest", "resize_bilinear")
# broadcast elementwise ops (ir/ops/network/broadcast.py): a constant operand quantised here, the result's scale from
# calibration, never finer than its operands' (MUL: their product's)
ELEMENTWISE = ("tensor_sub", "tensor_mul", "tensor_maximum", "tensor_minimum")
STATE_ROUNDS = 6


class NetworkOverflowError(CompileError):
    """A layer (or a pool) whose int32 sum cannot be proven within ACC_LIMIT at any usable weight scale."""


def network_bits(precision: str) -> int:
    return 8 if precision == "int8" else 16


def calibrated_peaks(graph: Graph, rows: np.ndarray) -> dict[str, float]:
    """The largest |value| of each computed float value over the calibration rows (a graph with state: the rows
    as successive calls, each state carrying its next value to the next row, as the C runs a stream)."""
    peaks: dict[str, float] = {}
    states = graph.states()
    state = {n: np.asarray(graph.node(n).attrs["init"], dtype=np.float64) for n, _ in states}
    parts = [slice(r, r + 1) for r in range(len(rows))] if states else row_chunks(graph, len(rows))
    for part in parts:
        values = evaluate_batch(graph, rows[part], state if states else None)
        state = {n: values[nxt][0] for n, nxt in states}
        for name, value in values.items():
            if graph.type(name).dtype.is_float:
                peaks[name] = max(peaks.get(name, 0.0), float(np.max(np.abs(value))) if value.size else 0.0)
    return peaks


@register_pass
class NetworkScales(Pass):
    name = "network_scales"
    description = "power-of-two fixed-point scales for a float network from calibration rows, with overflow proofs"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        bits = network_bits(ctx.options.precision)
        adjust = ctx.options.scale_adjust  # {value: bits finer than its calibrated range asks} (the scale search)
        rows = np.asarray(ctx.options.calibration, dtype=np.float64)
        (x_name,) = graph.inputs()
        rows = rows.reshape(len(rows), *graph.type(x_name).shape)
        peaks = calibrated_peaks(graph, rows)
        # a state and its next value share one type: the state starts at its next value's calibrated scale, and
        # takes the scale its next value gets until they agree (the next value's scale is capped by its operands',
        # the state's among them, so the scales only fall and settle within a few rounds)
        states = [(n, nxt) for n, nxt in graph.states() if nxt != n]
        state_scales = {n: best_scale(peaks.get(nxt, 0.0) or 1.0, bits) + adjust.get(n, 0) for n, nxt in graph.states()}
        for _round in range(STATE_ROUNDS):
            out = self._scaled(graph, ctx, bits, adjust, peaks, state_scales)
            moved = {n: out.type(nxt).dtype.scale for n, nxt in states
                     if out.type(nxt).dtype.scale != state_scales[n]}
            if not moved:
                return out
            state_scales.update(moved)
        n, nxt = next((n, nxt) for n, nxt in states if n in moved)
        raise CompileError(f"state %{n}: its next value %{nxt} gets scale {out.type(nxt).dtype.scale}, the state "
                           f"{state_scales[n]}: no common fixed-point type within {STATE_ROUNDS} rounds; compile it "
                           "at precision float")

    def _scaled(self, graph: Graph, ctx: PassContext, bits: int, adjust: dict, peaks: dict,
                state_scales: dict) -> Graph:
        """The fixed-point graph with the states at ``state_scales``."""
        out = Graph(graph.name)
        bound: dict[str, int] = {}  # the largest |int| each value can hold
        for name in graph.order():
            node = graph.node(name)
            if node.op == "const":
                continue  # quantised by the layer reading it
            if not node.type.dtype.is_float:  # the prediction (an argmax index)
                if node.type.dtype.kind == "bool":  # a comparison's mask (select reads it): no fixed-point form
                    raise CompileError(f"node %{name}: op {node.op} has no form in the project's fixed point for "
                                       "networks; compile this network at precision float")
                out.add(node.op, list(node.inputs), dict(node.attrs), type=node.type, name=name)
                continue
            ins = list(node.inputs)
            if node.op == "input":
                # rows that are all zero say nothing of the input's range: take +-1, as dense models do
                dtype = fixed(bits, best_scale(peaks[name] or 1.0, bits) + adjust.get(name, 0))
                bound[name] = 2 ** (bits - 1)
            elif node.op in KEEP_TYPE:
                dtype = out.type(ins[0]).dtype
                if node.op == "concatenation":  # the coarser operand's scale: the finer one rounded to it
                    dtype = min((out.type(i).dtype for i in ins), key=lambda d: d.scale)
                bound[name] = max(bound[i] for i in ins)
                if OPS[node.op].acc_bound is not None:  # a pool's or mean's int32 sum of its window
                    total, _ = OPS[node.op].acc_bound(self._bound_call(out, ins, node.attrs, dtype.scale, bits,
                                                                       bound))
                    if total > ACC_LIMIT:
                        raise NetworkOverflowError(
                            f"node %{name} ({node.op}): its int32 sum can reach {total} (over the proven limit "
                            f"2^{ACC_LIMIT.bit_length() - 1}): its window holds too many int{bits} values")
            elif node.op in LAYERS:
                dtype, ins = self._layer(graph, out, node, peaks[name], bits, bound, adjust.get(name, 0))
            elif node.op == "prelu":  # the input's type; the slope at a scale of its own, |slope| > 1 grows a value
                dtype = out.type(ins[0]).dtype
                slope = np.asarray(graph.node(ins[1]).attrs["value"], dtype=np.float64)
                largest = float(np.max(np.abs(slope))) if slope.size else 0.0
                slope_scale = min(best_scale(largest, bits), MAX_SHIFT)
                ins[1] = out.add("const", [], {"value": quantise_array(slope, slope_scale, bits)},
                                 type=graph.type(ins[1]).with_dtype(fixed(bits, slope_scale)), name=f"{ins[1]}_q")
                bound[name] = min(2 ** (bits - 1), math.ceil(max(1.0, largest) * bound[ins[0]]) + 1)
            elif node.op == "leaky_relu":  # the input's type; |alpha| > 1 can grow a value up to the width
                dtype = out.type(ins[0]).dtype
                bound[name] = min(2 ** (bits - 1), math.ceil(max(1.0, abs(float(node.attrs["alpha"]))) *
                                                             bound[ins[0]]) + 1)
            elif node.op in FUNCTIONS:  # a table at int8; at int16 sigmoid and tanh in steps of 2^-15, hard_swish,
                # silu, gelu and elu at a scale of their own (ir/ops/fixed16_activations.py)
                if bits != 8 and node.op not in FIXED16_FUNCTIONS + FIXED16_OWN_SCALE:
                    raise CompileError(f"node %{name}: {node.op} {INT16_REFUSAL}")
                scale = best_scale(peaks[name], bits) + adjust.get(name, 0)
                if bits == 16 and node.op in FIXED16_FUNCTIONS:
                    scale = 15
                elif bits == 16:
                    lo, hi = fixed16_activations.output_scale_range(node.op, node.attrs, out.type(ins[0]).dtype.scale)
                    if lo > hi:
                        raise CompileError(f"node %{name}: an fx16 {node.op} needs an input scale >= 0, its input "
                                           f"has {out.type(ins[0]).dtype.scale}; compile this network at precision "
                                           "float, or int8")
                    scale = min(max(scale, lo), hi)
                dtype = fixed(bits, scale)
                bound[name] = 2 ** (bits - 1)
            elif node.op == "softmax":  # steps of 2^-15 (fx16) or 2^-7 (fx8): ir/ops/fixed_softmax.py
                dtype = fixed(bits, fixed_softmax.output_scale(bits))
                bound[name] = 2 ** (bits - 1)
            elif node.op == "state":  # the scale of its next value (``state_scales``), its init quantised to it
                dtype = fixed(bits, state_scales[name])
                init = np.asarray(node.attrs["init"], dtype=np.float64)
                out.add("state", [], {"init": quantise_array(init, dtype.scale, bits)},
                        type=node.type.with_dtype(dtype), name=name)
                bound[name] = 2 ** (bits - 1)
                continue
            elif node.op in ELEMENTWISE:
                dtype, ins = self._elementwise(graph, out, node, peaks[name], bits, bound, adjust.get(name, 0))
            elif node.op == "reduce_sum":  # an int32 sum rounded to the result's scale, no finer than the input's
                finest = out.type(ins[0]).dtype.scale
                dtype = fixed(bits, max(min(best_scale(peaks[name], bits) + adjust.get(name, 0), finest),
                                        finest - MAX_SHIFT))
                acc, _ = OPS[node.op].acc_bound(self._bound_call(out, ins, node.attrs, dtype.scale, bits, bound))
                if acc > ACC_LIMIT:
                    raise NetworkOverflowError(f"node %{name} (reduce_sum): its int32 sum can reach {acc} (over the "
                                               f"proven limit 2^{ACC_LIMIT.bit_length() - 1})")
                bound[name] = min(2 ** (bits - 1), rshift_bound(acc, finest - dtype.scale) + 1)
            elif node.op == "tensor_add":
                finest = min(out.type(i).dtype.scale for i in ins)
                dtype = fixed(bits, min(best_scale(peaks[name], bits) + adjust.get(name, 0), finest))
                acc, _ = OPS[node.op].acc_bound(self._bound_call(out, ins, node.attrs, dtype.scale, bits, bound))
                bound[name] = min(2 ** (bits - 1), acc)
            else:
                function = f" (function {node.attrs['function']})" if node.op == "float_unary" else ""
                raise CompileError(f"node %{name}: op {node.op}{function} has no form in the project's fixed point "
                                   "for networks; compile this network at precision float, or int8 (TFLite's "
                                   "dialect)")
            out.add(node.op, ins, dict(node.attrs), type=node.type.with_dtype(dtype), name=name)
        out.outputs = list(graph.outputs)
        out.analyses = graph.analyses.copy()
        layers = [n for n in out.order() if out.op(n) in LAYERS]
        ctx.log.append(f"network_scales: fx{bits} activations, {len(layers)} layers' accumulators proven within "
                       f"+-2^{ACC_LIMIT.bit_length() - 1}")
        return out

    @staticmethod
    def _bound_call(out: Graph, ins: list[str], attrs: dict, out_scale: int, bits: int, bound) -> BoundCall:
        return BoundCall([bound.get(i) for i in ins], [out.type(i).dtype.scale for i in ins],
                         [np.asarray(out.node(i).attrs["value"], np.int64) if out.op(i) == "const" else None
                          for i in ins], attrs, out_scale, bits, [out.type(i) for i in ins])

    def _elementwise(self, graph: Graph, out: Graph, node, peak: float, bits: int, bound: dict, adjust: int):
        """A broadcast SUB, MUL, MAXIMUM or MINIMUM: its result's fixed-point type and its operands, a constant
        quantised into ``out`` (MUL: fx<bits> at its own scale; else fx32 at the result's), its int32 bound proven."""
        consts = {i: np.asarray(graph.node(i).attrs["value"], dtype=np.float64) for i in node.inputs
                  if graph.op(i) == "const"}
        # an all-zero constant (a zero initial state unrolled from) is exact at any scale: 0, not the finest one,
        # which would make a product's scale as fine as no layer reading it could hold
        const_scales = {i: best_scale(float(np.max(np.abs(v))), bits) if np.any(v) else 0 for i, v in consts.items()}
        scales = [out.type(i).dtype.scale if i not in consts else const_scales[i] for i in node.inputs]
        if node.op == "tensor_mul":
            finest = sum(scales)
        else:
            finest = min(s for i, s in zip(node.inputs, scales) if i not in consts)
        so = max(min(best_scale(peak, bits) + adjust, finest), finest - MAX_SHIFT)
        ins, magnitudes = [], []
        for i, s in zip(node.inputs, scales):
            if i not in consts:
                ins.append(i)
                magnitudes.append(bound[i] if node.op == "tensor_mul" else rshift_bound(bound[i], s - so))
                continue
            width, s = (bits, s) if node.op == "tensor_mul" else (32, so)
            q = quantise_array(consts[i], s, bits) if width == bits else np.floor(consts[i] * 2.0**s + 0.5)
            if np.max(np.abs(q), initial=0) > ACC_LIMIT:
                raise NetworkOverflowError(f"node %{node.name} ({node.op}): its constant {np.max(np.abs(consts[i])):g} "
                                           f"at 2^{s} passes the proven int32 limit 2^{ACC_LIMIT.bit_length() - 1}")
            ins.append(out.add("const", [], {"value": q if width == bits else q.astype(np.int32)},
                               type=graph.type(i).with_dtype(fixed(width, s)), name=f"{i}_q"))
            magnitudes.append(int(np.max(np.abs(q), initial=0)))
        if node.op == "tensor_mul":
            acc = rshift_bound(magnitudes[0] * magnitudes[1], finest - so)
        elif node.op == "tensor_sub":
            acc = magnitudes[0] + magnitudes[1]
        else:
            acc = max(magnitudes)
        if acc > ACC_LIMIT:
            raise NetworkOverflowError(f"node %{node.name} ({node.op}): its int32 result can reach {acc} (over the "
                                       f"proven limit 2^{ACC_LIMIT.bit_length() - 1})")
        bound[node.name] = min(2 ** (bits - 1), acc + 1)
        return fixed(bits, so), ins

    def _layer(self, graph: Graph, out: Graph, node, peak: float, bits: int, bound: dict, adjust: int = 0):
        """Quantise a layer's weights and bias into ``out`` (as <name>_q), proving its accumulator: its result's
        fixed-point type and its operands."""
        x_name, w_name, b_name = node.inputs
        sx = out.type(x_name).dtype.scale
        w = np.asarray(graph.node(w_name).attrs["value"], dtype=np.float64)
        b = np.asarray(graph.node(b_name).attrs["value"], dtype=np.float64)
        w_peak = float(np.max(np.abs(w))) if w.size else 0.0
        sw = best_scale(w_peak, bits)
        made: list[str] = []  # the previous attempt's constants
        while True:
            for name in made:
                out.remove(name)
            made = []
            wq = quantise_array(w, sw, bits)
            bq = np.floor(b * 2.0 ** (sx + sw) + 0.5)
            if np.max(np.abs(bq), initial=0) <= ACC_LIMIT:
                made = [out.add("const", [], {"value": wq}, type=graph.type(w_name).with_dtype(fixed(bits, sw)),
                                name=f"{w_name}_q"),
                        out.add("const", [], {"value": bq.astype(np.int32)},
                                type=graph.type(b_name).with_dtype(fixed(32, sx + sw)), name=f"{b_name}_q")]
                w_node, b_node = made
                call = self._bound_call(out, [x_name, w_node, b_node], node.attrs, 0, bits, bound)
                acc, acc_scale = OPS[node.op].acc_bound(call)
                if acc <= ACC_LIMIT:
                    break
            else:
                acc = int(np.max(np.abs(bq)))
            if w_peak * 2.0 ** (sw - 1) < 2**MIN_WEIGHT_BITS:
                bias_units = float(np.max(np.abs(bq), initial=0))
                raise NetworkOverflowError(
                    f"node %{node.name} ({node.op}): its int32 accumulator can reach {acc} (over the proven limit "
                    f"2^{ACC_LIMIT.bit_length() - 1}; its bias alone {bias_units:.0f}) with its weights at 2^{sw}, "
                    f"and a coarser weight scale would keep fewer than {MIN_WEIGHT_BITS} significant bits of its "
                    f"largest weight {w_peak:g}; compile it at precision int8 (TFLite's dialect) or float")
            sw -= 1
        so = min(best_scale(peak, bits) + adjust, acc_scale)  # never finer than the accumulator: its shift >= 0
        so = max(so, acc_scale - MAX_SHIFT)
        bound[node.name] = min(2 ** (bits - 1), rshift_bound(acc, acc_scale - so) + 1)
        return fixed(bits, so), [x_name, w_node, b_node]
