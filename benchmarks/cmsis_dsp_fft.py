"""Real FFTs and an MFCC frame on the Cortex-M4F (MPS2 AN386, QEMU -icount: exact instruction counts): tinycc-ml's
SignalRfft of int16 and int32 frames (kissfft's q15 and q31 arithmetic, arm.m4_fft's DSP kernels) next to CMSIS-DSP's
arm_rfft_q15 / arm_rfft_q31 of the same length, and tinycc_ml.features' int16 MFCC of one 512-sample frame (window,
power spectrum, 40 mel bands, log, 13 DCT coefficients) next to CMSIS-DSP's arm_mfcc_q15 with the same filters,
built from its sources with the same compiler, run in the same harness.

    python benchmarks/cmsis_dsp_fft.py [--sizes 256,512,1024] [--opt -O2] [--no-mfcc] [--cmsis-dsp GITDIR]
                                       [--cmsis-core GITDIR]

Counted: the transform's own functions in one call, from the simulator's per-function profile (ours: the
functions named *rfft* / *cfft*, the model built with -fno-inline-functions-called-once so the transform stays a
function of its own; CMSIS-DSP: every arm_* function the call runs, its bit reversal and split included; not the
harness' copy of the input, which arm_rfft_q15 overwrites). Our output is checked equal to tflite-micro's
SignalRfft on every bit; CMSIS-DSP's is a different arithmetic (a 1/2 scaling per stage, truncating products) and
only its count is compared. The MFCC frame: ours is the int16 build of the front end before a linear model less the
same model compiled alone on the features (the front end's arithmetic is checked bit-exact with the fixed-point
interpreter by the tests, not here); CMSIS-DSP's is every arm_* function arm_mfcc_q15 runs (its block scaling, FFT,
magnitudes, mel dot products, log and DCT). CMSIS-DSP and CMSIS-Core come from git directories (the fetched mirrors
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
             "Source/BasicMathFunctions", "Source/StatisticsFunctions", "Source/FastMathFunctions",
             "Source/ComplexMathFunctions", "Source/MatrixFunctions")
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


# one MFCC frame: 512 samples at 16 kHz, 40 mel bands (librosa's Slaney filters), 13 coefficients
MFCC_SIZE, MFCC_MELS, MFCC_COEFFICIENTS, MFCC_RATE = 512, 40, 13, 16000
MFCC_SOURCES = ("TransformFunctions/arm_mfcc_q15.c", "TransformFunctions/arm_mfcc_init_q15.c",
                *(f"TransformFunctions/{f}" for f in SOURCES["q15"]), "TransformFunctions/arm_bitreversal2.c",
                "CommonTables/arm_common_tables.c", "CommonTables/arm_const_structs.c",
                "CommonTables/arm_mve_tables.c", "StatisticsFunctions/arm_absmax_q15.c",
                "FastMathFunctions/arm_divide_q15.c", "FastMathFunctions/arm_vlog_q31.c",
                "FastMathFunctions/arm_sqrt_q31.c", "BasicMathFunctions/arm_abs_q15.c",
                *(f"BasicMathFunctions/arm_{f}.c" for f in ("scale_q15", "mult_q15", "dot_prod_q15", "scale_q31",
                                                             "offset_q31", "shift_q31", "shift_q15")),
                "ComplexMathFunctions/arm_cmplx_mag_q15.c", "MatrixFunctions/arm_mat_vec_mult_q15.c")


def mfcc_steps():
    from tinycc_ml.features import DCT, Log, MelFilterBank, PowerSpectrum, Window  # deferred: only this row

    return [Window(MFCC_SIZE), PowerSpectrum(MFCC_SIZE), MelFilterBank(MFCC_RATE, MFCC_SIZE, MFCC_MELS),
            Log(floor=1.0), DCT(MFCC_MELS, MFCC_COEFFICIENTS)]


def mfcc_audio(rows: int, seed: int) -> np.ndarray:
    """Tones of random pitch and loudness in noise, int16 sample values."""
    rng = np.random.default_rng(seed)
    t = np.arange(MFCC_SIZE) / MFCC_RATE
    x = [3000 * rng.uniform(0.05, 1) * np.sin(2 * np.pi * rng.uniform(100, 4000) * t) + rng.normal(0, 300, t.size)
         for _ in range(rows)]
    return np.clip(np.round(np.array(x)), -32768, 32767)


def ours_mfcc(opt: str) -> dict:
    """The int16 build of the front end before a linear model, less the same model alone on the features."""
    from sklearn.linear_model import LinearRegression  # deferred: only this row
    from sklearn.pipeline import make_pipeline

    from tinycc_ml.ir.fixed import quantise

    X = mfcc_audio(200, 0)
    target = np.random.default_rng(1).normal(size=len(X))
    front = make_pipeline(*mfcc_steps()).fit(X)
    features = front.transform(X)
    counts = []
    for model, rows, calibration in ((make_pipeline(*mfcc_steps(), LinearRegression()).fit(X, target), X[:2], X),
                                     (LinearRegression().fit(features, target), features[:2], features)):
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-mfcc-") as tmp:
            res = tinycc_ml.compile(model, target=TARGET, precision="int16", calibration=calibration, name="m",
                                    out_dir=Path(tmp))
            out = res.output
            x = quantise(rows, out.input_scale, 16).astype(np.int16)
            run = run_on_target(TARGET, [Path(tmp) / "m.c"], Path(tmp) / "m.h", "m", x, out.n_scores,
                                out.input_ctype, out.score_ctype, extra_cflags=(opt,))
            counts.append(int(run.instructions[1]))
    return {"instructions": counts[0] - counts[1], "pipeline": counts[0], "model_alone": counts[1]}


MFCC_WRAPPER = """/* CMSIS-DSP's MFCC of one frame behind the harness' predict/scores entry points */
#include "dsp/transform_functions.h"
#include "cm.h"

{tables}
static q15_t cm_src[{N}];
static q15_t cm_dst[{C}];
static q31_t cm_tmp[{N} * 2 + 2];
static arm_mfcc_instance_q15 cm_s;
static int cm_ready;

int cm_predict(const int16_t *x)
{{
    if (!cm_ready) {{
        arm_mfcc_init_{N}_q15(&cm_s, {M}, {C}, cm_dct, cm_filter_pos, cm_filter_lengths, cm_filter, cm_window);
        cm_ready = 1;
    }}
    for (int i = 0; i < {N}; ++i) cm_src[i] = x[i]; /* the MFCC overwrites its input */
    arm_mfcc_q15(&cm_s, cm_src, cm_dst, cm_tmp);
    return cm_dst[0];
}}

void cm_scores(const int16_t *x, int16_t *scores)
{{
    (void)cm_predict(x);
    for (int i = 0; i < {C}; ++i) scores[i] = cm_dst[i];
}}
"""


def cmsis_mfcc(dsp: Path, core: Path, opt: str) -> dict:
    """arm_mfcc_q15 with the same mel filters (peaks scaled to 1), Hann window and orthonormal DCT in q15."""
    weights = mfcc_steps()[2].weights()
    positions, lengths, coefficients = [], [], []
    for row in weights:
        used = np.flatnonzero(row)
        positions.append(int(used[0]))
        lengths.append(int(used[-1] - used[0] + 1))
        coefficients += list(row[used[0]:used[-1] + 1] / weights.max())
    k = np.arange(MFCC_MELS)
    dct = np.stack([np.cos(np.pi / MFCC_MELS * (k + 0.5) * c) for c in range(MFCC_COEFFICIENTS)])
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(MFCC_SIZE) / MFCC_SIZE)

    def q15(name: str, values) -> str:
        codes = np.clip(np.round(np.asarray(values).reshape(-1) * 32768), -32768, 32767).astype(int)
        return f"static const q15_t {name}[{codes.size}] = {{{', '.join(map(str, codes))}}};"

    tables = "\n".join([q15("cm_dct", dct * np.sqrt(2 / MFCC_MELS)), q15("cm_filter", coefficients),
                        q15("cm_window", window),
                        f"static const uint32_t cm_filter_pos[{MFCC_MELS}] = {{{', '.join(map(str, positions))}}};",
                        f"static const uint32_t cm_filter_lengths[{MFCC_MELS}] = "
                        f"{{{', '.join(map(str, lengths))}}};"])
    sources = [dsp / "Source" / f for f in dict.fromkeys(MFCC_SOURCES)]
    flags = (f"-I{core / 'CMSIS' / 'Core' / 'Include'}", f"-I{dsp / 'Include'}", f"-I{dsp / 'PrivateInclude'}",
             "-DARM_MATH_LOOPUNROLL", "-Wno-error", opt)
    x = mfcc_audio(2, 2).astype(np.int16)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-mfcc-") as tmp:
        (Path(tmp) / "cm.c").write_text(MFCC_WRAPPER.format(tables=tables, N=MFCC_SIZE, M=MFCC_MELS,
                                                             C=MFCC_COEFFICIENTS))
        (Path(tmp) / "cm.h").write_text("#include <stdint.h>\nint cm_predict(const int16_t *x);\n"
                                        "void cm_scores(const int16_t *x, int16_t *scores);\n")
        args = ([Path(tmp) / "cm.c", *sources], Path(tmp) / "cm.h", "cm", x, MFCC_COEFFICIENTS, "int16_t", "int16_t")
        run_on_target(TARGET, *args, extra_cflags=flags)
        profile = function_profile(TARGET, *args, extra_cflags=flags)
    functions = {k: v for k, v in profile.items() if k.startswith("arm_") and "init" not in k}
    return {"instructions": int(sum(functions.values())), "functions": sorted(functions)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--kinds", default="q15,q31")
    ap.add_argument("--opt", default="-O2", help="optimisation flag for both sides (default -O2)")
    ap.add_argument("--no-mfcc", action="store_true", help="the transforms only")
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
    if not args.no_mfcc:
        a, b = ours_mfcc(args.opt), cmsis_mfcc(dsp, core, args.opt)
        ratio = a["instructions"] / b["instructions"]
        saved.append({"kind": "mfcc", "size": MFCC_SIZE, "ours": a, "cmsis_dsp": b, "ratio": round(ratio, 3)})
        rows.append([f"MFCC frame ({MFCC_SIZE} samples, {MFCC_MELS} mel, {MFCC_COEFFICIENTS} coefficients), q15",
                     "tinycc_ml.features at int16", f"{a['instructions']:,}", f"{b['instructions']:,} "
                     "(`arm_mfcc_q15`)", f"{ratio:.2f}", "- (interpreter: tests)"])
    script = "benchmarks/cmsis_dsp_fft.py" + (f" --opt {args.opt}" if args.opt != "-O2" else "")
    write_table("cmsis_dsp_fft", [f"transform (Cortex-M4F, {args.opt})", "tinycc-ml's code",
                                  "tinycc-ml instructions", "CMSIS-DSP `arm_rfft_*` instructions",
                                  "ratio", "equal to tflite-micro"],
                rows, script=script, align=[None, None, "right", "right", "right", None])
    RESULTS.with_name("cmsis_dsp_fft_detail.json").write_text(json.dumps(saved, indent=1) + "\n")
    return 0 if all(r["ours"].get("equal", True) for r in saved) else 1


if __name__ == "__main__":
    sys.exit(main())
