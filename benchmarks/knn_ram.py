"""kNN (k=3) on letter-26 on the simulated chips: RAM that does not grow with the training set.

    python benchmarks/knn_ram.py [--rows 40] [--targets avr,cortex-m0] [--quick]

Models: tinycc_ml's KNNClassifier(k=3) on the first n rows of UCI letter-26's training split
(benchmarks/letter.py: 16 integer features 0-15, 26 classes), calibrated on 2,000 other training rows,
run on the first --rows test rows in simavr (ATmega328P, cycles) and QEMU (Cortex-M0, instructions).
The distances and the vote are one op (sqdist_kvote): each training row's distance is inserted into the
k best while scanning, so the working RAM is O(k), not one distance per row. Per build: the firmware's
static RAM (model + harness: data + bss) and the measured peak stack, flash, cycles, test accuracy, and
whether scores and predictions equal run_fixed's bit for bit. The AVR's last row count is the largest
that the fit check (the linked firmware) accepts in 32 KB of flash at that precision. Rows marked
"before" are built without the fusion (the fuse_nearest pass left out: sqdist into RAM, then kvote), as
every kNN build was before it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from letter import letter26  # noqa: E402
from simulated import print_table  # noqa: E402

import tinycc_ml  # noqa: E402
import tinycc_ml.passes.fixed_pipeline as fixed_pipeline  # noqa: E402
from tinycc_ml.errors import FitError  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.models.knn import KNNClassifier  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

K = 3
CALIBRATION = 2000


def build(X, y, n: int, target: str, precision: str, out_dir: str):
    est = KNNClassifier(k=K).fit(X[:n], y[:n])
    return tinycc_ml.compile(est, target=target, precision=precision, out_dir=out_dir, name="knn",
                             calibration=X[-CALIBRATION:])


def largest_fitting(X, y, target: str, precision: str, lo: int, hi: int) -> int:
    """The most training rows (to 10) whose build the fit check accepts, by bisection in [lo, hi)."""
    while hi - lo > 10:
        mid = (lo + hi) // 2
        d = tempfile.mkdtemp(prefix="tinycc-ml-knn-")
        try:
            build(X, y, mid, target, precision, d)
            lo = mid
        except FitError:
            hi = mid
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return lo


def measure(X, y, Xt, yt, n: int, target: str, precision: str, fused: bool = True) -> dict:
    d = tempfile.mkdtemp(prefix="tinycc-ml-knn-")
    passes = list(fixed_pipeline.FIXED_PASSES)
    try:
        if not fused:
            fixed_pipeline.FIXED_PASSES.remove("fuse_nearest")
        res = build(X, y, n, target, precision, d)
        out = res.output
        xq = quantise(Xt, out.input_scale, 16).astype(np.int16)
        run = run_on_target(target, [os.path.join(d, "knn.c")], os.path.join(d, "knn.h"), "knn", xq,
                            out.n_scores, out.input_ctype, out.score_ctype, extra_cflags=("-Werror",))
        want = run_fixed(res.graph, xq.astype(np.int64))
        exact = (np.array_equal(run.predictions, want["prediction"])
                 and np.array_equal(np.asarray(run.scores, np.int64), want["scores"]))
        counts = run.cycles if run.cycles is not None else run.instructions
        return {"target": target, "precision": precision + ("" if fused else " before"), "rows": n,
                "unit": "cycles" if run.cycles is not None
                else "instr", "mean": float(np.mean(counts)), "per_row": float(np.mean(counts)) / n,
                "flash": run.flash_bytes, "ram": run.ram_bytes, "stack": run.stack_bytes,
                "acc": float(np.mean(run.predictions == yt)), "exact": exact}
    finally:
        fixed_pipeline.FIXED_PASSES[:] = passes
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=40, help="test rows run per build")
    ap.add_argument("--targets", default="avr,cortex-m0")
    ap.add_argument("--quick", action="store_true", help="AVR: skip the search for the largest training set")
    args = ap.parse_args(argv)
    X, y, Xt, yt = letter26()
    Xt, yt = Xt[: args.rows], yt[: args.rows]
    plan = []
    for target in args.targets.split(","):
        if target == "avr":
            for precision in ("int16", "int8"):
                top = 800 if args.quick else largest_fitting(X, y, target, precision, 300, 2000)
                plan += [(target, precision, n, True) for n in (300, 700, top)]
            plan.append((target, "int16", 300, False))
        else:
            plan += [(target, "int16", n, fused) for fused in (True, False) for n in (250, 500, 1000)]
    table = [measure(X, y, Xt, yt, n, t, p, fused) for t, p, n, fused in plan]
    print(f"kNN k={K}, letter-26 (16 features, 26 classes): first n training rows; {len(Xt)} test rows each")
    print_table([("target", lambda r: r["target"], -10), ("prec", lambda r: r["precision"], -13),
                 ("train rows", lambda r: str(r["rows"]), 10),
                 ("per inference", lambda r: f"{r['mean']:>11.0f} {r['unit']:<6}", 18),
                 ("per row", lambda r: f"{r['per_row']:.1f}", 8), ("flash", lambda r: str(r["flash"]), 6),
                 ("RAM", lambda r: str(r["ram"]), 5), ("stack", lambda r: str(r["stack"]), 5),
                 ("RAM+stack", lambda r: str(r["ram"] + r["stack"]), 9), ("acc", lambda r: f"{r['acc']:.3f}", 6),
                 ("= run_fixed", lambda r: "yes" if r["exact"] else "NO", 11)], table)

if __name__ == "__main__":
    main()
