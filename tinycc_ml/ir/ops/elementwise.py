"""Elementwise ops: add, sub, mul, scale, clip, exp, tanh and Bonsai's tanh clamp."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import align_shifts, check32, clip_bounds, rshift, rshift_bound, saturate, saturate_shifted
from tinycc_ml.ir.ops.registry import (
    FixedCall,
    OpDef,
    float_or_fixed,
    infer_unary,
    monotone_interval,
    need,
    register_op,
    result_dtype,
    same_numeric_kind,
)
from tinycc_ml.ir.types import TensorType, fixed


def _infer_binary(ts, attrs, declared):
    a, b = ts
    float_or_fixed(a, "left operand")
    float_or_fixed(b, "right operand")
    same_numeric_kind(ts)
    need(a.shape == b.shape or a.rank == 0 or b.rank == 0,
         f"operand shapes {a.shape} and {b.shape} differ (only a scalar broadcasts)")
    shape = a.shape if a.rank >= b.rank else b.shape
    return TensorType(shape, result_dtype(ts, declared))


def rows_elementwise(f):
    """Vectorised form over rows: a batched scalar meeting a vector gets a trailing axis."""
    def rows(ins, batched, attrs, n, rank):
        if rank == 1:
            ins = [v[:, None] if b and v.ndim == 1 else v for v, b in zip(ins, batched)]
        return f(ins, attrs)
    return rows


def _fixed_addsub(sign: int):
    def semantics(call: FixedCall):
        a, b = call.broadcast_scalars()
        c, la, lb = align_shifts(call.in_scale(0), call.in_scale(1))
        a, b = check32(rshift(a, -la), call.where), check32(rshift(b, -lb), call.where)
        r = check32((np.add if sign > 0 else np.subtract)(a, b, dtype=np.int64), call.where)  # a new array
        return saturate_shifted(r, c - call.scale, call.bits, own=True)
    return semantics


def _bound_addsub(call):
    c, la, lb = align_shifts(call.scales[0], call.scales[1])
    return rshift_bound(call.bounds[0], -la) + rshift_bound(call.bounds[1], -lb), c


def _interval_add(attrs, ivs, shape):
    (al, ah), (bl, bh) = ivs
    return al + bl, ah + bh


def _interval_sub(attrs, ivs, shape):
    (al, ah), (bl, bh) = ivs
    return al - bh, ah - bl


for _name, _np, _sign, _interval in (("add", np.add, 1, _interval_add), ("sub", np.subtract, -1, _interval_sub)):
    register_op(OpDef(
        _name, 2, _infer_binary, (lambda f: lambda xs, a: f(xs[0], xs[1]))(_np), {},
        f"elementwise {_name}; a scalar operand broadcasts; fixed point: both operands brought to the finer "
        "scale (see align_shifts) before the sum",
        evaluate_rows=(lambda f: rows_elementwise(lambda ins, a: f(ins[0], ins[1])))(_np),
        fixed=_fixed_addsub(_sign), interval=_interval, acc_bound=_bound_addsub))


def _fixed_mul(call: FixedCall):
    a, b = call.broadcast_scalars()
    return saturate(rshift(check32(a * b, call.where), call.in_scale(0) + call.in_scale(1) - call.scale), call.bits)


def _interval_mul(attrs, ivs, shape):
    (al, ah), (bl, bh) = ivs
    cands = np.stack(np.broadcast_arrays(al * bl, al * bh, ah * bl, ah * bh))
    return cands.min(axis=0), cands.max(axis=0)


register_op(OpDef(
    "mul", 2, _infer_binary, lambda xs, a: xs[0] * xs[1], {}, "elementwise mul; a scalar operand broadcasts",
    evaluate_rows=rows_elementwise(lambda ins, a: ins[0] * ins[1]), fixed=_fixed_mul, interval=_interval_mul,
    acc_bound=lambda call: (call.bounds[0] * call.bounds[1], call.scales[0] + call.scales[1])))


# ---------------------------------------------------------------- scale

def _fixed_scale(call: FixedCall):
    (a,) = call.ins
    prod = check32(a * call.attrs["factor_q"], call.where)
    return saturate(rshift(prod, call.in_scale(0) + call.attrs["factor_scale"] - call.scale), call.bits)


def _interval_scale(attrs, ivs, shape):
    lo, hi = ivs[0][0] * attrs["factor"], ivs[0][1] * attrs["factor"]
    return np.minimum(lo, hi), np.maximum(lo, hi)


def _scale_float(xs, a):
    return xs[0] * a["factor"]


register_op(OpDef(
    "scale", 1, infer_unary, _scale_float, {"factor": "float", "factor_q": "int?", "factor_scale": "int?"},
    "multiply by a constant scalar factor; fixed point: by factor_q * 2^-factor_scale",
    evaluate_rows=rows_elementwise(_scale_float), fixed=_fixed_scale, interval=_interval_scale,
    acc_bound=lambda call: (call.bounds[0] * abs(call.attrs["factor_q"]), call.scales[0] + call.attrs["factor_scale"]),
    constant_operand="factor"))


# ---------------------------------------------------------------- clip

def _fixed_clip(call: FixedCall):
    (a,) = call.ins
    lo, hi = clip_bounds(call.attrs["lo"], call.attrs["hi"], call.in_types[0].dtype)
    # minimum(maximum(...)): np.clip's integers (lo <= hi), without its per-call overhead
    s_in, s_out = call.in_scale(0), call.scale
    if np.ndim(s_in) == 0 and np.ndim(s_out) == 0 and s_in == s_out and isinstance(a, np.ndarray) \
            and a.dtype == np.int64:
        # no shift: the clamp then the saturation are one clamp to the bounds' intersection when they meet
        low, high = np.maximum(lo, -(2 ** (call.bits - 1))), np.minimum(hi, 2 ** (call.bits - 1) - 1)
        if np.all(low <= high):
            out = np.maximum(a, low)  # a new array: the minimum goes into it
            return np.minimum(out, high, out=out) if out.shape == a.shape else np.minimum(out, high)
    return saturate(rshift(np.minimum(np.maximum(a, lo), hi), call.in_scale(0) - call.scale), call.bits)


def _bound_clip(call):
    """The clamp's own bounds bound it (and the output saturates to its storage range)."""
    lo, hi = clip_bounds(call.attrs["lo"], call.attrs["hi"], fixed(call.out_bits, call.scales[0]))
    return min(int(max(np.max(np.abs(lo)), np.max(np.abs(hi)))), 2 ** (call.out_bits - 1)), call.scales[0]


def _clip_float(xs, a):
    return np.clip(xs[0], a["lo"], a["hi"])


register_op(OpDef(
    "clip", 1, infer_unary, _clip_float, {"lo": "bound", "hi": "bound"},
    "clamp into [lo, hi] (scalars, or one bound per element)",
    evaluate_rows=rows_elementwise(_clip_float), fixed=_fixed_clip,
    interval=monotone_interval(lambda v, a: np.clip(v, a["lo"], a["hi"])), acc_bound=_bound_clip))


# ---------------------------------------------------------------- exp, tanh

_LUT_FORM = "fixed-point graphs use the table form (exp_table / tanh_approx passes)"

register_op(OpDef(
    "exp", 1, infer_unary, lambda xs, a: np.exp(xs[0]), {}, "elementwise e^x",
    evaluate_rows=rows_elementwise(lambda ins, a: np.exp(ins[0])),
    interval=monotone_interval(lambda v, a: np.exp(v)),
    acc_bound=lambda call: call.saturated, lowered_by="exp_table",
    unsupported={"fixed": "exp_lut is its fixed-point form (passes/exp_table.py)", "c_fixed": _LUT_FORM}))

register_op(OpDef(
    "tanh", 1, infer_unary, lambda xs, a: np.tanh(xs[0]), {}, "elementwise tanh",
    evaluate_rows=rows_elementwise(lambda ins, a: np.tanh(ins[0])),
    interval=monotone_interval(lambda v, a: np.tanh(v)),
    acc_bound=lambda call: call.saturated, lowered_by="tanh_approx",
    unsupported={"fixed": "tanh_lut / tanh_clamp are its fixed-point forms (passes/tanh_approx.py)",
                 "c_fixed": _LUT_FORM}))


def _fixed_tanh_clamp(call: FixedCall):
    """Clamp to +-1 at scale max(sa, 0): at a negative input scale every nonzero input is beyond
    +-1 (its unit is 2 or more), so the clamp leaves sign(x) at scale 0."""
    (a,) = call.ins
    w = max(call.in_scale(0), 0)
    one = np.int64(1) << w
    return saturate(rshift(np.clip(a, -one, one), w - call.scale), call.bits)


register_op(OpDef(
    "tanh_clamp", 1, infer_unary, lambda xs, a: np.clip(xs[0], -1.0, 1.0), {},
    "Bonsai's tanh approximation: x for |x| < 1, else sign(x)",
    evaluate_rows=rows_elementwise(lambda ins, a: np.clip(ins[0], -1.0, 1.0)), fixed=_fixed_tanh_clamp,
    interval=monotone_interval(lambda v, a: np.clip(v, -1, 1)), acc_bound=lambda call: call.saturated))
