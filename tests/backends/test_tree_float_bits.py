"""predict_float of a single tree compares the float bits of only the features a row's path reads
(trees.predict_float_code): each node's integer threshold T as the largest float32 quantising to at most T, the
bits compared as sign-magnitude, a NaN (the missing value) sent to the node's default side. Exactly predict of the
quantised row on every boundary float (the threshold's float and its neighbours, both zeros, both infinities,
NaNs of either sign, subnormals), on the host and in simavr; on the ATmega328P within 1.3x predict + 100 cycles
(it quantised all 64 of digits' features first: about 2,700 cycles against predict's 287)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from sklearn.tree import DecisionTreeClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.codegen.trees import float_bits_threshold
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.ops.ensembles import threshold_ints
from tinycc_ml.runtime.simulate import run_on_target

F32 = np.float32
FLOAT_H = "#include <stdint.h>\nint w_predict(const float *x);\nvoid w_scores(const float *x, {s_t} *scores);\n"
FLOAT_C = ('#include "w.h"\n#include "m.h"\nint w_predict(const float *x) {{ return m_predict_float(x); }}\n'
           "void w_scores(const float *x, {s_t} *scores) {{ {in_t} q[{n}]; m_quantise(x, q); m_scores(q, scores); }}\n")


@settings(max_examples=400, deadline=None)
@given(bits=st.sampled_from([8, 16]), shift=st.integers(-100, 100), data=st.data())
def test_the_threshold_float_is_the_last_float_quantising_to_at_most_t(bits, shift, data):
    top = 2 ** (bits - 1)
    T = data.draw(st.integers(-top, top))
    t = float_bits_threshold(T, shift, bits)
    with np.errstate(over="ignore"):
        q = lambda v: int(quantise(np.float64(v), shift, bits))  # noqa: E731
        if t is True:
            assert q(np.finfo(F32).max) <= T
        elif t is False:
            assert q(-np.finfo(F32).max) > T
        else:
            assert q(t) <= T < q(np.nextafter(t, F32(np.inf), dtype=F32))


def nan(sign: int) -> F32:
    return np.array([0xFFC00001 if sign < 0 else 0x7FC00001], dtype=np.uint32).view(F32)[0]


@pytest.fixture(scope="module")
def tree_and_rows():
    """A tree over features of scales 2^-6..2^6 with negative and positive thresholds and missing values on both
    default sides, and rows setting one feature a node reads to a boundary float each."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 6)) * 2.0 ** np.arange(-6, 6, 2)
    y = (X[:, 0] * 64 + X[:, 1] * 16 - X[:, 2] * 4 > 0).astype(int) + 2 * (X[:, 3] / 4 + X[:, 5] / 64 > 0.3)
    X[rng.random(X.shape) < 0.1] = np.nan
    clf = DecisionTreeClassifier(max_depth=7, random_state=0).fit(X, y)
    result = tinycc_ml.compile(clf, precision="int16", calibration=np.nan_to_num(X), name="m")
    (node,) = [nd for nd in result.graph.nodes() if nd.op == "tree_ensemble"]
    shifts = np.broadcast_to(np.asarray(result.output.input_scale), (6,)).astype(np.int64)
    ints = threshold_ints(node.attrs, result.graph.type(node.inputs[0]).dtype.scale, 16)
    inner = np.flatnonzero(node.attrs["feature"] >= 0)
    assert len({bool(d) for d in node.attrs["default_left"][inner]}) == 2
    assert np.any(ints[inner] < 0) and np.any(ints[inner] > 0)
    rows = [X[i] for i in range(40)]
    special = [F32(0.0), F32(-0.0), F32(np.inf), F32(-np.inf), nan(1), nan(-1), np.finfo(F32).smallest_subnormal,
               -np.finfo(F32).smallest_subnormal]
    for i in inner:
        f = int(node.attrs["feature"][i])
        t = float_bits_threshold(int(ints[i]), int(shifts[f]), 16)
        near = [] if isinstance(t, bool) else [t, np.nextafter(t, F32(np.inf)), np.nextafter(t, F32(-np.inf))]
        for v in near + special:
            row = X[rng.integers(len(X))].copy()
            row[f] = v
            rows.append(row)
    return clf, result, np.asarray(rows, dtype=F32), shifts


def test_host_predict_float_is_predict_of_the_quantised_row(tree_and_rows):
    require_target("host")
    _, result, rows, shifts = tree_and_rows
    assert any(k.get("kernel") == "trees-float-bits" for k in result.report["kernels"])
    predictor = result.load()
    lib, ffi = predictor._lib, predictor._ffi
    got = [lib.m_predict_float(ffi.cast("const float *", ffi.from_buffer(np.ascontiguousarray(r)))) for r in rows]
    want = predictor.run_raw(quantise(rows.astype(np.float64), shifts, 16))[1]
    assert np.array_equal(got, want)


def test_quantise_is_defined_where_the_shifts_need_float_arithmetic():
    """Beyond the integer quantiser's shifts (-100..100) <prefix>_quantise was declared but not defined."""
    require_target("host")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3)) * np.array([1e-30, 1.0, 1e36])
    clf = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, (X[:, 0] > 0) + (X[:, 2] > 0))
    result = tinycc_ml.compile(clf, precision="int16", calibration=X, name="m")
    shifts = np.asarray(result.output.input_scale, dtype=np.int64)
    assert shifts.min() < -100 and shifts.max() > 100
    predictor = result.load()
    lib, ffi = predictor._lib, predictor._ffi
    rows = np.ascontiguousarray(X[:20], dtype=F32)
    out = np.zeros(rows.shape, dtype=np.int16)
    for row, q in zip(rows, out):
        lib.m_quantise(ffi.cast("const float *", ffi.from_buffer(row)), ffi.cast("int16_t *", ffi.from_buffer(q)))
    np.testing.assert_array_equal(out, quantise(rows.astype(np.float64), shifts, 16))


def avr_build(clf, calibration, work: Path):
    return tinycc_ml.compile(clf, target="avr", precision="int16", calibration=calibration, name="m", out_dir=work)


def float_run(result, rows, work: Path):
    """predict_float of the build written in ``work`` on float32 rows, in simavr."""
    o = result.output
    fmt = dict(s_t=o.score_ctype, in_t=o.input_ctype, n=o.input_dim)
    (work / "w.h").write_text(FLOAT_H.format(**fmt))
    (work / "w.c").write_text(FLOAT_C.format(**fmt))
    return run_on_target("avr", [str(work / "m.c"), str(work / "w.c")], str(work / "w.h"), "w", rows, o.n_scores,
                         "float", o.score_ctype, extra_cflags=("-DM_WITH_FLOAT",))


@pytest.mark.toolchain
def test_avr_predict_float_exact_and_within_1_3x_predict(tree_and_rows, tmp_path):
    require_target("avr")
    clf, _, rows, _ = tree_and_rows
    result = avr_build(clf, np.nan_to_num(rows), tmp_path / "edges")
    q = quantise(rows.astype(np.float64), result.output.input_scale, 16).astype(np.int16)
    assert np.array_equal(float_run(result, rows, tmp_path / "edges").predictions,
                          run_fixed(result.graph, q)["prediction"])
    # digits' tree of depth 8: the float walk against predict of the quantised rows
    X, y = load_digits(return_X_y=True)
    digits = DecisionTreeClassifier(max_depth=8, random_state=0).fit(X[:1200], y[:1200])
    built = avr_build(digits, X[:1200], tmp_path / "digits")
    floats = float_run(built, X[1200:1400].astype(F32), tmp_path / "digits")
    o = built.output
    ints = quantise(X[1200:1400], o.input_scale, 16).astype(np.int16)
    plain = run_on_target("avr", [str(tmp_path / "digits" / "m.c")], str(tmp_path / "digits" / "m.h"), "m", ints,
                          o.n_scores, o.input_ctype, o.score_ctype)
    assert np.array_equal(floats.predictions, plain.predictions)
    assert np.mean(floats.cycles) <= 1.3 * np.mean(plain.cycles) + 100, (np.mean(floats.cycles),
                                                                         np.mean(plain.cycles))
