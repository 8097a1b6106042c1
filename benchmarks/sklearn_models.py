"""scikit-learn's networks, naive Bayes, kernel SVMs and linear regressors compiled by tinycc-ml: agreement
with scikit-learn, integer accuracy, probability error, and the MLP's cost per multiply-accumulate on the
simulated chips next to a plain mat-vec's (the same kernels ProtoNN's projection runs on).

    python benchmarks/sklearn_models.py [--only accuracy|cycles] [--rows 100]

Table 1 (classifiers; wine, breast_cancer, digits; 70/30 stratified split, seed 0; StandardScaler in front
except GaussianNB): "agree" = share of test rows where the compiled float C (int16 C) predicts scikit-learn's
label;
"int16 delta" = int16 test accuracy minus scikit-learn's (points); "proba float" = max |p_C - p_sklearn|
of <prefix>_proba (float build, test rows); "proba int16" = the same for the int16 build, beside the
stated bound (report['proba']: half the scores' largest fixed-point error on the calibration rows) and the
number of test rows beyond it (test rows outside the calibrated ranges saturate).

Table 2 (regressors; diabetes, first 300 rows to fit): R² of scikit-learn, of the compiled float C and of
int16.

Table 3 (cost): MLPClassifier(hidden_layer_sizes=(32,)) on digits (64-32-10, 2,368 MACs) at int16 and int8
(8-bit weights, 16-bit activations), run on --rows test rows on the ATmega328P (simavr, cycles) and the
Cortex-M0 (QEMU/unicorn, instructions), bit-exact with the fixed-point interpreter on every row; per MAC
beside a single 32x64 mat-vec (LinearModel, the same mat-vec kernels as ProtoNN's projection); "whole vs
kernels" = the whole inference's count per MAC over the mat-vec kernels' (a layer epilogue folded into a kernel
counts as the kernel's: backends/folded_epilogue.py); and the MLP
built without the fusion of element-wise chains into the mat-vec kernels' stores ("unfused": the bias and
relu as loops of their own, as before plan_memory fused them). With
``pip install emlearn``: emlearn's float MLP (eml_net) of the same network on both chips.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.models.linear import LinearModel  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402
from tinycc_ml.target_report import count_macs  # noqa: E402


def split(name):
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import train_test_split

    X, y = {"wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}[name](return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def classifiers():
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, NuSVC

    def scaled(est):
        return lambda: make_pipeline(StandardScaler(), est)

    return {
        "MLPClassifier relu (32,)": scaled(MLPClassifier((32,), max_iter=500, random_state=0)),
        "MLPClassifier tanh (32,)": scaled(MLPClassifier((32,), activation="tanh", max_iter=500, random_state=0)),
        "MLPClassifier logistic (16, 16)": scaled(MLPClassifier((16, 16), activation="logistic", max_iter=1000,
                                                                random_state=0)),
        "GaussianNB": GaussianNB,
        "GaussianNB(var_smoothing=1e-2)": lambda: GaussianNB(var_smoothing=1e-2),
        "SVC rbf": scaled(SVC()),
        "SVC linear": scaled(SVC(kernel="linear")),
        "SVC poly (degree 2)": scaled(SVC(kernel="poly", degree=2, coef0=1.0)),
        "NuSVC rbf": scaled(NuSVC(nu=0.2)),
    }


def accuracy_table() -> None:
    rows = []
    for label, make in classifiers().items():
        for data in ("wine", "breast_cancer", "digits"):
            Xtr, Xte, ytr, yte = split(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = make().fit(Xtr, ytr)
            want = est.predict(Xte)
            host = tinycc_ml.compile(est, name="m").load()
            agree = np.mean(host.predict(Xte) == want)
            int16 = tinycc_ml.compile(est, precision="int16", calibration=Xtr, name="m")
            q = int16.load()
            delta = 100 * (np.mean(q.predict(Xte) == yte) - np.mean(want == yte))
            proba = "-"
            if hasattr(est, "predict_proba") and "SVC" not in label:
                p = est.predict_proba(Xte)
                pf = np.max(np.abs(host.predict_proba(Xte) - p))
                eq = np.max(np.abs(q.predict_proba(Xte) - p), axis=1)
                bound = int16.report["proba"]["max_abs_error_bound"]
                proba = [f"{pf:.1e}", f"{np.max(eq):.1e} ({bound:.2g}; {np.sum(eq > bound)} rows over)"]
            else:
                proba = ["-", "-"]
            agree16 = np.mean(q.predict(Xte) == want)
            acc = 100 * np.mean(want == yte)
            rows.append([label, data, f"{100 * agree:.2f}%", f"{100 * agree16:.2f}%", f"{acc:.2f}%", f"{delta:+.2f}",
                         *proba])
    write_table("sklearn_classifiers", ["class", "data", "agree (float)", "agree (int16)", "sklearn acc.",
                                        "int16 delta (pp)", "proba float", "proba int16 (bound; test rows over it)"],
                rows, script="benchmarks/sklearn_models.py")


def regression_table() -> None:
    from sklearn.datasets import load_diabetes
    from sklearn.decomposition import PCA
    from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge, SGDRegressor
    from sklearn.metrics import r2_score
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVR

    X, y = load_diabetes(return_X_y=True)
    Xtr, ytr, Xte, yte = X[:300], y[:300], X[300:], y[300:]
    regressors = {
        "LinearRegression": LinearRegression(), "Ridge": Ridge(), "Lasso": Lasso(alpha=0.01),
        "ElasticNet": ElasticNet(alpha=0.001),
        "SGDRegressor": make_pipeline(StandardScaler(), SGDRegressor(random_state=0)),
        "LinearSVR": make_pipeline(StandardScaler(), LinearSVR(C=10.0, max_iter=20000, random_state=0)),
        "PCA(6) + Ridge": make_pipeline(StandardScaler(), PCA(6), Ridge()),
        "MLPRegressor (16,)": make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(16,), max_iter=2000,
                                                                            learning_rate_init=0.01, random_state=0)),
    }
    rows = []
    for label, est in regressors.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xtr, ytr)
        want = est.predict(Xte)
        f = tinycc_ml.compile(est, name="r").load().predict(Xte)
        q = tinycc_ml.compile(est, precision="int16", calibration=Xtr, name="r").load().predict(Xte)
        rows.append([label, f"{r2_score(yte, want):.4f}", f"{r2_score(yte, f):.4f}", f"{r2_score(yte, q):.4f}",
                     f"{np.max(np.abs(q - want)):.3g}"])
    write_table("sklearn_regressors",
                ["regressor", "R² sklearn", "R² float C", "R² int16", "max abs value error int16"], rows,
                script="benchmarks/sklearn_models.py")


def matvec_macs(graph, name: str) -> int:
    a = graph.node(name).inputs[0]
    node = graph.node(a)
    return len(node.attrs["values"]) if node.op == "sparse_const" else graph.type(a).size


def measure(model, precision, Xtr, rows, target):
    """(mean count, MACs, flash bytes of the firmware, mat-vec kernels' count per MAC) of an int build run on
    ``rows``, checked bit-exact with the fixed-point interpreter."""
    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.runtime.profile import measure_kernels

    with tempfile.TemporaryDirectory() as d:
        res = tinycc_ml.compile(model, target=target, precision=precision, calibration=Xtr, out_dir=d, name="m")
        out = res.output
        sources = [Path(d) / "m.c"]
        run = run_on_target(target, sources, Path(d) / "m.h", "m", quantise(rows, out.input_scale, 16),
                            out.n_scores, out.input_ctype, out.score_ctype)
        want = run_fixed(res.graph, quantise(rows, out.input_scale, 16))
        assert np.array_equal(run.predictions, want["prediction"]), "not bit-exact"
        counts = run.cycles if run.cycles is not None else run.instructions
        prof = measure_kernels(get_backend(target), Path(d), out, rows)
        nodes = [r for r in prof.get("per_node", []) if res.graph.op(r["node"]) == "matvec"]
        unit = prof.get("unit", "cycles")
        spent = sum(r[f"measured_{unit}"] or 0 for r in nodes)
        kernel_per_mac = spent / max(1, sum(matvec_macs(res.graph, r["node"]) for r in nodes))
        return float(np.mean(counts)), count_macs(res.graph), run.flash_bytes, kernel_per_mac


def emlearn_cost(est, rows, target):
    """emlearn's eml_net (float) of the same network: mean count per inference, or why not."""
    saved = np.geterr()
    try:
        import emlearn
    except ImportError:
        return None, "emlearn not installed (pip install emlearn)"
    finally:
        np.seterr(**saved)  # emlearn.bayes sets numpy.seterr(all="raise") for the whole process on import
    with tempfile.TemporaryDirectory() as d:
        net = est[-1]
        scaler = est[0]
        code = emlearn.convert(net).save(name="emnet")
        (Path(d) / "emnet_model.h").write_text(code)
        dim, n_out = net.coefs_[0].shape[0], len(net.classes_)
        mean = ", ".join(f"{float(v)!r}f" for v in scaler.mean_)
        scale = ", ".join(f"{1.0 / float(v)!r}f" for v in scaler.scale_)
        (Path(d) / "em.h").write_text("int em_predict(const float *x);\nvoid em_scores(const float *x, float *s);\n")
        (Path(d) / "em.c").write_text(f"""#include "em.h"
#include "emnet_model.h"
static const float em_mean[{dim}] = {{ {mean} }};
static const float em_inv[{dim}] = {{ {scale} }};
static float em_in[{dim}];
int em_predict(const float *x)
{{
    for (int i = 0; i < {dim}; ++i) em_in[i] = (x[i] - em_mean[i]) * em_inv[i];
    return emnet_predict(em_in, {dim});
}}
void em_scores(const float *x, float *s)
{{
    for (int i = 0; i < {n_out}; ++i) s[i] = 0.0f;
    s[em_predict(x)] = 1.0f;
}}
""")
        try:
            run = run_on_target(target, [Path(d) / "em.c"], Path(d) / "em.h", "em", rows.astype(np.float32), n_out,
                                "float", "float", extra_cflags=[f"-I{d}", f"-I{Path(emlearn.includedir)}",
                                                                "-Wno-error", "-w"])
        except Exception as exc:  # an emlearn version whose C does not build for the chip: say why
            if "not within region" in str(exc):
                weights = 4 * sum(W.size + b.size for W, b in zip(net.coefs_, net.intercepts_))
                return None, f"does not fit: eml_net's float weights are plain const arrays, in RAM on AVR " \
                             f"({weights:,} B; the chip has 2,048 B)"
            return None, f"emlearn build failed: {' '.join(str(exc).split())[-300:]}"
        agree = float(np.mean(run.predictions == est.predict(rows)))
        counts = run.cycles if run.cycles is not None else run.instructions
        return float(np.mean(counts)), f"agreement with scikit-learn {100 * agree:.1f}%; firmware flash " \
                                       f"{run.flash_bytes:,} B"


@contextlib.contextmanager
def element_wise_fusion(on: bool):
    """With ``on`` False, builds as before plan_memory fused element-wise chains into their producer's
    store (the bias and relu loops after each mat-vec), for the before/after rows."""
    from tinycc_ml.passes import plan_memory

    saved = plan_memory.fused_chains
    if not on:
        plan_memory.fused_chains = lambda graph: {}
    try:
        yield
    finally:
        plan_memory.fused_chains = saved


def cycles_table(n_rows: int) -> None:
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, Xte, ytr, yte = split("digits")
    rows = Xte[:n_rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make_pipeline(StandardScaler(), MLPClassifier((32,), max_iter=500, random_state=0)).fit(Xtr, ytr)
    matvec = LinearModel(np.random.default_rng(0).normal(size=(32, 64)))
    print(f"MLPClassifier(hidden_layer_sizes=(32,)) on digits, {n_rows} test rows, bit-exact with run_fixed:")
    table = []
    for target, unit in (("avr", "cycles"), ("cortex-m0", "instr.")):
        for precision in ("int16", "int8"):
            for label, model, fuse in (("MLP 64-32-10", est, True), ("MLP 64-32-10, unfused", est, False),
                                       ("mat-vec 32x64", matvec, True)):
                with element_wise_fusion(fuse):
                    mean, macs, flash, kernel = measure(model, precision, Xtr, rows, target)
                table.append([target, precision, label, f"{mean:,.0f} {unit}", f"{macs:,}", f"{mean / macs:.2f}",
                              f"{kernel:.2f}", f"{100 * (mean / macs / kernel - 1):+.1f}%", f"{flash:,} B"])
        mean, note = emlearn_cost(est, rows, target)
        if mean is None:
            table.append([target, "float", "emlearn eml_net", f"- ({note})", "", "", "", "", ""])
        else:
            table.append([target, "float", "emlearn eml_net", f"{mean:,.0f} {unit} ({note})", "2,368",
                          f"{mean / 2368:.1f}", "", "", ""])
    write_table("sklearn_mlp_cycles", ["chip", "precision", "model", "per inference", "MACs",
                                       "per MAC (whole inference)", "per MAC (mat-vec kernels)", "whole vs kernels",
                                       "firmware flash"], table, script="benchmarks/sklearn_models.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("accuracy", "cycles"))
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()
    if args.only != "cycles":
        accuracy_table()
        print()
        regression_table()
        print()
    if args.only != "accuracy":
        cycles_table(args.rows)


if __name__ == "__main__":
    main()
