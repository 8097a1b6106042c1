"""Calibrated classifiers (scikit-learn's CalibratedClassifierCV over linear classifiers): each fold's
classifier gives decision values t = W_f x + b_f (its columns: one per class it saw, or one for two
classes), each column goes through its calibrator (Platt's sigmoid or an isotonic regression, ops in
``ir/ops/calibration.py``), each fold's columns become class probabilities, and the scores are their mean
over the folds: the probabilities themselves (rule "probabilities"); the prediction is their argmax (the
first maximum), as scikit-learn's predict.

All folds' mat-vecs are one stacked mat-vec, each fold's input scaling folded into its rows.
Float builds only (the calibrators are float functions); on the AVR in software float.
"""

from __future__ import annotations

import copy

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.calibration import calibrated_mean_rows, isotonic_rows, sigmoid_rows
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_input, add_matrix
from tinycc_ml.models.saved import check_array

METHODS = ("sigmoid", "isotonic")


class CalibratedModel(Model):
    """Stacked decision rows ``W`` (R, D), ``b`` (R,); ``column_class`` (R,) the class of each row;
    ``fold_columns`` how many rows each fold has, in order; ``method`` "sigmoid" with ``ab`` (R, 2) or
    "isotonic" with knots ``knots_x``, ``knots_y`` (R, L) (non-decreasing x, padded by repeating the last)."""

    family = "calibrated"
    proba_rule = "probabilities"

    def __init__(self, W, b, column_class, fold_columns, n_classes: int, method: str, ab=None, knots_x=None,
                 knots_y=None, source: str = "calibrated model"):
        if method not in METHODS:
            raise ModelFileError(f"{source}: method {method!r} is not one of {', '.join(METHODS)}")
        if not isinstance(n_classes, int) or n_classes < 2:
            raise ModelFileError(f"{source}: n_classes is {n_classes!r}, expected an integer >= 2")
        self.W = check_array(W, "W", source, ndim=2)
        rows = self.W.shape[0]
        if 0 in self.W.shape:
            raise ModelFileError(f"{source}: W has shape {self.W.shape}")
        self.b = check_array(b, "b", source, shape=(rows,))
        self.column_class = [int(c) for c in check_array(column_class, "column_class", source, shape=(rows,))]
        self.fold_columns = [int(f) for f in check_array(fold_columns, "fold_columns", source, ndim=1)]
        self.n_class_count, self.method = n_classes, method
        if (sum(self.fold_columns) != rows or min(self.fold_columns, default=0) < 1
                or not all(0 <= c < n_classes for c in self.column_class)
                or (n_classes == 2 and any(f != 1 for f in self.fold_columns))):
            raise ModelFileError(f"{source}: fold_columns {self.fold_columns} and column_class do not describe the "
                                 f"{rows} rows of {n_classes}-class folds")
        self.ab = self.knots_x = self.knots_y = None
        if method == "sigmoid":
            self.ab = check_array(ab, "ab", source, shape=(rows, 2))
        else:
            self.knots_x = check_array(knots_x, "knots_x", source, ndim=2)
            self.knots_y = check_array(knots_y, "knots_y", source, shape=self.knots_x.shape)
            if self.knots_x.shape[0] != rows or self.knots_x.shape[1] == 0 or np.any(np.diff(self.knots_x) < 0):
                raise ModelFileError(f"{source}: knots_x has shape {self.knots_x.shape}, expected ({rows}, L) with "
                                     "non-decreasing rows")

    @property
    def input_dim(self) -> int:
        return self.W.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.n_class_count

    def check_precision(self, precision: str) -> None:
        if precision != "float":
            raise CompileError(f"a calibrated classifier compiles at precision float only, not {precision}: its "
                               "calibrated probabilities are float functions (on the AVR in software float)")

    def describe(self) -> str:
        return (f"calibrated ({self.method}, {len(self.fold_columns)} fold(s) of linear decisions, "
                f"{self.n_class_count} classes)")

    def meta(self) -> dict:
        return {"n_classes": self.n_class_count, "method": self.method}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"W": self.W, "b": self.b, "column_class": np.asarray(self.column_class),
               "fold_columns": np.asarray(self.fold_columns)}
        if self.method == "sigmoid":
            out["ab"] = self.ab
        else:
            out["knots_x"], out["knots_y"] = self.knots_x, self.knots_y
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> CalibratedModel:
        method = meta.get("method")
        needed = {"W", "b", "column_class", "fold_columns"} | ({"ab"} if method == "sigmoid" else
                                                                {"knots_x", "knots_y"})
        if sorted(needed - set(arrays)) or sorted(set(arrays) - needed):
            raise ModelFileError(f"{source}: arrays {sorted(arrays)}, expected {sorted(needed)}")
        if not isinstance(meta.get("n_classes"), int) or isinstance(meta.get("n_classes"), bool):
            raise ModelFileError(f"{source}: metadata 'n_classes' is {meta.get('n_classes')!r}")
        return cls(arrays["W"], arrays["b"], arrays["column_class"], arrays["fold_columns"], meta["n_classes"],
                   method, arrays.get("ab"), arrays.get("knots_x"), arrays.get("knots_y"), source=source)

    def with_input_map(self, A, c) -> CalibratedModel:
        """This model applied to ``A x + c`` (a scaler or PCA step before it): its decisions' mat-vec absorbs
        the map, exactly (in float64)."""
        model = copy.copy(self)
        model.W, model.b = self.W @ A, self.b + self.W @ c
        return model

    def calibrated(self, X) -> np.ndarray:
        """Each row's calibrated columns (n, R)."""
        t = self._check_input(X) @ self.W.T + self.b
        if self.method == "sigmoid":
            return sigmoid_rows(t, self.ab)
        return isotonic_rows(t, self.knots_x, self.knots_y)

    def scores(self, X) -> np.ndarray:
        return calibrated_mean_rows(self.calibrated(X), self._mean_attrs())

    def predict_index(self, X) -> np.ndarray:
        return np.argmax(self.scores(X), axis=1)

    def _mean_attrs(self) -> dict:
        return {"column_class": list(self.column_class), "fold_columns": list(self.fold_columns),
                "n_classes": self.n_class_count}

    def lower(self) -> Graph:
        g = Graph("calibrated")
        x = add_input(g, self.input_dim)
        t = g.add("matvec", [add_matrix(g, "W", self.W), x], name="decisions")
        t = g.add("add", [t, add_const(g, "b", self.b)], name="decisions_biased")
        if self.method == "sigmoid":
            p = g.add("sigmoid_calibrate", [t, add_const(g, "platt", self.ab)], name="calibrated")
        else:
            p = g.add("isotonic_calibrate", [t, add_const(g, "knots_x", self.knots_x),
                                             add_const(g, "knots_y", self.knots_y)], name="calibrated")
        scores = g.add("calibrated_mean", [p], self._mean_attrs(), name="probabilities")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g
