"""How a forest's predict cost grows with its trees, int16 builds: digits (70/30 split, random_state=0)
RandomForestClassifier(n, max_depth=d, random_state=0) for n = 1, 5, 10, 20, 50 and d = 6, 8, on the ATmega328P where
the forest's assembly fits it, else on the ATmega1284P (simavr cycles, exact), and each against the straight line
through its 1- and 10-tree figures; then the Cortex-M4 (QEMU -icount instructions): digits RF(50, depth 6),
RF(10, depth 8), and with --letter letter-26 RandomForest(10) of full depth and of depth 6 (benchmarks/letter.py
finds the data; the full-depth forest's C takes about a minute to compile). Mean over the first ``--rows`` test
rows; every prediction compared with scikit-learn's.

    python benchmarks/forest_scaling.py [--rows 100] [--letter]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(1, str(HERE))

from results_table import write_table  # noqa: E402
from trees_predict import measure  # noqa: E402

from tinycc_ml.avr.backend import Atmega1284pBackend  # noqa: E402
from tinycc_ml.codegen.backend import register_backend  # noqa: E402
from tinycc_ml.errors import FitError  # noqa: E402

TREES = (1, 5, 10, 20, 50)
UNIT = {"avr": "cycles", "avr-atmega1284p": "cycles", "cortex-m4": "instructions"}


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    return X_tr, y_tr, X_te


def forest(n: int, depth: int | None, X, y):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=n, max_depth=depth, random_state=0).fit(X, y)


def run(clf, X_tr, X_te, target: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return measure(clf, X_tr, X_te, target, Path(tmp), False)


def avr_rows(rows: int) -> list[list[str]]:
    X_tr, y_tr, X_te = digits()
    out = []
    for depth in (6, 8):
        measured = {}
        for n in TREES:
            clf = forest(n, depth, X_tr, y_tr)
            try:
                m, target = run(clf, X_tr, X_te[:rows], "avr"), "avr"
            except FitError:  # not even its tables fit the ATmega328P
                m, target = {"kernels": ""}, "avr"
            if n > 1 and "trees-asm" not in m["kernels"]:  # the assembly does not fit the ATmega328P
                m, target = run(clf, X_tr, X_te[:rows], "avr-atmega1284p"), "avr-atmega1284p"
            measured[n] = (m, target)
            print(f"RF({n}, depth {depth}) {target}: {m}", file=sys.stderr, flush=True)
        slope = (measured[10][0]["mean"] - measured[1][0]["mean"]) / 9
        for n, (m, target) in measured.items():
            line = measured[1][0]["mean"] + slope * (n - 1)
            out.append([f"digits RF({n}, depth {depth})", target, UNIT[target], f"{m['mean']:,.0f}", f"{line:,.0f}",
                        f"{100 * (m['mean'] / line - 1):+.1f}%", f"{m['flash']:,} B",
                        "yes" if m["exact"] else "NO", m["kernels"]])
    return out


def m4_rows(rows: int, letter: bool) -> list[list[str]]:
    X_tr, y_tr, X_te = digits()
    models = [("digits RF(50, depth 6)", forest(50, 6, X_tr, y_tr), X_tr, X_te),
              ("digits RF(10, depth 8)", forest(10, 8, X_tr, y_tr), X_tr, X_te)]
    if letter:
        from letter import letter26

        L_tr, ly_tr, L_te, _ = letter26()
        models += [("letter-26 RF(10, depth 6)", forest(10, 6, L_tr, ly_tr), L_tr, L_te),
                   ("letter-26 RF(10)", forest(10, None, L_tr, ly_tr), L_tr, L_te)]
    out = []
    for label, clf, A_tr, A_te in models:
        m = run(clf, A_tr, A_te[:rows], "cortex-m4")
        print(f"{label} cortex-m4: {m}", file=sys.stderr, flush=True)
        out.append([label, "cortex-m4", "instructions", f"{m['mean']:,.0f}", "-", "-", f"{m['flash']:,} B",
                    "yes" if m["exact"] else "NO", m["kernels"]])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100, help="test rows measured (default 100)")
    ap.add_argument("--letter", action="store_true", help="the letter-26 forests on the Cortex-M4 too")
    args = ap.parse_args(argv)
    register_backend(Atmega1284pBackend)  # forests beyond the ATmega328P's flash
    rows = avr_rows(args.rows) + m4_rows(args.rows, args.letter)
    write_table("forest_scaling", ["model", "target", "unit", "mean", "line through 1 and 10 trees", "off the line",
                                   "flash", "exact", "kernels"], rows, script="benchmarks/forest_scaling.py --letter",
                align=[None, None, None, "right", "right", "right", "right", None, None])


if __name__ == "__main__":
    main()
