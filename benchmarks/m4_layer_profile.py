"""Where a Cortex-M4 inference of the MLPerf Tiny models spends its cycles, layer by layer.

    python benchmarks/m4_layer_profile.py [--only kws_ref_model,...] [--optimize size] [--no-write]

Each model compiled by tinycc-ml for the Cortex-M4 (``--optimize``, default ``size``: the default build), one input
row run in unicorn and priced by the project's cycle model (``tinycc_ml.arm.m4_cycles``, zero wait states), the
cycles charged to the function the instruction belongs to. The kernels are one function per layer
(``<prefix>_m4_mm_<layer>``: a convolution's or a fully connected layer's matrix product; ``_m4_im2col_<layer>``:
its columns, ``_m4_im2colw_<layer>`` widened, ``_m4_rows_<layer>`` its widened input rows (counted as im2col);
``_m4_dw_<layer>`` and ``_m4_dw_<layer>_edge``: a depthwise convolution, and a wide layer's border columns, shared
by the layers of one geometry; ``_m4_add_<layer>``; ``_m4_pwn_<layer>``: a pointwise convolution of 8 to 32 inputs,
``arm.m4_pointwise_narrow``, with ``_m4_pwn_widen`` its words widened into RAM; ``_m4_rgb_<layer>`` and its
``_row``: a 3-input-channel convolution, ``arm.m4_conv_rgb``, with its rows' helpers), ``_m4_widen2`` and
``_m4_widen_row`` are the matrix kernels' input widening (shared by the layers) and the rest is the model's own
``run`` (pools, softmax, calls). The table groups them by kind: cycles, share, multiply-accumulates of the layers of
that kind and cycles per multiply-accumulate.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from network_m4 import MODELS, NAMES, WORK, input_rows  # noqa: E402
from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.ir.ops.registry import node_macs  # noqa: E402
from tinycc_ml.runtime.profile import function_cycles  # noqa: E402

KINDS = [("im2col", "im2col"), ("dw", "depthwise"), ("dw_edge", "depthwise, border columns"),
         ("mm_conv", "convolution matrix"), ("rgb", "3-input-channel convolution, rows included"),
         ("pwn", "pointwise, 8 to 32 inputs"), ("mm_fc", "fully connected matrix"), ("widen", "input widening"),
         ("add", "ADD"), ("other", "other (pools, softmax, run)")]


def kind_of(symbol: str, prefix: str, graph) -> tuple[str, str | None]:
    """(kind, layer) of a function symbol."""
    name = symbol[len(prefix) + 1:] if symbol.startswith(prefix + "_") else symbol
    if name in ("m4_widen2", "m4_widen_row"):
        return "widen", None
    if name == "m4_pwn_widen":  # the narrow pointwise layers' words, widened into RAM per call
        return "pwn", None
    if name in ("m4_rgb_widen", "m4_rgb_widen2", "m4_move_words"):  # the 3-channel layers' rows (arm.m4_conv_rgb)
        return "rgb", None
    for pattern, kind in ((r"m4_rgb_(.+)_row", "rgb"), (r"m4_rgb_(.+)", "rgb"),
                          (r"m4_(?:im2colw?|rows)_(.+)", "im2col"), (r"m4_dw_(.+)_edge", "dw_edge"),
                          (r"m4_dw_(.+)", "dw"), (r"m4_add_(.+)", "add"), (r"m4_mm_(.+)", "mm"),
                          (r"m4_pwn_(.+)", "pwn")):
        match = re.fullmatch(pattern, name)
        if match:
            layer = match.group(1)
            if kind == "mm":
                kind = "mm_fc" if graph.op(layer) == "fully_connected" else "mm_conv"
            return kind, layer
    return "other", None


def profile(name: str, optimize: str) -> list[list[str]]:
    path = MODELS / f"{name}.tflite"
    model = tinycc_ml.load_model(path)
    out_dir = WORK / "layer_profile" / optimize / name
    result = tinycc_ml.compile(path, target="cortex-m4", name="net", out_dir=out_dir, optimize=optimize)
    shape = (1, *model.input_shape[1:]) if len(model.input_shape) > 2 else model.input_shape
    backend = get_backend("cortex-m4")
    row = input_rows(shape, 3)[2][None, :]
    count = function_cycles(backend.simulator, [str(out_dir / "net.c")], str(out_dir / "net.h"), "net", row,
                            result.output.n_scores, "int8_t", "int8_t", chip=backend.chip)
    total = float(count.cycles[0])
    cycles = {kind: 0.0 for kind, _ in KINDS}
    layers = {kind: set() for kind, _ in KINDS}
    for symbol, value in count.per_function.items():
        kind, layer = kind_of(symbol, "net", result.graph)
        cycles[kind] += value
        if layer is not None:
            layers[kind].add(layer)
    # depthwise layers of one geometry share their functions (named after the first): all of them are theirs
    if layers["dw"]:
        layers["dw"] = {n.name for n in result.graph.nodes() if n.op == "depthwise_conv2d"}
    rows = []
    for kind, label in KINDS:
        if not cycles[kind]:
            continue
        counted = kind in ("dw", "mm_conv", "rgb", "pwn", "mm_fc")
        macs = sum(node_macs(result.graph, layer) for layer in layers[kind]) if counted else 0
        rows.append([name, label, f"{cycles[kind]:,.0f}", f"{100 * cycles[kind] / total:.1f}%",
                     f"{macs:,}" if macs else "-", f"{cycles[kind] / macs:.2f}" if macs else "-"])
    all_macs = sum(node_macs(result.graph, n.name) for n in result.graph.nodes())
    rows.append([name, "whole inference", f"{total:,.0f}", "100%", f"{all_macs:,}", f"{total / all_macs:.2f}"])
    for r in rows:
        print("  " + " | ".join(r), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--optimize", default="size", choices=("size", "speed"))
    parser.add_argument("--no-write", action="store_true", help="print only; keep the stored result")
    args = parser.parse_args()
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    table = [row for name in names for row in profile(name, args.optimize)]
    flags = [f"--optimize {args.optimize}"] + ([f"--only {args.only}"] if args.only else [])
    write_table("m4_layer_profile", ["model", "functions", "cycles (model, 0 WS)", "share", "MACs", "cycles / MAC"],
                table, script="benchmarks/m4_layer_profile.py " + " ".join(flags),
                align=[None, None, "right", "right", "right", "right"],
                results_dir=None if args.no_write else Path(__file__).parent / "results")


if __name__ == "__main__":
    main()
