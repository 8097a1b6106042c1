"""`tinycc_ml.fit` on USPS-10 for an ATmega328P with a flash limit, beside each family trained at its
defaults with its size set to the same limit (the baseline a user would try first).

    python benchmarks/fit_usps.py [--max-flash 16384] [--time-budget 900] [--png docs/fit_usps_avr.png]

Every figure is measured the same way for both tables: the int16 (baselines) or chosen-precision
(fit) build for the ATmega328P runs all 2007 test rows in simavr: test accuracy, the model's own flash
(its symbols in the linked firmware) and RAM (static + peak stack), and the most cycles of any row.
The baselines train on all 7291 training rows; fit searches on a split of them and retrains its
choice on all of them. The model zoo's rows for USPS-10 (docs/benchmarks/cycles.md) are all too big for the chip.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # threaded BLAS spin-waits on a shared 2-core machine

import argparse  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.errors import CompileError  # noqa: E402
from tinycc_ml.search.candidates import FAMILIES  # noqa: E402
from tinycc_ml.search.measure import compile_for, compiled_predictions  # noqa: E402
from tinycc_ml.search.pareto import table  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"


def baselines(max_flash: int, D: int, L: int):
    """(family, setting, estimator): each family at its defaults, its size knob set to the limit."""
    per_class = max(1, max_flash // (2 * D * L))  # int16 prototypes within the limit
    points = max(L, max_flash // (2 * D))
    return [
        ("protonn", f"budget_bytes={max_flash}", FAMILIES["protonn"].estimator({"budget_bytes": max_flash,
                                                                                  "random_state": 0})),
        ("bonsai", f"budget_bytes={max_flash}", FAMILIES["bonsai"].estimator({"budget_bytes": max_flash,
                                                                                "random_state": 0})),
        ("nearest-prototype", f"{per_class}/class", FAMILIES["nearest-prototype"].estimator(
            {"prototypes_per_class": per_class, "random_state": 0})),
        ("snc", f"n_prototypes={points}", FAMILIES["snc"].estimator({"n_prototypes": points, "random_state": 0})),
        ("linear", "LogisticRegression", FAMILIES["linear"].estimator({"C": 1.0, "max_iter": 2000,
                                                                        "random_state": 0})),
    ]


def on_avr(model, precision: str, X_cal, Xt, yt) -> dict:
    """Compile for the ATmega328P and run every test row in simavr."""
    res = tinycc_ml.compile(model, target="avr", precision=precision, calibration=X_cal, name="base")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in res.files.items():
            (Path(tmp) / name).write_text(text)
        run = get_backend("avr").simulate(Path(tmp), res.output, Xt)
    pred = model.classes[np.asarray(run.predictions, dtype=np.int64)]
    return {"accuracy": float(np.mean(pred == yt)), "flash": run.model_flash_bytes,
            "ram": run.model_ram_bytes + run.stack_bytes, "cycles": int(np.max(run.cycles))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-flash", type=int, default=16 * 1024)
    parser.add_argument("--time-budget", type=float, default=900.0)
    parser.add_argument("--png", default=None, help="copy pareto.png here (e.g. docs/fit_usps_avr.png)")
    parser.add_argument("--skip-baselines", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("tinycc_ml.search").setLevel(logging.INFO)
    d = np.load(USPS)
    X, y, Xt, yt = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    limit = args.max_flash

    rows = []
    if not args.skip_baselines:
        for family, setting, est in baselines(limit, X.shape[1], len(np.unique(y))):
            start = time.perf_counter()
            est.fit(X, y)
            seconds = time.perf_counter() - start
            model = tinycc_ml.api.as_model(est)
            try:
                m = on_avr(model, "int16", X[:1024], Xt, yt)
            except CompileError as exc:
                m = {"accuracy": None, "flash": None, "ram": None, "cycles": None, "error": str(exc)[:60]}
            m.update(family=family, setting=setting, seconds=seconds,
                     fits=m["flash"] is not None and m["flash"] <= limit)
            rows.append(m)
            print(f"baseline {family} {setting}: {m}", flush=True)
        rows.append({"family": "knn", "setting": "k=1", "accuracy": None, "flash": None, "ram": None, "cycles": None,
                     "seconds": 0.0, "fits": False, "error": f"{X.size:,} stored values"})

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        res = tinycc_ml.fit(X, y, target="avr", max_flash=limit, X_test=Xt, y_test=yt, out_dir=out,
                            time_budget=args.time_budget, name="usps")
        if args.png and (Path(out) / "pareto.png").exists():
            shutil.copy(Path(out) / "pareto.png", args.png)
    seconds = time.perf_counter() - start

    print(f"\nBaselines: each family at its defaults, its size set to {limit:,} B (int16, ATmega328P, "
          f"{len(Xt)} test rows in simavr)\n")
    print("| family | setting | test accuracy | model flash | RAM | cycles (max) | ms at 16 MHz | fits | train s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        acc = "-" if r["accuracy"] is None else f"{100 * r['accuracy']:.2f}%"
        flash = r.get("error", "-") if r["flash"] is None else f"{r['flash']:,} B"
        ram = "-" if r["ram"] is None else f"{r['ram']:,} B"
        cycles = "-" if r["cycles"] is None else f"{r['cycles']:,}"
        ms = "-" if r["cycles"] is None else f"{r['cycles'] / 16e3:.2f}"
        print(f"| {r['family']} | {r['setting']} | {acc} | {flash} | {ram} | {cycles} | {ms} | "
              f"{'yes' if r['fits'] else 'no'} | {r['seconds']:.0f} |")

    v = res.verification
    print(f"\ntinycc-ml fit, {limit:,} B of flash: {len(res.candidates)} candidates in {seconds:.0f} s "
          f"({'complete' if res.complete else 'time budget reached'})\n")
    print(res.report())
    print("\nAll candidates:\n" + table(res.candidates, res.limits.count_unit, res.chosen))
    print("\n| fit's choice | test accuracy | model flash | RAM | cycles (max) | ms at 16 MHz |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| {res.chosen.label} | {100 * v['accuracy']:.2f}% | {v['flash_bytes']:,} B | {v['ram_bytes']:,} B | "
          f"{v['count_max']:,} | {v['ms_max']:.2f} |")
    print("\nThe front's candidates on the test rows (as trained in the search, on 80% of the training rows; "
          "integer builds through the fixed-point interpreter, bit-exact with the AVR build):\n")
    print("| candidate | flash | validation | test |")
    print("| --- | --- | --- | --- |")
    for c in res.front:
        model = res.trained[c.id]
        compiled = compile_for(model, "avr", c.precision, X[:1024], "front")
        test = np.mean(model.classes[compiled_predictions(compiled, model, Xt, "avr")] == yt)
        print(f"| {c.label} | {c.flash_bytes:,} B | {100 * c.val_accuracy:.2f}% | {100 * test:.2f}% |")
    fitting = [r for r in rows if r["fits"]]
    if fitting:
        best = max(fitting, key=lambda r: r["accuracy"])
        verdict = "at least as accurate as" if v["accuracy"] >= best["accuracy"] else "LESS accurate than"
        print(f"\nfit's choice: {100 * v['accuracy']:.2f}% on the test rows, {verdict} the best baseline that "
              f"fits ({best['family']} {best['setting']}: {100 * best['accuracy']:.2f}%)")


if __name__ == "__main__":
    main()
