"""A letter-26-like forest (26 classes, 16 small integer features, 50 trees of depth 6) for the ATmega1284P compiled
to C that did not link (avr-gcc sizes a few branches of a 35 KB function a word short: "relocation truncated to fit:
R_AVR_13_PCREL" in the trees' sums) while its fit said "estimated". Its straight-line code is now split into
functions within the RJMP's reach, the build links, runs exactly in simavr and its fit is the linked firmware's;
and a build whose firmware does not link is refused, never sized by an estimate."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.avr.backend import Atmega1284pBackend
from tinycc_ml.codegen import mcu
from tinycc_ml.codegen.backend import BACKENDS, register_backend
from tinycc_ml.errors import FitError, ToolchainError
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module", autouse=True)
def atmega1284p():
    register_backend(Atmega1284pBackend)
    yield
    del BACKENDS[Atmega1284pBackend.name]


def letter_like(n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """16 integer features 0-15 and 26 classes from noisy linear scores: full trees of depth 6."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 16, size=(n, 16)).astype(np.float64)
    y = np.argmax(X @ rng.normal(size=(16, 26)) + rng.normal(scale=6.0, size=(n, 26)), axis=1)
    return X, y


def function_sizes(result, tmp_path) -> dict[str, int]:
    """Bytes of each function of the build's C compiled for its chip."""
    for name, text in result.files.items():
        (tmp_path / name).write_text(text)
    obj = tmp_path / "model.o"
    chip = Atmega1284pBackend.chip
    subprocess.run([shutil.which("avr-gcc"), *chip.cflags, "-c", str(tmp_path / f"{result.prefix}.c"), "-o",
                    str(obj)], check=True)
    listing = subprocess.run([shutil.which("avr-nm"), "-S", str(obj)], capture_output=True, text=True,
                             check=True).stdout.split()
    return {listing[i + 3]: int(listing[i + 1], 16) for i in range(0, len(listing) - 3)
            if listing[i + 2] in ("t", "T") and len(listing[i]) == 8 == len(listing[i + 1])}


@pytest.mark.toolchain
def test_every_function_of_a_big_forest_within_the_rjmp_reach(tmp_path):
    require_target("avr")
    X, y = letter_like()
    rf = RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0).fit(X, y)
    result = tinycc_ml.compile(rf, target="avr-atmega1284p", precision="int16", calibration=X)
    assert result.report["fit"]["how"].startswith("measured firmware")
    (kernel,) = [k["kernel"] for k in result.report["kernels"] if k.get("op") == "tree_ensemble"]
    assert kernel.startswith("trees-top") or kernel == "trees-straight"  # code, not the table walk
    sizes = function_sizes(result, tmp_path)
    assert sum(sizes.values()) > 20_000 and max(sizes.values()) < 4096, sizes
    rows = np.vstack([X[:60], np.where(np.eye(16, dtype=bool)[np.arange(20) % 16], np.nan, X[60:80])])
    check_model("avr-atmega1284p", rf, rows, "int16", tmp_path / "run", calibration=X)


@pytest.mark.toolchain
def test_the_letter_forest_that_did_not_link(tmp_path):
    """UCI letter-26 (benchmarks/letter.py; skipped where Debian's r-cran-mlbench is not unpacked)."""
    require_target("avr")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from letter import letter26

        X_tr, y_tr, X_te, _ = letter26()
    except Exception as exc:  # noqa: BLE001 - any reason the data set is not here
        pytest.skip(f"letter-26 not available: {exc}")
    finally:
        sys.path.pop(0)
    rf = RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0).fit(X_tr, y_tr)
    result = tinycc_ml.compile(rf, target="avr-atmega1284p", precision="int16", calibration=X_tr)
    assert result.report["fit"]["how"].startswith("measured firmware")
    check_model("avr-atmega1284p", rf, X_te[:100], "int16", tmp_path, calibration=X_tr)


def test_a_firmware_that_does_not_link_is_refused(monkeypatch):
    def unlinked(*args, **kwargs):
        raise ToolchainError("linking the AVR firmware failed (exit 1): m.c:(.text.m_sums+0x343a): relocation "
                             "truncated to fit: R_AVR_13_PCREL against `no symbol'")

    monkeypatch.setattr(mcu, "firmware_sizes", unlinked)
    small = mcu.BuildOutput(files={"m.h": "", "m.c": ""}, prefix="m", input_ctype="int16_t", score_ctype="int16_t",
                            input_dim=4, n_scores=2, const_bytes=1000, ram_bytes=100)
    chip = Atmega1284pBackend.chip
    with pytest.raises(FitError, match=r"model m cannot be built for the ATmega1284P: its code has a branch "
                                       r"beyond its reach .*constants 1000 bytes") as info:
        mcu.check_fit("avr-atmega1284p", chip, small, measure=True)
    assert "R_AVR" not in str(info.value)
    # without a cross toolchain the estimate stands, and says so
    monkeypatch.setattr(mcu, "firmware_sizes", lambda *a, **k: (_ for _ in ()).throw(
        ToolchainError("avr-gcc not found on PATH")))
    assert mcu.check_fit("avr-atmega1284p", chip, small, measure=True).how == "estimated (no cross toolchain)"
