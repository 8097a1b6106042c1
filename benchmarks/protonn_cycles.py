"""ProtoNN with USPS-10's shape (D=256, d̂=25, m=55, L=10, dense W) on the simulated ATmega328P and
Cortex-M0: cycles (AVR, simavr) / instructions (M0) per inference, per MAC, sizes, accuracy.

    python benchmarks/protonn_cycles.py [--rows 200] [--random]

The model: ProtoNNClassifier(projection_dim=25, n_prototypes=55) trained on USPS-10, or
random weights (--random); calibration from USPS training rows. The AVR float build does not
fit the ATmega328P's 32 KB: it is built and measured for the ATmega1284P (same AVR core and
instruction timings, 128 KB flash) under simavr, and marked so in the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulated import print_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.avr.backend import Atmega1284pBackend  # noqa: E402
from tinycc_ml.codegen.backend import register_backend  # noqa: E402
from tinycc_ml.ir.fixed import quantise  # noqa: E402
from tinycc_ml.models.protonn import ProtoNNModel  # noqa: E402
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"
D, DHAT, M, L = 256, 25, 55, 10


def make_model(X, y, random: bool) -> ProtoNNModel:
    if random:
        rng = np.random.default_rng(0)
        W = rng.normal(size=(DHAT, D)) / np.sqrt(D)
        P = X[rng.choice(len(X), M)] @ W.T
        Z = rng.normal(size=(L, M))
        return ProtoNNModel(W, P.T, Z, 0.5 / np.sqrt(DHAT))
    clf = ProtoNNClassifier(projection_dim=DHAT, n_prototypes=M, n_iter=20, random_state=0, verbose=0).fit(X, y)
    model = clf.to_model()
    assert model.W.shape == (DHAT, D) and model.B.shape == (DHAT, M), (model.W.shape, model.B.shape)
    return model


def macs(model: ProtoNNModel) -> int:
    return DHAT * D + DHAT * M + L * M


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--targets", default="avr,cortex-m0")
    args = ap.parse_args(argv)
    data = np.load(DATA)
    X, y, Xt, yt = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    t0 = time.time()
    model = make_model(X, y, args.random)
    print(f"model: {model.describe()} ({time.time() - t0:.1f} s); {macs(model)} MACs per inference")
    rows = Xt[: args.rows]
    float_pred = np.argmax(model.scores(rows), axis=1)
    register_backend(Atmega1284pBackend)
    table = []
    for target in args.targets.split(","):
        cycles_float = None
        for precision in ("float", "int16", "int8"):
            d = tempfile.mkdtemp(prefix="tinycc-ml-bench-")
            tgt = "avr-atmega1284p" if (target == "avr" and precision == "float") else target
            res = tinycc_ml.compile(model, target=tgt, precision=precision, calibration=X[:2000], out_dir=d,
                                    name="pn")
            out = res.output
            if precision == "float":
                x = rows.astype(np.float32)
            else:
                x = quantise(rows, out.input_scale, 16).astype(np.int16)
            run = run_on_target(tgt, [os.path.join(d, "pn.c")],
                                os.path.join(d, "pn.h"), "pn", x, out.n_scores, out.input_ctype, out.score_ctype,
                                extra_cflags=("-Werror",))
            counts = run.cycles if run.cycles is not None else run.instructions
            mean = float(np.mean(counts))
            if precision == "float":
                cycles_float = mean
            table.append({
                "target": target + (" (ATmega1284P: float does not fit 32 KB)" if tgt != target else ""),
                "precision": precision, "unit": "cycles" if run.cycles is not None else "instr",
                "mean": mean, "max": int(np.max(counts)), "per_mac": mean / macs(model),
                "flash": run.flash_bytes, "ram": run.ram_bytes, "stack": run.stack_bytes,
                "acc": float(np.mean(run.predictions == yt[: len(rows)])),
                "agree": float(np.mean(run.predictions == float_pred)),
                "speedup": cycles_float / mean if cycles_float else 1.0})
            shutil.rmtree(d, ignore_errors=True)
    print(f"\n{len(rows)} USPS-10 test rows; float model accuracy {np.mean(float_pred == yt[:len(rows)]):.3f}")
    print_table([("target", lambda r: r["target"], -48), ("prec", lambda r: r["precision"], -6),
                 ("per inference", lambda r: f"{r['mean']:>9.0f} {r['unit']:<5}", 15),
                 ("max", lambda r: str(r["max"]), 9), ("/MAC", lambda r: f"{r['per_mac']:.1f}", 6),
                 ("flash", lambda r: str(r["flash"]), 6), ("RAM", lambda r: str(r["ram"]), 5),
                 ("stack", lambda r: str(r["stack"]), 5), ("acc", lambda r: f"{r['acc']:.3f}", 6),
                 ("agree", lambda r: f"{r['agree']:.3f}", 6), ("vs float", lambda r: f"{r['speedup']:>7.1f}x", 8)],
                table)

if __name__ == "__main__":
    main()
