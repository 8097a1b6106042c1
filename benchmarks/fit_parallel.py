"""Wall time of `tinycc_ml.fit` on one worker process and on several, same search, same choice.

    python benchmarks/fit_parallel.py [--jobs 1 2] [--max-flash 8192] [--target avr] [--time-budget 0]

scikit-learn's digits (1797 rows, 64 features, 10 classes; 20% held out as the test rows), every family,
the ATmega328P with an 8 KB model flash limit, no time budget (0: both runs search everything, so their
choices can be compared). Prints a table: workers, wall seconds, candidates measured, the choice and its
test accuracy, then the speed-up over the first row, the machine's cores and its load average before and
after (other processes on the machine slow the parallel run most).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import tinycc_ml  # noqa: E402


def _comparable(res) -> str:
    data = res.as_json()
    data.pop("seconds")
    data["search"].pop("n_jobs")
    for c in data["candidates"]:
        c.pop("train_seconds")
    return json.dumps(data, sort_keys=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-flash", type=int, default=8192)
    parser.add_argument("--target", default="avr")
    parser.add_argument("--time-budget", type=float, default=0.0, help="seconds (default 0: none)")
    parser.add_argument("--families", default=None)
    args = parser.parse_args(argv)
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    load_before = os.getloadavg()
    rows, seen = [], {}
    for n in args.jobs:
        t0 = time.perf_counter()
        res = tinycc_ml.fit(X_train, y_train, target=args.target, max_flash=args.max_flash, X_test=X_test,
                            y_test=y_test, families=args.families, n_jobs=n,
                            time_budget=args.time_budget or None)
        wall = time.perf_counter() - t0
        measured = sum(c.status == "measured" for c in res.candidates)
        rows.append((n, wall, measured, len(res.candidates), res.chosen.label, res.verification["accuracy"],
                     res.chosen.flash_bytes))
        seen[n] = _comparable(res)
    load_after = os.getloadavg()
    print(f"fit on digits ({len(X_train)} training rows), target {args.target}, max flash {args.max_flash} B, "
          f"time budget {args.time_budget or 'none'}; {os.cpu_count()} cores")
    print(f"{'workers':>7} {'wall s':>8} {'measured':>9} {'candidates':>10} {'speed-up':>8}  chosen (test accuracy, "
          "flash)")
    for n, wall, measured, total, label, acc, flash in rows:
        print(f"{n:>7} {wall:>8.1f} {measured:>9} {total:>10} {rows[0][1] / wall:>8.2f}  {label} "
              f"({100 * acc:.2f}%, {flash:,} B)")
    if len(rows) > 1:
        print(f"wall time ratio {rows[-1][0]} workers / {rows[0][0]}: {rows[-1][1] / rows[0][1]:.2f}")
    same = len(set(seen.values())) == 1
    print(f"same candidates, figures and choice in every run: {'yes' if same else 'NO'}")
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(
        *load_before, *load_after))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
