"""Measure a compiled model on its target: accuracy, agreement, sizes and speed.

    target_report(model, "avr", X, y, precision="int16", calibration=None) -> dict

The model is compiled for ``target`` ("host", "avr", "cortex-m0") and run on every row of X:
on the host through cffi, on "avr" under simavr (ATmega328P, exact cycles), on "cortex-m0"
under QEMU/unicorn (nRF51822, exact instruction counts). Fields of the result:

    target, precision, rows        what was measured, on how many rows of X
    float_accuracy                 accuracy of the float model (numpy) on (X, y); None without y
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

import os
import tempfile

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
    from tinycc_ml.ir.fixed import quantise

    model = as_model(model)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or len(X) == 0:
        raise DataError(f"X: shape {X.shape}, expected (rows, {model.input_dim})")
    if y is not None:
        y = np.asarray(y).reshape(-1)
        if len(y) != len(X):
            raise DataError(f"y has {len(y)} labels for {len(X)} rows")
    if calibration is None and precision != "float":
        calibration = X
    float_pred = np.argmax(model.scores(X), axis=1)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-report-") as d:
        res = tinycc_ml.compile(model, target=target, precision=precision, calibration=calibration, out_dir=d,
                                name=name)
        out = res.output
        out_stats = {"flash_bytes": None, "ram_bytes": None, "model_flash_bytes": out.const_bytes,
                     "model_ram_bytes": out.ram_bytes, "stack_bytes": None, "cycles_mean": None,
                     "cycles_max": None, "instructions_mean": None, "instructions_max": None, "method": "cffi"}
        if target == "host":
            pred = np.asarray(res.load().predict(X))
            counts = None
        else:
            from tinycc_ml.runtime.simulate import run_on_target

            if precision == "float":
                xin = X.astype(np.float32)
            else:
                xin = quantise(X, out.input_scale, 16).astype(np.int16)
            run = run_on_target(target, [os.path.join(d, f"{name}.c")], os.path.join(d, f"{name}.h"), name, xin,
                                out.n_scores, out.input_ctype, out.score_ctype)
            pred = run.predictions
            counts = run.cycles if run.cycles is not None else run.instructions
            unit = "cycles" if run.cycles is not None else "instructions"
            out_stats.update({"flash_bytes": run.flash_bytes, "ram_bytes": run.ram_bytes,
                              "model_flash_bytes": run.model_flash_bytes, "model_ram_bytes": run.model_ram_bytes,
                              "stack_bytes": run.stack_bytes, f"{unit}_mean": float(np.mean(counts)),
                              f"{unit}_max": int(np.max(counts)), "method": run.method})
    macs = count_macs(res.graph)
    return {
        "target": target, "precision": precision, "rows": int(len(X)),
        "float_accuracy": None if y is None else float(np.mean(float_pred == y)),
        "target_accuracy": None if y is None else float(np.mean(pred == y)),
        "agreement_with_float": float(np.mean(pred == float_pred)),
        **out_stats,
        "macs": macs,
        "per_mac": None if counts is None or macs == 0 else float(np.mean(counts)) / macs,
        "compile_report": res.report,
    }
