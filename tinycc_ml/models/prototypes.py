"""Reference-point classifiers (SNC, nearest-prototype, kNN): one parameter container and the
estimator plumbing the three estimators share.

:class:`PrototypeModel` (family ``"prototype"``) classifies an input ``x`` (length D) by

1. optional standardisation ``x' = (x - mean) / std`` (``mean``, ``std``: (D,));
2. optional linear map ``u = A x'`` (``A``: (r, D)); without it ``u = x'`` and r = D;
3. squared Euclidean distances ``d_j = ||u - p_j||^2`` to the reference points ``P`` (m, r), which
   are stored in the space of ``u`` (already standardised / mapped);
4. k = 1: the label of the nearest point; k > 1: a majority vote of the k nearest labels.

Tie rules (deterministic, and simple to compile): nearest = smallest distance, equal distances resolved
by the lower index; k = 1 keeps the points sorted by label (stable), so a tie goes to the smaller label;
k > 1 keeps them in the given order (scikit-learn's: among equal distances its neighbour search keeps the
lower training index); a tied vote goes to the smallest class id.

``scores(X)`` has one column per class and ``predict = argmax(scores)`` (first maximum):

- k = 1: ``score_c = -min_{j: label_j = c} d_j`` (negated distance to the nearest point of class
  c; every class must own at least one point);
- k > 1: ``score_c`` = number of the k nearest points labelled c (nearest k chosen by a stable
  sort on distance, so equal distances keep the lower index).

The compiler lowers this to ``sqdist(u, P) -> argmin -> label lookup`` (k = 1) or a k-smallest
selection followed by a vote (k > 1).

Class probabilities: kNN's are the vote fractions ("normalise"; k = 1 "one_hot"); a nearest-centroid model may
carry a linear head ``proba_head = (W, b)`` in the space of ``u`` whose softmax is its probabilities
("softmax_linear", see models/proba.py: scikit-learn's NearestCentroid).

Stored parameters (``n_parameters``, 4 bytes each in ``model_bytes``): P (m*r), labels (m),
mean and std (D each, when present) and A (r*D, when present); k and n_classes are not counted.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import (
    absorb_normalisation,
    add_const,
    add_diagonal_normalisation,
    add_input,
    add_matrix,
    add_normalisation,
)
from tinycc_ml.models.saved import check_array, meta_number
from tinycc_ml.models.training import (
    TrainingLog,
    check_predict_data,
    check_training_data,
    encode_labels,
    with_estimator_classes,
)

_CHUNK = 1024  # rows per distance block, bounds memory on large reference sets


def squared_distances(U: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``||u_i - p_j||^2`` as an (n, m) array in the inputs' dtype, clipped at 0 (the expansion can
    dip below)."""
    d = U @ P.T
    d *= -2.0
    d += np.einsum("ij,ij->i", U, U)[:, None]
    d += np.einsum("ij,ij->i", P, P)[None, :]
    return np.maximum(d, 0.0, out=d)


class PrototypeModel(Model):
    """Nearest-reference-point classifier; see the module docstring for the exact rule.

    Attributes: ``prototypes`` (m, r) float64, ``labels`` (m,) int64 in [0, n_classes),
    ``n_classes`` int, ``k`` int, ``mean`` / ``std`` (D,) or None, ``transform`` (r, D) or None.
    """

    family = "prototype"

    def __init__(self, prototypes, labels, n_classes: int, k: int = 1, mean=None, std=None, transform=None,
                 source: str = "PrototypeModel", proba: bool = False, proba_head=None):
        P = check_array(prototypes, "prototypes", source, ndim=2)
        m, r = P.shape
        if m == 0 or r == 0:
            raise ModelFileError(f"{source}: prototypes has shape {P.shape}, expected at least one point")
        lab = check_array(labels, "labels", source, shape=(m,))
        if np.any(lab != np.round(lab)):
            raise ModelFileError(f"{source}: labels holds non-integer values")
        n_classes, k = int(n_classes), int(k)
        if not 1 <= n_classes <= m:  # a class beyond the m points could never win a vote
            raise ModelFileError(f"{source}: n_classes is {n_classes}, expected 1..{m} (number of prototypes)")
        if lab.min() < 0 or lab.max() >= n_classes:
            raise ModelFileError(f"{source}: labels must lie in [0, {n_classes}), found {lab.min():g}..{lab.max():g}")
        lab = lab.astype(np.int64)
        if not 1 <= k <= m:
            raise ModelFileError(f"{source}: k is {k}, expected 1 <= k <= {m} (number of prototypes)")
        if k == 1:
            missing = np.setdiff1d(np.arange(n_classes), lab)
            if missing.size:
                raise ModelFileError(f"{source}: class {int(missing[0])} has no prototype (needed when k = 1)")
        if transform is not None:
            A = check_array(transform, "transform", source, ndim=2)
            if A.shape[0] != r:
                raise ModelFileError(f"{source}: transform has shape {A.shape}, expected ({r}, D)")
            dim = A.shape[1]
        else:
            A, dim = None, r
        if (mean is None) != (std is None):
            raise ModelFileError(f"{source}: mean and std must be given together")
        if mean is not None:
            mean = check_array(mean, "mean", source, shape=(dim,))
            std = check_array(std, "std", source, shape=(dim,))
            if np.any(std <= 0):
                raise ModelFileError(f"{source}: std holds a value <= 0")
        # k = 1: label-sorted (each class one segment of per-class minima: a tie goes to the smaller label);
        # k > 1: the given order, so equal distances keep the lower index, as scikit-learn's neighbour search
        order = np.argsort(lab, kind="stable") if k == 1 else np.arange(m)
        self.prototypes = P[order]
        self.labels = lab[order]
        self._n_classes = n_classes
        self.k = k
        self.mean = mean
        self.std = std
        self.transform = A
        self._dim = dim
        # a k-nearest-neighbours classifier's probabilities (scikit-learn's): the fractions of the k votes; k = 1
        # the nearest point's class. Not defined for nearest-prototype models (their scores are distances).
        self.proba_rule = ("normalise" if k > 1 else "one_hot") if proba else None
        self.proba_head = None
        if proba_head is not None:
            head_w = check_array(proba_head[0], "proba_weights", source, shape=(n_classes, r))
            head_b = check_array(proba_head[1], "proba_bias", source, shape=(n_classes,))
            self.proba_head, self.proba_rule = (head_w, head_b), "softmax_linear"

    @property
    def proba_constants(self) -> dict | None:
        """"softmax_linear": the head as a map of the model's input x (through the standardisation and map)."""
        if self.proba_head is None:
            return None
        head_w, head_b = self.proba_head
        W, b = absorb_normalisation(np.eye(self._dim) if self.transform is None else self.transform,
                                    np.zeros(self.prototypes.shape[1]), self.mean, self.std)
        return {"weights": head_w @ W, "bias": head_w @ b + head_b}

    # --- Model interface ---
    def arrays(self) -> dict[str, np.ndarray]:
        out = {"prototypes": self.prototypes, "labels": self.labels}
        if self.mean is not None:
            out["mean"], out["std"] = self.mean, self.std
        if self.transform is not None:
            out["transform"] = self.transform
        if self.proba_head is not None:
            out["proba_weights"], out["proba_bias"] = self.proba_head
        return out

    def meta(self) -> dict:
        return {"k": self.k, "n_classes": self.n_classes,
                **({"proba": True} if self.proba_rule and self.proba_head is None else {})}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict, source: str) -> PrototypeModel:
        for name in ("prototypes", "labels"):
            if name not in arrays:
                raise ModelFileError(f"{source}: missing array {name!r}")
        unknown = set(arrays) - {"prototypes", "labels", "mean", "std", "transform", "proba_weights", "proba_bias"}
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {sorted(unknown)}")
        for key in ("k", "n_classes"):
            meta_number(meta, key, source, integer=True)
        proba = meta.get("proba", False)
        if not isinstance(proba, bool):
            raise ModelFileError(f"{source}: proba is {proba!r}, expected true or false (k-vote probabilities)")
        if ("proba_weights" in arrays) != ("proba_bias" in arrays):
            raise ModelFileError(f"{source}: proba_weights and proba_bias must be given together")
        head = (arrays["proba_weights"], arrays["proba_bias"]) if "proba_weights" in arrays else None
        return cls(arrays["prototypes"], arrays["labels"], meta["n_classes"], meta["k"],
                   arrays.get("mean"), arrays.get("std"), arrays.get("transform"), source=source, proba=proba,
                   proba_head=head)

    @property
    def input_dim(self) -> int:
        return self._dim

    @property
    def n_outputs(self) -> int:
        return self._n_classes

    @property
    def n_classes(self) -> int:
        return self._n_classes

    @property
    def n_prototypes(self) -> int:
        return self.prototypes.shape[0]

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        room = int(self.n_prototypes * room_bytes / constant_bytes)
        if room < self.n_classes:
            return None
        return (f"about {room} stored points fit (this model keeps {self.n_prototypes}): a nearest-prototype or "
                "SNC model of that many prototypes (tinycc_ml.models.npc / snc), or kNN on fewer rows")

    def with_input_map(self, A, c) -> PrototypeModel:
        """This model applied to ``A x + c`` (a PCA step before it): its normalisation and own map composed into
        one map, the offset moved into the prototypes (a distance to them is the same): exact."""
        r = self.prototypes.shape[1]
        W, b = absorb_normalisation(np.eye(r) if self.transform is None else self.transform, np.zeros(r), self.mean,
                                    self.std)
        shift = W @ c + b  # u = (W A) x + shift: the points move by it, the head's bias takes it
        head = None
        if self.proba_head is not None:
            head = (self.proba_head[0], self.proba_head[1] + self.proba_head[0] @ shift)
        model = PrototypeModel(self.prototypes - shift, self.labels, self.n_classes, self.k, transform=W @ A,
                               source=f"{self.family} model after a linear transform",
                               proba=self.proba_rule is not None and head is None, proba_head=head)
        model.task, model._classes = self.task, self._classes
        return model

    @property
    def n_parameters(self) -> int:
        # the probability head is linked only into firmware that calls <prefix>_proba
        return int(sum(a.size for name, a in self.arrays().items() if not name.startswith("proba_")))

    @property
    def model_bytes(self) -> int:
        return 4 * self.n_parameters

    def embed(self, X) -> np.ndarray:
        """Inputs in the space of the prototypes: ``A (x - mean) / std``."""
        U = self._check_input(X)
        if self.mean is not None:
            U = (U - self.mean) / self.std
        if self.transform is not None:
            U = U @ self.transform.T
        return U

    def scores(self, X) -> np.ndarray:
        U = self.embed(X)
        out = np.empty((U.shape[0], self.n_classes))
        for start in range(0, U.shape[0], _CHUNK):
            d = squared_distances(U[start:start + _CHUNK], self.prototypes)
            if self.k == 1:
                per_class = np.full((d.shape[0], self.n_classes), np.inf)
                for c in range(self.n_classes):
                    per_class[:, c] = d[:, self.labels == c].min(1)
                out[start:start + _CHUNK] = -per_class
            else:
                nearest = np.argsort(d, axis=1, kind="stable")[:, :self.k]
                votes = np.zeros((d.shape[0], self.n_classes))
                np.add.at(votes, (np.arange(d.shape[0])[:, None], self.labels[nearest]), 1.0)
                out[start:start + _CHUNK] = votes
        return out

    def lower(self) -> Graph:
        """sqdist to every reference point, then the per-class nearest distance (k = 1: the points
        are sorted by label, so each class is one contiguous segment) or a k-vote."""
        g = Graph("nearest")
        u = add_input(g, self.input_dim)
        if self.transform is None:
            u = add_diagonal_normalisation(g, u, self.mean, self.std)
        else:
            u = add_normalisation(g, u, self.mean, self.std)
        if self.transform is not None:
            u = g.add("matvec", [add_matrix(g, "A", self.transform), u], name="mapped")
        d = g.add("sqdist", [u, add_const(g, "P", self.prototypes.T)], name="distances")
        if self.k == 1:
            offsets = [0, *np.cumsum(np.bincount(self.labels, minlength=self.n_classes)).tolist()]
            nearest = g.add("segment_min", [d], {"offsets": [int(o) for o in offsets]}, name="class_nearest")
            scores = g.add("scale", [nearest], {"factor": -1.0}, name="scores")
        else:
            scores = g.add("kvote", [d], {"k": int(self.k), "n_classes": int(self.n_classes),
                                          "labels": self.labels.astype(np.int32)}, name="scores")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g


# --------------------------------------------------------------------------------------------
# Shared estimator plumbing


class PrototypeEstimatorMixin:
    """``predict`` / ``to_model`` / ``save`` / ``model_bytes`` for estimators that set ``model_``."""

    def _fit_standardizer(self, X: np.ndarray):
        if not self.standardize:
            return None, None
        mean = X.mean(0)
        std = X.std(0)
        # constant features: unit scale keeps them harmless instead of dividing by zero
        std = np.where(std > 1e-12 * max(1.0, float(std.max())), std, 1.0)
        return mean, std

    def _fit_data(self, X, y) -> tuple[np.ndarray, np.ndarray, int]:
        """Checked X, class index per row and the class count; sets ``classes_``, starts the log."""
        self._progress = TrainingLog(self)
        X, y = check_training_data(self, X, y)
        self.classes_, index = encode_labels(y)
        return X, index, self.classes_.size

    def _log(self, message: str) -> None:
        self._progress(message)

    def predict(self, X) -> np.ndarray:
        """Class labels (values of ``classes_``)."""
        X = check_predict_data(self, X, "model_")
        return self.classes_[self.model_.predict_index(X)]

    def decision_function(self, X) -> np.ndarray:
        """Class scores (n, L); two classes: (n,), positive for ``classes_[1]``."""
        X = check_predict_data(self, X, "model_")
        scores = self.model_.scores(X)
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def to_model(self) -> PrototypeModel:
        """The fitted model, carrying the class labels."""
        from sklearn.utils.validation import check_is_fitted  # scikit-learn loads only for estimators

        check_is_fitted(self, "model_")
        return with_estimator_classes(self.model_, self)

    def save(self, path):
        return self.to_model().save(path)

    @property
    def model_bytes(self) -> int:
        """4 bytes per stored parameter (prototypes, labels, mean/std, transform)."""
        from sklearn.utils.validation import check_is_fitted  # scikit-learn loads only for estimators

        check_is_fitted(self, "model_")
        return self.model_.model_bytes
