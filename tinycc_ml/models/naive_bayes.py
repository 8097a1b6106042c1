"""Gaussian naive Bayes (scikit-learn's GaussianNB): per class c a variance-weighted squared distance
plus a constant,

    scores_c(x) = log_prior_c - 1/2 sum_j log(2 pi var_cj) - 1/2 sum_j (x_j - theta_cj)^2 / var_cj,

the joint log-likelihood scikit-learn's ``predict`` takes the argmax of (``predict_proba`` is its
softmax). Lowered onto existing ops, per class c: a diagonal (sparse) mat-vec scales the input by
1 / sigma_c, the squared distance to theta_c / sigma_c (sqdist, ProtoNN's op and kernels) is the
variance-weighted squared distance, and a one-column mat-vec places -1/2 of it into score c; the
constants are added once. Integer builds keep the differences standardised (no large terms
cancel); intermediates are one input-sized vector at a time (static RAM: about 2 D + C values).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import check_array, check_normalisation


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

    def scores(self, X) -> np.ndarray:
        X = self._normalised(X)
        z = (X[:, None, :] - self.theta[None]) / np.sqrt(self.var[None])
        return self.constants()[None, :] - 0.5 * np.sum(z * z, axis=2)

    def lower(self) -> Graph:
        g = Graph("gaussian_nb")
        x = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        C, D = self.theta.shape
        inv_sigma = 1.0 / np.sqrt(self.var)  # (C, D)
        scores = add_const(g, "class_const", self.constants())
        for c in range(C):
            scaled = g.add("matvec", [add_matrix(g, f"inv_sigma{c}", np.diag(inv_sigma[c])), x], name=f"scaled{c}")
            d = g.add("sqdist", [scaled, add_const(g, f"theta_scaled{c}", (self.theta[c] * inv_sigma[c])[:, None])],
                      name=f"distance{c}")
            place = np.zeros((C, 1))
            place[c, 0] = -0.5
            term = g.add("matvec", [add_const(g, f"place{c}", place), d], name=f"term{c}")
            scores = g.add("add", [scores, term], name="scores" if c == C - 1 else f"partial{c}")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g


def from_sklearn_gnb(estimator) -> GaussianNBModel:
    from tinycc_ml.models.sklearn_checks import require_fitted

    name = type(estimator).__name__
    require_fitted(estimator)
    var = getattr(estimator, "var_", None)
    if var is None:  # scikit-learn < 1.0 called it sigma_
        var = estimator.sigma_
    prior = check_array(estimator.class_prior_, "class_prior_", name)
    if np.any(prior <= 0):
        raise ModelFileError(f"{name}: class_prior_ holds a prior <= 0 ({prior.min()}); its log is not finite")
    return GaussianNBModel(estimator.theta_, var, np.log(prior), source=name)
