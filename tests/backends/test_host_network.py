"""The host's own kernels for TFLite's int8 layers (tinycc_ml/host/network.py) on each of their code paths: AVX-VNNI,
AVX2 without it, plain C (compiled with the host's flags less those extensions). Every output byte equals
tflite-micro's interpreter (MLPerf Tiny's KWS DS-CNN) and the interpreter's int8 (random one-op graphs, the
interpreter itself equal to tflite-micro: tests/importers/test_tflite.py); the vectorised requantisation equals
TFLite's MultiplyByQuantizedMultiplier (tflite_arith, the same tests) on extreme sums and every shift."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.backends.test_network_c import CASES, equal_bytes, one_op_graph
from tests.conftest import require_target
from tests.tflite_builder import tflm_raw_outputs
from tinycc_ml.host import build
from tinycc_ml.host.network import requant_row
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier
from tinycc_ml.models.network import NetworkModel

REPO = Path(__file__).resolve().parents[2]
KWS = REPO / "data" / "mlperf-tiny" / "kws_ref_model.tflite"
# the code paths: the host's flags as they are (AVX-VNNI where the CPU has it), without AVX-VNNI, without AVX2
PATHS = {"native": (), "avx2": ("-mno-avxvnni",), "plain": ("-mno-avx2",)}


@pytest.fixture(scope="module", autouse=True)
def host():
    require_target("host")


def native_macros() -> str:
    return subprocess.run(["gcc", "-march=native", "-mno-avx512f", "-dM", "-E", "-"], input="", capture_output=True,
                          text=True, check=True).stdout


def path_flags(path: str) -> tuple[str, ...]:
    macros = native_macros()
    if path == "avx2" and "__AVX2__" not in macros:
        pytest.skip("this CPU has no AVX2")
    return PATHS[path]


@pytest.fixture(params=sorted(PATHS))
def code_path(request, monkeypatch):
    """The host build's flags for one code path (the build cache's key names the flags)."""
    monkeypatch.setattr(build, "HOST_CFLAGS", (*build.HOST_CFLAGS, *path_flags(request.param)))
    return request.param


def test_kws_equals_tflite_micro_on_every_byte_on_each_code_path(code_path, tmp_path):
    model = tinycc_ml.load_model(KWS)
    rng = np.random.default_rng(7)
    X = rng.integers(-128, 128, size=(20, model.input_dim)).astype(np.int8)
    X[0], X[1], X[2] = -128, 127, 0
    X[3] = np.where(np.arange(model.input_dim) % 2, 127, -128)
    result = tinycc_ml.compile(model, target="host", name="kws", out_dir=tmp_path)
    assert "kws_host_gemm" in result.files["kws.c"] and "kws_host_depthwise" in result.files["kws.c"]
    scores, predictions = result.load().run_raw(X)
    want = tflm_raw_outputs(KWS.read_bytes(), X.reshape(len(X), *model.input_shape)).reshape(len(X), -1)
    np.testing.assert_array_equal(scores, want)
    np.testing.assert_array_equal(predictions, np.argmax(want, axis=1))


@pytest.mark.parametrize("op,seed", [c for c in CASES if c[0] in ("conv2d", "depthwise_conv2d", "fully_connected",
                                                                     "average_pool2d", "network")])
def test_random_layers_equal_the_interpreter_on_each_code_path(op, seed, code_path, tmp_path):
    graph, x_type = one_op_graph(op, seed)
    X = np.random.default_rng(seed).integers(-128, 128, size=(9, *x_type.shape[1:]))
    X[0] = x_type.dtype.zero_point  # real zeros, as outside taps read
    equal_bytes(NetworkModel(graph, "net"), X, tmp_path)


class _Helpers:
    """What the helpers' writers ask of an emitter: a prefix, its symbols and the helpers' texts."""

    prefix = "t"

    def __init__(self):
        self.helpers: dict[str, str] = {}

    def sym(self, name: str) -> str:
        return f"{self.prefix}_{name}"


@pytest.mark.parametrize("path", sorted(PATHS))
def test_vectorised_requantisation_equals_tflite_on_extreme_sums(path, tmp_path):
    em = _Helpers()
    requant = requant_row(em)
    source = "#include <stdint.h>\n" + "".join(em.helpers.values()) + f"""
void run(const int32_t *acc, int n, int count, const int32_t *t, int left, int32_t zo, int32_t lo, int32_t hi,
         int8_t *out, int rows)
{{
    for (int r = 0; r < rows; ++r)
        {requant}(acc + (long)r * n, n, count, t, left, zo, lo, hi, out + (long)r * count);
}}
"""
    (tmp_path / "rq.c").write_text(source)
    library = tmp_path / "rq.so"
    subprocess.run(["gcc", *build.HOST_CFLAGS, *path_flags(path), "-fPIC", "-shared", "-o", str(library),
                    str(tmp_path / "rq.c")], check=True)
    lib = ctypes.CDLL(str(library))
    rng = np.random.default_rng(3)
    count, n = 37, 40  # a partial last vector
    # per channel: multipliers in [2^30, 2^31), shifts from 31 right to 5 left
    shifts = np.arange(-31, 6)
    mult = np.concatenate([[2**30, 2**31 - 1], rng.integers(2**30, 2**31, size=count - 2)])
    table = np.zeros((5, n), np.int64)
    table[0, :count], table[1, :count], table[2, :count] = mult, np.maximum(shifts, 0), np.maximum(-shifts, 0)
    table[3] = (1 << table[2]) - 1
    table[4] = table[3] >> 1
    edges = np.array([-2**31, 2**31 - 1, 0, 1, -1, 2**30, -2**30, 2**30 + 1, -2**30 - 1, 12345, -12345])
    acc = np.concatenate([np.repeat(edges, n).reshape(-1, n),
                          rng.integers(-2**31, 2**31, size=(300, n)),
                          rng.integers(-2**16, 2**16, size=(300, n))]).astype(np.int32)
    rows = len(acc)
    for zo, lo, hi in ((-128, -128, 127), (5, 5, 127), (-3, -100, 90)):
        out = np.zeros((rows, count), np.int8)
        pointer = lambda a, t: a.ctypes.data_as(ctypes.POINTER(t))  # noqa: E731
        for cut in (0, 1):  # every shift, then the right shifts alone (no left shift: the sums as they are)
            shift = np.minimum(shifts, 0) if cut else shifts
            t = table.copy()
            t[1] = np.maximum(t[1] * (1 - cut), 0)
            lib.run(pointer(acc, ctypes.c_int32), n, count, pointer(np.ascontiguousarray(t.astype(np.int32)),
                                                                   ctypes.c_int32),
                    int(np.any(t[1] > 0)), zo, lo, hi, pointer(out, ctypes.c_int8), rows)
            want = np.clip(multiply_by_quantized_multiplier(acc[:, :count].astype(np.int64), mult, shift) + zo, lo, hi)
            np.testing.assert_array_equal(out, want)
