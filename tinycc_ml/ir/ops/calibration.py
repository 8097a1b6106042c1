"""Probability calibration, as scikit-learn's CalibratedClassifierCV applies it to a classifier's decision
values: ``sigmoid_calibrate`` (Platt's sigmoid per column), ``isotonic_calibrate`` (an isotonic regression
per column: linear interpolation between its knots, clipped to its ends) and ``calibrated_mean`` (each
fold's calibrated columns made class probabilities, then their mean over the folds).

Float semantics only: calibrated probabilities are float by definition (sigmoid, division by their sum);
the models that use these ops compile at precision float (on every target: the AVR in software float).
``ovr_decision`` (an SVC's one-vs-rest decision_function, its scores in any precision) has integer semantics too.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import rshift, saturate
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, float_or_fixed, need, register_op, result_dtype
from tinycc_ml.ir.types import F32, TensorType

FLOAT_ONLY = "calibrated probabilities are float (models using these ops compile at precision float only)"
UNSUPPORTED = {"fixed": FLOAT_ONLY, "c_fixed": FLOAT_ONLY, "acc_bound": FLOAT_ONLY}
ONE_SLACK = 1e-5  # scikit-learn sets a probability in (1, 1 + 1e-5] to 1


def _probability_interval(attrs, ivs, shape):
    return np.zeros(shape), np.ones(shape)


def _infer_sigmoid(ts, attrs, declared):
    t, ab = ts
    need(t.dtype.is_float and ab.dtype.is_float, f"sigmoid_calibrate is float only, got {t}, {ab}")
    need(t.rank == 1 and ab.shape == (t.shape[0], 2), f"expected t (R,) and a, b (R, 2), got {t}, {ab}")
    return TensorType(t.shape, F32)


def sigmoid_rows(t: np.ndarray, ab: np.ndarray) -> np.ndarray:
    """t (n, R) through each column's Platt sigmoid 1 / (1 + exp(a t + b)), (a, b) the rows of ``ab``."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(ab[:, 0] * t + ab[:, 1]))


register_op(OpDef(
    "sigmoid_calibrate", 2, _infer_sigmoid, lambda xs, a: sigmoid_rows(np.asarray(xs[0])[None], xs[1])[0], {},
    "Platt's sigmoid per column: 1 / (1 + exp(a_i t_i + b_i)), (a_i, b_i) row i of the constant operand",
    evaluate_rows=lambda ins, batched, attrs, n, rank: sigmoid_rows(ins[0], ins[1]),
    interval=_probability_interval, unsupported=UNSUPPORTED))


def _infer_isotonic(ts, attrs, declared):
    t, kx, ky = ts
    need(all(v.dtype.is_float for v in ts), f"isotonic_calibrate is float only, got {t}, {kx}, {ky}")
    need(t.rank == 1 and kx.rank == 2 and kx.shape[0] == t.shape[0] and ky.shape == kx.shape,
         f"expected t (R,) and knots (R, L) twice, got {t}, {kx}, {ky}")
    return TensorType(t.shape, F32)


def isotonic_rows(t: np.ndarray, kx: np.ndarray, ky: np.ndarray, snap=None) -> np.ndarray:
    """t (n, R) through each column's knots (kx, ky rows, x non-decreasing, padded by repeating the last
    knot): clipped to the knots' ends, then linearly interpolated on the first segment whose right end is
    >= t (scipy's interp1d, which scikit-learn's IsotonicRegression uses); one distinct knot: its y. ``snap``
    (per column, optional): t within snap of a knot reads that knot's y (a response that takes a few discrete
    values, e.g. tree sums, equals a knot in float64 and lands beside it in float32)."""
    out = np.empty_like(t, dtype=np.float64)
    for i in range(kx.shape[0]):
        x, y = kx[i], ky[i]
        v = np.clip(t[:, i], x[0], x[-1])
        hi = np.clip(np.searchsorted(x, v, side="left"), 1, max(len(x) - 1, 1))
        if len(x) == 1:
            out[:, i] = y[0]
            continue
        lo = hi - 1
        dx = x[hi] - x[lo]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, i] = np.where(dx > 0, (y[hi] - y[lo]) / np.where(dx > 0, dx, 1.0) * (v - x[lo]) + y[lo], y[lo])
        if snap is not None:
            out[:, i] = np.where(v - x[lo] <= snap[i], y[lo], np.where(x[hi] - v <= snap[i], y[hi], out[:, i]))
    return out


register_op(OpDef(
    "isotonic_calibrate", 3, _infer_isotonic,
    lambda xs, a: isotonic_rows(np.asarray(xs[0])[None], xs[1], xs[2], a.get("snap"))[0], {"snap": "array?"},
    "an isotonic regression per column: t_i clipped to its knots' ends, linearly interpolated between the "
    "knots (rows of the two constant operands, padded by repeating the last knot); within snap_i of a knot: its y",
    evaluate_rows=lambda ins, batched, attrs, n, rank: isotonic_rows(ins[0], ins[1], ins[2], attrs.get("snap")),
    interval=_probability_interval, unsupported=UNSUPPORTED))


def _infer_mean(ts, attrs, declared):
    (p,) = ts
    need(p.dtype.is_float and p.rank == 1, f"calibrated_mean takes a float vector, got {p}")
    classes, folds = attrs["column_class"], attrs["fold_columns"]
    k = int(attrs["n_classes"])
    need(k >= 2, f"n_classes is {k}, expected >= 2")
    need(len(classes) == p.shape[0] and sum(folds) == p.shape[0] and all(f >= 1 for f in folds),
         f"column_class ({len(classes)}) and fold_columns (sum {sum(folds)}) must cover the {p.shape[0]} columns")
    need(all(0 <= c < k for c in classes), f"column_class must be class indices below {k}")
    need(k > 2 or all(f == 1 for f in folds), "a binary fold has one column (the second class's)")
    return TensorType((k,), F32)


def calibrated_mean_rows(p: np.ndarray, attrs: dict) -> np.ndarray:
    """Each fold's columns as class probabilities (two classes: [1 - p, p]; more: divided by their sum,
    uniform where it is 0; in (1, 1 + 1e-5]: 1), then the mean over the folds."""
    k, classes = int(attrs["n_classes"]), list(attrs["column_class"])
    total, start = np.zeros((p.shape[0], k)), 0
    for count in attrs["fold_columns"]:
        proba = np.zeros((p.shape[0], k))
        if k == 2:
            proba[:, 1] = p[:, start]
            proba[:, 0] = 1.0 - proba[:, 1]
        else:
            for c in range(start, start + count):
                proba[:, classes[c]] = p[:, c]
            denominator = np.sum(proba, axis=1, keepdims=True)
            proba = np.divide(proba, denominator, out=np.full_like(proba, 1.0 / k), where=denominator != 0)
        proba[(1.0 < proba) & (proba <= 1.0 + ONE_SLACK)] = 1.0
        total += proba
        start += count
    return total / len(attrs["fold_columns"])


register_op(OpDef(
    "calibrated_mean", 1, _infer_mean, lambda xs, a: calibrated_mean_rows(np.asarray(xs[0])[None], a)[0],
    {"column_class": "ints", "fold_columns": "ints", "n_classes": "int"},
    "the calibrated columns of each fold (fold_columns: how many, in order; column_class: the class of each) "
    "made class probabilities as scikit-learn's _CalibratedClassifier does, then their mean over the folds",
    evaluate_rows=lambda ins, batched, attrs, n, rank: calibrated_mean_rows(ins[0], attrs),
    interval=_probability_interval, unsupported=UNSUPPORTED))


def _infer_ovr_decision(ts, attrs, declared):
    (d,) = ts
    float_or_fixed(d, "pair decisions")
    need(d.rank == 1, f"ovr_decision takes a vector, got {d}")
    k = int(attrs["n_classes"])
    need(k >= 3 and d.shape[0] == k * (k - 1) // 2, f"expected the {k * (k - 1) // 2} pair decisions of {k} classes, "
                                                     f"got {d}")
    return TensorType((k,), result_dtype(ts, declared))


def _votes_and_totals(d: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per class: its one-vs-one votes (d >= 0 votes i, else j) and summed confidences (+d for i, -d for j)."""
    votes, total = np.zeros(d.shape[:-1] + (k,), dtype=d.dtype), np.zeros(d.shape[:-1] + (k,), dtype=d.dtype)
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            total[..., i] += d[..., p]
            total[..., j] -= d[..., p]
            votes[..., i] += d[..., p] >= 0
            votes[..., j] += d[..., p] < 0
            p += 1
    return votes, total


def ovr_decision_rows(d: np.ndarray, k: int) -> np.ndarray:
    """scikit-learn's one-vs-rest decision from one-vs-one decisions d (n, pairs), pairs (i, j), i < j, in order
    (``_ovr_decision_function(d < 0, -d, k)``): votes (d >= 0 votes i, else j) plus each class's summed confidence
    s mapped into (-1/3, 1/3) by s / (3 (|s| + 1))."""
    votes, total = _votes_and_totals(np.asarray(d, dtype=np.float64), k)
    return votes + total / (3 * (np.abs(total) + 1))


def ovr_fraction_terms(in_scale: int, out_scale: int) -> tuple[int, int, int, int]:
    """(a, e, f, b): with T the summed confidences' integer at ``in_scale``, the confidence term at ``out_scale``
    is T 2^a / (3 (|T| 2^e + 2^f) 2^b), rounded half away from zero: s / (3 (|s| + 1)) with s = T 2^-in_scale,
    every exponent >= 0."""
    e, f = max(0, -in_scale), max(0, in_scale)
    return e + max(out_scale, 0), e, f, max(-out_scale, 0)


def _fixed_ovr_decision(call: FixedCall):
    k = int(call.attrs["n_classes"])
    votes, total = _votes_and_totals(np.asarray(call.ins[0], dtype=np.int64), k)
    a, e, f, b = ovr_fraction_terms(call.in_scale(0), call.scale)
    num = total << a
    den = (3 * ((np.abs(total) << e) + (1 << f))) << b
    fraction = np.sign(num) * ((2 * np.abs(num) + den) // (2 * den))
    return saturate(rshift(votes, -call.scale) + fraction, call.bits)


register_op(OpDef(
    "ovr_decision", 1, _infer_ovr_decision, lambda xs, a: ovr_decision_rows(np.asarray(xs[0])[None],
                                                                            int(a["n_classes"]))[0],
    {"n_classes": "int"},
    "scikit-learn's one-vs-rest decision_function of a one-vs-one SVC from its pair decisions (i < j in order): "
    "votes (decision >= 0 votes i, else j) plus the summed confidences s mapped by s / (3 (|s| + 1)); fixed "
    "point: the summed confidences exact, the mapped term rounded once (half away from zero)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: ovr_decision_rows(ins[0], int(attrs["n_classes"])),
    fixed=_fixed_ovr_decision,
    interval=lambda attrs, ivs, shape: (np.full(shape, -1.0 / 3), np.full(shape, int(attrs["n_classes"]) - 1 + 1 / 3)),
    acc_bound=lambda call: call.saturated))


def _infer_isotonic_pq(ts, attrs, declared):
    p, q, kx, kq, ky = ts
    need(all(v.dtype.is_float for v in ts), f"isotonic_calibrate_pq is float only, got {ts}")
    need(p.rank == 1 and q.shape == p.shape and kx.rank == 2 and kx.shape[0] == p.shape[0]
         and kq.shape == kx.shape and ky.shape == kx.shape,
         f"expected p, q (R,) and knots (R, L) three times, got {ts}")
    return TensorType(p.shape, F32)


def isotonic_pq_rows(p: np.ndarray, q: np.ndarray, kx: np.ndarray, kq: np.ndarray, ky: np.ndarray) -> np.ndarray:
    """isotonic_rows of probabilities p given with their complements q = 1 - p (each computed to its own
    relative precision) and knots kx, kq = 1 - kx: read through p where p <= 1/2, else through q (mirrored,
    -q against -kq), where float32 still tells probabilities near 1 apart."""
    return np.where(p <= 0.5, isotonic_rows(p, kx, ky), isotonic_rows(-q, -kq, ky))


register_op(OpDef(
    "isotonic_calibrate_pq", 5, _infer_isotonic_pq,
    lambda xs, a: isotonic_pq_rows(np.asarray(xs[0])[None], np.asarray(xs[1])[None], xs[2], xs[3], xs[4])[0], {},
    "isotonic_calibrate of probabilities p_i with their complements q_i = 1 - p_i: through p_i and knots_x where "
    "p_i <= 1/2, else through -q_i and -(1 - knots_x) (the operands: p, q, knots_x, 1 - knots_x, knots_y)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: isotonic_pq_rows(*ins),
    interval=_probability_interval, unsupported=UNSUPPORTED))
