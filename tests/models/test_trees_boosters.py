"""XGBoost and LightGBM models (live objects and their own model files) compiled to C predict what the
libraries predict; bad files and unsupported models are refused clearly, nothing written.

The libraries are optional extras: without them these tests skip, except with
TINYCC_ML_REQUIRE_TOOLCHAINS=1 (CI), where a missing library fails."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

import tinycc_ml
from tests.conftest import toolchains_required
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.importers.sklearn import from_sklearn


def need(library: str):
    try:
        return importlib.import_module(library)
    except ImportError:
        if toolchains_required():
            pytest.fail(f"{library} is not installed (pip install 'tinycc-ml[{library}]')", pytrace=False)
        pytest.skip(f"{library} is not installed")


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _models(lib):
    if lib == "xgboost":
        xgb = need("xgboost")
        return (xgb.XGBClassifier(n_estimators=15, max_depth=4, random_state=0),
                xgb.XGBRegressor(n_estimators=10, max_depth=3, random_state=0))
    lgb = need("lightgbm")
    return (lgb.LGBMClassifier(n_estimators=15, num_leaves=15, random_state=0, verbose=-1),
            lgb.LGBMRegressor(n_estimators=10, num_leaves=8, random_state=0, verbose=-1))


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm"])
def test_multiclass_digits_float_equals_the_library_and_int16_follows(digits, lib, tmp_path):
    X_tr, X_te, y_tr, y_te = digits
    clf = _models(lib)[0].fit(X_tr, y_tr)
    want = clf.predict(X_te)
    np.testing.assert_array_equal(tinycc_ml.compile(clf).load().predict(X_te), want)
    q = tinycc_ml.compile(clf, precision="int16", calibration=X_tr, search=False).load().predict(X_te)
    assert np.mean(q == want) >= 0.998
    # the library's own model file, compiled by path and from the command line
    path = tmp_path / ("model.json" if lib == "xgboost" else "model.txt")
    (clf.get_booster() if lib == "xgboost" else clf.booster_).save_model(str(path))
    np.testing.assert_array_equal(tinycc_ml.compile(path).load().predict_index(X_te), np.searchsorted(clf.classes_,
                                                                                                       want))
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(path), "-o", str(tmp_path / "c"),
                          "--name", "boost"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "c" / "boost.c").exists()


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm"])
def test_binary_and_regression_models(lib):
    X, y = load_breast_cancer(return_X_y=True)
    X = X.astype(np.float32).astype(np.float64)  # LightGBM compares float64 inputs; the C takes float32
    clf, reg = _models(lib)
    clf.fit(X, y)
    model = from_sklearn(clf)
    assert model.binary
    np.testing.assert_array_equal(tinycc_ml.compile(clf).load().predict(X), clf.predict(X))
    reg.fit(X, X[:, 0] * 0.1 + y)
    got = tinycc_ml.compile(reg).load().scores(X)[:, 0]
    np.testing.assert_allclose(got, reg.predict(X), rtol=1e-5, atol=1e-5)


def test_unknown_xgboost_objective_and_categorical_splits_are_refused(tmp_path):
    xgb = need("xgboost")
    X, y = load_breast_cancer(return_X_y=True)
    clf = xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, y)
    doc = json.loads(bytes(clf.get_booster().save_raw("json")))
    doc["learner"]["objective"]["name"] = "reg:future_loss"  # an objective of a later XGBoost
    path = tmp_path / "future.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    with pytest.raises(ModelFileError, match=r"future.json.*objective 'reg:future_loss' is not supported"):
        tinycc_ml.compile(path, out_dir=out)
    assert not out.exists()
    doc["learner"]["objective"]["name"] = "binary:logistic"
    doc["learner"]["gradient_booster"]["model"]["trees"][1]["split_type"][0] = 1  # as XGBoost marks one
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="tree 1: categorical splits are not supported"):
        tinycc_ml.compile(path, out_dir=out)
    assert not out.exists()


def test_lightgbm_categorical_splits_are_refused():
    lgb = need("lightgbm")
    X, y = load_breast_cancer(return_X_y=True)
    X = X.copy()
    X[:, 0] = 2 * y + np.arange(len(y)) % 2  # an informative category
    clf = lgb.LGBMClassifier(n_estimators=3, verbose=-1, min_child_samples=5).fit(X, y, categorical_feature=[0])
    with pytest.raises((ModelFileError, CompileError), match="categorical"):
        from_sklearn(clf)


@pytest.mark.parametrize("name, content, message", [
    ("m.json", b"not json at all", "not valid JSON"),
    ("m.json", b'{"learner": {}}', "not an XGBoost JSON model"),
    ("m.json", b"PK\x03\x04 zip", "binary file"),
    ("m.txt", b"hello\nworld\n", "not a LightGBM text model"),
    ("m.txt", b"tree\nversion=v4\nobjective=cross_entropy_lambda\nmax_feature_idx=3\n\nTree=0\nnum_leaves=1\n"
              b"leaf_value=0.5\n", "objective 'cross_entropy_lambda' is not supported"),
    ("m.txt", b"tree\nversion=v4\nobjective=binary sigmoid:1\nmax_feature_idx=0\n\nTree=0\nnum_leaves=2\n"
              b"split_feature=0\nthreshold=nan\ndecision_type=2\nleft_child=-1\nright_child=-2\nleaf_value=1 2\n",
     "threshold holds a value that is not finite"),
    ("m.txt", b"\x80\x04\x95 pickle", "binary file"),
])
def test_model_files_that_are_not_what_their_extension_says_are_refused(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(path), "-o", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm"])
def test_missing_values_go_to_the_libraries_default_sides(digits, lib, tmp_path):
    """Trained with missing values (XGBoost's default_left, LightGBM's missing type NaN) and without
    (LightGBM's missing type None: NaN compared as 0), from live objects and from model files."""
    X_tr, X_te, y_tr, _ = digits
    X_te = X_te.copy()
    X_te[np.random.default_rng(1).random(X_te.shape) < 0.2] = np.nan
    holes = X_tr.copy()
    holes[np.random.default_rng(0).random(holes.shape) < 0.2] = np.nan
    for X_fit in (holes, X_tr):
        clf = _models(lib)[0].fit(X_fit, y_tr)
        want = clf.predict(X_te)
        model = from_sklearn(clf)
        dl = model.default_left[model.feature >= 0]
        assert 0 < dl.mean() < 1 or X_fit is X_tr  # without missing values in training: one side may do
        np.testing.assert_array_equal(model.predict(X_te), want)
        np.testing.assert_array_equal(tinycc_ml.compile(clf).load().predict(X_te), want)
        fixed = tinycc_ml.compile(clf, precision="int16", calibration=X_tr, search=False).load()
        assert np.mean(fixed.predict(X_te) == want) >= 0.995
    path = tmp_path / ("model.json" if lib == "xgboost" else "model.txt")
    (clf.get_booster() if lib == "xgboost" else clf.booster_).save_model(str(path))
    np.testing.assert_array_equal(tinycc_ml.load_model(path).default_left, model.default_left)


def _xgboost_doc() -> dict:
    """A minimal XGBoost JSON model written by hand (one stump), as save_model writes its fields."""
    tree = {"id": 0, "left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [0, 0, 0],
            "split_conditions": [0.5, 1.0, -1.0], "default_left": [0, 0, 0], "split_type": [0, 0, 0]}
    return {"learner": {"objective": {"name": "binary:logistic"},
                        "learner_model_param": {"num_feature": "2", "num_class": "0", "base_score": "5E-1"},
                        "gradient_booster": {"name": "gbtree", "model": {"trees": [tree], "tree_info": [0]}}}}


def _edit(doc: dict, path: str, value) -> dict:
    node = doc
    *keys, last = path.split("/")
    for key in keys:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize("path, value, message", [
    ("learner/learner_model_param/base_score", "[0.5, ", "base_score '\\[0.5, ' is not a number or a list"),
    ("learner/learner_model_param/base_score", {"a": 1}, "base_score .* is not a number or a list"),
    ("learner/learner_model_param/base_score", "[[0.5]]", "base_score .* is not a number or a list"),
    ("learner/gradient_booster/model/trees/0/split_type", "categorical", "tree 0: split_type is not a list"),
    ("learner/gradient_booster/model/trees/0/split_type", [0, "x", 0], "tree 0: split_type is not a list"),
    ("learner/gradient_booster/model/trees/0", "a tree", "tree 0 is a str, not a tree object"),
    ("learner/gradient_booster/model/trees", "trees", "model/trees is not a list"),
    ("learner/learner_model_param", [1], "learner_model_param is a list, not an object"),
    ("learner/learner_model_param/num_class", "1e9", "num_class 1000000000 exceeds the model's 1 tree"),
])
def test_hand_edited_xgboost_json_is_one_model_file_error(tmp_path, path, value, message):
    """Issue 36, item 10: each was a traceback (or, num_class 1e9, an 8 GB allocation)."""
    file = tmp_path / "m.json"
    file.write_text(json.dumps(_xgboost_doc()))
    assert tinycc_ml.load_model(file).n_trees == 1  # the unedited document is a model
    file.write_text(json.dumps(_edit(_xgboost_doc(), path, value)))
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(file)
