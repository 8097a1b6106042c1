"""target_report: accuracy, agreement, sizes and speed of a compiled model on its target."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.target_report import count_macs, target_report

FIELDS = {"target", "precision", "rows", "float_accuracy", "target_accuracy", "agreement_with_float", "flash_bytes",
          "ram_bytes", "model_flash_bytes", "model_ram_bytes", "stack_bytes", "cycles_mean", "cycles_max",
          "instructions_mean", "instructions_max", "macs", "per_mac", "method", "compile_report"}


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
    if target == "host":
        assert rep["cycles_mean"] is None and rep["per_mac"] is None and rep["method"] == "cffi"
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
