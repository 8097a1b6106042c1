"""Multi-class Bonsai on the simulated chips: cycles (ATmega328P, simavr) / instructions (Cortex-M0) per
inference, the model's reported flash against the firmware's, and tables stored once.

    python benchmarks/bonsai_cycles.py [--rows 20] [--budget 16384]

Data: UCI letter-26 (benchmarks/letter.py: 16 integer features 0-15, 26 classes, UCI's split: 16,000
training rows, 4,000 test; --synthetic: scikit-learn's make_classification with letter's shape, as this
script used before letter was available offline). Model: BonsaiClassifier(budget_bytes=16384,
random_state=0). "tables" counts constant arrays the emitter found
equal to one already stored (#define aliases: stored once, e.g. the W, V and tanh tables every tree level
reads); "dup in map" counts duplicated names (<name>_1) left in the firmware's symbol table. Every build is
checked bit-exact against run_fixed ("exact"); "test acc" is the integer build's accuracy on all 4,000 test
rows (run_fixed, which the chips match bit for bit).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulated import simulate_exact  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402


def letter_shaped():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=5000, n_features=16, n_informative=12, n_redundant=2, n_classes=26,
                               n_clusters_per_class=1, random_state=0)
    return X[:4000], y[:4000], X[4000:], y[4000:]


def measure(model, X, Xt, yt, target: str, precision: str, rows: int) -> dict:
    res = tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:1000], name="km")
    out = res.output
    run, exact = simulate_exact(res, Xt[:rows], target)
    counts = run.cycles if run.cycles is not None else run.instructions
    src = res.files["km.c"]
    aliases = len(re.findall(r"^#define km_\w+ km_\w+$", src, re.M))
    defined = re.findall(r"static const \w+ (km_\w+)\[", src)
    dups = sum(1 for name in defined if re.fullmatch(r".*_\d+", name) and re.sub(r"_\d+$", "", name) in defined)
    return {"mean": float(np.mean(counts)), "flash": run.flash_bytes, "ram": run.ram_bytes,
            "model_flash": out.const_bytes, "aliases": aliases, "dups": dups,
            "exact": exact, "acc": float(np.mean(run_fixed(res.graph, quantise(Xt, out.input_scale, 16)
                                                     .astype(np.int16))["prediction"] == yt))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--budget", type=int, default=16384)
    ap.add_argument("--synthetic", action="store_true", help="make_classification with letter's shape")
    args = ap.parse_args(argv)
    from letter import letter26

    from tinycc_ml.models.bonsai_trainer import BonsaiClassifier

    X, y, Xt, yt = letter_shaped() if args.synthetic else letter26()
    print("data:", "synthetic, letter's shape" if args.synthetic else "UCI letter-26", f"{X.shape} / {Xt.shape}")
    clf = BonsaiClassifier(budget_bytes=args.budget, random_state=0).fit(X, y)
    model = clf.to_model()
    print(f"{model.describe()}; float test accuracy {np.mean(model.predict(Xt) == yt):.3f}")
    unit = {"avr": "cycles", "cortex-m0": "instructions"}
    head = (f"{'target':<10} {'prec':<6} {'per inference':>14} {'unit':<12} {'model flash':>11} {'firmware':>8} "
            f"{'RAM':>5} {'tables':>6} {'dup in map':>10} {'exact':>5} {'test acc':>8}")
    print(f"\n{args.rows} test rows per build\n{head}\n{'-' * len(head)}")
    for target in ("avr", "cortex-m0"):
        for precision in ("int16", "int8"):
            r = measure(model, X, Xt, yt, target, precision, args.rows)
            print(f"{target:<10} {precision:<6} {r['mean']:>14,.0f} {unit[target]:<12} {r['model_flash']:>11} "
                  f"{r['flash']:>8} {r['ram']:>5} {r['aliases']:>6} {r['dups']:>10} {str(r['exact']):>5} "
                  f"{r['acc']:>8.2%}")


if __name__ == "__main__":
    main()
