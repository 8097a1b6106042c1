"""Replace fixed-point tanh by Bonsai's clamp (x for |x| < 1, else sign x; no bytes) or by an
odd-symmetric table over [0, TANH_RANGE] read with linear interpolation (tanh_lut), whichever the option asks:
``tanh="clamp"``, ``"table"`` or ``"auto"`` (the default: the table, sized to the smallest one
within the error bound, unless the clamp is already as accurate over the calibrated range).
The maximum absolute error of the chosen form over every representable input in the calibrated
range is measured exactly and reported, beside that of the other form.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, FixedCall
from tinycc_ml.ir.ops.tables import tanh_lut_result
from tinycc_ml.ir.types import TensorType, fixed
from tinycc_ml.passes.choose_scales import best_scale
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

TANH_RANGE = 4.0  # tanh(4) = 0.99933: beyond it the table's last entry is within 7e-4
DEFAULT_ERROR = 2.0**-9


def evaluate_tanh_clamp(x, s_in, s_out, bits=16):
    """What the interpreter computes for tanh_clamp (the registry's integer semantics)."""
    call = FixedCall([np.asarray(x, dtype=np.int64)], [TensorType((1,), fixed(bits, s_in))],
                     TensorType((1,), fixed(bits, s_out)), {}, "tanh_clamp")
    return OPS["tanh_clamp"].fixed(call)


def build_tanh_lut(s_in: int, s_out: int, xs: np.ndarray, max_error: float = DEFAULT_ERROR):
    """The smallest interpolated table within ``max_error`` over ``xs`` (or the most accurate one)."""
    in_max_q = min(int(math.ceil(TANH_RANGE * 2.0**s_in)), 2**15 - 1)
    truth = np.tanh(xs * 2.0**-s_in)
    table_scale = min(best_scale(1.0, 16), 15)
    best = None
    for drop in range(min(15, max(in_max_q.bit_length() - 2, 0)), -1, -1):  # coarse to fine
        n = (in_max_q >> drop) + 2  # one guard entry for the interpolation at the top
        table = np.floor(np.tanh(np.arange(n) * 2.0 ** (drop - s_in)) * 2.0**table_scale + 0.5)
        attrs = {"drop_bits": drop, "in_max_q": in_max_q, "table": np.clip(table, -32768, 32767).astype(np.int16),
                 "table_scale": table_scale}
        err = float(np.max(np.abs(tanh_lut_result(xs, attrs, s_out, 16) * 2.0**-s_out - truth)))
        if best is None or err < best[1]:
            best = (attrs, err, 2 * n)
        if err <= max_error:
            return attrs, err, 2 * n
    return best


def _tanh_forms(s_in: int, s_out: int, lo_q: int, hi_q: int, max_error: float):
    """(table attrs, table error, table bytes, clamp error) over the inputs lo_q..hi_q."""
    attrs, table_err, size, clamp_err = _tanh_forms_cached(s_in, s_out, lo_q, hi_q, max_error)
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in attrs.items()}, table_err, size, clamp_err


@functools.lru_cache(maxsize=256)  # the scale search asks for the same forms in most of its trials
def _tanh_forms_cached(s_in: int, s_out: int, lo_q: int, hi_q: int, max_error: float):
    xs = np.arange(lo_q, hi_q + 1, dtype=np.int64)
    truth = np.tanh(xs * 2.0**-s_in)
    clamp_err = float(np.max(np.abs(evaluate_tanh_clamp(xs, s_in, s_out) * 2.0**-s_out - truth)))
    attrs, table_err, size = build_tanh_lut(s_in, s_out, xs, max_error)
    return attrs, table_err, size, clamp_err


@register_pass
class TanhApprox(Pass):
    name = "tanh_approx"
    description = "replace fixed-point tanh by the clamp approximation or a table"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        mode = ctx.options.tanh
        for name in graph.order():
            if graph.op(name) != "tanh":  # (the op alone first: most nodes are not)
                continue
            node = graph.node(name)
            if not node.type.dtype.is_fixed:
                continue
            (x,) = node.inputs
            s_in, s_out = graph.type(x).dtype.scale, node.type.dtype.scale
            r = graph.analyses.ranges[x]
            # clipped at both ends: a range wholly outside int16 (a too-fine scale under trial)
            # still leaves the saturated value to approximate
            lo_q = min(max(int(math.floor(r.lo * 2.0**s_in)), -(2**15)), 2**15 - 1)
            hi_q = min(max(int(math.ceil(r.hi * 2.0**s_in)), -(2**15)), 2**15 - 1)
            attrs, table_err, size, clamp_err = _tanh_forms(
                s_in, s_out, lo_q, hi_q, ctx.options.tanh_max_error or DEFAULT_ERROR)
            use_table = mode == "table" or (mode == "auto" and table_err < clamp_err)
            data = graph.nx.nodes[name]
            if use_table:
                data["op"], data["attrs"] = "tanh_lut", attrs
            else:
                data["op"], data["attrs"] = "tanh_clamp", {}
            info = {"node": name, "form": "table" if use_table else "clamp", "table_bytes": size if use_table else 0,
                    "max_abs_error": table_err if use_table else clamp_err,
                    "clamp_max_abs_error": clamp_err, "table_max_abs_error": table_err}
            graph.analyses.tanh_tables.append(info)
            ctx.log.append(f"tanh_approx: %{name} as {info['form']}: max abs error {info['max_abs_error']:.3g} "
                           f"(clamp {clamp_err:.3g}, {size}-byte table {table_err:.3g})")
        return graph
