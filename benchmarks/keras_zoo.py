"""The Keras zoo (tests/data/keras, converted by TensorFlow's own converter: scripts/keras_zoo.py) compiled for the
host and the Cortex-M4: how many outputs equal tflite-micro's (every byte; float files whose operators call exp,
tanh or expm1 within the C library's last bits on the M4, the largest difference in units in the last place
printed), the Cortex-M4's instructions per inference (QEMU -icount), the model's flash and static RAM in the linked
firmware beside the .tflite file's size and TFLite Micro's arena (the "head" of print_allocations(): its
activations; "total" adds its interpreter's data).

    python benchmarks/keras_zoo.py [--host-rows 100] [--m4-rows 5] [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from network_arena import tflm_arena  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.importers.test_keras_zoo import FILES, MANIFEST, REFUSED, ZOO, flat, random_rows, tflm_outputs  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402


def ulps(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32))))


def measure(name: str, host_rows: int, m4_rows: int, work: Path) -> list[str]:
    data = (ZOO / name).read_bytes()
    entry = MANIFEST[name]
    head = [entry["model"], entry["quantisation"], f"{len(data):,}"]
    try:
        host = tinycc_ml.compile(ZOO / name, out_dir=work / "host", name="m")
    except TinyccError as exc:
        return head + [f"refused: {str(exc).split(': ', 1)[-1][:70]}"] + [""] * 5
    rows = random_rows(data, host_rows)
    X = flat(rows)
    want = tflm_outputs(data, rows)
    loaded = host.load()
    got = np.asarray(loaded.scores(X) if X.dtype == np.float32 else loaded.run_raw(X)[0]).reshape(len(X), -1)
    host_equal = f"{int(np.sum(got.astype(want.dtype) == want))}/{want.size}"
    m4 = tinycc_ml.compile(ZOO / name, target="cortex-m4", out_dir=work / "m4", name="m")
    rows = random_rows(data, m4_rows, seed=1)
    X, want = flat(rows), tflm_outputs(data, rows)
    if X.dtype == np.float32 or m4.output.input_quantisation is None:
        real = X.astype(np.float64)
    else:
        scale, zero_point = m4.output.input_quantisation[:2]
        real = (X.astype(np.float64) - zero_point) * scale
    run = get_backend("cortex-m4").simulate(work / "m4", m4.output, real)
    got = np.asarray(run.scores).reshape(len(X), -1).astype(want.dtype)
    m4_equal = f"{int(np.sum(got == want))}/{want.size}"
    if entry["quantisation"] == "float" and not np.array_equal(got, want):
        m4_equal += f" (<= {ulps(got, want):g} ulp)"
    arena = tflm_arena(data, work)
    instructions = int(np.median(run.instructions)) if run.instructions is not None else 0
    return head + [host_equal, m4_equal, f"{instructions:,}", f"{run.model_flash_bytes:,}",
                   f"{run.model_ram_bytes:,}", f"{arena['head']:,} / {arena['total']:,}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host-rows", type=int, default=100)
    parser.add_argument("--m4-rows", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    table = []
    for name in FILES:
        with tempfile.TemporaryDirectory() as work:
            table.append(measure(name, args.host_rows, args.m4_rows, Path(work)))
        print("  " + " | ".join(table[-1]), flush=True)
    compiled = sum(1 for row in table if not row[3].startswith("refused"))
    print(f"{compiled} of {len(table)} converted files compile; refused: {', '.join(sorted(REFUSED))}")
    write_table("keras_zoo", ["model", "quantisation", ".tflite B", "host equal", "M4 equal", "M4 instructions",
                              "M4 model flash B", "M4 model RAM B", "TFLM arena head / total B"], table,
                script=f"benchmarks/keras_zoo.py --host-rows {args.host_rows} --m4-rows {args.m4_rows}",
                results_dir=None if args.no_write else Path(__file__).parent / "results")


if __name__ == "__main__":
    main()
