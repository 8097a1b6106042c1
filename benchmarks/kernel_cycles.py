"""Sparse, distance and Cortex-M0 kernels on the papers' own models: exact cycles (ATmega328P, simavr) and
instructions (Cortex-M0, QEMU/unicorn) per inference, with per-kernel breakdowns and the cost model's
predictions.

    python benchmarks/kernel_cycles.py [--rows 100] [--models seedot,dense,bonsai,npc] [--targets avr,cortex-m0]

Models:
  seedot  SeeDot's sparse USPS-10 ProtoNN shape: D=256, d^=25, m=55, L=10, W 30% dense (1,920 non-zeros),
          random weights (seed 0), prototypes projected from training rows
  dense   the same shape with a dense W (the Cortex-M0 target: float and int16 in one run)
  bonsai  BonsaiClassifier(budget_bytes=2048) trained on USPS 0-4 vs 5-9
  npc     NearestPrototypeClassifier(prototypes_per_class=2) trained on USPS-10

Every build is checked bit-exact against tinycc_ml.ir.fixed.run_fixed on the rows run (column "exact").
Per-kernel tables: cycles (AVR) / instructions (M0) of each function in one predict call (simavr
per-address profile, unicorn per-block profile), and for matrices the cost model chose a kernel for,
its predicted cost next to the measured one.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from avr_profile import avr_profile  # noqa: E402
from m0_profile import m0_profile  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.models.protonn import ProtoNNModel  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"
D, DHAT, M, L = 256, 25, 55, 10


def usps(binary: bool = False):
    d = np.load(DATA)
    X, y, Xt, yt = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    if binary:
        y, yt = (y >= 5).astype(int), (yt >= 5).astype(int)
    return X, y, Xt, yt


def protonn_shape(X, nonzeros: int | None) -> ProtoNNModel:
    rng = np.random.default_rng(0)
    W = rng.normal(size=(DHAT, D)) / np.sqrt(D)
    if nonzeros is not None:
        mask = np.zeros(DHAT * D, bool)
        mask[rng.choice(DHAT * D, nonzeros, replace=False)] = True
        W = W * mask.reshape(DHAT, D)
    P = X[rng.choice(len(X), M)] @ W.T
    return ProtoNNModel(W, P.T, rng.normal(size=(L, M)), 0.5 / np.sqrt(DHAT))


def make(name: str):
    """(model, X_train, X_test, y_test, precisions)."""
    if name in ("seedot", "dense"):
        X, _, Xt, yt = usps()
        return protonn_shape(X, 1920 if name == "seedot" else None), X, Xt, yt
    if name == "bonsai":
        from tinycc_ml.models.bonsai_trainer import BonsaiClassifier

        X, y, Xt, yt = usps(binary=True)
        return BonsaiClassifier(budget_bytes=2048, random_state=0).fit(X, y).to_model(), X, Xt, yt
    if name == "npc":
        from tinycc_ml.models.npc import NearestPrototypeClassifier

        X, y, Xt, yt = usps()
        return NearestPrototypeClassifier(prototypes_per_class=2, random_state=0).fit(X, y).to_model(), X, Xt, yt
    raise SystemExit(f"unknown model {name}")


TARGETS = {"seedot": ("avr", "cortex-m0"), "dense": ("cortex-m0",), "bonsai": ("avr", "cortex-m0"),
           "npc": ("avr", "cortex-m0")}
PRECISIONS = {"seedot": ("int16", "int8"), "dense": ("float", "int16", "int8"), "bonsai": ("int16",),
              "npc": ("int16", "int8")}


def measure(model, X, Xt, yt, target: str, precision: str, rows: int) -> dict:
    calib = X[:2000]
    res = tinycc_ml.compile(model, target=target, precision=precision, calibration=calib, name="km")
    out = res.output
    x = Xt[:rows].astype(np.float32) if precision == "float" else quantise(Xt[:rows], out.input_scale, 16).astype(
        np.int16)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-kbench-") as tmp:
        for fname, text in res.files.items():
            Path(tmp, fname).write_text(text)
        run = run_on_target(target, [Path(tmp) / "km.c"], Path(tmp) / "km.h", "km", x, out.n_scores,
                            out.input_ctype, out.score_ctype, extra_cflags=("-Werror",))
    counts = run.cycles if run.cycles is not None else run.instructions
    row = {"target": target, "precision": precision, "mean": float(np.mean(counts)), "max": int(np.max(counts)),
           "flash": run.flash_bytes, "ram": run.ram_bytes, "acc": float(np.mean(run.predictions == yt[:rows])),
           "exact": None, "kernels": res.report.get("kernels", []), "profile": [],
           "node_functions": res.output.node_functions}
    if precision != "float":
        want = run_fixed(res.graph, x)
        row["exact"] = bool(np.array_equal(run.scores, want["scores"])
                            and np.array_equal(run.predictions, want["prediction"]))
        xq_all = quantise(Xt, out.input_scale, 16).astype(np.int16)
        row["acc_all"] = float(np.mean(run_fixed(res.graph, xq_all)["prediction"] == yt))
        prof = avr_profile if target == "avr" else m0_profile
        row["profile"] = prof(res.files, "km", x[:2], out.n_scores, out.input_ctype, out.score_ctype)
    return row


def kernel_of(symbol: str, kernels: list[dict], node_functions: dict) -> dict | None:
    """The cost model's choice whose mat-vec calls the profiled function ``symbol`` (the clamp included)."""
    return next((k for k in kernels if symbol in node_functions.get(k.get("node"), [])), None)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--models", default="seedot,dense,bonsai,npc")
    ap.add_argument("--targets", default="avr,cortex-m0")
    args = ap.parse_args(argv)
    wanted = set(args.targets.split(","))
    results = []
    for name in args.models.split(","):
        t0 = time.time()
        model, X, Xt, yt = make(name)
        float_acc = float(np.mean(model.predict(Xt) == yt))
        print(f"{name}: {model.describe()}; float accuracy {float_acc:.4f} ({time.time() - t0:.0f} s)", flush=True)
        for target in TARGETS[name]:
            if target not in wanted:
                continue
            for precision in PRECISIONS[name]:
                r = measure(model, X, Xt, yt, target, precision, args.rows)
                r.update(model=name, float_acc=float_acc)
                results.append(r)
                print(f"  {target} {precision}: {r['mean']:,.0f}", flush=True)
    print(f"\n{args.rows} USPS test rows per build; cycles (avr, simavr) / instructions (cortex-m0, QEMU) "
          "per predict call; exact = scores and predictions equal run_fixed's")
    head = (f"{'model':<8} {'target':<10} {'prec':<6} {'per inference':>14} {'max':>8} {'flash':>6} {'RAM':>5} "
            f"{'exact':>5} {'acc(all test)':>13} {'float acc':>9} {'vs float':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        base = next((b["mean"] for b in results if b["model"] == r["model"] and b["target"] == r["target"]
                     and b["precision"] == "float"), None)
        ratio = f"{base / r['mean']:.1f}x" if base else ""
        acc = f"{r['acc_all']:.4f}" if "acc_all" in r else f"{r['acc']:.4f}*"
        print(f"{r['model']:<8} {r['target']:<10} {r['precision']:<6} {r['mean']:>14,.0f} {r['max']:>8,} "
              f"{r['flash']:>6} {r['ram']:>5} {str(r['exact'] if r['exact'] is not None else '-'):>5} "
              f"{acc:>13} {r['float_acc']:>9.4f} {ratio:>8}")
    print("(acc*: on the rows run only)")
    print("\nPer-kernel breakdown of one predict call (top functions; the model prefix km_ dropped)")
    for r in results:
        if not r["profile"]:
            continue
        total = sum(c for _, c in r["profile"])
        print(f"\n{r['model']} {r['target']} {r['precision']}: {total:,.0f} in all")
        for sym, c in r["profile"][:8]:
            k = kernel_of(sym, r["kernels"], r["node_functions"])
            note = f"  {k['matrix']}: predicted {k['predicted_cycles']:,} (with its input clamp)" if k else ""
            print(f"  {sym.removeprefix('km_'):<40} {c:>10,.0f} {100 * c / total:>5.1f}%{note}")
    chosen = [(r, k) for r in results for k in r["kernels"]]
    if chosen:
        print("\nCost model choices (predicted cycles/instructions and flash of each candidate)")
        for r, k in chosen:
            cands = ", ".join(f"{n} {v['cycles']:,}/{v['flash']} B" if "cycles" in v else f"{n}: {v['unavailable']}"
                              for n, v in k["candidates"].items())
            print(f"  {r['model']} {r['target']} {r['precision']} {k['matrix']} {k['shape']} nnz {k['nonzeros']}: "
                  f"{k['kernel']}  [{cands}]")


if __name__ == "__main__":
    main()
