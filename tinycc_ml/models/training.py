"""What every trainer shares: training and prediction data checked in scikit-learn's terms (with
tinycc-ml's errors), the estimators' parameters kept as given, class labels of any values, the hard
threshold of iterative hard thresholding, and progress logging.

Logging: trainers log progress on the ``tinycc_ml.train`` logger. ``verbose=0`` (the default of
every estimator) logs at DEBUG, so nothing shows unless the application asks for it;
``verbose >= 1`` logs at INFO and, when the application has configured no logging at all, sends
the ``tinycc_ml`` loggers' INFO lines to stderr.
"""

from __future__ import annotations

import logging
import sys
import time

import numpy as np

from tinycc_ml.errors import DataError, DataTypeError, ModelFileError

logger = logging.getLogger("tinycc_ml.train")


def keep_parameters(estimator, parameters: dict) -> None:
    """Store each ``__init__`` argument on ``estimator`` under its own name, as given: scikit-learn's
    rule for estimators (``get_params`` and ``clone`` read them back; checks belong in ``fit``).
    Every trainer's ``__init__`` is ``keep_parameters(self, locals())``, so a regressor that lists
    other defaults than its classifier does not repeat the classifier's assignments."""
    for name, value in parameters.items():
        if name != "self" and not name.startswith("__"):
            setattr(estimator, name, value)


def _as_data_error(exc: Exception) -> DataError:
    return DataTypeError(str(exc)) if isinstance(exc, TypeError) else DataError(str(exc))


def _check_finite(X: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(X)):
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"X holds a non-finite value ({X[row, col]}: NaN or inf) at row {row}, column {col}")
    return X


def check_training_data(estimator, X, y, multi_output: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Finite float64 X (n, D) and y (n,) (or (n, L) when ``multi_output``), with scikit-learn's
    checks and messages; sets ``n_features_in_`` on ``estimator``. Raises DataError."""
    from sklearn.utils.validation import validate_data  # scikit-learn loads only when training

    try:
        X, y = validate_data(estimator, X, y, dtype=np.float64, multi_output=multi_output,
                             ensure_all_finite=False, ensure_min_samples=2)
    except (ValueError, TypeError) as exc:
        if not multi_output and _is_label_matrix(y):
            # scikit-learn says only "y should be a 1d array": say that this is a label matrix
            from sklearn.base import is_regressor

            what = ("a regressor takes one target value per row" if is_regressor(estimator)
                    else "it takes one label per row (ProtoNNClassifier takes a 0/1 label matrix)")
            raise DataError(f"y has shape {np.asarray(y).shape}: multilabel (or multi-output) targets given to "
                            f"{type(estimator).__name__}; {what}") from None
        raise _as_data_error(exc) from None
    return _check_finite(X), y


def _is_label_matrix(y) -> bool:
    try:
        shape = np.asarray(y).shape
    except (ValueError, TypeError):  # ragged
        return False
    return len(shape) == 2 and shape[1] > 1


def encode_labels(y) -> tuple[np.ndarray, np.ndarray]:
    """(classes, index): the sorted distinct labels (any integers, strings, ...) and each row's
    class index 0..L-1. At least two classes are required."""
    from sklearn.utils.multiclass import check_classification_targets

    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise _as_data_error(exc) from None
    classes, index = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise DataError(f"y holds a single class ({classes.tolist()[0]!r}); at least two classes are needed")
    return classes, index.reshape(-1).astype(np.int64)


def check_predict_data(estimator, X, fitted_attribute: str | None = None) -> np.ndarray:
    """X for prediction: NotFittedError before fit, then scikit-learn's checks (feature count
    against the fit included) with DataError."""
    from sklearn.utils.validation import check_is_fitted, validate_data

    check_is_fitted(estimator, fitted_attribute)
    try:
        X = validate_data(estimator, X, dtype=np.float64, reset=False, ensure_all_finite=False)
    except (ValueError, TypeError) as exc:
        raise _as_data_error(exc) from None
    return _check_finite(X)


def with_estimator_classes(model, estimator):
    """``model`` carrying ``estimator.classes_`` as its class labels; DataError for labels a
    model file cannot hold (only integers and strings can)."""
    try:
        return model.set_classes(estimator.classes_, type(estimator).__name__)
    except ModelFileError as exc:
        raise DataError(f"{exc}; to compile or save, train on integer or string labels") from None


def top_k_mask(a: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of the ``k`` largest-magnitude entries of ``a``."""
    flat = np.abs(a).reshape(-1)
    if k >= flat.size:
        return np.ones(a.shape, dtype=bool)
    mask = np.zeros(flat.size, dtype=bool)
    mask[np.argpartition(flat, flat.size - k)[flat.size - k:]] = True
    return mask.reshape(a.shape)


def hard_threshold(a: np.ndarray, k: int) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries of ``a`` (in place), zero the rest; returns ``a``."""
    if k < a.size:
        a[~top_k_mask(a, k)] = 0
    return a


class TrainingLog:
    """Progress lines of one fit, prefixed with the estimator and the seconds since the start."""

    def __init__(self, estimator):
        self.name = type(estimator).__name__
        self.start = time.perf_counter()
        self.level = logging.INFO if getattr(estimator, "verbose", 0) else logging.DEBUG
        if self.level == logging.INFO:
            _show_info_when_unconfigured()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def __call__(self, message: str) -> None:
        logger.log(self.level, "[%s %6.1fs] %s", self.name, self.elapsed, message)


def _show_info_when_unconfigured() -> None:
    package = logging.getLogger("tinycc_ml")
    if package.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    package.addHandler(handler)
    package.setLevel(logging.INFO)
