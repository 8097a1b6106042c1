"""Host builds: compile emitted C with the system compiler through cffi, cache the result by
content hash, and wrap it in a predictor working on numpy arrays."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.errors import DataError, ToolchainError

HOST_CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror")
NUMPY_OF_CTYPE = {"float": np.float32, "int32_t": np.int32, "int16_t": np.int16, "int8_t": np.int8}


def cache_dir() -> Path:
    root = os.environ.get("TINYCC_ML_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tinycc-ml")
    return Path(root) / "host"


class HostPredictor:
    """A compiled model: ``predict(X)`` and ``scores(X)`` over the rows of X.

    For integer builds, float rows are quantised to the input's fixed-point scale (round to
    nearest, saturating); ``scores_raw``/``predict_raw`` take the integer rows as they are.
    """

    def __init__(self, module, prefix: str, input_ctype: str, score_ctype: str, input_dim: int, n_scores: int,
                 input_scale=None):
        self._lib, self._ffi = module.lib, module.ffi
        self.prefix, self.input_ctype, self.score_ctype = prefix, input_ctype, score_ctype
        self.input_dim, self.n_scores, self.input_scale = input_dim, n_scores, input_scale

    def quantise(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise DataError(f"input has shape {X.shape}, expected (n, {self.input_dim})")
        dtype = NUMPY_OF_CTYPE[self.input_ctype]
        if self.input_ctype == "float":
            return np.ascontiguousarray(X, dtype=np.float32)
        info = np.iinfo(dtype)
        q = np.floor(X * 2.0 ** np.asarray(self.input_scale if self.input_scale is not None else 0) + 0.5)
        return np.ascontiguousarray(np.clip(q, info.min, info.max).astype(dtype))

    def _run(self, Xq: np.ndarray, want_scores: bool = True, want_predictions: bool = True):
        n = len(Xq)
        scores = np.zeros((n, self.n_scores), dtype=NUMPY_OF_CTYPE[self.score_ctype])
        preds = np.zeros(n, dtype=np.int32)
        ffi = self._ffi
        self._lib.tinycc_batch(
            ffi.from_buffer(f"{self.input_ctype}[]", Xq), n,
            ffi.from_buffer(f"{self.score_ctype}[]", scores, require_writable=True) if want_scores else ffi.NULL,
            ffi.from_buffer("int[]", preds, require_writable=True) if want_predictions else ffi.NULL)
        return scores, preds

    def scores(self, X) -> np.ndarray:
        return self._run(self.quantise(X), want_predictions=False)[0]

    def predict(self, X) -> np.ndarray:
        return self._run(self.quantise(X), want_scores=False)[1].astype(np.int64)

    def run_raw(self, Xq) -> tuple[np.ndarray, np.ndarray]:
        """(scores, predictions) for rows already in the input C type."""
        Xq = np.ascontiguousarray(Xq, dtype=NUMPY_OF_CTYPE[self.input_ctype])
        if Xq.ndim == 1:
            Xq = Xq[None, :]
        return self._run(Xq)


def build_host_module(header: str, source: str, prefix: str, input_ctype: str, score_ctype: str):
    """Compile (or fetch from the cache) a cffi module for one emitted model."""
    import cffi

    cdef = f"""
        int {prefix}_predict(const {input_ctype} *x);
        void {prefix}_scores(const {input_ctype} *x, {score_ctype} *scores);
        void tinycc_batch(const {input_ctype} *x, int n, {score_ctype} *scores, int *predictions);
    """
    wrapper = f"""
        #include "{prefix}.h"
        static void tinycc_batch(const {input_ctype} *x, int n, {score_ctype} *scores, int *predictions)
        {{
            /* either output may be NULL: each entry point is timed and tested on its own */
            for (int i = 0; i < n; ++i) {{
                if (scores)
                    {prefix}_scores(x + (long)i * {prefix.upper()}_INPUT_DIM,
                                    scores + (long)i * {prefix.upper()}_N_SCORES);
                if (predictions)
                    predictions[i] = {prefix}_predict(x + (long)i * {prefix.upper()}_INPUT_DIM);
            }}
        }}
    """
    # everything that goes into the module is in the key, the wrapper included
    key = hashlib.sha256("\0".join([header, source, cdef, wrapper, " ".join(HOST_CFLAGS), cffi.__version__,
                                    sys.version]).encode()).hexdigest()[:20]
    module_name = f"_tinycc_{prefix}_{key}"
    target = cache_dir() / key
    if not target.exists():
        cache_dir().mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache_dir()))
        try:
            (work / f"{prefix}.h").write_text(header)
            (work / f"{prefix}.c").write_text(source)
            ffi = cffi.FFI()
            ffi.cdef(cdef)
            ffi.set_source(module_name, wrapper, sources=[str(work / f"{prefix}.c")], include_dirs=[str(work)],
                           extra_compile_args=list(HOST_CFLAGS))
            try:
                ffi.compile(tmpdir=str(work), verbose=False)
            except Exception as exc:
                raise ToolchainError(f"host build of {prefix}.c failed: {exc}") from None
            try:
                os.replace(work, target)
            except OSError:  # another process built it first
                shutil.rmtree(work, ignore_errors=True)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    so = next(target.glob(f"{module_name}*.so"), None) or next(target.glob(f"{module_name}*.pyd"))
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[module_name] = module
    return module


def load_host_build(out_dir: Path, output) -> HostPredictor:
    header = (out_dir / f"{output.prefix}.h").read_text()
    source = (out_dir / f"{output.prefix}.c").read_text()
    module = build_host_module(header, source, output.prefix, output.input_ctype, output.score_ctype)
    return HostPredictor(module, output.prefix, output.input_ctype, output.score_ctype, output.input_dim,
                         output.n_scores, getattr(output, "input_scale", None))
