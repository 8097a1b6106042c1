"""Tree ensembles: tinycc-ml against emlearn on the simulated ATmega328P and Cortex-M0, and the
agreement of compiled builds with scikit-learn.

    python benchmarks/trees.py [--rows 200] [--parts 1,2,3]

Part 1: digits (70/30 split, random_state=0), RandomForestClassifier(n_estimators=10, max_depth=8,
random_state=0). tinycc-ml float / int16 / int8 builds and emlearn's ``convert(rf).save(...)`` (its
int16 trees, majority vote of the trees' leaf classes: its recommended ``inline`` form, nested ifs, and its
``loadable`` node table), each linked into the same
measurement harness with the same compiler flags (emlearn through a small adapter giving it the
harness's ``<prefix>_predict`` / ``<prefix>_scores``), and on the Cortex-M0 m2cgen's ``export_to_c``
(through the same kind of adapter), run on the first ``--rows`` test rows:
AVR cycles per prediction (simavr), Cortex-M0 instructions (QEMU/unicorn), flash of the whole
firmware (harness included, the same for all) and accuracy on those rows. A build whose data does
not fit the ATmega328P (emlearn keeps its node table in RAM on AVR: 2 KB) runs on the ATmega1284P
(same core and cycle timings) and is marked so.

Part 2: agreement of compiled host builds with scikit-learn's ``predict`` on the test rows of digits,
breast_cancer, wine, USPS-10 (7,291 training + 2,007 test rows, data/usps/usps10.npz) and UCI
letter-26 (16,000 + 4,000 rows, benchmarks/letter.py), each skipped when absent: float against scikit-learn,
int16 / int8 against the float build (``--datasets letter-26`` runs one of them).

Part 3: ``tinycc-ml fit`` on digits for the ATmega328P with 16 KB of flash over ProtoNN, the
linear family, random forests and gradient boosting: its report (the front and the choice).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import render, write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.avr.backend import Atmega1284pBackend  # noqa: E402
from tinycc_ml.codegen.backend import register_backend  # noqa: E402
from tinycc_ml.ir.fixed import quantise  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"

ADAPTER_H = """#include <stdint.h>
int eml_predict(const int16_t *x);
void eml_scores(const int16_t *x, int16_t *scores);
"""
ADAPTER_C = """#include "eml_rf.h"
#include "eml_adapter.h"
int eml_predict(const int16_t *x) {{ return (int)eml_rf_predict(x, {d}); }}
void eml_scores(const int16_t *x, int16_t *scores)
{{
    float p[{k}];
    eml_rf_predict_proba(x, {d}, p, {k});
    for (int i = 0; i < {k}; ++i) scores[i] = (int16_t)(p[i] * 1000.0f);
}}
"""


def digits_forest():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0)
    rf = RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X_tr, y_tr)
    return rf, X_tr, X_te, y_te


def run_ours(rf, X_tr, rows, target: str, precision: str, workdir: Path):
    out = workdir / f"ours_{target}_{precision}"
    try:
        result = tinycc_ml.compile(rf, target=target, precision=precision, name="rf", out_dir=out,
                                   calibration=None if precision == "float" else X_tr)
    except tinycc_ml.TinyccError as exc:
        if target != "avr":
            raise
        print(f"  ({precision} does not fit the ATmega328P: {str(exc)[:80]}; ATmega1284P)", file=sys.stderr)
        return run_ours(rf, X_tr, rows, "avr-atmega1284p", precision, workdir)
    o = result.output
    x = rows.astype(np.float32) if precision == "float" else quantise(rows, o.input_scale, 16).astype(np.int16)
    sim = "avr-atmega1284p" if target == "avr-atmega1284p" else target
    run = run_on_target(sim, [str(out / "rf.c")], str(out / "rf.h"), "rf", x, o.n_scores, o.input_ctype,
                        o.score_ctype)
    kernels = [k["kernel"] for k in result.report.get("kernels", [])]
    return run, sim, ",".join(kernels) or "-"


M2C_H = """int m2c_predict(const float *x);
void m2c_scores(const float *x, float *scores);
"""
M2C_C = """#include "m2c_adapter.h"
void m2c_score(double *input, double *output);
int m2c_predict(const float *x)
{{
    double in[{d}], out[{k}];
    for (int i = 0; i < {d}; ++i) in[i] = x[i];
    m2c_score(in, out);
    int best = 0;
    for (int i = 1; i < {k}; ++i) if (out[i] > out[best]) best = i;
    return best;
}}
void m2c_scores(const float *x, float *scores)
{{
    double in[{d}], out[{k}];
    for (int i = 0; i < {d}; ++i) in[i] = x[i];
    m2c_score(in, out);
    for (int i = 0; i < {k}; ++i) scores[i] = (float)out[i];
}}
"""


def run_m2cgen(rf, rows, target: str, workdir: Path):
    """m2cgen's C (doubles, nested ifs, a memcpy of each leaf's probabilities) through an adapter."""
    import m2cgen

    out = workdir / f"m2c_{target}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "m2c_model.c").write_text(m2cgen.export_to_c(rf, function_name="m2c_score"))
    (out / "m2c_adapter.h").write_text(M2C_H)
    (out / "m2c_adapter.c").write_text(M2C_C.format(d=rows.shape[1], k=len(rf.classes_)))
    flags = ["-Wno-error", "-Wno-unused-parameter", "-Wno-missing-prototypes"]
    run = run_on_target(target, [str(out / "m2c_adapter.c"), str(out / "m2c_model.c")], str(out / "m2c_adapter.h"),
                        "m2c", rows.astype(np.float32), len(rf.classes_), "float", "float", extra_cflags=flags)
    return run, target


def run_emlearn(rf, rows, target: str, workdir: Path, method: str = "inline"):
    """emlearn's C through the adapter: ``inline`` (its recommended form: each tree as nested ifs) or
    ``loadable`` (a node table, in RAM on the AVR)."""
    errors = np.geterr()
    import emlearn

    np.seterr(**errors)  # importing emlearn turns numpy's floating-point warnings into errors

    out = workdir / f"eml_{target}_{method}"
    out.mkdir(parents=True, exist_ok=True)
    emlearn.convert(rf, method=method).save(file=str(out / "eml_rf.h"), name="eml_rf")
    (out / "eml_adapter.h").write_text(ADAPTER_H)
    (out / "eml_adapter.c").write_text(ADAPTER_C.format(d=rows.shape[1], k=len(rf.classes_)))
    x = rows.astype(np.int16)  # digits' pixels are integers 0..16: emlearn's int16 features as they are
    flags = ["-I", emlearn.includedir, "-I", str(out), "-Wno-unused-parameter", "-Wno-unused-function",
             "-Wno-sign-compare", "-Wno-error"]
    sims = ["avr", "avr-atmega1284p"] if target == "avr" else [target]
    last = None
    for sim in sims:
        try:
            run = run_on_target(sim, [str(out / "eml_adapter.c")], str(out / "eml_adapter.h"), "eml", x,
                                len(rf.classes_), "int16_t", "int16_t", extra_cflags=flags)
            return run, sim
        except tinycc_ml.TinyccError as exc:
            last = exc
    raise last


def part1(n_rows: int, targets: list[str]) -> list[str]:
    rf, X_tr, X_te, y_te = digits_forest()
    rows, labels = X_te[:n_rows], y_te[:n_rows]
    sk = rf.predict(rows)
    rows_out = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for target in targets:
            unit = "cycles" if target == "avr" else "instr."
            base = None
            for name in ("emlearn", "emlearn loadable", "m2cgen", "float", "int16", "int8"):
                if name == "m2cgen" and target != "cortex-m0":
                    continue  # its doubles are floats on AVR and its leaves would sit in RAM
                if name.startswith("emlearn"):
                    method = "loadable" if name.endswith("loadable") else "inline"
                    run, sim = run_emlearn(rf, rows, target, work, method)
                    kernel = f"emlearn {method} trees (majority vote)"
                elif name == "m2cgen":
                    run, sim = run_m2cgen(rf, rows, target, work)
                    kernel = "m2cgen export_to_c"
                else:
                    run, sim, kernel = run_ours(rf, X_tr, rows, target, name, work)
                count = run.cycles if target == "avr" else run.instructions
                preds = rf.classes_[run.predictions]
                mean = float(np.mean(count))
                if name == "emlearn":
                    base = mean
                chip = {"avr": "ATmega328P", "avr-atmega1284p": "ATmega1284P", "cortex-m0": "Cortex-M0"}[sim]
                ratio = f" ({mean / base:.2f}x emlearn inline)" if name != "emlearn" else ""
                label = name if name.startswith(("emlearn", "m2cgen")) else f"tinycc-ml {name}"
                rows_out.append([label, chip, f"{mean:,.0f} {unit}{ratio}", f"{run.flash_bytes:,} B",
                                 f"{run.ram_bytes:,} B", f"{100 * np.mean(preds == labels):.2f}%",
                                 f"{100 * np.mean(preds == sk):.1f}%", kernel])
                print(rows_out[-1], file=sys.stderr)
    table = write_table("trees_chips", ["build", "chip", "per prediction", "firmware flash", "firmware RAM", "accuracy",
                                        "= scikit-learn", "kernel"], rows_out,
                        script=f"benchmarks/trees.py --parts 1 --rows {n_rows}", file=sys.stderr)
    return render(table).splitlines()


def datasets():
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import train_test_split

    for name, loader in (("digits", load_digits), ("breast_cancer", load_breast_cancer), ("wine", load_wine)):
        X, y = loader(return_X_y=True)
        yield name, *train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    if USPS.exists():
        d = np.load(USPS)
        yield "USPS-10", d["X_train"], d["X_test"], d["y_train"], d["y_test"]
    try:  # 20,000 rows (benchmarks/letter.py: Debian's r-cran-mlbench, read with rdata)
        from letter import letter26

        X_tr, y_tr, X_te, y_te = letter26()
        yield "letter-26", X_tr, X_te, y_tr, y_te
    except (ImportError, FileNotFoundError) as exc:
        print(f"letter-26 left out: {exc}", file=sys.stderr)


def part2(only: list[str] | None = None) -> list[str]:
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.tree import DecisionTreeClassifier

    makers = {
        "DecisionTree(max_depth=8)": lambda: DecisionTreeClassifier(max_depth=8, random_state=0),
        "RandomForest(10, depth 8)": lambda: RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0),
        "ExtraTrees(10, depth 8)": lambda: ExtraTreesClassifier(n_estimators=10, max_depth=8, random_state=0),
        "GradientBoosting(20, depth 3)": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=3,
                                                                            random_state=0),
        "HistGradientBoosting(20)": lambda: HistGradientBoostingClassifier(max_iter=20, random_state=0),
    }
    try:
        import lightgbm
        import xgboost

        makers["XGBClassifier(20, depth 4)"] = lambda: xgboost.XGBClassifier(n_estimators=20, max_depth=4,
                                                                             random_state=0)
        makers["LGBMClassifier(20)"] = lambda: lightgbm.LGBMClassifier(n_estimators=20, random_state=0, verbose=-1)
    except ImportError:
        print("xgboost / lightgbm not installed: their rows are left out", file=sys.stderr)
    lines = ["| data set | model | test rows | float = library | int16 = float | int8 = float |",
             "| --- | --- | --- | --- | --- | --- |"]
    for data, X_tr, X_te, y_tr, _y_te in datasets():
        if only and data not in only:
            continue
        for label, make in makers.items():
            if data in ("USPS-10", "letter-26") and label.startswith("GradientBoosting"):
                continue  # 10 classes x 20 stages of exact trees on 7,291 rows: minutes; HistGB covers it
            clf = make().fit(X_tr, y_tr)
            sk = clf.predict(X_te)
            fl = tinycc_ml.compile(clf).load().predict(X_te)
            cells = [f"{100 * np.mean(fl == sk):.2f}%"]
            for precision in ("int16", "int8"):
                q = tinycc_ml.compile(clf, precision=precision, calibration=X_tr).load().predict(X_te)
                cells.append(f"{100 * np.mean(q == fl):.2f}%")
            lines.append(f"| {data} | {label} | {len(X_te):,} | " + " | ".join(cells) + " |")
            print(lines[-1], file=sys.stderr)
    return lines


def part3(time_budget: float) -> list[str]:
    """tinycc-ml fit on digits for the ATmega328P with 16 KB: where forests and boosting sit."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    res = tinycc_ml.fit(X_tr, y_tr, target="avr", max_flash=16 * 1024, X_test=X_te, y_test=y_te,
                        families="protonn,linear,random-forest,gradient-boosting", time_budget=time_budget)
    return ["```", res.report(), "```"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--targets", default="avr,cortex-m0")
    ap.add_argument("--parts", default="1,2", help="which parts to run (1: emlearn, 2: agreement, 3: fit)")
    ap.add_argument("--fit-time", type=float, default=600)
    ap.add_argument("--datasets", default=None, help="part 2 on these only (comma-separated, e.g. letter-26)")
    args = ap.parse_args(argv)
    register_backend(Atmega1284pBackend)
    parts = args.parts.split(",")
    if "1" in parts:
        print("## Tree ensembles against emlearn (digits, RandomForestClassifier(10, max_depth=8))\n")
        print("\n".join(part1(args.rows, args.targets.split(","))))
    if "2" in parts:
        print("\n## Agreement with the libraries' predict (host builds, all test rows)\n")
        print("\n".join(part2(args.datasets.split(",") if args.datasets else None)))
    if "3" in parts:
        print("\n## tinycc-ml fit on digits, ATmega328P, 16 KB of flash\n")
        print("\n".join(part3(args.fit_time)))


if __name__ == "__main__":
    main()
