"""Class probabilities from a model's scores, by the rule the model defines (``Model.proba_rule``):

    "softmax"        p = softmax(scores)                    (multi-class networks, naive Bayes)
    "logistic"       one score s: p = [1 - sigmoid(s), sigmoid(s)]   (binary networks)
    "logistic_each"  p_l = sigmoid(score_l)                (multilabel networks)

The compiled ``<prefix>_proba`` (backends/proba.py) applies the same rule to the compiled scores in
float arithmetic. For an integer build the probabilities move with the scores' fixed-point error
eps = max |score_int * 2^-SCORE_SCALE - score|: softmax and a pair of logistic probabilities by at
most eps / 2 (|dp_i/dt| = p_i |d_i - sum_j p_j d_j| <= 2 eps p_i (1 - p_i) <= eps / 2), a single
logistic by at most eps / 4; plus float32 rounding (PROBA_FLOAT_SLACK).
"""

from __future__ import annotations

import numpy as np

RULES = ("softmax", "logistic", "logistic_each")
PROBA_FLOAT_SLACK = 1e-6  # float32 rounding of expf, the sum and the division


def sigmoid(z) -> np.ndarray:
    return 0.5 * np.tanh(0.5 * np.asarray(z, dtype=np.float64)) + 0.5


def proba_from_scores(scores: np.ndarray, rule: str) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if rule == "softmax":
        e = np.exp(s - np.max(s, axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True)
    if rule == "logistic":
        p = sigmoid(s[:, :1])
        return np.hstack([1.0 - p, p])
    if rule == "logistic_each":
        return sigmoid(s)
    raise ValueError(f"unknown probability rule {rule!r}")


def proba_error_bound(rule: str, score_error: float) -> float:
    """Largest change of a probability when every score moves by at most ``score_error`` (at most 1)."""
    return min((score_error / 4 if rule == "logistic_each" else score_error / 2) + PROBA_FLOAT_SLACK, 1.0)
