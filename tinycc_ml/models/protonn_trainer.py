"""ProtoNN trainer (Gupta et al., ICML 2017) as a scikit-learn estimator.

Learns a sparse projection ``W`` (d̂ x D), prototypes ``B`` (d̂ x m) and prototype score vectors
``Z`` (L x m) minimising the squared loss of ``sum_j z_j exp(-gamma^2 ||W x' - b_j||^2)`` against
one-hot (or multilabel 0/1) targets, by alternating minimisation over Z, B and W (Algorithm 1 of
the paper). Each block takes (mini-)batch gradient steps, each followed by iterative hard
thresholding (IHT) to its sparsity.

Optimiser: the default ``step_rule="auto"`` runs the full-batch ``"armijo"`` rule below
``AUTO_ARMIJO_ROWS`` (2,000) training rows and ``"adam"`` from there (see the class doc).
``step_rule="adam"`` takes mini-batch Adam steps (64 rows, rate 0.005
decayed on a cosine, 60 epochs) on W, B and Z together, each followed by IHT: one kernel
evaluation on a batch gives all three gradients, so an epoch costs about one full-batch gradient.
W also decays towards its start (``projection_decay``), which the full-batch rules stay near.
Measured (benchmarks/train_speed.py, one thread, seed 0): letter-26 at 64 kB 96.83%, USPS-10 at
64 kB 95.32% (the full-batch "armijo" rule: 96.58 / 95.42%), 20-30x faster than the full-batch rules.
``step_rule="paper"`` is the paper's rule (alternating full-batch gradient descent; Armijo
backtracking gives eta_0, then eta_0 / t with t the alternating iteration). ``"armijo"`` checks
every step with the Armijo condition (halve on failure, warm start at twice the last accepted
step): on USPS-10 at 64 kB (60 iterations, seed 0) 95.2% against 94.1% with the paper's rule,
whose 1/t decay stalls long before convergence.

Initialisation: W from the top principal directions of the standardised data (``init_w="pca"``;
``"random"`` is the paper's Gaussian; ``"sleec"``, multilabel only, regresses a SLEEC embedding of
the label vectors on the features, the paper's multilabel start), prototypes by per-class k-means in
the projected space, z_j = the one-hot label of its class (multilabel and regression: k-means of all
points, z_j the mean target of its cluster), gamma = 2.5 / median distance between projected points
and prototypes.

Model size is counted as the ProtoNN paper counts it: 4 bytes per parameter, plus 4 bytes per stored
index for a matrix kept in sparse form. A matrix is kept sparse only when that is smaller
(nnz < size / 2), so its cost is ``min(4 * size, 8 * nnz)``. ``gamma`` and the standardisation
(mean / std, which a code generator can fold into ``W`` plus a d̂ offset) are not counted, as in the
paper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.cluster import KMeans
from sklearn.utils.validation import check_is_fitted, check_random_state
from threadpoolctl import threadpool_limits

from tinycc_ml.errors import DataError
from tinycc_ml.models.base import multilabel_indicator
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.training import (
    TrainingLog,
    check_predict_data,
    check_training_data,
    encode_labels,
    hard_threshold,
    keep_parameters,
    with_estimator_classes,
)

logger = logging.getLogger(__name__)

__all__ = ["ProtoNNClassifier", "ProtoNNPlan", "matrix_bytes", "plan_protonn", "protonn_bytes"]


# --------------------------------------------------------------------------------------------
# Model-size accounting and the budget heuristic
# --------------------------------------------------------------------------------------------


def matrix_bytes(nnz: int, size: int) -> int:
    """Bytes of one matrix: dense (4 per entry) or sparse (4 per value + 4 per index)."""
    return int(min(4 * size, 8 * nnz))


def protonn_bytes(W, B, Z) -> int:
    """Model size of ProtoNN parameters, counted as in the paper."""
    return sum(matrix_bytes(int(np.count_nonzero(a)), int(np.size(a))) for a in (W, B, Z))


@dataclass(frozen=True)
class ProtoNNPlan:
    """Sizes of a ProtoNN model: projection dim, prototype count, kept nonzeros per matrix."""

    projection_dim: int
    n_prototypes: int
    nnz_w: int
    nnz_b: int
    nnz_z: int
    n_features: int
    n_outputs: int

    @property
    def bytes(self) -> int:
        d, m, D, L = self.projection_dim, self.n_prototypes, self.n_features, self.n_outputs
        return matrix_bytes(self.nnz_w, d * D) + matrix_bytes(self.nnz_b, d * m) + matrix_bytes(self.nnz_z, L * m)


def _nnz(fraction: float, size: int) -> int:
    return max(1, min(size, int(np.floor(fraction * size + 1e-9))))


def min_budget_bytes(n_features: int, n_outputs: int, multilabel: bool = False) -> int:
    """Smallest budget :func:`plan_protonn` accepts: d̂ = 1 with one nonzero in W, one prototype
    per class (one in all for multilabel), dense B and Z."""
    m = 1 if multilabel else n_outputs
    return matrix_bytes(1, n_features) + 4 * m + 4 * n_outputs * m


def _default_projection_dim(budget: int, n_outputs: int, n_features: int, multilabel: bool) -> int:
    # The paper's table: binary 2/4/8/16 kB -> d̂ 5/5/10/15; multiclass 16/32/64/128 kB -> 10/15/15/20.
    kb = budget / 1024.0
    if n_outputs <= 2 and not multilabel:
        return 5 if kb <= 4 else 10 if kb <= 8 else 15
    table = 10 if kb <= 16 else 15 if kb <= 64 else 20
    # Measured on USPS-10 at 64 kB: d̂ 15 / 22 / 30 gave 93.9 / 94.5 / 94.1% at equal training
    # time, so let a dense W take about a third of the budget when that beats the table (cap 32).
    return int(max(table, min(32, round(budget / (12 * n_features)))))


def plan_protonn(
    budget_bytes: int | None,
    n_features: int,
    n_outputs: int,
    n_samples: int,
    multilabel: bool = False,
    projection_dim: int | None = None,
    n_prototypes: int | None = None,
    sparsity_w: float | None = None,
    sparsity_b: float | None = None,
    sparsity_z: float | None = None,
) -> ProtoNNPlan:
    """Choose d̂, m and the sparsities: the paper's heuristic (Section 6), tuned on USPS.

    Explicit arguments are kept; the budget fills in the others.

    * d̂: the paper's table (binary: 5 up to 4 kB, 10 up to 8 kB, else 15; multiclass: 10 up to
      16 kB, 15 up to 64 kB, else 20), raised for multiclass to let a dense W take ~1/3 of the
      budget (at most 32): 21 for USPS-10 at 64 kB.
    * Start from m = 40 (binary) or 5 per class. If a dense W fits beside them, W stays dense and
      m grows to fill the budget (at most 50 per class and n / 2), as in the paper.
    * Otherwise W is made sparse to fill what B and Z leave, and m is halved until B and Z take at
      most ~15% of the budget (binary USPS at 2 kB: m = 40 / 20 / 10 gave 91.3 / 93.1 / 93.9%,
      a sparse W starves first). If still nothing fits, m and then d̂ shrink.
    * B and Z stay dense (s = 1): with 4 bytes per index only a matrix under half full saves bytes
      by being sparse, and the paper's s = 0.8 would cost more than dense.

    ``budget_bytes=None``: d̂ = min(D, 15) (multilabel: min(D, 50)), m = 40 (binary) or 10 per
    class, all dense.
    """
    D, L = n_features, n_outputs
    if budget_bytes is None:
        # multilabel: a wider projection (make_multilabel_classification, 50 features, 20 labels, 3
        # seeds: d̂ 15 / 30 / 50 gave P@1 64.3 / 66.0 / 66.8%, one-vs-rest logistic regression 64.4%)
        d = projection_dim or min(D, 50 if multilabel else 15)
        m = n_prototypes or max(1, min(40 if (L <= 2 and not multilabel) else 10 * L, n_samples))
        return ProtoNNPlan(
            d, m, _nnz(sparsity_w or 1.0, d * D), _nnz(sparsity_b or 1.0, d * m),
            _nnz(sparsity_z or 1.0, L * m), D, L,
        )
    budget = int(budget_bytes)
    minimum = min_budget_bytes(D, L, multilabel)
    if budget < minimum:
        raise DataError(
            f"budget_bytes={budget} is too small: the smallest ProtoNN model for {D} features and "
            f"{L} outputs (projection dim 1, {1 if multilabel else L} prototype(s)) takes {minimum} bytes"
        )
    search = _BudgetSearch(budget, D, L, n_samples, multilabel, n_prototypes, sparsity_w, sparsity_b, sparsity_z)
    d0 = projection_dim or min(D, _default_projection_dim(budget, L, D, multilabel))
    m0 = n_prototypes or max(search.min_m, min(40 if (L <= 2 and not multilabel) else 5 * L, n_samples))
    d_candidates = [d0] if projection_dim else list(range(d0, 0, -1))
    m_candidates = [m0] if n_prototypes else sorted({max(search.min_m, m0 >> k) for k in range(12)}, reverse=True)
    for d in d_candidates:
        for m in m_candidates:
            last = m == m_candidates[-1] and d == d_candidates[-1]
            plan = search.plan(d, m, last)
            if plan is not None and plan.bytes <= budget:
                return plan
    raise DataError(
        f"budget_bytes={budget} cannot hold a ProtoNN model with the given settings "
        f"(projection_dim={projection_dim}, n_prototypes={n_prototypes}, sparsity_w={sparsity_w}, "
        f"sparsity_b={sparsity_b}, sparsity_z={sparsity_z}); the minimum without them is {minimum} bytes"
    )


@dataclass(frozen=True)
class _BudgetSearch:
    """One step of plan_protonn's search: for a candidate (d̂, m), how W is stored and how m grows."""

    budget: int
    D: int
    L: int
    n_samples: int
    multilabel: bool
    n_prototypes: int | None  # explicit: m is kept
    sparsity_w: float | None
    sparsity_b: float | None
    sparsity_z: float | None

    @property
    def min_m(self) -> int:
        return 1 if self.multilabel else self.L

    def bz_cost(self, d: int, m: int) -> int:
        """Bytes of B and Z."""
        return (matrix_bytes(_nnz(self.sparsity_b or 1.0, d * m), d * m)
                + matrix_bytes(_nnz(self.sparsity_z or 1.0, self.L * m), self.L * m))

    def plan(self, d: int, m: int, last: bool) -> ProtoNNPlan | None:
        """The plan for (d, m), or None when this candidate is passed over (``last``: no smaller one)."""
        D, L = self.D, self.L
        rest = self.budget - self.bz_cost(d, m)
        if self.sparsity_w is not None:
            nnz_w = _nnz(self.sparsity_w, d * D)
            if matrix_bytes(nnz_w, d * D) > rest:
                return None
        elif 4 * d * D <= rest:
            nnz_w = d * D
            if not self.n_prototypes:
                m = self.grow_prototypes(d, m)
        else:
            nnz_w = self.sparse_w(d, m, rest, last)
            if nnz_w is None:
                return None
        return ProtoNNPlan(d, m, nnz_w, _nnz(self.sparsity_b or 1.0, d * m), _nnz(self.sparsity_z or 1.0, L * m),
                           D, L)

    def grow_prototypes(self, d: int, m: int) -> int:
        """A dense W fits: spend the rest of the budget on more prototypes."""
        L, w_bytes = self.L, 4 * d * self.D
        cap = max(m, min(50 * max(L, 2) if not self.multilabel else 10 * L, self.n_samples // 2))
        per = 4 * d + 4 * L
        while m < cap and self.bz_cost(d, m + 1) + w_bytes <= self.budget:
            m += max(1, min(cap - m, (self.budget - w_bytes - self.bz_cost(d, m)) // per))
        m = min(m, cap)
        while self.bz_cost(d, m) + w_bytes > self.budget:
            m -= 1
        return m

    def sparse_w(self, d: int, m: int, rest: int, last: bool) -> int | None:
        """Non-zeros of a sparse W filling what B and Z leave; None to try a smaller m (or d̂) first."""
        if not self.n_prototypes and m > self.min_m and self.bz_cost(d, m) > 0.15 * self.budget:
            return None  # W must go sparse: keep B and Z to ~15% so W keeps enough entries
        nnz_w = min(d * self.D, rest // 8)
        # A few entries per projected dimension at least, else shrink m first.
        if nnz_w < min(d * self.D, 4 * d) and not last:
            return None
        return nnz_w if nnz_w >= 1 else None


# --------------------------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------------------------


# step_rule="auto": the full-batch "armijo" rule below this many training rows, "adam" from it (the
# measurements behind it: ProtoNNClassifier's step_rule, benchmarks/step_rule_auto.py).
AUTO_ARMIJO_ROWS = 2000
ADAM_BATCH = 64  # step_rule="adam", batch_size=None: rows per mini-batch ...
ADAM_STEPS_PER_EPOCH = 25  # ... or fewer on small data, down to ADAM_MIN_BATCH, for this many steps per epoch
ADAM_MIN_BATCH = 16


def adam_batch(n_rows: int) -> int:
    """Rows per Adam step by default: 64, fewer on small data so that an epoch is not a handful of steps."""
    return max(ADAM_MIN_BATCH, min(ADAM_BATCH, n_rows // ADAM_STEPS_PER_EPOCH))


SLEEC_SAMPLE = 4000  # rows the label embedding is computed on (a dense n x n similarity)
SLEEC_NEIGHBOURS = 15  # label-space neighbours each row keeps (SLEEC's local distance preservation)


def sleec_projection(Xs: np.ndarray, Y: np.ndarray, d: int, rng, ridge: float = 1e-2) -> np.ndarray:
    """W (d x D) as SLEEC (Bhatia et al., NIPS 2015) starts it, the ProtoNN paper's multilabel
    initialisation: an embedding U of the label vectors that keeps each row's label-space
    neighbours (the top d eigenvectors of their cosine similarities, restricted to the
    ``SLEEC_NEIGHBOURS`` nearest and symmetrised), then the ridge regression of U on the features,
    so that W x lands near the embedding of x's labels."""
    from scipy.linalg import eigh

    n, D = Xs.shape
    rows = np.sort(rng.choice(n, SLEEC_SAMPLE, replace=False)) if n > SLEEC_SAMPLE else np.arange(n)
    X, Yr = Xs[rows].astype(np.float64), Y[rows].astype(np.float64)
    norms = np.linalg.norm(Yr, axis=1, keepdims=True)
    Yn = Yr / np.where(norms > 0, norms, 1.0)
    G = Yn @ Yn.T
    k = min(SLEEC_NEIGHBOURS, len(rows) - 1)
    nearest = np.argpartition(-G, k, axis=1)[:, : k + 1]  # itself included
    keep = np.zeros(G.shape, dtype=bool)
    np.put_along_axis(keep, nearest, True, axis=1)
    G = np.where(keep | keep.T, G, 0.0)
    d_eff = min(d, len(rows))
    values, vectors = eigh(G, subset_by_index=[len(rows) - d_eff, len(rows) - 1])
    U = vectors[:, ::-1] * np.sqrt(np.maximum(values[::-1], 0.0))
    gram = X.T @ X
    W = np.linalg.solve(gram + ridge * np.trace(gram) / D * np.eye(D), X.T @ U).T
    if d_eff < d:  # fewer rows than d̂ (tiny data): the rest from random directions
        W = np.vstack([W, rng.standard_normal((d - d_eff, D)) / np.sqrt(D)])
    # one scale for all rows: the leading label directions keep their weight (unit rows, as the PCA
    # start's, gave P@3 about a point lower on make_multilabel_classification)
    scale = float(np.linalg.norm(W, axis=1).max())
    return W / scale if scale > 0 else W


def _sq_dist(P: np.ndarray, B: np.ndarray) -> np.ndarray:
    """||p_i - b_j||^2, shape (n, m), for P (n, d) and B (d, m)."""
    D2 = P @ B
    D2 *= -2.0
    D2 += np.einsum("ij,ij->i", P, P)[:, None]
    D2 += np.einsum("ij,ij->j", B, B)[None, :]
    np.maximum(D2, 0.0, out=D2)
    return D2


def _kernel(P, B, g2):
    K = _sq_dist(P, B)
    K *= -g2
    np.exp(K, out=K)
    return K


class _Objective:
    """Squared loss of ProtoNN and its block gradients on (X, Y), float32 for speed."""

    def __init__(self, X, Y, g2):
        self.X, self.Y, self.g2 = X, Y, np.float32(g2)
        self.n = X.shape[0]
        self.yy = float(np.einsum("ij,ij->", Y, Y, dtype=np.float64))

    def loss(self, W, B, Z, P=None):
        if P is None:
            P = self.X @ W.T
        R = _kernel(P, B, self.g2) @ Z.T
        R -= self.Y
        return float(np.einsum("ij,ij->", R, R, dtype=np.float64)) / self.n

    def grads(self, W, B, Z, want_w: bool, P=None):
        """Loss, dB and (if want_w) dW."""
        if P is None:
            P = self.X @ W.T
        K = _kernel(P, B, self.g2)
        R = K @ Z.T
        R -= self.Y
        loss = float(np.einsum("ij,ij->", R, R, dtype=np.float64)) / self.n
        H = R @ Z
        H *= K
        H *= -2.0 * self.g2 / self.n  # dLoss / d(squared distance)
        # (H.T @ P).T: OpenBLAS is ~15x slower on P.T @ H (few rows, long inner dim).
        gB = 2.0 * (B * H.sum(axis=0)[None, :] - (H.T @ P).T)
        gW = None
        if want_w:
            gP = 2.0 * (P * H.sum(axis=1)[:, None] - H @ B.T)
            gW = (self.X.T @ gP).T
        return loss, gB, gW


# --------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------


class ProtoNNClassifier(ClassifierMixin, BaseEstimator):
    _gamma_scale = 2.5  # gamma=None: this / the median distance from points to prototypes (the paper's)

    """ProtoNN: sparse projection + learned prototypes + per-prototype score vectors.

    ``fit(X, y)``: y is an integer label vector (binary / multiclass) or a 0/1 indicator matrix
    (multilabel; one-hot rows count as multiclass). Labels may be any integers or strings
    (``classes_``). ``predict`` returns the same kind; ``decision_function`` returns the (n, L)
    scores, equal to ``to_model().scores`` (two labels: their difference, as scikit-learn does).

    Parameters
    ----------
    budget_bytes : model-size budget (paper's count, see module doc); d̂, m and the sparsities not
        given explicitly follow from it (:func:`plan_protonn`). None: no budget.
    projection_dim, n_prototypes : d̂ and m; None = from the budget, or 15 and 40 (binary) /
        10 per class without one.
    sparsity_w, sparsity_b, sparsity_z : fraction of entries kept nonzero in W, B, Z (1 = dense).
    gamma : kernel width; None = 2.5 / median distance between projected points and prototypes.
    n_iter : "adam": epochs (None: 60, multilabel 30); "armijo" / "paper": alternating-minimisation iterations T
        (None: 150, the paper's; USPS seed 0, 60 -> 150: USPS-10 at 64 kB 95.17 -> 95.42%, binary at
        16 kB 95.91 -> 96.36%, at 2 kB 93.97 -> 93.87%); with ``early_stopping``, the most tried.
    epochs : "armijo" / "paper": gradient steps (full batch) or epochs (mini-batch) per block per
        iteration (paper: 20 for GD; 5 here, more alternation per gradient evaluation).
    batch_size : mini-batch size; None = 64 rows for "adam" (fewer below 1,600 rows, down to 16, so that an
        epoch takes 25 steps: breast_cancer 94.15 -> 96.10%, as the full-batch rule), full-batch gradient
        descent for the other rules (the paper's choice for small data sets).
    learning_rate : "adam": the initial step (decayed on a cosine to 5% of it).
    projection_decay : "adam": each step also moves W towards its start by ``learning_rate *
        projection_decay * density * (W - W_start)`` (decoupled decay, as AdamW's but towards the
        PCA / SLEEC start rather than 0; density: the share of W's entries the plan keeps); 0 turns
        it off. Adam's per-entry steps otherwise let W drift from its start much further than the
        full-batch rules do (USPS-10 at 64 kB: |W| 4.6 at the start, 8.3 after Adam, 5.7 after
        "armijo") and lose accuracy: seeds 0-2, USPS-10 at 64 kB 95.09% without, 95.20% with 0.3
        (0.2 and 0.6 no better), 95.39% for "armijo"; letter-26 at 64 kB 96.79% with 0.3. Unscaled by
        the density the decay cost binary USPS at 2 kB (W 17% dense) 0.1-0.3 points (seeds 0-9:
        94.16% without, 94.04% unscaled, 94.23% scaled; at 16 kB, seeds 0-5: 95.91 / 96.06 / 96.04%).
    init_w : "pca" (top principal directions of the standardised data), "random" (Gaussian, the
        paper's for single-label data) or, for multilabel data, "sleec" (:func:`sleec_projection`, the
        paper's multilabel start). PCA is the default: USPS-10 at 64 kB, 60 iterations: 95.2% against
        93.7%; on make_multilabel_classification (benchmarks/paper_comparison.py) "sleec" was within
        noise of "pca" with the full-batch rule (P@1 +1.2 / +0.2 points at 4 / 16 KB) and with "adam"
        trails it at 4 KB (P@1 -5.0, 16 KB +0.2), so it stays an option.
    step_rule : "auto" (default), "adam" (mini-batch Adam on all blocks), "armijo" (alternating
        full-batch descent, every step checked) or "paper" (Armijo for eta_0, then eta_0 / t).
        "auto" is "armijo" below ``AUTO_ARMIJO_ROWS`` = 2,000 training rows and "adam" from there
        (decided by the row count alone, so deterministic; ``step_rule_`` records the rule used).
        Measured (benchmarks/step_rule_auto.py, 16 KB, seeds 0-4, armijo / adam test %, CPU s of
        fit): breast_cancer (398 rows) 96.84 / 96.61, wine (124) 98.15 / 97.78, iris (105) 95.56 /
        97.33; USPS-10 subsets 250-750 rows: armijo ahead 1.1-0.1 points, 1,000-1,500 even, 2,000
        and 4,000 adam +0.2; letter-26 subsets: armijo ahead 1.6-3.2 points up to 2,000 rows, 0.8
        at 4,000, adam ahead from 8,000 (+0.3; 16,000: +1.4); digits (1,257) even. The full-batch
        rule costs about 1.3 s per 1,000 rows at 16 KB (2.6 s at 2,000, 5.3 s at 4,000, 30 s at
        16,000) against Adam's 0.2-0.5 s (2 s at 16,000). Below 2,000 rows it is never measurably
        worse (iris's 1.8 points are 0.8 of its 45 test rows per seed) and costs at most 2-3 s;
        from 2,000, Adam matches it on USPS-10 at a tenth of the time or less.
    n_classes : for integer labels, declare the classes as 0..n_classes-1 (a missing one is an error);
        None = the sorted distinct labels. The model's score column k is ``classes_[k]``.
    standardize : inputs are standardised, mean / std stored in the model (the paper standardises).
        "feature" (or True): per-feature z-score; "global": per-feature mean, one common std;
        "auto" (default): "global" when all features share one scale (pixels), else "feature";
        False: raw inputs.
    random_state, verbose : seed; verbose 1 logs a progress line per iteration at INFO (0: DEBUG),
        see :mod:`tinycc_ml.models.training`.
    multilabel_rule, multilabel_threshold, multilabel_k : how ``predict`` (and the compiled
        ``<prefix>_predict_labels``) turn a multilabel model's scores into labels: "threshold"
        (score > ``multilabel_threshold``, default 0.5, the midpoint of the 0/1 squared-loss
        targets) or "top_k" (the ``multilabel_k`` highest scores).
    early_stopping, validation_fraction, patience : with early stopping, a first run trains on all
        but ``validation_fraction`` of the rows and scores the rest after every iteration (accuracy;
        multilabel and regression: squared error), stopping ``patience`` iterations after the best;
        the model is then trained on all rows for the best iteration count (``n_iter_``).
    """

    def __init__(
        self,
        budget_bytes=None,
        projection_dim=None,
        n_prototypes=None,
        sparsity_w=None,
        sparsity_b=None,
        sparsity_z=None,
        gamma=None,
        n_iter=None,
        epochs=5,
        batch_size=None,
        init_w="pca",
        step_rule="auto",
        n_classes=None,
        standardize="auto",
        random_state=None,
        verbose=0,
        multilabel_rule="threshold",
        multilabel_threshold=0.5,
        multilabel_k=1,
        early_stopping=False,
        validation_fraction=0.2,
        patience=10,
        learning_rate=0.005,
        projection_decay=0.3,
    ):
        keep_parameters(self, locals())

    # ---------------- input checks ----------------

    def _check_targets(self, y, n):
        """Return (Y one-hot/indicator float32, kind, classes)."""
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim == 2:
            if y.dtype == object or not np.all(np.isfinite(y)) or not np.all((y == 0) | (y == 1)):
                raise DataError("a 2-D y must be a 0/1 indicator matrix (multilabel or one-hot)")
            empty = np.flatnonzero(y.sum(axis=0) == 0)
            if y.shape[1] < 2:
                raise DataError("need at least 2 label columns")
            kind = "onehot" if np.all(y.sum(axis=1) == 1) else "multilabel"
            # multilabel: a label no training row has (common after a split) is kept and never predicted
            if empty.size and (kind == "onehot" or empty.size == y.shape[1]):
                raise DataError(f"label column(s) {empty.tolist()} have no positive sample")
            return y.astype(np.float32), kind, np.arange(y.shape[1])
        if self.n_classes is None:
            classes, index = encode_labels(y)
            Y = np.zeros((n, classes.size), dtype=np.float32)
            Y[np.arange(n), index] = 1.0
            return Y, "labels", classes
        if y.dtype.kind not in "iufb" or not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise DataError(f"with n_classes={self.n_classes}, labels must be the integers 0..n_classes-1")
        y = y.astype(np.int64)
        if self.n_classes is not None:
            L = int(self.n_classes)
            if y.min() < 0 or y.max() >= L:
                raise DataError(f"labels must lie in 0..{L - 1} (n_classes={L}); found {y.min()}..{y.max()}")
            counts = np.bincount(y, minlength=L)
            missing = np.flatnonzero(counts == 0)
            if missing.size:
                raise DataError(f"class(es) {missing.tolist()} of n_classes={L} have no training sample")
            classes = np.arange(L)
        else:
            classes = np.unique(y)
        if classes.size < 2:
            raise DataError(f"need at least 2 classes, y has {classes.size}")
        index = np.searchsorted(classes, y)
        Y = np.zeros((n, classes.size), dtype=np.float32)
        Y[np.arange(n), index] = 1.0
        return Y, "labels", classes

    # ---------------- fitting ----------------

    def fit(self, X, y):
        log = self._progress = TrainingLog(self)
        X, y = check_training_data(self, X, y, multi_output=True)
        n, D = X.shape
        Y, kind, classes = self._check_targets(y, n)
        L = Y.shape[1]
        multilabel = kind == "multilabel"
        if multilabel:
            self._multilabel_task()  # a bad rule fails before any work
        for name in ("sparsity_w", "sparsity_b", "sparsity_z"):
            value = getattr(self, name)
            if value is not None and not 0.0 < float(value) <= 1.0:
                raise DataError(f"{name}={value} must be in (0, 1]")
        if self.standardize not in (True, False, "auto", "feature", "global"):
            raise DataError(f"standardize={self.standardize!r}: expected 'auto', 'feature', 'global' or False")
        if self.budget_bytes is not None and int(self.budget_bytes) <= 0:
            raise DataError(f"budget_bytes={self.budget_bytes} must be positive")
        self.step_rule_ = self._resolve_step_rule(n)
        plan = plan_protonn(
            self.budget_bytes, D, L, n, multilabel, self.projection_dim, self.n_prototypes,
            self.sparsity_w, self.sparsity_b, self.sparsity_z,
        )
        d, m = plan.projection_dim, plan.n_prototypes
        if n < m:
            raise DataError(f"{n} training samples are fewer than the {m} prototypes")
        if d > D:
            raise DataError(f"projection_dim={d} exceeds the {D} input features")
        rng = check_random_state(self.random_state)

        mean, std = self._standardisation(X)
        Xs = ((X - mean) / std).astype(np.float32)

        # The matrices here are thin (d̂ and L are small): a second BLAS / OpenMP thread costs more
        # in synchronisation than it gains (digits: 0.4 s with one thread, 4 s with two on a busy
        # 2-core machine), so use one unless a gradient is big.
        with threadpool_limits(limits=1 if n * m < 2e7 else None):
            if self.early_stopping:
                self.n_iter_ = self._early_stopped_iterations(Xs, Y, kind, plan, rng)
            else:
                self.n_iter_ = self._iterations(kind)
            W, B, Z, gamma = self._train(Xs, Y, kind, plan, rng, self.n_iter_)

        self.W_, self.B_, self.Z_ = W.astype(np.float64), B.astype(np.float64), Z.astype(np.float64)
        self.unseen_labels_ = np.flatnonzero(Y.sum(axis=0) == 0) if multilabel else np.zeros(0, dtype=np.int64)
        if self.unseen_labels_.size:  # their scores are exactly 0: never over the threshold rule's 0.5
            self.Z_[self.unseen_labels_] = 0.0
            logger.warning("ProtoNNClassifier: label column(s) %s have no positive training row; their scores "
                           "are 0 and they are never predicted", self.unseen_labels_.tolist())
        self.gamma_ = gamma
        self.mean_, self.std_ = mean, std
        self.classes_ = classes
        self.target_kind_ = kind
        self.plan_ = plan
        self.n_features_in_ = D
        self.fit_seconds_ = log.elapsed
        return self

    def _standardisation(self, X):
        """(mean, std), each (D,), so that the model sees (x - mean) / std."""
        D = X.shape[1]
        mode = "feature" if self.standardize is True else self.standardize
        if not mode:
            return np.zeros(D), np.ones(D)
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        if mode == "auto":
            # Features on one scale (pixels: every range within 2x of the median range) share one
            # std: per-feature scaling would blow up near-constant border pixels (USPS-10 at 64 kB,
            # 60 iterations: 94.3% per feature, 95.2% global).
            span = np.ptp(X, axis=0)
            span = span[span > 0]
            mode = "global" if span.size and span.max() <= 2.0 * np.median(span) else "feature"
        if mode == "global":
            return mean, np.full(D, max(float(np.sqrt(np.mean(std**2))), 1e-12))
        std[std < 1e-8 * max(1.0, float(std.max(initial=0.0)))] = 1.0  # constant features
        return mean, std

    def _early_stopped_iterations(self, Xs, Y, kind, plan, rng) -> int:
        """Iterations (at most ``n_iter``) after which the validation score last improved, training
        on the rest; stops once ``patience`` iterations bring no improvement."""
        from sklearn.model_selection import train_test_split

        labels = np.argmax(Y, axis=1) if kind in ("labels", "onehot") else None
        stratify = labels if labels is not None and np.bincount(labels).min() >= 2 else None
        tr, va = train_test_split(np.arange(len(Xs)), test_size=self.validation_fraction, stratify=stratify,
                                  random_state=rng.randint(2**31 - 1))
        Xv, Yv = Xs[va], Y[va]
        history: list[float] = []
        if len(tr) < plan.n_prototypes:  # tiny data: this run only estimates the iteration count
            m = len(tr)
            plan = replace(plan, n_prototypes=m, nnz_b=min(plan.nnz_b, plan.projection_dim * m),
                           nnz_z=min(plan.nnz_z, plan.n_outputs * m))

        def monitor(W, B, Z, g2) -> bool:
            S = _kernel(Xv @ W.T, B, g2) @ Z.T
            if labels is not None:
                history.append(float(np.mean(np.argmax(S, axis=1) == labels[va])))
            else:
                history.append(-float(np.mean((S - Yv) ** 2)))
            return len(history) - 1 - int(np.argmax(history)) >= self.patience  # stop?

        self._train(Xs[tr], Y[tr], kind, plan, rng, self._iterations(kind), monitor)
        best = int(np.argmax(history)) + 1
        self._progress(f"early stopping: best validation score {max(history):.4f} after {best} iterations")
        self.validation_score_ = max(history)
        return best

    def _train(self, Xs, Y, kind, plan, rng, n_iter, monitor=None):
        """Initialise (W, B, Z, gamma) as in the paper, then optimise."""
        W = self._init_w(Xs, plan.projection_dim, rng, Y, kind).astype(np.float32)
        hard_threshold(W, plan.nnz_w)
        B, Z = self._init_prototypes(Xs @ W.T, Y, kind, plan.n_prototypes, rng)
        hard_threshold(B, plan.nnz_b)
        hard_threshold(Z, plan.nnz_z)
        if self.gamma is None:
            med = float(np.median(np.sqrt(_sq_dist(Xs @ W.T, B))))
            gamma = self._gamma_scale / med if med > 0 else 1.0
        else:
            gamma = float(self.gamma)
        W, B, Z = self._optimise(Xs, Y, W, B, Z, gamma, plan, rng, n_iter, monitor)
        return W, B, Z, gamma

    def _init_w(self, Xs, d, rng, Y=None, kind=None):
        n, D = Xs.shape
        if self.init_w == "random":
            return rng.standard_normal((d, D)) / np.sqrt(D)
        if self.init_w == "sleec":
            if kind != "multilabel":
                raise DataError("init_w='sleec' embeds label vectors: it needs multilabel targets (a 0/1 matrix)")
            return sleec_projection(Xs, Y, d, rng)
        if self.init_w != "pca":
            raise DataError(f"init_w={self.init_w!r}: expected 'pca', 'random' or 'sleec'")
        # Principal directions from a sample (enough to estimate a d̂-dim subspace).
        sample = Xs if n <= 20000 else Xs[rng.choice(n, 20000, replace=False)]
        sample = sample.astype(np.float64)
        cov = (sample.T @ sample) / sample.shape[0]
        _, vecs = np.linalg.eigh(cov)
        W = vecs[:, ::-1][:, :d].T.copy()
        return W

    def _init_prototypes(self, P, Y, kind, m, rng):
        """Per-class k-means in the projected space. Multilabel and regression targets: k-means of
        all points, each prototype's z the mean target of its cluster (as SLEEC-style local
        embeddings start from clusters)."""
        n, L = Y.shape
        if kind in ("multilabel", "regression"):
            km = KMeans(n_clusters=m, n_init=1, max_iter=50, random_state=rng.randint(2**31 - 1)).fit(P)
            counts = np.maximum(np.bincount(km.labels_, minlength=m), 1)
            Z = np.zeros((L, m), dtype=np.float32)
            np.add.at(Z.T, km.labels_, Y)
            return np.ascontiguousarray(km.cluster_centers_.T, dtype=np.float32), Z / counts
        labels = np.argmax(Y, axis=1)
        counts = np.bincount(labels, minlength=L)
        # Equal share per class, capped by the class size; leftovers go to the largest classes.
        share = np.minimum(counts, m // L)
        for c in np.argsort(-counts):
            if share.sum() >= m:
                break
            share[c] = min(counts[c], share[c] + (m - share.sum()))
        Bs, Zs = [], []
        for c in range(L):
            k = int(share[c])
            if k == 0:
                continue
            Pc = P[labels == c]
            if k == Pc.shape[0]:
                centres = Pc
            else:
                km = KMeans(n_clusters=k, n_init=1, max_iter=50, random_state=rng.randint(2**31 - 1))
                centres = km.fit(Pc).cluster_centers_
            Bs.append(centres)
            z = np.zeros((k, L), dtype=np.float32)
            z[:, c] = 1.0
            Zs.append(z)
        B = np.concatenate(Bs).T.astype(np.float32)
        Z = np.concatenate(Zs).T.astype(np.float32)
        return np.ascontiguousarray(B), np.ascontiguousarray(Z)

    def _resolve_step_rule(self, n_rows: int) -> str:
        """The rule ``fit`` uses on ``n_rows`` training rows: ``step_rule``, "auto" resolved by the row
        count (the whole training set's, also for the early-stopping run on part of it)."""
        rule = self.step_rule
        if not isinstance(rule, str) or rule not in ("auto", "adam", "armijo", "paper"):
            raise DataError(f"step_rule={rule!r}: expected 'auto', 'adam', 'armijo' or 'paper'")
        if rule == "auto":
            rule = "armijo" if n_rows < AUTO_ARMIJO_ROWS else "adam"
        # Adam's settings are checked whichever rule runs, before any work (a bad value is bad either way).
        lr = float(self.learning_rate)
        if not (np.isfinite(lr) and lr > 0):
            raise DataError(f"learning_rate={self.learning_rate!r}: expected a positive number")
        decay = self.projection_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float, np.integer, np.floating)) or not (
                np.isfinite(decay) and decay >= 0):
            raise DataError(f"projection_decay={decay!r}: expected a non-negative number")
        return rule

    def _iterations(self, kind: str) -> int:
        """``n_iter``; None: 60 epochs for "adam" (30 for multilabel targets, which overfit sooner:
        P@1 66.9 / 66.8% after 30 / 60 on make_multilabel_classification), the paper's 150
        iterations otherwise."""
        if self.n_iter is None:
            return (30 if kind == "multilabel" else 60) if self.step_rule_ == "adam" else 150
        return int(self.n_iter)

    def _optimise(self, Xs, Y, W, B, Z, gamma, plan, rng, n_iter, monitor=None):
        if self.step_rule_ == "adam":
            return self._optimise_adam(Xs, Y, W, B, Z, gamma, plan, rng, n_iter, monitor)
        n = Xs.shape[0]
        g2 = np.float32(gamma * gamma)
        full = _Objective(Xs, Y, g2)
        bs = n if self.batch_size is None else max(1, min(int(self.batch_size), n))
        T, E = n_iter, int(self.epochs)
        paper = self.step_rule_ == "paper"
        eta: dict[str, float] = {}

        def descend(key, x, f_grad, k, steps, t):
            """``steps`` IHT gradient steps on one block (``f_grad(x) -> (loss, grad)``)."""
            f, g = f_grad(x)
            if paper and key in eta:  # the paper's rule after the first step: eta_0 / t, unchecked
                for i in range(steps):
                    x = hard_threshold(x - np.float32(eta[key] / t) * g, k)
                    if i + 1 < steps:
                        f, g = f_grad(x)
                return x
            # Armijo: keep a step only if it lowers the loss by (1e-4 / eta) ||dx||^2, else halve
            # it. Warm start at twice the last accepted step so the step can grow back.
            if key in eta:
                step = 2.0 * eta[key]
            else:
                step = max(1.0, float(np.linalg.norm(x) / (np.linalg.norm(g) + 1e-30)))
            done = fails = 0
            while done < steps and fails < 30:
                trial = hard_threshold(x - np.float32(step) * g, k)
                diff = trial - x
                dd = float(np.vdot(diff, diff))
                if dd == 0.0:
                    break
                ft, gt = f_grad(trial)
                if ft <= f - 1e-4 / step * dd:
                    x, f, g = trial, ft, gt
                    done += 1
                    if paper:  # Armijo gave eta_0; the remaining steps follow eta_0 / t
                        eta[key] = step
                        return descend(key, x, f_grad, k, steps - 1, t) if steps > 1 else x
                else:
                    step *= 0.5
                    fails += 1
            eta[key] = step
            return x

        for t in range(1, T + 1):
            # Z: the kernel matrix is fixed while Z moves.
            K = _kernel(Xs @ W.T, B, g2)

            def z_fg(Zt, K=K):
                R = K @ Zt.T
                R -= Y
                f = float(np.einsum("ij,ij->", R, R, dtype=np.float64)) / n
                return f, (K.T @ R).T * np.float32(2.0 / n)

            Z = descend("Z", Z, z_fg, plan.nnz_z, E, t)

            # B with the projections fixed, then W. A mini-batch takes one checked step.
            for _ in range(E if bs < n else 1):
                for idx in self._batches(n, bs, rng):
                    obj = full if idx is None else _Objective(Xs[idx], Y[idx], g2)

                    def b_fg(Bt, obj=obj, P=obj.X @ W.T, W=W, Z=Z):
                        f, gB, _ = obj.grads(W, Bt, Z, want_w=False, P=P)
                        return f, gB

                    B = descend("B", B, b_fg, plan.nnz_b, E if idx is None else 1, t)
            for _ in range(E if bs < n else 1):
                for idx in self._batches(n, bs, rng):
                    obj = full if idx is None else _Objective(Xs[idx], Y[idx], g2)

                    def w_fg(Wt, obj=obj, B=B, Z=Z):
                        f, _, gW = obj.grads(Wt, B, Z, want_w=True)
                        return f, gW

                    W = descend("W", W, w_fg, plan.nnz_w, E if idx is None else 1, t)

            if self.verbose:  # the loss costs a pass over the data: only when shown
                self._progress(f"iter {t}/{T} loss {full.loss(W, B, Z):.4f}")
            if monitor is not None and monitor(W, B, Z, g2):
                break
        return W, B, Z

    def _optimise_adam(self, Xs, Y, W, B, Z, gamma, plan, rng, n_epochs, monitor=None):
        """Mini-batch Adam on W, B and Z jointly (one kernel evaluation gives all three gradients),
        each step followed by hard thresholding to the block's sparsity; the rate decays on a
        cosine to 5% over the epochs; W decays towards its start (``projection_decay``)."""
        n = Xs.shape[0]
        g2 = np.float32(gamma * gamma)
        bs = max(1, min(adam_batch(n) if self.batch_size is None else int(self.batch_size), n))
        lr0, decay = float(self.learning_rate), self.projection_decay  # checked in _resolve_step_rule
        W_start = W.copy() if decay > 0 else None
        decay *= plan.nnz_w / W.size  # per kept entry: IHT holds a sparse W's other entries at 0
        params = [W, B, Z]
        nnz = [plan.nnz_w, plan.nnz_b, plan.nnz_z]
        m1 = [np.zeros_like(p) for p in params]
        m2 = [np.zeros_like(p) for p in params]
        t = 0
        for epoch in range(n_epochs):
            lr = lr0 * (0.05 + 0.95 * 0.5 * (1 + np.cos(np.pi * epoch / max(1, n_epochs))))
            order = rng.permutation(n)
            for s in range(0, n - bs + 1, bs):
                idx = order[s:s + bs]
                X, Yb = Xs[idx], Y[idx]
                W, B, Z = params
                P = X @ W.T
                K = _kernel(P, B, g2)
                R = K @ Z.T
                R -= Yb
                gZ = (K.T @ R).T
                gZ *= np.float32(2.0 / bs)
                H = R @ Z
                H *= K
                H *= -2.0 * g2 / bs  # dLoss / d(squared distance)
                gB = 2.0 * (B * H.sum(axis=0)[None, :] - (H.T @ P).T)
                gP = 2.0 * (P * H.sum(axis=1)[:, None] - H @ B.T)
                gW = (X.T @ gP).T
                t += 1
                c1, c2 = np.float32(lr / (1 - 0.9**t)), np.float32(1.0 / (1 - 0.999**t))
                for i, g in enumerate((gW, gB, gZ)):
                    m1[i] *= np.float32(0.9)
                    m1[i] += np.float32(0.1) * g
                    g *= g
                    m2[i] *= np.float32(0.999)
                    m2[i] += np.float32(0.001) * g
                    denom = np.sqrt(m2[i] * c2)
                    denom += np.float32(1e-8)
                    step = params[i] - c1 * m1[i] / denom
                    if i == 0 and W_start is not None:  # decoupled decay of W towards its start
                        step -= np.float32(lr * decay) * (params[0] - W_start)
                    params[i] = hard_threshold(step, nnz[i])
            if self.verbose:
                self._progress(f"iter {epoch + 1}/{n_epochs} loss {_Objective(Xs, Y, g2).loss(*params):.4f}")
            if monitor is not None and monitor(*params, g2):
                break
        return tuple(params)

    @staticmethod
    def _batches(n, bs, rng):
        if bs >= n:
            yield None
            return
        order = rng.permutation(n)
        for s in range(0, n - bs + 1, bs):
            yield order[s : s + bs]

    # ---------------- prediction ----------------

    def decision_function(self, X) -> np.ndarray:
        """Scores, shape (n, L): ``sum_j Z[:, j] exp(-gamma^2 ||W x' - b_j||^2)`` (float64), in
        scikit-learn's forms: two class labels give (n,), column 1 minus column 0; multilabel gives
        the scores minus 0.5, so that a label is on where its decision is positive."""
        S = self._scores(check_predict_data(self, X, "W_"))
        if self.target_kind_ == "multilabel":
            return S - 0.5
        return S[:, 1] - S[:, 0] if self.target_kind_ == "labels" and S.shape[1] == 2 else S

    def _scores(self, X) -> np.ndarray:
        P = ((X - self.mean_) / self.std_) @ self.W_.T
        return _kernel(P, self.B_, self.gamma_ * self.gamma_) @ self.Z_.T

    def predict(self, X) -> np.ndarray:
        """Labels (same kind as the training y): class labels, one-hot rows, or a 0/1 matrix
        (multilabel: score > 0.5, the midpoint of the 0/1 squared-loss targets)."""
        S = self._scores(check_predict_data(self, X, "W_"))
        if self.target_kind_ == "multilabel":
            return multilabel_indicator(S, self._multilabel_task())
        top = np.argmax(S, axis=1)
        if self.target_kind_ == "onehot":
            out = np.zeros(S.shape, dtype=np.int64)
            out[np.arange(S.shape[0]), top] = 1
            return out
        return self.classes_[top]

    # ---------------- model export ----------------

    @property
    def model_bytes(self) -> int:
        """Size of the trained W, B, Z as the paper counts it."""
        check_is_fitted(self, "W_")
        return protonn_bytes(self.W_, self.B_, self.Z_)

    def to_model(self):
        """The trained parameters as a :class:`tinycc_ml.models.protonn.ProtoNNModel`."""
        check_is_fitted(self, "W_")
        model = ProtoNNModel(self.W_, self.B_, self.Z_, self.gamma_, mean=self.mean_, std=self.std_)
        if self.target_kind_ == "multilabel":
            model.with_task(self._multilabel_task())
        return with_estimator_classes(model, self) if self.target_kind_ == "labels" else model

    def _multilabel_task(self) -> dict:
        if self.multilabel_rule == "threshold":
            t = self.multilabel_threshold
            if isinstance(t, (int, float, np.integer, np.floating)) and not isinstance(t, bool) and np.isfinite(t):
                return {"kind": "multilabel", "rule": "threshold", "threshold": float(t)}
            raise DataError(f"multilabel_threshold={t!r}: expected a finite number")
        if self.multilabel_rule == "top_k":
            k = self.multilabel_k
            if isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1:
                return {"kind": "multilabel", "rule": "top_k", "k": int(k)}
            raise DataError(f"multilabel_k={k!r}: expected a positive integer")
        raise DataError(f"multilabel_rule={self.multilabel_rule!r}: expected 'threshold' or 'top_k'")

    def save(self, path):
        """Save the trained model in the project's model-file format."""
        return self.to_model().save(path)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.classifier_tags.multi_label = True
        return tags
