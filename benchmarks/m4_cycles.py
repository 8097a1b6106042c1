"""SeeDot's dense USPS-10 ProtoNN shape on the Cortex-M4F (MPS2 AN386, QEMU -icount, exact instruction
counts): tinycc-ml's float (FPU), int16 and int8 builds, and its W x mat-vec (25 x 256) next to CMSIS-NN's
arm_fully_connected_s16 / _s8 for the same layer, built from CMSIS-NN's sources with the same compiler
and flags and run in the same harness; and tinycc-ml's builds on the Cortex-M33 (MPS2 AN505).

    python benchmarks/m4_cycles.py [--rows 100] [--cmsis-nn PATH] [--opts -Os,-O2] [--no-m33] [--readme]

The model: kernel_cycles.py's "dense" (D=256, d^=25, m=55, L=10, random W, seed 0). Per inference: the
whole <prefix>_predict call under QEMU. The mat-vec: the kernel functions computing W x in one predict
call (per-function profile in unicorn, whose totals equal QEMU's counts: checked below). CMSIS-NN: the
arm_fully_connected_* call on the same rows (int16 inputs for _s16, their top bytes for _s8), and its
arm_nn_vec_mat_mult_t_* function alone; CMSIS-NN's weights are the int8 rounding of W (it has no
16-bit weights: _s16 is int16 activations x int8 weights, our int8 build's operand widths).

CMSIS-NN comes from --cmsis-nn (a source tree or a git directory), else $TINYCC_ML_CMSIS_NN, else the
fetched mirror ../.mirror/ARM-software+CMSIS-NN/repo next to this checkout; its files are extracted
into a temporary cache directory at run time (never part of tinycc-ml). Without it the CMSIS-NN rows
say so.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_cycles import DHAT, D, protonn_shape, usps  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.ir.fixed import quantise, run_fixed  # noqa: E402
from tinycc_ml.runtime.profile import function_profile  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

TARGET = "cortex-m4"
MACS = DHAT * D  # the W x mat-vec
CMSIS_FILES = ("Include", "Source/FullyConnectedFunctions/arm_fully_connected_s16.c",
               "Source/FullyConnectedFunctions/arm_fully_connected_s8.c",
               "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s16.c",
               "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c")
MIRROR = Path(__file__).resolve().parents[2] / ".mirror" / "ARM-software+CMSIS-NN" / "repo"


def write(files: dict[str, str], folder: Path) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


# ---------------------------------------------------------------- tinycc-ml

def tinycc_rows(model, X, Xt, yt, rows: int, opt: str, target: str = TARGET) -> tuple[list[dict], np.ndarray]:
    out, x16 = [], None
    flags = ("-Werror",) + ((opt,) if opt != "-Os" else ())
    for precision in ("float", "int16", "int8"):
        res = tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:2000], name="km")
        o = res.output
        if precision == "float":
            x = Xt[:rows].astype(np.float32)
        else:
            x = quantise(Xt[:rows], o.input_scale, 16).astype(np.int16)
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-m4bench-") as tmp:
            write(res.files, Path(tmp))
            src, hdr = [Path(tmp) / "km.c"], Path(tmp) / "km.h"
            run = run_on_target(target, src, hdr, "km", x, o.n_scores, o.input_ctype, o.score_ctype,
                                extra_cflags=flags)
            row = {"what": f"tinycc-ml ProtoNN {precision}", "precision": precision, "opt": opt,
                   "mean": float(run.instructions.mean()), "max": int(run.instructions.max()),
                   "flash": run.model_flash_bytes, "acc": float(np.mean(run.predictions == yt[:rows])),
                   "exact": None, "matvec": None}
            if precision != "float":
                x16 = x if precision == "int16" else x16
                want = run_fixed(res.graph, x)
                row["exact"] = bool(np.array_equal(run.scores, want["scores"])
                                    and np.array_equal(run.predictions, want["prediction"]))
                prof = function_profile(target, src, hdr, "km", x[:2], o.n_scores, o.input_ctype, o.score_ctype,
                                        extra_cflags=flags)
                # the W x kernels: mac<rows>w<bits>_<D>, with the rows' store tag (e...) where they store them
                kernels = sorted({f for fs in o.node_functions.values() for f in fs
                                  if re.search(rf"mac\d+w\d+_{D}(e\w+)?$", f)})
                row["matvec"] = sum(prof[f] for f in kernels)
                row["kernels"] = kernels
                row["profile_total"] = sum(prof.values())
                row["qemu_first2"] = float(run.instructions[:2].mean())
        out.append(row)
    return out, x16


# ---------------------------------------------------------------- CMSIS-NN

def cmsis_tree(path: Path | None, files=CMSIS_FILES) -> tuple[Path | None, str]:
    """CMSIS-NN's sources (``files``: paths in its tree) extracted into a cache directory (or used in place);
    (None, why) when absent."""
    candidates = [path] if path else [Path(p) for p in [os.environ.get("TINYCC_ML_CMSIS_NN")] if p] + [MIRROR]
    for c in candidates:
        if (c / "Include" / "arm_nnfunctions.h").is_file():
            return c, f"source tree {c}"
        if (c / "HEAD").is_file():  # a git directory without a work tree
            git = ["git", f"--git-dir={c}"]
            commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
            if not commit:
                continue
            cache = Path(tempfile.gettempdir()) / f"tinycc-ml-cmsis-nn-{commit[:12]}"
            if not all((cache / f).exists() for f in files):
                cache.mkdir(parents=True, exist_ok=True)
                tar = subprocess.run([*git, "archive", "HEAD", *files], capture_output=True, check=True).stdout
                subprocess.run(["tar", "-x", "-C", str(cache)], input=tar, check=True)
            return cache, f"git {c} at {commit[:12]}"
    return None, "CMSIS-NN sources not found (--cmsis-nn PATH, $TINYCC_ML_CMSIS_NN or " + str(MIRROR) + ")"


def requant(acc: np.ndarray, bits: int) -> tuple[int, int, int]:
    """(multiplier, shift, k): CMSIS-NN's per-tensor requantisation dividing by 2^k so that the layer's
    outputs fit ``bits`` bits (multiplier 2^30 = 0.5 in Q31)."""
    k = max(0, int(np.ceil(np.log2(np.abs(acc).max() + 1))) - (bits - 1) + 1)
    return 1 << 30, 1 - k, k


WRAPPER = """/* the CMSIS-NN layer behind the harness' predict/scores entry points */
#include "arm_nnfunctions.h"
#include "cm.h"

static const int8_t cm_w[{rows} * {cols}] = {{ {weights} }};
static const {bias_t} cm_bias[{rows}];
static const cmsis_nn_context cm_ctx = {{0, 0}};
static const cmsis_nn_fc_params cm_fc = {{0, 0, 0, {{{lo}, {hi}}}}};
static const cmsis_nn_per_tensor_quant_params cm_q = {{{mult}, {shift}}};
static const cmsis_nn_dims cm_in = {{1, 1, 1, {cols}}}, cm_f = {{{cols}, 1, 1, {rows}}};
static const cmsis_nn_dims cm_b = {{1, 1, 1, {rows}}}, cm_o = {{1, 1, 1, {rows}}};
static {out_t} cm_out[{rows}];

int cm_predict(const {in_t} *x)
{{
    {fn}(&cm_ctx, &cm_fc, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_b, cm_bias, &cm_o, cm_out);
    return cm_out[0];
}}

void cm_scores(const {in_t} *x, int32_t *scores)
{{
    (void)cm_predict(x);
    for (int r = 0; r < {rows}; ++r) scores[r] = cm_out[r];
}}
"""
HEADER = "#include <stdint.h>\nint cm_predict(const {in_t} *x);\nvoid cm_scores(const {in_t} *x, int32_t *scores);\n"


def cmsis_rows(tree: Path, W: np.ndarray, x16: np.ndarray, opt: str) -> list[dict]:
    w8 = np.clip(np.round(W / np.abs(W).max() * 127), -127, 127).astype(np.int64)
    out = []
    for kind in ("s16", "s8"):
        x = x16.astype(np.int64) if kind == "s16" else (x16.astype(np.int64) >> 8)
        acc = x @ w8.T
        bits = 16 if kind == "s16" else 8
        mult, shift, k = requant(acc, bits)
        in_t, out_t = ("int16_t", "int16_t") if kind == "s16" else ("int8_t", "int8_t")
        text = WRAPPER.format(rows=W.shape[0], cols=W.shape[1], weights=", ".join(str(int(v)) for v in w8.reshape(-1)),
                              bias_t="int64_t" if kind == "s16" else "int32_t", lo=-(1 << (bits - 1)),
                              hi=(1 << (bits - 1)) - 1, mult=mult, shift=shift, out_t=out_t, in_t=in_t,
                              fn=f"arm_fully_connected_{kind}")
        srcs = [tree / "Source" / "FullyConnectedFunctions" / f"arm_fully_connected_{kind}.c",
                tree / "Source" / "NNSupportFunctions" / f"arm_nn_vec_mat_mult_t_{kind}.c"]
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-") as tmp:
            write({"cm.c": text, "cm.h": HEADER.format(in_t=in_t)}, Path(tmp))
            sources = [Path(tmp) / "cm.c", *srcs]
            flags = (f"-I{tree / 'Include'}",) + ((opt,) if opt != "-Os" else ())
            xin = x.astype(np.int16 if kind == "s16" else np.int8)
            run = run_on_target(TARGET, sources, Path(tmp) / "cm.h", "cm", xin, W.shape[0], in_t, "int32_t",
                                extra_cflags=flags)
            prof = function_profile(TARGET, sources, Path(tmp) / "cm.h", "cm", xin[:2], W.shape[0], in_t, "int32_t",
                                    extra_cflags=flags)
        # CMSIS-NN's rounding: within one unit of acc / 2^k, saturated
        ref = np.clip(acc / 2.0**k, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        sane = bool(np.abs(run.scores - ref).max() <= 1)
        inner = f"arm_nn_vec_mat_mult_t_{kind}"
        out.append({"what": f"CMSIS-NN arm_fully_connected_{kind}", "precision": f"x int{bits}, W int8", "opt": opt,
                    "mean": float(run.instructions.mean()), "max": int(run.instructions.max()),
                    "flash": run.model_flash_bytes, "matvec": prof.get(inner), "inner": inner, "sane": sane})
    return out


# ---------------------------------------------------------------- report

COLUMNS = ["build (Cortex-M4F, QEMU mps2-an386)", "flags", "operands", "instructions / inference",
           "W x mat-vec instructions", "per MAC", "model flash", "bit-exact"]


def table_rows(rows: list[dict]) -> list[list[str]]:
    out = []
    for r in rows:
        mv = f"{r['matvec']:,.0f}" if r.get("matvec") is not None else "-"
        per = f"{r['matvec'] / MACS:.2f}" if r.get("matvec") is not None else "-"
        exact = {True: "yes", False: "NO", None: "-"}[r.get("exact")]
        operands = {"float": "float32 (FPU)", "int16": "x int16, W int16",
                    "int8": "x int16, W int8 (stored as int16)"}.get(r["precision"], r["precision"])
        out.append([r["what"], r["opt"], operands, f"{r['mean']:,.0f}", mv, per, f"{r['flash']:,}", exact])
    return out


def table(rows: list[dict], float_ratio: float | None) -> list[str]:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(rows)]
    if float_ratio:
        lines.append("")
        lines.append(f"Float (FPU) / int16 instructions per inference: {float_ratio:.2f}.")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--cmsis-nn", type=Path, default=None, help="CMSIS-NN source tree or git directory")
    ap.add_argument("--readme", action="store_true", help="print the README section")
    ap.add_argument("--opts", default="-Os,-O2", help="optimisation flags to build both sides with (-Os: the chip's)")
    ap.add_argument("--no-m33", action="store_true", help="leave out the Cortex-M33 (mps2-an505) rows")
    args = ap.parse_args(argv)
    t0 = time.time()
    X, _, Xt, yt = usps()
    model = protonn_shape(X, None)
    rows, x16 = [], None
    for opt in args.opts.split(","):
        more, x16 = tinycc_rows(model, X, Xt, yt, args.rows, opt)
        rows += more
    by = {r["precision"]: r for r in rows if r["opt"] == "-Os"}
    for r in rows:
        if r.get("profile_total") is not None and r["profile_total"] != r["qemu_first2"]:
            print(f"warning: {r['what']}: unicorn profile total {r['profile_total']} != QEMU {r['qemu_first2']}")
    tree, how = cmsis_tree(args.cmsis_nn)
    if tree is None:
        print(f"CMSIS-NN unavailable: {how}")
    else:
        print(f"CMSIS-NN: {how}")
        # the layer's input: the int16 build's quantised rows (W x reads them after the clamp)
        for opt in args.opts.split(","):
            rows += cmsis_rows(tree, model.W, x16, opt)
        for r in rows:
            if r.get("sane") is False:
                print(f"warning: {r['what']} outputs differ from W8 x / 2^k by more than one unit")
    ratio = by["float"]["mean"] / by["int16"]["mean"]
    m33 = [] if args.no_m33 else tinycc_rows(model, X, Xt, yt, args.rows, "-Os", "cortex-m33")[0]
    for r in m33:
        r["what"] = r["what"].replace("tinycc-ml", "tinycc-ml (Cortex-M33)")
    rows.sort(key=lambda r: (r["what"].startswith("CMSIS"), r["opt"] != "-Os"))
    print(f"\n{args.rows} USPS-10 test rows; model {model.describe()}; W x: {MACS} MACs ({time.time() - t0:.0f} s)")
    for line in table(rows, ratio):
        print(line)
    script = f"benchmarks/m4_cycles.py --rows {args.rows}"
    write_table("m4_cycles_m4", COLUMNS, table_rows(rows), script=script, file=sys.stderr)
    if m33:
        print()
        for line in table(m33, None):
            print(line.replace("Cortex-M4F, QEMU mps2-an386", "Cortex-M33, QEMU mps2-an505"))
        write_table("m4_cycles_m33", [COLUMNS[0].replace("Cortex-M4F, QEMU mps2-an386", "Cortex-M33, QEMU mps2-an505"),
                                      *COLUMNS[1:]], table_rows(m33), script=script, file=sys.stderr)
    for r in rows:
        if r.get("kernels"):
            print(f"{r['what']} {r['opt']}: W x kernels {', '.join(r['kernels'])}")
        if r.get("inner"):
            print(f"{r['what']} {r['opt']}: mat-vec column = {r['inner']} (MACs and requantisation)")
    if args.readme:
        print("\n## Cortex-M4F: SeeDot's dense USPS-10 ProtoNN shape and CMSIS-NN\n")
        print("`python benchmarks/m4_cycles.py` (exact instruction counts, QEMU `mps2-an386` `-icount`; the "
              "mat-vec column from the per-function profile):\n")
        for line in table(rows, ratio):
            print(line)
        if m33:
            print("\nThe same kernels on the Cortex-M33 (`cortex-m33`, MPS2 AN505):\n")
            for line in table(m33, None):
                print(line.replace("Cortex-M4F, QEMU mps2-an386", "Cortex-M33, QEMU mps2-an505"))


if __name__ == "__main__":
    main()
