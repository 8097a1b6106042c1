"""letter-26 on an Arduino Uno: the default RandomForest is refused with the forests that fit the sketch;
each one the message names is trained, compiled as an Arduino library, built with arduino-mk and the real
Arduino core for the Uno, and run in simavr.

    python benchmarks/uno_advice.py [--precision int16]

letter-26 comes from Debian's r-cran-mlbench (benchmarks/letter.py). The sketch stores 8 test rows and prints
each row's class over the core's Serial; the run's classes must equal the host build's (the same C). Test
accuracy is the host build's on all 4,000 test rows (the AVR build computes the same integers). Flash and RAM
are the real sketch's (avr-size of the ELF: text + data, data + bss), beside what the fit check estimated.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from letter import letter26  # noqa: E402
from results_table import write_table  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.arduino_sketch import build_uno_sketch  # noqa: E402
from tests.conftest import simavr_uart_lines  # noqa: E402
from tinycc_ml.errors import FitError  # noqa: E402

ADVICE = re.compile(r"(\d+) trees of at most (\d+) leaves \(max_leaf_nodes=\d+, or max_depth=(\d+)\)")
STORED_ROWS = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="int16", choices=["int16", "int8", "float"])
    args = parser.parse_args()
    Xtr, ytr, Xte, yte = letter26()
    rows = Xte[:STORED_ROWS]
    default = RandomForestClassifier(random_state=0).fit(Xtr, ytr)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-uno-") as tmp:
        tmp = Path(tmp)
        try:
            tinycc_ml.compile(default, target="avr", precision=args.precision, calibration=Xtr[:2000],
                              layout="arduino", examples=rows, name="letters", out_dir=tmp / "refused")
            print("the default forest fits: nothing to advise")
            return 1
        except FitError as exc:
            message = str(exc)
        print(f"default RandomForestClassifier() on letter-26 (test accuracy {default.score(Xte, yte):.2%}):\n"
              f"  {message}\n")
        table = []
        for i, (trees, leaves, depth) in enumerate(ADVICE.findall(message)):
            for knob, value in (("max_leaf_nodes", int(leaves)), ("max_depth", int(depth))):
                model = RandomForestClassifier(n_estimators=int(trees), random_state=0, **{knob: value}).fit(Xtr, ytr)
                name = f"letters{i}{knob[4]}"
                result = tinycc_ml.compile(model, target="avr", precision=args.precision, calibration=Xtr[:2000],
                                           layout="arduino", examples=rows, example_labels=yte[:STORED_ROWS],
                                           name=name, out_dir=tmp / "libs")
                flash, ram, elf = build_uno_sketch(tmp / "libs", name, tmp / f"sketch-{name}")
                lines = simavr_uart_lines(elf, lambda ls: len([ln for ln in ls if "row " in ln]) >= STORED_ROWS,
                                          timeout=120)
                on_uno = [int(p) for p in re.findall(r"row \d+: predicted (\d+)", "".join(lines))]
                host = tinycc_ml.compile(model, precision=args.precision, calibration=Xtr[:2000]).load()
                equal = on_uno == host.predict_index(rows).tolist()
                fit = result.report["fit"]
                table.append([f"RandomForest({trees}, {knob}={value})", f"{model.score(Xte, yte):.2%}",
                              f"{np.mean(host.predict(Xte) == yte):.2%}", f"{fit['flash_bytes']:,}", f"{flash:,}",
                              f"{fit['ram_bytes']:,}", f"{ram:,}",
                              f"{sum(on_uno == np.asarray(host.predict_index(rows)))}/{STORED_ROWS}"
                              if len(on_uno) == STORED_ROWS else f"{len(on_uno)} printed",
                              "yes" if equal and flash <= 32256 else "NO"])
        write_table("uno_advice", ["following the advice", "scikit-learn", f"C {args.precision}",
                                   "est. flash B", "sketch flash B", "est. RAM B", "sketch RAM B",
                                   "Uno rows = host", "builds, fits, runs"], table,
                    script=f"benchmarks/uno_advice.py --precision {args.precision}",
                    align=[None] + ["right"] * 8)
    return 0 if all(row[-1] == "yes" for row in table) else 1


if __name__ == "__main__":
    sys.exit(main())
