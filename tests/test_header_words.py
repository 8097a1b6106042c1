"""Generated headers speak the user's language: no IR names, no double signs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tinycc_ml
from tinycc_ml.codegen.float_input import offset_text

MODELS = Path(__file__).parent.parent / "data" / "mlperf-tiny"


def _header(result) -> str:
    return next(text for name, text in result.files.items() if name.endswith(".h"))


@pytest.mark.parametrize(("offset", "text"), [(75, "q + 75"), (-75, "q - 75"), (0, "q")])
def test_an_offset_is_written_with_one_sign(offset, text):
    assert offset_text("q", offset) == text


def test_a_negative_zero_point_reads_as_an_addition():
    header = _header(tinycc_ml.compile(tinycc_ml.load_model(MODELS / "kws_ref_model.tflite"), target="host"))
    assert "Scores: int8, TFLite's quantisation: real = 0.00390625 * (q + 128)." in header
    assert not re.search(r"[-+] -\d", header)


def test_why_a_build_does_not_stream_is_said_without_ir_names():
    header = _header(tinycc_ml.compile(tinycc_ml.load_model(MODELS / "ad01_int8.tflite"), target="cortex-m4"))
    line = next(ln for ln in header.splitlines() if "No streaming entry points" in ln)
    assert "%" not in line and " is reshape" not in line
    assert line.endswith("here it is a reshape of the input */")


def test_each_step_of_a_build_is_named_in_words():
    """What the report's kernel profile shows per step: the trees counted, layers by their sizes, in the order
    the code runs them (BuildOutput.node_steps)."""
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(X[:300], y[:300])
    steps = tinycc_ml.compile(forest, target="avr", precision="int16", calibration=X[:300]).output.node_steps
    assert "10 trees" in steps.values()
    mlp = MLPClassifier((16,), max_iter=50, random_state=0).fit(X[:300], y[:300])
    steps = list(tinycc_ml.compile(mlp, target="cortex-m0", precision="int16", calibration=X[:300])
                 .output.node_steps.values())
    products = [s for s in steps if s.startswith("matrix product")]
    assert products == ["matrix product, 64 inputs -> 16 outputs", "matrix product, 16 inputs -> 10 outputs"]
    assert not any("%" in s or "_" in s for s in steps), steps
