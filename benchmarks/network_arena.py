"""The activation arena of the four MLPerf Tiny int8 models and the 1-D DS-CNN the tests build
(tests/tflite_models.ds_cnn_1d) against TFLite Micro's plan: TFLite Micro's arena ("head" of
``print_allocations()``: the activations; its total adds the interpreter's own data), tinycc-ml's earlier plan
(first fit in the schedule's order, no layer written over its input), the largest live set without in-place layers
(the bound any placement of whole tensors must hold), tinycc-ml's plan (layers written over their input within
each op's aliasing rule, ``OpDef.alias``) and its own bound (``lower_bound``: the largest live set, the layer
computed at each step overlapping its dying input as far as its rule allows), the ratio to TFLite Micro's head,
and every output byte of the Cortex-M4 build (QEMU) against tflite-micro on ``--rows`` inputs.

A second table, patch-based execution (``ram_limit``, passes/patch_stages.py), two limits per model: the smallest
arena of any split and grid costing at most ``MAX_EXTRA`` more MACs (the issue's bar: 15%), and ``SMALL_HEAD`` of
TFLite Micro's head; the build compiled with each (the split and grid the compiler chooses for it), its extra
MACs, its Cortex-M4 instructions and model flash against the whole layers' build, and its output bytes against
tflite-micro.

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
from tinycc_ml.errors import FitError  # noqa: E402
from tinycc_ml.ir.ops.registry import node_macs  # noqa: E402
from tinycc_ml.passes import patch_stages, plan_memory  # noqa: E402

MAX_EXTRA = 0.15  # the patches' extra MACs allowed, a fraction of the model's
SMALL_HEAD = 0.3  # the second limit: this fraction of TFLite Micro's head (the bar: 0.5 for VWW)

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


def measure(name: str, data: bytes, rows: int, work: Path) -> tuple[list[str], list[str]]:
    """The model's row of each table: the arena, and patch-based execution."""
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
    want = tflm_outputs(data, X, shape)
    run = run_firmware(build, X)
    equal = run.scores == want
    print(f"  {name}: arena {build.arena_bytes} B, bytes equal {equal.sum()}/{equal.size}", flush=True)
    arena_row = [name, f"{tflm['head']:,}", f"{tflm['total']:,}", f"{first_fit:,}", f"{live:,}",
                 f"{build.arena_bytes:,}", f"{a.arena_bounds['i8']:,}", f"{build.arena_bytes / tflm['head']:.2f}",
                 f"{equal.sum()}/{equal.size}"]
    return arena_row, measure_patches(name, path, result.graph, tflm["head"], build, run, X, want, work)


def measure_patches(name: str, path: Path, graph, head: int, build, run, X, want, work: Path) -> list[list[str]]:
    """The rows of patch-based execution: the smallest arena within MAX_EXTRA more MACs, and SMALL_HEAD of TFLite
    Micro's head, each the build with it as the limit (the compiler's choice), or why there is none."""
    macs = sum(node_macs(graph, n) for n in graph.order())
    smallest = patch_stages.smallest_arena(graph, int(MAX_EXTRA * macs))
    if smallest >= build.arena_bytes:
        _, layers = patch_stages.stage(graph)
        why = "no smaller arena" if layers else "no windowed layers from the input"
        return [[name, "", f"{head:,}", f"{build.arena_bytes:,}", why, "", "", "", "", "", ""]]
    rows = []
    for limit, what in ((smallest, f"least within +{MAX_EXTRA:.0%} MACs"),
                        (int(SMALL_HEAD * head), f"{SMALL_HEAD} TFLM head")):
        try:
            report = tinycc_ml.compile(path, target="host", name="net", ram_limit=limit).report["patches"]
        except FitError as exc:
            rows.append([name, what, f"{head:,}", f"{build.arena_bytes:,}",
                         "refused: " + exc.args[0].split("; ")[-1], "", "", "", "", "", ""])
            continue
        patched = build_network(path, "cortex-m4", work / f"{name}-{limit}", ram_limit=limit)
        assert patched.arena_bytes == report["arena_bytes"] <= limit
        patched_run = run_firmware(patched, X)
        equal = patched_run.scores == want
        print(f"  {name}: patched arena {patched.arena_bytes} B, bytes equal {equal.sum()}/{equal.size}", flush=True)
        instructions = sum(patched_run.instructions) / sum(run.instructions)
        rows.append([name, what, f"{head:,}", f"{build.arena_bytes:,}", f"{patched.arena_bytes:,}",
                     f"{patched.arena_bytes / head:.2f}",
                     f"%{report['split']}, {report['grid'][0]}x{report['grid'][1]}",
                     f"+{report['extra_macs_percent']:.1f}%", f"{instructions:.2f}x",
                     f"{patched_run.model_flash_bytes / run.model_flash_bytes:.2f}x", f"{equal.sum()}/{equal.size}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20, help="inputs per model run on the Cortex-M4")
    parser.add_argument("--no-write", action="store_true", help="print only; keep the stored result")
    args = parser.parse_args()
    models = {name: (MODELS / f"{name}.tflite").read_bytes() for name in NAMES}
    models["ds_cnn_1d (tests)"] = ds_cnn_1d()
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-arena-") as tmp:
        rows = [measure(name, data, args.rows, Path(tmp)) for name, data in models.items()]
    results = None if args.no_write else Path(__file__).parent / "results"
    columns = ["model", "TFLM head B", "TFLM total B", "first fit, no in place B", "largest live set B",
               "tinycc-ml arena B", "its bound B", "/ TFLM head", "bytes equal tflite-micro (M4)"]
    write_table("network_arena", columns, [arena for arena, _ in rows],
                script=f"benchmarks/network_arena.py --rows {args.rows}", align=[None] + ["right"] * 8,
                results_dir=results)
    columns = ["model", "ram_limit", "TFLM head B", "whole layers B", "patched B", "/ TFLM head", "split, grid",
               "extra MACs", "M4 instructions", "M4 model flash", "bytes equal tflite-micro (M4)"]
    write_table("network_patches", columns, [row for _, patches in rows for row in patches],
                script=f"benchmarks/network_arena.py --rows {args.rows}", align=[None, None] + ["right"] * 9,
                results_dir=results)


if __name__ == "__main__":
    main()
