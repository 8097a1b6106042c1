"""Bonsai trainer: a scikit-learn estimator in numpy alone (hand-written, vectorised gradients).

Training follows the paper (section 4): the path indicator I_k is smoothed,
I_{2j+1} = I_j (1 + tanh(σ_I θ_jᵀx̂)) / 2 and I_{2j+2} = I_j (1 - tanh(σ_I θ_jᵀx̂)) / 2, and σ_I is
annealed (relative to the typical |θᵀx̂|) until paths are hard. Three phases over ``epochs``:
dense (first 30%), iterative hard thresholding to the budgets every ``iht_every`` mini-batches
(next 40%), then sparse re-training with fixed support and exact hard paths (last 30%, so training
ends on the very function that is deployed). Optimiser: mini-batch Adam, cosine-decayed in the
last phase.

Budget heuristic (``budget_bytes``; 4 bytes per stored value, plus 4 per index of a matrix stored
sparse; Z, W, V, T each stored whichever way is smaller; z_bias and σ dense):
  * depth h starts at 3 (binary) or 2 (multiclass) and d̂ at min(D, 20) or min(D, 30);
  * if all of Z, W, V, T fit dense with d̂ >= 10 (binary) / 16 (multiclass), take the largest such
    d̂ at that depth (then h is cut, too, if needed); otherwise:
  * the dense tree (W, V, T) may take 30% of the budget: d̂ is cut to fit, then h, down to d̂ >= 5
    (binary) / 8 (multiclass); below that the depth-0 tree is made sparse, keeping >= 25% of its
    values (d̂ shrinks further if needed; else the budget is too small);
  * Z gets the rest as nonzeros (8 bytes each), dense if that is cheaper; when Z fits dense the
    leftover grows d̂ back towards its cap.
  * Explicit ``projection_dim``/``depth`` override the heuristic's choices.
With ``budget_bytes=None`` everything is dense at the default sizes.

Depth and regularisation (when not given) are chosen as the paper chose its hyper-parameters: on a
validation split of the training data (``validation_fraction``, 20% as in the paper), each
candidate trained for ``SELECTION_EPOCH_SHARE`` (15%) of the epochs, then the chosen one is
refitted on all of it with all epochs. Candidates: L2 weights 1e-2 and 1e-3 (EdgeML's range reaches 1e-4;
USPS, with 7k samples, wants the stronger one), and, when the budget leaves room at the planned
depth (everything dense at the largest d̂), up to two deeper trees, so the budget is used. A
candidate replaces the default (planned depth, 1e-2) only if its validation accuracy is higher by
more than one standard error: small validation sets otherwise pick noise (USPS-2 at 2 KB, 1,459
validation rows: 1e-3 won by 0.3 points and lost 1 point on the test set).
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from tinycc_ml.errors import DataError
from tinycc_ml.models.bonsai import BonsaiModel, tree_sizes
from tinycc_ml.models.training import (
    TrainingLog,
    check_predict_data,
    check_training_data,
    encode_labels,
    hard_threshold,
    keep_parameters,
    top_k_mask,
    with_estimator_classes,
)

TREE_SHARE = 0.3
AUTO_REGULARISATION = (1e-2, 1e-3)  # the first is the default the others must beat
MAX_AUTO_DEPTH = 5
AUTO_BATCH, MIN_AUTO_BATCH = 128, 8  # batch_size="auto": 128 rows, or n/16 (16 steps an epoch) on small sets
AUTO_EPOCHS = 40  # epochs="auto" on 2,048 rows and more
MIN_AUTO_STEPS = 1200  # epochs="auto" below 2,048 rows: at least this many steps (more epochs if needed),
MAX_AUTO_EPOCHS = 200  # but no more epochs than this (a few dozen rows: per-epoch work dominates)
# candidates of the depth / regularisation choice train for this share of the epochs (at least 4):
# the validation ranking is settled early, and the choice was most of a fit's time (letter-26 and
# USPS-10 at 64 KB: the same choice and test accuracy with 6 of 40 epochs as with 10)
SELECTION_EPOCH_SHARE = 0.15


def plan_budget(budget_bytes, n_features: int, n_outputs: int, projection_dim=None, depth=None) -> dict:
    """Sizes and nonzero counts for a budget (see module docstring). Counts of None mean dense."""
    L, D = n_outputs, n_features
    binary = L == 1
    d_cap = projection_dim or min(D, 20 if binary else 30)
    d_min = projection_dim or min(D, 5 if binary else 8)
    d_dense = projection_dim or min(D, 10 if binary else 16)
    depths = [depth] if depth is not None else list(range(3 if binary else 2, -1, -1))

    def tree_params(h, d):
        n_nodes, n_int = tree_sizes(h)
        return 2 * n_nodes * L * d + n_int * d

    if budget_bytes is None:
        return {"d_hat": d_cap, "depth": depths[0], "nnz_z": None, "tree_fraction": None}
    B = int(budget_bytes)
    for h in depths:  # everything dense if that leaves d̂ large enough (sparse Z costs accuracy)
        d = min(d_cap, (B - 4) // (4 * (D + tree_params(h, 1) + 1)))
        if d >= d_dense:
            return {"d_hat": d, "depth": h, "nnz_z": None, "tree_fraction": None}
    tree_fraction = None
    for h in depths:
        per_dim = tree_params(h, 1)
        d = min(d_cap, int(TREE_SHARE * B // (4 * per_dim)))
        if d >= d_min:
            break
    else:  # even a dense depth-0 tree is too big: keep >= 25% of a smaller tree's values, sparse
        h = depths[-1]
        for d in range(d_min, 1, -1):
            tree_fraction = TREE_SHARE * B / (8 * tree_params(h, d))
            if tree_fraction >= 0.25:
                break
        else:
            raise DataError(f"budget_bytes={B} is too small for a depth-{h} tree with {L} output(s) "
                            f"(needs about {int(8 * 0.25 * tree_params(h, 2) / TREE_SHARE) + 1} bytes)")

    def z_room(h, d, tree_fraction):
        p = tree_params(h, d)
        tree_bytes = 4 * p if tree_fraction is None else 8 * _tree_nnz_total(h, d, L, tree_fraction)
        return B - tree_bytes - 4 * d - 4

    if tree_fraction is None:  # grow d̂ while a dense Z and a dense tree still fit
        while d < min(d_cap, D) and z_room(h, d + 1, None) >= 4 * (d + 1) * D:
            d += 1
    room = z_room(h, d, tree_fraction)
    if room < 16 * d:  # at least two inputs per projected dimension
        raise DataError(
            f"budget_bytes={B} is too small: a depth-{h} tree with d_hat={d} for {L} output(s) leaves "
            f"{max(room, 0)} bytes for the projection, which needs at least {16 * d}"
        )
    nnz_z = None if room >= 4 * d * D else room // 8
    return {"d_hat": d, "depth": h, "nnz_z": nnz_z, "tree_fraction": tree_fraction}


def _tree_nnz(size: int, fraction: float) -> int:
    return max(1, int(math.floor(size * fraction)))


def _tree_nnz_total(h, d, L, fraction):
    n_nodes, n_int = tree_sizes(h)
    sizes = [n_nodes * L * d, n_nodes * L * d] + ([n_int * d] if n_int else [])
    return sum(_tree_nnz(s, fraction) for s in sizes)


def _levels(n_internal: int) -> list[tuple[int, int]]:
    """[lo, hi) node ranges of the internal levels of a balanced tree (level l: 2^l - 1 .. 2^(l+1) - 1)."""
    out, lo = [], 0
    while lo < n_internal:
        out.append((lo, 2 * lo + 1))
        lo = 2 * lo + 1
    return out


class _Adam:
    """Adam with L2 weight decay over a dict of parameters; masked entries stay zero.

    The parameters are moved into one flat vector (``P``'s entries become views of it), so that a
    step is a handful of vector operations rather than a handful per parameter."""

    def __init__(self, P, reg, beta1=0.9, beta2=0.999, eps=1e-8):
        self.beta1, self.beta2, self.eps, self.t = beta1, beta2, eps, 0
        self.slices, start = {}, 0
        for k, v in P.items():
            self.slices[k] = slice(start, start + v.size)
            start += v.size
        self.theta = np.empty(start, dtype=np.float32)  # float32: the products run ~2x faster
        self.reg = np.empty(start, dtype=np.float32)
        for k, v in P.items():
            self.theta[self.slices[k]] = v.ravel()
            self.reg[self.slices[k]] = reg[k]
        self.views(self.theta, P)
        self.m1, self.m2, self.g = (np.zeros(start, dtype=np.float32) for _ in range(3))
        self.mask = None

    def views(self, flat, P) -> dict[str, np.ndarray]:
        """``P`` with its entries replaced by views of ``flat`` (same shapes); returns ``P``."""
        for k, sl in self.slices.items():
            P[k] = flat[sl].reshape(P[k].shape)
        return P

    def step(self, P, grads, lr, masks):
        self.t += 1
        b1, b2, g = self.beta1, self.beta2, self.g
        for k, sl in self.slices.items():
            g[sl] = grads[k].ravel()
        g += self.reg * self.theta
        self.m1 *= np.float32(b1)
        self.m1 += np.float32(1 - b1) * g
        g *= g
        self.m2 *= np.float32(b2)
        self.m2 += np.float32(1 - b2) * g
        denom = np.sqrt(self.m2 * np.float32(1 / (1 - b2**self.t)))
        denom += np.float32(self.eps)
        self.theta -= np.float32(lr / (1 - b1**self.t)) * self.m1 / denom
        if masks:
            if self.mask is None:  # the support is fixed once masks exist
                self.mask = np.ones_like(self.theta)
                for k, mask in masks.items():
                    self.mask[self.slices[k]] = mask.ravel()
            self.theta *= self.mask


class BonsaiClassifier(ClassifierMixin, BaseEstimator):
    """Bonsai classifier. Labels may be any values (integers, strings), at least two classes.

    Binary problems (C = 2) learn one score (L = 1) predicted by its sign; multiclass learn C scores.

    Parameters
    ----------
    budget_bytes : flash budget of the deployed model (None: no limit, all dense); see module doc.
    projection_dim, depth : d̂ and tree depth h; None lets the budget heuristic choose.
    sigma : σ of the node predictors' tanh (kept in the model).
    loss : "hinge" (binary default), "crossentropy" (multiclass default; logistic when binary) or "auto".
    epochs, batch_size, learning_rate : Adam schedule (the last 30% of epochs cosine-decay the rate).
        "auto" (the defaults): batches of 128 rows and 40 epochs; below 2,048 training rows batches of
        n/16 rows (at least 8) and at least 1,200 steps in all (more epochs, at most 200), so that a few
        hundred rows train as well as tens of thousands. A number given is used as it is.
    reg_z, reg_tree : L2 weights on Z and on W, V, T; None (default, both): chosen on the validation
        split among 1e-2 and 1e-3 (see module doc); one given alone sets the other to 1e-2.
    validation_fraction : share of the training rows held out to choose depth and regularisation
        (used only when something is left to choose).
    iht_every : mini-batches between hard-thresholding steps in the IHT phase.
    sharpness : (start, end) of σ_I · mean|θᵀx̂| over the soft phases; the last phase is hard.
    init : "random" (default) or "pca" start for Z.
    scaling : "feature" (per-feature standardisation, default) or "global" (one scale for all).
    average : return the running mean of the re-training iterates.
    input_noise : std of Gaussian noise added to standardised training inputs (0: off).
    random_state : seed; fits are repeatable.
    verbose : 0 (default: progress lines at DEBUG) or 1 (at INFO); see :mod:`tinycc_ml.models.training`.
    """

    def __init__(self, budget_bytes=None, projection_dim=None, depth=None, sigma=1.0, loss="auto",
                 epochs="auto", batch_size="auto", learning_rate=0.003, reg_z=None, reg_tree=None,
                 iht_every=10, sharpness=(1.0, 100.0), init="random", scaling="feature", average=True,
                 input_noise=0.0, validation_fraction=0.2,
                 random_state=None, verbose=0):
        keep_parameters(self, locals())

    # --- input checks ---
    def _check_params(self):
        if self.loss not in ("auto", "hinge", "crossentropy"):
            raise DataError(f"loss={self.loss!r}: expected 'auto', 'hinge' or 'crossentropy'")
        for name in ("epochs", "batch_size", "iht_every"):
            value = getattr(self, name)
            if name in ("batch_size", "epochs") and isinstance(value, str) and value == "auto":
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                also = " or 'auto'" if name in ("batch_size", "epochs") else ""
                raise DataError(f"{name}={value!r}: expected a positive integer{also}")
        bad_budget = not isinstance(self.budget_bytes, (int, float, np.integer, np.floating)) or isinstance(
            self.budget_bytes, bool) or not np.isfinite(self.budget_bytes) or self.budget_bytes <= 0
        if self.budget_bytes is not None and bad_budget:
            raise DataError(f"budget_bytes={self.budget_bytes!r}: expected a positive number of bytes")
        if self.init not in ("random", "pca") or self.scaling not in ("feature", "global"):
            raise DataError(f"init={self.init!r} / scaling={self.scaling!r}: expected random|pca / feature|global")
        if self.projection_dim is not None and self.projection_dim < 1:
            raise DataError(f"projection_dim={self.projection_dim!r}: expected >= 1")
        if self.depth is not None and not 0 <= self.depth <= 8:
            raise DataError(f"depth={self.depth!r}: expected 0..8")
        for name in ("reg_z", "reg_tree"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float, np.integer, np.floating))
                                          and np.isfinite(value) and value >= 0):
                raise DataError(f"{name}={value!r}: expected a non-negative number or None")
        if not 0 < self.validation_fraction < 1:
            raise DataError(f"validation_fraction={self.validation_fraction!r}: expected a fraction in (0, 1)")

    # --- forward / backward in standardised space ---
    def _forward(self, Xs, P, sig_i, need_cache=True):
        """Scores for standardised Xs. sig_i=None means exact hard paths."""
        L = self.n_outputs_
        xh = Xs @ P["Z"].T + P["b"]
        n_nodes, n_int = self._tree
        A = (xh @ P["W"].reshape(-1, xh.shape[1]).T).reshape(len(xh), n_nodes, L)
        Bv = (xh @ P["V"].reshape(-1, xh.shape[1]).T).reshape(len(xh), n_nodes, L)
        tB = np.tanh(self.sigma * Bv)
        out = A * tB
        I = np.ones((len(xh), n_nodes), dtype=xh.dtype)
        s = None
        if n_int:
            u = xh @ P["T"].T
            s = np.where(u > 0, 1.0, -1.0).astype(u.dtype) if sig_i is None else np.tanh(u.dtype.type(sig_i) * u)
            for lo, hi in _levels(n_int):  # a level's nodes at once: children 2j+1, 2j+2
                half = I[:, lo:hi] * 0.5
                I[:, 2 * lo + 1:2 * hi + 1:2] = half * (1 + s[:, lo:hi])
                I[:, 2 * lo + 2:2 * hi + 2:2] = half * (1 - s[:, lo:hi])
        y = np.einsum("nk,nkl->nl", I, out)
        cache = (xh, A, tB, out, I, s) if need_cache else None
        return y, cache

    def _backward(self, Xs, P, cache, G, sig_i):
        xh, A, tB, out, I, s = cache
        n, d = xh.shape
        n_nodes, n_int = self._tree
        dout = I[:, :, None] * G[:, None, :]
        dA = (dout * tB).reshape(n, -1)
        dB = (dout * A * self.sigma * (1 - tB**2)).reshape(n, -1)
        grads = {"W": (dA.T @ xh).reshape(P["W"].shape), "V": (dB.T @ xh).reshape(P["V"].shape)}
        dxh = dA @ P["W"].reshape(-1, d) + dB @ P["V"].reshape(-1, d)
        grads["T"] = np.zeros_like(P["T"])
        if n_int and sig_i is not None:
            dI = np.einsum("nkl,nl->nk", out, G)
            ds = np.zeros((n, n_int), dtype=xh.dtype)
            for lo, hi in reversed(_levels(n_int)):  # children are on deeper levels: finish them first
                c1, c2 = dI[:, 2 * lo + 1:2 * hi + 1:2], dI[:, 2 * lo + 2:2 * hi + 2:2]
                sj = s[:, lo:hi]
                dI[:, lo:hi] += 0.5 * (c1 * (1 + sj) + c2 * (1 - sj))
                ds[:, lo:hi] = 0.5 * I[:, lo:hi] * (c1 - c2)
            du = ds * (1 - s**2) * xh.dtype.type(sig_i)
            grads["T"] = du.T @ xh
            dxh += du @ P["T"]
        grads["Z"] = dxh.T @ Xs
        grads["b"] = dxh.sum(axis=0)
        return grads

    def _loss_grad(self, y, yi):
        """Mean loss and its gradient with respect to the scores."""
        n = len(yi)
        if self.n_outputs_ == 1:
            sgn = 2.0 * yi - 1.0
            m = sgn * y[:, 0]
            if self._loss == "hinge":
                active = m < 1
                return np.mean(np.maximum(0, 1 - m)), (-(sgn * active) / n)[:, None]
            p = 1 / (1 + np.exp(np.clip(m, -50, 50)))  # sigmoid(-m)
            return np.mean(np.logaddexp(0, -m)), (-(sgn * p) / n)[:, None]
        rows = np.arange(n)
        if self._loss == "hinge":
            other = y.copy()
            other[rows, yi] = -np.inf
            j = np.argmax(other, axis=1)
            margin = 1 + other[rows, j] - y[rows, yi]
            active = (margin > 0).astype(float)
            G = np.zeros_like(y)
            G[rows, j] += active / n
            G[rows, yi] -= active / n
            return np.mean(np.maximum(margin, 0)), G
        z = y - y.max(axis=1, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(p[rows, yi] + 1e-300))
        p[rows, yi] -= 1
        return loss, p / n

    # --- fit ---
    def fit(self, X, y):
        self._check_params()
        X, y = check_training_data(self, X, y)
        self.classes_, yi = encode_labels(y)
        # the matrices are small: BLAS threads only contend (measured ~8x slower on 2 busy cores)
        with threadpool_limits(limits=1):
            stratify = yi if np.bincount(yi).min() >= 2 else None
            return self._fit_selected(X, yi, 1 if self.classes_.size == 2 else self.classes_.size, stratify)

    def _candidates(self, n_features) -> list[tuple[int, float, float]]:
        """(depth, reg_z, reg_tree) to try, the default first. Plans each depth, so a budget too
        small for any tree fails here, before any training."""
        L = self.n_outputs_
        plan = plan_budget(self.budget_bytes, n_features, L, self.projection_dim, self.depth)
        depths = [plan["depth"]]
        d_cap = self.projection_dim or min(n_features, 20 if L == 1 else 30)
        # room left at the planned depth (all dense at the largest d̂): deeper trees may use it
        while (self.depth is None and self.budget_bytes is not None and len(depths) < 3
               and plan["nnz_z"] is None and plan["tree_fraction"] is None and plan["d_hat"] >= d_cap
               and plan["depth"] < MAX_AUTO_DEPTH):
            try:
                plan = plan_budget(self.budget_bytes, n_features, L, self.projection_dim, plan["depth"] + 1)
            except DataError:
                break
            depths.append(plan["depth"])
        if self.reg_z is None and self.reg_tree is None:
            regs = [(r, r) for r in AUTO_REGULARISATION]
        else:
            regs = [(AUTO_REGULARISATION[0] if self.reg_z is None else self.reg_z,
                     AUTO_REGULARISATION[0] if self.reg_tree is None else self.reg_tree)]
        return [(h, rz, rt) for h in depths for rz, rt in regs]

    def _fit_selected(self, X, targets, n_outputs, stratify=None):
        """Choose depth and regularisation on a validation split (module doc), then fit on all of X."""
        log = TrainingLog(self)
        self.n_outputs_ = n_outputs
        candidates = self._candidates(X.shape[1])
        self.selection_ = []
        if len(candidates) > 1:
            Xa, Xv, ta, tv = train_test_split(X, targets, test_size=self.validation_fraction, stratify=stratify,
                                              random_state=np.random.default_rng(self.random_state).integers(2**31))
            self._epoch_share = SELECTION_EPOCH_SHARE  # candidates train on a shortened schedule
            try:
                for candidate in candidates:
                    self._fit(Xa, ta, *candidate)
                    self.selection_.append((*candidate, self._validation_score(Xv, tv)))
            finally:
                self._epoch_share = 1.0
            default_score = self.selection_[0][3]
            margin = self._selection_margin(default_score, len(Xv))
            best = max(range(len(candidates)), key=lambda i: self.selection_[i][3])
            if self.selection_[best][3] <= default_score + margin:
                best = 0
            log(f"validation scores (depth, reg_z, reg_tree, score): {self.selection_}; "
                              f"chose {candidates[best]}")
            candidates = [candidates[best]]
        self._fit(X, targets, *candidates[0])
        self.fit_seconds_ = log.elapsed  # selection included
        return self

    def _validation_score(self, X, yi) -> float:
        return float(np.mean(self.predict(X) == self.classes_[yi]))

    @staticmethod
    def _selection_margin(accuracy, n_validation) -> float:
        """One standard error of a validation accuracy."""
        return math.sqrt(max(accuracy * (1 - accuracy), 1e-12) / n_validation)

    def _fit(self, X, yi, depth, reg_z, reg_tree):
        log = TrainingLog(self)
        D = X.shape[1]
        self.depth_, self.reg_z_, self.reg_tree_ = depth, reg_z, reg_tree
        binary = self.n_outputs_ == 1
        self._loss = self.loss if self.loss != "auto" else ("hinge" if binary else "crossentropy")
        self.plan_ = plan_budget(self.budget_bytes, D, self.n_outputs_, self.projection_dim, depth)
        self._tree = tree_sizes(self.plan_["depth"])
        rng = np.random.default_rng(self.random_state)
        Xs = self._standardise(X)
        P = self._init_params(Xs, rng)
        self.params_ = self._train(Xs, yi, P, self._sparsity_budgets(P), rng, log)
        self.model_ = self._build_model()
        self.fit_seconds_ = log.elapsed
        return self

    def _standardise(self, X) -> np.ndarray:
        """Sets ``mean_`` / ``std_`` and returns the standardised X."""
        self.mean_ = X.mean(axis=0)
        std = X.std(axis=0)
        std[std < 1e-6] = 1.0  # constant features: leave unscaled (as EdgeML does)
        if self.scaling == "global":  # one scale for all features: keeps low-variance pixels quiet
            std = np.full(X.shape[1], float(np.sqrt(np.mean(std**2))))
        self.std_ = std
        return (X - self.mean_) / self.std_

    def _init_params(self, Xs, rng) -> dict[str, np.ndarray]:
        """Z (random or PCA start), zero bias, small random W, V and T."""
        n, D = Xs.shape
        d, L = self.plan_["d_hat"], self.n_outputs_
        n_nodes, n_int = self._tree
        if self.init == "pca":  # leading principal directions, scaled so x̂ has unit variance
            sub = Xs[rng.choice(n, min(n, 4000), replace=False)]
            _, sv, vt = np.linalg.svd(sub, full_matrices=False)
            Z0 = np.zeros((d, D))
            k = min(d, len(sv))
            Z0[:k] = vt[:k] / (sv[:k, None] / math.sqrt(len(sub)) + 1e-12)
            Z0[k:] = rng.normal(0, 1 / math.sqrt(D), (d - k, D))
        else:
            Z0 = rng.normal(0, 1 / math.sqrt(D), (d, D))
        return {
            "Z": Z0,
            "b": np.zeros(d),
            "W": rng.normal(0, 0.1, (n_nodes, L, d)),
            "V": rng.normal(0, 0.1, (n_nodes, L, d)),
            "T": rng.normal(0, 1 / math.sqrt(d), (n_int, d)),
        }

    def _sparsity_budgets(self, P) -> dict[str, int]:
        """Nonzeros kept per parameter that the plan makes sparse."""
        budgets = {"Z": self.plan_["nnz_z"]}
        if self.plan_["tree_fraction"] is not None:
            for name in ("W", "V", "T"):
                budgets[name] = _tree_nnz(P[name].size, self.plan_["tree_fraction"]) if P[name].size else None
        return {k: v for k, v in budgets.items() if v is not None and v < P[k].size}

    def _epoch_count(self, n: int) -> int:
        """``epochs``; "auto": AUTO_EPOCHS, or on a small set enough epochs for MIN_AUTO_STEPS steps of the
        batch size (at most MAX_AUTO_EPOCHS)."""
        share = getattr(self, "_epoch_share", 1.0)
        if self.epochs != "auto":
            epochs = int(self.epochs)
        elif n >= 16 * AUTO_BATCH:
            epochs = AUTO_EPOCHS
        else:
            steps = max(1, n // min(self._batch_rows(n), n))
            epochs = max(AUTO_EPOCHS, min(MAX_AUTO_EPOCHS, -(-MIN_AUTO_STEPS // steps)))
        return epochs if share >= 1.0 else min(epochs, max(4, int(round(share * epochs))))

    def _batch_rows(self, n: int) -> int:
        if self.batch_size != "auto":
            return int(self.batch_size)
        return AUTO_BATCH if n >= 16 * AUTO_BATCH else max(MIN_AUTO_BATCH, n // 16)

    def _epoch_schedule(self, epoch, Xs, P, rng) -> tuple[float, float | None]:
        """(learning rate, σ_I) of an epoch; σ_I None in the hard re-training phase."""
        E = self._epoch_count(len(Xs))
        e_iht = int(round(0.7 * E))
        if epoch >= e_iht:
            frac = (epoch - e_iht) / max(1, E - e_iht)
            return self.learning_rate * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac))), None
        # σ_I relative to the typical |θᵀx̂| so the schedule does not depend on scales
        s0, s1 = self.sharpness
        probe = Xs[rng.choice(len(Xs), min(len(Xs), 512), replace=False)]
        u = (probe @ P["Z"].T + P["b"]) @ P["T"].T if self._tree[1] else np.ones((1, 1))
        typical = float(np.mean(np.abs(u))) + 1e-12
        return self.learning_rate, s0 * (s1 / s0) ** (epoch / max(1, e_iht - 1)) / typical

    def _train(self, Xs, yi, P, budgets, rng, log) -> dict[str, np.ndarray]:
        """Mini-batch Adam through the dense, IHT and sparse re-training phases (module doc)."""
        n = len(Xs)
        reg_tree = self.reg_tree_
        adam = _Adam(P, {"Z": self.reg_z_, "b": 0.0, "W": reg_tree, "V": reg_tree, "T": reg_tree})
        masks: dict[str, np.ndarray] = {}
        bs = min(self._batch_rows(n), n)
        n_batches = max(1, n // bs)
        E = self._epoch_count(n)
        e_dense, e_iht = int(round(0.3 * E)), int(round(0.7 * E))
        avg = np.zeros_like(adam.theta)
        n_avg = 0
        X32 = Xs.astype(np.float32)
        for epoch in range(E):
            hard = epoch >= e_iht
            if hard and not masks:  # end of IHT: fix the support for re-training
                masks = {k: top_k_mask(P[k], budgets[k]) for k in budgets}
                for k, mask in masks.items():
                    P[k] *= mask
            lr, sig_i = self._epoch_schedule(epoch, Xs, P, rng)
            order = rng.permutation(n)
            total = 0.0
            for bi in range(n_batches):
                idx = order[bi * bs:(bi + 1) * bs]
                Xb = X32[idx]
                if self.input_noise:  # Gaussian input noise: a cheap regulariser against overfitting
                    Xb = Xb + (self.input_noise * rng.standard_normal(Xb.shape)).astype(np.float32)
                yb, cache = self._forward(Xb, P, sig_i)
                loss, G = self._loss_grad(yb, yi[idx])
                G = G.astype(np.float32, copy=False)
                total += loss
                adam.step(P, self._backward(Xb, P, cache, G, sig_i), lr, masks)
                if hard and self.average:  # running mean of the re-training iterates
                    n_avg += 1
                    avg += (adam.theta - avg) / n_avg
                iht_step = adam.t % self.iht_every == 0 or bi == n_batches - 1
                if e_dense <= epoch < e_iht and budgets and iht_step:
                    for k, budget in budgets.items():
                        hard_threshold(P[k], budget)
            phase = "dense" if epoch < e_dense else ("iht" if not hard else "sparse-retrain")
            log(f"epoch {epoch + 1}/{E} ({phase}) loss {total / n_batches:.4f}")
        if n_avg:
            P = adam.views(avg, dict(P))
        for k, budget in budgets.items():  # the support is final; this only guards E < 4
            hard_threshold(P[k], budget)
        return {k: v.astype(np.float64) for k, v in P.items()}

    def _build_model(self) -> BonsaiModel:
        P = self.params_
        d = P["Z"].shape[0]
        model = BonsaiModel(P["Z"], P["W"].reshape(-1, d), P["V"].reshape(-1, d), P["T"], self.sigma,
                            self.plan_["depth"], z_bias=P["b"], mean=self.mean_, std=self.std_)
        if getattr(self, "_loss", None) == "crossentropy":  # the scores are logits: probabilities are defined
            model.with_proba("logistic" if model.binary else "softmax")
        return model.folded()

    # --- prediction ---
    def decision_function(self, X) -> np.ndarray:
        """Scores, (n,) for binary problems, else (n, C); computed in standardised space."""
        X = check_predict_data(self, X, "params_")
        y, _ = self._forward((X - self.mean_) / self.std_, self.params_, None, need_cache=False)
        return y[:, 0] if self.n_outputs_ == 1 else y

    def predict(self, X) -> np.ndarray:
        s = self.decision_function(X)
        if self.n_outputs_ == 1:
            return self.classes_[(s > 0).astype(np.int64)]
        return self.classes_[np.argmax(s, axis=1)]

    def to_model(self) -> BonsaiModel:
        """The deployed model, carrying the class labels."""
        check_is_fitted(self, "params_")
        return with_estimator_classes(self.model_, self)

    @property
    def model_bytes(self) -> int:
        """Flash bytes of the deployed model (see BonsaiModel.storage_bytes)."""
        return self.to_model().storage_bytes()

    def save(self, path):
        return self.to_model().save(path)
