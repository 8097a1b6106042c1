"""A corpus of real .tflite files as a new user brings them (issue 44's measure): every .tflite under the folders
given (e.g. a checkout of github:tensorflow/tflite-micro: its examples, integration tests and benchmark models),
each run by tflite-micro's Python interpreter and compiled by tinycc-ml for the host, every output of a few random
inputs compared byte for byte (the same inputs through both; stateful models called in sequence by both).

Printed: per file, what happened (exact; outputs differ: how many of how many bytes; refused: the reason; tflite-micro
cannot run it: its error), then counts. No file is committed or downloaded: the folders are the user's.

    python benchmarks/tflite_corpus.py DIR [DIR ...] [--rows 3] [--target host] [--only SUBSTRING] [--write NAME]

``--write NAME`` also writes the table by folder (files, each outcome, the reasons of the files not exact) to
benchmarks/results/NAME.json, as docs/guide/networks.md prints it for TFLite Micro's checkout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402

ARENA_BYTES = 64 << 20  # tflite-micro's arena: large enough for every file of the corpus


def tflm_interpreter(data: bytes):
    from tflite_micro.python.tflite_micro import runtime

    return runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES)


def io_details(interpreter, getter: str) -> list[dict]:
    details, k = [], 0
    while True:
        try:
            details.append(getattr(interpreter, getter)(k))
        except (IndexError, RuntimeError, ValueError):
            return details
        k += 1


def random_inputs(details: list[dict], rng) -> list[np.ndarray]:
    """Integers over their whole range (bool: 0/1), floats around 0."""
    inputs = []
    for d in details:
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            inputs.append(rng.normal(0, 1, size=d["shape"]).astype(dtype))
        elif dtype == np.bool_:
            inputs.append(rng.integers(0, 2, size=d["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            low, high = max(info.min, -(1 << 15)), min(info.max, 1 << 15)
            inputs.append(rng.integers(low, high + 1, size=d["shape"]).astype(dtype))
    return inputs


def tflm_outputs(interpreter, rows: list[list[np.ndarray]], n_outputs: int) -> list[np.ndarray]:
    joined = []
    for inputs in rows:
        for k, x in enumerate(inputs):
            interpreter.set_input(x, k)
        interpreter.invoke()
        joined.append(np.concatenate([interpreter.get_output(k).reshape(-1).copy() for k in range(n_outputs)]))
    return joined


def measure(path: Path, rows: int, target: str) -> tuple[str, str]:
    """(outcome, detail) of one file."""
    data = path.read_bytes()
    try:
        interpreter = tflm_interpreter(data)
        ins, outs = io_details(interpreter, "get_input_details"), io_details(interpreter, "get_output_details")
        rng = np.random.default_rng(0)
        batch = [random_inputs(ins, rng) for _ in range(rows)]
        want = tflm_outputs(interpreter, batch, len(outs))
    except Exception as exc:  # noqa: BLE001 - whatever tflite-micro says, the file is then not ours to judge
        return "tflite-micro fails", f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = tinycc_ml.compile(path, target=target, name="m", out_dir=tmp)
            joined = np.stack([np.concatenate([v.reshape(-1) for v in inputs]) for inputs in batch])
            if target == "host":
                predictor = result.load()
                got = [np.asarray(predictor.run_raw(x[None, :].astype(inputs[0].dtype) if len(inputs) == 1
                                                    else x[None, :])[0]).reshape(-1)
                       for x, inputs in zip(joined, batch)]
            else:  # the simulator takes real rows: the codes as their values (the build quantises them back)
                from tinycc_ml.codegen.backend import get_backend

                real = joined.astype(np.float64)
                if joined.dtype != np.float32 and result.output.input_quantisation is not None:
                    scale, zero_point = result.output.input_quantisation[:2]
                    real = (real - zero_point) * scale
                scores = get_backend(target).simulate(Path(tmp), result.output, real).scores
                got = list(np.asarray(scores).reshape(len(batch), -1))
    except TinyccError as exc:
        return "refused", str(exc).splitlines()[0].replace(f"{path}: ", "")[:160]
    except Exception as exc:  # noqa: BLE001 - a crash is a finding: say where
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return "crashed", f"{type(exc).__name__}: {str(exc)[:100]} ({Path(frame.filename).name}:{frame.lineno})"
    same = sum(int(np.array_equal(np.asarray(g).astype(w.dtype), w)) for g, w in zip(got, want))
    if same == len(want):
        return "exact", f"{len(want)} inputs, {sum(w.size for w in want)} output values"
    bad = sum(int(np.sum(np.asarray(g).astype(w.dtype) != w)) for g, w in zip(got, want) if g.size == w.size)
    return "differs", f"{len(want) - same} of {len(want)} inputs ({bad} values)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--rows", type=int, default=3, help="random inputs per file")
    parser.add_argument("--target", default="host")
    parser.add_argument("--only", default="", help="files whose path holds this text")
    parser.add_argument("--write", default=None, metavar="NAME", help="write the table by folder as results/NAME")
    args = parser.parse_args(argv)
    files = sorted(p for folder in args.folders for p in folder.rglob("*.tflite") if args.only in str(p))
    counts, groups = Counter(), {}
    for path in files:
        outcome, detail = measure(path, args.rows, args.target)
        counts[outcome] += 1
        group = groups.setdefault(str(path.parent.relative_to(next(f for f in args.folders
                                                                    if f in path.parents))), [0, Counter(), []])
        group[0] += 1
        group[1][outcome] += 1
        if outcome != "exact":
            group[2].append(f"{path.name}: {outcome}: {detail.replace(str(path) + ': ', '')}")
        print(f"{outcome:<18} {path}: {detail}", flush=True)
    print(f"{len(files)} files: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
    if args.write:
        outcomes = ["exact", "differs", "refused", "crashed", "tflite-micro fails"]
        rows = [[folder, n, *[c[k] for k in outcomes], "; ".join(notes)[:300]]
                for folder, (n, c, notes) in sorted(groups.items())]
        rows.append(["all", len(files), *[counts[k] for k in outcomes], ""])
        write_table(args.write, ["folder", "files", *outcomes, "not exact: why"], rows,
                    script=f"benchmarks/tflite_corpus.py DIR --rows {args.rows} --target {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
