"""Float input for integer builds (backends/float_input.py): ``<prefix>_quantise`` and
``<prefix>_quantise_feature`` give, bit for bit, what the Python quantiser (``ir.fixed.quantise``) gives
for float32 input, on random and extreme values (halves, the largest float below 0.5, saturation bounds,
infinities, NaN, subnormals); ``<prefix>_predict_float`` is ``<prefix>_predict`` of the quantised row;
every target's header declares them, and microcontroller builds compile them with -D<PREFIX>_WITH_FLOAT
(warning-free with the cross compilers) and only then."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.runtime import toolchains
from tinycc_ml.testing import random_model

F32 = np.float32


@pytest.fixture(scope="module")
def builds():
    """Host int16 builds: ``wide`` (per-feature shifts: a table of factors) and ``one_factor`` (one factor
    shared by every feature)."""
    require_target("host")
    rng = np.random.default_rng(7)
    model = random_model("linear", rng)
    X = rng.normal(size=(64, model.input_dim)) * np.geomspace(1e-3, 1e3, model.input_dim)
    wide = tinycc_ml.compile(model, precision="int16", calibration=X, name="fq")
    proto = random_model("protonn", rng)
    shared = tinycc_ml.compile(proto, precision="int16", calibration=rng.normal(size=(64, proto.input_dim)),
                               name="fs")
    out = {}
    for key, result in (("wide", wide), ("one_factor", shared)):
        shifts = np.broadcast_to(np.asarray(result.output.input_scale), (result.output.input_dim,))
        out[key] = (result, result.load(), shifts.astype(np.int64))
    assert len(set(out["wide"][2].tolist())) > 1  # the table path is exercised
    return out


def c_quantise(predictor, rows: np.ndarray) -> np.ndarray:
    lib, ffi = predictor._lib, predictor._ffi
    rows = np.ascontiguousarray(rows, dtype=F32)
    out = np.zeros(rows.shape, dtype=np.int16)
    quantise_c = getattr(lib, f"{predictor.prefix}_quantise")
    for r in range(len(rows)):
        quantise_c(ffi.cast("const float *", ffi.from_buffer(rows[r])), ffi.cast("int16_t *", ffi.from_buffer(out[r])))
    return out


def extreme_values(shifts: np.ndarray) -> np.ndarray:
    """Values whose scaled form sits on every decision of the C: the half steps, the float just below
    them, the saturation bounds, 0.5 - 2^-25, the largest and smallest floats, subnormals."""
    scaled = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 32766.5, -32767.5, 32767.0, -32768.0, 40000.0, -40000.0,
              float(np.nextafter(F32(0.5), F32(0))), float(np.nextafter(F32(-0.5), F32(0))), 0.25, -0.25]
    values = []
    for s in sorted(set(shifts.tolist())):
        for v in scaled:
            x = F32(v * 2.0 ** -s)
            values += [x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))]
    values += [F32(np.inf), F32(-np.inf), F32(np.nan), np.finfo(F32).max, -np.finfo(F32).max,
               np.finfo(F32).smallest_subnormal, -np.finfo(F32).smallest_subnormal, np.finfo(F32).tiny]
    return np.asarray(values, dtype=F32)


@pytest.mark.parametrize("key", ["wide", "one_factor"])
def test_quantise_is_the_python_quantiser_bit_for_bit(builds, key):
    result, predictor, shifts = builds[key]
    dim = len(shifts)
    values = extreme_values(shifts)
    rows = np.resize(values, (-(-len(values) // dim) * dim,)).reshape(-1, dim)
    rows = np.concatenate([rows, np.roll(rows, 1, axis=1)])  # every value under every feature's shift
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=(200, dim), dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        scaled = (rng.normal(size=(200, dim)) * 2.0 ** -shifts).astype(F32)
    rows = np.concatenate([rows, bits.view(F32), scaled])
    want = quantise(rows.astype(np.float64), shifts, 16)
    assert np.array_equal(c_quantise(predictor, rows), want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=8))
def test_quantise_property(builds, values):
    _, predictor, shifts = builds["wide"]
    rows = np.resize(np.asarray(values, dtype=F32), (4, len(shifts)))
    for r in range(1, 4):
        rows[r] = np.roll(rows[r], r)
    assert np.array_equal(c_quantise(predictor, rows), quantise(rows.astype(np.float64), shifts, 16))


@pytest.mark.parametrize("key", ["wide", "one_factor"])
def test_predict_float_is_predict_of_the_quantised_row(builds, key):
    result, predictor, shifts = builds[key]
    rows = (np.random.default_rng(3).normal(size=(40, len(shifts))) * 2.0 ** (8 - shifts)).astype(F32)
    lib, ffi = predictor._lib, predictor._ffi
    predict_float = getattr(lib, f"{predictor.prefix}_predict_float")
    got = [predict_float(ffi.cast("const float *", ffi.from_buffer(np.ascontiguousarray(r)))) for r in rows]
    want = predictor.run_raw(quantise(rows.astype(np.float64), shifts, 16))[1]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0", "cortex-m4"])
def test_every_integer_header_declares_the_float_input(target):
    model = random_model("protonn", np.random.default_rng(5))
    X = np.random.default_rng(6).normal(size=(32, model.input_dim))
    result = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, name="dec")
    header, source = result.files["dec.h"], result.files["dec.c"]
    for line in ("int16_t dec_quantise_feature(int k, float v);", "void dec_quantise(const float *x, int16_t *x_int);",
                 "int dec_predict_float(const float *x);"):
        assert line in header
    guarded = "#if defined(DEC_WITH_FLOAT) || defined(ARDUINO)" in source
    assert guarded == (target != "host")
    if target != "host":  # declared under the guard too: a call without it fails to compile, not to link
        assert "-DDEC_WITH_FLOAT" in header
        section = header[header.index("#if defined(DEC_WITH_FLOAT) || defined(ARDUINO)"):]
        assert section.index("dec_predict_float") < section.index("#endif /* DEC_WITH_FLOAT */")
    float_build = tinycc_ml.compile(model, target=target, precision="float", name="dec")
    assert "quantise" not in float_build.files["dec.h"]


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_cross_builds_compile_it_only_when_asked(target, tmp_path):
    require_target(target)
    cc, chip = {"avr": ("avr-gcc", "atmega328p"), "cortex-m0": ("arm-none-eabi-gcc", None)}[target]
    flags = ["-mmcu=atmega328p"] if chip else ["-mcpu=cortex-m0", "-mthumb"]
    model = random_model("linear", np.random.default_rng(8))
    X = np.random.default_rng(9).normal(size=(32, model.input_dim)) * np.geomspace(1e-2, 1e2, model.input_dim)
    result = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, name="cq", out_dir=tmp_path)
    symbols = {}
    for defines in ((), ("-DCQ_WITH_FLOAT",)):
        obj = tmp_path / f"cq{len(defines)}.o"
        subprocess.run([toolchains.find_tool(cc), *flags, "-Os", "-std=c99", "-Wall", "-Wextra", "-Werror", *defines,
                        "-c", str(tmp_path / "cq.c"), "-o", str(obj)], check=True)
        nm = cc.replace("gcc", "nm")
        symbols[defines] = subprocess.run([toolchains.find_tool(nm), "-g", "--defined-only", str(obj)],
                                          capture_output=True, text=True, check=True).stdout
    assert "cq_quantise" not in symbols[()] and "cq_predict_float" not in symbols[()]
    assert all(f"cq_{f}" in symbols[("-DCQ_WITH_FLOAT",)] for f in ("quantise", "quantise_feature", "predict_float"))
    assert result.report["precision"] == "int16"


def test_a_tflite_build_quantises_float_input_with_its_scale_and_zero_point():
    """An int8 .tflite build (KWS) has the float entry point every integer build has: <prefix>_quantise gives
    ir.fixed.quantise_affine's codes bit for bit (round(x / scale) + zero point, on each threshold and the floats
    beside it, infinities, NaN), and the host predictor's predict() takes real rows as the int8 network does."""
    import os

    from tinycc_ml.ir.fixed import affine_thresholds, quantise_affine

    require_target("host")
    kws = os.path.join(os.path.dirname(__file__), "..", "..", "data", "mlperf-tiny", "kws_ref_model.tflite")
    model = tinycc_ml.load_model(kws)
    result = tinycc_ml.compile(model, name="kq")
    predictor = result.load()
    scale, zero = result.output.input_quantisation
    t = affine_thresholds(scale, zero)
    values = np.concatenate([t, np.nextafter(t, F32(-np.inf)), np.nextafter(t, F32(np.inf)),
                             [np.inf, -np.inf, np.nan, 0.0, -0.0, np.finfo(F32).max, -np.finfo(F32).max],
                             np.random.default_rng(1).normal(size=1000) * 100 * scale]).astype(F32)
    rows = np.resize(values, (-(-len(values) // 490) * 490,)).reshape(-1, 490)
    lib, ffi = predictor._lib, predictor._ffi
    got = np.zeros(rows.shape, dtype=np.int8)
    for r in range(len(rows)):
        lib.kq_quantise(ffi.cast("const float *", ffi.from_buffer(rows[r])),
                        ffi.cast("int8_t *", ffi.from_buffer(got[r])))
    assert np.array_equal(got, quantise_affine(rows, scale, zero))
    assert quantise_affine([2.51], scale, zero).tolist() == [87]
    real = np.random.default_rng(2).normal(size=(6, 490)) * 10
    assert np.array_equal(predictor.predict(real), model.predict_index(real))
