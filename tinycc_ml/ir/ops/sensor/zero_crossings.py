"""zero_crossings: per column of a (samples, axes) f32 tensor, how many neighbouring samples lie on different sides
of zero, a sample >= 0 counting as above (librosa's ``zero_crossings`` with ``zero_pos=True``); the count as f32.

Float only: a count of comparisons, exact in float32 for fewer than 2^24 samples; the C compares as the
interpreter does, so the counts are equal wherever the samples are.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import F32, TensorType

FLOAT_ONLY = "the sensor front ends compile at precision float (a count of sign changes of float samples)"
NO_RANGES = "float only: no fixed-point scale is chosen for it"
NO_ACCUMULATOR = "float only: no integer accumulator"


def _infer(ts, attrs, declared):
    (x,) = ts
    need(x.dtype.is_float and x.rank == 2, f"zero_crossings takes an f32 (samples, axes) tensor, got {x}")
    need(x.shape[0] < 1 << 24, f"{x.shape[0]} samples: counts beyond 2^24 are not exact in float32")
    return TensorType((x.shape[1],), F32)


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
    c={"float": _c},
    unsupported={"fixed": FLOAT_ONLY, "c_fixed": FLOAT_ONLY, "interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))
