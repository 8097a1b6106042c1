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
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.errors import DataError


def count_macs(graph) -> int:
    total = 0
    for name in graph.order():
        op = graph.op(name)
        if op == "matvec":
            a = graph.node(name).inputs[0]
            node = graph.node(a)
            total += len(node.attrs["values"]) if node.op == "sparse_const" else graph.type(a).size
        elif op == "sqdist":
            total += graph.type(graph.node(name).inputs[1]).size
    return total


def target_report(model, target: str, X, y=None, precision: str = "int16", calibration=None,
                  name: str = "model") -> dict:
    import tinycc_ml
    from tinycc_ml.api import as_model
    from tinycc_ml.backends.base import get_backend

    model = as_model(model)
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise DataError(f"X: dtype {X.dtype}, expected bool, integer or real float values")
    X = X.astype(np.float64)
    if X.ndim != 2 or len(X) == 0:
        raise DataError(f"X: shape {X.shape}, expected (rows, {model.input_dim})")
    if y is not None:
        y = np.asarray(y)
        if y.dtype.kind not in "biufU":
            raise DataError(f"y: dtype {y.dtype}, expected integer or string labels")
        y = y.reshape(-1)
        if len(y) != len(X):
            raise DataError(f"y has {len(y)} labels for {len(X)} rows")
    if calibration is None and precision != "float":
        calibration = X
    float_pred = model.predict(X)  # labels, by the model's own rule (a binary Bonsai: the sign)
    backend = get_backend(target)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-report-") as d:
        res = tinycc_ml.compile(model, target=target, precision=precision, calibration=calibration, out_dir=d,
                                name=name)
        run = backend.simulate(Path(d), res.output, X)
    counts = run.cycles if run.cycles is not None else run.instructions
    stats = {"flash_bytes": run.flash_bytes, "ram_bytes": run.ram_bytes, "model_flash_bytes": run.model_flash_bytes,
             "model_ram_bytes": run.model_ram_bytes, "stack_bytes": run.stack_bytes, "cycles_mean": None,
             "cycles_max": None, "instructions_mean": None, "instructions_max": None, "method": run.method}
    if counts is not None:
        unit = "cycles" if run.cycles is not None else "instructions"
        stats.update({f"{unit}_mean": float(np.mean(counts)), f"{unit}_max": int(np.max(counts))})
    macs = count_macs(res.graph)
    pred = model.classes[np.asarray(run.predictions, dtype=np.int64)]  # the class index, as a label
    return {
        "target": target, "precision": precision, "rows": int(len(X)),
        "float_accuracy": None if y is None else float(np.mean(float_pred == y)),
        "target_accuracy": None if y is None else float(np.mean(pred == y)),
        "agreement_with_float": float(np.mean(pred == float_pred)),
        **stats,
        "macs": macs,
        "per_mac": None if counts is None or macs == 0 else float(np.mean(counts)) / macs,
        "compile_report": res.report,
    }
