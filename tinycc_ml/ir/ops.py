"""The op registry. Each op is one entry holding its arity, attributes, its type rule and its
float reference semantics (numpy, float64). Fixed-point semantics live beside the fixed-point
interpreter; anything that runs compiled code is tested against these definitions.

Sparse constants (``sparse_const``) are stored in compressed sparse column (CSC) form:
``values`` (nnz,), ``row_indices`` (nnz,) int32, ``col_ptr`` (cols + 1,) int32 with
column ``j`` holding ``values[col_ptr[j]:col_ptr[j+1]]`` at rows ``row_indices[...]``, rows
ascending inside a column, and ``shape`` = (rows, cols).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tinycc_ml.ir.types import BOOL, F32, IDX, DType, TensorType


class TypeRuleError(Exception):
    """Raised by a type rule; the verifier adds the node's name."""


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int | None  # None: the op takes no operands and gets its type from the node
    infer: Callable[[list[TensorType], dict, TensorType | None], TensorType]
    evaluate: Callable[[list[np.ndarray], dict], np.ndarray]
    # name -> "int"|"float"|"str"|"array"|"ints"; a trailing "?" marks an optional attribute
    # (fixed-point graphs carry shift amounts and tables that float graphs do not)
    attrs: dict[str, str] = field(default_factory=dict)
    doc: str = ""


OPS: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    return op


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise TypeRuleError(message)


def _float_or_fixed(t: TensorType, what: str) -> None:
    _need(t.dtype.kind in ("f32", "fx"), f"{what} must be numeric (f32 or fixed), got {t.dtype}")


def _same_numeric_kind(ts: list[TensorType]) -> None:
    kinds = {t.dtype.kind for t in ts}
    _need(len(kinds) == 1, f"operands mix element types {', '.join(str(t.dtype) for t in ts)}")


def _result_dtype(ts: list[TensorType], declared: TensorType | None) -> DType:
    # A fixed-point result carries the scale the scale-selection pass chose, so it is declared.
    if ts[0].dtype.is_fixed:
        _need(declared is not None and declared.dtype.is_fixed, "a fixed-point result needs a declared fixed type")
        return declared.dtype
    return ts[0].dtype


# ---------------------------------------------------------------- leaves


def _infer_input(ts, attrs, declared):
    _need(declared is not None, "an input needs a declared type")
    _need(declared.rank == 1, f"inputs are vectors, got shape {declared.shape}")
    return declared


register_op(OpDef("input", None, _infer_input, lambda xs, a: None, {"name": "str"}, "a model input vector"))


def _infer_const(ts, attrs, declared):
    value = attrs["value"]
    _need(isinstance(value, np.ndarray), "value must be an array")
    dtype = declared.dtype if declared is not None else F32
    if dtype.is_float:
        _need(value.dtype == np.float32, f"an f32 constant must hold float32 values, got {value.dtype}")
    else:
        _need(np.issubdtype(value.dtype, np.integer), f"a {dtype} constant must hold integers, got {value.dtype}")
        if dtype.is_fixed:
            lo, hi = -(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1
            _need(value.size == 0 or (value.min() >= lo and value.max() <= hi),
                  f"a {dtype} constant holds values outside [{lo}, {hi}]")
    return TensorType(value.shape, dtype)


register_op(OpDef("const", None, _infer_const, lambda xs, a: a["value"].astype(np.float64), {"value": "array"},
                  "a dense constant tensor"))


def _infer_sparse(ts, attrs, declared):
    _need(len(attrs["shape"]) == 2, f"a sparse constant is a matrix, shape {list(attrs['shape'])} is not 2-D")
    rows, cols = (int(d) for d in attrs["shape"])
    values, row_idx, col_ptr = attrs["values"], attrs["row_indices"], attrs["col_ptr"]
    _need(col_ptr.shape == (cols + 1,), f"col_ptr has {col_ptr.shape[0]} entries, expected {cols + 1}")
    _need(col_ptr[0] == 0 and np.all(np.diff(col_ptr) >= 0), "col_ptr must start at 0 and never decrease")
    _need(col_ptr[-1] == values.shape[0] == row_idx.shape[0],
          f"col_ptr ends at {col_ptr[-1]} but there are {values.shape[0]} values and {row_idx.shape[0]} row indices")
    _need(row_idx.size == 0 or (row_idx.min() >= 0 and row_idx.max() < rows), "a row index is out of range")
    for j in range(cols):
        _need(np.all(np.diff(row_idx[col_ptr[j]:col_ptr[j + 1]]) > 0), f"column {j}: row indices not ascending")
    dtype = declared.dtype if declared is not None else F32
    return TensorType((rows, cols), dtype)


def sparse_to_dense(attrs) -> np.ndarray:
    rows, cols = (int(d) for d in attrs["shape"])
    dense = np.zeros((rows, cols), dtype=np.float64)
    col_ptr = attrs["col_ptr"]
    for j in range(cols):
        span = slice(col_ptr[j], col_ptr[j + 1])
        dense[attrs["row_indices"][span], j] = attrs["values"][span]
    return dense


def dense_to_sparse_attrs(matrix: np.ndarray) -> dict:
    """CSC attributes of ``matrix`` (zeros dropped), values kept in ``matrix``'s dtype."""
    rows, cols = matrix.shape
    values, row_idx, col_ptr = [], [], [0]
    for j in range(cols):
        nz = np.nonzero(matrix[:, j])[0]
        row_idx.extend(nz.tolist())
        values.extend(matrix[nz, j].tolist())
        col_ptr.append(len(row_idx))
    return {
        "shape": [rows, cols],
        "values": np.asarray(values, dtype=matrix.dtype),
        "row_indices": np.asarray(row_idx, dtype=np.int32),
        "col_ptr": np.asarray(col_ptr, dtype=np.int32),
    }


register_op(OpDef("sparse_const", None, _infer_sparse, lambda xs, a: sparse_to_dense(a),
                  {"shape": "ints", "values": "array", "row_indices": "array", "col_ptr": "array"},
                  "a sparse constant matrix in CSC form"))


# ---------------------------------------------------------------- linear algebra


def _infer_matvec(ts, attrs, declared):
    a, x = ts
    _float_or_fixed(a, "matrix")
    _float_or_fixed(x, "vector")
    _same_numeric_kind(ts)
    _need(a.rank == 2, f"matrix operand has shape {a.shape}, expected rank 2")
    _need(x.rank == 1, f"vector operand has shape {x.shape}, expected rank 1")
    _need(a.shape[1] == x.shape[0], f"matrix {a.shape} times vector {x.shape}: inner sizes differ")
    return TensorType((a.shape[0],), _result_dtype(ts, declared))


register_op(OpDef("matvec", 2, _infer_matvec, lambda xs, a: xs[0] @ xs[1], {"shift": "int?"},
                  "A @ x; fixed point: each product is shifted right by `shift` before it is summed"))


def _infer_sqdist(ts, attrs, declared):
    x, m = ts
    _float_or_fixed(x, "point")
    _float_or_fixed(m, "matrix")
    _same_numeric_kind(ts)
    _need(x.rank == 1, f"point has shape {x.shape}, expected rank 1")
    _need(m.rank == 2 and m.shape[0] == x.shape[0],
          f"matrix has shape {m.shape}, expected ({x.shape[0]}, columns)")
    return TensorType((m.shape[1],), _result_dtype(ts, declared))


register_op(OpDef("sqdist", 2, _infer_sqdist,
                  lambda xs, a: np.sum((xs[1] - xs[0][:, None]) ** 2, axis=0), {"shift": "int?"},
                  "squared L2 distance from a point (k,) to each column of a matrix (k, m); fixed point: "
                  "each difference is shifted right by `shift` before it is squared"))


# ---------------------------------------------------------------- elementwise


def _infer_binary(ts, attrs, declared):
    a, b = ts
    _float_or_fixed(a, "left operand")
    _float_or_fixed(b, "right operand")
    _same_numeric_kind(ts)
    _need(a.shape == b.shape or a.rank == 0 or b.rank == 0,
          f"operand shapes {a.shape} and {b.shape} differ (only a scalar broadcasts)")
    shape = a.shape if a.rank >= b.rank else b.shape
    return TensorType(shape, _result_dtype(ts, declared))


for _name, _fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply)):
    register_op(OpDef(_name, 2, _infer_binary, (lambda f: lambda xs, a: f(xs[0], xs[1]))(_fn), {},
                      f"elementwise {_name}; a scalar operand broadcasts"))


def _infer_unary(ts, attrs, declared):
    (a,) = ts
    _float_or_fixed(a, "operand")
    return TensorType(a.shape, _result_dtype(ts, declared))


register_op(OpDef("scale", 1, _infer_unary, lambda xs, a: xs[0] * a["factor"],
                  {"factor": "float", "factor_q": "int?", "factor_scale": "int?"},
                  "multiply by a constant scalar factor"))
register_op(OpDef("exp", 1, _infer_unary, lambda xs, a: np.exp(xs[0]), {}, "elementwise e^x"))
register_op(OpDef("tanh", 1, _infer_unary, lambda xs, a: np.tanh(xs[0]), {}, "elementwise tanh"))
register_op(OpDef("tanh_clamp", 1, _infer_unary, lambda xs, a: np.clip(xs[0], -1.0, 1.0), {},
                  "Bonsai's tanh approximation: x for |x| < 1, else sign(x)"))
register_op(OpDef("sign", 1, _infer_unary, lambda xs, a: np.sign(xs[0]), {}, "elementwise sign: -1, 0 or 1"))
register_op(OpDef("clip", 1, _infer_unary, lambda xs, a: np.clip(xs[0], a["lo"], a["hi"]),
                  {"lo": "bound", "hi": "bound"}, "clamp into [lo, hi] (scalars, or one bound per element)"))


def _infer_sum(ts, attrs, declared):
    (a,) = ts
    _float_or_fixed(a, "operand")
    return TensorType((), _result_dtype(ts, declared))


register_op(OpDef("sum", 1, _infer_sum, lambda xs, a: np.sum(xs[0]), {"shift": "int?"}, "sum of all elements"))


def _infer_arg(ts, attrs, declared):
    (a,) = ts
    _float_or_fixed(a, "operand")
    _need(a.rank == 1, f"operand has shape {a.shape}, expected a vector")
    return TensorType((), IDX)


register_op(OpDef("argmax", 1, _infer_arg, lambda xs, a: np.asarray(np.argmax(xs[0])), {},
                  "index of the largest element; the first one on ties"))
register_op(OpDef("argmin", 1, _infer_arg, lambda xs, a: np.asarray(np.argmin(xs[0])), {},
                  "index of the smallest element; the first one on ties"))

COMPARISONS = {"gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
               "eq": np.equal, "ne": np.not_equal}


def _infer_cmp(ts, attrs, declared):
    _need(attrs["pred"] in COMPARISONS, f"pred {attrs['pred']!r} is not one of {', '.join(COMPARISONS)}")
    out = _infer_binary(ts, attrs, None)
    return TensorType(out.shape, BOOL)


register_op(OpDef("cmp", 2, _infer_cmp, lambda xs, a: COMPARISONS[a["pred"]](xs[0], xs[1]), {"pred": "str"},
                  "elementwise comparison giving bool"))


def _infer_select(ts, attrs, declared):
    c, a, b = ts
    _need(c.dtype == BOOL, f"condition must be bool, got {c.dtype}")
    _need(a.dtype.kind == b.dtype.kind and a.shape == b.shape,
          f"branches differ: {a} and {b}")
    _need(c.shape == a.shape or c.rank == 0, f"condition shape {c.shape} does not match {a.shape}")
    return TensorType(a.shape, _result_dtype([a, b], declared))


register_op(OpDef("select", 3, _infer_select, lambda xs, a: np.where(xs[0], xs[1], xs[2]), {},
                  "elementwise choice: cond ? a : b"))


def _infer_take(ts, attrs, declared):
    table, i = ts
    _need(table.rank == 1, f"table has shape {table.shape}, expected a vector")
    _need(i.dtype == IDX and i.rank == 0, f"index must be an idx scalar, got {i}")
    return TensorType((), table.dtype)


register_op(OpDef("take", 2, _infer_take, lambda xs, a: np.asarray(xs[0][int(xs[1])]), {},
                  "table[i] for a vector table and an idx scalar"))

register_op(OpDef(
    "exp_lut", 1, _infer_unary, lambda xs, a: np.exp(a.get("factor", 1.0) * np.clip(xs[0], a["lo"], a["hi"])),
    {"lo": "float", "hi": "float", "lo_q": "int", "hi_q": "int", "drop_bits": "int", "low_bits": "int",
     "table_hi": "array", "table_lo": "array", "hi_scale": "int", "lo_scale": "int", "factor": "float?"},
    "e^(factor x) by two tables over [lo, hi] (inputs outside clamp): with t = (clamp(x) - lo) >> drop_bits, "
    "e^(factor x) ~ table_hi[t >> low_bits] * table_lo[t & (2^low_bits - 1)]; see passes/exp_table.py"))
register_op(OpDef(
    "tanh_lut", 1, _infer_unary, lambda xs, a: np.tanh(xs[0]),
    {"drop_bits": "int", "in_max_q": "int", "table": "array", "table_scale": "int"},
    "tanh by one table over [0, in_max] with odd symmetry and linear interpolation between entries "
    "2^drop_bits input steps apart; see tinycc_ml.ir.fixed.tanh_lut_value and passes/tanh_approx.py"))


def _infer_matvec_at(ts, attrs, declared):
    m, k, x = ts
    _float_or_fixed(m, "matrices")
    _float_or_fixed(x, "vector")
    _same_numeric_kind([m, x])
    _need(m.rank == 3, f"matrices operand has shape {m.shape}, expected (n, rows, cols)")
    _need(k.dtype == IDX and k.rank == 0, f"selector must be an idx scalar, got {k}")
    _need(x.rank == 1 and x.shape[0] == m.shape[2], f"matrices {m.shape} times vector {x.shape}: inner sizes differ")
    return TensorType((m.shape[1],), _result_dtype([m, x], declared))


register_op(OpDef("matvec_at", 3, _infer_matvec_at, lambda xs, a: xs[0][int(xs[1])] @ xs[2], {"shift": "int?"},
                  "M[k] @ x: the mat-vec of one matrix of a stack, chosen at run time (tree nodes on a path)"))


def _infer_branch(ts, attrs, declared):
    k, s = ts
    _need(k.dtype == IDX and k.rank == 0, f"node must be an idx scalar, got {k}")
    _float_or_fixed(s, "branch value")
    _need(s.size == 1, f"branch value must hold one element, got shape {s.shape}")
    return TensorType((), IDX)


register_op(OpDef("branch", 2, _infer_branch,
                  lambda xs, a: np.asarray(2 * int(xs[0]) + (1 if float(np.reshape(xs[1], -1)[0]) > 0 else 2)), {},
                  "child of node k in a complete binary tree: 2k+1 if value > 0, else 2k+2"))


def _infer_segment_min(ts, attrs, declared):
    (a,) = ts
    _float_or_fixed(a, "operand")
    offsets = list(attrs["offsets"])
    _need(a.rank == 1, f"operand has shape {a.shape}, expected a vector")
    _need(len(offsets) >= 2 and offsets[0] == 0 and offsets[-1] == a.shape[0],
          f"offsets must run from 0 to {a.shape[0]}")
    _need(all(lo < hi for lo, hi in zip(offsets, offsets[1:])), "every segment must be non-empty")
    return TensorType((len(offsets) - 1,), _result_dtype(ts, declared))


register_op(OpDef("segment_min", 1, _infer_segment_min,
                  lambda xs, a: np.array([xs[0][lo:hi].min() for lo, hi in zip(a["offsets"], a["offsets"][1:])]),
                  {"offsets": "ints"},
                  "minimum of each contiguous segment [offsets[c], offsets[c+1]) (per-class nearest distance)"))


def kvote_counts(d: np.ndarray, labels: np.ndarray, k: int, n_classes: int) -> np.ndarray:
    """Votes of the k smallest entries of d (a stable sort: equal values keep the lower index)."""
    nearest = np.argsort(d, kind="stable")[:k]
    return np.bincount(labels[nearest], minlength=n_classes).astype(np.float64)


def _infer_kvote(ts, attrs, declared):
    (d,) = ts
    _float_or_fixed(d, "distances")
    labels = attrs["labels"]
    _need(d.rank == 1 and labels.shape == d.shape, f"labels {labels.shape} must match distances {d.shape}")
    _need(1 <= attrs["k"] <= d.shape[0], f"k = {attrs['k']} must be in [1, {d.shape[0]}]")
    _need(labels.size == 0 or (labels.min() >= 0 and labels.max() < attrs["n_classes"]), "a label is out of range")
    return TensorType((int(attrs["n_classes"]),), _result_dtype(ts, declared))


register_op(OpDef("kvote", 1, _infer_kvote,
                  lambda xs, a: kvote_counts(xs[0], a["labels"], int(a["k"]), int(a["n_classes"])),
                  {"k": "int", "n_classes": "int", "labels": "array"},
                  "votes per class among the k smallest distances; equal distances: the lower index first"))
