"""GaussianNB on digits on the chips: the ATmega328P (simavr, cycles), Cortex-M0 (unicorn/QEMU, instructions) and
Cortex-M4F (QEMU -icount, instructions) at float, int16 and int8, and each wsqdist kernel's predicted cost
(the cost model the build chose it by) beside its measurement (the per-function profile).

    python benchmarks/naive_bayes_cycles.py [--rows 540]

scikit-learn's GaussianNB() on digits (70/30 stratified split, seed 0: benchmarks/sklearn_models.py's). Per chip
and precision: the mean count per inference over --rows test rows (the whole <prefix>_predict call), the
firmware's flash, the simulated rows' agreement with scikit-learn and, for integer builds, whether every
prediction equals the fixed-point interpreter's; and the host build's agreement on all 540 test rows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402
from sklearn_models import split  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.ir.ops.linalg import wsqdist_terms  # noqa: E402
from tinycc_ml.runtime.profile import measure_kernels  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

TARGETS = (("avr", "ATmega328P", "cycles"), ("cortex-m0", "Cortex-M0", "instructions"),
           ("cortex-m4", "Cortex-M4F", "instructions"))
PRECISIONS = ("float", "int16", "int8")


def build(est, Xtr, rows, target: str, precision: str, out_dir: Path):
    res = tinycc_ml.compile(est, target=target, precision=precision, calibration=Xtr, out_dir=out_dir, name="m")
    o = res.output
    x = rows.astype(np.float32) if precision == "float" else quantise(rows, o.input_scale, 16)
    run = run_on_target(target, [out_dir / "m.c"], out_dir / "m.h", "m", x, o.n_scores, o.input_ctype,
                        o.score_ctype)
    counts = run.cycles if run.cycles is not None else run.instructions
    exact = "-" if precision == "float" else (
        "yes" if np.array_equal(run.predictions, run_fixed(res.graph, x)["prediction"]) else "NO")
    return res, run, float(np.mean(counts)), exact


def main(argv=None) -> int:
    from sklearn.naive_bayes import GaussianNB

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=540, help="test rows run on each chip (default: all 540)")
    args = parser.parse_args(argv)
    Xtr, Xte, ytr, yte = split("digits")
    est = GaussianNB().fit(Xtr, ytr)
    rows = Xte[:args.rows]
    want = est.predict(rows)
    host = {p: np.mean(tinycc_ml.compile(est, precision=p, calibration=Xtr).load().predict(Xte) == est.predict(Xte))
            for p in PRECISIONS}
    table, kernels = [], []
    for target, chip, unit in TARGETS:
        for precision in PRECISIONS:
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-nb-") as tmp:
                res, run, mean, exact = build(est, Xtr, rows, target, precision, Path(tmp))
                agree = np.mean(est.classes_[run.predictions] == want)
                table.append([chip, precision, f"{mean:,.0f}", unit, f"{run.flash_bytes:,}",
                              f"{100 * agree:.2f}%", exact, f"{100 * host[precision]:.2f}%"])
                if precision == "float":
                    continue
                prof = measure_kernels(get_backend(target), Path(tmp), res.output, rows[:8])
                g = res.graph
                for r in prof.get("per_node", []):
                    if g.op(r["node"]) != "wsqdist":
                        continue
                    W, T = (g.node(i).attrs["value"] for i in g.node(r["node"]).inputs[1:])
                    predicted, measured = r[f"predicted_{prof['unit']}"], r[f"measured_{prof['unit']}"]
                    kernels.append([chip, precision, r["node"], r["kernel"], f"{sum(map(len, wsqdist_terms(W, T)))}",
                                    f"{predicted:,}", f"{measured:,.0f}",
                                    f"{100 * (predicted - measured) / measured:+.1f}%"])
    script = f"benchmarks/naive_bayes_cycles.py --rows {args.rows}"
    write_table("naive_bayes_cycles", ["chip", "precision", "per inference", "unit", "firmware flash B",
                                       f"= scikit-learn ({args.rows} rows)", "= interpreter",
                                       f"host build = scikit-learn ({len(Xte)} rows)"],
                table, script=script, align=[None, None, "right", None, "right", "right", None, "right"])
    print()
    write_table("naive_bayes_kernels", ["chip", "precision", "node", "kernel", "terms", "predicted", "measured",
                                        "error"],
                kernels, script=script, align=[None, None, None, None, "right", "right", "right", "right"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
