"""tinycc-ml's Cortex-M4 16x8 kernels (tinycc_ml/arm/m4_network16.py) against CMSIS-NN's s16 functions, layer by
layer, on the Cortex-M4F (MPS2 AN386, QEMU -icount: exact instruction counts).

    python benchmarks/cmsis_nn_s16.py [--opt -O2] [--cmsis-nn PATH] [--print]

Each layer is a one-layer TFLite model of TFLite's 16x8 quantisation (int16 activations, zero points 0, int8
weights, int64 biases) written with the tests' flatbuffer builder (tests/tflite_builder.py: random weights, per
channel scales for convolutions), its shape one of the Keras zoo's 16x8 models' layers (tests/data/keras:
ds_cnn_16x8, kws_cnn_16x8, vww_tiny_16x8, residual_16x8, cnn_16x8) or a larger one. Ours: the model compiled by
tinycc-ml for the Cortex-M4 (its default build), the instructions of one inference (the layer, and the model's
argmax over its outputs: a few instructions per output, counted against us). CMSIS-NN: the function TFLite
Micro's CMSIS-NN kernels call for the layer (arm_convolve_wrapper_s16, arm_depthwise_conv_wrapper_s16,
arm_fully_connected_s16, arm_elementwise_add_s16) on the same weights, multipliers and shifts (computed as
TFLite computes them), built from its sources as benchmarks/cmsis_nn_layers.py builds them (same compiler,
flags, harness; the second of two calls). Both outputs are checked equal, value for value, to tinycc-ml's
interpreter (itself equal to tflite-micro's) on one random int16 input. ADD's operands are the model's input and
a QUANTIZE of it to another scale: ours is the model's count less that of the QUANTIZE alone.
Results: benchmarks/results/cmsis_nn_s16.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cmsis_nn_layers import CMSIS_FILES, HEADER, MIRROR, SOURCE_FOLDERS, TARGET, c_array, dims  # noqa: E402
from m4_cycles import cmsis_tree  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.tflite_builder import NetBuilder  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.importers.tflite import load_tflite  # noqa: E402
from tinycc_ml.ir.fixed import run_fixed  # noqa: E402
from tinycc_ml.ir.ops.tensor_elementwise import add_left_shift, add_multipliers  # noqa: E402
from tinycc_ml.ir.ops.tflite_arith import activation_range, channel_multipliers  # noqa: E402
from tinycc_ml.ir.ops.windows import channel_scales, pad_before  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cmsis_nn_s16.json"
SCRATCH_BYTES = 1 << 16
TARGET_RATIO = 0.6


def conv(size, in_c, out_c, kernel, stride=(1, 1), padding="same"):
    return lambda n: n.conv(n.input((*size, in_c)), out_c, kernel, stride=stride, padding=padding, activation="relu")


def depthwise(size, channels, stride=(1, 1)):
    return lambda n: n.depthwise(n.input((*size, channels)), 1, (3, 3), stride=stride, padding="same",
                                 activation="relu")


def dense(depth, units):
    return lambda n: n.fc(n.input((depth,)), units)


def add(shape):
    def build(n):
        x = n.input(shape)
        return n.add(x, n.requantize(x, 1.7 * n.scales[x], 16), activation="relu")
    return build


def quantize_only(shape):
    def build(n):
        x = n.input(shape)
        return n.requantize(x, 1.7 * n.scales[x], 16)
    return build


# (name, builder, where its shape comes from)
LAYERS = [
    ("conv 1x1, 10x4x8 -> 8", conv((10, 4), 8, 8, (1, 1), padding="valid"), "ds_cnn_16x8"),
    ("conv 1x1, 6x6x16 -> 16", conv((6, 6), 16, 16, (1, 1), padding="valid"), "vww_tiny_16x8"),
    ("conv 1x1, 12x12x32 -> 32", conv((12, 12), 32, 32, (1, 1), padding="valid"), "larger"),
    ("conv 3x3, 8x8x8 -> 8", conv((8, 8), 8, 8, (3, 3)), "kws_cnn_16x8"),
    ("conv 3x3, 8x8x4 -> 4", conv((8, 8), 4, 4, (3, 3)), "residual_16x8"),
    ("conv 3x3 stride 2, 24x24x3 -> 8", conv((24, 24), 3, 8, (3, 3), stride=(2, 2)), "vww_tiny_16x8"),
    ("conv 3x3, 12x12x16 -> 32", conv((12, 12), 16, 32, (3, 3)), "larger"),
    ("depthwise 3x3, 10x4x8", depthwise((10, 4), 8), "ds_cnn_16x8"),
    ("depthwise 3x3, 6x6x16", depthwise((6, 6), 16), "vww_tiny_16x8"),
    ("depthwise 3x3 stride 2, 12x12x8", depthwise((12, 12), 8, (2, 2)), "vww_tiny_16x8"),
    ("depthwise 3x3, 12x12x32", depthwise((12, 12), 32), "larger"),
    ("fully connected 512 -> 12", dense(512, 12), "kws_cnn_16x8"),
    ("fully connected 72 -> 5", dense(72, 5), "cnn_16x8"),
    ("fully connected 256 -> 64", dense(256, 64), "larger"),
    ("add 8x8x4", add((8, 8, 4)), "residual_16x8"),
    ("add 12x12x16", add((12, 12, 16)), "larger"),
]


def model(build, seed: int) -> bytes:
    n = NetBuilder(seed=seed, activation_bits=16, bias_bits=64)
    return n.finish(build(n))


def layer_call(graph, name: str) -> tuple[list[str], str, str, list[str]]:
    """(C declarations, the CMSIS-NN call writing cm_out, the scratch-size expression, the nodes whose values
    are the call's inputs, concatenated) of a 16x8 layer."""
    node = graph.node(name)
    out = node.type
    x = graph.type(node.inputs[0])
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.dtype.qscales[0], 0, 16)
    if node.op == "tensor_add":
        a, b = (graph.type(i).dtype for i in node.inputs)
        shift = add_left_shift(16)
        (ma, sa), (mb, sb), (mo, so) = add_multipliers(a.qscales[0], b.qscales[0], out.dtype.qscales[0], shift)
        call = (f"arm_elementwise_add_s16(x, x + {x.size}, 0, {ma}, {sa}, 0, {mb}, {sb}, {shift}, cm_out, 0, {mo}, "
                f"{so}, {lo}, {hi}, {out.size});")
        return [], call, "0", list(node.inputs)
    w_type = graph.type(node.inputs[1])
    weights, bias = graph.node(node.inputs[1]).attrs["value"], graph.node(node.inputs[2]).attrs["value"]
    decls = [c_array("int8_t", "cm_w", weights), c_array("int64_t", "cm_bias", np.asarray(bias, np.int64))]
    if node.op == "fully_connected":
        out_c, depth = w_type.shape
        mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(w_type, out_c), out.dtype.qscales[0])
        rows = x.size // depth
        decls += [f"static const cmsis_nn_per_tensor_quant_params cm_q = {{{int(mult[0])}, {int(shift[0])}}};",
                  f"static const cmsis_nn_fc_params cm_p = {{0, 0, 0, {{{lo}, {hi}}}}};",
                  f"static const cmsis_nn_dims cm_in = {dims(rows, 1, 1, depth)}, cm_f = {dims(depth, 1, 1, out_c)};",
                  f"static const cmsis_nn_dims cm_b = {dims(1, 1, 1, out_c)}, cm_o = {dims(rows, 1, 1, out_c)};"]
        call = "arm_fully_connected_s16(&ctx, &cm_p, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_b, cm_bias, &cm_o, cm_out);"
        return decls, call, "arm_fully_connected_s16_get_buffer_size(&cm_f)", [node.inputs[0]]
    channels = out.shape[3]
    mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(w_type, channels), out.dtype.qscales[0])
    kh, kw = w_type.shape[1], w_type.shape[2]
    stride = [int(s) for s in node.attrs["stride"]]
    dilation = [int(d) for d in node.attrs["dilation"]]
    pads = [pad_before(x.shape[1 + i], (kh, kw)[i], stride[i], dilation[i], out.shape[1 + i]) for i in range(2)]
    decls += [c_array("int32_t", "cm_mult", mult).replace("const ", ""),
              c_array("int32_t", "cm_shift", shift).replace("const ", ""),
              "static const cmsis_nn_per_channel_quant_params cm_q = {cm_mult, cm_shift};",
              f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_o = {dims(*out.shape)};",
              f"static const cmsis_nn_dims cm_b = {dims(1, 1, 1, channels)};",
              f"static const cmsis_nn_dims cm_f = {dims(*w_type.shape)};"]
    geometry = (f"{{{stride[1]}, {stride[0]}}}, {{{pads[1]}, {pads[0]}}}, {{{dilation[1]}, {dilation[0]}}}, "
                f"{{{lo}, {hi}}}")
    if node.op == "conv2d":
        decls += [f"static const cmsis_nn_conv_params cm_p = {{0, 0, {geometry}}};",
                  "static const cmsis_nn_bias_data cm_bias_data = {cm_bias, false};"]
        fn, bias_arg = "arm_convolve_wrapper_s16", "&cm_bias_data"
    else:
        decls += [f"static const cmsis_nn_dw_conv_params cm_p = {{0, 0, {int(node.attrs['depth_multiplier'])}, "
                  f"{geometry}}};"]
        fn, bias_arg = "arm_depthwise_conv_wrapper_s16", "cm_bias"
    call = f"{fn}(&ctx, &cm_p, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_b, {bias_arg}, &cm_o, cm_out);"
    return decls, call, f"{fn}_get_buffer_size(&cm_p, &cm_in, &cm_f, &cm_o)", [node.inputs[0]]


WRAPPER = """/* one 16x8 layer through CMSIS-NN, behind the harness' predict/scores entry points */
#include "arm_nnfunctions.h"
#include "cm.h"

{decls}
static int16_t cm_out[{out_size}];
static int8_t cm_scratch[{scratch}] __attribute__((aligned(8)));
static int32_t cm_scratch_size = -1;

int cm_predict(const int16_t *x)
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

void cm_scores(const int16_t *x, int16_t *scores)
{{
    (void)cm_predict(x);
    for (int i = 0; i < {out_size}; ++i) scores[i] = cm_out[i];
}}
"""


def interpreter_values(graph, row: np.ndarray) -> dict[str, np.ndarray]:
    """Every node's value on one input row."""
    names = [n for n in graph.order() if graph.op(n) not in ("input", "const")]
    for n in names:
        graph.set_output(f"layer_{n}", n)
    got = run_fixed(graph, row[None])
    values = {n: np.asarray(got[f"layer_{n}"][0]).reshape(-1) for n in names}
    values[graph.inputs()[0]] = row.reshape(-1)
    return values


def ours(data: bytes, row: np.ndarray, tmp: Path) -> tuple[int, np.ndarray]:
    """(instructions of one inference, outputs) of the model compiled by tinycc-ml for the Cortex-M4."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "layer.tflite"
    path.write_bytes(data)
    result = tinycc_ml.compile(path, target=TARGET, name="net", out_dir=tmp / "out")
    o = result.output
    run = run_on_target(get_backend(TARGET).simulator, [str(tmp / "out" / "net.c")], str(tmp / "out" / "net.h"),
                        "net", np.stack([row, row]).astype(np.int16), o.n_scores, o.input_ctype, o.score_ctype)
    return int(run.instructions[1]), np.asarray(run.scores[1]).reshape(-1)


def cmsis(graph, layer: str, values, tree: Path, opt: str, tmp: Path) -> tuple[int, np.ndarray]:
    decls, call, size, inputs = layer_call(graph, layer)
    x = np.concatenate([values[i] for i in inputs])
    out_size = graph.node(layer).type.size
    sources = sorted(str(p) for folder in SOURCE_FOLDERS for p in (tree / "Source" / folder).glob("*.c")
                     if not any(kind in p.name for kind in ("_f16", "_f32")))
    (tmp / "cm.c").write_text(WRAPPER.format(decls="\n".join(decls), out_size=out_size, scratch=SCRATCH_BYTES,
                                             size=size, call=call))
    (tmp / "cm.h").write_text(HEADER.replace("int8_t", "int16_t"))
    run = run_on_target(TARGET, [tmp / "cm.c", *sources], tmp / "cm.h", "cm", np.stack([x, x]).astype(np.int16),
                        out_size, "int16_t", "int16_t", extra_cflags=(f"-I{tree / 'Include'}", opt))
    return int(run.instructions[1]), np.asarray(run.scores[1]).reshape(-1)


def measure(name: str, build, seed: int, tree: Path, opt: str) -> dict:
    data = model(build, seed)
    graph = load_tflite_bytes(data)
    layer = next(n for n in graph.order() if graph.op(n) in ("conv2d", "depthwise_conv2d", "fully_connected",
                                                              "tensor_add"))
    x_type = graph.type(graph.inputs()[0])
    row = np.random.default_rng(seed).integers(-32768, 32768, size=x_type.size).astype(np.int64)
    values = interpreter_values(graph, row.reshape(x_type.shape))
    want = values[layer]
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-s16-") as tmp:
        count, got = ours(data, row, Path(tmp))
        if graph.op(layer) == "tensor_add":  # less the QUANTIZE making its second operand
            shape = tuple(x_type.shape[1:])
            count -= ours(model(quantize_only(shape), seed), row, Path(tmp) / "q")[0]
        cm_count, cm_got = cmsis(graph, layer, values, tree, opt, Path(tmp))
    return {"layer": name, "shape_from": "", "op": graph.op(layer), "ours": count, "cmsis_nn": cm_count,
            "ratio": round(count / cm_count, 3), "ours_equal": bool(np.array_equal(got, want)),
            "cmsis_nn_equal": bool(np.array_equal(cm_got, want)), "outputs": int(want.size)}


def load_tflite_bytes(data: bytes):
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-s16-") as tmp:
        path = Path(tmp) / "layer.tflite"
        path.write_bytes(data)
        return load_tflite(path)


FUNCTIONS = {"conv2d": "arm_convolve_wrapper_s16", "depthwise_conv2d": "arm_depthwise_conv_wrapper_s16",
             "fully_connected": "arm_fully_connected_s16", "tensor_add": "arm_elementwise_add_s16"}


def print_table(saved: dict) -> None:
    print(f"tinycc-ml's 16x8 kernels vs CMSIS-NN {saved['cmsis_nn']} ({saved['opt']}), Cortex-M4F (QEMU mps2-an386 "
          "-icount): instructions per layer")
    print(f"{'layer':<34}{'shape from':<16}{'CMSIS-NN function':<32}{'ours':>10}{'CMSIS-NN':>11}{'ratio':>7}"
          "  outputs equal (ours, CMSIS-NN)")
    for r in saved["layers"]:
        print(f"{r['layer']:<34}{r['shape_from']:<16}{FUNCTIONS[r['op']]:<32}{r['ours']:>10,}{r['cmsis_nn']:>11,}"
              f"{r['ratio']:>7.2f}  {'yes' if r['ours_equal'] else 'NO'}, {'yes' if r['cmsis_nn_equal'] else 'NO'}")
    ratios = [r["ratio"] for r in saved["layers"]]
    print(f"largest ratio {max(ratios):.2f}, geometric mean {float(np.exp(np.mean(np.log(ratios)))):.2f} "
          f"(target <= {TARGET_RATIO})")


def table(saved: dict, script: str) -> dict:
    """The docs' table (benchmarks/results_table.py's format): instructions per layer, ours and CMSIS-NN's."""
    rows = [[r["layer"], r["shape_from"], f"`{FUNCTIONS[r['op']]}`", f"{r['ours']:,}", f"{r['cmsis_nn']:,}",
             f"{r['ratio']:.2f}"] for r in saved["layers"]]
    return {"name": "cmsis_nn_s16", "script": script,
            "columns": ["layer", "shape from", "CMSIS-NN function", "ours", "CMSIS-NN", "ratio"],
            "rows": rows, "align": [None, None, None, "right", "right", "right"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opt", default="-O2", help="optimisation flag for CMSIS-NN and its wrapper (default -O2)")
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
    saved = {"cmsis_nn": how, "opt": args.opt, "target": TARGET, "layers": []}
    for seed, (name, build, source) in enumerate(LAYERS):
        row = measure(name, build, seed, tree, args.opt)
        row["shape_from"] = source
        saved["layers"].append(row)
        print(f"  {name:<34} ours {row['ours']:>10,} CMSIS-NN {row['cmsis_nn']:>10,} ratio {row['ratio']:.2f}",
              file=sys.stderr, flush=True)
    script = "benchmarks/cmsis_nn_s16.py" + (f" --opt {args.opt}" if args.opt != "-O2" else "")
    args.out.write_text(json.dumps({**table(saved, script), **saved}, indent=1) + "\n")
    print_table(saved)
    ok = all(r["ours_equal"] and r["cmsis_nn_equal"] for r in saved["layers"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
