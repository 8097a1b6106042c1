"""target_report: accuracy, agreement, sizes and speed of a compiled model on its target."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.target_report import count_macs, target_report

FIELDS = {"target", "precision", "rows", "reference", "float_accuracy", "target_accuracy", "agreement_with_float",
          "flash_bytes",
          "ram_bytes", "model_flash_bytes", "model_ram_bytes", "stack_bytes", "cycles_mean", "cycles_max",
          "instructions_mean", "instructions_max", "macs", "per_mac", "method", "compile_report", "task", "regression",
          "multilabel", "kernels", "cycle_model", "weights", "patches"}


@pytest.fixture(scope="module")
def case():
    X, y = load_digits(return_X_y=True)
    return init_protonn(X[:500], y[:500], 10, 2), X, y


@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0"])
def test_report_fields_and_figures(case, target):
    require_target(target)
    model, X, y = case
    rep = target_report(model, target, X[500:560], y[500:560], precision="int16", calibration=X[:400])
    assert set(rep) == FIELDS
    # Z of init_protonn is one-hot, so stored sparse: its MACs are its non-zeros
    assert rep["rows"] == 60 and rep["macs"] == 10 * 64 + 10 * 20 + np.count_nonzero(model.Z)
    assert rep["float_accuracy"] > 0.7 and abs(rep["target_accuracy"] - rep["float_accuracy"]) <= 0.1
    assert rep["agreement_with_float"] >= 0.85
    assert rep["task"] == {"kind": "classification"} and rep["regression"] is None and rep["multilabel"] is None
    if target == "host":
        assert rep["cycles_mean"] is None and rep["per_mac"] is None and rep["method"] == "cffi"
        assert "unavailable" in rep["kernels"]
        return
    assert 0 < rep["flash_bytes"] < 32768 and 0 < rep["ram_bytes"] < 2048 and 0 < rep["stack_bytes"] < 512
    assert 0 < rep["model_flash_bytes"] <= rep["flash_bytes"]
    unit = "cycles" if target == "avr" else "instructions"
    other = "instructions" if target == "avr" else "cycles"
    assert rep[f"{unit}_mean"] <= rep[f"{unit}_max"] and rep[f"{other}_mean"] is None
    assert rep["per_mac"] == pytest.approx(rep[f"{unit}_mean"] / rep["macs"])


def test_report_without_labels(case):
    require_target("host")
    model, X, _ = case
    rep = target_report(model, "host", X[:40], precision="float")
    assert rep["float_accuracy"] is None and rep["target_accuracy"] is None
    assert rep["agreement_with_float"] == 1.0


def test_count_macs(case):
    import tinycc_ml

    model, X, _ = case
    graph = tinycc_ml.compile(model, precision="int8", calibration=X[:100]).graph
    assert count_macs(graph) == 10 * 64 + 10 * 20 + np.count_nonzero(model.Z)


@pytest.fixture(scope="module")
def regression_case():
    from sklearn.datasets import load_diabetes
    from threadpoolctl import threadpool_limits

    from tinycc_ml.models.regressors import ProtoNNRegressor

    X, y = load_diabetes(return_X_y=True)
    with threadpool_limits(limits=1):
        est = ProtoNNRegressor(budget_bytes=2048, n_iter=20, random_state=0).fit(X[:340], y[:340])
    return est, X, y


@pytest.mark.parametrize("target", ["host", "avr"])
def test_regression_report(regression_case, target):
    """R² of the float model and of the compiled value, and the value's error, in y's units."""
    from sklearn.metrics import r2_score

    require_target(target)
    est, X, y = regression_case
    rows, truth = X[340:400], y[340:400]
    rep = target_report(est.to_model(), target, rows, truth, precision="int16", calibration=X[:340])
    assert set(rep) == FIELDS and rep["task"] == {"kind": "regression"} and rep["multilabel"] is None
    assert rep["float_accuracy"] is None and rep["target_accuracy"] is None
    reg = rep["regression"]
    assert reg["float_r2"] == pytest.approx(r2_score(truth, est.predict(rows)))
    # the host build's own values, independently of the report: R² and the error follow from them
    import tinycc_ml

    result = tinycc_ml.compile(est.to_model(), precision="int16", calibration=X[:340], name="model")
    scale = result.graph.type(result.graph.output("scores")).dtype.scale
    values = result.load().values_raw(rows) * 2.0**-scale
    assert reg["target_r2"] == pytest.approx(r2_score(truth, values))
    error = np.abs(values - est.predict(rows))
    assert reg["max_abs_error"] == pytest.approx(error.max()) and reg["mean_abs_error"] == pytest.approx(error.mean())
    # agreement for a value: the share of rows within 1% of the float values' range, never a class-style 1.0
    tolerance = 0.01 * np.ptp(est.predict(rows))
    assert reg["tolerance"] == pytest.approx(tolerance, rel=1e-4)
    assert rep["agreement_with_float"] == reg["within_tolerance"] == pytest.approx(np.mean(error <= tolerance))
    assert abs(reg["target_r2"] - reg["float_r2"]) < 0.01 and 0 < reg["mean_abs_error"] < 0.05 * np.std(truth)
    # the compile report states the fixed-point error on the calibration rows
    fixed = rep["compile_report"]["fixed_point_error"]
    assert fixed["rows"] == 340 and 0 < fixed["mean_abs"] <= fixed["max_abs"]
    if target == "avr":
        assert rep["cycles_mean"] > 0 and rep["stack_bytes"] > 0


def test_regression_report_float_build_and_no_targets(regression_case):
    require_target("host")
    est, X, _ = regression_case
    rep = target_report(est.to_model(), "host", X[340:380], precision="float")
    reg = rep["regression"]
    assert reg["float_r2"] is None and reg["target_r2"] is None
    assert reg["max_abs_error"] < 1e-3 * np.abs(est.predict(X[340:380])).max()  # float32 rounding only
    assert "fixed_point_error" not in rep["compile_report"]


@pytest.mark.parametrize("target", ["host", "cortex-m0"])
def test_multilabel_report(target):
    from sklearn.datasets import make_multilabel_classification
    from threadpoolctl import threadpool_limits

    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

    require_target(target)
    X, Y = make_multilabel_classification(n_samples=400, n_features=20, n_classes=8, n_labels=3, random_state=0)
    with threadpool_limits(limits=1):
        model = ProtoNNClassifier(budget_bytes=4096, n_iter=10, multilabel_rule="top_k", multilabel_k=3,
                                  random_state=0).fit(X[:300], Y[:300]).to_model()
    rep = target_report(model, target, X[300:], Y[300:], precision="int16", calibration=X[:300])
    assert set(rep) == FIELDS and rep["regression"] is None
    assert rep["task"] == {"kind": "multilabel", "rule": "top_k", "k": 3}
    ml = rep["multilabel"]
    S = model.scores(X[300:])
    top = np.argsort(-S, axis=1, kind="stable")
    for k in (1, 3, 5):
        want = np.mean(np.take_along_axis(Y[300:], top[:, :k], axis=1))
        assert ml["float_precision_at"][str(k)] == pytest.approx(want)
        assert abs(ml["target_precision_at"][str(k)] - want) <= 0.02
    assert ml["float_precision_at"]["1"] > 0.5  # well above chance (3 of 8 labels per row)
    assert rep["agreement_with_float"] == ml["label_agreement"] >= 0.95 and ml["ranking_agreement"] >= 0.8


def test_multilabel_report_refuses_a_label_column():
    from tinycc_ml.errors import DataError
    from tinycc_ml.models.protonn import ProtoNNModel

    model = ProtoNNModel(np.eye(3), np.ones((3, 2)), np.ones((4, 2)), 0.5).with_task(
        {"kind": "multilabel", "rule": "threshold", "threshold": 0.5})
    with pytest.raises(DataError, match="0/1 matrix of shape"):
        target_report(model, "host", np.zeros((5, 3)), np.zeros(5), precision="float")
