"""Stochastic Neighbor Compression (Kusner et al., ICML 2014): learn a small synthetic reference
set for 1-NN by minimising the stochastic 1-NN loss of the training set."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin

from tinycc_ml.errors import DataError
from tinycc_ml.models.prototypes import (
    PrototypeEstimatorMixin,
    PrototypeModel,
    squared_distances,
)
from tinycc_ml.models.training import keep_parameters

METRICS = (None, "diagonal", "low-rank")


def stratified_sample(y: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``m`` samples drawn per class in proportion to class size, at least one each."""
    counts = np.bincount(y)
    share = m * counts / counts.sum()
    take = np.maximum(np.floor(share).astype(int), 1)
    # hand out what rounding left over to the largest remainders, never beyond a class's size
    for c in np.argsort(-(share - np.floor(share))):
        if take.sum() >= m:
            break
        if take[c] < counts[c]:
            take[c] += 1
    while take.sum() > m:  # the at-least-one rule overshot: trim the largest classes
        take[np.argmax(take)] -= 1
    return np.concatenate([rng.choice(np.flatnonzero(y == c), take[c], replace=False) for c in range(counts.size)])


def _nll_and_weights(D: np.ndarray, same: np.ndarray, want_weights: bool = True):
    """Mean of -log p_i for stochastic 1-NN logits -D, and dLoss/dD (n, m) (None unless
    ``want_weights``), in the dtype of D.

    One exponential per entry, shifted by the row's smallest distance: p_i = S_same / S_all with
    S = sums of exp(-(D - min D)). A row whose same-label sum underflows (every same-label point
    far beyond the nearest other) is redone exactly with logsumexp in float64.
    """
    n = D.shape[0]
    E = D - D.min(axis=1, keepdims=True)
    np.negative(E, out=E)
    np.exp(E, out=E)
    s_all = E.sum(axis=1, dtype=np.float64)
    s_same = np.where(same, E, 0).sum(axis=1, dtype=np.float64)
    tiny = s_same < 1e-30
    lse_same = np.log(np.where(tiny, 1.0, s_same))
    if np.any(tiny):  # exact for the few far rows
        rows = np.flatnonzero(tiny)
        logits = -D[rows].astype(np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        lse_same[rows] = logsumexp(np.where(same[rows], logits, -np.inf), axis=1)
    loss = float(np.mean(np.log(s_all) - lse_same))
    if not want_weights:
        return loss, None
    # dL/dD_ij = [same] p_ij / p_i - p_ij = E_ij ([same] / S_same - 1 / S_all)
    inv_same = np.exp(-np.where(tiny, np.inf, lse_same)).astype(D.dtype)  # tiny rows: below
    W = np.where(same, inv_same[:, None], D.dtype.type(0))
    W -= (1.0 / s_all).astype(D.dtype)[:, None]
    W *= E
    if np.any(tiny):
        logits = -D[rows].astype(np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        W[rows] = (np.where(same[rows], np.exp(logits - lse_same[rows, None]), 0.0)
                   - np.exp(logits - np.log(s_all[rows])[:, None]))
    W *= D.dtype.type(1.0 / n)
    return loss, W


class SNCClassifier(PrototypeEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Stochastic Neighbor Compression, predicted with 1-NN over the learned reference set.

    m = ``n_prototypes`` or else ``round(compression * n_samples)`` (at least one per class)
    reference points start as a class-stratified sample of the training set (labels fixed). The
    kernel precision gamma^2 is fitted first (1-d search of the loss on that sample, leaving the
    sampled points themselves out), then the points are moved by L-BFGS (at most ``max_iter``
    iterations) to minimise ``-sum_i log p_i``, ``p_i`` = softmax weight of same-label points.
    The small ``max_iter`` is deliberate early stopping: run to convergence the training loss goes
    to 0 and test accuracy drops (USPS, 4%: about 94.0% from 15 to 35 iterations, 93.0% at 60).

    ``metric``: None (A = gamma I; 1-NN is scale invariant, so the model stores the points in input
    space and no map), ``"diagonal"`` (per-feature scales learned jointly; folded into the model's
    mean/std, which are then always stored) or ``"low-rank"`` (A: ``n_components`` x D, started
    from PCA, learned jointly; stored as the model's transform with the points in the r-dim space).
    ``standardize=True`` scales features to zero mean / unit variance first; the default keeps X as
    given, which suits pixel data (see KNNClassifier).

    ``n_neighbors``: k of the k-NN vote over the compressed set at prediction (the paper's
    label-noise experiment uses k = 3: a vote over the few learned points smooths mislabelled
    ones); training minimises the stochastic 1-NN loss whatever k is, so without label noise k > 1
    costs accuracy (USPS-10, 4% compression: 94.02% at k = 1, 93.47% at 3, 92.83% at 5;
    benchmarks/snc_neighbors.py).
    """

    def __init__(self, compression: float = 0.04, n_prototypes: int | None = None, metric: str | None = None,
                 n_components: int = 32, max_iter: int = 30, standardize: bool = False,
                 random_state: int | None = 0, verbose: int = 0, n_neighbors: int = 1):
        keep_parameters(self, locals())

    def _n_points(self, n: int, n_classes: int) -> int:
        if self.n_prototypes is not None:
            m = self.n_prototypes
            if not isinstance(m, (int, np.integer)) or m < 1:
                raise DataError(f"n_prototypes is {m!r}, expected a positive integer")
        else:
            if not 0 < float(self.compression) <= 1:
                raise DataError(f"compression is {self.compression!r}, expected a fraction in (0, 1]")
            m = max(n_classes, int(round(self.compression * n)))
        if m > n:
            raise DataError(f"{n} samples but {m} prototypes requested; need at least as many samples")
        if m < n_classes:
            raise DataError(f"{m} prototypes cannot cover {n_classes} classes (one per class at least)")
        return int(m)

    def fit(self, X, y):
        X, y, n_classes = self._fit_data(X, y)
        if self.metric not in METRICS:
            raise DataError(f"metric is {self.metric!r}, expected one of {METRICS}")
        n, dim = X.shape
        m = self._n_points(n, n_classes)
        k = self.n_neighbors
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m:
            raise DataError(f"n_neighbors is {k!r}, expected an integer in 1..{m} (the compressed set's size)")
        if self.metric == "low-rank" and not 1 <= int(self.n_components) <= dim:
            raise DataError(f"n_components is {self.n_components!r}, expected 1..{dim}")
        rng = np.random.default_rng(self.random_state)
        mean, std = self._fit_standardizer(X)
        Xs = X if mean is None else (X - mean) / std
        idx = stratified_sample(y, m, rng)
        labels = y[idx]
        same = y[:, None] == labels[None, :]

        if self.metric == "low-rank":
            r = int(self.n_components)
            centred = Xs - Xs.mean(0)
            A = np.linalg.svd(centred[rng.choice(n, min(n, 4000), replace=False)], full_matrices=False)[2][:r]
        else:
            A = None
        U0 = Xs if A is None else Xs @ A.T
        scale = np.sqrt(self._fit_gamma2(U0, idx, same))
        self._log(f"m = {m} points, gamma^2 = {scale ** 2:.4g}")

        P0 = scale * U0[idx]
        if self.metric is None:
            theta0, unpack = P0.ravel(), lambda t: (t.reshape(P0.shape), None)
        elif self.metric == "diagonal":
            theta0 = np.concatenate([P0.ravel(), np.full(dim, scale)])
            unpack = lambda t: (t[:P0.size].reshape(P0.shape), t[P0.size:])  # noqa: E731
        else:
            theta0 = np.concatenate([P0.ravel(), (scale * A).ravel()])
            unpack = lambda t: (t[:P0.size].reshape(P0.shape), t[P0.size:].reshape(A.shape))  # noqa: E731
        # float32 inside the objective (3-5x faster; L-BFGS keeps theta and its history in float64)
        X32 = Xs.astype(np.float32)
        Xfix = np.float32(scale) * X32  # metric None: inputs live in the gamma-scaled space

        def objective(theta):
            P, T = unpack(theta.astype(np.float32))
            if self.metric is None:
                U = Xfix
            elif self.metric == "diagonal":
                U = X32 * T
            else:
                U = X32 @ T.T
            loss, W = _nll_and_weights(squared_distances(U, P), same)
            gP = -2.0 * (W.T @ U - W.sum(0)[:, None] * P)
            if T is None:
                return loss, gP.ravel().astype(np.float64)
            gU = 2.0 * (W.sum(1)[:, None] * U - W @ P)
            gT = (gU * X32).sum(0) if self.metric == "diagonal" else gU.T @ X32
            return loss, np.concatenate([gP.ravel(), gT.ravel()]).astype(np.float64)

        state = {"it": 0}

        def progress(theta):
            state["it"] += 1
            if self.verbose and state["it"] % 25 == 0:
                self._log(f"iteration {state['it']}: loss {objective(theta)[0]:.4f}")

        res = minimize(objective, theta0, jac=True, method="L-BFGS-B", callback=progress,
                       options={"maxiter": int(self.max_iter)})
        P, T = unpack(res.x)
        self.n_iter_ = int(res.nit)
        self.loss_ = float(res.fun)
        self.gamma2_ = float(scale ** 2)
        self._log(f"done after {res.nit} iterations: loss {res.fun:.4f}")

        if self.metric is None:
            self.model_ = PrototypeModel(P / scale, labels, n_classes, k=k, mean=mean, std=std)
        elif self.metric == "diagonal":
            # u = a * (x - mean) / std = (x - mean) / (std / |a|); sign of a is irrelevant to distances
            a = np.abs(T)
            a = np.maximum(a, 1e-6 * a.max())
            P = P * np.sign(np.where(T == 0, 1.0, T))
            base_mean = np.zeros(dim) if mean is None else mean
            base_std = np.ones(dim) if std is None else std
            self.model_ = PrototypeModel(P, labels, n_classes, k=k, mean=base_mean, std=base_std / a)
        else:
            self.model_ = PrototypeModel(P, labels, n_classes, k=k, mean=mean, std=std, transform=T)
        self.n_features_in_ = dim
        return self

    def _fit_gamma2(self, U: np.ndarray, idx: np.ndarray, same: np.ndarray) -> float:
        """gamma^2 minimising the loss with the initial sample as reference set."""
        rest = np.ones(U.shape[0], bool)
        rest[idx] = False  # a sampled point would match itself at distance 0
        if rest.sum() == 0:
            rest[:] = True
        D = squared_distances(U[rest], U[idx]).astype(np.float32)
        ref = float(np.median(D.min(1))) or float(np.mean(D)) or 1.0
        same_rest = same[rest]

        def loss(log_g):
            return _nll_and_weights(np.float32(np.exp(log_g)) * D, same_rest, want_weights=False)[0]

        res = minimize_scalar(loss, bounds=(np.log(1e-3 / ref), np.log(1e3 / ref)), method="bounded",
                              options={"xatol": 1e-2})
        return float(np.exp(res.x))
