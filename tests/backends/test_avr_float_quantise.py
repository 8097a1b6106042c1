"""The AVR's ``<prefix>_quantise`` in assembly (avr/float_quantise.py) gives, bit for bit, what the Python
quantiser (``ir.fixed.quantise``) gives, run in simavr: for every shift -100..100 (the per-feature offsets'
table) on the values at every decision (halves and the floats beside them, the saturation bounds, zeros,
subnormals, infinities, NaNs of both signs) and on 10^6 random bit patterns and values around the input grid;
and with one shift shared by every feature (the offset an immediate). Built with -Werror."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.backends.test_float_bits_quantiser import boundary_values, python_quantise
from tests.conftest import require_target
from tinycc_ml.avr.backend import AvrTarget
from tinycc_ml.codegen.float_input import INTEGER_SHIFTS, integer_quantiser
from tinycc_ml.runtime.simulate import run_on_target

F32 = np.float32
HEADER = "#include <stdint.h>\nint w_predict(const float *x);\nvoid w_scores(const float *x, int16_t *scores);\n"


def quantise_on_avr(tmp_path, shifts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each row of floats (one per shift) through q_quantise in simavr: (rows, features) int16."""
    api = SimpleNamespace(sym=lambda name: f"q_{name}", input_ctype="int16_t", input_dim=len(shifts),
                          input_shifts=tuple(int(s) for s in shifts))
    target = AvrTarget()
    lines = integer_quantiser(api, " PROGMEM", target.read_const, target)
    assert any("q_quantise_asm" in line for line in lines)
    source = ["#include <avr/pgmspace.h>", '#include "w.h"', *lines,
              "int w_predict(const float *x) { (void)x; return 0; }",
              "void w_scores(const float *x, int16_t *scores) { q_quantise(x, scores); }", ""]
    (tmp_path / "w.h").write_text(HEADER)
    (tmp_path / "w.c").write_text("\n".join(source))
    run = run_on_target("avr", [str(tmp_path / "w.c")], str(tmp_path / "w.h"), "w", rows.astype(F32), len(shifts),
                        "float", "int16_t", extra_cflags=("-Werror",))
    return np.asarray(run.scores, dtype=np.int16)


def check(tmp_path, shifts: np.ndarray, columns: list[np.ndarray]) -> int:
    """Values per feature (column k quantised at shifts[k]) padded to whole rows; returns how many were checked."""
    n = max(len(c) for c in columns)
    rows = np.zeros((n, len(shifts)), dtype=F32)
    for k, col in enumerate(columns):
        rows[:len(col), k] = col
    got = quantise_on_avr(tmp_path, shifts, rows)
    for k, shift in enumerate(shifts.tolist()):
        want = python_quantise(rows[:, k], shift, 16)
        bad = np.flatnonzero(got[:, k] != want)
        assert not len(bad), (f"shift {shift}: {rows[bad[:5], k]} give {got[bad[:5], k]}, want {want[bad[:5]]}")
    return rows.size


@pytest.mark.parametrize("half", [0, 1])
def test_every_shift_at_its_boundaries_and_a_million_floats(tmp_path, half):
    """Shifts -100..0 and 1..100 (two builds: their rows fit the ATmega328P's RAM); 5,000 values a shift."""
    require_target("avr")
    shifts = np.arange(INTEGER_SHIFTS[0], 1) if half == 0 else np.arange(1, INTEGER_SHIFTS[1] + 1)
    rng = np.random.default_rng(41 + half)
    columns = []
    for shift in shifts.tolist():
        raw = rng.integers(0, 2 ** 32, size=2500, dtype=np.uint64).astype(np.uint32).view(F32)
        near = (rng.normal(size=2400) * 2.0 ** rng.integers(-2, 18, size=2400) * 2.0 ** -shift).astype(F32)
        columns.append(np.concatenate([boundary_values(shift, 16), raw, near]))
    assert check(tmp_path, shifts, columns) >= 500_000


def test_one_shared_shift(tmp_path):
    require_target("avr")
    shifts = np.full(8, 11)
    rng = np.random.default_rng(3)
    columns = [np.concatenate([boundary_values(11, 16), rng.normal(size=200).astype(F32) * 16]) for _ in shifts]
    check(tmp_path, shifts, columns)
    api = SimpleNamespace(sym=lambda name: f"q_{name}", input_ctype="int16_t", input_dim=8, input_shifts=(11,) * 8)
    assert "ldi r22, 131" in "\n".join(integer_quantiser(api, " PROGMEM", AvrTarget().read_const, AvrTarget()))
