"""The host backend, differentially: compiled C against the float64 numpy reference of the model,
plus warnings-clean C, prefixed symbols and deterministic output."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tinycc_ml.models.protonn import ProtoNNModel

GCC = shutil.which("gcc")
NM = shutil.which("nm")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@st.composite
def protonn_cases(draw):
    """A random ProtoNN as training would leave it: prototypes among the projected data, and
    gamma = c / median distance (the paper's initialisation), c drawn."""
    seed = draw(st.integers(0, 2**32 - 1))
    D, d, m, L = draw(st.integers(1, 40)), draw(st.integers(1, 10)), draw(st.integers(1, 12)), draw(st.integers(1, 6))
    density = draw(st.sampled_from([1.0, 0.7, 0.35, 0.1]))  # below 0.5 W is stored CSC
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, D)) * (rng.random((d, D)) < density)
    std = rng.uniform(0.1, 10.0, size=D) if draw(st.booleans()) else None
    mean = rng.normal(size=D) * 3 * (std if std is not None else 1.0) if draw(st.booleans()) else None
    Xn = rng.normal(size=(draw(st.integers(1, 30)), D))  # in normalised units
    P = Xn @ W.T
    B = P[rng.integers(0, len(Xn), size=m)].T + rng.normal(size=(d, m)) * draw(st.sampled_from([0.0, 0.3, 1.0]))
    distances = np.sqrt(np.sum((P[:, :, None] - B[None]) ** 2, axis=1))
    median = float(np.median(distances))
    gamma = draw(st.floats(0.3, 3.0)) / (median if median > 1e-3 else 1.0)
    Z = rng.normal(size=(L, m))
    X = Xn * (std if std is not None else 1.0) + (mean if mean is not None else 0.0)
    return ProtoNNModel(W, B, Z, gamma, mean, std), X


def tolerance(model: ProtoNNModel, X: np.ndarray) -> np.ndarray:
    """Per-row bound on the float32 error of the scores, from a float64 error model written
    here: each kernel k_j = exp(-e_j) is off by a relative 1e-5 plus a part growing with e_j
    (float32 distances are accurate relative to their size, and e_j magnifies that) plus e_j's own
    error from the differences W x - B (a few ulps of their terms), summed with weights |Z|; plus a
    floor for kernels that underflow float32."""
    Xn = np.asarray(X, dtype=np.float64)
    if model.mean is not None:
        Xn = Xn - model.mean
    if model.std is not None:
        Xn = Xn / model.std
    d = (Xn @ model.W.T)[:, :, None] - model.B[None]
    e = model.gamma**2 * np.sum(d**2, axis=1)
    # float32's error in each difference: a few ulps of what it is computed from (the projection's terms and
    # B), which a cancellation in d can make large relative to d itself
    d_error = 2.0**-21 * ((np.abs(Xn) @ np.abs(model.W.T))[:, :, None] + np.abs(model.B[None]))
    e_error = model.gamma**2 * np.sum(2 * np.abs(d) * d_error + d_error**2, axis=1)
    k = np.exp(-e)
    return (k * (1e-5 + 2e-6 * e + 2 * e_error)) @ np.abs(model.Z).T + 1e-36 * np.abs(model.Z).sum(axis=1)


def check_against_reference(model: ProtoNNModel, X: np.ndarray, predictor) -> None:
    want = model.scores(X)
    got = predictor.scores(X).astype(np.float64)
    assert got.shape == want.shape
    np.testing.assert_array_less(np.abs(got - want), tolerance(model, X))
    pred = predictor.predict(X)
    ordered = np.sort(want, axis=1)
    margin = ordered[:, -1] - ordered[:, -2] if want.shape[1] > 1 else np.full(len(X), np.inf)
    clear = margin > 2 * tolerance(model, X).max(axis=1)
    np.testing.assert_array_equal(pred[clear], np.argmax(want, axis=1)[clear])
    # the C prediction is the argmax of the C scores wherever they have one maximum; where they tie (every kernel
    # underflowed float32: scores +-0), the prediction's stable form (it compares the exponents) still ranks them
    top = np.sort(got, axis=1)
    single = top[:, -1] > top[:, -2] if got.shape[1] > 1 else np.ones(len(got), dtype=bool)
    np.testing.assert_array_equal(pred[single], np.argmax(got, axis=1)[single])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protonn_cases())
def test_host_c_matches_the_float_model(case):
    model, X = case
    result = tinycc_ml.compile(model, target="host", name="hyp")
    check_against_reference(model, X, result.load())


def test_sparse_and_dense_weights_take_their_paths():
    rng = np.random.default_rng(3)
    for density, stored in ((0.2, "sparse"), (1.0, "dense")):
        W = rng.normal(size=(6, 30)) * (rng.random((6, 30)) < density)
        model = ProtoNNModel(W, rng.normal(size=(6, 9)), rng.normal(size=(4, 9)), 0.4, rng.normal(size=30),
                             rng.uniform(0.5, 2, size=30))
        result = tinycc_ml.compile(model, name="m")
        source = result.files["m.c"]
        assert ("m_W_folded_colptr" in source) == (stored == "sparse")
        check_against_reference(model, rng.normal(size=(50, 30)), result.load())


def fixed_model(seed=0, sparse=False) -> ProtoNNModel:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(5, 12))
    if sparse:
        W[rng.random(W.shape) < 0.8] = 0.0
    return ProtoNNModel(W, rng.normal(size=(5, 7)), rng.normal(size=(3, 7)), 0.5, rng.normal(size=12),
                        rng.uniform(0.5, 2, size=12))


@pytest.mark.parametrize("sparse", [False, True])
def test_generated_c_compiles_cleanly_and_exports_only_prefixed_symbols(tmp_path, sparse):
    assert GCC and NM, "gcc and nm are needed (binutils)"
    result = tinycc_ml.compile(fixed_model(sparse=sparse), out_dir=tmp_path / "out", name="kws_v2")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["kws_v2.c", "kws_v2.h"]
    obj = tmp_path / "kws_v2.o"
    subprocess.run([GCC, *STRICT, "-O2", "-c", str(tmp_path / "out" / "kws_v2.c"), "-o", str(obj)],
                   check=True, capture_output=True, text=True)
    defined = subprocess.run([NM, "--defined-only", str(obj)], check=True, capture_output=True,
                             text=True).stdout.split("\n")
    symbols = [line.split()[-1] for line in defined if line.strip()]
    external = [line.split()[-1] for line in defined if line.strip() and line.split()[-2].isupper()]
    # ProtoNN defines class probabilities (its normalised scores): kws_v2_proba; host builds the batch entry point
    # (and its prefetch hint)
    assert sorted(external) == ["kws_v2_label", "kws_v2_predict", "kws_v2_predict_batch", "kws_v2_predict_batch_ahead",
                                "kws_v2_predict_label", "kws_v2_proba", "kws_v2_scores"]
    # static data and functions carry the prefix too (readable map files, no clashes in LTO)
    named = [s for s in symbols if not s.startswith(".")]
    assert all(s.startswith("kws_v2_") for s in named), named
    # the header stands alone and works from C++ as well as C
    (tmp_path / "use.c").write_text('#include "kws_v2.h"\nint main(void) { float x[KWS_V2_INPUT_DIM] = {0};\n'
                                    '  float s[KWS_V2_N_SCORES];\n  kws_v2_scores(x, s);\n'
                                    '  return kws_v2_predict(x) < 0; }\n')
    subprocess.run([GCC, *STRICT, "-I", str(tmp_path / "out"), str(tmp_path / "use.c"), str(result.paths[1]),
                    "-lm", "-o", str(tmp_path / "use")], check=True, capture_output=True, text=True)
    subprocess.run([str(tmp_path / "use")], check=True)


def test_two_models_link_into_one_program(tmp_path):
    a = tinycc_ml.compile(fixed_model(1), out_dir=tmp_path, name="model_a")
    b = tinycc_ml.compile(fixed_model(2, sparse=True), out_dir=tmp_path, name="model_b")
    assert a.out_dir == b.out_dir == tmp_path
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "model_a.h"\n#include "model_b.h"\n'
        "int main(void) { float x[12] = {0}; printf(\"%d %d\\n\", model_a_predict(x), model_b_predict(x));"
        " return 0; }\n")
    subprocess.run([GCC, *STRICT, str(tmp_path / "main.c"), str(tmp_path / "model_a.c"), str(tmp_path / "model_b.c"),
                    "-lm", "-o", str(tmp_path / "main")], check=True, capture_output=True, text=True)
    out = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True).stdout.split()
    zero = np.zeros((1, 12))
    assert [int(v) for v in out] == [int(fixed_model(1).predict(zero)[0]), int(fixed_model(2, True).predict(zero)[0])]


def test_identical_input_gives_byte_identical_files(tmp_path):
    first = tinycc_ml.compile(fixed_model(sparse=True), out_dir=tmp_path / "one", name="det")
    path = fixed_model(sparse=True).save(tmp_path / "m.npz")
    second = tinycc_ml.compile(path, out_dir=tmp_path / "two", name="det")
    assert first.files == second.files
    for name in first.files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    different = tinycc_ml.compile(fixed_model(seed=1, sparse=True), name="det")
    assert different.files["det.c"] != first.files["det.c"]


def test_compiled_files_are_self_describing(tmp_path):
    model = fixed_model()
    result = tinycc_ml.compile(model, out_dir=tmp_path, name="desc")
    header = (tmp_path / "desc.h").read_text()
    assert "#define DESC_INPUT_DIM 12" in header
    assert "#define DESC_N_SCORES 3" in header
    assert "int desc_predict(const float *x);" in header
    assert "malloc" not in result.files["desc.c"]
