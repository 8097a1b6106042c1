"""How closely `tinycc_ml.fit` keeps its time budget: wall seconds of whole runs against the budget asked for.

    python benchmarks/fit_budget.py [--budgets 60 600] [--data letter] [--target avr] [--jobs 1] [--load 1]

Data: UCI letter-26 (16,000 training rows, 16 features, 26 classes; benchmarks/letter.py) or scikit-learn's
digits (``--data digits``: 1797 rows, 64 features, 10 classes); every family, the ATmega328P (the Uno).
``--load N`` runs N busy processes beside the search (a loaded machine, as CI's may be). Prints a table: budget,
wall seconds, their ratio, where they went (the search, the final check with its retraining, the outputs),
candidates measured and skipped, whether the winner was retrained, the load average before and after.
The tests check the budget's logic with an injected clock (tests/fake_clock.py); this measures the real thing.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import multiprocessing  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from sklearn.datasets import load_digits  # noqa: E402

import tinycc_ml  # noqa: E402


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=[60.0, 600.0])
    parser.add_argument("--data", choices=("letter", "digits"), default="letter")
    parser.add_argument("--target", default="avr")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the search")
    args = parser.parse_args(argv)
    if args.data == "letter":
        from letter import letter26

        X, y, X_test, y_test = letter26()
    else:
        X, y = load_digits(return_X_y=True)
        X_test = y_test = None
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    print(f"{'budget s':>9} {'wall s':>8} {'ratio':>6} {'search s':>9} {'final s':>8} {'outputs s':>10} "
          f"{'measured':>9} {'skipped':>8} {'refit':>6} load before/after")
    try:
        for budget in args.budgets:
            before = os.getloadavg()[0]
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as out:
                res = tinycc_ml.fit(X, y, target=args.target, time_budget=budget, n_jobs=args.jobs, out_dir=out,
                                    X_test=X_test, y_test=y_test)
            wall = time.perf_counter() - t0
            measured = sum(c.status == "measured" for c in res.candidates)
            skipped = sum(c.status == "skipped" for c in res.candidates)
            phases = res.phase_seconds
            print(f"{budget:9.0f} {wall:8.1f} {wall / budget:6.2f} {phases['search']:9.1f} "
                  f"{phases['final check']:8.1f} {phases['outputs']:10.1f} {measured:9d} {skipped:8d} "
                  f"{str(res.verification['refit']):>6} {before:.1f}/{os.getloadavg()[0]:.1f}", flush=True)
    finally:
        stop.set()
        for p in spinners:
            p.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
