"""Random differential testing (issue 10): random models of every family (tinycc_ml.testing: ProtoNN,
Bonsai, nearest prototype k = 1, kNN k > 1, linear), random sparsity, extreme but legal weights and inputs, at
every precision, compiled and run against the references.

- integer builds: bit-exact with the fixed-point interpreter (predictions and scores);
- float builds: the prediction of the model (float64 numpy) on every row that float32 rounding
  cannot tip (a row whose top-two gap, branch value or k-th-neighbour gap is within 1e-3 of a tie
  is left out; ProtoNN rows whose scores all underflow in float32 are kept and must agree);
- most cases run on the host; a few on simavr and QEMU/unicorn; one host build runs under
  AddressSanitizer and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.testing import FAMILIES, clear_rows, random_inputs, random_model

# 25 random models per property here (scripts/fuzz.py --target oracle runs the same comparison for as long as given)
CASES = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@CASES
@given(st.sampled_from(FAMILIES), st.integers(0, 2**32 - 1), st.sampled_from([1.0, 1e-3, 1e4]))
def test_float_host_builds_predict_what_the_model_predicts(family, seed, extreme):
    require_target("host")
    rng = np.random.default_rng(seed)
    model = random_model(family, rng, extreme)
    X = random_inputs(model, rng, 64, extreme)
    got = tinycc_ml.compile(model, name="diff").load().predict(X)
    keep = clear_rows(model, X)
    assert keep.mean() > 0.5
    np.testing.assert_array_equal(got[keep], model.predict(X)[keep])


@CASES
@given(st.sampled_from(FAMILIES), st.sampled_from(["int16", "int8"]), st.integers(0, 2**32 - 1),
       st.sampled_from([1.0, 1e-3, 1e4]))
def test_integer_host_builds_are_bit_exact(family, precision, seed, extreme):
    require_target("host")
    rng = np.random.default_rng(seed)
    model = random_model(family, rng, extreme)
    X = random_inputs(model, rng, 64, extreme)
    result = tinycc_ml.compile(model, name="diffq", precision=precision, calibration=X)
    Xq = quantise(X, result.output.input_scale, 16).astype(np.int16)
    scores, predictions = result.load().run_raw(Xq)
    want = run_fixed(result.graph, Xq)
    np.testing.assert_array_equal(predictions, want["prediction"])
    np.testing.assert_array_equal(scores, want["scores"])


def test_protonn_underflow_rows_predict_the_true_class():
    """Every similarity underflows in float32 on most rows here (exponents near -1e3), yet the C
    must return the model's class, not class 0."""
    require_target("host")
    rng = np.random.default_rng(3)
    model = ProtoNNModel(rng.normal(size=(3, 4)), rng.normal(size=(3, 6)), rng.normal(size=(4, 6)), 10.0)
    X = rng.normal(size=(300, 4)) * 4
    underflow = np.all(np.exp(model.exponents(X)).astype(np.float32) == 0, axis=1)
    assert underflow.mean() > 0.5
    want = model.predict(X)
    assert len(set(want[underflow])) > 1  # not all class 0 by luck
    np.testing.assert_array_equal(tinycc_ml.compile(model, name="uf").load().predict(X), want)


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
@pytest.mark.parametrize("family", FAMILIES)
def test_random_models_on_the_simulated_targets(target, family, tmp_path):
    require_target(target)
    rng = np.random.default_rng(FAMILIES.index(family) + (11 if target == "avr" else 31))
    model = random_model(family, rng, 1.0)
    X = random_inputs(model, rng, 24, 1.0)
    for precision in ("float", "int16"):
        out = tmp_path / precision
        result = tinycc_ml.compile(model, target=target, precision=precision, name="rnd", out_dir=out,
                                   calibration=None if precision == "float" else X)
        o = result.output
        rows = X.astype(np.float32) if precision == "float" else quantise(X, o.input_scale, 16).astype(np.int16)
        run = run_on_target(target, [str(out / "rnd.c")], str(out / "rnd.h"), "rnd", rows, o.n_scores,
                            o.input_ctype, o.score_ctype)
        if precision == "float":
            keep = clear_rows(model, X)
            np.testing.assert_array_equal(run.predictions[keep], model.predict(X)[keep])
        else:
            want = run_fixed(result.graph, rows)
            np.testing.assert_array_equal(run.predictions, want["prediction"])
            np.testing.assert_array_equal(run.scores, want["scores"])


SANITIZER_MAIN = """#include <stdio.h>
#include "{p}.h"
int main(void)
{{
    static const {t} rows[][{d}] = {{ {rows} }};
    {s} scores[{n}];
    for (unsigned r = 0; r < sizeof rows / sizeof rows[0]; ++r) {{
        {p}_scores(rows[r], scores);
        printf("%d\\n", {p}_predict(rows[r]));
    }}
    return 0;
}}
"""


@pytest.mark.parametrize("family, precision", [("protonn", "float"), ("bonsai", "int16"), ("knn", "int8"),
                                               ("nearest", "float"), ("trees", "int16")])
def test_host_c_is_clean_under_asan_and_ubsan(family, precision, tmp_path):
    require_target("host")
    gcc = shutil.which("gcc")
    rng = np.random.default_rng(FAMILIES.index(family) + 5)
    model = random_model(family, rng, 1.0)
    X = random_inputs(model, rng, 40, 1e3)
    result = tinycc_ml.compile(model, precision=precision, name="san", out_dir=tmp_path,
                               calibration=None if precision == "float" else X)
    o = result.output
    if precision == "float":
        rows, want = X.astype(np.float32), None
    else:
        rows = quantise(X, o.input_scale, 16).astype(np.int16)
        want = run_fixed(result.graph, rows)["prediction"]
    fmt = (lambda v: f"{float(v)!r}f") if precision == "float" else (lambda v: str(int(v)))
    body = ", ".join("{" + ", ".join(fmt(v) for v in row) + "}" for row in rows)
    (tmp_path / "main.c").write_text(SANITIZER_MAIN.format(p="san", t=o.input_ctype, d=o.input_dim, rows=body,
                                                           s=o.score_ctype, n=o.n_scores))
    exe = tmp_path / "main"
    subprocess.run([gcc, "-std=c99", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-Wall", "-Wextra", "-Werror", "-I", str(tmp_path), str(tmp_path / "main.c"),
                    str(tmp_path / "san.c"), "-lm", "-o", str(exe)], check=True, capture_output=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0"})
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr
    got = np.array([int(v) for v in run.stdout.split()])
    if want is not None:
        np.testing.assert_array_equal(got, want)
    else:
        keep = clear_rows(model, X)
        np.testing.assert_array_equal(got[keep], model.predict(X)[keep])


@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0", "cortex-m4"])
def test_a_left_shift_into_the_stored_value_saturates_as_the_interpreter(target, tmp_path):
    """Found by the differential runs: an exp_lut whose output scale (2^32) is finer than its tables' product
    (2^28) shifted 2^28 left by 4 in int32 C, which wrapped to 0 where the interpreter saturates to 32767."""
    from tinycc_ml.testing import check_model

    require_target(target)
    rng = np.random.default_rng(9)
    model = random_model("protonn", rng, 1e4)
    X = random_inputs(model, rng, 64, 1e4)
    result = tinycc_ml.compile(model, name="shl", precision="int16", calibration=X)
    assert "shl_shl4(" in result.files["shl.c"]  # the saturating left shift is the one in use
    check_model(target, model, X, "int16", tmp_path)
