"""The RISC-V backend against tinycc-ml's conformance checks, as any plug-in's tests would run them."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.target import ToolchainError, available_backends, get_backend
from tinycc_ml.testing import FAMILIES, check_target


@pytest.fixture(scope="module")
def toolchain():
    try:
        get_backend("riscv").require_tools()
    except ToolchainError as exc:
        if os.environ.get("TINYCC_ML_REQUIRE_TOOLCHAINS"):
            raise
        pytest.skip(str(exc))


def test_registered_through_its_entry_point():
    assert "riscv" in available_backends()
    assert {"simulate", "load"} & get_backend("riscv").capabilities() == {"simulate"}


def test_conformance(toolchain, tmp_path):
    report = check_target("riscv", tmp_path, seeds=(0,))
    # every family at every precision, plus the symbol and size checks
    assert len(report.cases) == len(FAMILIES) * 3 + 2
    assert not report.not_applicable


def test_instructions_are_counted_exactly(toolchain, tmp_path):
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 40))
    model = tinycc_ml.models.linear.LinearModel(W, rng.normal(size=3))
    X = rng.normal(size=(20, 40))
    result = tinycc_ml.compile(model, target="riscv", precision="int16", calibration=X, out_dir=tmp_path, name="lin")
    run = get_backend("riscv").simulate(tmp_path, result.output, X)
    # the same path for every row (no data-dependent branch in a dense mat-vec but the argmax's): counts
    # differ by at most the argmax's few instructions, and grow with the 120 multiply-accumulates
    assert run.instructions.min() > 120 and run.instructions.max() - run.instructions.min() < 20
    assert run.model_flash_bytes < run.flash_bytes <= 128 * 1024
