"""The hostile .tflite campaign (issue 35 item 1): mutated TFLite files (tests/tflite_fuzzing.py) loaded and
compiled for the host, case by case, in worker processes of a batch each (their peak resident memory measured
with getrusage), each case under a time limit; the outcomes counted by kind and by mutation.

    python benchmarks/tflite_fuzz_campaign.py --cases 2000 [--seed 35] [--batch 100] [--timeout 20]
    python benchmarks/tflite_fuzz_campaign.py --print        # the table of the saved results

Case K is ``scripts/fuzz.py --target tflite --seed S --case K`` (the same generator): a crash replays there.
Results: benchmarks/results/tflite_fuzz.json (rendered into docs/benchmarks/fuzzing.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "tflite_fuzz.json"  # the table by mutation, and the run's figures
RUN_TABLE = "tflite_fuzz_run"
CLASSES = ["loads and compiles", "ModelFileError", "CompileError", "crash"]
MEMORY_LIMIT = 2 << 30  # address space of a worker: a runaway allocation is a MemoryError (a crash), not a swap storm


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def worker(seed: int, first: int, last: int, timeout: int) -> dict:
    """Cases first..last-1 in this process: each one's record, and this process's peak RSS."""
    sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
    from fuzz import case_rng

    from tests.fuzzing import Chooser, Outcome
    from tests.tflite_fuzzing import mutate_tflite, run_tflite_case, tflite_seeds

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    logging.getLogger("tinycc_ml").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    tflite_seeds()
    records = []
    for case in range(first, last):
        mutated = mutate_tflite(Chooser(rng=case_rng(seed, "tflite", case)))
        start = time.perf_counter()
        signal.alarm(timeout)
        try:
            outcome = run_tflite_case(mutated.data)
        except Hang:
            outcome = Outcome("crash", f"hang: over {timeout} s")
        except MemoryError:
            outcome = Outcome("crash", "out of memory")
        finally:
            signal.alarm(0)
        records.append({"case": case, "seed_model": mutated.seed, "mutation": mutated.mutation.split(":")[0],
                        "what": mutated.mutation[:200], "kind": outcome.kind, "detail": outcome.detail[:300],
                        "seconds": time.perf_counter() - start})
    return {"records": records, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def outcome_class(record: dict) -> str:
    if record["kind"] == "ok":
        return "loads and compiles"
    if record["kind"] == "error":
        return "ModelFileError" if record["detail"].startswith("ModelFileError") else "CompileError"
    return "crash"


def campaign(cases: int, seed: int, batch: int, timeout: int) -> dict:
    records, peaks, start = [], [], time.perf_counter()
    for first in range(0, cases, batch):
        last = min(cases, first + batch)
        run = subprocess.run([sys.executable, __file__, "--worker", str(first), str(last), "--seed", str(seed),
                              "--timeout", str(timeout)], capture_output=True, text=True)
        if run.returncode:
            records.append({"case": first, "seed_model": "?", "mutation": "?", "what": f"cases {first}..{last - 1}",
                            "kind": "crash", "detail": f"worker died ({run.returncode}): {run.stderr[-300:]}",
                            "seconds": 0.0})
            continue
        result = json.loads(run.stdout.splitlines()[-1])
        records += result["records"]
        peaks.append(result["peak_rss_mb"])
        crashes = [r for r in result["records"] if r["kind"] == "crash"]
        print(f"  cases {first}..{last - 1}: {len(crashes)} crashes, peak RSS {result['peak_rss_mb']:.0f} MB, "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        for r in crashes:
            print(f"    case {r['case']} ({r['seed_model']}, {r['what']}): {r['detail']}", file=sys.stderr)
    by_mutation: dict[str, Counter] = {}
    slowest: Counter = Counter()
    for r in records:
        by_mutation.setdefault(r["mutation"], Counter())[outcome_class(r)] += 1
        slowest[r["mutation"]] = max(slowest[r["mutation"]], r["seconds"])
    return {
        "seed": seed, "cases": len(records), "batch": batch, "timeout_seconds": timeout,
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": dict(Counter(outcome_class(r) for r in records)),
        "by_mutation": {k: dict(v) for k, v in sorted(by_mutation.items())},
        "slowest_by_mutation": {k: round(v, 3) for k, v in sorted(slowest.items())},
        "by_seed_model": dict(Counter(r["seed_model"] for r in records)),
        "max_case_seconds": round(max(r["seconds"] for r in records), 3),
        "mean_case_seconds": round(sum(r["seconds"] for r in records) / len(records), 4),
        "peak_rss_mb": round(max(peaks), 1) if peaks else None,
        "crashes": [r for r in records if r["kind"] == "crash"],
    }


def tables(result: dict, script: str) -> tuple[dict, dict]:
    """The docs' tables (benchmarks/results_table.py's format): outcomes by mutation, and the run's figures."""
    rows = [[mutation, str(sum(counts.values())), *(str(counts.get(c, 0)) for c in CLASSES),
             f"{result['slowest_by_mutation'][mutation]:.3f}"] for mutation, counts in result["by_mutation"].items()]
    rows.append(["**total**", str(result["cases"]), *(str(result["outcomes"].get(c, 0)) for c in CLASSES),
                 f"{result['max_case_seconds']:.3f}"])
    by_mutation = {"name": "tflite_fuzz", "script": script,
                   "columns": ["mutation", "cases", *CLASSES[:-1], "crashes (traceback, hang, memory)",
                               "slowest case (s)"],
                   "rows": rows, "align": [None] + ["right"] * 6}
    run = {"name": RUN_TABLE, "script": script,
           "columns": ["seed", "cases", "seconds", "slowest case (s)", "mean case (s)", "per-case limit (s)",
                       "peak RSS of a worker (MB)", "cases per worker"],
           "rows": [[str(result["seed"]), str(result["cases"]), f"{result['seconds']:.0f}",
                     f"{result['max_case_seconds']:.3f}", f"{result['mean_case_seconds']:.4f}",
                     str(result["timeout_seconds"]), f"{result['peak_rss_mb']:.0f}", str(result["batch"])]],
           "align": ["right"] * 8}
    return by_mutation, run


def print_table(result: dict) -> None:
    print(f"seed {result['seed']}: {result['cases']} cases in {result['seconds']} s; slowest case "
          f"{result['max_case_seconds']} s (mean {result['mean_case_seconds']} s); peak RSS of a worker "
          f"{result['peak_rss_mb']} MB")
    print(f"{'mutation':<14}" + "".join(f"{c:>20}" for c in CLASSES))
    for mutation, counts in result["by_mutation"].items():
        print(f"{mutation:<14}" + "".join(f"{counts.get(c, 0):>20}" for c in CLASSES))
    print(f"{'total':<14}" + "".join(f"{result['outcomes'].get(c, 0):>20}" for c in CLASSES))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--batch", type=int, default=100, help="cases per worker process")
    parser.add_argument("--timeout", type=int, default=20, help="seconds per case before it counts as a hang")
    parser.add_argument("--worker", type=int, nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--print", action="store_true", help="print the saved results")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.seed, *args.worker, args.timeout)))
        return 0
    if args.print:
        print_table(json.loads(args.out.read_text()))
        return 0
    result = campaign(args.cases, args.seed, args.batch, args.timeout)
    script = f"benchmarks/tflite_fuzz_campaign.py --cases {args.cases} --seed {args.seed}"
    by_mutation, run = tables(result, script)
    args.out.write_text(json.dumps({**by_mutation, **result}, indent=1) + "\n")
    if args.out == RESULTS:
        RESULTS.with_name(f"{RUN_TABLE}.json").write_text(json.dumps(run, indent=1) + "\n")
    print_table(result)
    return 1 if result["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
