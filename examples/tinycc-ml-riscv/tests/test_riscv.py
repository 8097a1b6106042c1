"""The RISC-V backend against tinycc-ml's conformance checks, as any plug-in's tests would run them."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.target import ToolchainError, available_backends, get_backend
from tinycc_ml.testing import FAMILIES, check_model, check_target


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


@pytest.mark.parametrize("precision, weights", [("int16", "int16"), ("int8", "int8")])
def test_dense_matvec_runs_on_the_package_kernel(toolchain, tmp_path, precision, weights):
    rng = np.random.default_rng(1)
    model = tinycc_ml.models.linear.LinearModel(rng.normal(size=(21, 50)), rng.normal(size=21))
    X = rng.normal(size=(24, 50))
    # bit for bit against tinycc_ml.ir.fixed.run_fixed, predict and streaming (begin/feed over the re-laid matrix)
    check_model("riscv", model, X, precision, tmp_path)
    source = (tmp_path / "conf.c").read_text()
    # 21 rows: two passes over x, of 11 and 10 rows
    assert f"conf_mac11_{weights}(conf_W_q_rv + 0, " in source and f"conf_mac10_{weights}(conf_W_q_rv + 550, " in source
