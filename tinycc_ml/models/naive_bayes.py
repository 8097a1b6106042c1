"""Gaussian naive Bayes (scikit-learn's GaussianNB): per class c a variance-weighted squared distance
plus a constant,

    jll_c(x) = log_prior_c - 1/2 sum_j log(2 pi var_cj) - 1/2 sum_j (x_j - theta_cj)^2 / var_cj,

the joint log-likelihood scikit-learn's ``predict`` takes the argmax of (``predict_proba`` is its
softmax).

**Float builds** (``lower``, ``scores``) compute jll_c less the same amount for every class of a row,
so argmax and softmax are scikit-learn's: scores_c = const_c - 1/2 (d_c - min_k d_k), d_c the squared
standardised distance, summed as soft_c + (H_c - min_k H_k) / v0 (the hard and soft features below apart:
in one float32 sum, hard terms of 1/v0 = 2.4e7 on digits round away the soft terms that decide between
classes breaking the same constant pixels: probabilities 4.4e-2 off); nothing is clipped. Rows whose
distances could leave float32's range get no class (the float build's input bound, api.float_input_bound).

**Integer builds** (``lower_for("int16")``, ``saturated_scores``) bound every term so that it fits 16-bit
code:

    scores_c(x) = const_c - 1/2 min(CAP, min(CAP, soft_c) + min(CAP, (H_c - min_k H_k) / v0))

- **hard features**: the (class, feature) pairs whose variance lies below a gap of at least HARD_GAP
  between consecutive variances of the model (scikit-learn's ``var_smoothing`` floor, 4e-8 on digits,
  for pixels constant within a class, against 0.008 and up for the others); v0 is the smallest variance
  and H_c = sum over c's hard features of (v0 / var_cj) (x_j - theta_cj)^2. One violated constant pixel
  costs 1/v0 = 2.4e7 in jll, which no other term outweighs; subtracting min_k H_k / v0 from every class
  leaves the classes that violate least (usually none) at 0.
- **soft features**: the others; soft_c = sum over them of (x_j - theta_cj)^2 / var_cj, clipped at
  FAR = 32 D, lowered (at most to half) so that FAR + CAP lies just below the power of two under it: the
  16-bit distances then get the finer of the two scales (digits: FAR = 1,865 = 29 D, distances at 2^-4,
  not 2^-3 with FAR + CAP = 2,230).
- **CAP** = 2 (max_c const_c - min_c const_c) + 64.

The bound: an integer build's label is scikit-learn's (up to its fixed-point error) on rows where no
clip changes the order of the best class: every class's soft distance below FAR, and the best class's
d_w below CAP; a row farther out (e.g. 4 sigma on every feature of a class with a large constant) can
get another class, and its probabilities move by up to 1. ``report["proba"]`` measures them on the
calibration rows; compile at precision float for scikit-learn's answer on every row.

Integer builds lower every class at once onto one wsqdist op (the weighted squared distance
d_c = sum_j (w_cj x_j - t_cj)^2, with its own kernels on the AVR, Cortex-M0 and M4): weights 1 / sigma_c
and targets theta_c / sigma_c on the soft features give soft_c, clipped at FAR (16-bit code resolves the
distances that can decide, and saturates the others); a second one with weights sqrt(v0 / var_cj) on the
hard features gives H_c, its per-row minimum (segment_min) subtracted, times 1 / v0, clipped. The terms a
class does not have (w = t = 0) are not stored. Float builds take the same two wsqdist ops, unclipped.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_input, add_normalisation
from tinycc_ml.models.saved import check_array, check_normalisation

HARD_GAP = 1e3  # a ratio between consecutive variances that marks the hard features below it
FAR_PER_FEATURE = 32.0  # FAR = this x D: soft distances beyond it saturate
CAP_MARGIN = 64.0  # CAP = 2 x the constants' spread + this
FIT = 1 - 2.0**-14  # FAR + CAP at most this share of the power of two below it (a 16-bit scale holds it)


class GaussianNBModel(Model):
    """Class means ``theta`` (C, D), variances ``var`` (C, D) > 0, log priors ``log_prior`` (C,),
    optional input ``mean`` / ``std`` (D,)."""

    family = "gaussian_nb"
    proba_rule = "softmax"  # scikit-learn's predict_proba: the normalised joint likelihoods

    def __init__(self, theta, var, log_prior, mean=None, std=None, source: str = "GaussianNB model"):
        self.theta = check_array(theta, "theta", source, ndim=2)
        if 0 in self.theta.shape or self.theta.shape[0] < 2:
            raise ModelFileError(f"{source}: theta has shape {self.theta.shape}, expected (classes >= 2, "
                                 "features >= 1)")
        self.var = check_array(var, "var", source, shape=self.theta.shape)
        if np.any(self.var <= 0):
            raise ModelFileError(f"{source}: var holds a value <= 0 ({self.var.min()}); variances must be positive")
        self.log_prior = check_array(log_prior, "log_prior", source, shape=(self.theta.shape[0],))
        dim = self.theta.shape[1]
        self.mean, self.std = check_normalisation(mean, std, dim, source)
        check_array(self.constants(), "the per-class constants", source)  # a tiny variance overflows them

    @property
    def input_dim(self) -> int:
        return self.theta.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.theta.shape[0]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"theta": self.theta, "var": self.var, "log_prior": self.log_prior}
        if self.mean is not None:
            out["mean"] = self.mean
        if self.std is not None:
            out["std"] = self.std
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> GaussianNBModel:
        missing = sorted({"theta", "var", "log_prior"} - set(arrays))
        if missing:
            raise ModelFileError(f"{source}: missing array(s) {missing}")
        unknown = sorted(set(arrays) - {"theta", "var", "log_prior", "mean", "std"})
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {unknown}")
        return cls(arrays["theta"], arrays["var"], arrays["log_prior"], arrays.get("mean"), arrays.get("std"),
                   source=source)

    def constants(self) -> np.ndarray:
        return self.log_prior - 0.5 * np.sum(np.log(2.0 * np.pi * self.var), axis=1)

    def _normalised(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.mean is not None:
            X = X - self.mean
        if self.std is not None:
            X = X / self.std
        return X

    def hard(self) -> np.ndarray:
        """(C, D) bool: the hard (class, feature) pairs (see the module doc); none without such a gap."""
        u = np.unique(self.var)
        if u.size < 2:
            return np.zeros(self.var.shape, dtype=bool)
        ratio = u[1:] / u[:-1]
        i = int(np.argmax(ratio))
        return self.var <= u[i] if ratio[i] >= HARD_GAP else np.zeros(self.var.shape, dtype=bool)

    def caps(self) -> tuple[float, float, float]:
        """(FAR, FAR_TOTAL, CAP) of the module doc."""
        const = self.constants()
        cap = float(2 * (const.max() - const.min()) + CAP_MARGIN)
        far = float(FAR_PER_FEATURE * self.input_dim)
        top = 2.0 ** math.floor(math.log2(far + cap))
        if top * FIT - cap >= far / 2:  # FAR + CAP just below a power of two: one more bit for 16-bit distances
            far = top * FIT - cap
        return far, far + cap, cap

    def distances(self, X) -> np.ndarray:
        """(n, C) squared standardised distances d_c, as float builds compute them (inf: float32's largest)."""
        X = self._normalised(X)
        with np.errstate(over="ignore"):
            d = np.sum(((X[:, None, :] - self.theta[None]) / np.sqrt(self.var[None])) ** 2, axis=2)
        return np.minimum(d, float(np.finfo(np.float32).max))

    def scores(self, X) -> np.ndarray:
        """The float builds' scores: jll less its smallest distance term (module doc)."""
        d = self.distances(X)
        return self.constants()[None, :] - 0.5 * (d - d.min(axis=1, keepdims=True))

    def saturated_scores(self, X) -> np.ndarray:
        """The integer builds' scores (module doc)."""
        X = self._normalised(X)
        hard, (far, far_total, cap), v0 = self.hard(), self.caps(), float(self.var.min())
        d2 = (X[:, None, :] - self.theta[None]) ** 2
        total = np.minimum(np.sum(np.where(hard[None], 0.0, d2 / self.var[None]), axis=2), far)
        if hard.any():
            H = np.sum(np.where(hard[None], d2 * (v0 / self.var[None]), 0.0), axis=2)
            total = total + np.minimum((H - H.min(axis=1, keepdims=True)) / v0, far_total)
        total = np.minimum(total, far_total)
        return self.constants()[None, :] - 0.5 * np.minimum(total - total.min(axis=1, keepdims=True), cap)

    def lower(self) -> Graph:
        """The float graph: scores = const - 1/2 (d - min d), each class's distance d = S + (H - min H) / v0 (the
        soft and hard features summed apart, as the integer builds do: in float32 a sum of 1/v0-sized hard terms,
        2.4e7 on digits, would round the soft terms that decide between classes breaking the same constant
        pixels), clipped at float32's largest (inf only)."""
        g = Graph("gaussian_nb")
        x = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        C = self.theta.shape[0]
        hard, v0 = self.hard(), float(self.var.min())
        top = float(np.finfo(np.float32).max)

        def distances(kind: str, weights: np.ndarray) -> str:
            d = _weighted_distances(g, x, kind, weights, self.theta)
            return g.add("clip", [d], {"lo": 0.0, "hi": top}, name=f"{kind}_finite")  # inf -> float32's largest

        def less_least(v: str, kind: str) -> str:
            return _less_least(g, v, kind, C)

        distance = distances("soft", np.where(hard, 0.0, 1.0 / np.sqrt(self.var))) if not hard.all() else None
        if hard.any():
            weighted = g.add("scale", [less_least(distances("hard", np.where(hard, np.sqrt(v0 / self.var), 0.0)),
                                                  "hard")], {"factor": 1.0 / v0}, name="hard_weighted")
            weighted = g.add("clip", [weighted], {"lo": 0.0, "hi": top}, name="hard_finite_weighted")
            distance = weighted if distance is None else g.add(
                "clip", [g.add("add", [distance, weighted], name="distance_sum")], {"lo": 0.0, "hi": top},
                name="distance")
        excess = less_least(distance, "distance")
        scores = g.add("add", [add_const(g, "class_const", self.constants()),
                               g.add("scale", [excess], {"factor": -0.5}, name="half_distance")], name="scores")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g

    def lower_for(self, precision: str) -> Graph:
        return self.lower() if precision == "float" else self.lower_saturated()

    def lower_saturated(self) -> Graph:
        """The integer builds' graph (``saturated_scores``)."""
        g = Graph("gaussian_nb")
        x = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        C, D = self.theta.shape
        hard, (far, far_total, cap), v0 = self.hard(), self.caps(), float(self.var.min())
        inv_sigma = np.where(hard, 0.0, 1.0 / np.sqrt(self.var))  # (C, D), soft features
        hard_w = np.where(hard, np.sqrt(v0 / self.var), 0.0)  # (C, D), hard features

        def per_class(kind: str, weights: np.ndarray) -> str | None:
            """The C-vector of each class's weighted squared distance, one wsqdist for all classes (classes
            without features: 0)."""
            if not weights.any():
                return None
            d = _weighted_distances(g, x, kind, weights, self.theta)
            if kind == "soft":  # far classes saturate: the near ones keep the resolution
                d = g.add("clip", [d], {"lo": 0.0, "hi": far}, name="soft_far")
            return d

        def less_least(v: str, kind: str) -> str:
            return _less_least(g, v, kind, C)

        distance = per_class("soft", inv_sigma)
        if hard.any():
            excess = g.add("scale", [less_least(per_class("hard", hard_w), "hard")], {"factor": 1.0 / v0},
                           name="hard_weighted")
            capped = g.add("clip", [excess], {"lo": 0.0, "hi": far_total}, name="hard_far")
            distance = capped if distance is None else g.add("add", [distance, capped], name="distance_sum")
        scores = add_const(g, "class_const", self.constants())
        if distance is not None:
            distance = g.add("clip", [distance], {"lo": 0.0, "hi": far_total}, name="distance")
            near = g.add("clip", [less_least(distance, "distance")], {"lo": 0.0, "hi": cap}, name="near")
            half = g.add("scale", [near], {"factor": -0.5}, name="half_distance")
            scores = g.add("add", [scores, half], name="scores")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g


def _weighted_distances(g: Graph, x: str, kind: str, weights: np.ndarray, theta: np.ndarray) -> str:
    """One wsqdist node: every class's sum_j (w_cj x_j - w_cj theta_cj)^2."""
    return g.add("wsqdist", [x, add_const(g, f"{kind}_w", weights), add_const(g, f"{kind}_t", theta * weights)],
                 name=f"{kind}_distance")


def _less_least(g: Graph, v: str, kind: str, classes: int) -> str:
    """v minus its smallest entry (every class shifted alike: argmax and softmax unchanged)."""
    least = g.add("segment_min", [v], {"offsets": [0, classes]}, name=f"{kind}_least")
    every = g.add("matvec", [add_const(g, f"{kind}_ones", np.ones((classes, 1))), least], name=f"{kind}_least_all")
    return g.add("sub", [v, every], name=f"{kind}_excess")
