"""The four MLPerf Tiny models on the Cortex-M4: cycles, not only instructions, beside the fastest published
engine's cycles and CMSIS-NN's layer functions.

    python benchmarks/m4_cycles_mlperf.py [--rows 5] [--wait-states 0] [--only kws_ref_model,...] [--no-write]

Per model and weight layout (``optimize="size"``, the default: int8 weights in flash, split by SXTB16 in the
kernels; ``optimize="speed"``: widened to int16 where a layer reads each weight more than once): the model's
flash (its own symbols in the measurement firmware: constants and code) against its .tflite file, every output
byte of the build against tflite-micro on ``--rows`` inputs (QEMU, MPS2
AN386), instructions per inference (QEMU -icount), cycles per inference from the project's Cortex-M4 cycle model
(the TRM's timings on the executed instruction stream, ``tinycc_ml.arm.m4_cycles``; one input, at ``--wait-states``
flash wait states), the sum of CMSIS-NN's layer functions on the same layers (benchmarks/cmsis_nn_layers.py) and
X-CUBE-AI 9.0's published cycles: MLPerf Tiny v1.2/v1.3 closed division, NUCLEO-L4R5ZI at 120 MHz, latency x
120 MHz (KWS 43.19 ms, VWW 88.93 ms, ResNet-8 165.13 ms, AD 5.26 ms). Theirs are measured on a board whose flash
has wait states (behind ST's ART accelerator); ours are a model of a core at zero wait states unless told.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cmsis_nn_layers import cmsis_nn_totals  # noqa: E402
from network_m4 import MODELS, NAMES, WORK, build_network, input_rows, run_firmware, tflm_outputs  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.runtime.profile import function_cycles  # noqa: E402

XCUBE_AI_MS = {"kws_ref_model": 43.19, "vww_96_int8": 88.93, "pretrainedResnet_quant": 165.13, "ad01_int8": 5.26}
XCUBE_AI_HZ = 120e6


def measure(name: str, optimize: str, rows: int, wait_states: int, cmsis: dict[str, int]) -> list[str]:
    path = MODELS / f"{name}.tflite"
    model = tinycc_ml.load_model(path)
    build = build_network(path, "cortex-m4", WORK / "cycles" / optimize / name, optimize=optimize)
    shape = (1, *model.input_shape[1:]) if len(model.input_shape) > 2 else model.input_shape
    X = input_rows(shape, rows)
    run = run_firmware(build, X)
    equal = run.scores == tflm_outputs(path.read_bytes(), X, model.input_shape)
    backend = get_backend("cortex-m4")
    row = X[min(2, rows - 1)][None, :]
    count = function_cycles(backend.simulator, build.sources, build.header, build.prefix, row, build.n_scores,
                            "int8_t", "int8_t", chip=backend.chip, wait_states=wait_states)
    cycles, instructions = int(count.cycles[0]), int(np.mean(run.instructions))
    theirs = XCUBE_AI_MS[name] * 1e-3 * XCUBE_AI_HZ
    cmsis_instr = cmsis.get(name)
    flash, file_bytes = run.model_flash_bytes, path.stat().st_size
    print(f"  {name}, optimize={optimize}: bytes equal {equal.sum()}/{equal.size}, flash {flash / file_bytes:.2f}x "
          f"the file, {instructions:,} instructions, {cycles:,} cycles", flush=True)
    return [name, optimize, f"{equal.sum()}/{equal.size}", f"{flash:,}", f"{file_bytes:,}",
            f"{flash / file_bytes:.2f}", f"{instructions:,}", f"{cycles:,}", f"{cycles / instructions:.2f}",
            f"{XCUBE_AI_MS[name]:.2f}", f"{theirs / 1e6:.2f} M", f"{cycles / theirs:.2f}",
            "-" if cmsis_instr is None else f"{cmsis_instr:,}",
            "-" if cmsis_instr is None else f"{instructions / cmsis_instr:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5, help="inputs compared with tflite-micro per model")
    parser.add_argument("--wait-states", type=int, default=0, help="flash wait states of the cycle model")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--no-write", action="store_true", help="print only; keep the stored result")
    args = parser.parse_args()
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    cmsis = cmsis_nn_totals()
    table = [measure(name, optimize, args.rows, args.wait_states, cmsis) for name in names
             for optimize in ("size", "speed")]
    columns = ["model", "optimize", "bytes equal tflite-micro", "model flash B", ".tflite B", "flash / .tflite",
               "instructions", f"cycles (model, {args.wait_states} WS)",
               "cycles / instr", "X-CUBE-AI 9.0 ms at 120 MHz", "X-CUBE-AI cycles", "cycles / X-CUBE-AI",
               "CMSIS-NN layers instr", "instr / CMSIS-NN"]
    flags = [f"--rows {args.rows}", f"--wait-states {args.wait_states}"] + ([f"--only {args.only}"] if args.only
                                                                             else [])
    write_table("m4_cycles_mlperf", columns, table, script="benchmarks/m4_cycles_mlperf.py " + " ".join(flags),
                align=[None, None] + ["right"] * 12,
                results_dir=None if args.no_write else Path(__file__).parent / "results")


if __name__ == "__main__":
    main()
