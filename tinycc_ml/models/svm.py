"""Kernel SVMs (scikit-learn's SVC / NuSVC, libsvm's one-vs-one classifiers).

k_s(x) = K(x, sv_s) for every support vector s:
    rbf      exp(-gamma ||x - sv_s||^2)           (sqdist, scale, exp: ProtoNN's ops; fixed point:
                                                   the exp_table pass's two tables)
    linear   <x, sv_s>                            (folded with the dual coefficients into one mat-vec)
    poly     (gamma <x, sv_s> + coef0)^degree     (mat-vec, scale, add, degree - 1 muls)
    sigmoid  tanh(gamma <x, sv_s> + coef0)         (mat-vec, scale, add, tanh)
decision_p(x) = sum_s D[p, s] k_s(x) + b_p for each pair p = (i, j), i < j, in libsvm's order (a sparse
mat-vec: D holds the dual coefficients of the support vectors of classes i and j), and the class
is the first with most one-vs-one votes (decision > 0 votes i, else j), as scikit-learn's predict.
Two classes: one decision, class 1 where it is > 0 (scikit-learn's sign convention).

The scores are the votes (several classes) or the decision (two). With Platt scaling's pair constants
(``prob_a``, ``prob_b``: scikit-learn's probability=True, a cross-validated fit of libsvm's) the model has
probabilities, libsvm's pairwise coupling of the pairs' Platt probabilities (models/proba.py,
"platt_coupled"), and its scores are then the pair decisions themselves; it still predicts by the votes,
as scikit-learn's predict does.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.calibration import ovr_decision_rows
from tinycc_ml.ir.ops.reductions import ovo_vote_counts
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import (
    absorb_normalisation,
    add_const,
    add_diagonal_normalisation,
    add_input,
    add_matrix,
    add_normalisation,
)
from tinycc_ml.models.saved import check_array, check_normalisation

KERNELS = ("rbf", "linear", "poly", "sigmoid")
DECISION_SHAPES = (None, "ovo", "ovr")  # scikit-learn's decision_function_shape (None: a model saved without it)
MAX_DEGREE = 8


RBF_ROUNDING_LIMIT = 1e-6  # gamma x the support vectors' float32 rounding, squared: what the kernel may move
# largest error of the float32 pair decisions (margins: +-1 at the margin) a float build may have on the support
# vectors: within it Platt's probabilities stay within the 1e-4 the guide promises (measured: 3e-5 at 6e-4)
FLOAT_DECISION_LIMIT = 1e-3
FLOAT_PROBE_ROWS = 256  # support vectors the float32 evaluation is measured on

def pair_matrix(dual_coef: np.ndarray, n_support: np.ndarray) -> np.ndarray:
    """D (pairs, n_SV): row p = (i, j) holds dual_coef[j - 1] on class i's support vectors and
    dual_coef[i] on class j's (libsvm's layout of one-vs-one dual coefficients)."""
    n_classes = len(n_support)
    start = np.concatenate([[0], np.cumsum(n_support)])
    rows = []
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            row = np.zeros(dual_coef.shape[1])
            row[start[i]:start[i + 1]] = dual_coef[j - 1, start[i]:start[i + 1]]
            row[start[j]:start[j + 1]] = dual_coef[i, start[j]:start[j + 1]]
            rows.append(row)
    return np.array(rows)


class SVMModel(Model):
    """Support vectors ``sv`` (n_SV, r), pair coefficients ``pair_coef`` (pairs, n_SV), pair
    intercepts ``intercept`` (pairs,), a kernel and its parameters; optional input mean / std (D,) and a linear
    map into the support vectors' space, ``transform`` (r, D) with ``transform_offset`` (r,) (a PCA step before
    the SVM: x' = transform (x - mean) / std + transform_offset)."""

    family = "svm"

    def __init__(self, sv, pair_coef, intercept, n_classes: int, kernel: str = "rbf", gamma: float = 1.0,
                 coef0: float = 0.0, degree: int = 3, mean=None, std=None, transform=None, transform_offset=None,
                 prob_a=None, prob_b=None, decision_shape: str | None = None, break_ties: bool = False,
                 source: str = "SVM model"):
        if kernel not in KERNELS:
            raise ModelFileError(f"{source}: kernel {kernel!r} is not supported; supported: {', '.join(KERNELS)}")
        if not isinstance(n_classes, int) or n_classes < 2:
            raise ModelFileError(f"{source}: n_classes is {n_classes!r}, expected an integer >= 2")
        self.sv = check_array(sv, "sv", source, ndim=2)
        if 0 in self.sv.shape:
            raise ModelFileError(f"{source}: sv has shape {self.sv.shape}: no support vectors or features")
        pairs = n_classes * (n_classes - 1) // 2
        self.pair_coef = check_array(pair_coef, "pair_coef", source, shape=(pairs, self.sv.shape[0]))
        self.intercept = check_array(intercept, "intercept", source, shape=(pairs,))
        self.n_class_count, self.kernel = n_classes, kernel
        self.gamma, self.coef0 = (float(check_array(v, k, source)) for k, v in (("gamma", gamma), ("coef0", coef0)))
        if kernel != "linear" and not self.gamma > 0:
            raise ModelFileError(f"{source}: gamma is {self.gamma}, expected a positive number")
        if not isinstance(degree, int) or not 1 <= degree <= MAX_DEGREE:
            raise ModelFileError(f"{source}: degree is {degree!r}, expected an integer in [1, {MAX_DEGREE}]")
        self.degree = degree
        self.transform = self.transform_offset = None
        if transform is not None:
            self.transform = check_array(transform, "transform", source, ndim=2)
            if self.transform.shape[0] != self.sv.shape[1] or self.transform.shape[1] == 0:
                raise ModelFileError(f"{source}: transform has shape {self.transform.shape}, expected "
                                     f"({self.sv.shape[1]}, D)")
            offset = np.zeros(self.sv.shape[1]) if transform_offset is None else transform_offset
            self.transform_offset = check_array(offset, "transform_offset", source, shape=(self.sv.shape[1],))
        elif transform_offset is not None:
            raise ModelFileError(f"{source}: transform_offset without a transform")
        dim = self.sv.shape[1] if self.transform is None else self.transform.shape[1]
        self.mean, self.std = check_normalisation(mean, std, dim, source)
        if (prob_a is None) != (prob_b is None):
            raise ModelFileError(f"{source}: prob_a and prob_b come together (Platt scaling's pair constants)")
        if decision_shape not in DECISION_SHAPES:
            raise ModelFileError(f"{source}: decision_shape is {decision_shape!r}, expected one of "
                                 f"{', '.join(map(repr, DECISION_SHAPES))}")
        if break_ties not in (True, False) or (break_ties and decision_shape != "ovr"):
            raise ModelFileError(f"{source}: break_ties is {break_ties!r}; True only with decision_shape 'ovr'")
        self.decision_shape, self.break_ties = decision_shape, bool(break_ties)
        self.prob_a = self.prob_b = None
        if prob_a is not None:
            self.prob_a = check_array(prob_a, "prob_a", source, shape=(pairs,))
            self.prob_b = check_array(prob_b, "prob_b", source, shape=(pairs,))

    @property
    def proba_rule(self) -> str | None:
        return None if self.prob_a is None else "platt_coupled"

    @property
    def proba_constants(self) -> dict | None:
        if self.prob_a is None:
            return None
        return {"a": self.prob_a, "b": self.prob_b, "n_classes": self.n_class_count}

    @property
    def input_dim(self) -> int:
        return self.sv.shape[1] if self.transform is None else self.transform.shape[1]

    @property
    def binary(self) -> bool:
        return self.n_class_count == 2

    @property
    def scores_kind(self) -> str:
        """What the scores are: "decision" (two classes: the one decision), "pairs" (the one-vs-one pair
        decisions: scikit-learn's decision_function_shape='ovo', and what Platt's coupling reads), "ovr"
        (scikit-learn's one-vs-rest decision_function), "votes" (a model saved with neither: its votes)."""
        if self.binary:
            return "decision"
        if self.prob_a is not None or self.decision_shape == "ovo":
            return "pairs"
        return "ovr" if self.decision_shape == "ovr" else "votes"

    @property
    def n_outputs(self) -> int:
        return 1 if self.binary else len(self.intercept) if self.scores_kind == "pairs" else self.n_class_count

    @property
    def n_classes(self) -> int:
        return self.n_class_count

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"sv": self.sv, "pair_coef": self.pair_coef, "intercept": self.intercept}
        if self.mean is not None:
            out["mean"] = self.mean
        if self.std is not None:
            out["std"] = self.std
        if self.transform is not None:
            out["transform"], out["transform_offset"] = self.transform, self.transform_offset
        if self.prob_a is not None:
            out["prob_a"], out["prob_b"] = self.prob_a, self.prob_b
        return out

    def with_input_map(self, A, c) -> SVMModel:
        """This model applied to ``A x + c`` (a PCA step before it), its normalisation composed into the map:
        exact."""
        r = self.sv.shape[1]
        offset = np.zeros(r) if self.transform_offset is None else self.transform_offset
        W, b = absorb_normalisation(np.eye(r) if self.transform is None else self.transform, offset, self.mean,
                                    self.std)
        model = SVMModel(self.sv, self.pair_coef, self.intercept, self.n_class_count, self.kernel, self.gamma,
                         self.coef0, self.degree, transform=W @ A, transform_offset=W @ c + b,
                         prob_a=self.prob_a, prob_b=self.prob_b, decision_shape=self.decision_shape,
                         break_ties=self.break_ties, source=f"{self.family} model after a linear transform")
        model.task, model._classes = self.task, self._classes
        return model

    def meta(self) -> dict:
        meta = {"n_classes": self.n_class_count, "kernel": self.kernel, "gamma": self.gamma, "coef0": self.coef0,
                "degree": self.degree}
        if self.decision_shape is not None:
            meta["decision_shape"], meta["break_ties"] = self.decision_shape, self.break_ties
        return meta

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> SVMModel:
        missing = sorted({"sv", "pair_coef", "intercept"} - set(arrays))
        if missing:
            raise ModelFileError(f"{source}: missing array(s) {missing}")
        unknown = sorted(set(arrays) - {"sv", "pair_coef", "intercept", "mean", "std", "transform", "transform_offset",
                                        "prob_a", "prob_b"})
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {unknown}")
        for key, kind in (("n_classes", int), ("kernel", str), ("gamma", (int, float)), ("coef0", (int, float)),
                          ("degree", int)):
            if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
                raise ModelFileError(f"{source}: metadata {key!r} is {meta.get(key)!r}")
        return cls(arrays["sv"], arrays["pair_coef"], arrays["intercept"], meta["n_classes"], meta["kernel"],
                   meta["gamma"], meta["coef0"], meta["degree"], arrays.get("mean"), arrays.get("std"),
                   arrays.get("transform"), arrays.get("transform_offset"), arrays.get("prob_a"), arrays.get("prob_b"),
                   meta.get("decision_shape"), meta.get("break_ties", False), source=source)

    def describe(self) -> str:
        return f"svm ({self.kernel} kernel, {self.sv.shape[0]} support vectors, {self.n_class_count} classes)"

    def check_precision(self, precision: str) -> None:
        """Float builds hold the support vectors in float32: an RBF kernel so narrow that their rounding moves
        it (gamma x the rounding's squared distance beyond RBF_ROUNDING_LIMIT) would give a row equal to a
        support vector in float32 a kernel of 1 where the model's is 0 (seen: features of 1e18, gamma 0.014)."""
        if precision != "float" or self.kernel != "rbf":
            return
        with np.errstate(over="ignore", invalid="ignore"):
            rounding = self.sv - self.sv.astype(np.float32).astype(np.float64)
            moved = self.gamma * np.max(np.sum(rounding * rounding, axis=1))
        if not moved <= RBF_ROUNDING_LIMIT:
            raise CompileError(f"{self.describe()}: gamma {self.gamma:g} resolves distances below float32's "
                               f"rounding of the support vectors (it moves gamma |x - sv|^2 by {moved:.3g}): a float "
                               "build would compute other kernel values; scale the features (e.g. StandardScaler) "
                               "before the SVM")
        error = self.float32_decision_error()
        if not error <= FLOAT_DECISION_LIMIT:
            raise CompileError(
                f"{self.describe()}: float32 cannot evaluate its decisions: on its support vectors they are off by "
                f"up to {error:.3g} (beyond the {FLOAT_DECISION_LIMIT:g} a float build keeps to): with gamma "
                f"{self.gamma:g} the kernels lie close together and dual coefficients of magnitude "
                f"{np.max(np.sum(np.abs(self.pair_coef), axis=1)):.3g} cancel in their sum; scale the features "
                "(e.g. StandardScaler) before the SVM")

    def float32_decision_error(self) -> float:
        """Largest difference, on up to FLOAT_PROBE_ROWS of the support vectors as rows, between the rbf pair
        decisions computed in float32 as the C computes them (squared differences summed per feature, scaled by
        -gamma, expf, the dual coefficients' sum) and in float64: the cancellation a tiny gamma causes (kernels all
        near one another, large coefficients of opposite signs) shows here, not in the model."""
        f32 = np.float32
        rows = self.sv[np.unique(np.linspace(0, len(self.sv) - 1, FLOAT_PROBE_ROWS).astype(int))]
        d64 = np.sum((rows[:, None, :] - self.sv[None]) ** 2, axis=2)
        want = np.exp(-self.gamma * d64) @ self.pair_coef.T + self.intercept
        with np.errstate(over="ignore", invalid="ignore"):
            sv32, rows32 = self.sv.astype(f32), rows.astype(f32)
            d = np.zeros(d64.shape, f32)
            for k in range(sv32.shape[1]):
                diff = sv32[None, :, k] - rows32[:, k, None]
                d += diff * diff
            kernel = np.exp(d * f32(-self.gamma))
            coef = self.pair_coef.astype(f32)
            got = np.zeros(want.shape, f32)
            for j in range(sv32.shape[0]):
                got += kernel[:, j, None] * coef[None, :, j]
            got += self.intercept.astype(f32)
            error = float(np.max(np.abs(got.astype(np.float64) - want)))
        return error if np.isfinite(error) else float("inf")

    def _kernel(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.mean is not None:
            X = X - self.mean
        if self.std is not None:
            X = X / self.std
        if self.transform is not None:
            X = X @ self.transform.T + self.transform_offset
        if self.kernel == "rbf":
            d = np.sum((X[:, None, :] - self.sv[None]) ** 2, axis=2)
            return np.exp(-self.gamma * d)
        dot = X @ self.sv.T
        if self.kernel == "linear":
            return dot
        if self.kernel == "poly":
            return (self.gamma * dot + self.coef0) ** self.degree
        return np.tanh(self.gamma * dot + self.coef0)

    def decision(self, X) -> np.ndarray:
        """The pair decisions (n, pairs)."""
        return self._kernel(X) @ self.pair_coef.T + self.intercept

    def scores(self, X) -> np.ndarray:
        d = self.decision(X)
        kind = self.scores_kind
        if kind in ("decision", "pairs"):
            return d
        if kind == "ovr":
            return ovr_decision_rows(d, self.n_class_count)
        return ovo_vote_counts(d, self.n_class_count).astype(np.float64)

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        n = self.sv.shape[0]
        room = int(n * room_bytes / constant_bytes)
        if room < 1:
            return None
        return (f"about {room} support vectors fit (this model keeps {n}): train on fewer rows (the support vectors "
                "are training rows), or a linear model")

    def predict_index(self, X) -> np.ndarray:
        d = self.decision(X)
        if self.binary:
            return (d[:, 0] > 0).astype(np.int64)
        if self.break_ties:  # scikit-learn: the first maximum of the one-vs-rest decision_function
            return np.argmax(ovr_decision_rows(d, self.n_class_count), axis=1)
        return np.argmax(ovo_vote_counts(d, self.n_class_count), axis=1)

    def lower(self) -> Graph:
        g = Graph("svm")
        x = add_input(g, self.input_dim)
        # distances on the normalised input: a diagonal mat-vec keeps each feature's own scale in
        # integer code; a following mat-vec absorbs the plain form
        if self.transform is None:
            x = (add_diagonal_normalisation if self.kernel == "rbf" else add_normalisation)(g, x, self.mean, self.std)
        else:  # the map into the support vectors' space (a PCA step), then its offset
            x = add_normalisation(g, x, self.mean, self.std)
            x = g.add("matvec", [add_matrix(g, "A", self.transform), x], name="mapped")
            if np.any(self.transform_offset != 0):
                x = g.add("add", [x, add_const(g, "A_offset", self.transform_offset)], name="mapped_offset")
        if self.kernel == "linear":  # sum_s D[p, s] <x, sv_s> = (D SV) x
            decision = g.add("matvec", [add_matrix(g, "W", self.pair_coef @ self.sv), x], name="weighted")
        else:
            if self.kernel == "rbf":
                d = g.add("sqdist", [x, add_const(g, "sv", self.sv.T)], name="distances")
                k = g.add("exp", [g.add("scale", [d], {"factor": -self.gamma}, name="exponent")], name="kernel")
            else:
                dot = g.add("matvec", [add_matrix(g, "sv", self.sv), x], name="dots")
                t = g.add("scale", [dot], {"factor": self.gamma}, name="scaled_dots")
                if self.coef0 != 0:
                    t = g.add("add", [t, add_const(g, "coef0", np.full(self.sv.shape[0], self.coef0))],
                              name="shifted_dots")
                if self.kernel == "sigmoid":
                    k = g.add("tanh", [t], name="kernel")
                else:
                    k = t
                    for power in range(2, self.degree + 1):
                        k = g.add("mul", [k, t], name=f"power{power}" if power < self.degree else "kernel")
            decision = g.add("matvec", [add_matrix(g, "pair_coef", self.pair_coef), k], name="weighted")
        decision = g.add("add", [decision, add_const(g, "intercept", self.intercept)], name="decision")
        if self.binary:
            g.set_output("scores", decision)
            pair = g.add("matvec", [add_const(g, "binary_pair", [[0.0], [1.0]]), decision], name="binary_pair_scores")
            g.set_output("prediction", g.add("argmax", [pair], name="prediction"))
        else:
            kind, k = self.scores_kind, {"n_classes": self.n_class_count}
            ovr = g.add("ovr_decision", [decision], k, name="ovr") if kind == "ovr" or self.break_ties else None
            votes = None if self.break_ties else g.add("ovo_votes", [decision], k, name="votes")
            g.set_output("scores", {"pairs": decision, "ovr": ovr, "votes": votes}[kind])
            g.set_output("prediction", g.add("argmax", [ovr if self.break_ties else votes], name="prediction"))
        return g
