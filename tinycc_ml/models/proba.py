"""Class probabilities from a model's scores, by the rule the model defines (``Model.proba_rule``):

    "softmax"        p = softmax(scores)                    (multi-class networks, naive Bayes)
    "logistic"       one score s: p = [1 - sigmoid(s), sigmoid(s)]   (binary networks)
    "logistic_each"  p_l = sigmoid(score_l)                (multilabel networks)
    "logistic_ovr"   p_l = sigmoid(score_l) / sum_k sigmoid(score_k), uniform where the sum is 0
                     (one-vs-rest linear classifiers: SGDClassifier's log loss, liblinear)
    "normalise"      p = max(s, 0) / sum(max(s, 0)), uniform where no score is > 0
                     (forests: the mean of the trees' class probabilities; ProtoNN's scores)
    "modified_huber" q_l = (clip(score_l, -1, 1) + 1) / 2; one score: [1 - q, q]; several: q / sum_k q_k,
                     uniform where the sum is 0 (SGDClassifier with loss="modified_huber")
    "one_hot"        p = 1 for the class of the first highest score, 0 elsewhere (a 1-nearest-neighbour's
                     predict_proba: its one neighbour's class)
    "probabilities"  the scores are the probabilities (calibrated classifiers: their mean over the folds)
    "platt_coupled"  the scores are one-vs-one decisions f_p: r_p = 1 / (1 + exp(A_p f_p + B_p)) (Platt
                     scaling, clipped to [1e-7, 1 - 1e-7]), coupled into class probabilities by libsvm's
                     iterative method (Wu, Lin and Weng's second), its stopping rule and iteration limit
                     included (SVC / NuSVC with probability=True; two classes too, as libsvm does)
    "softmax_linear" p = softmax(W x + b) of the model's input x, not of its scores (constants: weights (K, D),
                     bias (K,)): a second head beside the scores. NearestCentroid: scikit-learn's predict_proba is
                     the softmax of the discriminant -||(x - c_k) / sigma||^2 (sigma the within-class spread),
                     whose term in ||x / sigma||^2 is common to every class and cancels, leaving a linear map;
                     its predict reads the plain distances, so the scores cannot serve

The compiled ``<prefix>_proba`` (codegen/proba.py) applies the same rule to the compiled scores in
float arithmetic. For an integer build the probabilities move with the scores' fixed-point error
eps = max |score_int * 2^-SCORE_SCALE - score|: softmax and a pair of logistic probabilities by at
most eps / 2 (|dp_i/dt| = p_i |d_i - sum_j p_j d_j| <= 2 eps p_i (1 - p_i) <= eps / 2), a single
logistic by at most eps / 4; normalised scores by at most eps (1 + K) / (S - K eps) for K scores whose
positive parts sum to S (|d max(s, 0)| <= eps, |dS| <= K eps): the bound takes the smallest S of the
calibration rows (a forest's S is its number of trees on every row); modified Huber's pair moves by at most
eps / 2, several classes as normalised scores clip(s, -1, 1) + 1 (each moving by at most eps); plus float32 rounding
(PROBA_FLOAT_SLACK). "softmax_linear" moves by at most eps / 2 too, eps bounding the head's error
(``linear_head_error``: float32 evaluation and the input's quantisation).
"""

from __future__ import annotations

import numpy as np

RULES = ("softmax", "logistic", "logistic_each", "logistic_ovr", "normalise", "modified_huber", "one_hot",
         "platt_coupled", "probabilities", "softmax_linear")
INPUT_RULES = ("softmax_linear",)  # rules that read the model's input instead of its scores
FLOAT32_UNIT = 2.0**-24  # float32's unit roundoff
LIBSVM_MIN_PROB = 1e-7  # libsvm clips each pair's probability to [min, 1 - min]
PROBA_FLOAT_SLACK = 1e-6  # float32 rounding of expf, the sum and the division


def sigmoid(z) -> np.ndarray:
    return 0.5 * np.tanh(0.5 * np.asarray(z, dtype=np.float64)) + 0.5


def pair_index(i: int, j: int, k: int) -> int:
    """Pair (i, j), i < j, in libsvm's one-vs-one order among k classes."""
    return i * k - i * (i + 1) // 2 + (j - i - 1)


def platt_coupled(decisions: np.ndarray, a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """libsvm's predict_probability from its one-vs-one decisions (n, pairs): (n, k)."""
    f = np.asarray(decisions, dtype=np.float64) * a + b
    with np.errstate(over="ignore"):
        r = np.where(f >= 0, np.exp(-np.abs(f)) / (1.0 + np.exp(-np.abs(f))), 1.0 / (1.0 + np.exp(-np.abs(f))))
    r = np.clip(r, LIBSVM_MIN_PROB, 1.0 - LIBSVM_MIN_PROB)
    n = len(r)
    R = np.zeros((n, k, k))  # R[:, i, j]: the probability of i in pair (i, j)
    for i in range(k):
        for j in range(i + 1, k):
            R[:, i, j], R[:, j, i] = r[:, pair_index(i, j, k)], 1.0 - r[:, pair_index(i, j, k)]
    Q = -R.transpose(0, 2, 1) * R  # Q[t, j] = -r_jt r_tj
    for t in range(k):
        Q[:, t, t] = sum(R[:, j, t] ** 2 for j in range(k) if j != t)
    p = np.full((n, k), 1.0 / k)
    active = np.ones(n, dtype=bool)
    eps = 0.005 / k
    for _ in range(max(100, k)):
        Qp = np.einsum("ntj,nj->nt", Q, p)
        pQp = np.sum(p * Qp, axis=1)
        active &= np.max(np.abs(Qp - pQp[:, None]), axis=1) >= eps
        if not active.any():
            break
        for t in range(k):
            diff = np.where(active, (-Qp[:, t] + pQp) / Q[:, t, t], 0.0)
            p[:, t] += diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2 * Qp[:, t])) / (1 + diff) / (1 + diff)
            Qp = (Qp + diff[:, None] * Q[:, t, :]) / (1 + diff)[:, None]
            p /= (1 + diff)[:, None]
    return p


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - np.max(s, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def proba_from_inputs(X: np.ndarray, rule: str, constants: dict) -> np.ndarray:
    """Probabilities of an input rule (INPUT_RULES) from the rows X (n, D)."""
    if rule != "softmax_linear":
        raise ValueError(f"{rule!r} reads the scores, not the input")
    return softmax(np.asarray(X, dtype=np.float64) @ constants["weights"].T + constants["bias"])


def linear_head_error(X: np.ndarray, constants: dict, input_step=None) -> float:
    """Largest error of the float32 C's ``W x + b`` on the rows X against exact arithmetic: its terms summed
    in float32 (D products, the bias, rounding of W, b and x to float32: gamma_{D+3} times the sum of their
    magnitudes) plus, for integer inputs quantised by rounding to steps ``input_step`` (D,), |W| step / 2."""
    W, b = constants["weights"], constants["bias"]
    X = np.abs(np.asarray(X, dtype=np.float64))
    n = W.shape[1] + 3
    gamma = n * FLOAT32_UNIT / (1 - n * FLOAT32_UNIT)
    magnitude = X @ np.abs(W).T + np.abs(b)
    if input_step is not None:
        magnitude = magnitude + np.abs(W) @ np.asarray(input_step, dtype=np.float64)  # |x_q| <= |x| + step
    error = gamma * magnitude
    if input_step is not None:
        error = error + np.abs(W) @ (np.asarray(input_step, dtype=np.float64) / 2)
    return float(np.max(error))


def proba_from_scores(scores: np.ndarray, rule: str, constants: dict | None = None) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if rule == "probabilities":
        return s.copy()
    if rule == "platt_coupled":
        return platt_coupled(s, constants["a"], constants["b"], constants["n_classes"])
    if rule == "softmax":
        return softmax(s)
    if rule == "logistic":
        p = sigmoid(s[:, :1])
        return np.hstack([1.0 - p, p])
    if rule == "logistic_each":
        return sigmoid(s)
    if rule == "logistic_ovr":
        p = sigmoid(s)
        total = np.sum(p, axis=1, keepdims=True)
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / s.shape[1])
    if rule == "one_hot":
        return np.eye(s.shape[1])[np.argmax(s, axis=1)]
    if rule == "modified_huber":
        q = (np.clip(s, -1.0, 1.0) + 1.0) / 2.0
        if s.shape[1] == 1:
            return np.hstack([1.0 - q, q])
        total = np.sum(q, axis=1, keepdims=True)
        return np.where(total > 0, q / np.where(total > 0, total, 1.0), 1.0 / s.shape[1])
    if rule == "normalise":
        a = np.maximum(s, 0.0)
        total = np.sum(a, axis=1, keepdims=True)
        return np.where(total > 0, a / np.where(total > 0, total, 1.0), 1.0 / s.shape[1])
    raise ValueError(f"unknown probability rule {rule!r}")


def proba_error_bound(rule: str, score_error: float, scores=None) -> float:
    """Largest change of a probability when every score moves by at most ``score_error`` (at most 1);
    "normalise" also needs the float scores of the rows it is stated for (see the module doc); none
    (1.0) is stated for "platt_coupled", whose iterative coupling may stop an iteration apart, nor for "one_hot",
    which jumps where the highest score changes."""
    if rule in ("platt_coupled", "one_hot"):
        return 1.0
    if rule == "probabilities":
        return min(score_error + PROBA_FLOAT_SLACK, 1.0)
    if rule == "modified_huber":
        s = np.asarray(scores, dtype=np.float64)
        if s.shape[1] == 1:
            return min(score_error / 2 + PROBA_FLOAT_SLACK, 1.0)
        # p = a / sum(a) with a = clip(s, -1, 1) + 1, each a moving by at most eps: normalised scores' bound
        return proba_error_bound("normalise", score_error, np.clip(s, -1.0, 1.0) + 1.0)
    if rule == "normalise":
        s = np.asarray(scores, dtype=np.float64)
        k = s.shape[1]
        least = float(np.min(np.sum(np.maximum(s, 0.0), axis=1)))
        if least - k * score_error <= 0:
            return 1.0
        return min(score_error * (1 + k) / (least - k * score_error) + PROBA_FLOAT_SLACK, 1.0)
    if rule == "logistic_ovr":  # each sigmoid moves by <= eps / 4, their sum S >= K sigmoid(min score) by <= K eps / 4
        s = np.asarray(scores, dtype=np.float64)
        k = s.shape[1]
        least = float(np.min(np.sum(sigmoid(s), axis=1)))
        if least - k * score_error / 4 <= 0:
            return 1.0
        return min(score_error / 4 * (1 + k) / (least - k * score_error / 4) + PROBA_FLOAT_SLACK, 1.0)
    return min((score_error / 4 if rule == "logistic_each" else score_error / 2) + PROBA_FLOAT_SLACK, 1.0)
