"""The IR interpreter's int8 outputs against tflite-micro's interpreter (TFLite Micro's reference kernels)
on the four MLPerf Tiny reference models, for random int8 inputs: a table of model, inputs, bytes equal;
and the C tinycc-ml generates for the host (``compile(model, target="host")``, run through cffi) against
the same outputs, with its static arena.

    python benchmarks/tflite_exactness.py [inputs per model, default 200]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from tflite_micro.python.tflite_micro import runtime

import tinycc_ml
from tinycc_ml.importers.tflite import load_tflite
from tinycc_ml.ir.fixed import run_fixed

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "data" / "mlperf-tiny"
NAMES = ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8"]


def main(n: int) -> None:
    print(f"{'model':<24} {'inputs':>6} {'bytes equal':>17} {'rows equal':>10} {'ours s':>7} {'tflm s':>7} "
          f"{'C bytes equal':>17} {'C s':>6} {'arena B':>8}")
    for name in NAMES:
        path = MODELS / f"{name}.tflite"
        graph = load_tflite(path)
        X = np.random.default_rng(0).integers(-128, 128, size=(n, *graph.type(graph.inputs()[0]).shape))
        start = time.perf_counter()
        ours = run_fixed(graph, X.astype(np.int8))["scores"].reshape(n, -1)
        ours_s = time.perf_counter() - start
        interpreter = runtime.Interpreter.from_bytes(path.read_bytes())
        start = time.perf_counter()
        want = []
        for x in X.astype(np.int8):
            interpreter.set_input(x, 0)
            interpreter.invoke()
            want.append(interpreter.get_output(0).reshape(-1).copy())
        tflm_s = time.perf_counter() - start
        equal = ours == np.stack(want)
        result = tinycc_ml.compile(tinycc_ml.load_model(path), target="host", name="net")
        predictor = result.load()
        start = time.perf_counter()
        c_scores, _ = predictor.run_raw(X.reshape(n, -1).astype(np.int8))
        c_s = time.perf_counter() - start
        c_equal = c_scores == np.stack(want)
        print(f"{name:<24} {n:>6} {f'{equal.sum()}/{equal.size}':>17} {equal.all(axis=1).sum():>10} "
              f"{ours_s:>7.2f} {tflm_s:>7.2f} {f'{c_equal.sum()}/{c_equal.size}':>17} {c_s:>6.2f} "
              f"{result.report['ram_bytes']:>8}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
