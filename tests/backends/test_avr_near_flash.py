"""Issue 36, item 8: AVR constants are read through near pgm_read_* pointers, so a build whose constants end
past 64 KB of flash (the ATmega1284P has 128 KB) read the wrong bytes while its fit said "measured", and one
array over 32,767 bytes did not compile. Both are refused, naming the size."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.avr import backend as avr_backend
from tinycc_ml.avr.backend import Atmega1284pBackend
from tinycc_ml.codegen.backend import BACKENDS, register_backend
from tinycc_ml.errors import FitError
from tinycc_ml.models.mlp import MLPModel


@pytest.fixture(scope="module", autouse=True)
def atmega1284p():
    register_backend(Atmega1284pBackend)
    yield
    del BACKENDS[Atmega1284pBackend.name]


def mlp(sizes) -> tuple[MLPModel, np.ndarray]:
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(b, a)) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    return MLPModel(weights, [np.full(b, 0.1) for b in sizes[1:]]), rng.normal(size=(32, sizes[0]))


def test_constants_past_64_kb_of_flash_are_refused():
    model, calibration = mlp([100, 120, 120, 120, 10])  # three int16 matrices of < 32 KB: 86 KB in all
    with pytest.raises(FitError, match=r"constants take \d+ bytes .* 65536 bytes of flash"):
        tinycc_ml.compile(model, "avr-atmega1284p", precision="int16", calibration=calibration)


def test_one_array_over_32767_bytes_is_refused_naming_it():
    model, calibration = mlp([100, 180, 100, 10])
    with pytest.raises(FitError, match=r"constant mlp_W\w* takes 3\d{4} bytes, over the 32767"):
        tinycc_ml.compile(model, "avr-atmega1284p", precision="int16", calibration=calibration)


@pytest.mark.toolchain
def test_the_measured_build_reads_where_the_constants_end(monkeypatch):
    """Past the estimate's guard (lifted here), the linked firmware's end of .progmem refuses the build."""
    require_target("avr")
    monkeypatch.setattr(avr_backend, "NEAR_FLASH_BYTES", 10**6)
    model, calibration = mlp([100, 120, 120, 120, 10])
    with pytest.raises(FitError, match=r"constants end at byte \d+ of flash, past the first 65536"):
        tinycc_ml.compile(model, "avr-atmega1284p", precision="int16", calibration=calibration)
    model, calibration = mlp([100, 110, 110, 10])  # 50 KB: runs
    assert tinycc_ml.compile(model, "avr-atmega1284p", precision="int16",
                             calibration=calibration).report["fit"]["how"].startswith("measured")
