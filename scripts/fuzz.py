"""Long fuzz runs: mutate model files and IR text, feed them to the compiler, and count outcomes.

    python scripts/fuzz.py --cases 2000 [--seed 1] [--target model|ir|both] [--cli-cases 100]
                           [--memory-gb 4] [--timeout 30] [--jobs N] [--case K]

Each case must end in success (for model files and IR: the generated C compiles with gcc
-Wall -Wextra -Werror) or in one tinycc_ml error. Anything else is counted as a crash and printed:
a traceback, a case over --timeout seconds (a hang), or a MemoryError under the --memory-gb
address-space limit. ``--cli-cases`` more model files go through the command line
(``python -m tinycc_ml compile``): each must exit 0 with its files written, or exit 2 with exactly
one line ``tinycc-ml: error: ...`` on stderr and nothing left in the output's folder. The exit
status is 1 when any crash was seen. The same mutators run in the
test suite (tests/test_fuzz.py) under hypothesis, with far fewer cases.

Case K of a fuzzer draws from its own generator (seeded with the seed, the fuzzer and K), so the cases do
not depend on ``--jobs``: with N > 1 they run in chunks on N worker processes (joblib's loky executor,
each with the address-space limit and the per-case alarm), and the table gives cases per second. A
crash is printed with its reproducer: ``--seed S --target KIND --case K`` runs that case alone.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
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


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def one_case(kind: str, rng: random.Random, timeout: int) -> Outcome:
    pick = Chooser(rng=rng)
    signal.alarm(timeout)
    try:
        if kind == "model":
            precision = rng.choice(["float", "float", "int16", "int8"])
            return run_model_file_case(mutate_model_file(pick), precision)
        return run_ir_case(mutate_ir_text(pick))
    except Hang:
        return Outcome("crash", f"hang: over {timeout} s")
    except MemoryError:
        return Outcome("crash", "out of memory")
    finally:
        signal.alarm(0)


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


CHUNK = 25  # cases per task on a worker


def case_rng(seed: int, kind: str, case: int) -> random.Random:
    return random.Random(f"{seed}-{kind}-{case}")


def run_cases(kind: str, seed: int, cases: range, timeout: int, memory: int | None) -> tuple:
    """(Counter of outcomes, [(case, detail) of crashes], slowest seconds) of some cases of one fuzzer."""
    if memory is not None and resource.getrlimit(resource.RLIMIT_AS)[0] != memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGALRM, _alarm)
    seed_files(), seed_texts()  # compiled once per process, outside any case's time limit
    counts, crashes, slowest = Counter(), [], 0.0
    for case in cases:
        rng = case_rng(seed, kind, case)
        t0 = time.perf_counter()
        outcome = one_cli_case(rng, timeout) if kind == "cli" else one_case(kind, rng, timeout)
        slowest = max(slowest, time.perf_counter() - t0)
        counts[outcome.kind] += 1
        if outcome.kind == "crash":
            crashes.append((case, outcome.detail))
    return counts, crashes, slowest


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per fuzzer (default 1000)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    parser.add_argument("--target", choices=("model", "ir", "both"), default="both")
    parser.add_argument("--cli-cases", type=int, default=0,
                        help="model files run through the command line as well (default 0)")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit (default 4 GB)")
    parser.add_argument("--timeout", type=int, default=30, help="seconds per case before it counts as a hang")
    parser.add_argument("--jobs", type=_positive, default=1, help="worker processes (default 1)")
    parser.add_argument("--case", type=int, default=None, metavar="K", help="run case K alone (a reproducer)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    limit = int(args.memory_gb * (1 << 30))
    kinds = ["model", "ir"] if args.target == "both" else [args.target]
    if args.cli_cases:
        kinds.append("cli")
    print(f"seed {seed}, {args.cases} cases per fuzzer, {args.memory_gb:g} GB address space, "
          f"{args.timeout} s per case, {args.jobs} worker process{'es' if args.jobs > 1 else ''}")
    executor = None
    if args.jobs > 1 and args.case is None:
        from joblib.externals.loky import get_reusable_executor

        executor = get_reusable_executor(max_workers=args.jobs)
    rows, crashes = [], []
    for kind in kinds:
        n_cases = args.cli_cases if kind == "cli" else args.cases
        cases = range(args.case, args.case + 1) if args.case is not None else range(n_cases)
        start = time.perf_counter()
        chunks = [cases[i:i + CHUNK] for i in range(0, len(cases), CHUNK)]
        if executor is None:
            results = [run_cases(kind, seed, chunk, args.timeout, limit) for chunk in chunks]
        else:
            futures = [executor.submit(run_cases, kind, seed, chunk, args.timeout, limit) for chunk in chunks]
            results = []
            for chunk, future in zip(chunks, futures):
                try:
                    results.append(future.result())
                except Exception as exc:  # the worker process died (a crash below Python): the chunk is suspect
                    results.append((Counter(crash=len(chunk)), [(chunk[0], f"worker died in cases {chunk[0]}.."
                                                                 f"{chunk[-1]}: {type(exc).__name__}: {exc}")], 0.0))
        counts, slowest = Counter(), 0.0
        for c, found, slow in results:
            counts.update(c)
            slowest = max(slowest, slow)
            crashes += [(kind, case, detail) for case, detail in found]
        rows.append((kind, len(cases), counts["ok"], counts["error"], counts["crash"],
                     time.perf_counter() - start, slowest))
    print(f"\n{'fuzzer':<8} {'cases':>7} {'successes':>10} {'clean errors':>13} {'crashes':>8} {'seconds':>8} "
          f"{'cases/s':>8} {'slowest':>8}")
    for kind, cases, ok, errors, crashed, seconds, slowest in rows:
        print(f"{kind:<8} {cases:>7} {ok:>10} {errors:>13} {crashed:>8} {seconds:>8.1f} {cases / seconds:>8.1f} "
              f"{slowest:>8.2f}")
    for kind, case, detail in crashes[:20]:
        print(f"crash: {kind} case {case}: {detail}\n  reproduce: python scripts/fuzz.py --seed {seed} "
              f"--target {kind if kind != 'cli' else 'model --cli-cases 1'} --case {case}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
