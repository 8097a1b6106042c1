"""zero_crossings: per column of a (samples, axes) tensor, how many neighbouring samples lie on different sides
of zero, a sample >= 0 counting as above (librosa's ``zero_crossings`` with ``zero_pos=True``).

Float: the count as f32, exact for fewer than 2^24 samples. Fixed point: the count at the result's scale (a left
shift, or a rounding right shift where the scale is coarser than units), saturated; a 16-bit sample's sign is its
real value's, so the count is the float one wherever the samples are.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.registry import OpDef, float_or_fixed, need, register_op, result_dtype
from tinycc_ml.ir.types import TensorType


def _infer(ts, attrs, declared):
    (x,) = ts
    float_or_fixed(x, "samples")
    need(x.rank == 2, f"zero_crossings takes a (samples, axes) tensor, got {x}")
    need(x.shape[0] < 1 << 24, f"{x.shape[0]} samples: counts beyond 2^24 are not exact in float32")
    return TensorType((x.shape[1],), result_dtype(ts, declared))


def crossings(x: np.ndarray) -> np.ndarray:
    """(..., samples, axes) -> (..., axes)."""
    above = np.asarray(x) >= 0
    return np.sum(above[..., 1:, :] != above[..., :-1, :], axis=-2).astype(np.float64)


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    samples, axes = em.graph.type(x).shape
    out = em.var(node.name)
    return [f"for (long a = 0; a < {axes}; ++a) {{",
            "    long count = 0;",
            f"    int above = {em.at(x, 'a')} >= 0.0f;",
            f"    for (long i = 1; i < {samples}; ++i) {{",
            f"        const int now = {em.at(x, f'i * {axes} + a')} >= 0.0f;",
            "        count += now != above;",
            "        above = now;",
            "    }",
            f"    {out}[a] = (float)count;",
            "}"]


register_op(OpDef(
    "zero_crossings", 1, _infer, lambda xs, attrs: crossings(xs[0]), {},
    "per column of (samples, axes): how many neighbouring samples lie on different sides of zero (>= 0 above)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: crossings(ins[0]) if batched[0] else None,
    fixed=lambda call: saturate(rshift(crossings(call.ins[0]).astype("int64"), -call.scale), call.bits),
    interval=lambda attrs, ivs, shape: (np.zeros(shape), np.full(shape, float(ivs[0][0].shape[0] - 1))),
    acc_bound=lambda call: (call.in_types[0].shape[0] - 1, 0),
    c={"float": _c}))
