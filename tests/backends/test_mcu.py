"""The microcontroller backends (AVR under simavr, Cortex-M0 under QEMU), one test module for
both: bit-exact against the fixed-point interpreter (predictions and scores), streaming == batch,
warnings-clean C, prefixed symbols, size limits, missing tools."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tests.backends.graph_models import NearestMean
from tests.conftest import require_target
from tinycc_ml.arm.chips import MPS2_AN386, NRF51822
from tinycc_ml.avr.chips import ATMEGA328P
from tinycc_ml.codegen.mcu import stream_plan
from tinycc_ml.errors import CompileError, ToolchainError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.bonsai import BonsaiModel
from tinycc_ml.models.protonn import ProtoNNModel, init_protonn
from tinycc_ml.runtime.simulate import run_on_target

WARNINGS = ["-Os", "-std=c99", "-Wall", "-Wextra", "-Werror"]


@dataclass(frozen=True)
class Spec:
    target: str
    cc: str
    nm: str
    cflags: tuple
    kernel_used: object  # source -> bool: the hand-written kernels are in use
    stack_limit: int
    soft_float: str  # a soft-float routine that integer-only firmware must not pull in
    too_big: tuple  # (D, d) of a ProtoNN that cannot fit
    chip: str
    tool_prefixes: tuple
    package: str


SPECS = {
    "avr": Spec("avr", "avr-gcc", "avr-nm", (f"-mmcu={ATMEGA328P.mcu}", *WARNINGS),
                lambda s: "pn_mac" in s and any(k in s for k in ("pn_sqd", "_sq[", "_t2_off[", "_i8_off[")), 256,
                "__addsf3",
                (1024, 20), "ATmega328P", ("avr-", "simavr"), "gcc-avr"),
    "cortex-m0": Spec("cortex-m0", "arm-none-eabi-gcc", "arm-none-eabi-nm",
                      (f"-mcpu={NRF51822.mcu}", "-mthumb", *WARNINGS),
                      lambda s: "pn_mac" in s and any(k in s for k in ("_blk", "_t2_m0[", "_i8_m0[")), 512,
                      "__aeabi_fadd", (2048, 70),
                      "nRF51822",
                      ("arm-none", "qemu"), "gcc-arm-none-eabi"),
    # hard float: float code is FPU instructions, no library routine is ever called
    "cortex-m4": Spec("cortex-m4", "arm-none-eabi-gcc", "arm-none-eabi-nm",
                      (*MPS2_AN386.cflags[:4], *WARNINGS),
                      lambda s: "pn_mac" in s and "smlad" in s and "_sq_m4[" in s, 512,
                      "__aeabi_fadd", (2048, 1100),
                      "MPS2 AN386",
                      ("arm-none", "qemu"), "gcc-arm-none-eabi"),
}


@pytest.fixture(params=sorted(SPECS))
def spec(request) -> Spec:
    return SPECS[request.param]
N_ROWS = 200

STREAM_H = """#include <stdint.h>
int stream_predict(const int16_t *x);
void stream_scores(const int16_t *x, {s_t} *scores);
"""
STREAM_C = """#include "stream.h"
#include "{p}.h"
int stream_predict(const int16_t *x)
{{
    {p}_begin();
    for (int i = {n} - 1; i >= 0; --i) {p}_feed(i, x[i]); /* any order */
    return {p}_end();
}}
void stream_scores(const int16_t *x, {s_t} *scores)
{{
    {p}_begin();
    for (int i = 0; i < {n}; ++i) {p}_feed(i, x[i]);
    {p}_end_scores(scores);
}}
"""


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X, y


def dense_model(digits):
    X, y = digits
    return init_protonn(X[:600], y[:600], 10, 2)


def sparse_model(digits):
    X, _ = digits
    rng = np.random.default_rng(1)
    W = rng.normal(size=(8, 64)) * (rng.random((8, 64)) < 0.2) / 4
    P = X[rng.choice(len(X), 12)] @ W.T
    return ProtoNNModel(W, P.T, rng.normal(size=(10, 12)), 0.05)


def build(model, precision, X, tmp_path, name="pn", target="avr"):
    out = tmp_path / f"{name}_{precision}"
    result = tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:400], out_dir=out,
                               name=name)
    return result, out


def check_exact(result, out, X, target="avr", stream=False):
    o = result.output
    Xq = quantise(X, o.input_scale, 16).astype(np.int16)
    want = run_fixed(result.graph, Xq)
    sources, header, prefix = [str(out / f"{o.prefix}.c")], str(out / f"{o.prefix}.h"), o.prefix
    if stream:
        (out / "stream.h").write_text(STREAM_H.format(s_t=o.score_ctype))
        (out / "stream.c").write_text(STREAM_C.format(p=o.prefix, n=o.input_dim, s_t=o.score_ctype))
        sources, header, prefix = sources + [str(out / "stream.c")], str(out / "stream.h"), "stream"
    run = run_on_target(target, sources, header, prefix, Xq, o.n_scores, o.input_ctype, o.score_ctype,
                        extra_cflags=("-Werror",))
    np.testing.assert_array_equal(run.predictions, want["prediction"])
    np.testing.assert_array_equal(run.scores, want["scores"])
    return run


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_dense_protonn_bit_exact_and_streaming(spec, digits, tmp_path, precision):
    require_target(spec.target)
    X, _ = digits
    result, out = build(dense_model(digits), precision, X, tmp_path, target=spec.target)
    assert spec.kernel_used(result.files["pn.c"])  # the hand-written kernels are used
    run = check_exact(result, out, target=spec.target, X=X[600:600 + N_ROWS])
    assert run.stack_bytes < spec.stack_limit
    check_exact(result, out, target=spec.target, X=X[600:600 + N_ROWS], stream=True)


def test_sparse_protonn_bit_exact_and_streaming(spec, digits, tmp_path):
    require_target(spec.target)
    X, _ = digits
    result, out = build(sparse_model(digits), "int16", X, tmp_path, name="sp", target=spec.target)
    assert "_colptr" in result.files["sp.c"]
    check_exact(result, out, target=spec.target, X=X[1000:1000 + N_ROWS])
    check_exact(result, out, target=spec.target, X=X[1000:1000 + N_ROWS], stream=True)


@pytest.mark.parametrize("shape", [(37, 7, 13, 3), (9, 1, 1, 2)])
def test_odd_shapes_bit_exact(spec, tmp_path, shape):
    # odd column counts, row counts that are not whole kernel blocks, single rows and prototypes
    require_target(spec.target)
    D, d, m, L = shape
    rng = np.random.default_rng(D)
    X = rng.normal(size=(300, D)) * rng.uniform(0.5, 3, size=D)
    W = rng.normal(size=(d, D)) / np.sqrt(D)
    model = ProtoNNModel(W, (X[rng.choice(300, m)] @ W.T).T, rng.normal(size=(L, m)), 0.7 / np.sqrt(d),
                         rng.normal(size=D) * 0.1, rng.uniform(0.5, 2, size=D))
    for precision in ("int16", "int8") if D > 10 else ("int16",):
        result, out = build(model, precision, X, tmp_path, name="odd", target=spec.target)
        check_exact(result, out, target=spec.target, X=X[100:140])
    check_exact(result, out, target=spec.target, X=X[100:140], stream=True)


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_sqdist_first_graph_bit_exact_and_streaming(spec, digits, tmp_path, precision):
    require_target(spec.target)
    X, y = digits
    model = NearestMean(np.stack([X[:500][y[:500] == c].mean(0) for c in range(10)], axis=1))
    result, out = build(model, precision, X, tmp_path, name="nm", target=spec.target)
    if precision == "int8":  # the 8-bit prototype kernels; streaming reads their flash image back
        assert {"avr": "_i8_off[", "cortex-m0": "_i8_m0[", "cortex-m4": "_i8_m4["}[spec.target] in result.files["nm.c"]
    assert "nm_begin" in result.files["nm.h"]
    check_exact(result, out, target=spec.target, X=X[1000:1000 + N_ROWS])
    check_exact(result, out, target=spec.target, X=X[1000:1000 + N_ROWS], stream=True)


def test_bonsai_runs_through_the_portable_path(spec, digits, tmp_path):
    # other families' ops (tanh tables, per-node mat-vecs, ...) take the shared C path
    require_target(spec.target)
    X, _ = digits
    rng = np.random.default_rng(5)
    d, depth, L = 6, 2, 10
    n_nodes, n_internal = 2 ** (depth + 1) - 1, 2**depth - 1
    model = BonsaiModel(rng.normal(size=(d, 64)) / 8, rng.normal(size=(n_nodes * L, d)),
                        rng.normal(size=(n_nodes * L, d)), rng.normal(size=(n_internal, d)), 1.0, depth)
    result, out = build(model, "int16", X, tmp_path, name="bon", target=spec.target)
    check_exact(result, out, target=spec.target, X=X[1000:1060], stream=True)


def compile_object(spec, out, prefix, *defines):
    obj = out / f"{prefix}.o"
    subprocess.run([spec.cc, *spec.cflags, *defines, "-c", str(out / f"{prefix}.c"), "-o", str(obj)], check=True)
    return obj


@pytest.mark.parametrize("precision", ["int16", "float"])
def test_warning_free_and_prefixed(spec, digits, tmp_path, precision):
    require_target(spec.target)
    X, _ = digits
    result, out = build(dense_model(digits), precision, X, tmp_path, name="abc", target=spec.target)
    defines = ["-DABC_WITH_FLOAT"] if precision != "float" else []
    obj = compile_object(spec, out, "abc", *defines)
    syms = subprocess.run([spec.nm, "-g", "--defined-only", str(obj)], capture_output=True, text=True,
                          check=True).stdout.split()[2::3]
    assert syms and all(s.startswith("abc_") for s in syms), syms
    # integer builds always stream (the input clamp folds into feed); this float graph normalises first
    streaming = {"abc_begin", "abc_feed", "abc_end", "abc_end_scores", "abc_predict_float", "abc_quantise",
                 "abc_quantise_feature"}
    # the object exports the API alone: asm kernels are local symbols
    # ProtoNN defines class probabilities: <prefix>_proba, float code linked only when called
    api = {"abc_predict", "abc_predict_label", "abc_label", "abc_scores", "abc_proba"}
    assert set(syms) == api | (streaming if precision != "float" else set())
    if precision != "float":
        local = subprocess.run([spec.nm, "--defined-only", str(obj)], capture_output=True, text=True,
                               check=True).stdout.split()
        kernels = [s for kind, s in zip(local[1::3], local[2::3]) if s.startswith("abc_mac")]
        assert kernels and all(kind == "t" for kind, s in zip(local[1::3], local[2::3]) if s in kernels)
        # integer-only firmware: no float code unless asked for (abc_proba, in a section of its own, is
        # linked only when called)
        plain = compile_object(spec, out, "abc", "-ffunction-sections")
        relocs = subprocess.run([spec.nm.replace("nm", "objdump"), "-r", str(plain)], capture_output=True,
                                text=True, check=True).stdout
        outside = "\n".join(part for part in relocs.split("RELOCATION RECORDS FOR ")[1:]
                             if not part.split("]", 1)[0].endswith(".abc_proba"))
        assert outside and spec.soft_float not in outside and "__mulsf3" not in outside
        assert "abc_predict_float" not in relocs


def test_too_big_model_is_refused_with_sizes(spec, tmp_path):
    rng = np.random.default_rng(0)
    D, d = spec.too_big
    X = rng.normal(size=(64, D))
    model = ProtoNNModel(rng.normal(size=(d, D)), rng.normal(size=(d, 30)), rng.normal(size=(5, 30)), 0.1)
    with pytest.raises(CompileError, match=rf"does not fit the {spec.chip}.*\d+ bytes"):
        tinycc_ml.compile(model, target=spec.target, precision="int16", calibration=X, name="big")


def test_streaming_refused_for_other_graphs():
    g = Graph("g")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((4,), F32), name="x")
    c = g.add("const", attrs={"value": np.ones(4, np.float32)}, name="c")
    s = g.add("add", [x, c], name="s")
    g.set_output("scores", s)
    g.set_output("prediction", g.add("argmax", [s], name="p"))
    with pytest.raises(CompileError, match="streaming needs"):
        stream_plan(g)


def test_missing_toolchain(spec, digits, monkeypatch, tmp_path):
    X, _ = digits
    model = dense_model(digits)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name.startswith(spec.tool_prefixes)
                        else real_which(name, *a, **k))
    # compiling still works: sizes are estimated
    result, out = build(model, "int16", X, tmp_path, target=spec.target)
    assert result.report["fit"]["how"].startswith("estimated")
    with pytest.raises(ToolchainError, match=f"apt-get install .*{spec.package}"):
        run_on_target(spec.target, [str(out / "pn.c")], str(out / "pn.h"), "pn",
                      np.zeros((1, 64), np.int16), 10, "int16_t", "int32_t")
    # the host path keeps working
    assert tinycc_ml.compile(model, target="host", name="h").files
    assert os.path.exists(out / "pn.c")
