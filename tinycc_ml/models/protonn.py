"""ProtoNN (Gupta et al., ICML 2017): the parameter container, a quick initialiser, and lowering to
the IR (EdgeML's saved folders are read by ``tinycc_ml.importers.edgeml``).

scores(x) = sum_j Z[:, j] * exp(-gamma^2 * ||W x' - B[:, j]||^2),  x' = (x - mean) / std,
prediction = argmax(scores).  W is (d̂, D) here; EdgeML saves its transpose (D, d̂).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError, ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import FLOAT32_MAX, check_array

MAX_GAMMA = float(np.sqrt(FLOAT32_MAX))
MIN_GAMMA = float(np.sqrt(np.finfo(np.float32).tiny))


class ProtoNNModel(Model):
    family = "protonn"

    def __init__(self, W, B, Z, gamma, mean=None, std=None, offset=None, source: str = "ProtoNN model"):
        W = check_array(W, "W", source, ndim=2)
        proj_dim, input_dim = W.shape
        self.W = W
        self.B = check_array(B, "B", source, shape=(proj_dim, None))
        self.Z = check_array(Z, "Z", source, shape=(None, self.B.shape[1]))
        if 0 in W.shape or 0 in self.Z.shape:
            raise ModelFileError(f"{source}: W has shape {W.shape}, B {self.B.shape} and Z {self.Z.shape}: a model "
                                 "needs at least one feature, projection, prototype and class")
        gamma = check_array(gamma, "gamma", source).reshape(-1)
        if gamma.size != 1:
            raise ModelFileError(f"{source}: gamma has {gamma.size} values, expected one")
        self.gamma = float(gamma[0])
        if self.gamma <= 0:
            raise ModelFileError(f"{source}: gamma is {self.gamma}, expected a positive number")
        if self.gamma < MIN_GAMMA:  # gamma^2 would be 0 (or subnormal) in float32: no similarity left
            raise ModelFileError(f"{source}: gamma is {self.gamma:g}; gamma^2 must be a normal float32 (gamma >= "
                                 f"{MIN_GAMMA:.4g})")
        if self.gamma > MAX_GAMMA:  # the compiled code multiplies by -gamma^2 in float32
            raise ModelFileError(f"{source}: gamma is {self.gamma:g}; gamma^2 must fit in float32 (gamma <= "
                                 f"{MAX_GAMMA:.4g})")
        self.mean = None if mean is None else check_array(mean, "mean", source, shape=(input_dim,))
        self.std = None if std is None else check_array(std, "std", source, shape=(input_dim,))
        if self.std is not None and np.any(self.std <= 0):
            raise ModelFileError(f"{source}: std holds a non-positive value ({self.std.min()})")
        # a constant added to the scores (regression: the targets' mean); None means zeros
        self.offset = None if offset is None else check_array(offset, "offset", source, shape=(self.Z.shape[0],))

    # ---- Model interface
    @property
    def input_dim(self) -> int:
        return self.W.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.Z.shape[0]

    @property
    def n_prototypes(self) -> int:
        return self.B.shape[1]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"W": self.W, "B": self.B, "Z": self.Z, "gamma": np.asarray(self.gamma)}
        if self.mean is not None:
            out["mean"] = self.mean
        if self.std is not None:
            out["std"] = self.std
        if self.offset is not None:
            out["offset"] = self.offset
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> ProtoNNModel:
        missing = {"W", "B", "Z", "gamma"} - set(arrays)
        if missing:
            raise ModelFileError(f"{source}: missing array(s) {', '.join(sorted(missing))}")
        return cls(arrays["W"], arrays["B"], arrays["Z"], arrays["gamma"], arrays.get("mean"), arrays.get("std"),
                   offset=arrays.get("offset"), source=source)

    def normalise(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.mean is not None:
            X = X - self.mean
        if self.std is not None:
            X = X / self.std
        return X

    def exponents(self, X) -> np.ndarray:
        """-gamma^2 ||W x' - B_j||^2 for every row and prototype j."""
        P = self.normalise(X) @ self.W.T
        return -(self.gamma**2) * np.sum((P[:, :, None] - self.B[None, :, :]) ** 2, axis=1)

    def scores(self, X) -> np.ndarray:
        out = np.exp(self.exponents(X)) @ self.Z.T
        return out if self.offset is None else out + self.offset

    @property
    def proba_rule(self) -> str | None:
        """Classifiers: the scores' positive parts, normalised (ProtoNN's scores approximate one-hot labels)."""
        return "normalise" if self.task.get("kind", "classification") == "classification" else None

    def predict_index(self, X) -> np.ndarray:
        """argmax of the scores, ranked as exp(e - max e) @ Z^T: the same order (a positive factor
        apart), but defined even where every exp(e) underflows, far from all prototypes."""
        if self.offset is not None:  # a constant per score does not scale with exp(max e)
            return np.argmax(self.scores(X), axis=1)
        E = self.exponents(X)
        return np.argmax(np.exp(E - E.max(axis=1, keepdims=True)) @ self.Z.T, axis=1)

    def lower(self) -> Graph:
        g = Graph("protonn")
        v = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        p = g.add("matvec", [add_matrix(g, "W", self.W), v], name="projected")
        d = g.add("sqdist", [p, add_const(g, "B", self.B)], name="distances")
        k = g.add("exp", [g.add("scale", [d], {"factor": -(self.gamma**2)}, name="exponent")], name="similarity")
        scores = g.add("matvec", [add_matrix(g, "Z", self.Z), k], name="scores")
        if self.offset is not None:
            scores = g.add("add", [scores, add_const(g, "offset", self.offset)], name="offset_scores")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g


def init_protonn(X, y, projection_dim: int = 15, prototypes_per_class: int = 5, random_state=0) -> ProtoNNModel:
    """A quick ProtoNN without training: standardise, PCA projection, per-class k-means prototypes
    in the projected space, one-hot Z, and gamma = 2.5 / median prototype distance (the paper's
    initialisation). Good enough for demos and tests; ProtoNNClassifier trains properly."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or len(X) != len(y):
        raise DataError(f"X has shape {X.shape} and y has {len(y)} labels: expected (n, D) and n labels")
    if not np.all(np.isfinite(X)):
        raise DataError("X holds NaN or Inf")
    classes = np.unique(y)
    mean, std = X.mean(axis=0), X.std(axis=0)
    # a nearly constant feature would get a huge weight (1/std) that no small integer type can
    # hold next to the others; flooring its std treats it as the near-constant it is
    std = np.maximum(std, 0.1 * float(np.mean(std)) if np.any(std > 0) else 1.0)
    Xn = (X - mean) / std
    _, _, vt = np.linalg.svd(Xn - Xn.mean(axis=0), full_matrices=False)
    W = vt[: min(projection_dim, vt.shape[0])]
    P = Xn @ W.T
    protos, labels = [], []
    for ci, c in enumerate(classes):
        Pc = P[y == c]
        k = min(prototypes_per_class, len(Pc))
        km = KMeans(n_clusters=k, n_init=3, random_state=random_state).fit(Pc)
        protos.append(km.cluster_centers_)
        labels += [ci] * k
    B = np.concatenate(protos).T
    Z = np.eye(len(classes))[labels].T
    dists = np.sqrt(np.sum((P[:, :, None] - B[None]) ** 2, axis=1))
    gamma = 2.5 / np.median(dists)
    return ProtoNNModel(W, B, Z, gamma, mean, std)
