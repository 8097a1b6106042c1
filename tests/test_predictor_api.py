"""One predictor API per task on host builds: ``predict`` gives labels (classification), values in the
model's units (regression, float also for integer builds) or the 0/1 matrix (multilabel), as the
float model's ``predict``; the raw C forms stay under their own names."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.models.linear import LinearModel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 5))
W = RNG.normal(size=(3, 5))


@pytest.fixture(autouse=True)
def _host():
    require_target("host")


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_regression_predict_is_the_value_in_model_units(precision):
    model = LinearModel(W[:1] * 10, [40.0]).with_task({"kind": "regression"})
    result = tinycc_ml.compile(model, precision=precision, calibration=X, name="reg")
    host = result.load()
    want = model.predict(X)
    got = host.predict(X)
    assert got.dtype == np.float64 and got.shape == (len(X),)
    assert not np.all(got == 0)  # the silent-zeros bug: predict gave class index 0 for every row
    tolerance = 1e-4 if precision == "float" else 0.01 * np.std(want)
    np.testing.assert_allclose(got, want, atol=tolerance)
    np.testing.assert_array_equal(host.values(X), got)
    raw = host.values_raw(X)
    if precision == "float":
        assert raw.dtype == np.float32
    else:  # the integer forms: value * 2^SCORE_SCALE, as the C returns them
        assert raw.dtype == np.int16 and host.score_scale is not None
        np.testing.assert_array_equal(raw * 2.0**-host.score_scale, got)
        np.testing.assert_array_equal(host.scores(X)[:, 0], raw)
    np.testing.assert_array_equal(host.decision_function(X)[:, 0], got)


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_multilabel_predict_is_the_indicator_matrix(precision):
    model = LinearModel(W, [0.1, -0.2, 0.0]).with_task({"kind": "multilabel", "rule": "threshold", "threshold": 0.5})
    host = tinycc_ml.compile(model, precision=precision, calibration=X, name="ml").load()
    got = host.predict(X)
    assert got.shape == (len(X), 3) and set(np.unique(got)) <= {0, 1}
    agree = np.mean(np.all(got == model.predict(X), axis=1))
    assert agree == 1.0 if precision == "float" else agree > 0.97
    np.testing.assert_array_equal(got, host.labels(X))


def test_classification_predict_gives_labels_and_decision_function_real_scores():
    model = LinearModel(W, [0.1, -0.2, 0.0]).set_classes(["a", "b", "c"])
    result = tinycc_ml.compile(model, precision="int16", calibration=X, name="cls")
    host = result.load()
    labels = host.predict(X)
    assert labels.dtype.kind == "U" and np.mean(labels == model.predict(X)) > 0.97
    np.testing.assert_array_equal(np.array(["a", "b", "c"])[host.predict_index(X)], labels)
    assert host.scores(X).dtype == np.int16  # raw
    np.testing.assert_allclose(host.decision_function(X), model.scores(X), atol=0.05)
