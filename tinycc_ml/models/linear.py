"""Linear classifiers (logistic regression, linear SVMs, ridge and SGD classifiers): one mat-vec.

scores(x) = W x' + b,  x' = (x - mean) / std,  W: (L, D), b: (L,).

L >= 2: prediction = argmax(scores) (the first maximum). L = 1 (binary): class 1 where the score
is > 0, else class 0, as scikit-learn decides; lowered like Bonsai's binary rule, the argmax of
(0, score), which picks class 0 on a tie.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import absorb_normalisation, add_const, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import check_array, check_normalisation


class LinearModel(Model):
    """Weights ``W`` (L, D), bias ``b`` (L,), optional input ``mean`` / ``std`` (D,)."""

    family = "linear"

    def __init__(self, W, b=None, mean=None, std=None, source: str = "LinearModel"):
        self.W = check_array(W, "W", source, ndim=2)
        rows, dim = self.W.shape
        if rows == 0 or dim == 0:
            raise ModelFileError(f"{source}: W has shape {self.W.shape}, expected at least one row and column")
        self.b = np.zeros(rows) if b is None else check_array(b, "b", source, shape=(rows,))
        self.mean, self.std = check_normalisation(mean, std, dim, source)

    # --- Model interface ---
    @property
    def input_dim(self) -> int:
        return self.W.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.W.shape[0]

    @property
    def binary(self) -> bool:
        """One score read by its sign (a binary classifier); a regressor's one score is its value."""
        return self.W.shape[0] == 1 and self.task["kind"] == "classification"

    @property
    def n_classes(self) -> int:
        return 2 if self.binary else self.n_outputs

    def with_proba(self, rule: str | None, source: str = "linear model") -> LinearModel:
        """Read the scores as class probabilities by ``rule`` (a logistic classifier: "logistic" for one score,
        "softmax" for multinomial, "logistic_ovr" for one-vs-rest; SGDClassifier's modified Huber loss:
        "modified_huber"); None: no probabilities. Returns self."""
        allowed = ("logistic", "modified_huber") if self.binary else ("softmax", "logistic_ovr", "modified_huber")
        if rule is not None and rule not in allowed:
            raise ModelFileError(f"{source}: proba {rule!r} does not fit a model with {self.n_outputs} score(s) "
                                 f"(expected one of {allowed} or none)")
        self.proba_rule = rule
        return self

    def meta(self) -> dict:
        return {} if self.proba_rule is None else {"proba": self.proba_rule}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"W": self.W, "b": self.b}
        if self.mean is not None:
            out["mean"] = self.mean
        if self.std is not None:
            out["std"] = self.std
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> LinearModel:
        if "W" not in arrays:
            raise ModelFileError(f"{source}: missing array 'W'")
        unknown = set(arrays) - {"W", "b", "mean", "std"}
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {sorted(unknown)}")
        model = cls(arrays["W"], arrays.get("b"), arrays.get("mean"), arrays.get("std"), source=source)
        return model.with_proba(meta.get("proba"), source)

    def with_input_map(self, A, c) -> LinearModel:
        """This model applied to ``A x + c`` (a PCA step before it), as one linear model: exact."""
        W, b = absorb_normalisation(self.W, self.b, self.mean, self.std)
        model = LinearModel(W @ A, b + W @ c, source=f"{self.family} model after a linear transform")
        model.task, model._classes, model.proba_rule = self.task, self._classes, self.proba_rule
        return model

    def scores(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.mean is not None:
            X = X - self.mean
        if self.std is not None:
            X = X / self.std
        return X @ self.W.T + self.b

    def predict_index(self, X) -> np.ndarray:
        s = self.scores(X)
        return (s[:, 0] > 0).astype(np.int64) if self.binary else np.argmax(s, axis=1)

    def lower(self) -> Graph:
        g = Graph("linear")
        v = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        scores = g.add("matvec", [add_matrix(g, "W", self.W), v], name="weighted")
        if np.any(self.b != 0):
            scores = g.add("add", [scores, add_const(g, "b", self.b)], name="scores")
        g.set_output("scores", scores)
        if self.binary:  # class 1 where the score is > 0: argmax of (0, score) picks 0 on ties
            pair = g.add("matvec", [add_const(g, "binary_pair", [[0.0], [1.0]]), scores], name="binary_pair_scores")
            g.set_output("prediction", g.add("argmax", [pair], name="prediction"))
        else:
            g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g
