"""SNC, nearest-prototype and kNN through the compiler: host C equals the model in float, equals
the fixed-point interpreter bit for bit in integers, and loses at most half a point at int16."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.knn import KNNClassifier
from tinycc_ml.models.npc import NearestPrototypeClassifier
from tinycc_ml.models.snc import SNCClassifier

ESTIMATORS = {
    "npc": lambda: NearestPrototypeClassifier(prototypes_per_class=4, n_restarts=1, max_stages=4),
    "snc": lambda: SNCClassifier(compression=0.05, max_iter=10),
    "snc_lowrank": lambda: SNCClassifier(compression=0.05, metric="low-rank", n_components=12, max_iter=10),
    "knn1": lambda: KNNClassifier(k=1),
    "knn5": lambda: KNNClassifier(k=5),
}


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:1200], y[:1200], X[1200:], y[1200:]


@pytest.fixture(scope="module", params=sorted(ESTIMATORS))
def fitted(request, digits):
    X, y, X_test, y_test = digits
    return request.param, ESTIMATORS[request.param]().fit(X, y).to_model()


def test_float_c_matches_the_model(fitted, digits):
    _, model = fitted
    X_test = digits[2]
    predictor = tinycc_ml.compile(model).load()
    ref = model.scores(X_test)
    np.testing.assert_allclose(predictor.scores(X_test), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_array_equal(predictor.predict(X_test), model.predict(X_test))


def test_int16_is_bit_exact_and_loses_at_most_half_a_point(fitted, digits):
    name, model = fitted
    X, _, X_test, y_test = digits
    result = tinycc_ml.compile(model, precision="int16", calibration=X)
    Xq = quantise(X_test, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, expected["scores"])
    np.testing.assert_array_equal(predictions, expected["prediction"])
    float_acc = np.mean(model.predict(X_test) == y_test)
    assert 100 * (float_acc - np.mean(predictions == y_test)) <= 0.5, name


def test_saved_model_compiles_from_its_file(fitted, tmp_path, digits):
    _, model = fitted
    path = model.save(tmp_path / "m.npz")
    loaded = tinycc_ml.load_model(path)
    predictor = tinycc_ml.compile(path, name="m").load()
    np.testing.assert_array_equal(predictor.predict(digits[2]), loaded.predict(digits[2]))
