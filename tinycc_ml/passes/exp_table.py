"""Replace fixed-point exp by a two-table evaluation (exp_lut).

For an input x (int at scale s_in) clamped to the calibrated interval [lo, hi]:
    t = rshift(x - lo, drop)            (rounding shift: drop low bits that do not matter)
    e^x ~ T_hi[t >> k] * T_lo[t & (2^k - 1)]     with  T_hi[a] = e^(lo + a 2^(k+drop-s_in)),
                                                        T_lo[b] = e^(b 2^(drop-s_in))
both tables int16 at their own scales. The pass tries every (drop, k), measures the maximum
absolute error against numpy's exp over every representable input in [lo, hi], and keeps the
smallest pair of tables within the error bound (2^-10 of the largest output by default, at
least one output LSB; or the least error reachable). The table bytes and the error are reported.

Below ``lo`` (clamped to the point where e^x rounds to zero at the output scale, when the
calibrated minimum is lower) inputs saturate to e^lo; above ``hi`` to e^hi.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.arith import rshift
from tinycc_ml.ir.ops.tables import exp_lut_value
from tinycc_ml.ir.types import TensorType
from tinycc_ml.passes.choose_scales import best_scale
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

TABLE_BITS = 16
DEFAULT_RELATIVE_ERROR = 2.0**-10


def _table(values: np.ndarray) -> tuple[np.ndarray, int]:
    s = best_scale(float(np.max(np.abs(values))), TABLE_BITS)
    s = min(s, 30 - 15)  # products of two int16 entries stay below 2^30
    return np.clip(np.floor(values * 2.0**s + 0.5), -32768, 32767).astype(np.int16), s


def build_exp_lut(lo_q: int, hi_q: int, s_in: int, s_out: int, out_bits: int, max_error: float | None = None,
                  factor: float = 1.0):
    """Choose and build the tables for e^(factor x); returns (attrs, max_abs_error, table_bytes)."""
    attrs, err, size = _exp_lut(int(lo_q), int(hi_q), int(s_in), int(s_out), int(out_bits), max_error, float(factor))
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in attrs.items()}, err, size


@functools.lru_cache(maxsize=256)  # the scale search asks for the same tables in most of its trials
def _exp_lut(lo_q: int, hi_q: int, s_in: int, s_out: int, out_bits: int, max_error: float | None, factor: float):
    xs = np.arange(lo_q, hi_q + 1, dtype=np.int64)
    truth = np.exp(factor * xs * 2.0**-s_in)
    lsb = 2.0**-s_out
    # default bound: 2^-10 of the largest output, but never below one output LSB
    bound = max(lsb, DEFAULT_RELATIVE_ERROR * float(np.max(truth))) if max_error is None else max_error
    span = hi_q - lo_q
    best = None
    for drop in range(0, 17):
        if drop and (span >> (drop - 1)) == 0:
            break
        n_t = int(rshift(np.int64(span), drop)) + 1
        for k in range(0, 12):
            n_hi = (n_t - 1 >> k) + 1
            n_lo = min(1 << k, n_t)
            size = 2 * (n_hi + n_lo)
            if best is not None and size >= best[2] and best[1] <= bound:
                continue
            a = np.arange(n_hi) * 2.0 ** (k + drop - s_in)
            b = np.arange(1 << k) * 2.0 ** (drop - s_in)
            t_hi, s_hi = _table(np.exp(factor * (lo_q * 2.0**-s_in + a)))
            t_lo, s_lo = _table(np.exp(factor * b[:n_lo]))
            attrs = {"lo": lo_q * 2.0**-s_in, "hi": hi_q * 2.0**-s_in, "lo_q": int(lo_q), "hi_q": int(hi_q),
                     "drop_bits": drop, "low_bits": k, "table_hi": t_hi, "table_lo": t_lo,
                     "hi_scale": s_hi, "lo_scale": s_lo}
            if factor != 1.0:
                attrs["factor"] = float(factor)
            got = exp_lut_value(xs, attrs, s_out, out_bits) * lsb
            err = float(np.max(np.abs(got - np.minimum(truth, (2 ** (out_bits - 1) - 1) * lsb))))
            size = 2 * (len(t_hi) + len(t_lo))
            key = (err > bound, size if err <= bound else err, size)
            if best is None or key < best[3]:
                best = (attrs, err, size, key)
    attrs, err, size, _ = best
    return attrs, err, size


@register_pass
class ExpTable(Pass):
    name = "exp_table"
    description = "replace fixed-point exp by two lookup tables sized from an error bound"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        for name in graph.order():
            if graph.op(name) != "exp":  # (the op alone first: most nodes are not)
                continue
            node = graph.node(name)
            if not node.type.dtype.is_fixed:
                continue
            (x,) = node.inputs
            factor = 1.0
            if graph.op(x) == "scale" and len(graph.users(x)) == 1:
                # e^(f v) straight from v: the table absorbs the multiplication (and its rounding)
                factor, x = float(graph.node(x).attrs["factor"]), graph.node(x).inputs[0]
                graph.replace_uses(node.inputs[0], x)
            s_in, s_out, bits = graph.type(x).dtype.scale, node.type.dtype.scale, node.type.dtype.bits
            r = graph.analyses.ranges[x]
            lo, hi = r.lo, r.hi
            # where f v < ln(LSB/2) the output rounds to 0 anyway: no table entries are spent there
            floor = math.log(0.5 * 2.0**-s_out) / factor
            if factor > 0:
                lo = max(lo, floor) if hi > floor else hi
            else:
                hi = min(hi, floor) if lo < floor else lo
            lo_q = max(int(math.floor(lo * 2.0**s_in)), -(2 ** 15))
            hi_q = min(int(math.ceil(hi * 2.0**s_in)), 2**15 - 1)
            lo_q = min(lo_q, hi_q)  # a range wholly above the table (all outputs round to 0) keeps its top
            attrs, err, size = build_exp_lut(lo_q, max(hi_q, lo_q), s_in, s_out, bits,
                                             ctx.options.exp_max_error, factor)
            data = graph.nx.nodes[name]
            data["op"], data["attrs"] = "exp_lut", attrs
            data["type"] = TensorType(node.type.shape, node.type.dtype)
            info = {"node": name, "range": [attrs["lo"], attrs["hi"]], "table_bytes": size,
                    "entries": [len(attrs["table_hi"]), len(attrs["table_lo"])], "max_abs_error": err,
                    "output_lsb": 2.0**-s_out}
            graph.analyses.exp_tables.append(info)
            ctx.log.append(f"exp_table: %{name} over [{attrs['lo']:.4g}, {attrs['hi']:.4g}]: {size} bytes, "
                           f"max abs error {err:.3g} (output LSB {2.0**-s_out:.3g})")
        return graph
