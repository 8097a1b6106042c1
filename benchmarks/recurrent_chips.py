"""PyTorch's recurrent layers on the chips, stepped one time step per call (recurrent="step"; float, the project's
int16 and pow2 int8, the integer builds calibrated on the steps of 16 random sequences as one stream): the GRU
keyword-style model (49 frames of 10 features, GRU(10, 32), Linear(32, 12)) on the Cortex-M4F (MPS2 AN386, QEMU
-icount: instructions) and the LSTM activity model (32 steps of 3 axes, LSTM(3, 20), Linear(20, 6)) on the
ATmega328P (simavr: cycles), both exported by torch.onnx.export (tests/data/pytorch, scripts/export_pytorch_nets.py).
Per model: the cost of one time step (least, median, most over a whole sequence), the firmware's and the model's
flash and static RAM (the states included), the measured stack, and the largest difference of the chip's scores
from the interpreter's (every step: float, the float interpreter to float32 rounding; integer, the fixed-point
interpreter, 0 meaning every byte equal) and from onnxruntime's on the whole sequence (its last step, real units).

    python benchmarks/recurrent_chips.py [--no-write]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.ir.fixed import run_fixed  # noqa: E402
from tinycc_ml.models.network_fixed import quantise_rows  # noqa: E402

DATA = REPO / "tests" / "data" / "pytorch"
MODELS = {"gru_keyword": "cortex-m4", "lstm_activity": "avr"}
BUILDS = {"float": ("float", {}), "int16": ("int16", {}), "int8_pow2": ("int8", {"int8_dialect": "pow2"})}


def measure(name: str, target: str, folder: Path, label: str = "float") -> dict:
    import onnxruntime

    path = DATA / f"{name}.onnx"
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shape = session.get_inputs()[0].shape  # (1, steps, features): batch first
    sequence = np.random.default_rng(0).normal(size=shape[1:])
    want = session.run(None, {session.get_inputs()[0].name: sequence[None].astype(np.float32)})[0].reshape(-1)
    model = tinycc_ml.load_model(path, recurrent="step")
    precision, options = BUILDS[label]
    calibration = None if precision == "float" else \
        np.random.default_rng(1).normal(size=(16 * shape[1], shape[2]))  # 16 sequences' steps, one stream
    result = tinycc_ml.compile(model, target=target, name="net", out_dir=folder, precision=precision,
                               calibration=calibration, **options)
    run = get_backend(target).simulate(folder, result.output, sequence)
    scores = np.asarray(run.scores, dtype=np.float64).reshape(len(sequence), -1)
    if precision == "float":
        interpreter = model.scores(sequence)
    else:  # the integers of both, compared exactly; the chip's real scores for onnxruntime
        graph = result.graph
        step = 2.0 ** -graph.type(graph.output("scores")).dtype.scale
        interpreter = run_fixed(graph, quantise_rows(graph, sequence))["scores"].reshape(scores.shape) * step
        scores = scores * step
    costs = run.cycles if run.cycles is not None else run.instructions
    return {"model": name, "build": label, "target": target, "chip": result.report["fit"]["chip"],
            "steps": len(sequence),
            "unit": "cycles" if run.cycles is not None else "instructions",
            "per_step": [int(np.min(costs)), int(np.median(costs)), int(np.max(costs))],
            "flash_bytes": int(run.flash_bytes), "ram_bytes": int(run.ram_bytes),
            "model_flash_bytes": int(run.model_flash_bytes), "model_ram_bytes": int(run.model_ram_bytes),
            "state_bytes": int(result.report["state_bytes"]), "stack_bytes": int(run.stack_bytes),
            "max_diff_interpreter": float(np.max(np.abs(scores - interpreter))),
            "max_diff_onnxruntime": float(np.max(np.abs(scores[-1] - want)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="print only (no benchmarks/results/*.json)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in MODELS.items():
            for label in BUILDS:
                rows.append(measure(name, target, Path(tmp) / f"{name}_{label}", label))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print("| model | build | chip | per time step (least / median / most) | flash (model) | static RAM (model, state) "
          "| stack | max diff: interpreter, onnxruntime |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        least, median, most = r["per_step"]
        print(f"| {r['model']} | {r['build']} | {r['chip']} | {least:,} / {median:,} / {most:,} {r['unit']} | "
              f"{r['flash_bytes']:,} "
              f"({r['model_flash_bytes']:,}) | {r['ram_bytes']:,} ({r['model_ram_bytes']:,}, {r['state_bytes']}) "
              f"| {r['stack_bytes']} | {r['max_diff_interpreter']:.1e}, {r['max_diff_onnxruntime']:.1e} |")
    if not args.no_write:
        out = REPO / "benchmarks" / "results" / "recurrent_chips.json"
        out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
