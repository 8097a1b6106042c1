"""Building blocks shared by the model families' lowerings to the IR."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import dense_to_sparse_attrs
from tinycc_ml.ir.types import F32, IDX, TensorType

# Below this fraction of non-zeros a matrix is stored sparse: CSC costs a value and an index
# per non-zero, so it pays off once fewer than about half the entries are non-zero.
SPARSE_DENSITY = 0.5


def add_input(g: Graph, dim: int) -> str:
    return g.add("input", attrs={"name": "x"}, type=TensorType((dim,), F32), name="x")


def add_normalisation(g: Graph, x: str, mean, std) -> str:
    """(x - mean) * (1 / std), or x itself when there is no normalisation."""
    if mean is None and std is None:
        return x
    dim = g.type(x).shape[0]
    mean = np.zeros(dim) if mean is None else np.asarray(mean, dtype=np.float64)
    inv_std = np.ones(dim) if std is None else 1.0 / np.asarray(std, dtype=np.float64)
    m = g.add("const", attrs={"value": mean.astype(np.float32)}, name="mean")
    s = g.add("const", attrs={"value": inv_std.astype(np.float32)}, name="inv_std")
    return g.add("mul", [g.add("sub", [x, m], name="centred"), s], name="normalised")


def add_diagonal_normalisation(g: Graph, x: str, mean, std) -> str:
    """(x - mean) / std as ``diag(1 / std) x - mean / std``: a (sparse) mat-vec, so that integer
    code scales each feature on its own (a vector ``mul`` shares one scale across features and
    loses the narrow ones), then a subtraction that can fold into following distances."""
    if mean is None and std is None:
        return x
    dim = g.type(x).shape[0]
    mean = np.zeros(dim) if mean is None else np.asarray(mean, dtype=np.float64)
    inv_std = np.ones(dim) if std is None else 1.0 / np.asarray(std, dtype=np.float64)
    scaled = g.add("matvec", [add_matrix(g, "inv_std", np.diag(inv_std)), x], name="scaled")
    if not np.any(mean):
        return scaled
    return g.add("sub", [scaled, add_const(g, "scaled_mean", mean * inv_std)], name="normalised")


def add_matrix(g: Graph, name: str, matrix) -> str:
    """A constant matrix, stored sparse (CSC) when that is smaller."""
    m32 = np.asarray(matrix, dtype=np.float32)
    if m32.ndim == 2 and np.count_nonzero(m32) < SPARSE_DENSITY * m32.size:
        return g.add("sparse_const", attrs=dense_to_sparse_attrs(m32), name=name)
    return g.add("const", attrs={"value": m32}, name=name)


def add_const(g: Graph, name: str, value) -> str:
    return g.add("const", attrs={"value": np.asarray(value, dtype=np.float32)}, name=name)


def add_index(g: Graph, name: str, value: int) -> str:
    return g.add("const", attrs={"value": np.array(value, dtype=np.int32)}, type=TensorType((), IDX), name=name)


def absorb_normalisation(W: np.ndarray, b: np.ndarray, mean, std) -> tuple[np.ndarray, np.ndarray]:
    """(W', b') with ``W' x + b' == W ((x - mean) / std) + b`` (folding a step before a first mat-vec)."""
    if std is not None:
        W = W / std[None, :]
    if mean is not None:
        b = b - W @ mean
    return W, b
