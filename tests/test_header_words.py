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
