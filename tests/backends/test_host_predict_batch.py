"""Host builds' batch entry point (tinycc_ml/host/batch.py: BLOCK_ROWS rows per pass over the weights)
against the single-row entry points of the same library: the same scores and predictions to the bit, for
every family at every precision (float builds too: the block keeps each sum's order), for batch sizes that
are and are not a multiple of the block."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tinycc_ml.host.batch import BLOCK_ROWS, VEC
from tinycc_ml.host.build import NUMPY_OF_CTYPE
from tinycc_ml.testing import FAMILIES, random_inputs, random_model

pytestmark = pytest.mark.usefixtures("host_target")
SETTINGS = settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def single_rows(pred, Xq: np.ndarray):
    """(scores, predictions) from <prefix>_scores and <prefix>_predict, one call per row."""
    lib, ffi = pred._lib, pred._ffi
    scores = np.zeros((len(Xq), pred.n_scores), dtype=NUMPY_OF_CTYPE[pred.score_ctype])
    preds = np.zeros(len(Xq), dtype=np.int32)
    x_t, s_t = f"{pred.input_ctype}[]", f"{pred.score_ctype}[]"
    for i, row in enumerate(Xq):
        getattr(lib, f"{pred.prefix}_scores")(ffi.from_buffer(x_t, row),
                                              ffi.from_buffer(s_t, scores[i], require_writable=True))
        preds[i] = getattr(lib, f"{pred.prefix}_predict")(ffi.from_buffer(x_t, row))
    return scores, preds


def check_batch(model, X: np.ndarray, precision: str, n: int) -> None:
    try:
        result = tinycc_ml.compile(model, target="host", precision=precision, name="hb",
                                   calibration=None if precision == "float" else X)
    except tinycc_ml.errors.TinyccError:  # a model this precision refuses: nothing to compare
        return
    assert "hb_predict_batch(" in result.files["hb.h"]
    pred = result.load()
    rows = np.resize(X, (n, X.shape[1]))  # n rows: more or fewer than X has
    if pred.input_ctype != "float" and pred.input_scale is None:
        return
    Xq = pred.quantise(rows)
    scores, preds = pred.run_raw(Xq)  # one call of <prefix>_predict_batch
    want_scores, want_preds = single_rows(pred, Xq)
    # bit-identical, float builds included (the same sums in the same order; NaN scores compared as bits)
    assert scores.tobytes() == want_scores.tobytes()
    np.testing.assert_array_equal(preds, want_preds)
    # the float-row entry point (rows converted in C, chunks through the batch entry point)
    if np.all(np.isfinite(rows)):
        np.testing.assert_array_equal(pred.predict_index(rows), want_preds)


@SETTINGS
@given(family=st.sampled_from(FAMILIES), precision=st.sampled_from(("float", "int16", "int8")),
       seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3 * BLOCK_ROWS + 5))
def test_batch_equals_single_rows_random_families(family, precision, seed, n):
    rng = np.random.default_rng(seed)
    model = random_model(family, rng)
    X = np.clip(random_inputs(model, rng, 24), -1e30, 1e30).astype(np.float32).astype(np.float64)
    check_batch(model, X, precision, n)


@SETTINGS
@given(kind=st.sampled_from(("mlp", "forest", "protonn")), precision=st.sampled_from(("float", "int16")),
       width=st.integers(1, 4 * VEC + 7), seed=st.integers(0, 1000),
       n=st.integers(1, 4 * BLOCK_ROWS + 3))
def test_batch_equals_single_rows_wide_models(kind, precision, width, seed, n):
    """Layers wider than the float mat-vec's tile (full tiles and a remainder), deeper forests."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(seed)
    D = int(rng.integers(2, 40))
    X = rng.normal(size=(120, D))
    y = (X[:, 0] + X[:, 1 % D] > 0).astype(int) + (X[:, -1] > 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "mlp":
            model = MLPClassifier((width,), max_iter=20, random_state=seed).fit(X, y)
        elif kind == "forest":
            model = RandomForestClassifier(n_estimators=1 + width % 12, max_depth=1 + width % 9,
                                           random_state=seed).fit(X, y)
        else:
            m = 1 + width
            model = ProtoNNModel(rng.normal(size=(1 + width % 40, D)), rng.normal(size=(1 + width % 40, m)),
                                 rng.normal(size=(3, m)), 0.3)
    check_batch(model, X.astype(np.float32).astype(np.float64), precision, n)


def test_integer_distances_run_the_vector_block_kernel_and_equal_single_rows():
    """ProtoNN int16: the squared distances to its prototypes are the batch's int32 vector kernel (VEC prototypes
    of every block row at a time; 37 of them: whole vectors and a padded one)."""
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(5)
    model = ProtoNNModel(rng.normal(size=(6, 20)), rng.normal(size=(6, 37)), rng.normal(size=(4, 37)), 0.4)
    X = rng.normal(size=(90, 20))
    result = tinycc_ml.compile(model, target="host", precision="int16", name="hb", calibration=X)
    padded = -(-37 // VEC) * VEC
    assert re.search(rf"static int32_t hb_\w+_block_sums\[{BLOCK_ROWS}\]\[{padded}\];", result.files["hb.c"])
    check_batch(model, X, "int16", 3 * BLOCK_ROWS + 5)


# the host C's code paths: the flags as they are (AVX-VNNI where the CPU has it), without AVX-VNNI, without AVX2
CODE_PATHS = {"native": (), "avx2": ("-mno-avxvnni",), "plain": ("-mno-avx2",)}


@pytest.mark.parametrize("path", sorted(CODE_PATHS))
@pytest.mark.parametrize("precision", ("float", "int16", "int8"))
def test_wide_layer_and_float_rows_on_each_code_path(precision, path, monkeypatch):
    """An MLP 37 -> 24 -> 3 on each code path: its integer first layer in the vector block kernel (vpdpwssd with
    AVX-VNNI, vpmaddwd with AVX2, the vector extension's products without), its block prefetching the next rows,
    and float64 rows converted in C 8 values at a time (AVX2) or one by one: the batch equals the single-row C, and
    predict_index of float rows equals the rows quantised in numpy (values on rounding halves, beyond the integer
    range, negative zero), for batch sizes around the block."""
    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.host import build

    monkeypatch.setattr(build, "HOST_CFLAGS", (*build.HOST_CFLAGS, *CODE_PATHS[path]))
    rng = np.random.default_rng(11)
    X = rng.normal(size=(200, 37))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] + X[:, 2] > 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MLPClassifier((24,), max_iter=60, random_state=0).fit(X, y)
    result = tinycc_ml.compile(model, target="host", precision=precision, name="hb",
                               calibration=None if precision == "float" else X)
    source = result.files["hb.c"]
    assert "__builtin_prefetch(hb_predict_batch_ahead_at" in source
    if precision != "float":
        assert "_mm256_dpwssd_avx_epi32" in source and "_mm256_madd_epi16" in source
    pred = result.load()
    rows = rng.normal(scale=2.0, size=(3 * BLOCK_ROWS + 5, 37))
    if pred.input_scale is not None:  # values whose scaled value + 0.5 is a whole number, of both signs
        shifts = np.broadcast_to(np.asarray(pred.input_scale, dtype=np.float64), (37,))
        halves = (rng.integers(-300, 300, size=rows.shape) + 0.5) * 2.0 ** -shifts
        rows = np.where(rng.random(rows.shape) < 0.5, halves, rows)
    rows[0, :5] = [1e9, -1e9, -0.0, 3.0e4, -3.0e4]
    rows = rows.astype(np.float32).astype(np.float64)
    for n in (1, BLOCK_ROWS, BLOCK_ROWS + 1, len(rows)):
        Xq = pred.quantise(rows[:n])
        scores, preds = pred.run_raw(Xq)
        want_scores, want_preds = single_rows(pred, Xq)
        assert scores.tobytes() == want_scores.tobytes()
        np.testing.assert_array_equal(preds, want_preds)
        np.testing.assert_array_equal(pred.predict_index(rows[:n]), want_preds)


@pytest.mark.parametrize("path", ("native", "plain"))
@pytest.mark.parametrize("ctype", ("float", "int16_t", "int8_t"))
def test_row_converter_equals_numpy_on_each_code_path(ctype, path, tmp_path):
    """tinycc_batch_q's row converter (host/build.py: AVX2 8 values at a time, then the scalar loop) against numpy:
    float rows as astype(float32); int rows as tinycc_ml.ir.fixed.quantise (x 2^s + 0.5 floored, saturated) for
    values on rounding halves of both signs, beyond the integer range, +-0 and tiny ones; a row holding a NaN or an
    infinity flagged (the caller quantises it itself)."""
    import subprocess

    import cffi

    from tinycc_ml.host import build
    from tinycc_ml.ir.fixed import quantise

    D = 8 * 7 + 5  # whole vectors and a scalar tail
    lo, hi = {"float": (0, 0), "int16_t": (-32767, 32767), "int8_t": (-127, 127)}[ctype]
    scalar = ("row[k] = (float)xr[k];" if ctype == "float" else
              f"bad |= !(xr[k] - xr[k] == 0.0); double v = xr[k] * factor[k] + 0.5; "
              f"v = v < {lo}.0 ? {lo}.0 : (v > {hi}.0 ? {hi}.0 : v); row[k] = ({ctype})(int32_t)floor(v);")
    (tmp_path / "conv.c").write_text(f"""#include <math.h>
#include <stdint.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#define D {D}
int conv(const double *xr, const double *factor, {ctype} *row);
int conv(const double *xr, const double *factor, {ctype} *row)
{{
    int bad = 0;
    int k = 0;
    (void)factor;
{build.vector_convert(ctype, lo, hi, "D")}
    for (; k < D; ++k) {{ {scalar} }}
    return bad;
}}
""")
    lib = tmp_path / "conv.so"
    flags = (*build.HOST_CFLAGS, *CODE_PATHS[path])
    subprocess.run(["gcc", *flags, "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "conv.c"), "-lm"], check=True)
    ffi = cffi.FFI()
    ffi.cdef(f"int conv(const double *xr, const double *factor, {ctype} *row);")
    conv = ffi.dlopen(str(lib)).conv
    rng = np.random.default_rng(3)
    shifts = rng.integers(-2, 12, size=D).astype(np.float64)
    factor = 2.0 ** shifts
    dtype = NUMPY_OF_CTYPE[ctype]
    for trial in range(40):
        x = rng.normal(scale=10.0 ** rng.integers(-3, 4), size=D)
        halves = (rng.integers(-40000, 40000, size=D) + 0.5) / factor
        x = np.where(rng.random(D) < 0.5, halves, x)
        x[rng.integers(0, D, size=3)] = rng.choice([0.0, -0.0, 1e300, -1e300, 5e-324, 2.0**40], size=3)
        out = np.zeros(D, dtype=dtype)
        bad = conv(ffi.from_buffer("double[]", x), ffi.from_buffer("double[]", factor),
                   ffi.from_buffer(f"{ctype}[]", out, require_writable=True))
        with np.errstate(over="ignore"):  # +-1e300 to float32: +-inf, as the C cast gives
            want = x.astype(np.float32) if ctype == "float" else \
                quantise(x, shifts, np.iinfo(dtype).bits).astype(dtype)
        assert out.tobytes() == want.tobytes(), trial
        assert bad == 0
    if ctype != "float":
        for special in (np.nan, np.inf, -np.inf):
            for at in (0, D - 1):  # in a vector, in the scalar tail
                x = np.zeros(D)
                x[at] = special
                assert conv(ffi.from_buffer("double[]", x), ffi.from_buffer("double[]", factor),
                            ffi.from_buffer(f"{ctype}[]", np.zeros(D, dtype=dtype), require_writable=True)) == 1
