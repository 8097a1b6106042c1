"""Issue 23 item 6: calibration rows with no spread on some or all features are warned of, the features
named with the input range used instead (so other inputs no longer saturate); a model that does not fit the
chip is refused with its sizes, before any C is compiled when its constants or intermediates alone exceed
the chip, and never with a compiler's message about a temporary folder."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.avr.chips import ATMEGA328P
from tinycc_ml.codegen import mcu
from tinycc_ml.errors import FitError, ToolchainError
from tinycc_ml.testing import random_model


@pytest.fixture(scope="module")
def linear():
    model = random_model("linear", np.random.default_rng(21))
    X = np.random.default_rng(22).normal(size=(40, model.input_dim))
    return model, X


def test_flat_features_are_named_and_calibrated_over_a_range(linear, caplog):
    require_target("host")
    model, X = linear
    X = X.copy()
    X[:, 1], X[:, 3] = 0.0, 7.5
    with caplog.at_level(logging.WARNING, logger="tinycc_ml"):
        result = tinycc_ml.compile(model, precision="int16", calibration=X)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "features 1 (always 0; calibrated over [-1, 1]), 3 (always 7.5; calibrated over [0, 15])" in text
    assert f"of {model.input_dim} have no spread" in text
    assert result.report["calibration_flat_features"] == {"features": [1, 3], "values": [0.0, 7.5],
                                                         "ranges": [[-1.0, 1.0], [0.0, 15.0]]}
    # inputs that move the flat features inside those ranges are computed, not saturated at the one value
    rows = X[:20].copy()
    rows[:, 1] = np.linspace(-0.9, 0.9, 20)
    rows[:, 3] = np.linspace(1.0, 14.0, 20)
    got = result.load().decision_function(rows)
    want = model.scores(rows)
    assert np.max(np.abs(got - want)) < 0.05 * np.max(np.abs(want))


def test_all_flat_rows_and_a_declared_range(linear, caplog):
    model, _ = linear
    X = np.full((20, model.input_dim), 3.0)
    with caplog.at_level(logging.WARNING, logger="tinycc_ml"):
        result = tinycc_ml.compile(model, precision="int16", calibration=X)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "features 0 (always 3; calibrated over [0, 6])" in text
    assert f"and {model.input_dim - 8} more of {model.input_dim}" in text or model.input_dim <= 8
    assert result.report["calibration_flat_features"]["features"] == list(range(model.input_dim))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tinycc_ml"):  # the user's own range: nothing to say
        declared = tinycc_ml.compile(model, precision="int16", calibration=X, input_range=(-10, 10))
    assert "no spread" not in " ".join(r.getMessage() for r in caplog.records)
    assert "calibration_flat_features" not in declared.report


def test_rows_with_spread_are_not_changed(linear, caplog):
    model, X = linear
    with caplog.at_level(logging.WARNING, logger="tinycc_ml"):
        result = tinycc_ml.compile(model, precision="int16", calibration=X)
    assert "no spread" not in " ".join(r.getMessage() for r in caplog.records)
    assert "calibration_flat_features" not in result.report


def big_knn(rows: int):
    from tinycc_ml.models.knn import KNNClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 2))
    return KNNClassifier(k=1).fit(X, (X[:, 0] > 0).astype(int)), X[:32]


def test_intermediates_beyond_the_ram_are_refused_without_compiling(monkeypatch):
    """A kNN whose distances alone exceed the ATmega328P's RAM: refused with the sizes, no compiler run (an
    array past 32 KB made avr-gcc fail with "size of array is too large" in a temporary folder)."""

    def no_compiler(*args, **kwargs):
        raise AssertionError("the C was compiled")

    monkeypatch.setattr(mcu, "firmware_sizes", no_compiler)
    est, X = big_knn(700)
    with pytest.raises(FitError) as info:
        tinycc_ml.compile(est, target="avr", precision="int16", calibration=X)
    message = str(info.value)
    assert "does not fit the ATmega328P" in message and "bytes of static RAM" in message
    assert "intermediates alone exceed the RAM" in message and "/tmp" not in message


def test_a_compiler_error_is_said_without_the_temporary_folder(monkeypatch):
    def failing(*args, **kwargs):
        raise ToolchainError("compiling model: /tmp/tinycc-ml-fit-ab12cd/m.c:71:22: error: size of array 'x' is "
                             "too large")

    monkeypatch.setattr(mcu, "firmware_sizes", failing)
    big = mcu.BuildOutput(files={"m.h": "", "m.c": ""}, prefix="m", input_ctype="int16_t", score_ctype="int16_t",
                          input_dim=4, n_scores=2, const_bytes=40_000, ram_bytes=100)
    with pytest.raises(FitError) as info:
        mcu.check_fit("avr", ATMEGA328P, big, measure=True)
    assert "constants alone exceed the flash" in str(info.value)
    fits_flash = mcu.BuildOutput(files={"m.h": "", "m.c": ""}, prefix="m", input_ctype="int16_t",
                                 score_ctype="int16_t", input_dim=4, n_scores=2, const_bytes=31_000, ram_bytes=100)
    with pytest.raises(FitError) as info:
        mcu.check_fit("avr", ATMEGA328P, fits_flash, measure=True)
    message = str(info.value)
    # the compiler's own words go to the log, not into the refusal (and never the temporary folder's name)
    assert "did not build for the chip" in message and "size of array" not in message and "/tmp" not in message
    assert "31000 bytes" in message


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_weights_fixed_point_cannot_scale_are_blamed_by_layer_not_the_calibration_rows(precision):
    """An MLP with weights of 1e20 said "calibration data: values up to 2.4 need a fixed-point scale of 2^77":
    the rows are ordinary, the weights are at fault."""
    import warnings

    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.errors import CompileError

    X = np.random.default_rng(0).normal(size=(60, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier(hidden_layer_sizes=(4,), max_iter=50, random_state=0).fit(X, X[:, 0] > 0)
    mlp.coefs_ = [c * 1e20 for c in mlp.coefs_]
    largest = max(np.max(np.abs(c)) for c in mlp.coefs_)
    layer = f"W{int(np.argmax([np.max(np.abs(c)) for c in mlp.coefs_]))}"
    with pytest.raises(CompileError, match=re.escape(f"its constant {layer} (weights up to {largest:.3g})")) as err:
        tinycc_ml.compile(mlp, "host", precision=precision, calibration=X)
    assert "calibration data" not in str(err.value)
