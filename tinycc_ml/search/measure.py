"""Measure one trained model at one precision on the target: validation accuracy of the compiled
code, flash and RAM of the real build, cycles or instructions in the simulator.

Accuracy comes from what the target computes, without simulating every validation row: integer
builds from the fixed-point interpreter (``ir.fixed.run_fixed`` on the compiled graph, which every
backend matches bit for bit), host builds from the C itself (cffi), float builds on a
microcontroller from the float model (equal up to float32 rounding). The simulator runs a handful
of rows for the speed and the sizes, and its predictions are checked against the interpreter's.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinycc_ml.api import compile as compile_model
from tinycc_ml.api import write_files
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import CompileError, DataError, FitError, ToolchainError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.plugins import PluginError

log = logging.getLogger(__name__)


@dataclass
class Measurement:
    accuracy: float | None = None
    flash_bytes: int | None = None  # the model's own code and constants
    ram_bytes: int | None = None  # static RAM + peak stack
    static_ram_bytes: int | None = None
    stack_bytes: int | None = None
    const_bytes: int | None = None
    firmware_flash_bytes: int | None = None  # measurement firmware (model + harness)
    firmware_ram_bytes: int | None = None
    count: int | None = None  # max cycles / instructions over the simulated rows
    error: str | None = None  # why it could not be built or run ("chip": does not fit the chip)
    misfit: str | None = None
    extra: dict = field(default_factory=dict)


def compiled_predictions(result, model, X: np.ndarray, target: str) -> np.ndarray:
    """Class indices the compiled build predicts for ``X`` (see the module doc)."""
    if get_backend(target).supports("load"):
        return np.asarray(result.load().predict_index(X))
    if result.precision == "float":
        return np.asarray(model.predict_index(X))

    return np.asarray(run_fixed(result.graph, quantise(X, result.output.input_scale, 16))["prediction"])


def compile_for(model, target: str, precision: str, calibration: np.ndarray, name: str):
    return compile_model(model, target=target, precision=precision,
                             calibration=None if precision == "float" else calibration, name=name)


def measure(model, target: str, precision: str, calibration: np.ndarray, X_val: np.ndarray, y_val_index: np.ndarray,
            X_sim: np.ndarray, name: str = "model") -> tuple[Measurement, object]:
    """(measurement, compile result or None)."""
    m = Measurement()
    try:
        result = compile_for(model, target, precision, calibration, name)
    except FitError as exc:  # said beside the candidate's label: without the build's own name
        m.error, m.misfit = " ".join(exc.finding.split()), "chip"
        return m, None
    except PluginError:
        raise  # a broken or incomplete target, not a property of this model
    except CompileError as exc:
        m.error, m.misfit = " ".join(str(exc).split()), "compile"
        return m, None
    except DataError as exc:  # calibration beyond what fixed point can scale
        m.error, m.misfit = " ".join(str(exc).split()), "compile"
        return m, None
    m.const_bytes = int(result.output.const_bytes)
    pred = compiled_predictions(result, model, X_val, target)
    m.accuracy = float(np.mean(pred == y_val_index))
    backend = get_backend(target)
    try:
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-fit-") as tmp:
            write_files(Path(tmp), result.files)
            run = backend.simulate(Path(tmp), result.output, X_sim)
    except (CompileError, ToolchainError) as exc:
        text = " ".join(str(exc).split())
        if isinstance(exc, ToolchainError) and "will not fit in region" not in text and "overflowed" not in text:
            raise  # a missing or broken tool, not a property of this model
        m.error, m.misfit = text[:400], "chip"
        return m, None
    m.flash_bytes = int(run.model_flash_bytes) if run.model_flash_bytes is not None else m.const_bytes
    m.static_ram_bytes = int(run.model_ram_bytes) if run.model_ram_bytes is not None else int(result.output.ram_bytes)
    m.stack_bytes = None if run.stack_bytes is None else int(run.stack_bytes)
    m.ram_bytes = m.static_ram_bytes + (m.stack_bytes or 0)
    m.firmware_flash_bytes, m.firmware_ram_bytes = run.flash_bytes, run.ram_bytes
    counts = run.cycles if run.cycles is not None else run.instructions
    m.count = None if counts is None else int(np.max(counts))
    expected = compiled_predictions(result, model, X_sim, target)
    if not np.array_equal(np.asarray(run.predictions), expected) and precision != "float":
        # the interpreter defines the build's meaning: a difference is a compiler bug, not a model trait
        log.warning("%s at %s: the %s run disagrees with the fixed-point interpreter on %d of %d rows", name,
                    precision, target, int(np.sum(np.asarray(run.predictions) != expected)), len(expected))
        m.extra["simulator_disagrees"] = True
    return m, result
