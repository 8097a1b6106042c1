"""Forests of many trees in the AVR's assembly (avr/forest_asm.py): where the carry fields of the sums do not fit
r16-r18 (20 of digits' trees already carry up to 5 times an output) each output counts its carries in a byte of
RAM, called on the rare carry from the nearest copy of the counters' code; the assembly's budget is the chip's
flash (the ATmega1284P's 124 KB, not the ATmega328P's 28); a branch takes its long form only where the short one
does not reach (forms chosen from one pass's positions). Every build bit for bit the interpreters' in simavr."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier

import tinycc_ml
from tests.backends.test_forest_asm import edge_rows, kernels
from tests.conftest import require_target
from tinycc_ml.avr import forest_asm
from tinycc_ml.avr.backend import Atmega1284pBackend
from tinycc_ml.codegen.backend import BACKENDS, register_backend
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:1000], y[:1000], X[1000:]


@pytest.fixture()
def atmega1284p():
    register_backend(Atmega1284pBackend)
    yield
    del BACKENDS[Atmega1284pBackend.name]


def test_plan_counts_carries_in_ram_where_the_fields_do_not_fit():
    bounds = np.array([6 << 16] * 9 + [60000])  # 3-bit fields for 9 outputs: 27 bits, over r16-r18's 24
    assert forest_asm.plan(10, bounds) is None
    assert forest_asm.plan(10, bounds, ram=True) == [(forest_asm.RAM_COUNTER, 0, 8)] * 9 + [(-1, 0, 0)]
    small = np.array([60000, 70000])
    assert forest_asm.plan(2, small, ram=True) == forest_asm.plan(2, small) == [(-1, 0, 0), (16, 0, 1)]


def test_many_trees_on_the_atmega328p(digits, tmp_path):
    """40 trees of depth 3 (10 classes, each sum carrying up to 10 times): RAM counters, in several copies (an
    RCALL reaches each), no JMP or CALL where every jump is short; exact on rows at every threshold."""
    require_target("avr")
    X, y, X_te = digits
    clf = RandomForestClassifier(n_estimators=40, max_depth=3, random_state=0).fit(X, y)
    r = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X, name="m")
    assert kernels(r) == {"trees-asm"}
    text = r.files["m.c"]
    copies = set(re.findall(r"\.Lm_trees_sums_carry0_(\d+):", text))
    assert len(copies) >= 2 and "m_trees_sums_carries" in text
    assert '"jmp ' not in text and '"call ' not in text  # trees of about 700 bytes: every jump within reach
    check_model("avr", clf, np.vstack([X_te[:60], edge_rows(clf, X, np.random.default_rng(3), 40)]), "int16",
                tmp_path, calibration=X)


def test_the_atmega1284p_holds_twenty_trees_in_assembly(digits, atmega1284p, tmp_path):
    """RF(20, depth 6): about 40 KB of assembly, over the ATmega328P's budget (there the C kernels), within the
    ATmega1284P's."""
    require_target("avr")
    X, y, X_te = digits
    clf = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(X, y)
    assert kernels(tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X)) != {"trees-asm"}
    r = tinycc_ml.compile(clf, target="avr-atmega1284p", precision="int16", calibration=X)
    assert kernels(r) == {"trees-asm"}
    check_model("avr-atmega1284p", clf, np.vstack([X_te[:40], edge_rows(clf, X, np.random.default_rng(5), 30)]),
                "int16", tmp_path, calibration=X)
