"""Fixed-point regression never fails silently: a row agrees with the float model only when its value is
within the stated tolerance (1% of the value's range), the report says so, and a build that misses it on
more than 1% of the calibration rows is warned of with its figures and the precision that keeps the value."""

import logging

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

import tinycc_ml
from tinycc_ml.models import ProtoNNRegressor
from tinycc_ml.passes.fixed_pipeline import REGRESSION_TOLERANCE


@pytest.fixture(scope="module")
def tailed_regression():
    X, y = load_diabetes(return_X_y=True)
    y = np.where(y > 250, 3 * y, y)  # a long upper tail: int8 squashes the highest values
    return ProtoNNRegressor(random_state=0, n_iter=20).fit(X, y), X


@pytest.mark.parametrize("precision,warned", [("int16", False), ("int8", True)])
def test_value_agreement_is_the_share_within_tolerance(tailed_regression, precision, warned, caplog, host_target):
    model, X = tailed_regression
    with caplog.at_level(logging.WARNING, logger="tinycc_ml"):
        result = tinycc_ml.compile(model, precision=precision, calibration=X)
    expected = model.predict(X)
    tolerance = REGRESSION_TOLERANCE * np.ptp(expected)
    within = np.mean(np.abs(result.load().predict(X) - expected) <= tolerance)
    report = result.report
    assert report["agreement_with_float"] == pytest.approx(within, abs=2 / len(X))
    assert report["fixed_point_error"]["tolerance"] == pytest.approx(tolerance, rel=1e-3)
    assert report["fixed_point_error"]["within_tolerance"] == report["agreement_with_float"]
    warnings = [r.getMessage() for r in caplog.records if "within" in r.getMessage()]
    assert bool(warnings) == warned
    if warned:
        assert report["agreement_with_float"] < 0.99
        assert "int16 keeps the value" in warnings[0] and f"{report['score_error']['max_abs']:.4g}" in warnings[0]
    else:
        assert report["agreement_with_float"] == 1.0
