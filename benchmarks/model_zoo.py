"""Every model family trained on USPS, compiled, and measured: one table (issue: trainers).

    python benchmarks/model_zoo.py [--quick] [--sim-rows N]

Per row: test-split accuracy of the float model, of the int16 host C build and their difference,
model bytes as the papers count them (4 per parameter, 4 per stored sparse index), training
seconds, flash of the int16 constants, and whether the int16 build fits the ATmega328P and the
nRF51 Cortex-M0 (compiled for each; a refusal means it does not fit). With --sim-rows N > 0 the
int16 build also runs on N test rows in the simulators (AVR: simavr, M0: QEMU) and the agreement
with the host build is printed (it is bit-exact by construction; this shows it).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # threaded BLAS spin-waits on a shared 2-core machine

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier  # noqa: E402
from tinycc_ml.models.knn import KNNClassifier  # noqa: E402
from tinycc_ml.models.npc import NearestPrototypeClassifier  # noqa: E402
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier  # noqa: E402
from tinycc_ml.models.snc import SNCClassifier  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"

ROWS = [
    ("usps10", "ProtoNN", "budget 64 KB", lambda: ProtoNNClassifier(budget_bytes=64 * 1024, random_state=0, verbose=0)),
    ("usps10", "nearest-prototype", "15/class, exp loss",
     lambda: NearestPrototypeClassifier(prototypes_per_class=15, loss="exponential", random_state=0)),
    ("usps10", "SNC", "4% compression", lambda: SNCClassifier(compression=0.04, random_state=0)),
    ("usps10", "kNN", "k=1, full train set", lambda: KNNClassifier(k=1)),
    ("usps10", "Bonsai", "defaults", lambda: BonsaiClassifier(random_state=0)),
    ("usps-bin", "ProtoNN", "budget 2 KB", lambda: ProtoNNClassifier(budget_bytes=2048, random_state=0, verbose=0)),
    ("usps-bin", "ProtoNN", "budget 16 KB",
     lambda: ProtoNNClassifier(budget_bytes=16 * 1024, random_state=0, verbose=0)),
    ("usps-bin", "Bonsai", "budget 2 KB", lambda: BonsaiClassifier(budget_bytes=2048, random_state=0)),
    ("usps-bin", "Bonsai", "budget 16 KB", lambda: BonsaiClassifier(budget_bytes=16 * 1024, random_state=0)),
]


def data(name: str, quick: bool):
    d = np.load(USPS)
    X, y, Xt, yt = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    if name == "usps-bin":
        y, yt = (y >= 5).astype(int), (yt >= 5).astype(int)
    if quick:
        X, y = X[::4], y[::4]
    return X, y, Xt, yt


def fits(model, target: str, X) -> str:
    try:
        tinycc_ml.compile(model, target=target, precision="int16", calibration=X, search=False)
        return "yes"
    except TinyccError as exc:
        return "no" if "fit" in str(exc) or "flash" in str(exc) or "RAM" in str(exc) else f"error: {exc}"[:40]


def on_target(result, target: str, Xt, rows: int):
    from tinycc_ml.ir.fixed import quantise, run_fixed
    from tinycc_ml.runtime.simulate import run_on_target

    out = result.output
    Xq = quantise(Xt[:rows], out.input_scale, 16).astype(np.int16)
    with __import__("tempfile").TemporaryDirectory() as tmp:
        for name, text in result.files.items():
            (Path(tmp) / name).write_text(text)
        run = run_on_target(target, [Path(tmp) / f"{result.prefix}.c"], Path(tmp) / f"{result.prefix}.h",
                            result.prefix, Xq, out.n_scores, out.input_ctype, out.score_ctype)
    expected = run_fixed(result.graph, Xq)["prediction"]
    return np.mean(run.predictions == expected), run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="train on a quarter of the training rows")
    parser.add_argument("--sim-rows", type=int, default=0, help="test rows to run in the simulators")
    args = parser.parse_args()
    head = (f"{'data':<9}{'model':<18}{'setting':<21}{'float %':>8}{'int16 %':>8}{'loss':>6}{'bytes':>10}"
            f"{'train s':>8}{'flash16':>9}{'AVR':>5}{'M0':>5}")
    print(head)
    print("-" * len(head))
    for dataset, family, setting, make in ROWS:
        X, y, Xt, yt = data(dataset, args.quick)
        est = make()
        start = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - start
        model = est.to_model()
        float_acc = 100 * np.mean(model.predict(Xt) == yt)
        result = tinycc_ml.compile(model, precision="int16", calibration=X, name="zoo")
        int_acc = 100 * np.mean(result.load().predict(Xt) == yt)
        # constants alone beyond the chip's flash: no need to build firmware to know
        big = result.report["const_bytes"]
        avr = "no" if big > 32 * 1024 else fits(model, "avr", X)
        m0 = "no" if big > 256 * 1024 else fits(model, "cortex-m0", X)
        print(f"{dataset:<9}{family:<18}{setting:<21}{float_acc:>8.2f}{int_acc:>8.2f}{float_acc - int_acc:>6.2f}"
              f"{est.model_bytes:>10}{seconds:>8.1f}{result.report['const_bytes']:>9}{avr:>5}{m0:>5}", flush=True)
        if args.sim_rows:
            for target, ok in (("avr", avr), ("cortex-m0", m0)):
                if ok == "yes":
                    res = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, name="zoo")
                    agree, run = on_target(res, target, Xt, args.sim_rows)
                    count = run.cycles if run.cycles is not None else run.instructions
                    unit = "cycles" if run.cycles is not None else "instructions"
                    print(f"    {target}: {100 * agree:.1f}% of {args.sim_rows} rows equal the host int16 build; "
                          f"{np.mean(count):,.0f} {unit}/inference, flash {run.flash_bytes}, "
                          f"stack {run.stack_bytes} B", flush=True)


if __name__ == "__main__":
    main()
