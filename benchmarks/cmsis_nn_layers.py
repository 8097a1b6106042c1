"""CMSIS-NN on the MLPerf Tiny models, layer by layer, on the Cortex-M4F (MPS2 AN386, QEMU -icount: exact
instruction counts): for each layer of each model, the CMSIS-NN function TFLite Micro's CMSIS-NN kernels call
for it (arm_convolve_wrapper_s8, arm_depthwise_conv_wrapper_s8, arm_fully_connected_s8, arm_avgpool_s8,
arm_elementwise_add_s8, arm_softmax_s8) with the layer's real weights and quantisation (multipliers and shifts
computed as TFLite computes them, from our IR: ``tflite_arith``), its input the layer's input as our interpreter
computes it on a random int8 row; the layer's output checked equal to our interpreter's on every byte (so the
counts are of the same work tinycc-ml's C does). RESHAPE is free on both sides.

    python benchmarks/cmsis_nn_layers.py [--models kws_ref_model,ad01_int8,...] [--opt -O2] [--cmsis-nn PATH]

Built as benchmarks/m4_cycles.py builds CMSIS-NN's fully connected layer: its sources extracted from the git
mirror into a temporary cache at run time (never part of tinycc-ml), compiled by arm-none-eabi-gcc with the
chip's flags (-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard: the DSP extension's paths) and
``--opt`` (default -O2), linked into the measurement harness (tinycc_ml.runtime.simulate.run_on_target), one
firmware per layer. Instructions are those of the layer's CMSIS-NN call (the second of two identical calls:
the first also sizes the scratch buffer, as TFLite Micro's Prepare does once). Results:
benchmarks/results/cmsis_nn_layers.json; ``cmsis_nn_totals()`` gives the per-model totals.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from m4_cycles import cmsis_tree  # noqa: E402

from tinycc_ml.importers.tflite import load_tflite  # noqa: E402
from tinycc_ml.ir.fixed import run_fixed  # noqa: E402
from tinycc_ml.ir.ops.tensor_elementwise import ADD_LEFT_SHIFT, add_multipliers  # noqa: E402
from tinycc_ml.ir.ops.tflite_arith import activation_range, channel_multipliers, softmax_parameters  # noqa: E402
from tinycc_ml.ir.ops.windows import channel_scales, pad_before  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cmsis_nn_layers.json"
MODELS = ROOT / "data" / "mlperf-tiny"
NAMES = ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8"]
TARGET = "cortex-m4"
SOURCE_FOLDERS = ("ConvolutionFunctions", "FullyConnectedFunctions", "PoolingFunctions", "BasicMathFunctions",
                  "SoftmaxFunctions", "NNSupportFunctions")
CMSIS_FILES = ("Include", *(f"Source/{folder}" for folder in SOURCE_FOLDERS))
# the fetched mirror beside the checkout (a worktree may sit one level further down than m4_cycles' guess)
MIRROR = next((p / ".mirror" / "ARM-software+CMSIS-NN" / "repo" for p in ROOT.parents
               if (p / ".mirror" / "ARM-software+CMSIS-NN" / "repo").is_dir()), None)
SCRATCH_BYTES = 1 << 16  # the layers' scratch buffer (the size each asks for is reported)
FUNCTIONS = {"conv2d": "arm_convolve_wrapper_s8", "depthwise_conv2d": "arm_depthwise_conv_wrapper_s8",
             "fully_connected": "arm_fully_connected_s8", "average_pool2d": "arm_avgpool_s8",
             "tensor_add": "arm_elementwise_add_s8", "softmax": "arm_softmax_s8"}


def c_array(ctype: str, name: str, values) -> str:
    flat = np.asarray(values).reshape(-1)
    return f"static const {ctype} {name}[{max(1, flat.size)}] = {{ {', '.join(str(int(v)) for v in flat) or '0'} }};"


def dims(n, h, w, c) -> str:
    return f"{{{int(n)}, {int(h)}, {int(w)}, {int(c)}}}"


def layer_call(graph, name: str) -> tuple[list[str], str, str, int]:
    """(C declarations, the CMSIS-NN call writing cm_out, the scratch-size expression, input length) of a layer."""
    node = graph.node(name)
    out = node.type
    x = graph.type(node.inputs[0])
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.dtype.qscales[0], out.dtype.zero_point) \
        if node.op != "softmax" else (-128, 127)
    decls: list[str] = []
    if node.op in ("conv2d", "depthwise_conv2d"):
        w_type = graph.type(node.inputs[1])
        weights, bias = graph.node(node.inputs[1]).attrs["value"], graph.node(node.inputs[2]).attrs["value"]
        channels = out.shape[3]
        mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(w_type, channels), out.dtype.qscales[0])
        kh, kw = (w_type.shape[1], w_type.shape[2])
        stride = [int(s) for s in node.attrs["stride"]]
        dilation = [int(d) for d in node.attrs["dilation"]]
        pads = [pad_before(x.shape[1 + i], (kh, kw)[i], stride[i], dilation[i], out.shape[1 + i]) for i in range(2)]
        decls += [c_array("int8_t", "cm_w", weights), c_array("int32_t", "cm_bias", bias),
                  c_array("int32_t", "cm_mult", mult).replace("const ", ""),
                  c_array("int32_t", "cm_shift", shift).replace("const ", ""),
                  "static const cmsis_nn_per_channel_quant_params cm_q = {cm_mult, cm_shift};",
                  f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_o = {dims(*out.shape)};",
                  f"static const cmsis_nn_dims cm_b = {dims(1, 1, 1, channels)};"]
        common = (f"{-x.dtype.zero_point}, {out.dtype.zero_point}, {{{stride[1]}, {stride[0]}}}, "
                  f"{{{pads[1]}, {pads[0]}}}, {{{dilation[1]}, {dilation[0]}}}, {{{lo}, {hi}}}")
        if node.op == "conv2d":
            decls += [f"static const cmsis_nn_dims cm_f = {dims(*w_type.shape)};",
                      f"static const cmsis_nn_conv_params cm_p = {{{common}}};"]
            fn = "arm_convolve_wrapper_s8"
        else:
            decls += [f"static const cmsis_nn_dims cm_f = {dims(*w_type.shape)};",
                      f"static const cmsis_nn_dw_conv_params cm_p = {{{-x.dtype.zero_point}, {out.dtype.zero_point}, "
                      f"{int(node.attrs['depth_multiplier'])}, {{{stride[1]}, {stride[0]}}}, {{{pads[1]}, {pads[0]}}}, "
                      f"{{{dilation[1]}, {dilation[0]}}}, {{{lo}, {hi}}}}};"]
            fn = "arm_depthwise_conv_wrapper_s8"
        call = f"{fn}(&ctx, &cm_p, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_b, cm_bias, &cm_o, cm_out);"
        size = f"{fn}_get_buffer_size(&cm_p, &cm_in, &cm_f, &cm_o)"
        return decls, call, size, x.size
    if node.op == "fully_connected":
        w_type = graph.type(node.inputs[1])
        weights, bias = graph.node(node.inputs[1]).attrs["value"], graph.node(node.inputs[2]).attrs["value"]
        out_c, depth = w_type.shape
        mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(w_type, out_c), out.dtype.qscales[0])
        rows = x.size // depth
        decls += [c_array("int8_t", "cm_w", weights), c_array("int32_t", "cm_bias", bias),
                  f"static const cmsis_nn_per_tensor_quant_params cm_q = {{{int(mult[0])}, {int(shift[0])}}};",
                  f"static const cmsis_nn_fc_params cm_p = {{{-x.dtype.zero_point}, 0, {out.dtype.zero_point}, "
                  f"{{{lo}, {hi}}}}};",
                  f"static const cmsis_nn_dims cm_in = {dims(rows, 1, 1, depth)}, cm_f = {dims(depth, 1, 1, out_c)};",
                  f"static const cmsis_nn_dims cm_b = {dims(1, 1, 1, out_c)}, cm_o = {dims(rows, 1, 1, out_c)};"]
        call = "arm_fully_connected_s8(&ctx, &cm_p, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_b, cm_bias, &cm_o, cm_out);"
        return decls, call, "arm_fully_connected_s8_get_buffer_size(&cm_f)", x.size
    if node.op == "average_pool2d":
        fh, fw = (int(k) for k in node.attrs["filter"])
        stride = [int(s) for s in node.attrs["stride"]]
        pads = [pad_before(x.shape[1 + i], (fh, fw)[i], stride[i], 1, out.shape[1 + i]) for i in range(2)]
        decls += [f"static const cmsis_nn_pool_params cm_p = {{{{{stride[1]}, {stride[0]}}}, {{{pads[1]}, {pads[0]}}}, "
                  f"{{{lo}, {hi}}}}};",
                  f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_f = {dims(1, fh, fw, 1)}, "
                  f"cm_o = {dims(*out.shape)};"]
        call = "arm_avgpool_s8(&ctx, &cm_p, &cm_in, x, &cm_f, &cm_o, cm_out);"
        return decls, call, f"arm_avgpool_s8_get_buffer_size({out.shape[2]}, {x.shape[3]})", x.size
    if node.op == "tensor_add":
        b = graph.type(node.inputs[1])
        (ma, sa), (mb, sb), (mo, so) = add_multipliers(x.dtype.qscales[0], b.dtype.qscales[0], out.dtype.qscales[0])
        call = (f"arm_elementwise_add_s8(x, x + {x.size}, {-x.dtype.zero_point}, {ma}, {sa}, {-b.dtype.zero_point}, "
                f"{mb}, {sb}, {ADD_LEFT_SHIFT}, cm_out, {out.dtype.zero_point}, {mo}, {so}, {lo}, {hi}, {out.size});")
        return decls, call, "0", x.size + b.size
    if node.op == "softmax":
        multiplier, left_shift, diff_min = softmax_parameters(float(node.attrs["beta"]), x.dtype.qscales[0])
        depth = x.shape[-1]
        call = f"arm_softmax_s8(x, {x.size // depth}, {depth}, {multiplier}, {left_shift}, {diff_min}, cm_out);"
        return decls, call, "0", x.size
    raise ValueError(f"no CMSIS-NN function for {node.op}")


WRAPPER = """/* one layer through CMSIS-NN, behind the harness' predict/scores entry points */
#include "arm_nnfunctions.h"
#include "cm.h"

{decls}
static int8_t cm_out[{out_size}];
static int8_t cm_scratch[{scratch}] __attribute__((aligned(8)));
static int32_t cm_scratch_size = -1;

int cm_predict(const int8_t *x)
{{
    cmsis_nn_context ctx;
    if (cm_scratch_size < 0)  /* TFLite Micro's Prepare, once */
        cm_scratch_size = {size};
    if (cm_scratch_size > {scratch})
        return -1;
    ctx.buf = cm_scratch;
    ctx.size = cm_scratch_size;
    {call}
    return cm_out[0];
}}

void cm_scores(const int8_t *x, int16_t *scores)
{{
    (void)cm_predict(x);
    for (int i = 0; i < {out_size}; ++i) scores[i] = cm_out[i];
    scores[{out_size}] = (int16_t)(cm_scratch_size & 0xFFFF);
    scores[{out_size} + 1] = (int16_t)(cm_scratch_size >> 16);
}}
"""
HEADER = "#include <stdint.h>\nint cm_predict(const int8_t *x);\nvoid cm_scores(const int8_t *x, int16_t *scores);\n"


def layer_values(graph, row: np.ndarray) -> dict[str, np.ndarray]:
    """Every node's value on one input row (the interpreter, each layer an extra output)."""
    layers = [n for n in graph.order() if graph.op(n) not in ("input", "const")]
    for n in layers:
        graph.set_output(f"layer_{n}", n)
    got = run_fixed(graph, row[None])
    values = {n: got[f"layer_{n}"][0] for n in layers}
    values[graph.inputs()[0]] = row
    return values


def model_layers(name: str, tree: Path, opt: str, seed: int = 0) -> list[dict]:
    graph = load_tflite(MODELS / f"{name}.tflite")
    x_type = graph.type(graph.inputs()[0])
    row = np.random.default_rng(seed).integers(-128, 128, size=x_type.shape).astype(np.int64)
    values = layer_values(graph, row)
    sources = sorted(str(p) for folder in SOURCE_FOLDERS for p in (tree / "Source" / folder).glob("*.c")
                     if not any(kind in p.name for kind in ("_f16", "_f32")))  # the int8 functions' files
    flags = (f"-I{tree / 'Include'}", opt)
    rows = []
    for layer in graph.order():
        op = graph.op(layer)
        if op not in FUNCTIONS:
            continue
        decls, call, size, in_size = layer_call(graph, layer)
        node = graph.node(layer)
        x = np.concatenate([np.asarray(values[i]).reshape(-1) for i in node.inputs if graph.op(i) != "const"])
        assert x.size == in_size, (layer, x.size, in_size)
        out_size = node.type.size
        text = WRAPPER.format(decls="\n".join(decls), out_size=out_size, scratch=SCRATCH_BYTES, size=size, call=call)
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-layer-") as tmp:
            (Path(tmp) / "cm.c").write_text(text)
            (Path(tmp) / "cm.h").write_text(HEADER)
            xin = np.stack([x, x]).astype(np.int8)
            run = run_on_target(TARGET, [Path(tmp) / "cm.c", *sources], Path(tmp) / "cm.h", "cm", xin,
                                out_size + 2, "int8_t", "int16_t", extra_cflags=flags)
        scores = run.scores[1].astype(np.int64)
        scratch = int(scores[out_size] & 0xFFFF) | (int(scores[out_size + 1]) << 16)
        want = np.asarray(values[layer]).reshape(-1)
        equal = bool(np.array_equal(scores[:out_size], want)) and scratch <= SCRATCH_BYTES
        rows.append({"layer": layer, "op": op, "function": FUNCTIONS[op], "instructions": int(run.instructions[1]),
                     "scratch_bytes": scratch, "equal": equal,
                     "bytes_differing": int((scores[:out_size] != want).sum()), "outputs": int(out_size)})
        print(f"  {name} {layer:<40} {FUNCTIONS[op]:<32} {int(run.instructions[1]):>12,} scratch {scratch:>6} "
              f"{'equal' if equal else 'DIFFERS'}", file=sys.stderr, flush=True)
    return rows


def summarise(layers: list[dict]) -> dict:
    by_function: dict[str, int] = defaultdict(int)
    for r in layers:
        by_function[r["function"]] += r["instructions"]
    return {"total_instructions": sum(r["instructions"] for r in layers), "by_function": dict(by_function),
            "max_scratch_bytes": max((r["scratch_bytes"] for r in layers), default=0),
            "all_layers_equal": all(r["equal"] for r in layers), "layers": layers}


def cmsis_nn_totals(path: Path = RESULTS) -> dict[str, int]:
    """{model: CMSIS-NN instructions per inference (the layers' calls summed)} from the saved results, to put
    beside tinycc-ml's M4 figures (benchmarks/network_m4.py)."""
    saved = json.loads(Path(path).read_text())
    return {name: result["total_instructions"] for name, result in saved["models"].items()}


def print_table(saved: dict) -> None:
    functions = list(FUNCTIONS.values())
    short = {f: f.removeprefix("arm_").removesuffix("_s8") for f in functions}
    print(f"CMSIS-NN {saved['cmsis_nn']}, {saved['opt']}, Cortex-M4F (QEMU mps2-an386 -icount): instructions per "
          "inference by function")
    print(f"{'model':<24}" + "".join(f"{short[f]:>24}" for f in functions) + f"{'total':>14}{'max scratch B':>14}"
          f"{'layers equal':>14}")
    for name, result in saved["models"].items():
        cells = "".join(f"{result['by_function'].get(f, 0):>24,}" for f in functions)
        equal = f"{sum(r['equal'] for r in result['layers'])}/{len(result['layers'])}"
        print(f"{name:<24}{cells}{result['total_instructions']:>14,}{result['max_scratch_bytes']:>14,}{equal:>14}")
    for name, result in saved["models"].items():
        print(f"\n{name}: {'layer':<44}{'CMSIS-NN function':<32}{'instructions':>14}{'scratch B':>10}  output")
        for r in result["layers"]:
            output = "equal" if r["equal"] else f"{r['bytes_differing']} bytes differ"
            print(f"{'':<{len(name) + 2}}{r['layer']:<44}{r['function']:<32}{r['instructions']:>14,}"
                  f"{r['scratch_bytes']:>10}  {output}")


def table(saved: dict, script: str) -> dict:
    """The docs' table (benchmarks/results_table.py's format): instructions per inference by function."""
    rows = []
    for name, result in saved["models"].items():
        equal = f"{sum(r['equal'] for r in result['layers'])}/{len(result['layers'])}"
        rows.append([name, *(f"{result['by_function'].get(f, 0):,}" for f in FUNCTIONS.values()),
                     f"{result['total_instructions']:,}", f"{result['max_scratch_bytes']:,}", equal])
    return {"name": "cmsis_nn_layers", "script": script,
            "columns": ["model (CMSIS-NN, Cortex-M4F, " + saved["opt"] + ")",
                        *(f"`{f}`" for f in FUNCTIONS.values()), "total instructions", "largest scratch (B)",
                        "layers equal to tinycc-ml's"],
            "rows": rows, "align": [None] + ["right"] * 9}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(NAMES))
    ap.add_argument("--opt", default="-O2", help="optimisation flag for CMSIS-NN and the wrapper (default -O2)")
    ap.add_argument("--cmsis-nn", type=Path, default=None, help="CMSIS-NN source tree or git directory")
    ap.add_argument("--print", action="store_true", help="print the saved results")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.print:
        print_table(json.loads(args.out.read_text()))
        return 0
    tree, how = cmsis_tree(args.cmsis_nn or (None if os.environ.get("TINYCC_ML_CMSIS_NN") else MIRROR), CMSIS_FILES)
    if tree is None:
        print(f"CMSIS-NN unavailable: {how}")
        return 1
    start = time.perf_counter()
    saved = {"cmsis_nn": how, "opt": args.opt, "target": TARGET, "models": {}}
    for name in args.models.split(","):
        saved["models"][name] = summarise(model_layers(name, tree, args.opt))
    saved["seconds"] = round(time.perf_counter() - start, 1)
    script = "benchmarks/cmsis_nn_layers.py" + (f" --opt {args.opt}" if args.opt != "-O2" else "")
    args.out.write_text(json.dumps({**table(saved, script), **saved}, indent=1) + "\n")
    print_table(saved)
    return 0 if all(m["all_layers_equal"] for m in saved["models"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
