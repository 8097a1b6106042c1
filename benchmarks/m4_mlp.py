"""A whole MLP on the Cortex-M4F against CMSIS-NN's whole network (MPS2 AN386, QEMU -icount: exact instruction
counts): scikit-learn's MLPClassifier((32,)) on digits (64-32-10, 2,368 multiply-accumulates).

    python benchmarks/m4_mlp.py [--rows 100] [--cmsis-nn PATH] [--opt -Ofast]

tinycc-ml: the int16 and int8 builds (int16 activations; int8 or int16 weights), instructions per inference
(mean over --rows test rows, the whole <prefix>_predict call), and the share outside the kernel functions (the
per-function profile in unicorn, whose totals equal QEMU's: kernels are the mat-vec and clamp functions the
nodes call; outside is the rest of predict: the scores' bias, the argmax, the calls). Every prediction equals
the fixed-point interpreter's.

CMSIS-NN: the same network as TFLite would quantise it (int8 activations with zero points from the training
rows, per-tensor int8 weights, int32 biases, the relu as the first layer's activation range), run as two
arm_fully_connected_s8 calls (the CMSIS-NN function TFLite Micro calls for FULLY_CONNECTED) and an argmax,
built from CMSIS-NN's sources (benchmarks/m4_cycles.py's cmsis_tree) with the same compiler, ``--opt`` and
harness. Its accuracy is printed as a sanity check of the quantisation.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from m4_cycles import cmsis_tree, write  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise  # noqa: E402
from tinycc_ml.ir.ops.tflite_arith import quantize_multiplier  # noqa: E402
from tinycc_ml.runtime.profile import function_profile  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

TARGET = "cortex-m4"
FILES = ("Include", "Source/FullyConnectedFunctions", "Source/NNSupportFunctions")

NETWORK = """/* the MLP as TFLite Micro's CMSIS-NN kernels run it: two arm_fully_connected_s8 calls and an argmax */
#include "arm_nnfunctions.h"
#include "cm.h"

static const int8_t cm_w0[{h} * {d}] = {{ {w0} }};
static const int32_t cm_b0[{h}] = {{ {b0} }};
static const int8_t cm_w1[{k} * {h}] = {{ {w1} }};
static const int32_t cm_b1[{k}] = {{ {b1} }};
static const cmsis_nn_context cm_ctx = {{0, 0}};
static const cmsis_nn_fc_params cm_fc0 = {{{zx}, 0, {zh}, {{{relu_lo}, 127}}}};
static const cmsis_nn_fc_params cm_fc1 = {{{zh_in}, 0, {zo}, {{-128, 127}}}};
static const cmsis_nn_per_tensor_quant_params cm_q0 = {{{m0}, {s0}}}, cm_q1 = {{{m1}, {s1}}};
static const cmsis_nn_dims cm_in0 = {{1, 1, 1, {d}}}, cm_f0 = {{{d}, 1, 1, {h}}}, cm_o0 = {{1, 1, 1, {h}}};
static const cmsis_nn_dims cm_in1 = {{1, 1, 1, {h}}}, cm_f1 = {{{h}, 1, 1, {k}}}, cm_o1 = {{1, 1, 1, {k}}};
static int8_t cm_hidden[{h}], cm_out[{k}];

int cm_predict(const int8_t *x)
{{
    int best = 0;
    arm_fully_connected_s8(&cm_ctx, &cm_fc0, &cm_q0, &cm_in0, x, &cm_f0, cm_w0, &cm_o0, cm_b0, &cm_o0, cm_hidden);
    arm_fully_connected_s8(&cm_ctx, &cm_fc1, &cm_q1, &cm_in1, cm_hidden, &cm_f1, cm_w1, &cm_o1, cm_b1, &cm_o1,
                           cm_out);
    for (int i = 1; i < {k}; ++i)
        if (cm_out[i] > cm_out[best]) best = i;
    return best;
}}

void cm_scores(const int8_t *x, int32_t *scores)
{{
    (void)cm_predict(x);
    for (int r = 0; r < {k}; ++r) scores[r] = cm_out[r];
}}
"""
HEADER = "#include <stdint.h>\nint cm_predict(const int8_t *x);\nvoid cm_scores(const int8_t *x, int32_t *scores);\n"


def affine(lo: float, hi: float) -> tuple[float, int]:
    """TFLite's asymmetric int8 (scale, zero point) of a range that includes 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    return scale, int(np.clip(round(-128 - lo / scale), -128, 127))


def cmsis_network(tree: Path, est, X: np.ndarray, rows: np.ndarray, opt: str) -> dict:
    """The int8 network (TFLite's quantisation of ``est`` calibrated on X) through CMSIS-NN."""
    W0, W1 = est.coefs_[0].T, est.coefs_[1].T
    b0, b1 = est.intercepts_
    hidden = np.maximum(X @ W0.T + b0, 0)
    out = hidden @ W1.T + b1
    sx, zx = affine(X.min(), X.max())
    sh, zh = affine(0.0, hidden.max())
    so, zo = affine(out.min(), out.max())
    sw0, sw1 = np.abs(W0).max() / 127, np.abs(W1).max() / 127
    w0, w1 = np.round(W0 / sw0).astype(int), np.round(W1 / sw1).astype(int)
    m0, s0 = quantize_multiplier(sx * sw0 / sh)
    m1, s1 = quantize_multiplier(sh * sw1 / so)
    text = NETWORK.format(
        d=W0.shape[1], h=W0.shape[0], k=W1.shape[0], w0=", ".join(map(str, w0.reshape(-1))),
        b0=", ".join(str(int(round(v / (sx * sw0)))) for v in b0), w1=", ".join(map(str, w1.reshape(-1))),
        b1=", ".join(str(int(round(v / (sh * sw1)))) for v in b1), zx=-zx, zh=zh, zh_in=-zh, zo=zo, relu_lo=zh,
        m0=m0, s0=s0, m1=m1, s1=s1)
    xq = np.clip(np.round(rows / sx) + zx, -128, 127).astype(np.int8)
    srcs = [tree / "Source" / "FullyConnectedFunctions" / "arm_fully_connected_s8.c",
            tree / "Source" / "NNSupportFunctions" / "arm_nn_vec_mat_mult_t_s8.c"]
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-mlp-") as tmp:
        write({"cm.c": text, "cm.h": HEADER}, Path(tmp))
        flags = (f"-I{tree / 'Include'}", opt)
        run = run_on_target(TARGET, [Path(tmp) / "cm.c", *srcs], Path(tmp) / "cm.h", "cm", xq, W1.shape[0], "int8_t",
                            "int32_t", extra_cflags=flags)
    return {"mean": float(run.instructions.mean()), "predictions": est.classes_[run.predictions],
            "flash": run.model_flash_bytes}


def ours(est, X_tr, rows: np.ndarray, precision: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-m4-mlp-") as tmp:
        result = tinycc_ml.compile(est, target=TARGET, precision=precision, calibration=X_tr, name="m", out_dir=tmp)
        o = result.output
        x = quantise(rows, o.input_scale, 16).astype(np.int16)
        src, hdr = [Path(tmp) / "m.c"], Path(tmp) / "m.h"
        run = run_on_target(TARGET, src, hdr, "m", x, o.n_scores, o.input_ctype, o.score_ctype)
        prof = function_profile(TARGET, src, hdr, "m", x[:4], o.n_scores, o.input_ctype, o.score_ctype)
        host = tinycc_ml.compile(est, precision=precision, calibration=X_tr).load()
    kernels = {f for fs in o.node_functions.values() for f in fs}
    inside = sum(v for f, v in prof.items() if f in kernels)
    return {"mean": float(run.instructions.mean()), "outside": 1 - inside / sum(prof.values()),
            "exact": bool(np.array_equal(run.predictions, host.predict_index(rows))),
            "predictions": est.classes_[run.predictions], "flash": run.model_flash_bytes,
            "kernels": sorted(kernels)}


def main(argv=None) -> int:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--cmsis-nn", type=Path, default=None)
    parser.add_argument("--opt", default="-Ofast", help="CMSIS-NN's optimisation flag (default -Ofast)")
    args = parser.parse_args(argv)
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 500 steps: the model is as trained
        est = MLPClassifier((32,), max_iter=500, random_state=0).fit(X_tr, y_tr)
    rows, labels = X_te[:args.rows], y_te[:args.rows]
    table = []
    tree, how = cmsis_tree(args.cmsis_nn, FILES)
    cmsis = cmsis_network(tree, est, X_tr, rows, args.opt) if tree else None
    for precision in ("int16", "int8"):
        m = ours(est, X_tr, rows, precision)
        ratio = f"{m['mean'] / cmsis['mean']:.2f}x" if cmsis else "-"
        table.append([f"tinycc-ml {precision}", f"{m['mean']:,.0f}", ratio, f"{100 * m['outside']:.1f}%",
                      f"{m['flash']:,}", f"{100 * np.mean(m['predictions'] == labels):.1f}%",
                      "yes" if m["exact"] else "NO"])
    if cmsis:
        table.append([f"CMSIS-NN arm_fully_connected_s8 x 2 ({args.opt})", f"{cmsis['mean']:,.0f}", "1.00x", "-",
                      f"{cmsis['flash']:,}", f"{100 * np.mean(cmsis['predictions'] == labels):.1f}%", "-"])
    else:
        print(f"CMSIS-NN rows left out: {how}", file=sys.stderr)
    write_table("m4_mlp", ["build (Cortex-M4F, MLP 64-32-10 on digits)", "instructions / inference",
                           "vs CMSIS-NN", "outside the kernels", "model flash B", f"accuracy ({args.rows} rows)",
                           "= interpreter"], table, script=f"benchmarks/m4_mlp.py --rows {args.rows} --opt {args.opt}",
                align=[None, "right", "right", "right", "right", "right", None])
    return 0


if __name__ == "__main__":
    sys.exit(main())
