"""Time of `tinycc-ml compile` for the USPS-10 ProtoNN (64 KB budget), first build and unchanged rebuild.

    python benchmarks/rebuild_time.py [--usps data/usps/usps10.npz]

Each compile is a fresh `tinycc-ml` process (as make or CMake run it), int16 and int8, calibrated on the
7,291 training rows; the first build runs with an empty cache, the rebuild with what the first one left
(tinycc_ml.cache: the scale search's choice and figures). Prints wall and CPU seconds (user + system of
the process); wall time depends on the machine's load, CPU time much less. The table is also written to
benchmarks/results/rebuild_time.json, which the documentation site shows.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import write_table  # noqa: E402

from tinycc_ml import save_model  # noqa: E402
from tinycc_ml.models import ProtoNNClassifier  # noqa: E402


def timed_compile(args: list[str], env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tinycc_ml", "-q", "compile", *args], check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--usps", default=str(ROOT / "data" / "usps" / "usps10.npz"))
    args = parser.parse_args()
    data = np.load(args.usps)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-rebuild-") as work:
        work = Path(work)
        model = ProtoNNClassifier(budget_bytes=64 * 1024, random_state=0, verbose=0)
        model.fit(data["X_train"], data["y_train"])
        save_model(model, work / "usps.npz")
        np.save(work / "calibration.npy", data["X_train"])
        env = {**os.environ, "TINYCC_ML_CACHE": str(work / "cache"), "PYTHONPATH": str(ROOT)}
        rows = []
        for precision in ("int16", "int8"):
            out = work / precision
            compile_args = [str(work / "usps.npz"), "--calibration", str(work / "calibration.npy"),
                            "--precision", precision, "-o", str(out)]
            first = timed_compile(compile_args, env)
            again = timed_compile(compile_args, env)
            rows.append([precision, f"{first[0]:.2f}", f"{first[1]:.2f}", f"{again[0]:.2f}", f"{again[1]:.2f}"])
        # the docs' table (docs/guide/integer.md): benchmarks/results/rebuild_time.json
        write_table("rebuild_time", ["precision", "first build wall s", "CPU s", "unchanged rebuild wall s", "CPU s"],
                    rows, script="benchmarks/rebuild_time.py", align=[None, "right", "right", "right", "right"])


if __name__ == "__main__":
    main()
