"""The benchmarks' one way to run an integer build in its target's simulator and check it against the
fixed-point interpreter, and to print a table of the results."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.api import write_files
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.fixed import quantise, run_fixed


def simulate_exact(result, X, target: str):
    """(TargetRun of ``result``'s C on ``target`` for the float rows X, whether its scores and predictions equal
    run_fixed's on the same quantised rows)."""
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-bench-") as tmp:
        write_files(Path(tmp), result.files)
        run = get_backend(target).simulate(tmp, result.output, X)
    want = run_fixed(result.graph, quantise(X, result.output.input_scale, 16).astype(np.int16))
    exact = bool(np.array_equal(run.scores, want["scores"]) and np.array_equal(run.predictions, want["prediction"]))
    return run, exact


def print_table(columns, rows) -> None:
    """Print ``rows`` under a header and a rule: ``columns`` are (heading, cell(row) -> str, width);
    a negative width aligns the column left."""
    def pad(text: str, width: int) -> str:
        return f"{text:<{-width}}" if width < 0 else f"{text:>{width}}"

    head = " ".join(pad(heading, width) for heading, _, width in columns)
    print(head)
    print("-" * len(head))
    for row in rows:
        print(" ".join(pad(cell(row), width) for _, cell, width in columns))
