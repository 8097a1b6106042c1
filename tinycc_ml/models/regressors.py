"""Regression with the papers' models: ProtoNN (Gupta et al., section 3: any loss on the score
vector; here the squared loss on one output) and Bonsai (Kumar et al., section 3: the tree's output
as a real value, squared loss).

Both train on the standardised target t = (y - mean) / scale and deploy a model whose single score
is the value itself: the scale is folded into ProtoNN's Z or Bonsai's W (the output is linear in
them) and the mean is the model's ``offset``. The compiled C returns the value through
``<prefix>_predict_value`` (float, or an integer with ``<PREFIX>_SCORE_SCALE`` fractional bits).
``score`` is R², as for every scikit-learn regressor.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from tinycc_ml.errors import DataError
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
from tinycc_ml.models.training import check_predict_data, check_training_data, keep_parameters

REGRESSION = {"kind": "regression"}
GAMMA_SCALES = (2.5, 0.5, 0.2)


def check_regression_target(y) -> np.ndarray:
    """y as finite float64 (n,); DataError naming the first bad row otherwise."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected; it is used as (n,)",
                      DataConversionWarning, stacklevel=3)
        y = y[:, 0]
    if y.ndim != 1:
        raise DataError(f"y has shape {y.shape}: a regressor takes one target value per row")
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise DataError(f"y has dtype {y.dtype}: regression targets must be numbers") from None
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise DataError(f"y holds a non-finite target ({y[bad[0]]}) at row {bad[0]}")
    return y


def refuse_non_finite_targets(y) -> None:
    """DataError naming the first row whose target is NaN or infinite, before scikit-learn's
    generic "Input y contains NaN" and before any work."""
    y = np.asarray(y)
    if y.dtype.kind == "f" and y.ndim in (1, 2) and len(y):
        bad = np.flatnonzero(~np.isfinite(y.reshape(len(y), -1)).all(axis=1))
        if bad.size:
            raise DataError(f"y holds a non-finite regression target ({y.reshape(len(y), -1)[bad[0]][0]}) at row "
                            f"{bad[0]}: targets must be finite numbers")


def _standardise_target(estimator, y) -> np.ndarray:
    estimator.y_mean_ = float(np.mean(y))
    spread = float(np.std(y))
    estimator.y_scale_ = spread if spread > 0 else 1.0
    return (y - estimator.y_mean_) / estimator.y_scale_


class ProtoNNRegressor(RegressorMixin, ProtoNNClassifier):
    """ProtoNN for a real-valued target: prediction = Σ_j z_j exp(-γ² ‖W x' - b_j‖²) + offset.

    Parameters as :class:`ProtoNNClassifier` (budget, sizes, sparsities, iterations). Prototypes
    start as k-means centres in the projected space, each z_j the mean target of its cluster.
    Early stopping is on by default: nothing else regularises ProtoNN, and small regression sets
    overfit (diabetes: test R² 0.32 after 1 iteration, 0.22 after 10, -0.01 after 60).
    """

    n_classes = None
    multilabel_rule, multilabel_threshold, multilabel_k = "threshold", 0.5, 1
    learning_rate, projection_decay = 0.005, 0.3  # the classifier's "adam" settings (step_rule="adam")

    def __init__(self, budget_bytes=None, projection_dim=None, n_prototypes=None, sparsity_w=None, sparsity_b=None,
                 sparsity_z=None, gamma=None, n_iter=150, epochs=5, batch_size=None, init_w="pca",
                 step_rule="armijo", standardize="auto", early_stopping=True, validation_fraction=0.2,
                 patience=10, random_state=None, verbose=0):
        keep_parameters(self, locals())

    def _check_targets(self, y, n):
        t = _standardise_target(self, check_regression_target(y))
        return t[:, None].astype(np.float32), "regression", None

    def fit(self, X, y):
        refuse_non_finite_targets(y)
        self._gamma_scale = GAMMA_SCALES[0]
        super().fit(X, y)
        del self.classes_  # a regressor has none
        return self

    def _early_stopped_iterations(self, Xs, Y, kind, plan, rng) -> int:
        """As the classifier's, and with gamma=None also the kernel width: 2.5 / median distance
        (the paper's), 0.5 / or 0.2 / (wide kernels fit near-linear targets: diabetes, test R² 0.30
        at 2.5, 0.35 at 0.2); the best validation score wins."""
        if self.gamma is not None:
            return super()._early_stopped_iterations(Xs, Y, kind, plan, rng)
        tried = []
        for scale in GAMMA_SCALES:
            self._gamma_scale = scale
            n_iter = super()._early_stopped_iterations(Xs, Y, kind, plan, rng)
            tried.append((self.validation_score_, scale, n_iter))
        _, self._gamma_scale, n_iter = max(tried, key=lambda item: item[0])
        return n_iter

    def predict(self, X) -> np.ndarray:
        return self._scores(check_predict_data(self, X, "W_"))[:, 0] * self.y_scale_ + self.y_mean_

    decision_function = property(doc="not defined for a regressor")  # hides the classifier's

    def to_model(self):
        """The trained model: its one score is the predicted value."""
        check_is_fitted(self, "W_")
        return ProtoNNModel(self.W_, self.B_, self.Z_ * self.y_scale_, self.gamma_, mean=self.mean_, std=self.std_,
                            offset=[self.y_mean_]).with_task(REGRESSION)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags


class BonsaiRegressor(RegressorMixin, BonsaiClassifier):
    """Bonsai for a real-valued target: prediction = Σ_{k on the path} (W_k x̂) tanh(σ V_k x̂) + offset.

    Parameters as :class:`BonsaiClassifier` without ``loss`` (squared loss); ``depth`` and the
    regularisation are chosen on a validation split unless given (see ``BonsaiClassifier``).
    The learning rate is higher than the classifier's (0.01): regression sets are small and a
    mini-batch epoch is a few steps (make_regression, 300 rows: test R² 0.92 at 0.003, 0.975 at
    0.01; diabetes, 5-fold: 0.45 and 0.48).
    """

    loss = "auto"

    def __init__(self, budget_bytes=None, projection_dim=None, depth=None, sigma=1.0, epochs=40, batch_size=128,
                 learning_rate=0.01, reg_z=None, reg_tree=None, iht_every=10, sharpness=(1.0, 100.0),
                 init="random", scaling="feature", average=True, input_noise=0.0, validation_fraction=0.2,
                 random_state=None, verbose=0):
        keep_parameters(self, locals())

    def fit(self, X, y):
        self._check_params()
        refuse_non_finite_targets(y)
        X, y = check_training_data(self, X, y)
        t = _standardise_target(self, check_regression_target(y))
        with threadpool_limits(limits=1):
            return self._fit_selected(X, t, n_outputs=1)

    def _validation_score(self, X, t) -> float:
        return float(self.score(X, t * self.y_scale_ + self.y_mean_))  # R²

    @staticmethod
    def _selection_margin(score, n_validation) -> float:
        return 0.0

    def _loss_grad(self, y, t):
        r = y[:, 0] - t
        return 0.5 * float(np.mean(r * r)), (r / len(t))[:, None]

    def predict(self, X) -> np.ndarray:
        X = check_predict_data(self, X, "params_")
        y, _ = self._forward((X - self.mean_) / self.std_, self.params_, None, need_cache=False)
        return y[:, 0] * self.y_scale_ + self.y_mean_

    decision_function = property(doc="not defined for a regressor")  # hides the classifier's

    def _build_model(self):
        model = super()._build_model().with_proba(None)  # a value, not a probability
        model.W = model.W * self.y_scale_  # the output is linear in W
        model.offset = np.array([self.y_mean_])
        return model.with_task(REGRESSION)

    def to_model(self):
        check_is_fitted(self, "params_")
        return self.model_
