"""Compile time: a float build against the integer build of the same model (issue 50's figures).

    python benchmarks/compile_time.py [--repeat 3] [--no-letter] [--no-write]

Models: scikit-learn's MLPClassifier((32,)) on digits (64-32-10), and RandomForestClassifier(100) on
letter-26 (16,000 training rows, 26 classes; benchmarks/letter.py reads it from Debian's r-cran-mlbench). Each
integer build is calibrated on the model's training rows, its scale choice searched with an empty cache
(tinycc_ml.cache), as a first build is.

Three measures, CPU seconds (user + system; wall time depends on the machine's load much more):
- "in Python": ``tinycc_ml.compile`` in one process after a first build has loaded the compiler's modules
  (the median of 5 x --repeat builds, float and integer interleaved, each with a fresh cache and none of the walks
  and tables an earlier build in the process kept: ``tinycc_ml.ir.ops.ensembles.forget_kept``);
- "in Python, search=False": the same with the integer build's scale search off (the rest of its cost);
- "command": a fresh ``tinycc-ml compile`` process, as make or CMake run it (startup and imports included).

The ratio is the integer build's over the float build's, in the same process or the same kind of process.
Writes benchmarks/results/compile_time.json (docs/guide/integer.md shows it; --no-write only prints).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import RESULTS, write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.ops.ensembles import forget_kept  # noqa: E402


def digits_mlp():
    from sklearn.datasets import load_digits  # noqa: PLC0415
    from sklearn.neural_network import MLPClassifier  # noqa: PLC0415

    X, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 500 iterations: the model is what is compiled
        return "digits MLP (64-32-10)", MLPClassifier((32,), max_iter=500, random_state=0).fit(X, y), X


def letter_forest():
    from letter import letter26  # noqa: PLC0415
    from sklearn.ensemble import RandomForestClassifier  # noqa: PLC0415

    X, y, _, _ = letter26()
    forest = RandomForestClassifier(100, random_state=0, n_jobs=1).fit(X, y)
    return "letter-26 RandomForest(100)", forest, X


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_python(model, calibration, repeat: int, **options) -> tuple[float, float]:
    """The median CPU seconds of 5 x ``repeat`` float and as many int16 builds in this process, interleaved (a
    build of a small model takes milliseconds: the machine's drift reaches both alike), each with an empty cache."""
    times: dict[str, list[float]] = {"float": [], "int16": []}
    for _ in range(5 * repeat):
        for precision, found in times.items():
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-compile-time-") as cache:
                os.environ["TINYCC_ML_CACHE"] = cache
                forget_kept()
                start = cpu_seconds()
                tinycc_ml.compile(model, precision=precision,
                                  **({} if precision == "float" else {"calibration": calibration, **options}))
                found.append(cpu_seconds() - start)
    return statistics.median(times["float"]), statistics.median(times["int16"])


def command(model, calibration, repeat: int) -> tuple[float, float]:
    """The median CPU seconds of ``repeat`` float and as many int16 ``tinycc-ml compile`` processes (user + system
    of the child)."""
    return tuple(_command(model, calibration, precision, repeat) for precision in ("float", "int16"))


def _command(model, calibration, precision: str, repeat: int) -> float:
    times = []
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-compile-time-") as work:
        work = Path(work)
        tinycc_ml.save_model(model, work / "model.npz")
        np.save(work / "calibration.npy", calibration)
        for i in range(repeat):
            env = {**os.environ, "TINYCC_ML_CACHE": str(work / f"cache{i}"), "PYTHONPATH": str(ROOT)}
            args = [str(work / "model.npz"), "--precision", precision, "-o", str(work / f"out{i}")]
            if precision != "float":
                args += ["--calibration", str(work / "calibration.npy")]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-m", "tinycc_ml", "-q", "compile", *args], check=True, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-letter", action="store_true", help="the digits MLP only (no letter-26 data needed)")
    parser.add_argument("--no-write", action="store_true", help="print the table only (no results file)")
    args = parser.parse_args()
    models = [digits_mlp()] + ([] if args.no_letter else [letter_forest()])
    rows = []
    for label, model, X in models:
        tinycc_ml.compile(model, precision="float")  # the compiler's modules loaded once
        for where, measure in (("in Python", in_python), ("in Python, search=False", partial(in_python, search=False)),
                               ("command", command)):
            base, fixed = measure(model, X, args.repeat)
            rows.append([label, where, f"{base:.3f}", f"{fixed:.3f}", f"{fixed / base:.1f}x"])
            print(" | ".join(rows[-1]), flush=True)
    script = "benchmarks/compile_time.py" + (f" --repeat {args.repeat}" if args.repeat != 3 else "")
    write_table("compile_time", ["model", "compiled", "float CPU s", "int16 CPU s", "int16 / float"], rows,
                script=script + (" --no-letter" if args.no_letter else ""),
                align=[None, None, "right", "right", "right"], results_dir=None if args.no_write else RESULTS)


if __name__ == "__main__":
    main()
