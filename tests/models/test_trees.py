"""The trees family: scikit-learn's trees and ensembles compiled to C predict what scikit-learn
predicts; integer builds make the float build's decisions; model files are validated."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import tinycc_ml
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.importers.sklearn import from_sklearn
from tinycc_ml.ir.interp import run_float
from tinycc_ml.models.trees import TreeEnsembleModel

LOADERS = {"digits": load_digits, "breast_cancer": load_breast_cancer, "wine": load_wine}


@pytest.fixture(scope="module", params=sorted(LOADERS))
def data(request):
    X, y = LOADERS[request.param](return_X_y=True)
    return request.param, *train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


CLASSIFIERS = {
    "tree": lambda: DecisionTreeClassifier(max_depth=6, random_state=0),
    "forest": lambda: RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0),
    "extra": lambda: ExtraTreesClassifier(n_estimators=5, max_depth=5, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0),
    "hist": lambda: HistGradientBoostingClassifier(max_iter=5, max_depth=4, random_state=0),
    "scaled_forest": lambda: make_pipeline(StandardScaler(), MinMaxScaler(),
                                           RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0)),
}


@pytest.mark.parametrize("kind", sorted(CLASSIFIERS))
def test_compiled_float_predicts_what_sklearn_predicts_and_integer_builds_follow(data, kind):
    name, X_tr, X_te, y_tr, y_te = data
    clf = CLASSIFIERS[kind]().fit(X_tr, y_tr)
    want = clf.predict(X_te)
    model = from_sklearn(clf)
    np.testing.assert_array_equal(model.predict(X_te), want)  # the numpy reference
    result = tinycc_ml.compile(clf, target="host")
    np.testing.assert_array_equal(result.load().predict(X_te), want)  # the C, 100% of the rows
    np.testing.assert_array_equal(model.classes[run_float(result.graph, X_te)["prediction"]], want)
    for precision in ("int16", "int8") if name == "wine" else ("int16",):  # int8: the same trees
        fixed = tinycc_ml.compile(clf, target="host", precision=precision, calibration=X_tr, search=False)
        agree = np.mean(fixed.load().predict(X_te) == want)
        # digits' integer pixels lie on every input grid: decisions are exact, so are the predictions
        # up to near-ties of the summed leaves; other inputs round to the nearest grid point, and one
        # equal to a threshold may round past it (wine: 1 row of 54)
        assert agree >= (0.98 if name != "digits" else 0.995), (kind, precision, agree)


NO_SPLIT = {  # trees that never split: a constant model, read no input, behind scalers
    "hist_few_rows": lambda: make_pipeline(StandardScaler(), HistGradientBoostingClassifier(max_iter=3)),
    "tree_constant_feature": lambda: make_pipeline(MinMaxScaler(), DecisionTreeClassifier()),
    "calibrated": lambda: CalibratedClassifierCV(make_pipeline(StandardScaler(), DecisionTreeClassifier()), cv=2),
    "calibrated_pipeline": lambda: make_pipeline(StandardScaler(), CalibratedClassifierCV(
        HistGradientBoostingClassifier(max_iter=3), cv=2)),
}


@pytest.mark.parametrize("kind", sorted(NO_SPLIT))
def test_scalers_before_trees_without_a_split_compile_to_the_constant_model(kind):
    rng = np.random.default_rng(3)
    # < 40 rows: HistGradientBoosting's default min_samples_leaf=20 leaves no split; a constant feature
    # leaves a tree none either. Classes 1:2, so the constant probabilities tie nowhere.
    X = rng.normal(size=(30, 3)) if kind.startswith("hist") or kind == "calibrated_pipeline" else np.ones((30, 3))
    y = np.arange(30) % 3 == 0
    clf = NO_SPLIT[kind]().fit(X, y)
    rows = rng.normal(size=(20, 3)) * 100.0
    predictor = tinycc_ml.compile(clf, target="host").load()
    np.testing.assert_array_equal(predictor.predict(rows), clf.predict(rows))
    np.testing.assert_allclose(predictor.predict_proba(rows), clf.predict_proba(rows), atol=1e-6)


def test_a_scaler_of_another_width_before_trees_is_refused_by_name():
    X = np.random.default_rng(0).normal(size=(50, 3))
    pipeline = make_pipeline(StandardScaler().fit(np.c_[X, X]), DecisionTreeClassifier().fit(X, X[:, 0] > 0))
    with pytest.raises(CompileError, match="StandardScaler has 6 features but the trees take 3"):
        from_sklearn(pipeline)


REGRESSORS = {
    "tree": lambda: DecisionTreeRegressor(max_depth=5, random_state=0),
    "forest": lambda: RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0),
    "extra": lambda: ExtraTreesRegressor(n_estimators=4, max_depth=4, random_state=0),
    "boosting": lambda: GradientBoostingRegressor(n_estimators=6, max_depth=3, random_state=0),
    "hist": lambda: HistGradientBoostingRegressor(max_iter=6, max_depth=3, random_state=0),
}


@pytest.fixture(scope="module")
def regression_data():
    X, y = load_digits(return_X_y=True)
    target = X[:, 20:28].sum(axis=1) / 10.0 + y  # a smooth target of the pixels
    return train_test_split(X, target, test_size=0.3, random_state=0)


@pytest.mark.parametrize("kind", sorted(REGRESSORS))
def test_regressors_compile_to_their_values(regression_data, kind):
    X_tr, X_te, y_tr, _ = regression_data
    reg = REGRESSORS[kind]().fit(X_tr, y_tr)
    want = reg.predict(X_te)
    model = from_sklearn(reg)
    assert model.task["kind"] == "regression"
    np.testing.assert_allclose(model.predict(X_te), want, rtol=1e-12, atol=1e-9)
    got = tinycc_ml.compile(reg, target="host").load().scores(X_te)[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))
    fixed = tinycc_ml.compile(reg, target="host", precision="int16", calibration=X_tr, search=False)
    scale = fixed.graph.type(fixed.graph.output("scores")).dtype.scale
    err = np.abs(fixed.load().scores(X_te)[:, 0] * 2.0**-scale - want)
    # stated error: each tree's leaf rounding plus the output rounding (see the op's docstring)
    assert np.max(err) <= model.n_trees * 2.0**-(scale + 1) + 2.0**-(scale + 1) + 1e-6


def test_save_load_round_trip(tmp_path):
    X, y = load_wine(return_X_y=True)
    clf = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    model = from_sklearn(clf)
    path = model.save(tmp_path / "gb.npz")
    back = tinycc_ml.load_model(path)
    assert isinstance(back, TreeEnsembleModel)
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    assert "trees" in back.describe()


def test_binary_boosting_has_one_score():
    X, y = load_breast_cancer(return_X_y=True)
    clf = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    model = from_sklearn(clf)
    assert model.binary and model.n_outputs == 1 and model.n_classes == 2
    np.testing.assert_allclose(model.scores(X)[:, 0], clf.decision_function(X), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- bad input

def _arrays(**change):
    model = from_sklearn(DecisionTreeClassifier(max_depth=3, random_state=0).fit(*load_wine(return_X_y=True)))
    arrays = model.arrays()
    arrays.update(change)
    return arrays, model.meta()


def test_unfitted_and_categorical_models_are_refused():
    with pytest.raises(CompileError, match="RandomForestClassifier is not fitted"):
        tinycc_ml.compile(RandomForestClassifier(), target="host")
    X, y = load_wine(return_X_y=True)
    X = X.copy()
    X[:, 0] = np.arange(len(X)) % 3
    hist = HistGradientBoostingClassifier(max_iter=2, categorical_features=[0]).fit(X, y)
    with pytest.raises(CompileError, match="categorical"):
        tinycc_ml.compile(hist, target="host")


@pytest.mark.parametrize("field, mutate, message", [
    ("threshold", lambda a: np.where(a["feature"] >= 0, np.nan, 0.0), "threshold holds a non-finite value"),
    ("feature", lambda a: np.where(a["feature"] >= 0, 99, -1), "tests feature 99"),
    ("left", lambda a: np.where(a["feature"] >= 0, 0, -1), "reached twice"),
    ("right", lambda a: np.where(a["feature"] >= 0, len(a["feature"]), -1), "outside"),
    ("roots", lambda a: np.array([0, 0]), "tree_output has shape"),
])
def test_bad_node_tables_are_refused_naming_the_problem(tmp_path, field, mutate, message):
    arrays, meta = _arrays()
    arrays[field] = mutate(arrays)
    with pytest.raises(ModelFileError, match=message):
        TreeEnsembleModel.from_arrays(arrays, meta, "m.npz")


def test_a_tree_deeper_than_allowed_is_refused():
    n = 2 * 70 + 1  # a chain of 70 decision nodes
    feature = np.array([0] * 70 + [-1] * 71)
    left = np.array([i + 1 if i < 69 else 70 for i in range(70)] + [-1] * 71)
    right = np.array([71 + i for i in range(70)] + [-1] * 71)
    with pytest.raises(ModelFileError, match="deeper than 64"):
        TreeEnsembleModel(feature, np.zeros(n), left, right, np.zeros((n, 1)), [0], [0], [0.0], input_dim=1)


def test_compile_writes_nothing_for_a_bad_model(tmp_path):
    arrays, meta = _arrays()
    from tinycc_ml.models.saved import save_model_file

    arrays["threshold"] = np.where(arrays["feature"] >= 0, np.inf, 0.0)
    path = save_model_file(tmp_path / "bad.npz", "trees", arrays, meta)
    out = tmp_path / "out"
    with pytest.raises(ModelFileError, match="bad.npz.*threshold"):
        tinycc_ml.compile(path, target="host", out_dir=out)
    assert not out.exists()


def test_fit_considers_forests_and_boosting():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    res = tinycc_ml.fit(X, y, target="host", families="random-forest,gradient-boosting", sizes_per_family=2,
                        time_budget=None, refit=False)
    measured = {c.family for c in res.candidates if c.status == "measured"}
    assert measured == {"random-forest", "gradient-boosting"}
    assert res.chosen.family in measured and res.compiled is not None
    assert "trees" in res.report() or "rounds" in res.report()


def test_a_forest_too_big_for_the_chip_is_refused_and_nothing_written(tmp_path):
    from tests.conftest import require_target

    require_target("avr")
    X, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=40, random_state=0).fit(X, y)  # ~55 KB of nodes and leaves
    with pytest.raises(CompileError, match="does not fit the ATmega328P"):
        tinycc_ml.compile(forest, target="avr", precision="int16", calibration=X, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_report_on_the_avr_lists_the_trees_kernel(tmp_path):
    from tests.conftest import require_target
    from tinycc_ml.target_report import target_report

    require_target("avr")
    X, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=3, max_depth=5, random_state=0).fit(X[:600], y[:600])
    rep = target_report(from_sklearn(forest), "avr", X[600:640], y[600:640], precision="int16",
                        calibration=X[:600])
    (row,) = [r for r in rep["kernels"]["per_node"] if r["node"] == "trees"]
    assert row["kernel"].startswith("trees-") and row["predicted_cycles"] > 0
    assert rep["agreement_with_float"] == 1.0


@pytest.fixture(scope="module")
def digits_with_missing():
    """digits with a fifth of the pixels missing (NaN) in training and test rows."""
    X, y = load_digits(return_X_y=True)
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    return X[:1200], y[:1200], X[1200:]


MISSING = {  # the scikit-learn models that learn where missing values go
    "tree": lambda: DecisionTreeClassifier(max_depth=3, random_state=0),  # straight-line code
    "forest": lambda: make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=4, max_depth=6,
                                                                             random_state=0)),
    "hist": lambda: HistGradientBoostingClassifier(max_iter=5, max_depth=4, random_state=0),
}


@pytest.mark.parametrize("kind", sorted(MISSING))
def test_missing_values_go_where_sklearn_sends_them(digits_with_missing, kind):
    X_tr, y_tr, X_te = digits_with_missing
    clf = MISSING[kind]().fit(X_tr, y_tr)
    want = clf.predict(X_te)
    model = from_sklearn(clf)
    assert 0 < model.default_left[model.feature >= 0].mean() < 1  # both sides occur
    np.testing.assert_array_equal(model.predict(X_te), want)
    np.testing.assert_array_equal(tinycc_ml.compile(clf).load().predict(X_te), want)
    # digits' pixels and the missing code lie on the int16 grid: the integer decisions are the float ones
    # calibration rows are finite (the input ranges): missing values filled
    fixed = tinycc_ml.compile(clf, precision="int16", calibration=np.nan_to_num(X_tr), search=False).load()
    assert np.mean(fixed.predict(X_te) == want) >= 0.995


def test_model_files_without_default_sides_send_missing_values_right(tmp_path):
    X, y = load_digits(return_X_y=True)
    model = from_sklearn(DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y))
    arrays = {k: v for k, v in model.arrays().items() if k != "default_left"}  # a file of an earlier version
    old = TreeEnsembleModel.from_arrays(arrays, model.meta(), "old.npz")
    assert not old.default_left.any()
    row = np.full((1, 64), np.nan)
    leaf = old.leaves(row)[0, 0]
    node = int(old.roots[0])
    while old.feature[node] >= 0:
        node = int(old.right[node])
    assert leaf == node
