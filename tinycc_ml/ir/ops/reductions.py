"""Reductions: sum, argmax, per-segment minimum, k-nearest votes (and the fused distance + vote)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.linalg import bound_sqdist, infer_sqdist, interval_sqdist, rows_sqdist, sqdist_accumulators
from tinycc_ml.ir.ops.registry import (
    FixedCall,
    OpDef,
    float_or_fixed,
    need,
    register_op,
    result_dtype,
)
from tinycc_ml.ir.types import IDX, PER_TENSOR, TensorType, fixed


def _infer_sum(ts, attrs, declared):
    (a,) = ts
    float_or_fixed(a, "operand")
    return TensorType((), result_dtype(ts, declared))


def _fixed_sum(call: FixedCall):
    (a,) = call.ins
    h = call.shift
    acc = check32(np.sum(rshift(a, h), axis=tuple(range(1, a.ndim))), call.where)
    return saturate(rshift(acc, call.in_scale(0) - h - call.scale), call.bits)  # the op's output_shift


register_op(OpDef(
    "sum", 1, _infer_sum, lambda xs, a: np.sum(xs[0]), {"shift": "int?"}, "sum of all elements",
    fixed=_fixed_sum, interval=lambda attrs, ivs, shape: (np.sum(ivs[0][0]), np.sum(ivs[0][1])),
    acc_bound=lambda call: (call.bounds[0] * call.in_types[0].size, call.scales[0]),
    output_shift=lambda ts, out, attrs: ts[0].dtype.scale - int(attrs.get("shift", 0)) - out.dtype.scale))


def _fixed_max(call: FixedCall):
    (a,) = call.ins
    return saturate(rshift(np.max(a, axis=tuple(range(1, a.ndim))), call.in_scale(0) - call.scale), call.bits)


register_op(OpDef(
    "max", 1, _infer_sum, lambda xs, a: np.max(xs[0]), {}, "the largest element",
    evaluate_rows=lambda ins, batched, attrs, n, rank: np.max(ins[0].reshape(n, -1), axis=1) if batched[0] else None,
    fixed=_fixed_max, interval=lambda attrs, ivs, shape: (np.max(ivs[0][0]), np.max(ivs[0][1])),
    acc_bound=lambda call: (call.bounds[0], call.scales[0])))


def _infer_argmax(ts, attrs, declared):
    (a,) = ts
    need(a.dtype.kind in ("f32", "fx", "int", "uint", "bool") or (a.dtype.is_quantised and a.dtype.axis == PER_TENSOR),
         f"operand must be numeric (f32, fixed, per-tensor quantised or bool), got {a.dtype}")
    need(a.rank == 1, f"operand has shape {a.shape}, expected a vector")
    return TensorType((), IDX)


register_op(OpDef(
    "argmax", 1, _infer_argmax, lambda xs, a: np.asarray(np.argmax(xs[0])), {},
    "index of the largest element; the first one on ties",
    evaluate_rows=lambda ins, batched, attrs, n, rank: np.argmax(ins[0], axis=1) if batched[0] else None,
    fixed=lambda call: np.argmax(call.ins[0], axis=1).astype(np.int64),
    interval=lambda attrs, ivs, shape: None,  # an index: no numeric range
    acc_bound=lambda call: (2**31 - 1, 0)))


def _infer_segment_min(ts, attrs, declared):
    (a,) = ts
    float_or_fixed(a, "operand")
    offsets = list(attrs["offsets"])
    need(a.rank == 1, f"operand has shape {a.shape}, expected a vector")
    need(len(offsets) >= 2 and offsets[0] == 0 and offsets[-1] == a.shape[0],
         f"offsets must run from 0 to {a.shape[0]}")
    need(all(lo < hi for lo, hi in zip(offsets, offsets[1:])), "every segment must be non-empty")
    return TensorType((len(offsets) - 1,), result_dtype(ts, declared))


def _segments(attrs):
    return list(zip(attrs["offsets"], attrs["offsets"][1:]))


def _fixed_segment_min(call: FixedCall):
    (a,) = call.ins
    mins = np.stack([a[:, lo:hi].min(axis=1) for lo, hi in _segments(call.attrs)], axis=1)
    return saturate(rshift(mins, call.in_scale(0) - call.scale), call.bits)


register_op(OpDef(
    "segment_min", 1, _infer_segment_min,
    lambda xs, a: np.array([xs[0][lo:hi].min() for lo, hi in _segments(a)]), {"offsets": "ints"},
    "minimum of each contiguous segment [offsets[c], offsets[c+1]) (per-class nearest distance)",
    fixed=_fixed_segment_min,
    interval=lambda attrs, ivs, shape: tuple(np.array([v[lo:hi].min() for lo, hi in _segments(attrs)])
                                             for v in ivs[0]),
    acc_bound=lambda call: (call.bounds[0], call.scales[0])))


def kvote_counts(d: np.ndarray, labels: np.ndarray, k: int, n_classes: int) -> np.ndarray:
    """Votes of the k smallest entries of d (a stable sort: equal values keep the lower index); d of shape
    (m,) or (rows, m)."""
    D = np.atleast_2d(d)
    kth = np.partition(D, k - 1, axis=1)[:, k - 1:k]
    less = D < kth
    ties = D == kth  # of these, the first (k - #less) by index are among the k nearest
    chosen = less | (ties & (np.cumsum(ties, axis=1) <= k - np.sum(less, axis=1, keepdims=True)))
    rows, cols = np.nonzero(chosen)  # k per row
    keys = rows * n_classes + np.asarray(labels, dtype=np.int64)[cols]
    votes = np.bincount(keys, minlength=len(D) * n_classes).reshape(len(D), n_classes).astype(np.float64)
    return votes if np.ndim(d) == 2 else votes[0]


def _infer_kvote(ts, attrs, declared):
    (d,) = ts
    float_or_fixed(d, "distances")
    labels = attrs["labels"]
    need(d.rank == 1 and labels.shape == d.shape, f"labels {labels.shape} must match distances {d.shape}")
    need(1 <= attrs["k"] <= d.shape[0], f"k = {attrs['k']} must be in [1, {d.shape[0]}]")
    need(labels.size == 0 or (labels.min() >= 0 and labels.max() < attrs["n_classes"]), "a label is out of range")
    return TensorType((int(attrs["n_classes"]),), result_dtype(ts, declared))


def _fixed_kvote(call: FixedCall):
    at = call.attrs
    votes = kvote_counts(call.ins[0], at["labels"], int(at["k"]), int(at["n_classes"]))
    return saturate(rshift(votes.astype(np.int64), -call.scale), call.bits)


register_op(OpDef(
    "kvote", 1, _infer_kvote, lambda xs, a: kvote_counts(xs[0], a["labels"], int(a["k"]), int(a["n_classes"])),
    {"k": "int", "n_classes": "int", "labels": "array"},
    "votes per class among the k smallest distances; equal distances: the lower index first",
    evaluate_rows=lambda ins, batched, attrs, n, rank: (kvote_counts(ins[0], attrs["labels"], int(attrs["k"]),
                                                                      int(attrs["n_classes"])) if batched[0] else None),
    fixed=_fixed_kvote,
    interval=lambda attrs, ivs, shape: (np.zeros(shape), np.full(shape, float(attrs["k"]))),
    acc_bound=lambda call: call.saturated))


def _distance_type(ts, attrs) -> TensorType:
    """The distances a fused sqdist_kvote ranks: float, or the fixed type its attributes name."""
    (x, m) = ts
    need(x.rank == 1 and m.rank == 2, f"sqdist_kvote takes a point and a matrix, not shapes {x.shape} and {m.shape}")
    if not x.dtype.is_fixed:
        return TensorType((m.shape[1],), x.dtype)
    need("dist_bits" in attrs and "dist_scale" in attrs, "a fixed-point sqdist_kvote needs dist_bits and dist_scale")
    need(int(attrs["dist_bits"]) in (8, 16, 32), f"dist_bits = {attrs['dist_bits']} is not 8, 16 or 32")
    return TensorType((m.shape[1],), fixed(int(attrs["dist_bits"]), int(attrs["dist_scale"])))


def _infer_sqdist_kvote(ts, attrs, declared):
    d = infer_sqdist(ts, attrs, _distance_type(ts, attrs))
    return _infer_kvote([d], attrs, declared)


def _sqdist_kvote_shift(ts, out, attrs) -> int:
    """The distances' accumulator (squares of (x - M) >> h: 2 (scale_x - h)) to the distance scale."""
    return 2 * (ts[0].dtype.scale - int(attrs.get("shift", 0))) - int(attrs.get("dist_scale", 0))


def _fixed_sqdist_kvote(call: FixedCall):
    x, M = call.ins
    at = call.attrs
    acc = sqdist_accumulators(x, M, call.shift, call.where)
    d = saturate(rshift(acc, _sqdist_kvote_shift(call.in_types, call.type, at)), int(at["dist_bits"]))
    votes = kvote_counts(d, at["labels"], int(at["k"]), int(at["n_classes"]))
    return saturate(rshift(votes.astype(np.int64), -call.scale), call.bits)


def _float_sqdist_kvote(xs, a):
    d = np.sum((xs[1] - xs[0][:, None]) ** 2, axis=0)
    return kvote_counts(d, a["labels"], int(a["k"]), int(a["n_classes"]))


def _rows_sqdist_kvote(ins, batched, attrs, n, rank):
    d = rows_sqdist(ins, batched, attrs, n, rank)
    return None if d is None else kvote_counts(d, attrs["labels"], int(attrs["k"]), int(attrs["n_classes"]))


register_op(OpDef(
    "sqdist_kvote", 2, _infer_sqdist_kvote, _float_sqdist_kvote,
    {"k": "int", "n_classes": "int", "labels": "array", "shift": "int?", "dist_bits": "int?", "dist_scale": "int?"},
    "kvote(sqdist(x, M)) in one pass over the columns of M, keeping only the k best (O(k) memory, not O(m)); "
    "fixed point: the distances are those of an sqdist of type fx<dist_bits>.<dist_scale> (each difference "
    "shifted right by `shift`), ranked exactly as kvote ranks them",
    evaluate_rows=_rows_sqdist_kvote, fixed=_fixed_sqdist_kvote,
    interval=lambda attrs, ivs, shape: (np.zeros(shape), np.full(shape, float(attrs["k"]))),
    inner_interval=lambda attrs, ivs: interval_sqdist(attrs, ivs, None),
    acc_bound=bound_sqdist, constant_operand="prototypes", dense_const_operand=1, output_shift=_sqdist_kvote_shift,
    macs=lambda ts, stored, out: ts[1].size))


def ovo_vote_counts(d: np.ndarray, n_classes: int) -> np.ndarray:
    """One-vs-one votes of rows of pair decisions d (n, P): pair p = (i, j), i < j in the order
    (0, 1), (0, 2), ..., (1, 2), ...; d > 0 votes for i, else for j (libsvm's rule)."""
    d = np.asarray(d)
    votes = np.zeros(d.shape[:-1] + (n_classes,), dtype=np.int64)
    p = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            positive = d[..., p] > 0
            votes[..., i] += positive
            votes[..., j] += ~positive
            p += 1
    return votes


def _infer_ovo_votes(ts, attrs, declared):
    (d,) = ts
    float_or_fixed(d, "pair decisions")
    c = int(attrs["n_classes"])
    need(c >= 2, f"n_classes = {c}, expected at least 2")
    need(d.rank == 1 and d.shape[0] == c * (c - 1) // 2,
         f"pair decisions have shape {d.shape}, expected ({c * (c - 1) // 2},) for {c} classes")
    return TensorType((c,), result_dtype(ts, declared))


def _fixed_ovo_votes(call: FixedCall):
    votes = ovo_vote_counts(call.ins[0], int(call.attrs["n_classes"]))
    return saturate(rshift(votes, -call.scale), call.bits)


register_op(OpDef(
    "ovo_votes", 1, _infer_ovo_votes,
    lambda xs, a: ovo_vote_counts(xs[0], int(a["n_classes"])).astype(np.float64), {"n_classes": "int"},
    "one-vs-one votes per class from the pair decisions (i < j in order); decision > 0 votes i, else j",
    evaluate_rows=lambda ins, batched, attrs, n, rank: (ovo_vote_counts(ins[0], int(attrs["n_classes"]))
                                                       .astype(np.float64) if batched[0] else None),
    fixed=_fixed_ovo_votes,
    interval=lambda attrs, ivs, shape: (np.zeros(shape), np.full(shape, float(attrs["n_classes"] - 1))),
    acc_bound=lambda call: call.saturated))
