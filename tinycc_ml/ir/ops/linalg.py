"""Linear algebra: mat-vec, the mat-vec of one matrix of a stack (tree nodes), squared distances."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import INT32_MAX, INT32_MIN, check32, rshift, rshift_bound, saturate, saturate_shifted
from tinycc_ml.ir.ops.registry import (
    FixedCall,
    OpDef,
    float_or_fixed,
    need,
    register_op,
    result_dtype,
    same_numeric_kind,
)
from tinycc_ml.ir.types import IDX, TensorType


def interval_matmul(A, lo, hi):
    pos, neg = np.maximum(A, 0), np.minimum(A, 0)
    return pos @ lo + neg @ hi, pos @ hi + neg @ lo


def _products_bound(call, a: int, x: int) -> tuple[int, int]:
    """|sum of products| of a mat-vec: the largest row L1 norm of the quantised weights times
    |x|; with a product shift h, each product is rounded first (at most one more unit each)."""
    weights = call.consts[a]
    h = int(call.attrs.get("shift", 0))
    acc = int(np.max(np.sum(np.abs(weights), axis=-1))) * call.bounds[x]
    acc = rshift_bound(acc, h) + weights.shape[-1] if h else acc
    return acc, call.scales[a] + call.scales[x] - h


def _products_shift(ts, out, attrs) -> int:
    """A sum of products of the (first) matrix and the (last) vector: scale_A + scale_x - h, to the result's."""
    return ts[0].dtype.scale + ts[-1].dtype.scale - int(attrs.get("shift", 0)) - out.dtype.scale


def _sqdist_shift(ts, out, attrs) -> int:
    """Squares of (x - M) >> h: 2 (scale_x - h), to the result's."""
    return 2 * (ts[0].dtype.scale - int(attrs.get("shift", 0))) - out.dtype.scale


def _stored_or_size(t, stored) -> int:
    return t.size if stored is None else stored


# ---------------------------------------------------------------- matvec

EXACT_FLOAT_SUM = 2.0**53  # sums of integer products below this are exact in float64


def _infer_matvec(ts, attrs, declared):
    a, x = ts
    float_or_fixed(a, "matrix")
    float_or_fixed(x, "vector")
    same_numeric_kind(ts)
    need(a.rank == 2, f"matrix operand has shape {a.shape}, expected rank 2")
    need(x.rank == 1, f"vector operand has shape {x.shape}, expected rank 1")
    need(a.shape[1] == x.shape[0], f"matrix {a.shape} times vector {x.shape}: inner sizes differ")
    return TensorType((a.shape[0],), result_dtype(ts, declared))


def _fixed_matvec(call: FixedCall):
    A, x = call.ins
    h = call.shift
    if A.ndim == 2 and x.ndim == 2:  # a constant matrix: its zero entries' products are 0, shifted or not
        if np.count_nonzero(A) < A.size // 4:  # mostly zeros (a diagonal, a sparse matrix): only the stored products
            rows, cols = np.nonzero(A)
            acc = check32(_stored_products_sum(A, x, rows, cols, h, call.where), call.where)
            return saturate_shifted(acc, _products_shift(call.in_types, call.type, call.attrs), call.bits, own=True)
    if h == 0 and A.ndim == 2 and x.ndim == 2 and A.size and len(x):
        # unshifted products: their sum is the integer product of the matrices, exact in int64; the products'
        # int32 check needs only each column's largest |entry| times the largest |x| it meets
        # the largest |entry| of A and of x first (whole-array reductions): when their product fits int32 and
        # the row's sum of them stays below 2^53, so does every column's, and the per-column figures are not needed
        top = max(int(A.max()), -int(A.min())) * max(int(x.max()), -int(x.min()))  # Python ints: no wrap of -(-128)
        largest = None if top <= INT32_MAX else np.max(np.abs(A), axis=0) * np.max(np.abs(x), axis=0)
        if largest is None or int(np.max(largest)) <= INT32_MAX:
            # every product and partial sum an integer below 2^53 in magnitude: float64's product of the matrices
            # (BLAS, in any order of summation) is exact, and many times quicker than numpy's int64 one
            exact = (float(top) * A.shape[1] if largest is None else float(np.sum(largest, dtype=np.float64))) \
                < EXACT_FLOAT_SUM
            acc = check32((x.astype(np.float64) @ A.T.astype(np.float64)).astype(np.int64) if exact else x @ A.T,
                          call.where)
            return saturate_shifted(acc, _products_shift(call.in_types, call.type, call.attrs), call.bits, own=True)
    prods = check32(A[None, :, :] * x[:, None, :], call.where)
    acc = check32(np.sum(rshift(prods, h), axis=2), call.where)
    return saturate_shifted(acc, _products_shift(call.in_types, call.type, call.attrs), call.bits, own=True)


def _stored_products_sum(A, x, rows, cols, h: int, where: str) -> np.ndarray:
    """sum_j rshift(A[i, j] x[n, j], h) over the non-zero A[i, j] (rows in ascending order, as np.nonzero
    gives them): the dense sum's value, without the products of the zeros. The int32 check sees the zeros'
    products too (0), as the dense form does."""
    prods = A[rows, cols][None, :].astype(np.int64) * x[:, cols].astype(np.int64)
    if prods.size and (prods.min() < INT32_MIN or prods.max() > INT32_MAX):
        check32(np.concatenate([prods.ravel(), [0]]), where)
    running = np.concatenate([np.zeros((len(x), 1), np.int64), np.cumsum(rshift(prods, h), axis=1)], axis=1)
    starts = np.searchsorted(rows, np.arange(A.shape[0]), side="left")
    ends = np.searchsorted(rows, np.arange(A.shape[0]), side="right")
    return running[:, ends] - running[:, starts]


def _float_matvec_rows(ins, batched, attrs, n, rank):
    """A constant matrix times a row per input: with at most one non-zero per row of A (a diagonal, a
    selection: a wide GaussianNB's per-class scalings) each output is one product, which is what the dense
    sum gives exactly (its other terms are zeros), at a fraction of the work (784 x 784 per class)."""
    if batched != [False, True]:
        return None
    A, X = ins
    if A.ndim == 2 and A.size >= ONE_PER_ROW_MIN_SIZE and np.count_nonzero(A, axis=1).max(initial=0) <= 1:
        cols = np.argmax(A != 0, axis=1)
        return X[:, cols] * A[np.arange(A.shape[0]), cols] + 0.0  # + 0.0: the dense sum's +0 for a -0 product
    return X @ A.T


ONE_PER_ROW_MIN_SIZE = 4096  # smaller matrices: the dense product is as quick


register_op(OpDef(
    "matvec", 2, _infer_matvec, lambda xs, a: xs[0] @ xs[1], {"shift": "int?"},
    "A @ x; fixed point: each product is shifted right by `shift` before it is summed",
    evaluate_rows=_float_matvec_rows,
    fixed=_fixed_matvec,
    interval=lambda attrs, ivs, shape: interval_matmul(ivs[0][0], *ivs[1]),
    acc_bound=lambda call: _products_bound(call, 0, 1),
    constant_operand="weights", sparse_operand=0, output_shift=_products_shift,
    macs=lambda ts, stored, out: _stored_or_size(ts[0], stored[0])))


# ---------------------------------------------------------------- matvec_at

def _infer_matvec_at(ts, attrs, declared):
    m, k, x = ts
    float_or_fixed(m, "matrices")
    float_or_fixed(x, "vector")
    same_numeric_kind([m, x])
    need(m.rank == 3, f"matrices operand has shape {m.shape}, expected (n, rows, cols)")
    need(k.dtype == IDX and k.rank == 0, f"selector must be an idx scalar, got {k}")
    need(x.rank == 1 and x.shape[0] == m.shape[2], f"matrices {m.shape} times vector {x.shape}: inner sizes differ")
    for key in ("bias", "bias_q"):
        if key in attrs:
            need(np.shape(attrs[key]) == m.shape[:2], f"{key} has shape {np.shape(attrs[key])}, expected "
                 f"{m.shape[:2]} (a row of biases per matrix)")
    need(not x.dtype.is_fixed or ("bias" in attrs) == ("bias_q" in attrs),
         "a fixed-point matvec_at with a bias needs bias_q, its integers at the accumulator's scale")
    return TensorType((m.shape[1],), result_dtype([m, x], declared))


def _bias_rows(attrs, k) -> np.ndarray | float:
    """The float bias rows of the selected matrices (0 without a bias)."""
    return np.asarray(attrs["bias"], dtype=np.float64)[k] if "bias" in attrs else 0.0


def _rows_matvec_at(ins, batched, attrs, n, rank):
    if batched[0] or not batched[2]:
        return None
    k = ins[1].astype(np.int64) if batched[1] else np.full(n, int(ins[1]))
    return np.einsum("nrc,nc->nr", ins[0][k], ins[2]) + _bias_rows(attrs, k)


def _fixed_matvec_at(call: FixedCall):
    M, k, x = call.ins
    h = call.shift
    if x.ndim == 1:  # a constant vector (no row axis): one row per selector, or a single row
        x = np.broadcast_to(x, (len(k) if k.ndim else 1, x.shape[0]))
    Mk = M[k] if k.ndim else np.broadcast_to(M[int(k)], (len(x),) + M.shape[1:])
    prods = check32(Mk * x[:, None, :], call.where)
    acc = check32(np.sum(rshift(prods, h), axis=2), call.where)
    if "bias_q" in call.attrs:  # integers at the accumulator's scale
        acc = check32(acc + np.asarray(call.attrs["bias_q"], dtype=np.int64)[k], call.where)
    return saturate(rshift(acc, _products_shift(call.in_types, call.type, call.attrs)), call.bits)


def _interval_matvec_at(attrs, ivs, shape):
    stack = ivs[0][0]
    los, his = zip(*(interval_matmul(stack[j], *ivs[2]) for j in range(stack.shape[0])))
    bias = np.asarray(attrs["bias"], dtype=np.float64) if "bias" in attrs else np.zeros(stack.shape[:2])
    return np.min(np.add(los, bias), axis=0), np.max(np.add(his, bias), axis=0)


def _bound_matvec_at(call):
    acc, scale = _products_bound(call, 0, 2)
    if "bias_q" in call.attrs:
        acc += int(np.max(np.abs(np.asarray(call.attrs["bias_q"], dtype=np.int64)), initial=0))
    return acc, scale


register_op(OpDef(
    "matvec_at", 3, _infer_matvec_at, lambda xs, a: xs[0][int(xs[1])] @ xs[2] + _bias_rows(a, int(xs[1])),
    {"shift": "int?", "bias": "array?", "bias_q": "array?"},
    "M[k] @ x + bias[k]: the mat-vec of one matrix of a stack, chosen at run time (tree nodes on a path), "
    "plus that matrix's optional bias row; fixed point: bias_q[k] (integers at the accumulator's scale) is added "
    "to the sum of the shifted products",
    evaluate_rows=_rows_matvec_at, fixed=_fixed_matvec_at, interval=_interval_matvec_at,
    acc_bound=_bound_matvec_at,
    constant_operand="weights", output_shift=_products_shift,
    macs=lambda ts, stored, out: ts[0].shape[1] * ts[0].shape[2]))


# ---------------------------------------------------------------- sqdist

def infer_sqdist(ts, attrs, declared):
    x, m = ts
    float_or_fixed(x, "point")
    float_or_fixed(m, "matrix")
    same_numeric_kind(ts)
    need(x.rank == 1, f"point has shape {x.shape}, expected rank 1")
    need(m.rank == 2 and m.shape[0] == x.shape[0], f"matrix has shape {m.shape}, expected ({x.shape[0]}, columns)")
    # the integer form subtracts the stored ints: both must mean the same unit
    need(not x.dtype.is_fixed or m.dtype.scale == x.dtype.scale,
         f"prototypes at scale {m.dtype.scale} and point at scale {x.dtype.scale}: "
         "fixed-point distances need one scale")
    return TensorType((m.shape[1],), result_dtype(ts, declared))


VECTOR_TERMS = 2**21  # (rows, k, m) int64 temporaries up to 16 MB: one numpy pass instead of k


def sqdist_accumulators(x: np.ndarray, M: np.ndarray, h: int, where: str) -> np.ndarray:
    """The int32 sums of rshift(M_ij - x_i, h)^2 of a fixed-point distance, (rows, m)."""
    if x.shape[0] * M.size <= VECTOR_TERMS:  # few points (GaussianNB's one per class): all terms at once
        d = rshift(check32(M[None, :, :] - x[:, :, None], where), h)
        return check32(np.sum(check32(d * d, where), axis=1), where)
    acc = np.zeros((x.shape[0], M.shape[1]), dtype=np.int64)
    for i in range(M.shape[0]):  # one (rows, m) term at a time: no (rows, k, m) temporary
        d = rshift(check32(M[i][None, :] - x[:, i, None], where), h)
        acc += check32(d * d, where)
    return check32(acc, where)


def _fixed_sqdist(call: FixedCall):
    x, M = call.ins
    acc = sqdist_accumulators(x, M, call.shift, call.where)
    return saturate(rshift(acc, _sqdist_shift(call.in_types, call.type, call.attrs)), call.bits)


def rows_sqdist(ins, batched, attrs, n, rank):
    if batched != [True, False]:
        return None
    x, M = ins
    acc = np.zeros((x.shape[0], M.shape[1]))
    for i in range(M.shape[0]):
        acc += (M[i][None, :] - x[:, i, None]) ** 2
    return acc


def interval_sqdist(attrs, ivs, shape):
    (xl, xh), (M, _) = ivs
    dl, dh = M - xh[:, None], M - xl[:, None]
    sq_hi = np.maximum(dl**2, dh**2)
    sq_lo = np.where((dl <= 0) & (dh >= 0), 0.0, np.minimum(dl**2, dh**2))
    return sq_lo.sum(axis=0), sq_hi.sum(axis=0)


def bound_sqdist(call):
    """k terms, each a square of |M| + |x| (after the difference shift)."""
    Mq = call.consts[1]
    h = int(call.attrs.get("shift", 0))
    d = int(np.max(np.abs(Mq))) + call.bounds[0]
    return Mq.shape[0] * rshift_bound(d, h) ** 2, 2 * (call.scales[0] - h)


register_op(OpDef(
    "sqdist", 2, infer_sqdist, lambda xs, a: np.sum((xs[1] - xs[0][:, None]) ** 2, axis=0), {"shift": "int?"},
    "squared L2 distance from a point (k,) to each column of a matrix (k, m); fixed point: "
    "each difference is shifted right by `shift` before it is squared",
    evaluate_rows=rows_sqdist, fixed=_fixed_sqdist, interval=interval_sqdist, acc_bound=bound_sqdist,
    constant_operand="prototypes", output_shift=_sqdist_shift, macs=lambda ts, stored, out: ts[1].size))


# ---------------------------------------------------------------- wsqdist

def infer_wsqdist(ts, attrs, declared):
    x, w, t = ts
    float_or_fixed(x, "point")
    same_numeric_kind(ts)
    need(x.rank == 1, f"point has shape {x.shape}, expected rank 1")
    for what, m in (("weights", w), ("targets", t)):
        float_or_fixed(m, what)
        need(m.rank == 2 and m.shape[1] == x.shape[0], f"{what} have shape {m.shape}, expected (classes, {x.shape[0]})")
    need(w.shape == t.shape, f"weights {w.shape} and targets {t.shape} differ in shape")
    # the product w x is shifted right to the targets' scale: never left
    need(not x.dtype.is_fixed or wsqdist_product_shift(ts) >= 0,
         f"weights at scale {w.dtype.scale} times a point at scale {x.dtype.scale} are coarser than the targets' "
         f"scale {t.dtype.scale}")
    return TensorType((w.shape[0],), result_dtype(ts, declared))


def wsqdist_product_shift(ts) -> int:
    """k: the right shift from a product w x to the targets' scale."""
    return ts[1].dtype.scale + ts[0].dtype.scale - ts[2].dtype.scale


def _wsqdist_shift(ts, out, attrs) -> int:
    """Squares of terms at the targets' scale: 2 scale_t, to the result's."""
    return 2 * ts[2].dtype.scale - out.dtype.scale


def wsqdist_terms(W: np.ndarray, T: np.ndarray) -> list[np.ndarray]:
    """Per class, the features whose term can be non-zero (w or t non-zero): the only ones C stores."""
    return [np.flatnonzero((W[c] != 0) | (T[c] != 0)) for c in range(W.shape[0])]


def _fixed_wsqdist(call: FixedCall):
    x, W, T = call.ins
    k = wsqdist_product_shift(call.in_types)
    acc = np.zeros((x.shape[0], W.shape[0]), dtype=np.int64)
    for c, cols in enumerate(wsqdist_terms(W, T)):  # a term with w = t = 0 is 0: skipped, as C skips it
        e = saturate(rshift(check32(W[c, cols][None, :] * x[:, cols], call.where), k) - T[c, cols][None, :], 16)
        acc[:, c] = np.sum(e * e, axis=1)  # int64: D squares below 2^30 fit
    return saturate(rshift(acc, _wsqdist_shift(call.in_types, call.type, call.attrs)), call.bits)


def _rows_wsqdist(ins, batched, attrs, n, rank):
    if batched != [True, False, False]:
        return None
    x, W, T = ins
    out = np.zeros((x.shape[0], W.shape[0]))
    for c in range(W.shape[0]):
        out[:, c] = np.sum((x * W[c][None, :] - T[c][None, :]) ** 2, axis=1)
    return out


def _interval_wsqdist(attrs, ivs, shape):
    (xl, xh), (W, _), (T, _) = ivs
    a, b = W * xl[None, :] - T, W * xh[None, :] - T  # each term's ends: w x - t is monotone in x
    sq_hi = np.maximum(a**2, b**2)
    sq_lo = np.where(np.minimum(a, b) * np.maximum(a, b) <= 0, 0.0, np.minimum(a**2, b**2))
    return sq_lo.sum(axis=1), sq_hi.sum(axis=1)


def _bound_wsqdist(call):
    """Each term |rshift(w x, k) - t| <= rshift_bound(|w| |x|, k) + |t| (and 2^15, saturated); the largest
    class's sum of squares."""
    Wq, Tq = call.consts[1].astype(np.int64), call.consts[2].astype(np.int64)
    k = call.scales[1] + call.scales[0] - call.scales[2]
    terms = np.array([[min(rshift_bound(int(w) * call.bounds[0], k) + int(t), 2**15) for w, t in zip(wr, tr)]
                      for wr, tr in zip(np.abs(Wq), np.abs(Tq))], dtype=np.int64)
    return int(np.max(np.sum(terms * terms, axis=1), initial=0)), 2 * call.scales[2]


register_op(OpDef(
    "wsqdist", 3, infer_wsqdist, lambda xs, a: np.sum((xs[1] * xs[0][None, :] - xs[2]) ** 2, axis=1),
    {},
    "weighted squared distance per class c (rows of W and T): d_c = sum_j (W_cj x_j - T_cj)^2 (GaussianNB's "
    "standardised distances, all classes at once); fixed point: W at its own scale, T at the terms' scale, "
    "each product rounded to the terms' scale (right shift k = s_W + s_x - s_T), T subtracted, the term "
    "saturated to 16 bits; the squares summed in 64 bits, rounded to the result's scale and saturated "
    "(scale choice keeps 2 s_T - s_result <= 14: a saturated term then saturates the result too)",
    evaluate_rows=_rows_wsqdist, fixed=_fixed_wsqdist, interval=_interval_wsqdist, acc_bound=_bound_wsqdist,
    constant_operand="weighted_targets", output_shift=_wsqdist_shift,
    macs=lambda ts, stored, out: ts[1].size))
