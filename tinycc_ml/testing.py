"""Conformance checks for a target, built-in or plug-in, usable from any package's tests:

    from tinycc_ml.testing import check_target

    def test_my_target_conforms(tmp_path):
        check_target("riscv", tmp_path)

Each check raises AssertionError naming the case (target, family, precision, seed) and what differs:
- every family's random models (ProtoNN, Bonsai, nearest prototype, kNN, linear, tree ensembles; random sizes and
  sparsity), at every precision the target declares: integer builds bit-exact with the fixed-point
  interpreter (``run_fixed``: predictions and scores), float builds predicting what the float64 model
  predicts on every row float32 rounding cannot tip (``clear_rows``);
- streaming (``<prefix>_begin/feed/end``, where the header has them) equals the batch call;
- the model's C builds warning-free under the target's compiler with -Werror, and every external
  symbol it defines carries the model's prefix;
- a model larger than the chip's flash is refused with a FitError that gives the sizes;
- the target declares its capabilities and the checks use only what it declares.

The random models and inputs (``random_model``, ``random_inputs``, ``clear_rows``) are the same the
project's differential tests use.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tinycc_ml
from tinycc_ml.codegen.backend import CAPABILITIES, available_backends, get_backend
from tinycc_ml.codegen.input_bound import rows_beyond
from tinycc_ml.errors import FitError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.bonsai import BonsaiModel, tree_sizes
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.models.mlp import MLPModel
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.prototypes import PrototypeModel, squared_distances
from tinycc_ml.models.trees import TreeEnsembleModel
from tinycc_ml.runtime.simulate import run_on_target

FAMILIES = ("protonn", "bonsai", "nearest", "knn", "linear", "trees", "mlp")
TIE = 1e-3  # relative distance to a tie below which float32 rounding may decide a row


# ---------------------------------------------------------------- random models and rows

def random_model(family: str, rng: np.random.Generator, extreme: float = 1.0):
    """A legal model of ``family`` with random sizes and sparsity, its weights scaled by ``extreme``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
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
    if family == "linear":
        L = int(rng.choice([1, 3]))
        return LinearModel(sparse((L, D)) / extreme, rng.normal(size=L), mean, std)
    if family == "trees":
        return random_trees(rng, D, extreme)
    if family == "mlp":
        widths = [D, *(int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 3)))), int(rng.choice([1, 3]))]
        weights = [sparse((o, i)) / np.sqrt(i) for i, o in zip(widths[:-1], widths[1:])]
        acts = ["relu", "tanh", "logistic"]
        activation = str(rng.choice(acts))
        if rng.random() < 0.5:  # layers mixing activations (ONNX networks): per layer a chain of 0-2
            activation = [[str(a) for a in rng.choice(acts, size=int(rng.integers(0, 3)))] for _ in weights]
        return MLPModel(weights, [rng.normal(size=w) * 0.3 for w in widths[1:]], activation,
                        "logistic" if widths[-1] == 1 else "softmax", mean, std)
    m = int(rng.integers(3, 9))
    n_classes = int(rng.integers(2, 4))
    labels = np.concatenate([np.arange(n_classes), rng.integers(0, n_classes, m - n_classes)])
    transform = sparse((int(rng.integers(1, 5)), D)) if rng.random() < 0.5 else None
    points = rng.normal(size=(m, D if transform is None else transform.shape[0])) * 2
    k = 1 if family == "nearest" else int(rng.integers(2, m + 1))
    return PrototypeModel(points, labels, n_classes, k, mean, std, transform)


def random_trees(rng: np.random.Generator, D: int, extreme: float = 1.0):
    """1-5 random trees of random shapes: a forest (vector leaves), boosting (scalar leaves, one output
    per tree) or a binary boosting model (one score); thresholds where the inputs are; "<=" or "<"."""
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
    base = rng.normal(size=L)
    compare = str(rng.choice(["le", "lt"]))
    return TreeEnsembleModel(feature, threshold, left, right, np.array(value), roots, outs, base, input_dim=D,
                             compare=compare, binary=kind == "binary",
                             default_left=rng.integers(0, 2, len(feature)))  # where missing values go


def random_inputs(model, rng: np.random.Generator, n: int, extreme: float = 1.0) -> np.ndarray:
    """Rows around the model's input normalisation, a few of them ``extreme`` times further out."""
    centre = model.mean if getattr(model, "mean", None) is not None else 0.0
    spread = model.std if getattr(model, "std", None) is not None else 1.0
    X = centre + rng.normal(size=(n, model.input_dim)) * spread * rng.choice([0.5, 2.0, 8.0])
    X[: n // 8] *= extreme
    return X


def clear_rows(model, X: np.ndarray) -> np.ndarray:
    """Rows whose float64 decision is more than TIE away from a tie (float32 rounding cannot tip them)."""
    if isinstance(model, ProtoNNModel):
        E = model.exponents(X)
        return _gap(np.exp(E - E.max(axis=1, keepdims=True)) @ model.Z.T)
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
    if isinstance(model, PrototypeModel):
        d = squared_distances(model.embed(X), model.prototypes)
        if model.k == 1:
            return _gap(model.scores(X), scale=d.max(axis=1))
        ordered = np.sort(d, axis=1)
        if model.k == d.shape[1]:
            return np.ones(len(X), dtype=bool)
        return ordered[:, model.k] - ordered[:, model.k - 1] > TIE * (ordered[:, model.k] + 1e-30)
    s = np.asarray(model.scores(X), dtype=np.float64)
    if s.ndim == 1 or s.shape[1] == 1:  # a sign decision
        s = s.reshape(len(X), -1)
        return np.abs(s[:, 0]) > TIE * (np.abs(s[:, 0]).max() + 1e-30)
    return _gap(s)


def _gap(s: np.ndarray, scale=None) -> np.ndarray:
    if s.shape[1] == 1:
        return np.ones(len(s), dtype=bool)
    top = np.sort(s, axis=1)
    scale = np.abs(s).max(axis=1) + 1e-30 if scale is None else scale + 1e-30
    return top[:, -1] - top[:, -2] > TIE * scale


# ---------------------------------------------------------------- the checks

@dataclass
class Conformance:
    """What check_target ran: one line per case, and the checks that did not apply (with why)."""

    target: str
    cases: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)


STREAM_H = """#include <stdint.h>
int stream_predict(const {in_t} *x);
void stream_scores(const {in_t} *x, {s_t} *scores);
"""
STREAM_C = """#include "stream.h"
#include "{p}.h"
int stream_predict(const {in_t} *x)
{{
    {p}_begin();
    for (int i = {n} - 1; i >= 0; --i) {p}_feed(i, x[i]); /* any order */
    return {p}_end();
}}
void stream_scores(const {in_t} *x, {s_t} *scores)
{{
    {p}_begin();
    for (int i = 0; i < {n}; ++i) {p}_feed(i, x[i]);
    {p}_end_scores(scores);
}}
"""

# a definition at file scope that is not static: its name is the identifier before "(", "[", "=" or ";"
_EXTERNAL = re.compile(r"^(?!static\b|typedef\b|extern\b|#|/\*| |\t|}|{)[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*[\(\[=;]",
                       re.M)


def external_symbols(source: str) -> list[str]:
    """Names of the non-static functions and objects a generated .c file defines at file scope."""
    return sorted(set(_EXTERNAL.findall(source)))


def _case(target, family, precision, seed) -> str:
    return f"target {target}, family {family}, precision {precision}, seed {seed}"


def check_registered(target: str):
    """The target loads, names itself, declares precisions and capabilities; returns its backend."""
    cls = available_backends().get(target)
    assert cls is not None, f"target {target} is not registered"
    assert not hasattr(cls, "broken"), f"target {target} failed to load: {cls.description}"
    backend = get_backend(target)
    assert backend.name == target, f"target {target}: its backend calls itself {backend.name!r}"
    assert backend.description, f"target {target} has no description"
    assert backend.precisions and set(backend.precisions) <= {"float", "int16", "int8"}, backend.precisions
    assert set(backend.capabilities()) <= set(CAPABILITIES), backend.capabilities()
    return backend


def _run(backend, result, out: Path, X):
    """(predictions, scores) of the build in ``out`` on float rows X: simulated, or loaded on this machine."""
    if backend.supports("simulate"):
        run = backend.simulate(out, result.output, X)
        return np.asarray(run.predictions), np.asarray(run.scores)
    predictor = backend.load(out, result.output)
    if result.output.input_scale is None:
        return np.asarray(predictor.predict_index(X)), np.asarray(predictor.scores(X))

    scores, predictions = predictor.run_raw(quantise(X, result.output.input_scale, 16).astype(np.int16))
    return np.asarray(predictions), np.asarray(scores)


def check_model(target: str, model, X: np.ndarray, precision: str, work: Path, case: str = "",
                calibration: np.ndarray | None = None) -> None:
    """Compile ``model`` for ``target`` and compare its build on rows X with the interpreters (see above);
    ``calibration``: the integer builds' calibration rows (default X, which must then be finite)."""
    backend = get_backend(target)
    out = Path(work)
    if calibration is None:
        calibration = X
    result = tinycc_ml.compile(model, target=target, precision=precision, name="conf", out_dir=out,
                               calibration=None if precision == "float" else calibration)
    predictions, scores = _run(backend, result, out, X)
    case = case or f"target {target}, precision {precision}"
    if precision == "float":
        beyond = rows_beyond(result.output.input_bound, X)  # no class (-1): beyond what float32 is proven for
        assert np.all(np.asarray(predictions)[beyond] == -1), f"{case}: a row beyond the input bound gets a class"
        keep = clear_rows(model, X) & ~beyond
        want = np.asarray(model.predict_index(X))
        bad = np.flatnonzero((predictions != want) & keep)
        assert not len(bad), (f"{case}: float build predicts {predictions[bad[:5]]} where the model predicts "
                              f"{want[bad[:5]]} (rows {bad[:5]})")
        return
    Xq = quantise(X, result.output.input_scale, 16).astype(np.int16)
    want = run_fixed(result.graph, Xq)
    bad = np.flatnonzero(predictions != want["prediction"])
    assert not len(bad), f"{case}: predictions differ from run_fixed on rows {bad[:5]}"
    np.testing.assert_array_equal(scores, want["scores"], err_msg=f"{case}: scores differ from run_fixed")
    if f"{result.prefix}_begin" in result.files[f"{result.prefix}.h"]:
        check_streaming(target, result, out, Xq, case)


def check_streaming(target: str, result, out: Path, Xq: np.ndarray, case: str) -> None:
    """<prefix>_begin/feed/end (features fed in reverse) equal <prefix>_predict and _scores, bit for bit;
    the model's C built with -Werror by the target's own compiler."""
    backend = get_backend(target)
    simulator = getattr(backend, "simulator", None)
    if simulator is None:
        return
    o = result.output
    fmt = dict(p=o.prefix, n=o.input_dim, in_t=o.input_ctype, s_t=o.score_ctype)
    (out / "stream.h").write_text(STREAM_H.format(**fmt))
    (out / "stream.c").write_text(STREAM_C.format(**fmt))
    run = run_on_target(simulator, [str(out / f"{o.prefix}.c"), str(out / "stream.c")], str(out / "stream.h"),
                        "stream", Xq, o.n_scores, o.input_ctype, o.score_ctype, extra_cflags=("-Werror",),
                        chip=getattr(backend, "chip", None))
    want = run_fixed(result.graph, Xq)
    np.testing.assert_array_equal(run.predictions, want["prediction"], err_msg=f"{case}: streaming predictions")
    np.testing.assert_array_equal(run.scores, want["scores"], err_msg=f"{case}: streaming scores")


def check_prefixed(target: str, work: Path) -> None:
    """Every external symbol of a build carries its prefix (checked on each precision's source)."""
    rng = np.random.default_rng(7)
    model = random_model("protonn", rng)
    X = random_inputs(model, rng, 32)

    for precision in get_backend(target).precisions:
        result = tinycc_ml.compile(model, target=target, precision=precision, name="pfx",
                                   calibration=None if precision == "float" else X)
        names = external_symbols(result.files["pfx.c"])
        assert names, f"target {target}, precision {precision}: no external symbol found in pfx.c"
        wrong = [n for n in names if not n.startswith("pfx_")]
        assert not wrong, f"target {target}, precision {precision}: symbols without the prefix: {wrong}"


def check_size_limit(target: str) -> None:
    """A model beyond the chip's flash is refused with a FitError giving the sizes (targets with a chip)."""
    backend = get_backend(target)
    chip = getattr(backend, "chip", None)
    precision = "float" if "float" in backend.precisions else backend.precisions[0]
    rows = 4
    cols = chip.flash // (rows * (4 if precision == "float" else 2)) + 64
    rng = np.random.default_rng(3)
    model = LinearModel(rng.normal(size=(rows, cols)), rng.normal(size=rows))
    try:
        tinycc_ml.compile(model, target=target, precision=precision, name="big",
                          calibration=None if precision == "float" else rng.normal(size=(8, cols)))
    except FitError as exc:
        assert re.search(r"\d+ bytes", str(exc)), f"target {target}: FitError without sizes: {exc}"
        return
    raise AssertionError(f"target {target}: a {rows}x{cols} {precision} model ({chip.flash} bytes of flash) "
                         "was not refused")


def check_target(target: str, work_dir=None, *, families=FAMILIES, precisions=None, seeds=(0, 1),
                 rows: int = 24) -> Conformance:
    """All checks above for ``target``; returns what ran (AssertionError on the first failure)."""
    backend = check_registered(target)
    report = Conformance(target)
    runnable = backend.supports("simulate") or backend.supports("load")
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-conformance-") as tmp:
        work = Path(work_dir or tmp)
        if not runnable:
            report.not_applicable.append("bit-exact runs: the target neither simulates nor loads its builds")
        for family in families:
            for seed in seeds:
                rng = np.random.default_rng(1000 * FAMILIES.index(family) + seed)
                model = random_model(family, rng)
                X = random_inputs(model, rng, rows)
                calibration = X
                if family == "trees":  # missing values (NaN) go to the nodes' default sides
                    X = X.copy()
                    X[rng.random(X.shape) < 0.15] = np.nan
                for precision in precisions or backend.precisions:
                    case = _case(target, family, precision, seed)
                    if runnable:
                        check_model(target, model, X, precision, work / f"{family}_{precision}_{seed}", case,
                                    calibration=calibration)
                        report.cases.append(case)
        check_prefixed(target, work)
        report.cases.append(f"target {target}: prefixed symbols")
        if getattr(backend, "chip", None) is not None:
            check_size_limit(target)
            report.cases.append(f"target {target}: a model beyond the chip's flash refused")
        else:
            report.not_applicable.append("size limit: the target has no chip")
    return report
