"""The activation arena of the four MLPerf Tiny int8 models and the 1-D DS-CNN the tests build
(tests/tflite_models.ds_cnn_1d) against TFLite Micro's plan: TFLite Micro's arena ("head" of
``print_allocations()``: the activations; its total adds the interpreter's own data), tinycc-ml's earlier plan
(first fit in the schedule's order, no layer written over its input), the largest live set without in-place layers
(the bound any placement of whole tensors must hold), tinycc-ml's plan (layers written over their input within
each op's aliasing rule, ``OpDef.alias``) and its own bound (``lower_bound``: the largest live set, the layer
computed at each step overlapping its dying input as far as its rule allows), the ratio to TFLite Micro's head,
and every output byte of the Cortex-M4 build (QEMU) against tflite-micro on ``--rows`` inputs.

    python benchmarks/network_arena.py [--rows 20] [--no-write]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from network_m4 import MODELS, NAMES, build_network, input_rows, run_firmware, tflm_outputs  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.tflite_models import ds_cnn_1d  # noqa: E402
from tinycc_ml.passes import plan_memory  # noqa: E402

TFLM_LINE = re.compile(r"Arena allocation (head|total) (\d+) bytes")


def tflm_arena(data: bytes, work: Path) -> dict[str, int]:
    """TFLite Micro's "head" and "total" arena bytes: print_allocations() writes them on the C side's stdout, so it
    runs in a child process."""
    path = work / "tflm.tflite"
    path.write_bytes(data)
    code = ("from tflite_micro.python.tflite_micro import runtime; import sys; "
            "runtime.Interpreter.from_file(sys.argv[1]).print_allocations()")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return {kind: int(n) for kind, n in TFLM_LINE.findall(out.stdout + out.stderr)}


def earlier_plans(graph) -> tuple[int, int]:
    """(first fit in the schedule's order with no value over its input, the largest live set then), bytes."""
    life = plan_memory.lifetimes(graph, graph.analyses.fused)
    life.leads.clear()
    offset = plan_memory._first_fit(life.slots, life)
    first_fit = max(offset[n] + life.length[n] for n in life.slots)
    live = max(sum(life.length[n] for n in life.slots if life.live[n][0] <= step <= life.live[n][1])
               for step in {life.live[n][0] for n in life.slots})
    return first_fit, live  # int8 arenas: elements are bytes


def measure(name: str, data: bytes, rows: int, work: Path) -> list[str]:
    path = work / f"{name}.tflite"
    path.write_bytes(data)
    build = build_network(path, "cortex-m4", work / name)
    result = tinycc_ml.compile(path, target="host", name="net")  # the same plan: the graph's, whatever the target
    a = result.graph.analyses
    assert set(a.arenas) == {"i8"} and build.arena_bytes == sum(a.arenas.values())
    first_fit, live = earlier_plans(result.graph)
    tflm = tflm_arena(data, work)
    model = tinycc_ml.load_model(path)
    shape = model.input_shape
    X = input_rows((1, *shape[1:]) if len(shape) > 2 else shape, rows)
    equal = run_firmware(build, X).scores == tflm_outputs(data, X, shape)
    print(f"  {name}: arena {build.arena_bytes} B, bytes equal {equal.sum()}/{equal.size}", flush=True)
    return [name, f"{tflm['head']:,}", f"{tflm['total']:,}", f"{first_fit:,}", f"{live:,}", f"{build.arena_bytes:,}",
            f"{a.arena_bounds['i8']:,}", f"{build.arena_bytes / tflm['head']:.2f}", f"{equal.sum()}/{equal.size}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20, help="inputs per model run on the Cortex-M4")
    parser.add_argument("--no-write", action="store_true", help="print only; keep the stored result")
    args = parser.parse_args()
    models = {name: (MODELS / f"{name}.tflite").read_bytes() for name in NAMES}
    models["ds_cnn_1d (tests)"] = ds_cnn_1d()
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-arena-") as tmp:
        table = [measure(name, data, args.rows, Path(tmp)) for name, data in models.items()]
    columns = ["model", "TFLM head B", "TFLM total B", "first fit, no in place B", "largest live set B",
               "tinycc-ml arena B", "its bound B", "/ TFLM head", "bytes equal tflite-micro (M4)"]
    write_table("network_arena", columns, table, script=f"benchmarks/network_arena.py --rows {args.rows}",
                align=[None] + ["right"] * 8,
                results_dir=None if args.no_write else Path(__file__).parent / "results")


if __name__ == "__main__":
    main()
