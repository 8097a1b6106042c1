"""The four MLPerf Tiny int8 models (TFLite) compiled by tinycc-ml for the Cortex-M4F (MPS2 AN386) and the
Cortex-M33 (MPS2 AN505) and run in QEMU (-icount: exact instruction counts): every output byte against
tflite-micro's interpreter (TFLite Micro's reference kernels) on random int8 inputs and on smooth,
structured ones (what images and spectrograms look like), instructions per inference, the model's flash
against its .tflite file, its activation arena and the stack, and the share of one inference's instructions
outside the Cortex-M4's layer kernels (arm/m4_network.py; a per-function profile in unicorn); beside the
Cortex-M4's figures, the sum of CMSIS-NN's layer functions on the same layers (same core, -O2, QEMU -icount:
benchmarks/results/cmsis_nn_layers.json, from benchmarks/cmsis_nn_layers.py) and the ratio.

    python benchmarks/network_m4.py [--rows 200] [--m33-rows 10] [--only kws_ref_model,...] [--no-write]

The build and run step is ``build_network`` + ``run_firmware``: the second runs any C with the same entry
points (``<prefix>_predict(const int8_t *x)``, ``<prefix>_scores(const int8_t *x, int8_t *scores)``) in the
same harness, so another implementation of the layers (CMSIS-NN's layer functions) can be measured alike.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tflite_micro.python.tflite_micro import runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cmsis_nn_layers import cmsis_nn_totals  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.codegen.mcu import COUNT_PER_MAC_BOUND  # noqa: E402
from tinycc_ml.runtime.profile import function_profile  # noqa: E402
from tinycc_ml.runtime.simulate import DEFAULT_MAX_CYCLES, TargetRun, run_on_target  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "data" / "mlperf-tiny"
NAMES = ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8"]
WORK = Path("/tmp/tinycc-ml-network-m4")


@dataclass
class NetworkBuild:
    """A network's C for one target (``build_network``) and what running it needs."""

    target: str
    sources: list[str]
    header: str
    prefix: str
    input_dim: int
    n_scores: int
    macs: int  # multiply-accumulates per inference
    const_bytes: int
    arena_bytes: int


def build_network(path: Path, target: str, out_dir: Path, name: str = "net", **options) -> NetworkBuild:
    """tinycc-ml's C for the .tflite file ``path`` on ``target`` (compile ``options``), written to ``out_dir``."""
    result = tinycc_ml.compile(path, target=target, name=name, out_dir=out_dir, **options)
    o = result.output
    return NetworkBuild(target, [str(out_dir / f"{name}.c")], str(out_dir / f"{name}.h"), name, o.input_dim,
                        o.n_scores, o.macs, o.const_bytes, result.report["arena_bytes"])


def run_firmware(build: NetworkBuild, X: np.ndarray, extra_cflags=()) -> TargetRun:
    """The build's C (or any with the same entry points and ``build``'s fields) in the target's measurement
    firmware under QEMU, on the int8 rows X: scores, instructions per ``<prefix>_predict`` call, stack, sizes
    (whole firmware, and the symbols the sources define)."""
    backend = get_backend(build.target)
    return run_on_target(backend.simulator, build.sources, build.header, build.prefix, X.astype(np.int8),
                         build.n_scores, "int8_t", "int8_t", extra_cflags=("-Werror", *extra_cflags),
                         max_cycles_per_inference=DEFAULT_MAX_CYCLES + COUNT_PER_MAC_BOUND * build.macs,
                         chip=backend.chip)


def outside_kernels(build: NetworkBuild, x: np.ndarray) -> float:
    """The share of one inference's instructions spent outside the target's layer kernels (functions named
    ``<prefix>_m4_*``): the per-function profile (unicorn's Cortex-M4; its totals equal QEMU's counts)."""
    backend = get_backend(build.target)
    profile = function_profile(backend.simulator, build.sources, build.header, build.prefix, x[None, :],
                               build.n_scores, "int8_t", "int8_t", chip=backend.chip)
    kernels = sum(v for k, v in profile.items() if k.startswith(f"{build.prefix}_m4_"))
    return 1.0 - kernels / sum(profile.values())


def input_rows(shape: tuple[int, ...], n: int, seed: int = 0) -> np.ndarray:
    """n int8 rows (flattened ``shape``, NHWC): half uniform noise, half smooth fields (a few low-frequency
    waves over the spatial axes, each channel its own mix and offset, a little noise), like images and
    spectrograms; the first two rows are all -128 and all 127."""
    rng = np.random.default_rng(seed)
    dims = shape[1:-1] if len(shape) > 2 else shape[1:]
    channels = shape[-1] if len(shape) > 2 else 1
    grids = np.meshgrid(*[np.linspace(0, 1, d) for d in dims], indexing="ij")
    rows = []
    for r in range(n):
        if r % 2 == 0:
            rows.append(rng.integers(-128, 128, size=int(np.prod(shape))))
            continue
        field = np.zeros((*dims, channels))
        for _ in range(4):
            phase = sum(rng.uniform(0, 6 * np.pi) * g for g in grids) + rng.uniform(0, 2 * np.pi)
            field += np.sin(phase)[..., None] * rng.uniform(-60, 60, size=channels)
        field += rng.uniform(-40, 40, size=channels) + rng.normal(0, 6, size=field.shape)
        rows.append(np.clip(np.round(field), -128, 127).reshape(-1))
    X = np.stack(rows).astype(np.int8)
    X[0], X[1] = -128, 127
    return X


def tflm_outputs(data: bytes, X: np.ndarray, shape) -> np.ndarray:
    interpreter = runtime.Interpreter.from_bytes(data)
    outs = []
    for x in X:
        interpreter.set_input(x.reshape(shape), 0)
        interpreter.invoke()
        outs.append(interpreter.get_output(0).reshape(-1).copy())
    return np.stack(outs)


def measure(name: str, target: str, rows: int, cmsis: dict[str, int]) -> list[str]:
    path = MODELS / f"{name}.tflite"
    model = tinycc_ml.load_model(path)
    build = build_network(path, target, WORK / target / name)
    X = input_rows((1, *model.input_shape[1:]) if len(model.input_shape) > 2 else model.input_shape, rows)
    start = time.perf_counter()
    run = run_firmware(build, X)
    seconds = time.perf_counter() - start
    want = tflm_outputs(path.read_bytes(), X, model.input_shape)
    equal = run.scores == want
    instructions = run.instructions
    file_bytes = path.stat().st_size
    outside = f"{100 * outside_kernels(build, X[2]):.1f}" if target == "cortex-m4" else "-"
    # CMSIS-NN's layer functions on the same layers (benchmarks/cmsis_nn_layers.py: Cortex-M4, -O2)
    theirs = cmsis.get(name) if target == "cortex-m4" else None
    beside = [f"{theirs:,}", f"{np.mean(instructions) / theirs:.2f}"] if theirs else ["-", "-"]
    print(f"  {name} on {target}: {rows} rows in {seconds:.1f} s, bytes equal {equal.sum()}/{equal.size}",
          flush=True)
    return [name, target, str(rows), f"{equal.sum()}/{equal.size}", f"{int(np.mean(instructions)):,}",
            f"{int(instructions.min()):,}..{int(instructions.max()):,}",
            f"{np.mean(instructions) / build.macs:.2f}", f"{build.macs:,}", f"{run.model_flash_bytes:,}",
            f"{file_bytes:,}", f"{run.model_flash_bytes / file_bytes:.2f}", f"{build.arena_bytes:,}",
            f"{run.stack_bytes}", outside, *beside]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200, help="inputs per model on the Cortex-M4")
    parser.add_argument("--m33-rows", type=int, default=10, help="inputs per model on the Cortex-M33 (0: skip)")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--no-write", action="store_true", help="print only; keep the stored result")
    args = parser.parse_args()
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    table = []
    cmsis = cmsis_nn_totals()
    for name in names:
        table.append(measure(name, "cortex-m4", args.rows, cmsis))
        if args.m33_rows:
            table.append(measure(name, "cortex-m33", args.m33_rows, cmsis))
    columns = ["model", "target", "inputs", "bytes equal tflite-micro", "instructions / inference", "min..max",
               "instr / MAC", "MACs", "model flash B", ".tflite B", "flash / .tflite", "arena B", "stack B",
               "% outside kernels", "CMSIS-NN layers instr", "/ CMSIS-NN"]
    flags = [f"--rows {args.rows}", f"--m33-rows {args.m33_rows}"] + ([f"--only {args.only}"] if args.only else [])
    write_table("network_m4", columns, table, script="benchmarks/network_m4.py " + " ".join(flags),
                align=[None, None] + ["right"] * 14, results_dir=None if args.no_write else Path(__file__).parent
                / "results")


if __name__ == "__main__":
    main()
