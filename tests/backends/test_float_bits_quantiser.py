"""The integer quantiser of float input (codegen/float_input.integer_quantiser): ``<prefix>_quantise_feature``
computed from the float's bits alone gives, bit for bit, what the Python quantiser (``ir.fixed.quantise``) gives
for every shift it takes (-100..100) and both input widths: on the values at every decision of the C (the half
steps and the floats beside them, the saturation bounds, zeros, subnormals, infinities, NaNs of both signs), on
hypothesis' floats and on 10^6 random bit patterns. The C is compiled alone with the host compiler (-Wall -Wextra
-Werror) and called through cffi."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.codegen.float_input import INTEGER_SHIFTS, integer_quantiser
from tinycc_ml.ir.fixed import quantise

F32 = np.float32
SHIFTS = np.arange(INTEGER_SHIFTS[0], INTEGER_SHIFTS[1] + 1)


def build(tmp_path, ctype: str):
    """The quantiser of one feature per shift in SHIFTS, and ``quantise_all(v, n, k, out)`` over n floats."""
    cffi = pytest.importorskip("cffi")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no host C compiler")
    api = SimpleNamespace(sym=lambda name: f"q_{name}", input_ctype=ctype, input_dim=len(SHIFTS),
                          input_shifts=tuple(int(s) for s in SHIFTS))
    source = ["#include <stdint.h>",
              *integer_quantiser(api, "", lambda array, index, _: f"{array}[{index}]"),
              f"void q_quantise_all(const float *v, int n, int k, {ctype} *out);",
              f"void q_quantise_all(const float *v, int n, int k, {ctype} *out)",
              "{", "    for (int i = 0; i < n; ++i) out[i] = q_quantise_feature(k, v[i]);", "}"]
    c_file, library = tmp_path / f"q_{ctype}.c", tmp_path / f"q_{ctype}.so"
    c_file.write_text("\n".join(source) + "\n")
    subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", str(c_file),
                    "-o", str(library)], check=True)
    ffi = cffi.FFI()
    ffi.cdef(f"void q_quantise_all(const float *v, int n, int k, {ctype} *out);"
             f"{ctype} q_quantise_feature(int k, float v);")
    return ffi, ffi.dlopen(str(library))


@pytest.fixture(scope="module", params=["int16_t", "int8_t"])
def quantiser(request, tmp_path_factory):
    ctype = request.param
    ffi, lib = build(tmp_path_factory.mktemp("quantiser"), ctype)
    dtype, bits = (np.int16, 16) if ctype == "int16_t" else (np.int8, 8)

    def run(values: np.ndarray, k: int) -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=F32)
        out = np.zeros(len(values), dtype=dtype)
        lib.q_quantise_all(ffi.cast("const float *", ffi.from_buffer(values)), len(values), k,
                           ffi.cast(f"{ctype} *", ffi.from_buffer(out)))
        return out

    return run, bits


def python_quantise(values: np.ndarray, shift: int, bits: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return quantise(np.asarray(values, dtype=F32).astype(np.float64), shift, bits)


def boundary_values(shift: int, bits: int) -> np.ndarray:
    """Floats whose scaled value sits on a decision of the C, and the floats on either side of each."""
    top = 2.0 ** (bits - 1)
    scaled = [0.0, 0.5, 1.0, 1.5, 2.5, 3.5, 7.5, 100.5, 255.5, 256.5, 1000.5, top - 1.5, top - 1, top - 0.5, top,
              top + 0.5, 2 * top, 2.0 ** 15 - 0.5, 2.0 ** 15, 2.0 ** 16, 2.0 ** 24, 0.25, 2.0 ** -10]
    values = []
    for v in scaled:
        for sign in (1, -1):
            x = F32(sign * v * 2.0 ** -shift)
            values += [x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))]
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF], dtype=np.uint32)
    subnormals = np.array([1, 0x007FFFFF, 0x80000001, 0x807FFFFF, 0x00800000, 0x80800000], dtype=np.uint32)
    values += [F32(np.inf), F32(-np.inf), F32(0.0), F32(-0.0), np.finfo(F32).max, -np.finfo(F32).max,
               *nans.view(F32), *subnormals.view(F32)]
    return np.asarray(values, dtype=F32)


def test_every_shift_at_its_boundaries(quantiser):
    run, bits = quantiser
    for k, shift in enumerate(SHIFTS.tolist()):
        values = boundary_values(shift, bits)
        got, want = run(values, k), python_quantise(values, shift, bits)
        bad = np.flatnonzero(got != want)
        assert not len(bad), f"shift {shift}: {values[bad[:5]]} give {got[bad[:5]]}, want {want[bad[:5]]}"


def test_a_million_random_bit_patterns(quantiser):
    """10^6 floats: random bits (every exponent, NaN payloads, subnormals) and values around the input grid."""
    run, bits = quantiser
    rng = np.random.default_rng(37)
    total = 0
    for k, shift in enumerate(SHIFTS.tolist()):
        raw = rng.integers(0, 2 ** 32, size=2500, dtype=np.uint64).astype(np.uint32).view(F32)
        near = (rng.normal(size=2500) * 2.0 ** rng.integers(-2, bits + 2, size=2500) * 2.0 ** -shift).astype(F32)
        values = np.concatenate([raw, near])
        assert np.array_equal(run(values, k), python_quantise(values, shift, bits)), f"shift {shift}"
        total += len(values)
    assert total >= 10 ** 6


@settings(max_examples=400, deadline=None)
@given(value=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
       shift=st.integers(int(INTEGER_SHIFTS[0]), int(INTEGER_SHIFTS[1])))
def test_any_float_any_shift(quantiser, value, shift):
    run, bits = quantiser
    values = np.array([value, -value], dtype=F32)
    assert np.array_equal(run(values, shift - INTEGER_SHIFTS[0]), python_quantise(values, shift, bits))


def test_out_of_range_feature_index_gives_zero(quantiser):
    run, _ = quantiser
    assert run(np.array([1.0], dtype=F32), -1)[0] == 0
    assert run(np.array([1.0], dtype=F32), len(SHIFTS))[0] == 0
