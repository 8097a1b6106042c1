"""Boosters compiled to C at the edges where they used to differ from the library (issue 36): XGBoost's
early stopping (predict stops at best_iteration) and LightGBM's kZeroThreshold (|x| <= 1e-35 reads as 0).
Rows are crafted at every threshold the trees learnt (+-1 float32 ulp), at +-0, subnormals, +-inf, NaN
and huge values; the oracle is the library's own predict."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tinycc_ml
from tests.models.test_trees_boosters import need
from tinycc_ml.errors import ModelFileError

F32 = np.float32
SPECIAL = [0.0, -0.0, 1e-36, -1e-36, 1e-45, -1e-45, 1e-40, -1e-40, 1e30, -1e30, np.inf, -np.inf, np.nan]


def threshold_rows(thresholds: dict[int, list[float]], dim: int, n: int, seed: int = 0,
                   infinite: bool = True) -> np.ndarray:
    """n rows whose every feature is one of its thresholds (as float32), one ulp either side, or SPECIAL
    (without +-inf when not ``infinite``: XGBoost refuses them)."""
    rng = np.random.default_rng(seed)
    rows = np.empty((n, dim))
    for f in range(dim):
        t = np.asarray(thresholds.get(f, [0.0]), dtype=F32)
        values = np.concatenate([t, np.nextafter(t, F32(-np.inf)), np.nextafter(t, F32(np.inf)),
                                 np.asarray(SPECIAL, dtype=F32)]).astype(np.float64)
        values = values if infinite else values[~np.isinf(values)]
        rows[:, f] = rng.choice(values, size=n)
    return rows


def _xgb_thresholds(booster) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for tree in json.loads(bytes(booster.save_raw("json")))["learner"]["gradient_booster"]["model"]["trees"]:
        for left, f, t in zip(tree["left_children"], tree["split_indices"], tree["split_conditions"]):
            if left >= 0:
                out.setdefault(f, []).append(t)
    return out


def test_xgboost_early_stopping_compiles_the_trees_predict_uses(tmp_path):
    xgb = need("xgboost")
    rng = np.random.default_rng(1)
    X = rng.integers(-8, 9, size=(300, 3)) / 4.0
    y = (X[:, 0] + 0.25 * rng.integers(-4, 5, size=300) > 0).astype(int)
    clf = xgb.XGBClassifier(n_estimators=40, max_depth=3, learning_rate=0.8, early_stopping_rounds=2)
    clf.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    booster = clf.get_booster()
    assert clf.best_iteration + 1 < booster.num_boosted_rounds()  # it stopped early: trees past the best exist
    rows = np.vstack([X, threshold_rows(_xgb_thresholds(booster), 3, 300, infinite=False)])
    compiled = tinycc_ml.compile(clf).load()
    np.testing.assert_array_equal(compiled.predict(rows), clf.predict(rows))
    np.testing.assert_allclose(compiled.predict_proba(rows), clf.predict_proba(rows), rtol=1e-5, atol=2e-6)
    path = tmp_path / "early.json"
    booster.save_model(str(path))  # the file holds best_iteration: the estimators' predict stops there
    np.testing.assert_array_equal(tinycc_ml.compile(path).load().predict(rows), clf.predict(rows))
    # a live Booster's predict adds every tree, and so does its build
    every = booster.predict(xgb.DMatrix(rows))
    np.testing.assert_allclose(tinycc_ml.compile(booster).load().predict_proba(rows)[:, 1], every,
                               rtol=1e-5, atol=2e-6)


def test_xgboost_early_stopping_of_a_multiclass_regressor_pair():
    xgb = need("xgboost")
    rng = np.random.default_rng(2)
    X = rng.integers(-8, 9, size=(300, 3)) / 4.0
    y = X[:, 0] - X[:, 1] + 0.25 * rng.integers(-4, 5, size=300)
    reg = xgb.XGBRegressor(n_estimators=40, max_depth=3, learning_rate=0.9, early_stopping_rounds=2)
    reg.fit(X[:150], y[:150], eval_set=[(X[150:], y[150:])], verbose=False)
    assert reg.best_iteration + 1 < reg.get_booster().num_boosted_rounds()
    rows = np.vstack([X, threshold_rows(_xgb_thresholds(reg.get_booster()), 3, 200, infinite=False)])
    np.testing.assert_allclose(tinycc_ml.compile(reg).load().values(rows), reg.predict(rows), rtol=2e-6, atol=2e-6)
    mc = xgb.XGBClassifier(n_estimators=30, max_depth=2, learning_rate=0.9, early_stopping_rounds=2)
    labels = np.digitize(y, [-1.0, 1.0])
    mc.fit(X[:150], labels[:150], eval_set=[(X[150:], labels[150:])], verbose=False)
    np.testing.assert_array_equal(tinycc_ml.compile(mc).load().predict(rows), mc.predict(rows))


@pytest.fixture(scope="module")
def zero_split_model():
    """A LightGBM model splitting at -kZeroThreshold and +kZeroThreshold (features of -1, 0 and 1)."""
    lgb = need("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.integers(-1, 2, size=(400, 2)).astype(float)
    y = 2.0 * (X[:, 0] < 0) + X[:, 1] + (X[:, 1] > 0)
    reg = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, min_child_samples=5, verbose=-1).fit(X, y)
    text = reg.booster_.model_to_string()
    thresholds = " ".join(line for line in text.splitlines() if line.startswith("threshold="))
    assert "-1.0000000180025095e-35" in thresholds  # the split LightGBM makes between -1 and 0
    return reg, X


def test_lightgbm_reads_inputs_within_kzerothreshold_as_zero(zero_split_model):
    reg, X = zero_split_model
    k = float(F32(1e-35))
    tiny = [k, -k, float(np.nextafter(F32(k), F32(1))), float(np.nextafter(F32(-k), F32(-1))),
            float(np.nextafter(F32(k), F32(0))), float(np.nextafter(F32(-k), F32(0)))]
    rows = threshold_rows({0: [-1.0, 0.0, 1.0] + tiny, 1: [-1.0, 0.0, 1.0] + tiny}, 2, 400, seed=3)
    want = reg.predict(rows)
    np.testing.assert_allclose(tinycc_ml.compile(reg).load().values(rows), want, rtol=1e-6, atol=1e-6)


def test_lightgbm_integer_builds_quantise_tiny_inputs_as_lightgbm_zeroes_them(zero_split_model):
    """Values within 1e-35 of 0 quantise to 0, as LightGBM reads them; the grid values decide exactly."""
    reg, X = zero_split_model
    k = float(F32(1e-35))
    values = np.array([-1.0, 0.0, -0.0, 1.0, k, -k, 1e-36, -1e-36, 1e-45, -1e-45, float(np.nextafter(F32(-k), F32(0)))])
    rows = np.random.default_rng(4).choice(values, size=(300, 2))
    want = reg.predict(rows)
    compiled = tinycc_ml.compile(reg, precision="int16", calibration=X).load()
    np.testing.assert_allclose(compiled.values(rows), want, atol=1e-3)
    close = np.abs(compiled.values(rows) - want) < 1e-3  # leaves round to 16 bits; the leaf reached is exact
    assert close.all()


@pytest.mark.parametrize("field, value", [
    ("num_feature", "9" * 300), ("num_feature", "3.5"), ("num_feature", True), ("num_feature", "0"),
    ("num_class", -2), ("num_class", 1e300), ("num_target", "1" * 40),
])
def test_xgboost_counts_beyond_reason_are_refused_naming_the_file_and_the_field(tmp_path, field, value):
    """A 300-digit num_feature was accepted and failed later as a thousand-character IR type error without
    the file's name; a fractional one was truncated."""
    xgb = pytest.importorskip("xgboost")
    X = np.random.default_rng(0).normal(size=(60, 3))
    xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, X[:, 0] > 0).save_model(tmp_path / "good.json")
    doc = json.loads((tmp_path / "good.json").read_text())
    doc["learner"]["learner_model_param"][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=rf"bad\.json: {field} .{{1,80}} is not a whole number from") as err:
        tinycc_ml.load_model(path)
    assert len(str(err.value)) < 200
