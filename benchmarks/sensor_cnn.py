"""The PyTorch Conv1d sensor network (examples/sensor_cnn: PyTorch's default ONNX export, committed as
tests/data/sensor_cnn.onnx + .data; synthetic accelerometer windows, 3 x 128) quantised to int8 by tinycc-ml
from 200 training rows and run on every target: held-out accuracy of each build on the 400 test rows (float
in the interpreter; int8 in the interpreter, in the host C and in each simulator, whose scores must equal
the interpreter's byte for byte), cycles (AVR, simavr) or instructions (QEMU -icount) per prediction, flash
and RAM (static + stack) of the firmware with the model.

    python benchmarks/sensor_cnn.py [--rows 400] [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "examples" / "sensor_cnn"))

from dataset import make_rows  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402

FIXTURE = REPO / "tests" / "data" / "sensor_cnn.onnx"
TARGETS = ("avr", "cortex-m0", "cortex-m4")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    X_train, _ = make_rows(1200, 1)  # the example's seeds: training rows, then the held-out rows
    X_test, y_test = make_rows(400, 2)
    X_test, y_test = X_test[: args.rows], y_test[: args.rows]
    calibration, flat = X_train[:200].reshape(200, -1), X_test.reshape(len(X_test), -1)
    model = tinycc_ml.load_model(FIXTURE)
    int8 = model.quantise(calibration)
    rows_q = int8.quantise_input(flat)
    want = int8.run_int8(rows_q.reshape(len(rows_q), *int8.input_shape)).reshape(len(rows_q), -1)
    float_accuracy = np.mean(np.argmax(model.scores(flat), axis=1) == y_test)
    int8_accuracy = np.mean(np.argmax(want, axis=1) == y_test)
    table = [["interpreter", f"{100 * float_accuracy:.2f}", f"{100 * int8_accuracy:.2f}", "-", "-", "-", "-", "-"]]
    host = tinycc_ml.compile(model, precision="int8", calibration=calibration, name="sensor")
    scores, _ = host.load().run_raw(rows_q)
    table.append(["host C", "-", f"{100 * np.mean(np.argmax(scores, axis=1) == y_test):.2f}",
                  "yes" if np.array_equal(scores, want) else "NO", "-", "-", "-", "-"])
    for target in TARGETS:
        with tempfile.TemporaryDirectory() as folder:
            result = tinycc_ml.compile(model, target=target, precision="int8", calibration=calibration,
                                       out_dir=folder, name="sensor")
            run = get_backend(target).simulate(Path(folder), result.output, rows_q)
        got = np.asarray(run.scores, dtype=np.int64)
        counts = run.cycles if run.cycles is not None else run.instructions
        unit = "cycles" if run.cycles is not None else "instructions"
        fit = result.report["fit"]
        table.append([f"{target} ({fit['chip']})", "-", f"{100 * np.mean(np.argmax(got, axis=1) == y_test):.2f}",
                      "yes" if np.array_equal(got, want) else "NO", f"{np.mean(counts):,.0f} {unit}",
                      f"{run.flash_bytes:,}", f"{run.ram_bytes:,} + {run.stack_bytes:,}",
                      f"{result.report.get('arena_bytes', 0):,}"])
    columns = ["build", "float %", "int8 %", "int8 bytes = interpreter", "per prediction", "firmware flash B",
               "static + stack RAM B", "arena B"]
    write_table("sensor_cnn", columns, table, script=f"benchmarks/sensor_cnn.py --rows {args.rows}",
                results_dir=None if args.no_write else REPO / "benchmarks" / "results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
