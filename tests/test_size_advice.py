"""A model that does not fit its chip is refused with what would: the family's settings that fit, estimated
from the sizes, which then do fit."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import FitError


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


def refusal(model, X, precision) -> str:
    with pytest.raises(FitError) as info:
        tinycc_ml.compile(model, target="avr", precision=precision, calibration=X)
    message = str(info.value)
    assert "bytes for constants" in message and "`tinycc-ml fit` (tinycc_ml.fit) searches the sizes that fit" in message
    return message


@pytest.mark.parametrize("precision", ["int16", "float"])
def test_a_forest_that_does_not_fit_names_forests_that_do(digits, precision):
    require_target("avr")
    X, y = digits
    message = refusal(RandomForestClassifier(n_estimators=40, random_state=0).fit(X, y), X, precision)
    advice = re.findall(r"(\d+) trees of at most (\d+) leaves \(max_leaf_nodes=\d+, or max_depth=(\d+)\)", message)
    assert len(advice) == 2, message
    for trees, leaves, depth in advice:
        for settings in ({"max_leaf_nodes": int(leaves)}, {"max_depth": int(depth)}):
            smaller = RandomForestClassifier(n_estimators=int(trees), random_state=0, **settings).fit(X, y)
            fit = tinycc_ml.compile(smaller, target="avr", precision=precision, calibration=X).report["fit"]
            assert fit["flash_bytes"] <= 32 * 1024 and fit["how"].startswith("measured")


def test_a_network_that_does_not_fit_names_the_hidden_units_that_do(digits):
    require_target("avr")
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = MLPClassifier((400,), max_iter=5, random_state=0).fit(X, y)
        message = refusal(net, X, "int16")
        (units,) = re.findall(r"hidden layers of \((\d+),\) units", message)
        smaller = MLPClassifier((int(units),), max_iter=5, random_state=0).fit(X, y)
    assert 0 < int(units) < 400
    fit = tinycc_ml.compile(smaller, target="avr", precision="int16", calibration=X).report["fit"]
    assert fit["flash_bytes"] <= 32 * 1024


def test_a_model_without_a_size_knob_still_says_how_much_fits(digits):
    X, _ = digits
    rng = np.random.default_rng(0)
    big = tinycc_ml.models.linear.LinearModel(rng.normal(size=(400, 64)))
    with pytest.raises(FitError, match=r"The chip leaves about \d+ bytes for constants, \d+% of what this model "
                                       r"needs; `tinycc-ml fit`"):
        tinycc_ml.compile(big, target="avr", precision="int16", calibration=X)


def test_a_network_that_does_not_fit_is_told_which_of_its_builds_do(tmp_path):
    """The PyTorch Conv1d net in an Uno sketch: its int16 build is refused for RAM, and the refusal names the
    builds that fit (int8 in the project's pow2 dialect and TFLite's), each with its sizes, which then compile;
    the float build's refusal (its firmware does not link) quotes no tool's output."""
    import importlib.util
    from pathlib import Path

    require_target("avr")
    repo = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("sensor_dataset", repo / "examples" / "sensor_cnn" / "dataset.py")
    dataset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dataset)
    calibration = dataset.make_rows(200, 1)[0].reshape(200, -1)
    net = repo / "tests" / "data" / "sensor_cnn.onnx"
    with pytest.raises(FitError) as info:
        tinycc_ml.compile(net, target="avr", precision="int16", calibration=calibration, layout="arduino")
    message = str(info.value)
    assert "RAM" in message and "these builds of it fit: " in message, message
    named = re.findall(r"--precision (\w+)( --int8-dialect pow2)? \((\d+) bytes of flash, (\d+) bytes of static RAM",
                       message.split("these builds of it fit: ")[1])
    assert {(p, d) for p, d, _, _ in named} == {("int8", " --int8-dialect pow2"), ("int8", "")}, message
    for precision, dialect, flash, ram in named:
        fit = tinycc_ml.compile(net, target="avr", precision=precision, calibration=calibration, layout="arduino",
                                **({"int8_dialect": "pow2"} if dialect else {})).report["fit"]
        assert (fit["flash_bytes"], fit["ram_bytes"]) == (int(flash), int(ram))
    with pytest.raises(FitError) as info:
        tinycc_ml.compile(net, target="avr", precision="float")
    message = str(info.value)
    assert "collect2" not in message and "ld returned" not in message and "error:" not in message, message
    assert "--calibration" in message
