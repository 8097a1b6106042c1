"""Leaves: the model input and constants (dense, and sparse in CSC form).

Sparse constants (``sparse_const``) are stored in compressed sparse column (CSC) form:
``values`` (nnz,), ``row_indices`` (nnz,) int32, ``col_ptr`` (cols + 1,) int32 with
column ``j`` holding ``values[col_ptr[j]:col_ptr[j+1]]`` at rows ``row_indices[...]``, rows
ascending inside a column, and ``shape`` = (rows, cols).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import F32, TensorType


def _infer_input(ts, attrs, declared):
    need(declared is not None, "an input needs a declared type")
    need(declared.rank == 1 or declared.layout, f"inputs are vectors or tensors with a layout, got shape "
         f"{declared.shape}")
    return declared


def _constant_interval(attrs, ivs, shape, op="const"):
    v = OPS_EVAL[op](attrs)
    return v, v


register_op(OpDef(
    "input", None, _infer_input, lambda xs, a: None, {"name": "str"}, "a model input vector", leaf=True,
    fixed=lambda call: None,  # the interpreters bind the input rows
    interval=lambda attrs, ivs, shape: None,  # range analysis binds the declared input range
    acc_bound=lambda call: (2 ** (call.out_bits - 1), call.out_scale),
    unsupported={}))


def _infer_const(ts, attrs, declared):
    value = attrs["value"]
    need(isinstance(value, np.ndarray), "value must be an array")
    dtype = declared.dtype if declared is not None else F32
    # the messages formatted only for a failing check (every node added and verified passes here)
    if dtype.is_float:
        if value.dtype != np.float32:
            need(False, f"an f32 constant must hold float32 values, got {value.dtype}")
    else:
        if not np.issubdtype(value.dtype, np.integer):
            need(False, f"a {dtype} constant must hold integers, got {value.dtype}")
        if dtype.is_fixed or dtype.is_quantised:
            lo, hi = -(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1
            held = np.iinfo(value.dtype)  # an int16 array for a 16-bit type holds nothing outside it
            if not (value.size == 0 or (held.min >= lo and held.max <= hi)
                    or (value.min() >= lo and value.max() <= hi)):
                need(False, f"a {dtype} constant holds values outside [{lo}, {hi}]")
    return TensorType(value.shape, dtype, declared.layout if declared is not None else "")


def _infer_sparse(ts, attrs, declared):
    need(len(attrs["shape"]) == 2, f"a sparse constant is a matrix, shape {list(attrs['shape'])} is not 2-D")
    rows, cols = (int(d) for d in attrs["shape"])
    values, row_idx, col_ptr = attrs["values"], attrs["row_indices"], attrs["col_ptr"]
    need(row_idx.dtype.kind in "iu" and col_ptr.dtype.kind in "iu" and row_idx.ndim == col_ptr.ndim == 1,
         "row_indices and col_ptr must be 1-D integer arrays")
    need(col_ptr.shape == (cols + 1,), f"col_ptr has {col_ptr.shape[0]} entries, expected {cols + 1}")
    need(col_ptr[0] == 0 and np.all(np.diff(col_ptr) >= 0), "col_ptr must start at 0 and never decrease")
    need(col_ptr[-1] == values.shape[0] == row_idx.shape[0],
         f"col_ptr ends at {col_ptr[-1]} but there are {values.shape[0]} values and {row_idx.shape[0]} row indices")
    need(row_idx.size == 0 or (row_idx.min() >= 0 and row_idx.max() < rows), "a row index is out of range")
    # rows ascend within each column: every step between neighbours is > 0 except where a column starts
    # (one vectorised pass: a Python loop over the columns made a 10^7-column file take minutes)
    steps_ok = np.diff(row_idx if row_idx.dtype.kind == "i" else row_idx.astype(np.int64)) > 0
    starts = col_ptr[1:-1]
    steps_ok[starts[(starts > 0) & (starts < row_idx.size)] - 1] = True
    if not np.all(steps_ok):
        first = int(np.argmin(steps_ok)) + 1  # the entry whose row does not ascend
        need(False, f"column {int(np.searchsorted(col_ptr, first, side='right')) - 1}: row indices not ascending")
    dtype = declared.dtype if declared is not None else F32
    return TensorType((rows, cols), dtype)


def sparse_to_dense(attrs, dtype=np.float64) -> np.ndarray:
    rows, cols = (int(d) for d in attrs["shape"])
    dense = np.zeros((rows, cols), dtype=dtype)
    columns = np.repeat(np.arange(cols), np.diff(np.asarray(attrs["col_ptr"], dtype=np.int64)))
    dense[np.asarray(attrs["row_indices"], dtype=np.int64), columns] = attrs["values"]
    return dense


def dense_to_sparse_attrs(matrix: np.ndarray) -> dict:
    """CSC attributes of ``matrix`` (zeros dropped), values kept in ``matrix``'s dtype."""
    rows, cols = matrix.shape
    nz_cols, nz_rows = np.nonzero(matrix.T)  # column-major: by column, rows ascending within each
    counts = np.bincount(nz_cols, minlength=cols)
    return {
        "shape": [rows, cols],
        "values": np.asarray(matrix[nz_rows, nz_cols], dtype=matrix.dtype),
        "row_indices": nz_rows.astype(np.int32),
        "col_ptr": np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
    }


OPS_EVAL = {
    "const": lambda a: a["value"].astype(np.float64),
    "sparse_const": lambda a: sparse_to_dense(a),
}
# integer values of a constant at its type's scale
CONST_INTS = {
    "const": lambda a: a["value"].astype(np.int64),
    "sparse_const": lambda a: sparse_to_dense(a, np.int64),
}

for _name, _infer, _attrs, _doc in (
        ("const", _infer_const, {"value": "array"}, "a dense constant tensor"),
        ("sparse_const", _infer_sparse, {"shape": "ints", "values": "array", "row_indices": "array",
                                         "col_ptr": "array"}, "a sparse constant matrix in CSC form")):
    register_op(OpDef(
        _name, None, _infer, (lambda op: lambda xs, a: OPS_EVAL[op](a))(_name), _attrs, _doc, leaf=True,
        fixed=(lambda op: lambda call: CONST_INTS[op](call.attrs))(_name),
        interval=(lambda op: lambda attrs, ivs, shape: _constant_interval(attrs, ivs, shape, op))(_name),
        acc_bound=lambda call: (2 ** (call.out_bits - 1), call.out_scale)))
