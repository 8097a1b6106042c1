"""One convention for data files on the command line (``compile --calibration``, ``compile --examples``,
``report --data``):

- a ``.npy`` file: one array of rows (no labels);
- a ``.npz`` archive: rows under ``X_train``, ``X`` or ``X_test`` with labels, when present, under the
  matching ``y_train``, ``y`` or ``y_test``. Calibration takes the first of ``X_train``, ``X``,
  ``X_test``; test rows (report, examples) the first of ``X_test``, ``X``, ``X_train``. An archive
  holding one array under any other name is that array. Labels are one per row (class labels, or
  real values for a regression model) or a 0/1 matrix (rows, labels) for a multilabel model.

Nothing is ever unpickled.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.models.saved import ARRAY_KINDS, read_arrays

ROW_KEYS = {"calibration": ("X_train", "X", "X_test"), "test": ("X_test", "X", "X_train")}
LABEL_KEY = {"X_train": "y_train", "X": "y", "X_test": "y_test"}


def load_rows(path, role: str = "calibration") -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(rows, their labels or None, calibration rows or None) from a data file.

    ``role``: "calibration" or "test" picks which rows come first (see the module docstring). The third
    value is the file's calibration rows (``X_train``, else the rows themselves) so a test file can also
    calibrate."""
    loaded = read_arrays(path, DataError)
    if isinstance(loaded, np.ndarray):
        return _rows(path, "the array", loaded), None, loaded
    for key in ROW_KEYS[role]:
        if key in loaded:
            rows, labels = _rows(path, key, loaded[key]), loaded.get(LABEL_KEY[key])
            # one label per row, or a 0/1 row of labels (multilabel)
            if labels is not None and (labels.ndim not in (1, 2) or len(labels) != len(rows)):
                raise DataError(f"{path}: {len(rows)} rows in {key} but labels {LABEL_KEY[key]} of shape "
                                f"{labels.shape}")
            return rows, labels, _rows(path, "X_train", loaded["X_train"]) if "X_train" in loaded else rows
    if len(loaded) == 1:
        ((key, rows),) = loaded.items()
        rows = _rows(path, key, rows)
        return rows, None, rows
    raise DataError(f"{path}: holds arrays {', '.join(loaded) or '(none)'}; expected rows under X_train, X or "
                    "X_test (with labels y_train, y or y_test), or a single array")


def _rows(path, key: str, rows: np.ndarray) -> np.ndarray:
    if rows.dtype.kind not in ARRAY_KINDS:
        raise DataError(f"{path}: {key} has dtype {rows.dtype}; expected bool, integer or real float values")
    if rows.ndim != 2:
        raise DataError(f"{path}: {key} has shape {rows.shape}, expected (rows, features)")
    return rows


def load_training(path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(X, y, X_test, y_test) for ``tinycc-ml fit``: an ``.npz`` with training rows and labels under
    ``X_train``/``y_train`` (or ``X``/``y``); ``X_test``/``y_test``, when present, are returned apart
    (used only for the final report). A ``.npy`` array has no labels and is refused."""
    loaded = read_arrays(path, DataError)
    if isinstance(loaded, np.ndarray):
        raise DataError(f"{path}: a .npy array holds no labels; fit needs an .npz with X_train and y_train")
    for key in ("X_train", "X"):
        if key in loaded:
            X, y = _rows(path, key, loaded[key]), loaded.get(LABEL_KEY[key])
            break
    else:
        raise DataError(f"{path}: holds arrays {', '.join(loaded) or '(none)'}; fit needs training rows under "
                        "X_train (or X) with labels y_train (or y)")
    if y is None:
        raise DataError(f"{path}: {key} has no labels {LABEL_KEY[key]}; fit needs a class label per row")
    if y.ndim != 1 or len(y) != len(X):
        raise DataError(f"{path}: {len(X)} rows in {key} but labels {LABEL_KEY[key]} of shape {y.shape}")
    X_test = y_test = None
    if key == "X_train" and "X_test" in loaded:
        X_test, y_test = _rows(path, "X_test", loaded["X_test"]), loaded.get("y_test")
        if y_test is None or y_test.ndim != 1 or len(y_test) != len(X_test):
            raise DataError(f"{path}: X_test has {len(X_test)} rows but y_test is "
                            f"{'missing' if y_test is None else f'of shape {y_test.shape}'}")
    return X, y, X_test, y_test
