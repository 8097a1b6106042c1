"""Random differential testing (issue 10): random models of every family (ProtoNN, Bonsai,
nearest prototype k = 1, kNN k > 1), random sparsity, extreme but legal weights and inputs, at
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
from tinycc_ml.models.bonsai import BonsaiModel, tree_sizes
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.prototypes import PrototypeModel, squared_distances
from tinycc_ml.models.trees import TreeEnsembleModel
from tinycc_ml.runtime.simulate import run_on_target

FAMILIES = ("protonn", "bonsai", "nearest", "knn", "trees")
TIE = 1e-3  # relative distance to a tie below which float32 rounding may decide a row


def random_model(family: str, rng: np.random.Generator, extreme: float):
    """A legal model with random sizes and sparsity, its weights scaled by ``extreme``."""
    D = int(rng.integers(1, 12))
    density = rng.choice([1.0, 0.6, 0.3])
    sparse = lambda shape: rng.normal(size=shape) * (rng.random(shape) < density)  # noqa: E731
    mean = rng.normal(size=D) * extreme if rng.random() < 0.5 else None
    std = rng.uniform(0.2, 5, size=D) * extreme if mean is not None else None
    if family == "protonn":
        d, m, L = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(1, 5))
        gamma = float(rng.choice([0.05, 0.5, 2.0, 20.0]))  # 20: far rows underflow in float32
        return ProtoNNModel(sparse((d, D)), rng.normal(size=(d, m)) * 2, rng.normal(size=(L, m)), gamma, mean, std)
    if family == "bonsai":
        depth, L, d = int(rng.integers(0, 3)), int(rng.choice([1, 3])), int(rng.integers(1, 5))
        n_nodes, n_internal = tree_sizes(depth)
        return BonsaiModel(sparse((d, D)), rng.normal(size=(n_nodes * L, d)), rng.normal(size=(n_nodes * L, d)),
                           rng.normal(size=(n_internal, d)), float(rng.choice([0.3, 1.0, 4.0])), depth,
                           z_bias=rng.normal(size=d), mean=mean, std=std)
    if family == "trees":
        return random_trees(rng, D, extreme)
    m = int(rng.integers(3, 9))
    n_classes = int(rng.integers(2, 4))
    labels = np.concatenate([np.arange(n_classes), rng.integers(0, n_classes, m - n_classes)])
    transform = sparse((int(rng.integers(1, 5)), D)) if rng.random() < 0.5 else None
    points = rng.normal(size=(m, D if transform is None else transform.shape[0])) * 2
    k = 1 if family == "nearest" else int(rng.integers(2, m + 1))
    return PrototypeModel(points, labels, n_classes, k, mean, std, transform)


def random_trees(rng: np.random.Generator, D: int, extreme: float) -> TreeEnsembleModel:
    """1-5 random trees of random shapes: a forest (vector leaves), boosting (scalar leaves, one output
    per tree) or a binary boosting model (one score); thresholds where the inputs are."""
    kind = rng.choice(["forest", "boosting", "binary"])
    L = 1 if kind == "binary" else int(rng.integers(2, 5))
    width = L if kind == "forest" else 1
    feature, threshold, left, right, value, roots, outs = [], [], [], [], [], [], []

    def grow(depth: int) -> int:
        i = len(feature)
        feature.append(-1), threshold.append(0.0), left.append(-1), right.append(-1)
        value.append(rng.normal(size=width) * rng.choice([1.0, extreme]))
        if depth < 5 and rng.random() < 0.7:
            feature[i], threshold[i] = int(rng.integers(0, D)), float(rng.normal() * rng.choice([0.5, 2.0]))
            left[i], right[i] = grow(depth + 1), grow(depth + 1)
        return i

    for t in range(int(rng.integers(1, 6))):
        roots.append(grow(0))
        outs.append(-1 if kind == "forest" else t % L)
    return TreeEnsembleModel(feature, threshold, left, right, np.array(value), roots, outs, rng.normal(size=L),
                             input_dim=D, compare=str(rng.choice(["le", "lt"])), binary=kind == "binary")


def random_inputs(model, rng: np.random.Generator, n: int, extreme: float) -> np.ndarray:
    centre = model.mean if getattr(model, "mean", None) is not None else 0.0
    spread = model.std if getattr(model, "std", None) is not None else 1.0
    X = centre + rng.normal(size=(n, model.input_dim)) * spread * rng.choice([0.5, 2.0, 8.0])
    X[: n // 8] *= extreme  # a few rows far out
    return X


def clear_rows(model, X: np.ndarray) -> np.ndarray:
    """Rows whose float64 decision is more than TIE away from a tie (see the module docstring)."""
    if isinstance(model, ProtoNNModel):
        E = model.exponents(X)
        s = np.exp(E - E.max(axis=1, keepdims=True)) @ model.Z.T
        return _gap(s)
    if isinstance(model, TreeEnsembleModel):  # decisions are exact in float32; only the sums may tie
        s = model.scores(X)
        return np.abs(s[:, 0]) > TIE * (np.abs(s[:, 0]) + 1e-30) if model.binary else _gap(s)
    if isinstance(model, BonsaiModel):
        xh = model.project(X)
        ok = np.ones(len(X), dtype=bool)
        node = np.zeros(len(X), dtype=np.int64)
        for _ in range(model.depth):
            t = np.einsum("nd,nd->n", model.T[node], xh)
            ok &= np.abs(t) > TIE * (np.linalg.norm(model.T[node], axis=1) * np.linalg.norm(xh, axis=1) + 1e-30)
            node = np.where(t > 0, 2 * node + 1, 2 * node + 2)
        s = model.scores(X)
        scale = np.abs(s).max(axis=1) + 1e-30
        return ok & (np.abs(s[:, 0]) > TIE * scale if model.binary else _gap(s))
    d = squared_distances(model.embed(X), model.prototypes)
    if model.k == 1:
        return _gap(model.scores(X), scale=d.max(axis=1))
    ordered = np.sort(d, axis=1)
    if model.k == d.shape[1]:
        return np.ones(len(X), dtype=bool)
    return ordered[:, model.k] - ordered[:, model.k - 1] > TIE * (ordered[:, model.k] + 1e-30)


def _gap(s: np.ndarray, scale=None) -> np.ndarray:
    if s.shape[1] == 1:
        return np.ones(len(s), dtype=bool)
    top = np.sort(s, axis=1)
    scale = np.abs(s).max(axis=1) + 1e-30 if scale is None else scale + 1e-30
    return top[:, -1] - top[:, -2] > TIE * scale


CASES = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


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
