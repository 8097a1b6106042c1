"""The sparse/dense choice at every density: a random W (25 x 256, ProtoNN's projection on USPS-10) at 40,
49, 50, 60, 70, 80 and 100% non-zeros, on the ATmega328P (simavr cycles) and the Cortex-M0 (QEMU/unicorn
instructions), int16 and int8.

    python benchmarks/density_cycles.py [--rows 20] [--targets avr,cortex-m0] [--precisions int16,int8]
                                        [--model linear,protonn]

linear: scores = W x (a LinearModel: the input clamp, the mat-vec, the argmax; nothing else depends on W,
so the cycles are the mat-vec's). protonn: the whole ProtoNN (D=256, d^=25, m=55, L=10) with that W as
its projection; its distances and similarities depend on the projected values, so its totals move by a
few hundred cycles from model to model whatever the kernel (checks are made on the linear model).

Below tinycc_ml.models.lowering.SPARSE_DENSITY (50%) W is stored sparse (CSC) by the lowering, from 50% on
dense; either way the backend's cost model (tinycc_ml/avr/cost.py, tinycc_ml/arm/m0_cost.py) picks the kernel: the
sparse asm kernel, or the dense asm kernel with the input clamp fused. The masks are nested (each density's
non-zeros include the lower one's) and the weights, prototypes and scores are the same at every density, so
the columns compare like with like. Every build is checked bit-exact against run_fixed (column "exact").
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulated import simulate_exact  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.models.linear import LinearModel  # noqa: E402
from tinycc_ml.models.protonn import ProtoNNModel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"
D, DHAT, M, L = 256, 25, 55, 10
DENSITIES = (0.40, 0.49, 0.50, 0.60, 0.70, 0.80, 1.00)
TOLERANCE = 0.002


def model_at(X, density: float, kind: str = "protonn"):
    """The same random model at every density: only the mask of W changes (nested masks)."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(DHAT, D)) / np.sqrt(D)
    order = np.argsort(rng.random(DHAT * D))  # the entries kept at density p: the first round(p n) of order
    rows = rng.choice(len(X), M)
    Z = rng.normal(size=(L, M))
    mask = np.zeros(DHAT * D, bool)
    mask[order[:round(density * DHAT * D)]] = True
    Wm = W * mask.reshape(DHAT, D)
    if kind == "linear":
        return LinearModel(Wm)
    return ProtoNNModel(Wm, (X[rows] @ Wm.T).T, Z, 0.5 / np.sqrt(DHAT))


def measure(model, X, Xt, target: str, precision: str, rows: int) -> dict:
    res = tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:2000], name="km")
    run, exact = simulate_exact(res, Xt[:rows], target)
    counts = run.cycles if run.cycles is not None else run.instructions
    w = next((k for k in res.report.get("kernels", []) if k["matrix"].startswith("W")), None)
    stored = next(res.graph.op(n) for n in res.graph.order() if n.startswith("W") and
                  res.graph.op(n) in ("const", "sparse_const"))
    return {"mean": float(np.mean(counts)), "flash": run.flash_bytes, "ram": run.ram_bytes, "exact": exact,
            "kernel": w["kernel"] if w else "dense (no choice)", "stored": stored,
            "predicted": w["predicted_cycles"] if w else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--targets", default="avr,cortex-m0")
    ap.add_argument("--precisions", default="int16,int8")
    ap.add_argument("--model", default="linear,protonn")
    args = ap.parse_args(argv)
    d = np.load(DATA)
    X, Xt = d["X_train"], d["X_test"]
    unit = {"avr": "cycles", "cortex-m0": "instructions"}
    ok = True
    for kind, target, precision in [(k, t, p) for k in args.model.split(",") for t in args.targets.split(",")
                                     for p in args.precisions.split(",")]:
        if True:
            results = [(p, measure(model_at(X, p, kind), X, Xt, target, precision, args.rows)) for p in DENSITIES]
            dense = results[-1][1]["mean"]
            print(f"\n{kind} {target} {precision}: {unit[target]} per inference (mean of {args.rows} USPS test rows)")
            head = (f"{'W density':>9} {'stored':>12} {'kernel for W':>18} {'predicted':>9} {unit[target]:>13} "
                    f"{'vs dense':>8} {'flash':>6} {'RAM':>5} {'exact':>5}")
            print(head)
            print("-" * len(head))
            for p, r in results:
                pred = f"{r['predicted']:,}" if r["predicted"] else "-"
                print(f"{100 * p:>8.0f}% {r['stored']:>12} {r['kernel']:>18} {pred:>9} {r['mean']:>13,.0f} "
                      f"{r['mean'] / dense:>8.3f} {r['flash']:>6} {r['ram']:>5} {str(r['exact']):>5}")
            means = [r["mean"] for _, r in results]
            # the argmax's branches depend on the scores: the same kernel moves by up to TOLERANCE with the data
            mono = all(a <= b * (1 + TOLERANCE) for a, b in zip(means, means[1:]))
            below = all(m <= dense * (1 + TOLERANCE) for m in means)
            exact = all(r["exact"] for _, r in results)
            ok &= exact and (kind != "linear" or (mono and below))
            print(f"monotone in density: {mono}; every build at or below the dense build: {below} "
                  f"(within {100 * TOLERANCE:.1f}%: the argmax's data-dependent branches); all bit-exact: {exact}")
    print("\nall checks hold (linear: monotone, at or below dense; all: bit-exact)" if ok else "\nA CHECK FAILED")


if __name__ == "__main__":
    main()
