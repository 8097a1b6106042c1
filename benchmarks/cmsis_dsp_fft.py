"""Real FFTs on the Cortex-M4F (MPS2 AN386, QEMU -icount: exact instruction counts): tinycc-ml's SignalRfft of
int16 frames (kissfft's q15 arithmetic, arm.m4_fft's DSP kernel) and of int32 frames (q31, the shared C) next to
CMSIS-DSP's arm_rfft_q15 / arm_rfft_q31 of the same length, built from its sources with the same compiler, run in
the same harness.

    python benchmarks/cmsis_dsp_fft.py [--sizes 256,512,1024] [--opt -O2] [--cmsis-dsp GITDIR] [--cmsis-core GITDIR]

Counted: the transform's own functions in one call, from the simulator's per-function profile (ours: the
functions named *rfft* / *cfft*, the model built with -fno-inline-functions-called-once so the transform stays a
function of its own; CMSIS-DSP: every arm_* function the call runs, its bit reversal and split included; not the
harness' copy of the input, which arm_rfft_q15 overwrites). Our output is checked equal to tflite-micro's
SignalRfft on every bit; CMSIS-DSP's is a different arithmetic (a 1/2 scaling per stage, truncating products) and
only its count is compared. CMSIS-DSP and CMSIS-Core come from git directories (the fetched mirrors
../.mirror/ARM-software+CMSIS-DSP and ARM-software+CMSIS_6 next to this checkout by default), extracted into a
temporary cache at run time, never part of tinycc-ml.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.runtime.profile import function_profile  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = "cortex-m4"
RESULTS = ROOT / "benchmarks" / "results" / "cmsis_dsp_fft.json"
MIRRORS = next((p / ".mirror" for p in ROOT.parents if (p / ".mirror" / "ARM-software+CMSIS-DSP").is_dir()), None)
DSP_FILES = ("Include", "PrivateInclude", "Source/TransformFunctions", "Source/CommonTables",
             "Source/BasicMathFunctions")
CORE_FILES = ("CMSIS/Core/Include",)
KINDS = {"q15": ("int16", 7, "int16_t"), "q31": ("int32", 2, "int32_t")}
SOURCES = {"q15": ("arm_rfft_q15.c", "arm_rfft_init_q15.c", "arm_cfft_q15.c", "arm_cfft_init_q15.c",
                   "arm_cfft_radix4_q15.c", "arm_cfft_radix2_q15.c"),
           "q31": ("arm_rfft_q31.c", "arm_rfft_init_q31.c", "arm_cfft_q31.c", "arm_cfft_init_q31.c",
                   "arm_cfft_radix4_q31.c", "arm_cfft_radix2_q31.c")}

WRAPPER = """/* CMSIS-DSP's real FFT behind the harness' predict/scores entry points */
#include "dsp/transform_functions.h"
#include "cm.h"

static {T} cm_src[{N}];
static {T} cm_dst[{N} * 2];
static arm_rfft_instance_{kind} cm_s;
static int cm_ready;

int cm_predict(const {T} *x)
{{
    if (!cm_ready) {{
        arm_rfft_init_{N}_{kind}(&cm_s, 0, 1);
        cm_ready = 1;
    }}
    for (int i = 0; i < {N}; ++i) cm_src[i] = x[i]; /* the transform overwrites its input */
    arm_rfft_{kind}(&cm_s, cm_src, cm_dst);
    return (int)cm_dst[0];
}}

void cm_scores(const {T} *x, {T} *scores)
{{
    (void)cm_predict(x);
    for (int i = 0; i < {N} + 2; ++i) scores[i] = cm_dst[i];
}}
"""


def extract(git_dir: Path, files, label: str) -> Path:
    """``files`` of the git directory's HEAD in a cache directory (extracted once per commit)."""
    git = ["git", f"--git-dir={git_dir}"]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    cache = Path(tempfile.gettempdir()) / f"tinycc-ml-{label}-{commit[:12]}"
    if not all((cache / f).exists() for f in files):
        cache.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run([*git, "archive", "HEAD", *files], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(cache)], input=tar, check=True)
    return cache


def frames(kind: str, size: int) -> np.ndarray:
    """Two rows of noise at a quarter of full scale (the harness measures the second call)."""
    dtype = np.dtype(KINDS[kind][0])
    rng = np.random.default_rng(size)
    return np.round(rng.normal(0, np.iinfo(dtype).max / 4, (2, size))).astype(dtype)


def ours(kind: str, size: int, opt: str) -> dict:
    from tests.ops.signal.stream_check import one_op, tflite_micro_outputs  # deferred: the tests' model builder

    dtype, tensor_type, ctype = KINDS[kind]
    data = one_op("SignalRfft", (size,), dtype, [((size + 2,), dtype)], {"T": tensor_type, "fft_length": size})
    x = frames(kind, size)
    (want,) = tflite_micro_outputs(data, x)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fft-") as tmp:
        path = Path(tmp) / "rfft.tflite"
        path.write_bytes(data)
        res = tinycc_ml.compile(path, target=TARGET, name="op", out_dir=Path(tmp) / "o")
        out = res.output
        src, hdr = [Path(tmp) / "o" / "op.c"], Path(tmp) / "o" / "op.h"
        flags = ("-fno-inline-functions-called-once", opt)
        run = run_on_target(TARGET, src, hdr, "op", x, out.n_scores, out.input_ctype, out.score_ctype,
                            extra_cflags=flags)
        profile = function_profile(TARGET, src, hdr, "op", x, out.n_scores, out.input_ctype, out.score_ctype,
                                   extra_cflags=flags)
    functions = {k: v for k, v in profile.items() if "rfft" in k or "cfft" in k}
    kernel = "arm.m4_fft (DSP)" if any("m4_rfft" in k for k in functions) else "shared C"
    return {"instructions": int(sum(functions.values())), "functions": sorted(functions), "kernel": kernel,
            "equal": bool(np.array_equal(np.asarray(run.scores[1]).reshape(-1), want[1].reshape(-1)))}


def cmsis(kind: str, size: int, dsp: Path, core: Path, opt: str) -> dict:
    ctype = KINDS[kind][2]
    sources = [dsp / "Source" / "TransformFunctions" / f for f in SOURCES[kind]]
    sources += [dsp / "Source" / "TransformFunctions" / "arm_bitreversal2.c"]
    sources += [dsp / "Source" / "CommonTables" / f for f in ("arm_common_tables.c", "arm_const_structs.c")]
    sources += [dsp / "Source" / "BasicMathFunctions" / f"arm_shift_{kind}.c"]
    flags = (f"-I{core / 'CMSIS' / 'Core' / 'Include'}", f"-I{dsp / 'Include'}", f"-I{dsp / 'PrivateInclude'}",
             "-DARM_MATH_LOOPUNROLL", "-Wno-error", opt)
    x = frames(kind, size)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-dsp-") as tmp:
        (Path(tmp) / "cm.c").write_text(WRAPPER.format(T=ctype, N=size, kind=kind))
        (Path(tmp) / "cm.h").write_text(f"#include <stdint.h>\nint cm_predict(const {ctype} *x);\n"
                                        f"void cm_scores(const {ctype} *x, {ctype} *scores);\n")
        args = ([Path(tmp) / "cm.c", *sources], Path(tmp) / "cm.h", "cm", x, size + 2, ctype, ctype)
        run_on_target(TARGET, *args, extra_cflags=flags)  # builds and runs: the sources compile
        profile = function_profile(TARGET, *args, extra_cflags=flags)
    functions = {k: v for k, v in profile.items() if k.startswith("arm_") and "init" not in k}
    return {"instructions": int(sum(functions.values())), "functions": sorted(functions)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--kinds", default="q15,q31")
    ap.add_argument("--opt", default="-O2", help="optimisation flag for both sides (default -O2)")
    ap.add_argument("--cmsis-dsp", type=Path, default=MIRRORS and MIRRORS / "ARM-software+CMSIS-DSP" / "repo")
    ap.add_argument("--cmsis-core", type=Path, default=MIRRORS and MIRRORS / "ARM-software+CMSIS_6" / "repo")
    args = ap.parse_args(argv)
    if not (args.cmsis_dsp and args.cmsis_dsp.is_dir() and args.cmsis_core and args.cmsis_core.is_dir()):
        print("CMSIS-DSP / CMSIS-Core git directories not found (--cmsis-dsp, --cmsis-core)")
        return 1
    dsp = extract(args.cmsis_dsp, DSP_FILES, "cmsis-dsp")
    core = extract(args.cmsis_core, CORE_FILES, "cmsis-core")
    rows, saved = [], []
    for kind in args.kinds.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            a, b = ours(kind, size, args.opt), cmsis(kind, size, dsp, core, args.opt)
            ratio = a["instructions"] / b["instructions"]
            saved.append({"kind": kind, "size": size, "ours": a, "cmsis_dsp": b, "ratio": round(ratio, 3)})
            rows.append([f"{size}-point real FFT, {kind}", a["kernel"], f"{a['instructions']:,}",
                         f"{b['instructions']:,}", f"{ratio:.2f}", "yes" if a["equal"] else "NO"])
    script = "benchmarks/cmsis_dsp_fft.py" + (f" --opt {args.opt}" if args.opt != "-O2" else "")
    write_table("cmsis_dsp_fft", [f"transform (Cortex-M4F, {args.opt})", "tinycc-ml's code",
                                  "tinycc-ml instructions", "CMSIS-DSP `arm_rfft_*` instructions",
                                  "ratio", "equal to tflite-micro"],
                rows, script=script, align=[None, None, "right", "right", "right", None])
    RESULTS.with_name("cmsis_dsp_fft_detail.json").write_text(json.dumps(saved, indent=1) + "\n")
    return 0 if all(r["ours"]["equal"] for r in saved) else 1


if __name__ == "__main__":
    sys.exit(main())
