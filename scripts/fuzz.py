"""Long fuzz runs on every surface of the compiler, counting outcomes; fresh seeds for as long as it is given.

    python scripts/fuzz.py --cases 2000 [--seed 1] [--target model,ir,...|both|all] [--cli-cases 100]
                           [--memory-gb 4] [--timeout 30] [--jobs N] [--case K]
    python scripts/fuzz.py --explore 600 --target all [--jobs N] [--reproducers DIR] [--json FILE]

Surfaces (``--target``, comma-separated; ``both`` is model,ir; ``all`` is every one):

- ``model``: mutated model files (zip structure, member bytes, .npy headers, metadata, values) loaded and
  compiled; success means the C compiles with gcc -Wall -Wextra -Werror (tests/fuzzing.py);
- ``ir``: mutated IR text parsed, verified, interpreted and emitted;
- ``tflite``: hostile .tflite files (tests/tflite_fuzzing.py): the MLPerf Tiny models and small built ones with
  their offsets, lengths, shapes, quantisation, operators and buffers mutated, loaded and compiled for the host;
- ``cli``: mutated model files through ``python -m tinycc_ml compile`` (also ``--cli-cases N``);
- ``oracle``: the differential oracle (tests/oracle.py): generated models of every family, tasks, scikit-learn
  objects and odd labels, extreme but legal values, compiled at float/int16/int8, run on the host under
  ASan/UBSan/float-cast-overflow and compared with the interpreters (bit-exact for integer builds);
  ``oracle-avr`` and ``oracle-m0`` run them in simavr and QEMU;
- ``library``: the source library as the oracle (tests/library_oracle.py): models trained with scikit-learn,
  XGBoost and LightGBM (random kinds, losses, objectives, sizes, data), rows crafted at their thresholds,
  the compiled float C against the library's own ``predict``;
- ``library-tree``, ``library-linear``, ``library-nb``, ``library-svm``, ``library-mlp``: the same, one family
  group each (trees, forests, boosting, XGBoost, LightGBM; linear models; GaussianNB; SVC / NuSVC; MLPs), each
  model compared on a few hundred rows (the table's "rows" column), int16 builds (against the project's
  interpreter) and AVR / Cortex-M0 runs on a sample; ``library-onnx``: ONNX networks built with onnx.helper
  (dense and convolutional) against onnxruntime (tests/onnx_oracle.py);
- ``xgboost-file``, ``lightgbm-file``, ``onnx-file``: mutated XGBoost JSON / UBJSON, LightGBM text and ONNX
  files loaded and compiled; where the library still reads the file, the C against the library
  (tests/booster_file_fuzzing.py);
- ``names``, ``fit``, ``edgeml``, ``concurrent``, ``interrupt``: the command line's surfaces
  (tests/cli_fuzzing.py): names, paths, --project/--arduino/--examples/--depfile/--manifest; fit's options and
  data; EdgeML folders; processes compiling into one folder at once; Ctrl-C at a random moment.

Each case ends in success, in one clean tinycc_ml error, or in a crash: a traceback, a case over --timeout
seconds (a hang), a MemoryError under the --memory-gb address-space limit (not applied to the surfaces that
run sanitizers or processes), C that does not build, a sanitizer report, a mismatch with the interpreters, a
half-written or clashing output folder. The exit status is 1 when any crash was seen.

``--explore SECONDS`` draws a fresh seed (from the clock, unless --seed) and runs each surface for SECONDS
seconds; every crash is written to ``--reproducers DIR`` (default ./fuzz-reproducers): a text file with the
command that replays it (``--seed S --target KIND --case K``) and what went wrong, and, where the case has
one, its input (the model file, the IR text, the generated model saved as a model file with its rows).
``--json FILE`` writes the table (seed, surfaces, cases, outcomes, seconds, crash details). ``--stop-on REGEX``
ends a surface at the first crash whose description matches (benchmarks/fuzz_campaign.py's reverted bugs: the
time to find one).

Case K of a surface draws from its own generator (seeded with the seed, the surface and K), so cases do not
depend on --jobs: with N > 1 they run in chunks on N worker processes (joblib's loky executor).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzzing import (  # noqa: E402
    Chooser,
    Outcome,
    mutate_ir_text,
    mutate_model_file,
    run_ir_case,
    run_model_file_case,
    seed_files,
    seed_texts,
)
from tests.tflite_fuzzing import mutate_tflite, run_tflite_case, tflite_seeds  # noqa: E402

LIBRARY_SURFACES = ("library-tree", "library-linear", "library-nb", "library-svm", "library-mlp", "library-onnx")
FILE_SURFACES = ("xgboost-file", "lightgbm-file", "onnx-file")
SURFACES = ("model", "ir", "tflite", "cli", "oracle", "oracle-avr", "oracle-m0", "library", *LIBRARY_SURFACES,
            *FILE_SURFACES, "names", "fit", "edgeml", "concurrent", "interrupt")
# ASan, simulators, forks; the boosting libraries' thread pools
NO_MEMORY_LIMIT = {"oracle", "oracle-avr", "oracle-m0", "library", *LIBRARY_SURFACES, "concurrent", "interrupt"}
SIM_TARGETS = {"oracle-avr": "avr", "oracle-m0": "cortex-m0"}


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def case_rng(seed: int, kind: str, case: int) -> random.Random:
    return random.Random(f"{seed}-{kind}-{case}")


def case_generator(seed: int, kind: str, case: int):
    import numpy as np

    return np.random.default_rng([seed, zlib.crc32(kind.encode()), case])


def _model_case(rng: random.Random) -> Outcome:
    precision = rng.choice(["float", "float", "int16", "int8"])
    return run_model_file_case(mutate_model_file(Chooser(rng=rng)), precision)


def one_cli_case(rng: random.Random, timeout: int) -> Outcome:
    data = mutate_model_file(Chooser(rng=rng))
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-cli-") as tmp:
        model, out = Path(tmp) / "case.npz", Path(tmp) / "out"
        model.write_bytes(data)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        try:
            run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(model), "-o", str(out)],
                                 capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return Outcome("crash", f"hang: over {timeout} s")
        left = sorted(p.name for p in Path(tmp).iterdir() if p.name != "case.npz")
        lines = run.stderr.splitlines()
        if run.returncode == 0 and left == ["out"] and any(out.glob("*.c")):
            return Outcome("ok")
        if run.returncode == 2 and len(lines) == 1 and lines[0].startswith("tinycc-ml: error: ") and not left:
            return Outcome("error", lines[0])
        return Outcome("crash", f"exit {run.returncode}, left {left}, stderr: {run.stderr[-400:]}")


def one_case(kind: str, seed: int, case: int, timeout: int, start_seconds: float = 0.1) -> Outcome:
    """Case ``case`` of surface ``kind``; a hang or MemoryError is a crash."""
    signal.alarm(timeout if kind not in ("cli", "interrupt") else 0)  # those time their own processes
    try:
        if kind == "model":
            return _model_case(case_rng(seed, kind, case))
        if kind == "ir":
            return run_ir_case(mutate_ir_text(Chooser(rng=case_rng(seed, kind, case))))
        if kind == "tflite":
            return run_tflite_case(mutate_tflite(Chooser(rng=case_rng(seed, kind, case))).data)
        if kind == "cli":
            return one_cli_case(case_rng(seed, kind, case), timeout)
        if kind == "library-onnx":
            from tests.onnx_oracle import onnx_case

            return onnx_case(case_generator(seed, kind, case))
        if kind.startswith("library"):
            # deferred: scikit-learn's, XGBoost's and LightGBM's trainers load only for these surfaces
            from tests.library_oracle import library_case

            return library_case(case_generator(seed, kind, case), kind.partition("-")[2] or None)
        if kind in FILE_SURFACES:
            from tests.booster_file_fuzzing import FILE_CASES

            return FILE_CASES[kind](case_generator(seed, kind, case))
        if kind.startswith("oracle"):
            from tests.oracle import oracle_case

            return oracle_case(case_generator(seed, kind, case), SIM_TARGETS.get(kind, "host"))
        from tests.cli_fuzzing import SURFACES as CLI_SURFACES

        with tempfile.TemporaryDirectory(prefix=f"tinycc-ml-fuzz-{kind}-") as tmp:
            if kind == "interrupt":
                return CLI_SURFACES[kind](case_generator(seed, kind, case), Path(tmp), start_seconds)
            return CLI_SURFACES[kind](case_generator(seed, kind, case), Path(tmp))
    except Hang:
        return Outcome("crash", f"hang: over {timeout} s")
    except MemoryError:
        return Outcome("crash", "out of memory")
    except Exception as exc:  # noqa: BLE001 - the harness itself failed: report it as the case's crash
        import traceback

        return Outcome("crash", f"harness: {type(exc).__name__}: {exc} {traceback.format_exc()[-600:]}")
    finally:
        signal.alarm(0)


CHUNK = 25  # cases per task on a worker
PROGRESS_SECONDS = 60  # a progress line this often on long runs
SLOW_CHUNK = 3  # for the surfaces whose cases take seconds


def _prepare(kind: str, memory: int | None) -> float:
    if memory is not None and kind not in NO_MEMORY_LIMIT and resource.getrlimit(resource.RLIMIT_AS)[0] != memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGALRM, _alarm)
    # the cases' outcomes are counted: the compiler's warnings about them (a poor int8 build, a flat
    # calibration feature, numpy overflow in a hostile model's folding) would be a flood on a long run
    logging.getLogger("tinycc_ml").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    seed_files(), seed_texts()  # compiled once per process, outside any case's time limit
    if kind == "tflite":
        tflite_seeds()
    if kind in FILE_SURFACES:  # the seeds are trained once per process, outside any case's time limit
        from tests import booster_file_fuzzing

        {"xgboost-file": booster_file_fuzzing.xgboost_seeds, "lightgbm-file": booster_file_fuzzing.lightgbm_seeds,
         "onnx-file": booster_file_fuzzing.onnx_seeds}[kind]()
    if kind == "interrupt":
        from tests.cli_fuzzing import python_start_seconds

        return python_start_seconds()
    return 0.1


def run_cases(kind: str, seed: int, cases, timeout: int, memory: int | None) -> tuple:
    """(Counter of outcomes, [(case, detail) of crashes], slowest seconds) of some cases of one surface."""
    start_seconds = _prepare(kind, memory)
    counts, crashes, slowest = Counter(), [], 0.0
    for case in cases:
        t0 = time.perf_counter()
        outcome = one_case(kind, seed, case, timeout, start_seconds)
        slowest = max(slowest, time.perf_counter() - t0)
        counts[outcome.kind] += 1
        counts["rows"] += outcome.rows
        if outcome.kind == "crash":
            crashes.append((case, outcome.detail))
    return counts, crashes, slowest


def write_reproducer(folder: Path, kind: str, seed: int, case: int, detail: str) -> Path:
    """A text file naming the replay command and the failure, and the case's input where it has one."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{kind}-seed{seed}-case{case}"
    command = f"python scripts/fuzz.py --seed {seed} --target {kind} --case {case}"
    notes = [f"surface: {kind}", f"replay: {command}", f"found: {detail}"]
    try:
        if kind in ("model", "cli"):
            rng = case_rng(seed, kind, case)
            if kind == "model":
                rng.choice(["float", "float", "int16", "int8"])
            stem.with_suffix(".npz").write_bytes(mutate_model_file(Chooser(rng=rng)))
            notes.append(f"input: {stem.with_suffix('.npz').name} (python -m tinycc_ml compile it)")
        elif kind == "tflite":
            case_data = mutate_tflite(Chooser(rng=case_rng(seed, kind, case)))
            stem.with_suffix(".tflite").write_bytes(case_data.data)
            notes.append(f"input: {stem.with_suffix('.tflite').name} ({case_data.seed}, {case_data.mutation})")
        elif kind == "ir":
            stem.with_suffix(".ir").write_text(mutate_ir_text(Chooser(rng=case_rng(seed, kind, case))))
            notes.append(f"input: {stem.with_suffix('.ir').name}")
        elif kind.startswith("oracle"):
            import numpy as np

            import tinycc_ml
            from tests.oracle import oracle_model

            generated = oracle_model(case_generator(seed, kind, case))
            np.save(stem.with_suffix(".rows.npy"), generated.X)
            notes.append(f"model: {generated.what}; rows: {stem.with_suffix('.rows.npy').name}")
            tinycc_ml.save_model(generated.model, stem.with_suffix(".npz"))
            notes.append(f"model file: {stem.with_suffix('.npz').name}")
    except Exception as exc:  # noqa: BLE001 - the replay command is the reproducer; the files are a convenience
        notes.append(f"(input not saved: {type(exc).__name__}: {exc})")
    stem.with_suffix(".txt").write_text("\n".join(notes) + "\n")
    return stem.with_suffix(".txt")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return n


def _surfaces(text: str) -> list[str]:
    if text == "both":
        return ["model", "ir"]
    if text == "all":
        return list(SURFACES)
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in SURFACES]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown surface {', '.join(unknown) or text!r}; surfaces: both, all, "
                                         f"{', '.join(SURFACES)}")
    return kinds


def run_surface(kind: str, seed: int, args, limit, executor) -> tuple:
    """(counts, [(case, detail)], slowest, cases run, seconds) of one surface: a fixed count of cases, or as many
    as fit in --explore seconds."""
    start = time.perf_counter()
    chunk = SLOW_CHUNK if kind.startswith(("oracle", "library")) or kind in ("fit", "concurrent", "interrupt") \
        else CHUNK
    total = None  # cases to run, when counted (for the progress lines)
    if args.case is not None:
        cases_iter = iter([range(args.case, args.case + 1)])
    elif args.explore:
        cases_iter = (range(i, i + chunk) for i in range(0, 10**12, chunk))
    else:
        total = args.cli_cases if kind == "cli" and args.cli_cases else args.cases
        cases_iter = iter([range(i, min(i + chunk, total)) for i in range(0, total, chunk)])
    deadline = start + args.explore if args.explore else None
    counts, found, slowest, ran = Counter(), [], 0.0, 0
    stop_on = re.compile(args.stop_on, re.S) if args.stop_on else None

    def sought_found() -> bool:
        return stop_on is not None and any(stop_on.search(detail) for _, detail in found)

    reported = start

    def absorb(chunk_cases, result):
        nonlocal slowest, ran, reported
        c, crashes, slow = result
        counts.update(c)
        found.extend(crashes)
        slowest = max(slowest, slow)
        ran += len(chunk_cases)
        for case, detail in crashes:  # at once: a long run's findings are worth reading before it ends
            print(f"  {kind}: crash in case {case}: {detail[:300]}", file=sys.stderr, flush=True)
        now = time.perf_counter()
        if now - reported >= PROGRESS_SECONDS:
            reported, rate = now, ran / (now - start)
            left = f", about {(total - ran) / rate / 60:.0f} min left" if total and rate else ""
            print(f"  {kind}: {ran}{f'/{total}' if total else ''} cases, {counts['crash']} crashes, "
                  f"{rate:.1f} cases/s{left}", file=sys.stderr, flush=True)

    if executor is None:
        for chunk_cases in cases_iter:
            if deadline is not None and time.perf_counter() >= deadline or sought_found():
                break
            absorb(chunk_cases, run_cases(kind, seed, chunk_cases, args.timeout, limit))
    else:
        pending = {}
        exhausted = False
        while True:
            while not exhausted and len(pending) < args.jobs and not sought_found() \
                    and (deadline is None or time.perf_counter() < deadline):
                chunk_cases = next(cases_iter, None)
                if chunk_cases is None:
                    exhausted = True
                    break
                pending[executor.submit(run_cases, kind, seed, chunk_cases, args.timeout, limit)] = chunk_cases
            if not pending:
                break
            from concurrent.futures import FIRST_COMPLETED, wait

            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                chunk_cases = pending.pop(future)
                try:
                    absorb(chunk_cases, future.result())
                except Exception as exc:  # the worker process died (a crash below Python): the chunk is suspect
                    absorb(chunk_cases, (Counter(crash=len(chunk_cases)),
                                         [(chunk_cases[0], f"worker died in cases {chunk_cases[0]}..{chunk_cases[-1]}: "
                                                           f"{type(exc).__name__}: {exc}")], 0.0))
    return counts, found, slowest, ran, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per surface (default 1000)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    parser.add_argument("--target", type=_surfaces, default=["model", "ir"],
                        help=f"surfaces, comma-separated: {', '.join(SURFACES)}; both (model,ir, the default) or all")
    parser.add_argument("--cli-cases", type=int, default=0,
                        help="model files run through the command line as well (default 0)")
    parser.add_argument("--explore", type=float, default=None, metavar="SECONDS",
                        help="run each surface for SECONDS seconds with a fresh seed (instead of --cases)")
    parser.add_argument("--reproducers", type=Path, default=Path("fuzz-reproducers"), metavar="DIR",
                        help="folder for the crashes' reproducers (default ./fuzz-reproducers)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit (default 4 GB)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per case before it counts as a hang")
    parser.add_argument("--jobs", type=_positive, default=1, help="worker processes (default 1)")
    parser.add_argument("--case", type=int, default=None, metavar="K", help="run case K alone (a reproducer)")
    parser.add_argument("--stop-on", default=None, metavar="REGEX",
                        help="end a surface at the first crash whose description matches REGEX (the time to find it)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 2**31
    limit = int(args.memory_gb * (1 << 30))
    kinds = list(args.target)
    if args.cli_cases and "cli" not in kinds:
        kinds.append("cli")
    budget = f"{args.explore:g} s per surface" if args.explore else f"{args.cases} cases per surface"
    print(f"seed {seed}, {budget}, {args.memory_gb:g} GB address space, {args.timeout} s per case, "
          f"{args.jobs} worker process{'es' if args.jobs > 1 else ''}", flush=True)
    executor = None
    if args.jobs > 1 and args.case is None:
        from joblib.externals.loky import get_reusable_executor

        executor = get_reusable_executor(max_workers=args.jobs)
    rows, crashes = [], []
    for kind in kinds:
        counts, found, slowest, ran, seconds = run_surface(kind, seed, args, limit, executor)
        crashes += [(kind, case, detail) for case, detail in sorted(found)]
        rows.append((kind, ran, counts["ok"], counts["error"], counts["crash"], seconds, slowest, counts["rows"]))
        print(f"  {kind}: {ran} cases, {counts['crash']} crashes, {seconds:.0f} s", file=sys.stderr, flush=True)
    # a library surface's case is one model; "rows" counts the rows its answers were compared on
    print(f"\n{'fuzzer':<15} {'cases':>7} {'rows':>8} {'successes':>10} {'clean errors':>13} {'crashes':>8} "
          f"{'seconds':>8} {'cases/s':>8} {'slowest':>8}")
    for kind, cases, ok, errors, crashed, seconds, slowest, compared in rows:
        print(f"{kind:<15} {cases:>7} {compared or '-':>8} {ok:>10} {errors:>13} {crashed:>8} {seconds:>8.1f} "
              f"{cases / max(seconds, 1e-9):>8.2f} {slowest:>8.2f}")
    written = []
    for kind, case, detail in crashes:
        if args.explore or args.case is None:
            written.append(write_reproducer(args.reproducers, kind, seed, case, detail))
    for kind, case, detail in crashes[:20]:
        print(f"crash: {kind} case {case}: {detail}\n  reproduce: python scripts/fuzz.py --seed {seed} "
              f"--target {kind} --case {case}")
    if written:
        print(f"{len(written)} reproducer(s) in {args.reproducers}/")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "seed": seed, "explore_seconds": args.explore, "jobs": args.jobs,
            "surfaces": [dict(zip(("surface", "cases", "successes", "clean_errors", "crashes", "seconds",
                                   "slowest", "rows"), row)) for row in rows],
            "crashes": [{"surface": k, "case": c, "detail": d} for k, c, d in crashes]}, indent=1) + "\n")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
