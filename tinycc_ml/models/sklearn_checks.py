"""Checks shared by the converters of fitted scikit-learn objects (no model family imported here)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError


def require_fitted(estimator) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise CompileError(f"{type(estimator).__name__} is not fitted; call fit(X, y) before compiling") from None


def dense(array, what: str) -> np.ndarray:
    from scipy import sparse

    if sparse.issparse(array):
        raise CompileError(f"{what} is a sparse matrix; fit on dense data to compile")
    return np.asarray(array, dtype=np.float64)
