"""Tree predict cost on the simulated chips, int16 builds: ATmega328P cycles (simavr, exact) and Cortex-M4 /
Cortex-M0 instructions (QEMU -icount, exact), mean over every test row, the whole firmware's flash, and whether
every prediction equals scikit-learn's. Models: digits (70/30 split, random_state=0) DecisionTreeClassifier
(max_depth=8) and RandomForestClassifier(10, max_depth=8), letter-26 (UCI's 16,000/4,000 split, when
benchmarks/letter.py finds it) DecisionTreeClassifier(random_state=0) and RandomForestClassifier(50, max_depth=6)
on the ATmega1284P (its first 500 test rows); ``predict_float`` rows run
<prefix>_predict_float on the float32 test rows (the quantiser included).

The "before" columns are another checkout's measurements (``--package DIR --save-before``: the tinycc_ml of DIR
measured into benchmarks/results/trees_predict_before.json); a plain run measures this checkout and writes the
table benchmarks/results/trees_predict.json.

    python benchmarks/trees_predict.py --package /path/to/main --save-before
    python benchmarks/trees_predict.py [--only RandomForest]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _package_dir(argv) -> Path:
    """--package's directory (read before tinycc_ml is imported), else this checkout."""
    if "--package" in argv:
        return Path(argv[argv.index("--package") + 1]).resolve()
    return HERE.parent


sys.path.insert(0, str(_package_dir(sys.argv)))
sys.path.insert(1, str(HERE))

from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.avr.backend import Atmega1284pBackend  # noqa: E402
from tinycc_ml.codegen.backend import register_backend  # noqa: E402
from tinycc_ml.ir.fixed import quantise  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

BEFORE = HERE / "results" / "trees_predict_before.json"
UNIT = {"avr": "cycles", "avr-atmega1284p": "cycles", "cortex-m4": "instructions", "cortex-m0": "instructions"}
# <prefix>_predict_float (-D<PREFIX>_WITH_FLOAT) under the harness: float rows in, the model's scores out
FLOAT_H = """#include <stdint.h>
int w_predict(const float *x);
void w_scores(const float *x, {s_t} *scores);
"""
FLOAT_C = """#include "w.h"
#include "m.h"
int w_predict(const float *x) {{ return m_predict_float(x); }}
void w_scores(const float *x, {s_t} *scores) {{ {in_t} q[{n}]; m_quantise(x, q); m_scores(q, scores); }}
"""


def models(only: str = ""):
    """(label, classifier, training rows, test rows, targets) of the models whose label contains ``only``."""
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    if only in "digits DecisionTree(depth 8)":
        yield ("digits DecisionTree(depth 8)", DecisionTreeClassifier(max_depth=8, random_state=0).fit(X_tr, y_tr),
               X_tr, X_te, ("avr", "cortex-m4"))
    letter_models = [label for label in ("letter-26 DecisionTree", "letter-26 RandomForest(50, depth 6)")
                     if only in label]
    try:
        from letter import letter26

        L_tr, ly_tr, L_te, _ = letter26() if letter_models else (None,) * 4
    except (FileNotFoundError, ImportError) as exc:
        print(f"letter-26 skipped: {exc}", file=sys.stderr)
        letter_models = []
    if "letter-26 DecisionTree" in letter_models:
        yield ("letter-26 DecisionTree", DecisionTreeClassifier(random_state=0).fit(L_tr, ly_tr), L_tr, L_te,
               ("avr", "cortex-m4"))
    if "letter-26 RandomForest(50, depth 6)" in letter_models:  # the first 500 test rows: 26 classes on simavr
        yield ("letter-26 RandomForest(50, depth 6)",
               RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0).fit(L_tr, ly_tr), L_tr,
               L_te[:500], ("avr-atmega1284p",))
    if only in "digits RandomForest(10, depth 8)":
        yield ("digits RandomForest(10, depth 8)",
               RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X_tr, y_tr), X_tr, X_te,
               ("avr", "cortex-m4", "cortex-m0"))


def measure(clf, X_tr, X_te, target: str, work: Path, float_input: bool) -> dict:
    result = tinycc_ml.compile(clf, target=target, precision="int16", name="m", out_dir=work, calibration=X_tr)
    o = result.output
    if float_input:
        fmt = dict(s_t=o.score_ctype, in_t=o.input_ctype, n=o.input_dim)
        (work / "w.h").write_text(FLOAT_H.format(**fmt))
        (work / "w.c").write_text(FLOAT_C.format(**fmt))
        run = run_on_target(target, [str(work / "m.c"), str(work / "w.c")], str(work / "w.h"), "w",
                            X_te.astype(np.float32), o.n_scores, "float", o.score_ctype,
                            extra_cflags=("-DM_WITH_FLOAT",))
    else:
        x = quantise(X_te, o.input_scale, 16).astype(np.int16)
        run = run_on_target(target, [str(work / "m.c")], str(work / "m.h"), "m", x, o.n_scores, o.input_ctype,
                            o.score_ctype)
    count = run.cycles if run.cycles is not None else run.instructions
    kernels = ",".join(sorted({k["kernel"] for k in result.report.get("kernels", [])}))
    return {"mean": float(np.mean(count)), "max": int(np.max(count)), "flash": int(run.flash_bytes),
            "exact": bool(np.array_equal(clf.classes_[run.predictions], clf.predict(X_te))), "kernels": kernels,
            "dim": int(o.input_dim)}


def measure_all(only: str = "") -> dict:
    """Every (model, target, entry point): predict everywhere, predict_float but on the Cortex-M0 and for the
    letter-26 tree."""
    out = {}
    for label, clf, X_tr, X_te, targets in models(only):
        for target in targets:
            for entry in ("predict", "predict_float"):
                if entry == "predict_float" and (target == "cortex-m0" or label == "letter-26 DecisionTree"):
                    continue
                with tempfile.TemporaryDirectory() as tmp:
                    m = measure(clf, X_tr, X_te, target, Path(tmp), entry == "predict_float")
                out[f"{label}|{target}|{entry}"] = m
                print(f"{label} {target} {entry}: {m}", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", help="the checkout whose tinycc_ml to measure (default: this one)")
    ap.add_argument("--save-before", action="store_true", help=f"write the measurements to {BEFORE.name}")
    ap.add_argument("--only", default="", help="only the models whose label contains this (prints, writes nothing)")
    args = ap.parse_args(argv)
    register_backend(Atmega1284pBackend)  # forests beyond the ATmega328P's flash
    now = measure_all(args.only)
    if args.save_before:
        BEFORE.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        return
    before = json.loads(BEFORE.read_text()) if BEFORE.exists() else {}
    rows = []
    for key, m in now.items():
        label, target, entry = key.split("|")
        b = before.get(key)
        rows.append([label, target, f"`{entry}`", UNIT[target],
                     f"{b['mean']:,.0f}" if b else "-", f"{m['mean']:,.0f}",
                     f"{b['flash']:,} B" if b else "-", f"{m['flash']:,} B",
                     ("yes" if b["exact"] else "NO") if b else "-", "yes" if m["exact"] else "NO", m["kernels"]])
    write_table("trees_predict", ["model", "target", "entry", "unit", "before (mean)", "after (mean)",
                                  "flash before", "flash after", "exact before", "exact after", "kernels after"],
                rows, script="benchmarks/trees_predict.py",
                align=[None, None, None, None, "right", "right", "right", "right", None, None, None],
                results_dir=None if args.only else HERE / "results")
    for target in ("avr", "cortex-m4"):
        key = "digits RandomForest(10, depth 8)|{}|{}"
        p, pf = now.get(key.format(target, "predict")), now.get(key.format(target, "predict_float"))
        if p and pf:
            print(f"{target}: predict_float / predict = {pf['mean'] / p['mean']:.2f}; the quantiser "
                  f"{(pf['mean'] - p['mean']) / p['dim']:.1f} {UNIT[target]} per feature")


if __name__ == "__main__":
    main()
