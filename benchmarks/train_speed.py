"""Training time before / after issue 24, measured in one run: each family's trainer as it was at
commit ``BASE`` (loaded from ``git show BASE:<file>``) and as it is now, on letter-26 (UCI's
16,000 / 4,000 split, benchmarks/letter.py) and USPS-10, same data, same settings, one BLAS thread.

    python benchmarks/train_speed.py [--only npc,protonn,bonsai,snc] [--data letter,usps] [--base REV]

Printed per row: test accuracy and CPU seconds of ``fit`` (``time.process_time``: the machine may be
shared, wall time would measure the neighbours) for the old and the new trainer, the accuracy change
and the speed-up. Rows run old then new, one after the other, so both see the same machine load.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread: CPU seconds of one core, comparable run to run

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
USPS = ROOT / "data" / "usps" / "usps10.npz"
BASE = "39ed350"  # the trainers before issue 24 (the commit the work started from)

# (key, family, module file, class, settings): the same settings for the old and the new trainer;
# the defaults as each version has them (NPC's max_stages and ProtoNN's optimiser changed here)
ROWS = [
    ("npc", "nearest-prototype", "npc.py", "NearestPrototypeClassifier", "15/class, defaults",
     dict(prototypes_per_class=15, random_state=0)),
    ("protonn", "ProtoNN", "protonn_trainer.py", "ProtoNNClassifier", "64 KB, defaults",
     dict(budget_bytes=64 * 1024, random_state=0)),
    ("bonsai", "Bonsai", "bonsai_trainer.py", "BonsaiClassifier", "64 KB, defaults",
     dict(budget_bytes=64 * 1024, random_state=0)),
    ("snc", "SNC", "snc.py", "SNCClassifier", "4% compression", dict(compression=0.04, random_state=0)),
]


def _git_show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def _load(name: str, source: str, label: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = label
    sys.modules[name] = module
    exec(compile(source, label, "exec"), module.__dict__)  # noqa: S102 (our own repository's history)
    return module


def old_module(rev: str, filename: str) -> types.ModuleType:
    """The trainer module as it was at ``rev``; npc / snc get that revision's prototypes.py too."""
    prototypes = _load(f"_old_{rev}_prototypes", _git_show(rev, "tinycc_ml/models/prototypes.py"),
                       f"{rev}:prototypes.py")
    source = _git_show(rev, f"tinycc_ml/models/{filename}")
    source = source.replace("tinycc_ml.models.prototypes", prototypes.__name__)
    return _load(f"_old_{rev}_{filename[:-3]}", source, f"{rev}:{filename}")


def load_data(name: str):
    if name == "letter":
        from letter import letter26

        return letter26()
    with np.load(USPS, allow_pickle=False) as d:
        return d["X_train"], d["y_train"], d["X_test"], d["y_test"]


def measure(cls, settings, X, y, Xt, yt) -> tuple[float, float]:
    est = cls(**settings)
    start = time.process_time()
    est.fit(X, y)
    seconds = time.process_time() - start
    return 100 * float(est.score(Xt, yt)), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="npc,protonn,bonsai,snc")
    parser.add_argument("--data", default="letter,usps")
    parser.add_argument("--base", default=BASE, help=f"git revision of the old trainers (default {BASE})")
    args = parser.parse_args()
    import importlib

    only, datasets = args.only.split(","), args.data.split(",")
    print(f"Training before ({args.base}) / after (working tree): test accuracy %, CPU seconds of fit, one thread")
    head = (f"{'data':<8}{'family':<19}{'setting':<20}{'old %':>7}{'new %':>7}{'Δ pts':>7}"
            f"{'old s':>8}{'new s':>8}{'speed-up':>9}")
    print(head)
    print("-" * len(head))
    for data in datasets:
        X, y, Xt, yt = load_data(data)
        for key, family, filename, clsname, setting, settings in ROWS:
            if key not in only:
                continue
            old = getattr(old_module(args.base, filename), clsname)
            new = getattr(importlib.import_module(f"tinycc_ml.models.{filename[:-3]}"), clsname)
            old_acc, old_s = measure(old, settings, X, y, Xt, yt)
            new_acc, new_s = measure(new, settings, X, y, Xt, yt)
            print(f"{data:<8}{family:<19}{setting:<20}{old_acc:>7.2f}{new_acc:>7.2f}{new_acc - old_acc:>+7.2f}"
                  f"{old_s:>8.1f}{new_s:>8.1f}{old_s / new_s:>8.1f}x", flush=True)


if __name__ == "__main__":
    main()
