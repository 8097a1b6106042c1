"""TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM on the Cortex-M4F (MPS2 AN386, QEMU -icount): instructions per call of a
one-operator model (tests/ops/test_lstm.py's builder: int8, and 16x8 with int64 biases) with the M4 kernel
(tinycc_ml/arm/m4_lstm.py) and with the shared C alone (the same build, the M4 kernel table without it), the
median over 5 calls of a stream (the states kept between them), each call's outputs equal to tflite-micro's.

    python benchmarks/tflite_lstm_m4.py [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from results_table import RESULTS, write_table  # noqa: E402

import tinycc_ml.arm.cortex_m4 as cortex_m4  # noqa: E402
from tests.ops.single_op import compiled, random_rows  # noqa: E402
from tests.ops.single_op import tflite_micro as stream  # noqa: E402
from tests.ops.test_lstm import lstm  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402

SHAPES = [(5, 6, 4, 0), (10, 10, 32, 7), (4, 40, 64, 8)]  # steps, features, units, seed
KERNEL_OPS = ("lstm_cell", "lstm_hidden")


def measure(kind: str, steps: int, features: int, units: int, seed: int, kernel: bool) -> tuple[int, bool, int]:
    """(median instructions per call, every output equal to tflite-micro's, flash of the model's constants)."""
    data = lstm(steps=steps, features=features, units=units, seed=seed, kind=kind)
    X = random_rows(np.random.default_rng(seed), 2, steps * features, kind)  # the extremes, then random rows
    table = cortex_m4.M4_KERNELS
    if not kernel:
        cortex_m4.M4_KERNELS = tuple(k for k in table if k.op not in KERNEL_OPS)
    try:
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-lstm-") as tmp:
            model, result = compiled(data, Path(tmp), target="cortex-m4")
            x = model.graph.type(model.input_name).dtype
            real = (X.astype(np.float64) - x.zero_point) * x.qscales[0]
            run = get_backend("cortex-m4").simulate(Path(tmp) / "cortex-m4", result.output, real)
            source = (Path(tmp) / "cortex-m4" / "op.c").read_text()
    finally:
        cortex_m4.M4_KERNELS = table
    assert ("_m4_lstm_" in source) == kernel, "the build did not take the kernel asked for"
    equal = np.array_equal(np.asarray(run.scores).reshape(len(X), -1), stream(data, X, (1, steps, features)))
    return int(np.median(run.instructions)), equal, result.output.const_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    rows, exact = [], True
    for kind in ("int8", "int16"):
        for steps, features, units, seed in SHAPES:
            shared, ok_shared, flash_shared = measure(kind, steps, features, units, seed, kernel=False)
            mine, ok_mine, flash_mine = measure(kind, steps, features, units, seed, kernel=True)
            exact &= ok_shared and ok_mine
            rows.append(["int8" if kind == "int8" else "16x8", f"{steps} steps, {features} -> {units}", f"{shared:,}",
                         f"{mine:,}", f"{mine / shared:.2f}", f"{flash_shared:,}", f"{flash_mine:,}",
                         "yes" if ok_shared and ok_mine else "NO"])
    write_table("tflite_lstm_m4", ["type", "layer", "shared C instructions", "M4 kernel instructions", "ratio",
                                   "shared C constants (bytes)", "M4 kernel constants (bytes)", "outputs equal"],
                rows, script="benchmarks/tflite_lstm_m4.py",
                align=[None, None, "right", "right", "right", "right", "right", None],
                results_dir=None if args.no_write else RESULTS)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
