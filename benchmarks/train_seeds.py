"""Old and new trainers over several seeds, where one seed's figure moved after issue 24: each
setting's test accuracy at seeds 0..n-1 for the trainer before issue 24 (``train_speed.BASE``,
loaded with ``git show``) and for the working tree, with the mean and its standard error, so that
a change of one seed's figure can be told from the seed-to-seed spread.

    python benchmarks/train_seeds.py [--only TEXT] [--seeds N] [--base REV]

Rows: ProtoNN on USPS-10 at 64 KB and on USPS 0-4 vs 5-9 at 16 KB and 2 KB, Bonsai on USPS 0-4 vs
5-9 at 2 KB (the model benchmarks/kernel_cycles.py compiles), each estimator at its defaults with
``random_state`` = the seed. ``--seeds`` replaces every row's seed count; ``--only`` keeps the rows
whose label contains the text. CPU seconds are the sum over the seeds (one BLAS thread).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_speed import BASE, load_data, measure, old_module  # noqa: E402

# (label, data, module file, class, settings, seeds)
ROWS = [
    ("ProtoNN USPS-10 64 KB", "usps", "protonn_trainer.py", "ProtoNNClassifier", dict(budget_bytes=64 * 1024), 3),
    ("ProtoNN USPS-2 16 KB", "usps2", "protonn_trainer.py", "ProtoNNClassifier", dict(budget_bytes=16 * 1024), 3),
    ("ProtoNN USPS-2 2 KB", "usps2", "protonn_trainer.py", "ProtoNNClassifier", dict(budget_bytes=2048), 5),
    ("Bonsai USPS-2 2 KB", "usps2", "bonsai_trainer.py", "BonsaiClassifier", dict(budget_bytes=2048), 20),
]


def data(name: str):
    if name == "usps2":  # USPS 0-4 vs 5-9, as the papers' binary USPS
        X, y, Xt, yt = load_data("usps")
        return X, (y >= 5).astype(int), Xt, (yt >= 5).astype(int)
    return load_data(name)


def summary(accs: list[float]) -> str:
    a = np.asarray(accs)
    se = a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else 0.0
    return f"{a.mean():6.2f} ± {se:4.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args()
    print(f"Test accuracy % over seeds, before ({args.base}) / after (working tree): mean ± standard error")
    head = f"{'setting':<24}{'seeds':>6}{'old %':>16}{'new %':>16}{'Δ pts':>7}{'old s':>8}{'new s':>8}  seed 0 old/new"
    print(head)
    print("-" * len(head))
    cache = {}
    for label, name, filename, clsname, settings, seeds in ROWS:
        if args.only not in label:
            continue
        n = args.seeds or seeds
        if name not in cache:
            cache[name] = data(name)
        X, y, Xt, yt = cache[name]
        old = getattr(old_module(args.base, filename), clsname)
        new = getattr(importlib.import_module(f"tinycc_ml.models.{filename[:-3]}"), clsname)
        result = {}
        for tag, cls in (("old", old), ("new", new)):
            runs = [measure(cls, dict(settings, random_state=seed), X, y, Xt, yt) for seed in range(n)]
            result[tag] = ([acc for acc, _ in runs], sum(s for _, s in runs))
        (oa, os_), (na, ns) = result["old"], result["new"]
        print(f"{label:<24}{n:>6}{summary(oa):>16}{summary(na):>16}{np.mean(na) - np.mean(oa):>+7.2f}"
              f"{os_:>8.1f}{ns:>8.1f}  {oa[0]:.2f} / {na[0]:.2f}", flush=True)
        print(f"{'':<30}old: {' '.join(f'{a:.2f}' for a in oa)}")
        print(f"{'':<30}new: {' '.join(f'{a:.2f}' for a in na)}", flush=True)


if __name__ == "__main__":
    main()
