"""Host builds: compile emitted C with the system compiler into a shared library opened through cffi
(ABI mode), cache the result by content hash, and wrap it in a predictor working on numpy arrays."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.host.batch import BLOCK_ROWS
from tinycc_ml.target import (
    DataError,
    ToolchainError,
    cache_root,
    compiler_version,
    outside,
    private_dir,
    quantise,
    quantise_affine,
)

# host builds are loaded on the machine that builds them: tuned for its CPU (the cache key names the CPU)
# (-fno-trapping-math: floating-point exceptions are never inspected; it lets rounding loops vectorise;
# -ffp-contract=off: no fused multiply-add, as gcc's -std=c99 already does and clang's default does not, so
# the batch entry point's sums equal the single-row function's to the bit with either compiler)
# -mno-fma -mno-avx512f: gcc 12's vectoriser fuses a complex product's a*b - c*d into vfmaddsub (one rounding
# fewer) even with -ffp-contract=off, so a float FFT's last bits differed from every other build's; no FMA
# instruction is wanted anyway (AVX-512 implies FMA in gcc: it goes too, AVX2 stays)
HOST_CFLAGS = ("-std=c99", "-O3", "-march=native", "-mno-fma", "-mno-avx512f", "-fno-trapping-math",
               "-ffp-contract=off", "-Wall", "-Wextra", "-Werror")
MANIFEST = "manifest.json"  # the library's name and SHA-256, written at build time, checked before loading
log = logging.getLogger(__name__)
NUMPY_OF_CTYPE = {"float": np.float32, "int32_t": np.int32, "int16_t": np.int16, "int8_t": np.int8,
                  "uint8_t": np.uint8, "uint16_t": np.uint16, "uint32_t": np.uint32, "int64_t": np.int64,
                  "uint64_t": np.uint64}


def cache_dir() -> Path:
    return cache_root() / "host"


class HostPredictor:
    """A compiled model run on the rows of X, with one API per task (as the float model's):

    - ``predict(X)``: classification: class labels (``classes``, 0..L-1 unless the model carries
      labels); regression: the value in the model's units (float64, also for integer builds);
      multilabel: the 0/1 label matrix (n, L);
    - ``decision_function(X)``: the scores in the model's units (float64, n x n_scores);
    - ``predict_index(X)``: the class index ``<prefix>_predict`` returns;
    - ``values(X)`` (regression): the value in the model's units; ``labels(X)`` (multilabel);
    - the raw forms, in the C types (integer builds: value * 2^SCORE_SCALE): ``scores(X)``
      (``<prefix>_scores``), ``values_raw(X)`` (``<prefix>_predict_value``), ``run_raw(Xq)``.

    For integer builds, float rows are quantised to the input's fixed-point scale (round to
    nearest, saturating); ``run_raw`` takes the integer rows as they are.
    """

    classes: np.ndarray | None = None

    def __init__(self, module, prefix: str, input_ctype: str, score_ctype: str, input_dim: int, n_scores: int,
                 input_scale=None, task: dict | None = None, score_scale: int | None = None, n_proba: int = 0,
                 input_bound: dict | None = None, input_quantisation: tuple[float, int] | None = None,
                 feed_hop: int | None = None):
        self._lib, self._ffi = module.lib, module.ffi
        self.feed_hop = feed_hop  # a front end's stream: input values between decisions of <prefix>_feed
        self._fed = 0  # values fed since the stream began: the place of the next in its windows
        self.input_quantisation = input_quantisation  # TFLite-style int8: the input's (scale, zero point)
        self.prefix, self.input_ctype, self.score_ctype = prefix, input_ctype, score_ctype
        self.input_dim, self.n_scores, self.input_scale = input_dim, n_scores, input_scale
        self.task = dict(task) if task else {"kind": "classification"}
        self.score_scale = score_scale  # integer builds: a score's value is score_int * 2^-score_scale
        self.n_proba = n_proba  # entries <prefix>_proba writes (0: the model defines no probabilities)
        self.input_bound = input_bound  # float builds: rows beyond it get no answer (codegen/input_bound.py)
        self.decision_transform = None  # scores -> decision_function where they differ (set by CompileResult.load)

    def _check_bound(self, X32: np.ndarray) -> None:
        """DataError for the first row of float32 rows X32 that the build answers no class for: a feature beyond
        the input bound, a NaN or an infinity."""
        beyond = outside(self.input_bound, X32)
        if beyond.any():
            row, feature = (int(i) for i in np.argwhere(beyond)[0])
            limit = (f"+-{self.input_bound['bound']:g}" if "bound" in self.input_bound
                     else "its feature's checked range (the calibration rows' or input_range)")
            raise DataError(f"{self.prefix}: row {row}, feature {feature} is {float(X32[row, feature]):g}, beyond "
                            f"{limit}, the inputs this float build is proven to compute within float32 for (its "
                            "float32 values could overflow where the model's float64 do not): the C answers no "
                            "class (-1) for it")

    def _check_real_input(self) -> None:
        """An integer build with neither input scale nor input quantisation (a network input quantised per
        channel) takes its integer rows through run_raw only."""
        if self.input_ctype != "float" and self.input_scale is None and self.input_quantisation is None:
            raise DataError(f"{self.prefix}: this build takes {self.input_ctype} rows quantised as the network's "
                            "input tensor says (NetworkModel.scores shows how); pass them to run_raw")

    def quantise(self, X) -> np.ndarray:
        self._check_real_input()
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise DataError(f"input has shape {X.shape}, expected (n, {self.input_dim})")
        dtype = NUMPY_OF_CTYPE[self.input_ctype]
        if self.input_ctype == "float":
            with np.errstate(over="ignore"):
                X32 = np.ascontiguousarray(X, dtype=np.float32)
            self._check_bound(X32)
            return X32

        if self.input_quantisation is not None:  # as <prefix>_quantise does: the input tensor's scale, zero point
            return np.ascontiguousarray(quantise_affine(X, *self.input_quantisation, np.iinfo(dtype).bits)
                                        .astype(dtype))
        scale = self.input_scale if self.input_scale is not None else 0
        return np.ascontiguousarray(quantise(X, scale, np.iinfo(dtype).bits).astype(dtype))

    def _run(self, Xq: np.ndarray, want_scores: bool = True, want_predictions: bool = True):
        n = len(Xq)
        scores = np.zeros((n, self.n_scores), dtype=NUMPY_OF_CTYPE[self.score_ctype])
        preds = np.zeros(n, dtype=np.int32)
        ffi = self._ffi
        self._lib.tinycc_batch(
            ffi.from_buffer(f"{self.input_ctype}[]", Xq), n,
            ffi.from_buffer(f"{self.score_ctype}[]", scores, require_writable=True) if want_scores else ffi.NULL,
            ffi.from_buffer("int[]", preds, require_writable=True) if want_predictions else ffi.NULL)
        if self._faulted():
            self._report_fault(Xq)
        return scores, preds

    def _faulted(self) -> bool:
        """Whether ``<prefix>_status()`` reports a fault in the rows just run (builds without it have none)."""
        status = getattr(self._lib, f"{self.prefix}_status", None)
        return status is not None and bool(status())

    def _report_fault(self, Xq: np.ndarray) -> None:
        """DataError for a fault in the rows Xq (an index outside its axis, where TFLite Micro's Invoke stops with
        an error), naming the first such row where the build keeps no state (run again one at a time to find it)."""
        status, where = getattr(self._lib, f"{self.prefix}_status"), "a row"
        if not hasattr(self._lib, f"{self.prefix}_reset"):
            scores = np.zeros(self.n_scores, dtype=NUMPY_OF_CTYPE[self.score_ctype])
            run = getattr(self._lib, f"{self.prefix}_scores")
            for r, row in enumerate(np.asarray(Xq).reshape(len(Xq), -1)):
                run(self._ffi.from_buffer(f"{self.input_ctype}[]", np.ascontiguousarray(row)),
                    self._ffi.from_buffer(f"{self.score_ctype}[]", scores, require_writable=True))
                if status():
                    where = f"row {r}"
                    break
        raise DataError(f"{self.prefix}: {where} holds a value where TFLite Micro's Invoke stops with an error (an "
                        "index outside its tensor: GATHER, GATHER_ND, EMBEDDING_LOOKUP; a negative RSQRT input): the "
                        f"C gave a defined result and {self.prefix}_status() reported it")

    def _real(self, raw) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.float64)
        return raw if self.score_scale is None else raw * 2.0**-self.score_scale

    def scores(self, X) -> np.ndarray:
        """Raw ``<prefix>_scores`` of each row, in the score C type (integer builds: score * 2^SCORE_SCALE)."""
        return self._run(self.quantise(X), want_predictions=False)[0]

    def decision_function(self, X) -> np.ndarray:
        """The scores in the model's units (float64, (n, n_scores)), also for integer builds; an SVC built with
        probabilities and decision_function_shape='ovr': scikit-learn's one-vs-rest form of its pair decisions."""
        real = self._real(self.scores(X))
        return real if self.decision_transform is None else self.decision_transform(real)

    def predict_index(self, X) -> np.ndarray:
        self._check_real_input()
        fused = self._lib.tinycc_batch_q
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.input_dim or self.input_quantisation is not None:
            return self._run(self.quantise(X), want_scores=False)[1].astype(np.int64)
        # one foreign call: each row quantised in C exactly as quantise() does, then predicted
        X = np.ascontiguousarray(X)
        shifts = np.asarray(self.input_scale if self.input_scale is not None else 0, dtype=np.float64)
        factor = np.ascontiguousarray(np.broadcast_to(2.0 ** shifts, (self.input_dim,)), dtype=np.float64)
        preds = np.zeros(len(X), dtype=np.int32)
        ffi = self._ffi
        if fused(ffi.from_buffer("double[]", X), len(X), ffi.from_buffer("double[]", factor),
                 ffi.from_buffer("int[]", preds, require_writable=True)):  # a NaN or infinity: quantise() decides
            return self._run(self.quantise(X), want_scores=False)[1].astype(np.int64)
        if self._faulted():
            self._report_fault(self.quantise(X))
        if self.input_bound is not None and np.any(preds < 0):  # rows given no class: said, after the fast path
            with np.errstate(over="ignore"):
                self._check_bound(X.astype(np.float32))
        return preds.astype(np.int64)

    def predict(self, X) -> np.ndarray:
        """Class labels (classification), values in the model's units (regression) or the 0/1
        label matrix (multilabel): what the float model's ``predict`` gives."""
        kind = self.task.get("kind")
        if kind == "regression":
            return self.values(X)
        if kind == "multilabel":
            return self.labels(X).astype(np.int64)
        index = self.predict_index(X)
        return index if self.classes is None else np.asarray(self.classes)[index]

    def values_raw(self, X) -> np.ndarray:
        """Regression builds: ``<prefix>_predict_value`` of each row in the score C type (integer
        builds: the value times 2^SCORE_SCALE)."""
        fn = self._entry_point("predict_value")
        Xq = self.quantise(X)
        ffi, x_t = self._ffi, f"{self.input_ctype}[]"
        return np.array([fn(ffi.from_buffer(x_t, row)) for row in Xq], dtype=NUMPY_OF_CTYPE[self.score_ctype])

    def values(self, X) -> np.ndarray:
        """Regression builds: the predicted value of each row in the model's units (float64)."""
        return self._real(self.values_raw(X))

    def labels(self, X) -> np.ndarray:
        """Multilabel builds: the 0/1 vector ``<prefix>_predict_labels`` writes for each row, (n, n_scores)."""
        return self._rows_into("predict_labels", X, self.n_scores, np.uint8, "uint8_t[]")

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of each row from ``<prefix>_proba`` (float32, (n, N_PROBA)), for models
        that define them (see tinycc_ml.models.proba)."""
        return self._rows_into("proba", X, self.n_proba, np.float32, "float[]")

    def _rows_into(self, entry: str, X, width: int, dtype, c_type: str) -> np.ndarray:
        """(n, width) array that ``<prefix>_<entry>(x, out)`` fills, one call per row."""
        fn = self._entry_point(entry)
        Xq = self.quantise(X)
        ffi, x_t = self._ffi, f"{self.input_ctype}[]"
        out = np.zeros((len(Xq), width), dtype=dtype)
        for row, dest in zip(Xq, out):
            fn(ffi.from_buffer(x_t, row), ffi.from_buffer(c_type, dest, require_writable=True))
        return out

    def _entry_point(self, name: str):
        try:
            return getattr(self._lib, f"{self.prefix}_{name}")
        except AttributeError:
            raise DataError(f"{self.prefix}.h declares no {self.prefix}_{name} (the model's task has none)") from None

    def run_raw(self, Xq) -> tuple[np.ndarray, np.ndarray]:
        """(scores, predictions) for rows already in the input C type."""
        Xq = np.ascontiguousarray(Xq, dtype=NUMPY_OF_CTYPE[self.input_ctype])
        if Xq.ndim == 1:
            Xq = Xq[None, :]
        return self._run(Xq)

    def feed(self, chunk) -> np.ndarray:
        """A front end's stream: the input values of ``chunk`` (any length, a multi-axis sensor's values interleaved,
        in the model's units, as ``predict`` takes them) appended to the stream through ``<prefix>_feed``; the class
        labels of the windows they completed, in order (empty: none yet). Integer builds quantise each value exactly
        as ``predict`` quantises it at its place in the window; a float build takes an int16 chunk through
        ``<prefix>_feed_i16`` (raw sensor counts, each exact as a float). ``feed_raw`` takes values already in the
        input's C type (an integer build's codes). ``reset()`` starts a new stream."""
        self._entry_point("feed")  # a build without a stream: said before anything else
        chunk = np.asarray(chunk)
        if chunk.dtype == np.int16 and self.input_ctype == "float":
            return self._feed("feed_i16", "int16_t", np.ascontiguousarray(chunk.ravel()))
        values = np.asarray(chunk, dtype=np.float64).ravel()
        if not np.all(np.isfinite(values)):
            raise DataError(f"{self.prefix}: the stream's samples hold NaN or infinity")
        if self.input_ctype == "float":
            return self._feed("feed", "float", np.ascontiguousarray(values, dtype=np.float32))
        return self._feed("feed", self.input_ctype, self._quantise_stream(values))

    def feed_raw(self, codes) -> np.ndarray:
        """``feed`` for values already in the input's C type (an integer build's codes, as ``run_raw`` takes rows):
        passed to ``<prefix>_feed`` as they are."""
        self._entry_point("feed")
        codes = np.asarray(codes).ravel()
        dtype = NUMPY_OF_CTYPE[self.input_ctype]
        if self.input_ctype != "float":
            info = np.iinfo(dtype)
            bad = ~np.isfinite(codes.astype(np.float64)) | (codes != np.round(codes)) | (codes < info.min) | \
                (codes > info.max)
            if bad.any():
                i = int(np.argmax(bad))
                raise DataError(f"{self.prefix}: stream value {i} is {codes[i]}, not an {self.input_ctype} code")
        return self._feed("feed", self.input_ctype, np.ascontiguousarray(codes, dtype=dtype))

    def _quantise_stream(self, values: np.ndarray) -> np.ndarray:
        """An integer build's stream values in its input codes, each as ``quantise`` turns it at its place in the
        windows: a value's place in every window it is in differs by whole hops, so the window's scales must repeat
        every hop (they do for one scale, or one per axis of a sensor whose hop is whole samples)."""
        self._check_real_input()
        dtype = NUMPY_OF_CTYPE[self.input_ctype]
        bits = np.iinfo(dtype).bits
        if self.input_quantisation is not None:  # one scale and zero point for every value
            codes = quantise_affine(values, *self.input_quantisation, bits)
        else:
            scales = np.broadcast_to(np.asarray(self.input_scale, dtype=np.float64), (self.input_dim,))
            hop = self.feed_hop
            place = np.arange(self.input_dim) % hop
            if not np.array_equal(scales, scales[place]):
                raise DataError(f"{self.prefix}: the window's input scales do not repeat every hop ({hop} values): a "
                                "stream value would be quantised differently in different windows; pass its codes "
                                "to feed_raw")
            codes = quantise(values, scales[(self._fed + np.arange(values.size)) % hop], bits)
        return np.ascontiguousarray(codes.astype(dtype))

    def _feed(self, entry: str, c_type: str, values: np.ndarray) -> np.ndarray:
        feed = self._entry_point(entry)
        decisions = np.zeros(values.size // self.feed_hop + 1, dtype=np.intc)
        made = feed(self._ffi.from_buffer(f"{c_type}[]", values), values.size,
                    self._ffi.from_buffer("int[]", decisions, require_writable=True))
        self._fed += values.size
        found = decisions[:made]
        return found if self.classes is None else np.asarray(self.classes)[found]

    def reset(self) -> None:
        """A build with state (a stream's front end): back to the state of the first call (<prefix>_reset)."""
        reset = getattr(self._lib, f"{self.prefix}_reset", None)
        if reset is None:
            raise DataError(f"{self.prefix}: this build keeps no state between calls; there is nothing to reset")
        reset()
        self._fed = 0


CONVERT_BUFFER_BYTES = 1 << 17  # tinycc_batch_q's converted rows: a share of L2, whatever the row size
MAX_CONVERT_ROWS = 256


def batch_chunk_rows(header: str, prefix: str, input_ctype: str) -> int:
    """Rows tinycc_batch_q converts before each call of the batch entry point: a whole number of blocks whose
    converted rows fit CONVERT_BUFFER_BYTES (at least one block)."""
    found = re.search(rf"#define {prefix.upper()}_INPUT_DIM (\d+)", header)
    row_bytes = int(found.group(1)) * NUMPY_OF_CTYPE[input_ctype]().itemsize if found else CONVERT_BUFFER_BYTES
    rows = min(MAX_CONVERT_ROWS, CONVERT_BUFFER_BYTES // max(1, row_bytes))
    return max(BLOCK_ROWS, rows - rows % BLOCK_ROWS)


def vector_convert(input_ctype: str, lo: int, hi: int, dim: str) -> str:
    """C converting 8 values of a float64 row ``xr`` at a time from ``k`` (AVX2; other CPUs: none, the scalar loop
    does every value): float rows as (float) casts do; int8 / int16 rows as the scalar loop quantises them
    (``v = x * factor + 0.5`` in double, clamped, floored), each finite value to the same integer (a row holding a
    NaN or an infinity sets ``bad``: the caller quantises those rows itself). Other C types: none."""
    if input_ctype == "float":
        store = ("_mm_storeu_ps(row + k, _mm256_cvtpd_ps(a)); "
                 "_mm_storeu_ps(row + k + 4, _mm256_cvtpd_ps(b));")
    elif input_ctype in ("int16_t", "int8_t"):
        quant = ("const __m256d f{0} = _mm256_loadu_pd(factor + k + {1}); "
                 "const __m128i q{0} = _mm256_cvttpd_epi32(_mm256_floor_pd(_mm256_min_pd(_mm256_max_pd("
                 "_mm256_add_pd(_mm256_mul_pd({0}, f{0}), half), lo), hi)));")
        store = quant.format("a", 0) + " " + quant.format("b", 4) + " const __m128i q = _mm_packs_epi32(qa, qb); "
        store += ("_mm_storeu_si128((__m128i *)(row + k), q);" if input_ctype == "int16_t"
                  else "_mm_storel_epi64((__m128i *)(row + k), _mm_packs_epi16(q, q));")
    else:
        return ""
    if input_ctype == "float":  # NaN passes through, as in the scalar loop
        return f"""#if defined(__AVX2__)
                for (; k + 8 <= {dim}; k += 8) {{
                    const __m256d a = _mm256_loadu_pd(xr + k), b = _mm256_loadu_pd(xr + k + 4);
                    {store}
                }}
#endif"""
    return f"""#if defined(__AVX2__)
                {{
                    const __m256d half = _mm256_set1_pd(0.5), lo = _mm256_set1_pd({lo}.0), hi = _mm256_set1_pd({hi}.0);
                    __m256d nonfinite = _mm256_setzero_pd();
                    for (; k + 8 <= {dim}; k += 8) {{
                        const __m256d a = _mm256_loadu_pd(xr + k), b = _mm256_loadu_pd(xr + k + 4);
                        /* x - x: 0 for a finite x, NaN for a NaN or an infinity */
                        nonfinite = _mm256_or_pd(nonfinite, _mm256_cmp_pd(_mm256_add_pd(_mm256_sub_pd(a, a),
                            _mm256_sub_pd(b, b)), _mm256_setzero_pd(), _CMP_NEQ_UQ));
                        {store}
                    }}
                    bad |= _mm256_movemask_pd(nonfinite) != 0;
                }}
#endif"""


def build_host_module(header: str, source: str, prefix: str, input_ctype: str, score_ctype: str):
    """Compile (or fetch from the cache) a cffi module for one emitted model. A cache entry is
    loaded only from a private cache folder and only when the library's SHA-256 matches the one
    recorded when it was built; anything else is rebuilt."""
    import cffi


    cdef = f"""
        int {prefix}_predict(const {input_ctype} *x);
        void {prefix}_scores(const {input_ctype} *x, {score_ctype} *scores);
        void tinycc_batch(const {input_ctype} *x, int n, {score_ctype} *scores, int *predictions);
    """
    # the task's own entry point, when the header declares one (regression / multilabel builds)
    if f"{prefix}_predict_value(" in header:
        cdef += f"    {score_ctype} {prefix}_predict_value(const {input_ctype} *x);\n"
    if f"{prefix}_predict_labels(" in header:
        cdef += f"    void {prefix}_predict_labels(const {input_ctype} *x, uint8_t *out);\n"
    if f"{prefix}_proba(" in header:
        cdef += f"    void {prefix}_proba(const {input_ctype} *x, float *out);\n"
    if f"{prefix}_quantise(" in header:  # integer builds: float input quantised by the C
        cdef += (f"    void {prefix}_quantise(const float *x, {input_ctype} *x_int);\n"
                 f"    int {prefix}_predict_float(const float *x);\n")
    # rows of float64 in, predictions out, in one call: each row converted in C as HostPredictor.quantise does
    cdef += "    int tinycc_batch_q(const double *x, int n, const double *factor, int *predictions);\n"
    batched = f"{prefix}_predict_batch(" in header  # the host target's block entry point (tinycc_ml/host/batch.py)
    stateful = f"{prefix}_step(" in header  # each row the next call: scores and class from one step each
    if stateful or f"{prefix}_feed(" in header:
        cdef += f"    void {prefix}_reset(void);\n"
    if f"{prefix}_feed(" in header:  # a front end's stream (codegen/stream_feed.py)
        cdef += f"    int {prefix}_feed(const {input_ctype} *samples, long n, int *decisions);\n"
    if f"{prefix}_feed_i16(" in header:
        cdef += f"    int {prefix}_feed_i16(const int16_t *samples, long n, int *decisions);\n"
    if f"int {prefix}_status(void);" in header:  # run-time faults (codegen/run_status.py)
        cdef += f"    int {prefix}_status(void);\n"
    if batched:
        rows = f"{prefix}_predict_batch(x, n, scores, predictions);"
    elif stateful:
        rows = f"""{score_ctype} row_scores[{prefix.upper()}_N_SCORES];
            for (int i = 0; i < n; ++i) {{
                {score_ctype} *out = scores ? scores + (long)i * {prefix.upper()}_N_SCORES : row_scores;
                const int p = {prefix}_step(x + (long)i * {prefix.upper()}_INPUT_DIM, out);
                if (predictions)
                    predictions[i] = p;
            }}"""
    else:
        rows = f"""for (int i = 0; i < n; ++i) {{
                if (scores)
                    {prefix}_scores(x + (long)i * {prefix.upper()}_INPUT_DIM,
                                    scores + (long)i * {prefix.upper()}_N_SCORES);
                if (predictions)
                    predictions[i] = {prefix}_predict(x + (long)i * {prefix.upper()}_INPUT_DIM);
            }}"""
    wrapper = f"""
        #include <math.h>
        #if defined(__AVX2__)
        #include <immintrin.h>
        #endif
        #include "{prefix}.h"
        void tinycc_batch(const {input_ctype} *x, int n, {score_ctype} *scores, int *predictions);
        int tinycc_batch_q(const double *x, int n, const double *factor, int *predictions);
        void tinycc_batch(const {input_ctype} *x, int n, {score_ctype} *scores, int *predictions)
        {{
            /* either output may be NULL: each entry point is timed and tested on its own */
            {rows}
        }}
    """
    if input_ctype == "float":
        convert, check = "row[k] = (float)xi[k];", ""  # as numpy's astype(float32); NaN passes through
    else:
        lo, hi = {"int8_t": (-127, 127), "int16_t": (-32767, 32767), "uint16_t": (0, 65535),
                  "uint32_t": (0, 4294967295)}.get(input_ctype, (-2147483648, 2147483647))
        # clamped, then floored: the same integer as floored, then clamped (the bounds are integers)
        convert = (f"double v = xi[k] * factor[k] + 0.5; v = v < {lo}.0 ? {lo}.0 : (v > {hi}.0 ? {hi}.0 : v); "
                   f"row[k] = ({input_ctype})({'int64_t' if input_ctype.startswith('u') else 'int32_t'})floor(v);")
        check = "bad |= !(xi[k] - xi[k] == 0.0);"
    bounds = (0, 0) if input_ctype == "float" else (lo, hi)
    vector = vector_convert(input_ctype, *bounds, f"{prefix.upper()}_INPUT_DIM")
    # rows converted a chunk at a time into a buffer that stays in the L2 cache, each chunk predicted by one
    # call of the batch entry point (longer runs of conversion stream the float64 rows better: the MLP on 784
    # features 6% faster at 80 rows than at 8)
    # (a build whose block prefetches: a block at a time, the next block's float64 rows prefetched while it computes;
    # harness, 10,000 x 784: LR int16 15.1 -> 11.2 ms at best)
    ahead = batched and f"__builtin_prefetch({prefix}_predict_batch_ahead_at + " in source
    chunk = BLOCK_ROWS if ahead else batch_chunk_rows(header, prefix, input_ctype) if batched else 1
    predict = (f"{prefix}_predict_batch(rows, m, (void *)0, predictions + i);" if batched
               else f"predictions[i] = {prefix}_predict(rows);")
    if ahead:
        predict = (f"{prefix}_predict_batch_ahead(i + m < n ? (const void *)(xi + (long)m * {prefix.upper()}_INPUT_DIM)"
                   f" : (const void *)0, i + m < n ? ((long)(n - i - m < {chunk} ? n - i - m : {chunk}) * "
                   f"{prefix.upper()}_INPUT_DIM + 7) / 8 : 0);\n            {predict}\n            "
                   f"{prefix}_predict_batch_ahead((const void *)0, 0);")
    wrapper += f"""
    /* 1 when a value is not finite (the caller then quantises the rows itself) */
    int tinycc_batch_q(const double *x, int n, const double *factor, int *predictions)
    {{
        static {input_ctype} rows[{chunk} * {prefix.upper()}_INPUT_DIM];
        (void)factor;
        for (int i = 0; i < n; i += {chunk}) {{
            const int m = n - i < {chunk} ? n - i : {chunk};
            const double *xi = x + (long)i * {prefix.upper()}_INPUT_DIM;
            int bad = 0;
            (void)bad;
            for (int r = 0; r < m; ++r) {{
                {input_ctype} *row = rows + (long)r * {prefix.upper()}_INPUT_DIM;
                const double *xr = xi + (long)r * {prefix.upper()}_INPUT_DIM;
                int k = 0;
{vector}
                for (; k < {prefix.upper()}_INPUT_DIM; ++k) {{
                    {check.replace("xi[k]", "xr[k]")}
                    {convert.replace("xi[k]", "xr[k]")}
                }}
            }}
            if (bad)
                return 1;
            {predict}
        }}
        return 0;
    }}
    """
    # everything that goes into the module is in the key: the wrapper, the flags, and the
    # compiler that turns them into machine code (its path, version, CC/CFLAGS)
    key = hashlib.sha256("\0".join(["shared library, cffi ABI mode", header, source, cdef, wrapper,
                                    " ".join(HOST_CFLAGS), cffi.__version__,
                                    sys.version, compiler_version, *compiler_identity()]).encode()).hexdigest()[:20]
    module_name = f"_tinycc_{prefix}_{key}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    root = cache_dir()
    if not private_dir(root):
        # a folder others can write to may hold a planted library: build afresh, cache nothing
        log.warning("%s is not a private folder of this user; building without the cache", root)
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-host-") as work:
            return _import(module_name, _compile(Path(work), module_name, header, source, prefix, cdef, wrapper), cdef)
    entry = root / key
    library = _verified_library(entry)
    if library is None:
        _discard(entry)
        work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            _compile(work, module_name, header, source, prefix, cdef, wrapper)
            try:
                os.replace(work, entry)
            except OSError:  # another process built it first
                pass
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        library = _verified_library(entry)
        if library is None:
            raise ToolchainError(f"host build of {prefix}.c: the cached library in {entry} fails its check")
    return _import(module_name, library, cdef)


@functools.cache
def _compiler_version(command: tuple[str, ...]) -> str:
    try:
        run = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"
    return run.stdout + run.stderr


FLAG_VARIABLES = ("CPPFLAGS", "CFLAGS", "LDFLAGS")  # added to every host build's compiler call


def _compiler() -> tuple[str, ...]:
    """The C compiler host builds call: CC, else the one Python was configured with."""
    return tuple(shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")) or ("cc",)


def compiler_identity() -> list[str]:
    """What decides the machine code besides the sources: the C compiler, its resolved path and
    ``--version`` text, and the flag variables."""
    command = _compiler()
    resolved = shutil.which(command[0]) or command[0]
    flags = [f"{name}={os.environ.get(name, '')}" for name in FLAG_VARIABLES]
    return [" ".join(command), os.path.realpath(resolved), _compiler_version(command), *flags, _cpu_identity()]


@functools.cache
def _cpu_identity() -> str:
    """The CPU -march=native compiles for (its model and feature flags), so a cached library built on
    another machine sharing the cache folder is never loaded here."""
    import platform

    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
        lines = [ln for ln in text.splitlines() if ln.split(":")[0].strip() in ("model name", "flags", "Features")]
        return "\n".join(dict.fromkeys(lines))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified_library(entry: Path) -> Path | None:
    """The entry's library when its manifest names it and its content hash matches, else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        library = entry / manifest["library"]
        if Path(manifest["library"]).name != manifest["library"] or not library.is_file():
            return None
        return library if _sha256(library) == manifest["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _discard(entry: Path) -> None:
    """Remove a stale or tampered cache entry (renamed aside first, so no one loads it midway)."""
    if not entry.exists() and not entry.is_symlink():
        return
    aside = entry.with_name(f".{entry.name}.stale.{os.getpid()}")
    try:
        os.replace(entry, aside)
    except OSError:
        return
    if aside.is_symlink() or not aside.is_dir():
        aside.unlink(missing_ok=True)
    else:
        shutil.rmtree(aside, ignore_errors=True)


def _compile(work: Path, module_name: str, header: str, source: str, prefix: str, cdef: str, wrapper: str) -> Path:
    """Build the shared library in ``work`` with one compiler call (cffi's ABI mode: no Python extension to
    compile around it, several times cheaper); record the library's content hash in the manifest."""
    (work / f"{prefix}.h").write_text(header)
    (work / f"{prefix}.c").write_text(source)
    (work / "tinycc_host_batch.c").write_text(wrapper)
    library = work / f"{module_name}.so"
    flags = [word for name in FLAG_VARIABLES for word in shlex.split(os.environ.get(name, ""))]
    command = [*_compiler(), *flags, *HOST_CFLAGS, "-fPIC", "-shared", f"-I{work}", "-o", str(library),
               str(work / f"{prefix}.c"), str(work / "tinycc_host_batch.c"), "-lm"]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"host build of {prefix}.c failed: {exc}") from None
    if run.returncode != 0:
        raise ToolchainError(f"host build of {prefix}.c failed: {' '.join((run.stderr or run.stdout).split())[:300]}")
    (work / MANIFEST).write_text(json.dumps({"library": library.name, "sha256": _sha256(library), "cdef": cdef}))
    return library


def _import(module_name: str, library: Path, cdef: str):
    """The library opened through cffi, as a module with ``ffi`` and ``lib`` (kept in sys.modules)."""
    import types

    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef)
    module = types.ModuleType(module_name)
    module.ffi, module.lib = ffi, ffi.dlopen(str(library))
    sys.modules[module_name] = module
    return module


def load_host_build(out_dir: Path, output) -> HostPredictor:
    header = (out_dir / f"{output.prefix}.h").read_text()
    source = (out_dir / f"{output.prefix}.c").read_text()
    module = build_host_module(header, source, output.prefix, output.input_ctype, output.score_ctype)
    up = output.prefix.upper()
    found = re.search(rf"#define {up}_SCORE_SCALE (-?\d+)", header)
    n_proba = re.search(rf"#define {up}_N_PROBA (\d+)", header)
    feed_hop = re.search(rf"#define {up}_FEED_HOP (\d+)L", header)
    predictor = HostPredictor(module, output.prefix, output.input_ctype, output.score_ctype, output.input_dim,
                              output.n_scores, output.input_scale, task=output.task,
                              score_scale=int(found.group(1)) if found else None,
                              n_proba=int(n_proba.group(1)) if n_proba else 0, input_bound=output.input_bound,
                              input_quantisation=output.input_quantisation,
                              feed_hop=int(feed_hop.group(1)) if feed_hop else None)
    if hasattr(module.lib, f"{output.prefix}_reset"):  # the same build loaded again shares one library's state:
        predictor.reset()  # each loaded predictor's stream starts from the first call's state
    return predictor
