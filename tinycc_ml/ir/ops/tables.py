"""Table ops, the fixed-point forms of exp and tanh (built by passes/exp_table.py and
passes/tanh_approx.py, which call the same index and value functions as the interpreter)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.elementwise import rows_elementwise
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, infer_unary, monotone_interval, register_op


def exp_lut_index(x, attrs):
    """Table indices (hi, lo) of exp_lut for int inputs x."""
    t = np.clip(np.asarray(x, dtype=np.int64), attrs["lo_q"], attrs["hi_q"]) - attrs["lo_q"]
    t = rshift(t, attrs["drop_bits"])
    return t >> attrs["low_bits"], t & ((1 << attrs["low_bits"]) - 1)


def exp_lut_value(x, attrs, s_out: int, bits: int, where: str = "exp_lut"):
    """exp_lut's integer result at output scale ``s_out``."""
    hi_idx, lo_idx = exp_lut_index(x, attrs)
    prod = check32(attrs["table_hi"].astype(np.int64)[hi_idx] * attrs["table_lo"].astype(np.int64)[lo_idx], where)
    return saturate(rshift(prod, attrs["hi_scale"] + attrs["lo_scale"] - s_out), bits)


def tanh_lut_value(x, attrs):
    """tanh_lut before the output shift: linear interpolation between the entries around |x|,
    then the sign of x (the table holds tanh on [0, in_max])."""
    x = np.asarray(x, dtype=np.int64)
    a = np.minimum(np.abs(x), attrs["in_max_q"])
    i, f = a >> attrs["drop_bits"], a & ((1 << attrs["drop_bits"]) - 1)
    table = attrs["table"].astype(np.int64)
    y0, y1 = table[i], table[np.minimum(i + 1, len(table) - 1)]
    return np.sign(x) * (y0 + rshift((y1 - y0) * f, attrs["drop_bits"]))


def tanh_lut_result(x, attrs, s_out: int, bits: int):
    """tanh_lut's integer result at output scale ``s_out``."""
    return saturate(rshift(tanh_lut_value(x, attrs), attrs["table_scale"] - s_out), bits)


_FIXED_ONLY = "a table form made for fixed-point graphs (float graphs use exp / tanh)"


def _exp_lut_float(xs, a):
    return np.exp(a.get("factor", 1.0) * np.clip(xs[0], a["lo"], a["hi"]))


def _interval_exp_lut(attrs, ivs, shape):
    # e^(factor x) over the clamped input; factor may be negative
    f = attrs.get("factor", 1.0)
    ends = [np.exp(f * np.clip(v, attrs["lo"], attrs["hi"])) for v in ivs[0]]
    return np.minimum(*ends), np.maximum(*ends)


register_op(OpDef(
    "exp_lut", 1, infer_unary, _exp_lut_float,
    {"lo": "float", "hi": "float", "lo_q": "int", "hi_q": "int", "drop_bits": "int", "low_bits": "int",
     "table_hi": "array", "table_lo": "array", "hi_scale": "int", "lo_scale": "int", "factor": "float?"},
    "e^(factor x) by two tables over [lo, hi] (inputs outside clamp): with t = (clamp(x) - lo) >> drop_bits, "
    "e^(factor x) ~ table_hi[t >> low_bits] * table_lo[t & (2^low_bits - 1)]; see passes/exp_table.py",
    evaluate_rows=rows_elementwise(_exp_lut_float),
    fixed=lambda call: exp_lut_value(call.ins[0], call.attrs, call.scale, call.bits, call.where),
    interval=_interval_exp_lut, acc_bound=lambda call: call.saturated,
    unsupported={"c_float": _FIXED_ONLY}))


def _fixed_tanh_lut(call: FixedCall):
    return tanh_lut_result(call.ins[0], call.attrs, call.scale, call.bits)


register_op(OpDef(
    "tanh_lut", 1, infer_unary, lambda xs, a: np.tanh(xs[0]),
    {"drop_bits": "int", "in_max_q": "int", "table": "array", "table_scale": "int"},
    "tanh by one table over [0, in_max] with odd symmetry and linear interpolation between entries "
    "2^drop_bits input steps apart; see tanh_lut_value and passes/tanh_approx.py",
    evaluate_rows=rows_elementwise(lambda ins, a: np.tanh(ins[0])), fixed=_fixed_tanh_lut,
    interval=monotone_interval(lambda v, a: np.tanh(v)), acc_bound=lambda call: call.saturated,
    unsupported={"c_float": _FIXED_ONLY}))
