"""Every objective / loss the boosting libraries offer, table-driven: compiled (float, host) it predicts
what the library's own predict / predict_proba returns on every row (values to float32 rounding, labels
exactly), or it is refused with an error naming the objective (issue 36, item 1).

Inputs are multiples of 1/4 (exact in float32, so the C's float32 input is the library's input) plus
rows at the thresholds the trees learnt: so no result depends on one machine's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.models.test_trees_boosters import need
from tinycc_ml.errors import CompileError, ModelFileError

ROWS = 240


def _data(kind: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.integers(-8, 9, size=(ROWS, 4)) / 4.0
    margin = X[:, 0] - 0.5 * X[:, 1] + 0.25 * X[:, 2] * X[:, 3]
    if kind == "reg":
        return X, margin + 0.25 * rng.integers(-2, 3, size=ROWS)
    if kind == "positive":
        return X, np.exp(0.5 * margin) + 0.125 * rng.integers(0, 3, size=ROWS)
    if kind == "count":
        return X, rng.poisson(np.exp(0.4 * margin)).astype(np.float64)
    if kind == "prob":
        return X, 1.0 / (1.0 + np.exp(-margin))
    if kind == "binary":
        return X, (margin + 0.5 * rng.integers(-1, 2, size=ROWS) > 0).astype(np.int64)
    if kind == "multi":
        return X, np.digitize(margin, [-0.75, 0.75])
    if kind == "survival":  # Cox: negative times are censored
        return X, np.exp(-0.5 * margin) * np.where(rng.integers(0, 4, size=ROWS) == 0, -1, 1)
    raise AssertionError(kind)


def _check(model, X, want_values=None, want_labels=None, want_proba=None):
    compiled = tinycc_ml.compile(model, target="host", precision="float").load()
    if want_values is not None:
        got = compiled.values(X)
        np.testing.assert_allclose(got, want_values, rtol=2e-6, atol=2e-7)
    if want_labels is not None:
        np.testing.assert_array_equal(compiled.predict(X), want_labels)
    if want_proba is not None:
        np.testing.assert_allclose(compiled.predict_proba(X), want_proba, rtol=1e-5, atol=2e-6)


# (objective, data kind, extra parameters)
XGB_REGRESSORS = [
    ("reg:squarederror", "reg", {}), ("reg:squaredlogerror", "positive", {}), ("reg:logistic", "prob", {}),
    ("reg:pseudohubererror", "reg", {}), ("reg:absoluteerror", "reg", {}),
    ("reg:quantileerror", "reg", {"quantile_alpha": 0.3}), ("reg:gamma", "positive", {}),
    ("reg:tweedie", "positive", {}), ("count:poisson", "count", {}), ("survival:cox", "survival", {}),
]


@pytest.mark.parametrize("objective, kind, params", XGB_REGRESSORS, ids=[o for o, _, _ in XGB_REGRESSORS])
def test_xgboost_regressors_return_what_predict_returns(objective, kind, params):
    xgb = need("xgboost")
    X, y = _data(kind)
    reg = xgb.XGBRegressor(n_estimators=6, max_depth=3, learning_rate=0.5, objective=objective, **params).fit(X, y)
    _check(reg, X, want_values=reg.predict(X))


@pytest.mark.parametrize("objective", ["rank:pairwise", "rank:ndcg", "rank:map", "survival:aft"])
def test_xgboost_rankers_and_aft_boosters_return_what_predict_returns(objective):
    xgb = need("xgboost")
    X, y = _data("multi")
    y = np.minimum(y, 1) if objective == "rank:map" else y  # MAP takes binary relevance
    d = xgb.DMatrix(X, label=y)
    if objective.startswith("rank"):
        d.set_group([ROWS // 6] * 6)
    else:
        d.set_float_info("label_lower_bound", y + 1.0)
        d.set_float_info("label_upper_bound", np.where(y == 2, np.inf, y + 2.0))
    booster = xgb.train({"objective": objective, "max_depth": 3, "eta": 0.5}, d, num_boost_round=5)
    _check(booster, X, want_values=booster.predict(xgb.DMatrix(X)))


XGB_CLASSIFIERS = [("binary:logistic", "binary"), ("binary:logitraw", "binary"), ("binary:hinge", "binary"),
                   ("multi:softprob", "multi"), ("multi:softmax", "multi")]


@pytest.mark.parametrize("objective, kind", XGB_CLASSIFIERS, ids=[o for o, _ in XGB_CLASSIFIERS])
def test_xgboost_classifiers_predict_the_librarys_labels(objective, kind):
    xgb = need("xgboost")
    X, y = _data(kind)
    clf = xgb.XGBClassifier(n_estimators=6, max_depth=3, learning_rate=0.5, objective=objective).fit(X, y)
    proba = clf.predict_proba(X) if objective in ("binary:logistic", "multi:softprob") else None
    _check(clf, X, want_labels=clf.predict(X), want_proba=proba)


def test_xgboost_logitraw_classifier_thresholds_the_margin_at_one_half():
    """XGBClassifier.predict with binary:logitraw: class 1 where the raw margin > 0.5, not > 0."""
    xgb = need("xgboost")
    X, y = _data("binary")
    clf = xgb.XGBClassifier(n_estimators=6, max_depth=3, learning_rate=0.5, objective="binary:logitraw").fit(X, y)
    margin = clf.predict(X, output_margin=True)
    assert np.any((margin > 0) & (margin <= 0.5))  # rows where the two rules differ exist
    _check(clf, X, want_labels=clf.predict(X))
    _check(clf.get_booster(), X, want_labels=(clf.get_booster().predict(xgb.DMatrix(X)) > 0.5).astype(int))


@pytest.mark.parametrize("kind", ["multi", "reg"])
def test_xgboost_multi_output_trees(kind):
    """multi_strategy="multi_output_tree": one tree per round holding a vector leaf (a value per class)."""
    xgb = need("xgboost")
    X, y = _data(kind)
    if kind == "multi":
        clf = xgb.XGBClassifier(n_estimators=5, max_depth=3, tree_method="hist",
                                multi_strategy="multi_output_tree").fit(X, y)
        _check(clf, X, want_labels=clf.predict(X), want_proba=clf.predict_proba(X))
    else:  # several targets: refused by name
        reg = xgb.XGBRegressor(n_estimators=3, max_depth=2, tree_method="hist",
                               multi_strategy="multi_output_tree").fit(X, np.stack([y, -y], axis=1))
        with pytest.raises(ModelFileError, match="multi-target"):
            tinycc_ml.compile(reg)


LGB_REGRESSORS = [
    ("regression", "reg", {}), ("regression_l1", "reg", {}), ("huber", "reg", {}), ("fair", "reg", {}),
    ("quantile", "reg", {"alpha": 0.3}), ("mape", "positive", {}), ("poisson", "count", {}),
    ("gamma", "positive", {}), ("tweedie", "positive", {}), ("cross_entropy", "prob", {}),
    ("regression", "positive", {"reg_sqrt": True}), ("huber", "positive", {"reg_sqrt": True}),
]


@pytest.mark.parametrize("objective, kind, params", LGB_REGRESSORS,
                         ids=[o + ("_sqrt" if p else "") for o, _, p in LGB_REGRESSORS])
def test_lightgbm_regressors_return_what_predict_returns(objective, kind, params):
    lgb = need("lightgbm")
    X, y = _data(kind)
    reg = lgb.LGBMRegressor(n_estimators=6, num_leaves=6, learning_rate=0.5, min_child_samples=5, verbose=-1,
                            objective=objective, **params).fit(X, y)
    _check(reg, X, want_values=reg.predict(X))


@pytest.mark.parametrize("objective", ["lambdarank", "rank_xendcg"])
def test_lightgbm_rankers_return_what_predict_returns(objective):
    lgb = need("lightgbm")
    X, y = _data("multi")
    ranker = lgb.LGBMRanker(n_estimators=5, num_leaves=6, min_child_samples=5, verbose=-1,
                            objective=objective).fit(X, y, group=[ROWS // 6] * 6)
    _check(ranker.booster_, X, want_values=ranker.predict(X))


@pytest.mark.parametrize("objective, kind", [("binary", "binary"), ("multiclass", "multi"),
                                             ("multiclassova", "multi")])
def test_lightgbm_classifiers_predict_the_librarys_labels(objective, kind):
    lgb = need("lightgbm")
    X, y = _data(kind)
    clf = lgb.LGBMClassifier(n_estimators=6, num_leaves=6, learning_rate=0.5, min_child_samples=5, verbose=-1,
                             objective=objective).fit(X, y)
    _check(clf, X, want_labels=clf.predict(X),
           want_proba=clf.predict_proba(X) if objective != "multiclassova" else None)


def test_lightgbm_cross_entropy_lambda_is_refused_by_name():
    lgb = need("lightgbm")
    X, y = _data("prob")
    reg = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, objective="cross_entropy_lambda").fit(X, y)
    with pytest.raises(ModelFileError, match="cross_entropy_lambda"):
        tinycc_ml.compile(reg)


SK_REGRESSORS = [("GradientBoostingRegressor", loss, "reg") for loss in
                 ("squared_error", "absolute_error", "huber", "quantile")] + \
                [("HistGradientBoostingRegressor", loss, kind) for loss, kind in
                 (("squared_error", "reg"), ("absolute_error", "reg"), ("quantile", "reg"), ("gamma", "positive"),
                  ("poisson", "count"))]


@pytest.mark.parametrize("estimator, loss, kind", SK_REGRESSORS, ids=[f"{e}-{lo}" for e, lo, _ in SK_REGRESSORS])
def test_sklearn_boosting_regressors_return_what_predict_returns(estimator, loss, kind):
    from sklearn import ensemble
    X, y = _data(kind)
    size = {"max_iter": 6} if estimator.startswith("Hist") else {"n_estimators": 6}
    quantile = {"quantile": 0.3} if estimator.startswith("Hist") and loss == "quantile" else {}
    reg = getattr(ensemble, estimator)(loss=loss, max_depth=3, random_state=0, **size, **quantile).fit(X, y)
    _check(reg, X, want_values=reg.predict(X))


@pytest.mark.parametrize("estimator, loss, kind", [
    ("GradientBoostingClassifier", "log_loss", "binary"), ("GradientBoostingClassifier", "log_loss", "multi"),
    ("GradientBoostingClassifier", "exponential", "binary"), ("HistGradientBoostingClassifier", "log_loss", "binary"),
    ("HistGradientBoostingClassifier", "log_loss", "multi")])
def test_sklearn_boosting_classifiers_predict_the_librarys_labels_and_probabilities(estimator, loss, kind):
    from sklearn import ensemble
    X, y = _data(kind)
    size = {"max_iter": 6} if estimator.startswith("Hist") else {"n_estimators": 6}
    clf = getattr(ensemble, estimator)(loss=loss, max_depth=3, random_state=0, **size).fit(X, y)
    _check(clf, X, want_labels=clf.predict(X), want_proba=clf.predict_proba(X))


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm", "sklearn"])
def test_a_link_other_than_the_identity_refuses_integer_builds(lib):
    X, y = _data("count")
    if lib == "xgboost":
        reg = need("xgboost").XGBRegressor(n_estimators=3, max_depth=2, objective="count:poisson").fit(X, y)
    elif lib == "lightgbm":
        reg = need("lightgbm").LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, objective="poisson").fit(X, y)
    else:
        from sklearn.ensemble import HistGradientBoostingRegressor
        reg = HistGradientBoostingRegressor(loss="poisson", max_iter=3).fit(X, y)
    with pytest.raises(CompileError, match="link 'exp'.*precision float"):
        tinycc_ml.compile(reg, precision="int16", calibration=X)
