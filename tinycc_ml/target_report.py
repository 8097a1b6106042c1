"""Measure a compiled model on its target: accuracy, agreement, sizes and speed.

    target_report(model, "avr", X, y, precision="int16", calibration=None) -> dict

The model is compiled for ``target`` and run on every row of X by the backend's ``simulate``
(any backend that has one: the host through cffi, "avr" under simavr (ATmega328P, exact cycles),
"cortex-m0" under QEMU/unicorn (nRF51822, exact instruction counts), plug-ins). Fields of the result:

    target, precision, rows        what was measured, on how many rows of X
    float_accuracy                 accuracy of the float model (numpy) on (X, y); None without y;
                                   predictions are the model's class labels, compared with y
    target_accuracy                accuracy of the compiled code run on the target; None without y
    agreement_with_float           fraction of rows where compiled and float predictions agree
    reference                      what the compiled predictions are compared with: "float" (the float model),
                                   or "int8" (an int8 network with no float model, a .tflite file's: its
                                   interpreter, which the build equals bit for bit; the float fields are None)
    reference_accuracy, agreement_with_reference   classifiers with the int8 reference only: its accuracy on
                                   (X, y), the share of rows where compiled and reference predictions agree
    flash_bytes, ram_bytes         whole measurement firmware (model + harness with its input buffer;
                                   AVR: avr-size -C, M0: text+data / data+bss); host: None
    model_flash_bytes, model_ram_bytes   the model's own symbols (host: constants / intermediates)
    stack_bytes                    peak stack of predict/scores (simulated targets), None on host
    cycles_mean, cycles_max        AVR cycles per inference (predict call, simavr), else None
    instructions_mean, instructions_max   Cortex-M0 instructions per inference, else None
    macs                           multiply-accumulates per inference (matvec + sqdist terms)
    per_mac                        cycles (AVR) or instructions (M0) per MAC: the whole inference
                                   divided by ``macs`` (meaningful for mat-vec dominated models)
    method                         simulator used ("simavr", "qemu", "unicorn", "cffi")
    compile_report                 the compiler's own report (scales, agreement on calibration rows)
    weights                        where kernels chose how a layer's weights lie in flash (a network on the
                                   Cortex-M4/M33; ``**options`` such as optimize="speed" go to compile):
                                   {"optimize", "layers": node -> "int8" | "int16", "summary": the line
                                   `tinycc-ml report` prints}; else None
    patches                        a TFLite int8 network built with ram_limit (``**options``): its patch-based
                                   execution {"split", "grid", "arena_bytes", "unpatched_arena_bytes", "macs",
                                   "extra_macs", "extra_macs_percent"} (None when the whole layers fit); else None
    task                           what the scores mean (the model's task: {"kind": "classification"},
                                   "regression", or "multilabel" with its rule)
    regression                     regression models, else None; the accuracy fields are None:
        float_r2, target_r2          R² of the float model and of the compiled value (<prefix>_predict_value,
                                     run on the target) against y; None without y
        max_abs_error, mean_abs_error   the compiled value against the float model, in y's units:
                                     the fixed-point (or float32) error
    multilabel                     multilabel models, else None; y is the 0/1 matrix (rows, labels);
                                   agreement_with_float is the share of rows whose 0/1 label vectors
                                   (<prefix>_predict_labels on the target) equal the float model's:
        float_precision_at, target_precision_at   {"1": P@1, "3": P@3, "5": P@5} (k up to the label count)
                                     of the float scores and of the compiled scores; None without y
        label_agreement              as agreement_with_float
        ranking_agreement            share of rows whose compiled scores rank every label as the float
                                     model's scores do (ties to the lower label)
    kernels                        measured cost per graph node that calls kernel functions (simulated
                                   targets: a per-function profile of the first rows, see
                                   runtime.profile.measure_kernels), next to the cost model's choice and
                                   prediction for sparse matrices; {"unavailable": why} elsewhere
    cycle_model                    where the simulator counts instructions: cycles per inference from the
                                   target's cycle model (Cortex-M4/M33: the TRM's timings on the executed
                                   instructions, ``flash_wait_states`` on flash reads and refills; first rows
                                   only, see runtime.profile.measure_cycles): mean, max, rows, wait_states,
                                   per_function; {"unavailable": why} where there is none; None on the AVR

Each task's fields come from one function (``classification_fields``, ``regression_fields``,
``multilabel_fields``) of the float model's scores and the target run, so callers can score a run
they made themselves.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

import tinycc_ml
from tinycc_ml.api import as_model
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import DataError
from tinycc_ml.ir.ops import node_macs
from tinycc_ml.models.base import multilabel_indicator
from tinycc_ml.passes.fixed_pipeline import value_tolerance
from tinycc_ml.runtime.profile import measure_cycles, measure_kernels

log = logging.getLogger(__name__)


def count_macs(graph) -> int:
    """Multiply-accumulates of one prediction: each op's ``macs`` facet (a sparse matrix counts its non-zeros)."""
    return sum(node_macs(graph, name) for name in graph.order())


def target_report(model, target: str, X, y=None, precision: str = "int16", calibration=None,
                  name: str = "model", max_flash: int | None = None, max_ram: int | None = None,
                  board: str | None = None, flash_wait_states: int = 0, **options) -> dict:
    model = as_model(model)
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise DataError(f"X: dtype {X.dtype}, expected bool, integer or real float values")
    X = X.astype(np.float64)
    if X.ndim != 2 or len(X) == 0:
        raise DataError(f"X: shape {X.shape}, expected (rows, {model.input_dim})")
    kind = model.task["kind"]
    y = check_targets(y, len(X), model)
    if calibration is None and precision != "float" and model.reference == "float":
        calibration = X
    backend = get_backend(target)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-report-") as d:
        res = tinycc_ml.compile(model, target=target, precision=precision, calibration=calibration, out_dir=d,
                                name=name, max_flash=max_flash, max_ram=max_ram, board=board, **options)
        run = backend.simulate(Path(d), res.output, X)
        kernels = measure_kernels(backend, Path(d), res.output, X)
        # where the simulator counts instructions, a cycle model prices them (Cortex-M4/M33)
        cycle_model = None if run.cycles is not None else measure_cycles(backend, Path(d), res.output, X,
                                                                          flash_wait_states)
    counts = run.cycles if run.cycles is not None else run.instructions
    stats = {"flash_bytes": run.flash_bytes, "ram_bytes": run.ram_bytes, "model_flash_bytes": run.model_flash_bytes,
             "model_ram_bytes": run.model_ram_bytes, "stack_bytes": run.stack_bytes, "cycles_mean": None,
             "cycles_max": None, "instructions_mean": None, "instructions_max": None, "method": run.method}
    if counts is not None:
        unit = "cycles" if run.cycles is not None else "instructions"
        stats.update({f"{unit}_mean": float(np.mean(counts)), f"{unit}_max": int(np.max(counts))})
    macs = count_macs(res.graph)
    scale = score_scale(res.graph)
    float_scores = model.scores(X)
    fields = {"float_accuracy": None, "target_accuracy": None, "agreement_with_float": None,
              "task": dict(model.task), "regression": None, "multilabel": None}
    if kind == "regression":
        fields["regression"] = regression_fields(float_scores, run, scale, y)
        fields["agreement_with_float"] = fields["regression"]["within_tolerance"]
    elif kind == "multilabel":
        fields["multilabel"] = multilabel_fields(float_scores, run, scale, model.task, y)
        fields["agreement_with_float"] = fields["multilabel"]["label_agreement"]
    else:
        fields.update(classification_fields(model, X, run, y))
    return {
        "target": target, "precision": precision, "rows": int(len(X)), "reference": model.reference,
        **fields,
        **stats,
        "macs": macs,
        "per_mac": None if counts is None or macs == 0 else float(np.mean(counts)) / macs,
        "compile_report": res.report,
        "weights": res.report.get("weights"),
        "patches": res.report.get("patches"),  # patch-based execution (ram_limit): split, grid, arena, extra MACs
        "kernels": kernels,
        "cycle_model": cycle_model,
    }


def check_targets(y, rows: int, model):
    """y as the model's task reads it (labels, real values, or a 0/1 matrix); None stays None."""
    if y is None:
        return None
    y = np.asarray(y)
    kind = model.task["kind"]
    if kind == "multilabel":
        n_labels = model.n_outputs
        if y.ndim != 2 or y.shape != (rows, n_labels) or y.dtype.kind not in "biuf" or not np.isin(y, (0, 1)).all():
            raise DataError(f"y: shape {y.shape}, dtype {y.dtype}; a multilabel model needs a 0/1 matrix of shape "
                            f"({rows}, {n_labels})")
        return y.astype(np.int64)
    if kind == "regression":
        if y.dtype.kind not in "biuf":
            raise DataError(f"y: dtype {y.dtype}, expected real target values for a regression model")
        y = y.astype(np.float64).reshape(-1) if y.ndim <= 1 or y.shape[1:] == (1,) else y
        if y.ndim != 1:
            raise DataError(f"y: shape {y.shape}, expected one target value per row")
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise DataError(f"y holds a non-finite target ({y[bad[0]]}) at row {bad[0]}")
    else:
        if y.dtype.kind not in "biufU":
            raise DataError(f"y: dtype {y.dtype}, expected integer or string labels")
        y = y.reshape(-1)
        check_label_kind(y, model.classes)
    if len(y) != rows:
        raise DataError(f"y has {len(y)} labels for {rows} rows")
    return y


def check_label_kind(y: np.ndarray, classes: np.ndarray) -> None:
    """Labels of another kind than the model's classes (strings against integers) can never match: the
    accuracy would be 0% without a word, so they are refused, naming both; labels of the right kind none of
    which is a class are said in a warning."""
    classes = np.asarray(classes)
    text_y, text_classes = y.dtype.kind == "U", classes.dtype.kind == "U"
    if text_y != text_classes:
        kinds = ("strings", "integers")
        raise DataError(f"y holds {kinds[not text_y]} ({', '.join(map(repr, y[:3].tolist()))}...) but the model's "
                        f"classes are {kinds[not text_classes]} ({', '.join(map(repr, classes[:4].tolist()))}); "
                        "give the labels the model was trained with")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))):
        bad = y[~(np.isfinite(y) & (y == np.round(y)))][0]
        raise DataError(f"y holds {bad!r}, not a class label (the model's classes are integers: "
                        f"{', '.join(map(repr, classes[:4].tolist()))})")
    if len(y) and not np.isin(y, classes).any():
        log.warning("warning: none of y's labels (%s) is a class of the model (%s): the accuracy will be 0",
                    ", ".join(map(repr, np.unique(y)[:4].tolist())), ", ".join(map(repr, classes[:4].tolist())))


def score_scale(graph) -> int | None:
    """Fractional bits of the compiled scores (integer builds), None for float builds."""
    dtype = graph.type(graph.output("scores")).dtype
    return dtype.scale if dtype.is_fixed else None


def real_scores(values: np.ndarray, scale: int | None) -> np.ndarray:
    """Compiled scores or values in the model's units (score_int * 2^-scale)."""
    values = np.asarray(values, dtype=np.float64)
    return values if scale is None else values * 2.0**-scale


def classification_fields(model, X, run, y) -> dict:
    """Accuracies and the agreement with the model's own predictions: the float model's (``float_accuracy``,
    ``agreement_with_float``), or where the model is an int8 network with no float model (a .tflite file's)
    its interpreter's (``reference_accuracy``, ``agreement_with_reference``; the float fields None)."""
    reference_pred = model.predict(X)  # labels, by the model's own rule (a binary Bonsai: the sign)
    pred = model.classes[np.asarray(run.predictions, dtype=np.int64)]  # the class index, as a label
    accuracy = None if y is None else float(np.mean(reference_pred == y))
    agreement = float(np.mean(pred == reference_pred))
    target_accuracy = None if y is None else float(np.mean(pred == y))
    if model.reference == "float":
        return {"float_accuracy": accuracy, "target_accuracy": target_accuracy, "agreement_with_float": agreement}
    return {"float_accuracy": None, "target_accuracy": target_accuracy, "agreement_with_float": None,
            "reference_accuracy": accuracy, "agreement_with_reference": agreement}


def r2(y: np.ndarray, prediction: np.ndarray) -> float:
    spread = float(np.sum((y - np.mean(y)) ** 2))
    residual = float(np.sum((y - prediction) ** 2))
    return (1.0 - residual / spread) if spread > 0 else (1.0 if residual == 0 else 0.0)


def regression_fields(float_scores: np.ndarray, run, scale: int | None, y) -> dict:
    """R² of the float model and of <prefix>_predict_value on the target; the value's error."""
    float_value = float_scores[:, 0]
    value = real_scores(run.values if run.values is not None else run.scores[:, 0], scale)
    error = np.abs(value - float_value)
    tolerance = value_tolerance(float_value)
    return {"float_r2": None if y is None else r2(y, float_value),
            "target_r2": None if y is None else r2(y, value),
            "max_abs_error": float(np.max(error)), "mean_abs_error": float(np.mean(error)),
            "tolerance": tolerance, "within_tolerance": float(np.mean(error <= tolerance))}


def precision_at(k: int, scores: np.ndarray, Y: np.ndarray) -> float:
    """Mean share of true labels among each row's k highest scores (ties to the lower label)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return float(np.mean(np.take_along_axis(Y, top, axis=1)))


def multilabel_fields(float_scores: np.ndarray, run, scale: int | None, task: dict, Y) -> dict:
    """P@1/3/5 of the float and compiled scores, agreement of the 0/1 vectors and of the rankings."""
    compiled = real_scores(run.scores, scale)
    labels = run.labels if run.labels is not None else multilabel_indicator(compiled, task)
    ks = [k for k in (1, 3, 5) if k <= float_scores.shape[1]]
    same_rank = np.all(np.argsort(-compiled, axis=1, kind="stable") == np.argsort(-float_scores, axis=1, kind="stable"),
                       axis=1)
    return {"float_precision_at": None if Y is None else {str(k): precision_at(k, float_scores, Y) for k in ks},
            "target_precision_at": None if Y is None else {str(k): precision_at(k, compiled, Y) for k in ks},
            "label_agreement": float(np.mean(np.all(labels == multilabel_indicator(float_scores, task), axis=1))),
            "ranking_agreement": float(np.mean(same_rank))}
