"""The PyTorch Conv1d sensor network (examples/sensor_cnn: PyTorch's default ONNX export, committed as
tests/data/sensor_cnn.onnx + .data; synthetic accelerometer windows, 3 x 128) compiled by tinycc-ml at each
precision, its fixed point chosen from 200 training rows, and run on every target: held-out accuracy of each
build on the 400 test rows, whether its scores equal the interpreter's (integer builds: every score, bit for bit;
float builds: the largest difference from the float interpreter, float32 rounding), cycles (AVR, simavr) or
instructions (QEMU -icount) per prediction, flash and RAM (static + stack) of the firmware with the model, and
the activation arena.

Builds: float (float C), int8 TFLite (precision int8: TFLite's int8 quantisation, the default for a float
network), int16 (the project's power-of-two fixed point) and int8 pow2 (precision int8, int8_dialect="pow2").

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
from tinycc_ml.errors import FitError  # noqa: E402
from tinycc_ml.ir.fixed import run_fixed  # noqa: E402
from tinycc_ml.models.network_fixed import quantise_rows  # noqa: E402

FIXTURE = REPO / "tests" / "data" / "sensor_cnn.onnx"
TARGETS = ("host", "avr", "cortex-m0", "cortex-m4")
# (label, precision, compile options)
BUILDS = (("float", "float", {}), ("int8 TFLite", "int8", {}), ("int16", "int16", {}),
          ("int8 pow2", "int8", {"int8_dialect": "pow2"}))


class Build:
    """One precision's compile on the host and what its C must compute: the interpreter's scores."""

    def __init__(self, model, label: str, precision: str, options: dict, calibration, rows):
        self.label, self.precision, self.options = label, precision, options
        self.calibration = None if precision == "float" else calibration
        host = self.compile(model, "host", None)
        self.graph = host.graph
        if label == "float":
            self.inputs = rows.astype(np.float32)  # the C's float input, and the rows the simulators take
            self.want = model.scores(rows)
        elif label == "int8 TFLite":
            self.int8 = model.quantise(calibration)
            self.inputs = self.int8.quantise_input(rows)
            self.want = self.int8.run_int8(self.inputs.reshape(len(rows), *self.int8.input_shape)).reshape(len(rows),
                                                                                                          -1)
        else:
            self.inputs = quantise_rows(self.graph, rows)
            self.want = run_fixed(self.graph, self.inputs)["scores"]
        self.sim_inputs = rows  # simulate quantises real rows as the build's <prefix>_quantise does
        self.host = host

    def compile(self, model, target: str, out_dir):
        return tinycc_ml.compile(model, target=target, precision=self.precision, calibration=self.calibration,
                                 out_dir=out_dir, name="sensor", **self.options)

    def equal(self, scores) -> str:
        scores = np.asarray(scores)
        if self.label == "float":
            return f"max diff {np.max(np.abs(scores - self.want)):.1e}"
        return "yes" if np.array_equal(scores, self.want) else "NO"


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
    builds = [Build(model, label, precision, options, calibration, flat) for label, precision, options in BUILDS]
    table = [["interpreter", b.label, f"{100 * np.mean(np.argmax(b.want, axis=1) == y_test):.2f}", "-", "-", "-",
              "-", f"{b.host.report.get('arena_bytes', 0):,}"] for b in builds]
    for target in TARGETS:
        for build in builds:
            if target == "host":
                scores, _ = build.host.load().run_raw(build.inputs)
                table.append(["host C", build.label, f"{100 * np.mean(np.argmax(scores, axis=1) == y_test):.2f}",
                              build.equal(scores), "-", "-", "-", f"{build.host.report.get('arena_bytes', 0):,}"])
                continue
            with tempfile.TemporaryDirectory() as folder:
                try:
                    result = build.compile(model, target, folder)
                except FitError as exc:  # said in the table: the float build's RAM on the AVR
                    table.append([target, build.label, "does not fit", "-", "-", "-", str(exc).split(";")[0]
                                  .split("needs ")[-1], "-"])
                    continue
                run = get_backend(target).simulate(Path(folder), result.output, build.sim_inputs)
            got = np.asarray(run.scores)
            counts = run.cycles if run.cycles is not None else run.instructions
            unit = "cycles" if run.cycles is not None else "instructions"
            fit = result.report["fit"]
            table.append([f"{target} ({fit['chip']})", build.label,
                          f"{100 * np.mean(np.argmax(got, axis=1) == y_test):.2f}", build.equal(got),
                          f"{np.mean(counts):,.0f} {unit}", f"{run.flash_bytes:,}",
                          f"{run.ram_bytes:,} + {run.stack_bytes:,}", f"{result.report.get('arena_bytes', 0):,}"])
    columns = ["build", "precision", "accuracy %", "scores = interpreter", "per prediction", "firmware flash B",
               "static + stack RAM B", "arena B"]
    write_table("sensor_cnn", columns, table, script=f"benchmarks/sensor_cnn.py --rows {args.rows}",
                results_dir=None if args.no_write else REPO / "benchmarks" / "results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
