"""The fuzzers' differential oracle: generated models compiled at every precision, their C run and
compared with the interpreters.

A case (``oracle_case(rng)``) draws one model:

- a random model of every family of ``tinycc_ml.testing`` (ProtoNN, Bonsai, nearest prototype, kNN, linear,
  tree ensembles, MLP), sometimes read as a regression or multilabel task (thresholds and k drawn wide,
  beyond the score type's range too), its weights and rows scaled by an extreme but legal factor;
- or a fitted scikit-learn object (linear, trees, boosting, kNN, NearestCentroid, MLP, regressors, a
  pipeline) trained on rows of magnitude 1e-12 .. 3e19, with odd labels (negative, beyond int32, strings with
  accents, spaces and quotes);

compiles it at float, int16 and int8 (a refusal is a ``tinycc_ml`` error: fine), links every build of the case
into one host program built with ``-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover``
and ``-Werror``, runs the rows through it and compares:

- integer builds: bit-exact with the fixed-point interpreter (``run_fixed``): the on-device input helper's
  quantisation (``<p>_quantise_input``; rows include NaN, +-Inf and 1e30), scores, class index, the task's
  entry point (value / label set) and the label table;
- float builds: the class label on every row float32 rounding cannot tip (``clear_rows``); regression values
  within 1e-3 of the values' range; multilabel sets on rows no score of which is within 1e-3 of the threshold;
  the label function agrees with the class index everywhere.

``sim_case`` runs a case's builds in simavr (ATmega328P) or QEMU (Cortex-M0) instead, compared the same way.
Outcomes are those of tests/fuzzing.py: ``ok``, ``error`` (every precision refused cleanly) or ``crash`` (a
traceback, C that does not build, a sanitizer report, a mismatch: a bug).
"""

from __future__ import annotations

import subprocess
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import GCC, Outcome, missing_compiler
from tinycc_ml.codegen.input_bound import rows_beyond
from tinycc_ml.errors import TinyccError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.base import multilabel_indicator
from tinycc_ml.testing import FAMILIES, TIE, clear_rows, random_inputs, random_model

PRECISIONS = ("float", "int16", "int8")
SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all"]
# -O0 and one translation unit (main.c includes every build's .c: all their symbols carry their own prefix):
# a third of the build time of -O1 over separate files, the same sanitizer checks
CFLAGS = ["-std=c99", "-O0", "-g", "-Wall", "-Wextra", "-Werror", *SANITIZE]
ODD_ROWS = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0]
# extreme-but-legal scales: weights/thresholds and rows; 1e-9/1e-12 give input shifts beyond 31,
# 3e19 squared distances beyond float32
SCALES = [1.0, 1.0, 1e-3, 1e4, 1e-9, 1e-12, 1e12, 3e19]
THRESHOLDS = [0.0, 0.3, -0.5, 2.0, 4e7, -4e7, 1e-50, 1e300, -1e300, 3e5, -1e10]
SKLEARN = ["logistic", "ridge_classifier", "linear_svc", "tree", "forest", "boosting", "knn", "centroid", "mlp",
           "linear_regression", "tree_regressor", "pipeline"]
LABELS = ["range", "negative", "big", "strings", "bool", "huge"]


@dataclass
class Case:
    """One generated model and its rows, and what the case did (for a reproducer's report)."""

    model: object  # a tinycc-ml Model or a fitted scikit-learn object
    X: np.ndarray  # float64 rows (already float32-representable)
    what: str
    builds: list = field(default_factory=list)  # (precision, CompileResult)
    refused: list = field(default_factory=list)  # (precision, message)


# ---------------------------------------------------------------- generation


def _labels(rng, n_classes: int, kind: str):
    if kind == "negative":
        return -7 - 3 * np.arange(n_classes)
    if kind == "big":
        return np.array([2**40 + 5 * i for i in range(n_classes)], dtype=np.int64) * (1 if rng.random() < .5 else -1)
    if kind == "huge":  # beyond int32: an int64 label table
        return np.array([2**62 - i for i in range(n_classes)], dtype=np.int64)
    if kind == "strings":
        pool = ["caf\u00e9", "a b", 'q"uote', "back\\slash", "??=", "x", "\u00fcber", "tab\tbed", "", "0"]
        picks = rng.choice(len(pool), size=n_classes, replace=False)
        return np.array([pool[i] for i in picks])
    if kind == "bool" and n_classes == 2:
        return np.array([False, True])
    return np.arange(n_classes)


def _sklearn_case(rng) -> Case:
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeClassifier
    from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    kind = str(rng.choice(SKLEARN))
    # distance models get the magnitudes where float32 squared distances overflow more often
    scale = float(rng.choice(SCALES if kind not in ("knn", "centroid") else [1.0, 1e-9, 1e12, 3e19, 3e19]))
    D, n = int(rng.integers(1, 7)), 48
    n_classes = int(rng.choice([2, 2, 3, 4]))
    X = rng.normal(size=(n, D)) * scale
    centres = rng.normal(size=(n_classes, D)) * scale * 1.5
    y_index = rng.integers(0, n_classes, n)
    y_index[:n_classes] = np.arange(n_classes)
    X += centres[y_index]
    label_kind = str(rng.choice(LABELS))
    labels = _labels(rng, n_classes, label_kind)
    y = labels[y_index]
    make = {
        "logistic": lambda: LogisticRegression(max_iter=200),
        "ridge_classifier": lambda: RidgeClassifier(),
        "linear_svc": lambda: LinearSVC(max_iter=500),
        "tree": lambda: DecisionTreeClassifier(max_depth=4, random_state=0),
        "forest": lambda: RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0),
        "boosting": lambda: GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0),
        "knn": lambda: KNeighborsClassifier(int(rng.integers(1, 6))),
        "centroid": lambda: NearestCentroid(),
        "mlp": lambda: MLPClassifier((4,), max_iter=50, random_state=0),
        "pipeline": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=200)),
        "linear_regression": LinearRegression,
        "tree_regressor": lambda: DecisionTreeRegressor(max_depth=4, random_state=0),
    }[kind]
    target = y
    if kind in ("linear_regression", "tree_regressor"):
        target = X @ rng.normal(size=D) + float(rng.normal()) * scale
        label_kind = "values"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator = make().fit(X, target)
    rows = np.concatenate([X[:16], rng.normal(size=(16, D)) * scale * 2])
    return Case(estimator, rows.astype(np.float32).astype(np.float64),
                f"scikit-learn {kind}, D={D}, {n_classes} classes ({label_kind} labels), rows x{scale:g}")


def _family_case(rng) -> Case:
    family = str(rng.choice(FAMILIES))
    extreme = float(rng.choice([1.0, 1.0, 1e-3, 1e4]))
    model = random_model(family, rng, extreme)
    task = "classification"
    n_scores = model.lower().type(dict(model.lower().outputs)["scores"]).shape[0]
    draw = rng.random()
    if draw < 0.15 and n_scores == 1:
        model.with_task({"kind": "regression"})
        task = "regression"
    elif draw < 0.5:
        if rng.random() < 0.6:
            model.with_task({"kind": "multilabel", "rule": "threshold", "threshold": float(rng.choice(THRESHOLDS))})
        else:
            model.with_task({"kind": "multilabel", "rule": "top_k", "k": int(rng.integers(1, n_scores + 2))})
        task = str(model.task)
    elif model.task["kind"] == "classification" and rng.random() < 0.4:
        try:
            model.set_classes(_labels(rng, model.n_classes, str(rng.choice(LABELS))))
        except (TinyccError, NotImplementedError, AttributeError):
            pass
    X = random_inputs(model, rng, 32, extreme)
    row_scale = float(rng.choice(SCALES))
    if row_scale != 1.0 and rng.random() < 0.3:  # rows far from the model's normalisation
        X = X * row_scale
    X = np.clip(X, -1e38, 1e38).astype(np.float32).astype(np.float64)
    return Case(model, X, f"{family} model (weights x{extreme:g}), task {task}, rows up to {np.max(np.abs(X)):.3g}")


def oracle_model(rng) -> Case:
    """One generated case: a tinycc-ml model of a random family or a fitted scikit-learn object."""
    return _sklearn_case(rng) if rng.random() < 0.35 else _family_case(rng)


# ---------------------------------------------------------------- compiling and running


def compile_case(case: Case, precisions=PRECISIONS, target: str = "host", tag: str = "o") -> None:
    for precision in precisions:
        try:
            result = tinycc_ml.compile(case.model, target=target, name=f"{tag}_{precision}", precision=precision,
                                       calibration=None if precision == "float" else case.X)
        except TinyccError as exc:
            case.refused.append((precision, str(exc)))
            continue
        case.builds.append((precision, result))


def _input_helper(result) -> str | None:
    from tinycc_ml.buildsys.examples import input_helper

    header = result.files[f"{result.prefix}.h"]
    if f"{result.prefix}_quantise_input" in header:  # the model's header carries the helper itself
        return None
    return input_helper(result)


def _label_kind(result) -> str:
    return "str" if np.asarray(result.classes).dtype.kind == "U" else "int"


RUNNER = """static int run_{p}(long rows)
{{
    float xf[{d}];
    {in_t} xq[{d}];
    {s_t} s[{n}];
    for (long r = 0; r < rows; ++r) {{
        if (fread(xf, sizeof xf, 1, stdin) != 1) return 1;
{quantise}
        {p}_scores({x}, s);
        fwrite(s, sizeof s, 1, stdout);
        int32_t k = {p}_predict({x});
        fwrite(&k, sizeof k, 1, stdout);
{task}
{label}
    }}
    return 0;
}}
"""


def harness(case: Case) -> tuple[dict[str, str], str]:
    """(files, main.c) running every build of ``case`` on the rows read from stdin."""
    files, includes, runners, calls = {}, [], [], []
    for precision, result in case.builds:
        o, p = result.output, result.prefix
        files.update(result.files)
        includes.append(f'#include "{p}.h"')
        integer = o.input_ctype != "float"
        if integer:
            helper = _input_helper(result)
            if helper is not None:
                files[f"{p}_input.h"] = helper
                includes.append(f'#include "{p}_input.h"')
            quantise_c = (f"        {p}_quantise_input(xf, xq);\n        fwrite(xq, sizeof xq, 1, stdout);")
        else:
            quantise_c = "        (void)xq;"
        x = "xq" if integer else "xf"
        kind = o.task["kind"]
        task_c = ""
        if kind == "regression":
            task_c = f"        {o.score_ctype} v = {p}_predict_value({x});\n        fwrite(&v, sizeof v, 1, stdout);"
        elif kind == "multilabel":
            task_c = (f"        uint8_t l[{o.n_scores}];\n        {p}_predict_labels({x}, l);\n"
                      "        fwrite(l, sizeof l, 1, stdout);")
        if _label_kind(result) == "str":
            # NULL (<NAME>_NO_LABEL of a row beyond a float build's input bound) written as length 2^32 - 1
            label_c = (f"        const char *t = {p}_predict_label({x});\n"
                       "        uint32_t len = t ? (uint32_t)strlen(t) : UINT32_MAX;\n"
                       "        fwrite(&len, sizeof len, 1, stdout);\n        if (t) fwrite(t, 1, len, stdout);")
        else:
            label_c = f"        int64_t lab = (int64_t){p}_predict_label({x});\n        fwrite(&lab, 8, 1, stdout);"
        runners.append(RUNNER.format(p=p, d=o.input_dim, in_t=o.input_ctype, s_t=o.score_ctype, n=o.n_scores,
                                     quantise=quantise_c, x=x, task=task_c, label=label_c))
        calls.append(f"    if (run_{p}({len(_rows_for(precision, case.X))})) return 1;")
    sources = [f'#include "{name}"' for name in files if name.endswith(".c")]
    main = "\n".join(["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>",
                      *includes, *sources, "", *runners,
                      "int main(void)", "{",
                      *calls, "    fflush(stdout);", "    return 0;", "}", ""])
    return files, main


def _rows_for(precision: str, X: np.ndarray) -> np.ndarray:
    """Integer builds also get NaN, +-Inf and 1e30 features (the input helper must map them as quantise)."""
    if precision == "float":
        return X
    odd = np.resize(np.array(ODD_ROWS), (2, X.shape[1]))
    return np.concatenate([X, odd])


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        end = self.at + dtype.itemsize * count
        if end > len(self.data):
            raise AssertionError(f"the program wrote {len(self.data)} bytes, fewer than expected")
        out = np.frombuffer(self.data[self.at:end], dtype=dtype)
        self.at = end
        return out


def host_run(case: Case, work: Path) -> str:
    """'' when every build of ``case`` built and ran clean and matched the interpreters, else what went wrong."""
    if not case.builds:
        return ""
    if GCC is None:
        return missing_compiler("gcc")
    files, main = harness(case)
    for name, text in files.items():
        (work / name).write_text(text)
    (work / "main.c").write_text(main)
    exe = work / "main"
    build = subprocess.run([GCC, *CFLAGS, "-I", str(work), str(work / "main.c"), "-lm", "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    if build.returncode:
        return f"C does not build under -Werror with the sanitizers: {build.stderr[-600:]}"
    stdin = b"".join(_rows_for(p, case.X).astype(np.float32).tobytes() for p, _ in case.builds)
    run = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=300,
                         env={"ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1",
                              "PATH": "/usr/bin:/bin"})
    if run.returncode or b"runtime error" in run.stderr or b"Sanitizer" in run.stderr:
        return f"the program failed (exit {run.returncode}): {run.stderr.decode(errors='replace')[-800:]}"
    reader = Reader(run.stdout)
    for precision, result in case.builds:
        problem = compare(case, precision, result, reader)
        if problem:
            return f"{precision}: {problem}"
    if reader.at != len(run.stdout):
        return "the program wrote more than expected"
    return ""


def read_outputs(result, reader: Reader, rows: int, integer: bool) -> dict:
    from tinycc_ml.runtime.simulate import SCORE_DTYPES

    o = result.output
    s_dtype = SCORE_DTYPES.get(o.score_ctype, np.dtype(o.score_ctype.replace("_t", "")))
    out = {"xq": [], "scores": [], "prediction": [], "value": [], "labels": [], "label": []}
    for _ in range(rows):
        if integer:
            out["xq"].append(reader.take(np.dtype(o.input_ctype.replace("_t", "")), o.input_dim))
        out["scores"].append(reader.take(s_dtype, o.n_scores))
        out["prediction"].append(int(reader.take(np.int32, 1)[0]))
        if o.task["kind"] == "regression":
            out["value"].append(reader.take(s_dtype, 1)[0])
        elif o.task["kind"] == "multilabel":
            out["labels"].append(reader.take(np.uint8, o.n_scores))
        if _label_kind(result) == "str":
            length = int(reader.take(np.uint32, 1)[0])
            out["label"].append(None if length == 2**32 - 1 else
                                bytes(reader.take(np.uint8, length)).decode("utf-8", "replace"))
        else:
            out["label"].append(int(reader.take(np.int64, 1)[0]))
    return {k: np.array(v) if k != "label" else v for k, v in out.items()}


def _same_label(got, want) -> bool:
    if isinstance(want, (bool, np.bool_)):
        return int(got) == int(want)
    return got == (want.item() if hasattr(want, "item") else want)


def compare(case: Case, precision: str, result, reader: Reader) -> str:
    o = result.output
    integer = o.input_ctype != "float"
    X = _rows_for(precision, case.X)
    got = read_outputs(result, reader, len(X), integer)
    classes = np.asarray(result.classes)
    # float builds: rows beyond the input bound get no class (-1), NaN scores and no label
    got["beyond"] = rows_beyond(result.output.input_bound, X)
    for i, (index, label) in enumerate(zip(got["prediction"], got["label"])):
        if got["beyond"][i]:
            if index != -1 or not np.all(np.isnan(np.asarray(got["scores"], dtype=np.float64)[i])):
                return f"row {i}: beyond the input bound {result.output.input_bound}, the C predicts {index}"
            if o.task["kind"] == "classification" and any(_same_label(label, c) for c in classes):
                return f"row {i}: beyond the input bound, {result.prefix}_predict_label gives a class's label {label!r}"
            continue
        if not (0 <= index < max(len(classes), 1)):
            return f"row {i}: class index {index} outside 0..{len(classes) - 1}"
        if o.task["kind"] == "classification" and not _same_label(label, classes[index]):
            return f"row {i}: {result.prefix}_predict_label gives {label!r}, the label table says {classes[index]!r}"
    return (_compare_fixed if integer else _compare_float)(case, result, X, got)


def _compare_fixed(case: Case, result, X: np.ndarray, got: dict) -> str:
    o = result.output
    bits = 16 if o.input_ctype == "int16_t" else 8
    shifts = np.broadcast_to(np.asarray(o.input_scale), (o.input_dim,)).astype(np.int64)
    Xq = quantise(X.astype(np.float32).astype(np.float64), shifts, bits)
    bad = np.nonzero(np.any(got["xq"] != Xq, axis=1))[0]
    if len(bad):
        r = bad[0]
        return f"row {r}: the input helper gives {got['xq'][r].tolist()}, quantise() {Xq[r].tolist()} ({X[r].tolist()})"
    want = run_fixed(result.graph, Xq.astype(got["xq"].dtype))
    for key in ("scores", "prediction"):
        diff = np.nonzero(np.any(np.asarray(got[key]).reshape(len(X), -1) != want[key].reshape(len(X), -1),
                                 axis=1))[0]
        if len(diff):
            r = diff[0]
            return f"row {r}: {key} {np.asarray(got[key])[r].tolist()}, the interpreter {want[key][r].tolist()}"
    kind = o.task["kind"]
    if kind == "regression" and not np.array_equal(got["value"], want["scores"][:, 0]):
        return f"predict_value {got['value'][:4].tolist()}, the interpreter {want['scores'][:4, 0].tolist()}"
    if kind == "multilabel":
        scale = result.graph.type(result.graph.output("scores")).dtype.scale
        labels = multilabel_indicator(want["scores"] * 2.0**-scale, o.task)
        diff = np.nonzero(np.any(got["labels"] != labels, axis=1))[0]
        if len(diff):
            r = diff[0]
            return (f"row {r}: predict_labels {got['labels'][r].tolist()}, the interpreter's scores read by "
                    f"{o.task} give {labels[r].tolist()}")
    return ""


def _model_of(case: Case):
    from tinycc_ml.api import as_model

    return as_model(case.model)


RESOLUTION = 1e5  # float32 resolves ~1.6e7 relative: a projection this much larger than the prototypes loses them


def within_float32_resolution(model, X: np.ndarray) -> np.ndarray:
    """Rows a float32 build can decide at all: for distance models, rows whose projection is not so much larger
    than the prototypes that float32 rounds every distance alike (|Wx| > 1e5 |B|: (Wx - b)^2 cannot tell the
    prototypes apart, or overflows). Found by the oracle (ProtoNN rows of 1e12..1e20): a limit of float32
    arithmetic, not of the compiler; float64 numpy decides those rows, no float32 code can."""
    from tinycc_ml.models.protonn import ProtoNNModel
    from tinycc_ml.models.prototypes import PrototypeModel

    with np.errstate(all="ignore"):
        if isinstance(model, ProtoNNModel):
            projected, prototypes = model.normalise(X) @ model.W.T, model.B
        elif isinstance(model, PrototypeModel):
            projected, prototypes = model.embed(X), model.prototypes
        else:
            return np.ones(len(X), dtype=bool)
        reach = np.max(np.abs(prototypes)) + 1e-30
        return np.max(np.abs(projected), axis=1) <= RESOLUTION * reach


def _compare_float(case: Case, result, X: np.ndarray, got: dict) -> str:
    model = _model_of(case)
    o = result.output
    kind = o.task["kind"]
    with np.errstate(all="ignore"):
        scores = np.asarray(model.scores(X), dtype=np.float64).reshape(len(X), -1)
    if kind == "classification":
        keep = clear_rows(model, X) & np.all(np.isfinite(scores), axis=1) & within_float32_resolution(model, X)
        keep &= ~got["beyond"]
        want = model.predict(X)
        if hasattr(case.model, "predict") and not hasattr(case.model, "lower"):  # scikit-learn's own answer
            sk = np.asarray(case.model.predict(X))
            agree = np.array([_same_label(a, b) for a, b in zip(sk, want)])
            if not agree[keep].all():
                r = np.nonzero(~agree & keep)[0][0]
                return f"row {r}: the converted model predicts {want[r]!r}, scikit-learn {sk[r]!r}"
        labels = np.asarray(result.classes)[got["prediction"]]
        agree = np.array([_same_label(a, b) for a, b in zip(labels, want)])
        if not agree[keep].all():
            r = np.nonzero(~agree & keep)[0][0]
            return f"row {r}: the C predicts {labels[r]!r}, the model {want[r]!r} (scores {scores[r].tolist()})"
        return ""
    if kind == "regression":
        want = scores[:, 0]
        finite = np.isfinite(want)
        span = np.max(np.abs(want[finite]), initial=0.0) + 1e-30
        finite &= ~got["beyond"]
        bad = finite & ~(np.abs(got["value"].astype(np.float64) - want) <= 1e-3 * span)
        if bad.any():
            r = np.nonzero(bad)[0][0]
            return f"row {r}: predict_value {float(got['value'][r])!r}, the model {want[r]!r}"
        return ""
    labels = multilabel_indicator(scores, o.task)
    span = np.max(np.abs(scores), axis=1) + 1e-30
    if o.task["rule"] == "threshold":
        keep = np.min(np.abs(scores - o.task["threshold"]), axis=1) > TIE * (span + abs(o.task["threshold"]))
    else:
        k = min(o.task["k"], scores.shape[1])
        ordered = -np.sort(-scores, axis=1)
        keep = np.ones(len(X), bool) if k >= scores.shape[1] else ordered[:, k - 1] - ordered[:, k] > TIE * span
    keep &= np.all(np.isfinite(scores), axis=1) & ~got["beyond"]
    bad = keep & np.any(got["labels"] != labels, axis=1)
    if bad.any():
        r = np.nonzero(bad)[0][0]
        return f"row {r}: predict_labels {got['labels'][r].tolist()}, the model {labels[r].tolist()}"
    return ""


def sim_run(case: Case, target: str) -> str:
    """Every build of ``case`` (compiled for ``target``) in the simulator, compared like host_run (no helper)."""
    from tinycc_ml.runtime.simulate import run_on_target

    with tempfile.TemporaryDirectory(prefix="tinycc-ml-oracle-") as tmp:
        for precision, result in case.builds:
            o, p = result.output, result.prefix
            for name, text in result.files.items():
                (Path(tmp) / name).write_text(text)
            X = case.X
            if precision == "float":
                rows = X.astype(np.float32)
            else:
                rows = quantise(X, np.broadcast_to(np.asarray(o.input_scale), (o.input_dim,)), 16).astype(np.int16)
            run = run_on_target(target, [str(Path(tmp) / f"{p}.c")], str(Path(tmp) / f"{p}.h"), p, rows,
                                o.n_scores, o.input_ctype, o.score_ctype, extra_cflags=("-Werror",),
                                task=o.task["kind"] if o.task["kind"] != "classification" else None)
            if precision == "float":
                model = _model_of(case)
                if o.task["kind"] != "classification":
                    continue  # the host run compares the float task values; here the class path only
                beyond = rows_beyond(o.input_bound, X)
                if not np.all(np.asarray(run.predictions)[beyond] == -1):
                    return f"{target} {precision}: a row beyond the input bound {o.input_bound} gets a class"
                keep = clear_rows(model, X) & within_float32_resolution(model, X) & ~beyond
                want = model.predict_index(X)
                if not np.array_equal(run.predictions[keep], want[keep]):
                    r = np.nonzero(run.predictions[keep] != want[keep])[0][0]
                    return (f"{target} {precision}: a clear row predicts {run.predictions[keep][r]}, "
                            f"the model {want[keep][r]}")
                continue
            want = run_fixed(result.graph, rows)
            if not (np.array_equal(run.predictions, want["prediction"])
                    and np.array_equal(run.scores, want["scores"])):
                return f"{target} {precision}: scores/predictions differ from the interpreter"
    return ""


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    place = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{place}: {exc}"[:600]


def oracle_case(rng, target: str = "host") -> Outcome:
    """Generate, compile at every precision, run (host with sanitizers, or ``target``'s simulator), compare."""
    try:
        case = oracle_model(rng)
    except Exception as exc:  # noqa: BLE001 - a generator that cannot build its model is the fuzzer's bug
        return Outcome("crash", f"generator: {_where(exc)}")
    try:
        compile_case(case, target=target)
        if target == "host":
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-oracle-") as tmp:
                problem = host_run(case, Path(tmp))
        else:
            problem = sim_run(case, target)
    except TinyccError as exc:
        if target != "host" and "toolchain" in type(exc).__name__.lower():
            raise
        return Outcome("crash", f"{case.what}: {type(exc).__name__} after compiling: {exc}"[:800])
    except Exception as exc:  # noqa: BLE001
        return Outcome("crash", f"{case.what}: {_where(exc)}")
    if problem:
        return Outcome("crash", f"{case.what}: {problem}"[:1200])
    if not case.builds:
        return Outcome("error", "; ".join(f"{p}: {m}" for p, m in case.refused)[:400])
    return Outcome("ok", f"{len(case.builds)} builds")
