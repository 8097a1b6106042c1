"""Where ProtoNN's full-batch "armijo" rule stops beating mini-batch "adam": the row threshold of
``step_rule="auto"`` (``AUTO_ARMIJO_ROWS`` in tinycc_ml/models/protonn_trainer.py).

    python benchmarks/step_rule_auto.py [--seeds 3] [--only small,usps,letter] [--ladder 250,...,4000] [--budget-kb 16]

Each row: test accuracy (%, mean over seeds) and CPU seconds of ``fit`` (``time.process_time``,
mean) for both rules, everything else at its defaults. The small scikit-learn sets (breast_cancer,
wine, iris, digits) at 16 KB (``--budget-kb``), a stratified 70/30 split per seed (split and model seeded alike);
USPS-10 and letter-26 at the same budget on a stratified subsample of the training rows per seed
(``--ladder``), scored on the whole test set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import RESULTS, write_table  # noqa: E402
from train_speed import measure as fit_and_score  # noqa: E402

from tinycc_ml.models.protonn_trainer import AUTO_ARMIJO_ROWS, ProtoNNClassifier  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"
BUDGET = 16 * 1024  # --budget-kb


def small_sets(seed: int):
    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine), ("iris", load_iris),
                         ("digits", load_digits)):
        X, y = loader(return_X_y=True)
        yield name, *train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)


def ladder(name: str, X, y, Xt, yt, sizes, seed: int):
    for rows in sizes:
        if rows >= len(X):
            yield f"{name} {len(X)}", X, Xt, y, yt
            return
        Xs, _, ys, _ = train_test_split(X, y, train_size=rows, random_state=seed, stratify=y)
        yield f"{name} {rows}", Xs, Xt, ys, yt


def large_sets(which: list[str], sizes, seed: int):
    if "usps" in which:
        with np.load(USPS, allow_pickle=False) as d:
            yield from ladder("USPS-10", d["X_train"], d["y_train"], d["X_test"], d["y_test"], sizes, seed)
    if "letter" in which:
        from letter import letter26

        yield from ladder("letter-26", *letter26(), sizes, seed)


def measure(rule: str, seed: int, X, y, Xt, yt, budget: int) -> tuple[float, float]:
    """(test accuracy %, CPU seconds of fit) of ProtoNN with this step rule."""
    return fit_and_score(ProtoNNClassifier, dict(budget_bytes=budget, step_rule=rule, random_state=seed), X, y, Xt, yt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", default="small,usps,letter")
    parser.add_argument("--ladder", default="250,500,750,1000,1500,2000,4000")
    parser.add_argument("--budget-kb", type=int, default=BUDGET // 1024)
    args = parser.parse_args()
    budget = args.budget_kb * 1024
    which = args.only.split(",")
    sizes = [int(s) for s in args.ladder.split(",")]
    results: dict[str, dict] = {}
    for seed in range(args.seeds):
        sets = list(small_sets(seed)) if "small" in which else []
        sets += list(large_sets(which, sizes, seed))
        for name, X, Xt, y, yt in sets:
            row = results.setdefault(name, {"rows": len(X), "armijo": [], "adam": []})
            for rule in ("armijo", "adam"):
                row[rule].append(measure(rule, seed, X, y, Xt, yt, budget))
    print(f"AUTO_ARMIJO_ROWS = {AUTO_ARMIJO_ROWS}; {args.seeds} seeds, {args.budget_kb} KB\n")
    table = []
    for name, row in results.items():
        (acc_a, sec_a), (acc_d, sec_d) = (np.mean(row[r], axis=0) for r in ("armijo", "adam"))
        pick = "armijo" if row["rows"] < AUTO_ARMIJO_ROWS else "adam"
        table.append([name.split(" ")[0], f"{row['rows']:,}", f"{acc_a:.2f}", f"{acc_d:.2f}", f"{acc_d - acc_a:+.2f}",
                      f"{sec_a:.2f}", f"{sec_d:.2f}", pick])
    # a run of every data set rewrites benchmarks/results/step_rule_auto.json (the docs' table); --only prints only
    full = args.only == parser.get_default("only")
    write_table("step_rule_auto", ["data", "train rows", "armijo %", "adam %", "Δ (adam − armijo)", "armijo CPU s",
                                   "adam CPU s", "auto picks"], table,
                script=f"benchmarks/step_rule_auto.py --seeds {args.seeds}", results_dir=RESULTS if full else None)

if __name__ == "__main__":
    main()
