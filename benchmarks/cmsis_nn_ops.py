"""tinycc-ml's Cortex-M4 kernels for the ops CMSIS-NN optimises besides convolutions against CMSIS-NN's function
for the same layer, instructions per layer on the Cortex-M4F (MPS2 AN386): MUL, MAXIMUM, MINIMUM, MAX_POOL_2D,
SOFTMAX, PAD, TRANSPOSE, BATCH_MATMUL, TRANSPOSE_CONV, SVDF, UNIDIRECTIONAL_SEQUENCE_LSTM (tinycc_ml/arm/
m4_elementwise.py, m4_pool.py, m4_softmax.py, m4_pad.py, m4_transpose.py, m4_batch_matmul.py, m4_transpose_conv.py,
m4_svdf.py, m4_lstm.py).

    python benchmarks/cmsis_nn_ops.py [--only mul,max_pool] [--cmsis-nn PATH]

Each case is a one-operator int8 .tflite file (its shapes those of a layer of a model under tests/data where one
has the op, named so, else generated). tinycc-ml's side: the file compiled for the Cortex-M4, the layer's
kernel function (``net_m4_*``) and the helpers it calls counted in the per-function instruction profile of one
inference (unicorn's Cortex-M4, whose totals equal QEMU's -icount): all but the entry point and ``run``'s own
instructions (its argmax over the outputs). CMSIS-NN's side, as benchmarks/cmsis_nn_layers.py builds its
layers (whose wrapper and helpers this script imports): the function called on the same input, constants and
quantisation (multiplier and shift as TFLite Micro's Prepare computes them), its sources from the git mirror,
same compiler and flags (-O2), run in QEMU -icount; the instructions of the wrapper's call less those of the
same wrapper calling nothing (or only the setup a case needs: BATCH_MATMUL's operands in the layout the function
takes, SVDF's state reset to the first call's, so each call computes the same). A stateful layer (SVDF): ours
counts its run too (the copy of the next state into the state's array, and the argmax), its first call's outputs
compared. Both outputs checked equal byte for byte (and to tinycc-ml's interpreter) on
a random int8 input. Results: benchmarks/results/cmsis_nn_ops.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cmsis_nn_layers import CMSIS_FILES, HEADER, MIRROR, SCRATCH_BYTES, WRAPPER, c_array, dims  # noqa: E402
from m4_cycles import cmsis_tree  # noqa: E402
from network_m4 import build_network, run_firmware  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.ops.single_op import pool_model  # noqa: E402
from tests.tflite_builder import ACTIVATIONS, PADDINGS  # noqa: E402
from tests.tflite_models import TfliteBuilder, options, schema  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.ir.ops.network import lstm as lstm_op  # noqa: E402
from tinycc_ml.ir.ops.network.mul import multiplier  # noqa: E402
from tinycc_ml.ir.ops.network.svdf import output_multiplier, state_multiplier  # noqa: E402
from tinycc_ml.ir.ops.tflite_arith import activation_range, quantize_multiplier, softmax_parameters  # noqa: E402
from tinycc_ml.ir.ops.windows import pad_before  # noqa: E402
from tinycc_ml.runtime.profile import function_profile  # noqa: E402
from tinycc_ml.runtime.simulate import run_on_target  # noqa: E402
from tinycc_ml.target import layer_quantisation  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "cmsis_nn_ops.json"
OPS = schema.BuiltinOperator
OPTIONS = schema.BuiltinOptions
TARGET = "cortex-m4"
FILES = (*CMSIS_FILES, "Source/PadFunctions", "Source/TransposeFunctions", "Source/SVDFunctions",
         "Source/LSTMFunctions", "Source/ActivationFunctions")
# the CMSIS-NN source files each function needs besides NNSupportFunctions
SOURCES = {"arm_elementwise_mul_s8": ["BasicMathFunctions/arm_elementwise_mul_s8.c"],
           "arm_maximum_s8": ["BasicMathFunctions/arm_maximum_s8.c"],
           "arm_minimum_s8": ["BasicMathFunctions/arm_minimum_s8.c"],
           "arm_max_pool_s8": ["PoolingFunctions/arm_max_pool_s8.c"],
           "arm_pad_s8": ["PadFunctions/arm_pad_s8.c"],
           "arm_transpose_s8": ["TransposeFunctions/arm_transpose_s8.c"],
           "arm_softmax_s8": ["SoftmaxFunctions/arm_softmax_s8.c", "SoftmaxFunctions/arm_nn_softmax_common_s8.c"],
           "arm_batch_matmul_s8": ["FullyConnectedFunctions/arm_batch_matmul_s8.c"],
           "arm_svdf_s8": ["SVDFunctions/arm_svdf_s8.c"],
           "arm_lstm_unidirectional_s8": ["LSTMFunctions/arm_lstm_unidirectional_s8.c",
                                          "ActivationFunctions/arm_nn_activation_s16.c",
                                          "BasicMathFunctions/arm_elementwise_mul_s16.c",
                                          "BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
                                          "BasicMathFunctions/arm_elementwise_mul_s16_s8.c",
                                          "NNSupportFunctions/arm_nntables.c"],
           "arm_transpose_conv_s8": ["ConvolutionFunctions/arm_transpose_conv_s8.c",
                                     "ConvolutionFunctions/arm_transpose_conv_get_buffer_sizes_s8.c",
                                     "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c"]}
TARGET_RATIO = 0.6


@dataclass
class Case:
    op: str  # the --only key
    label: str  # the layer's shapes (and the model it comes from)
    model: bytes
    in_shape: tuple[int, ...]
    function: str  # CMSIS-NN's
    rhs: str = "const"  # BATCH_MATMUL: "const", or "x" (the input itself: both operands computed)


def _q(rng) -> tuple[float, int]:
    return float(rng.uniform(0.01, 0.1)), int(rng.integers(-100, 100))


def binary_case(op: str, code: int, shape, b_shape, label: str, seed: int, activation: str = "none") -> Case:
    """x -> OP(x, y) -> z, y a random int8 constant (MUL: three quantisations; MAXIMUM, MINIMUM: one)."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    qa = _q(rng)
    qb, qo = (_q(rng), (float(rng.uniform(0.001, 0.01)), int(rng.integers(-100, 100)))) if op == "mul" else (qa, qa)
    x = b.tensor(shape, "int8", scale=qa[0], zero_point=qa[1], name="x")
    y = b.tensor(b_shape, "int8", scale=qb[0], zero_point=qb[1], data=rng.integers(-128, 128, size=b_shape), name="y")
    z = b.tensor(shape, "int8", scale=qo[0], zero_point=qo[1], name="z")
    opts = (OPTIONS.MulOptions, options("MulOptions", fusedActivationFunction=ACTIVATIONS[activation])) \
        if op == "mul" else ()
    b.op(code, [x, y], [z], *opts)
    function = {"mul": "arm_elementwise_mul_s8", "maximum": "arm_maximum_s8", "minimum": "arm_minimum_s8"}[op]
    return Case(op, label, b.finish([x], [z]), tuple(shape), function)


def max_pool_case(shape, window, stride, padding: str, label: str, seed: int, activation: str = "none") -> Case:
    model, _ = pool_model(OPS.MAX_POOL_2D, shape, window, stride, padding, activation, _q(np.random.default_rng(seed)))
    return Case("max_pool", label, model, tuple(shape), "arm_max_pool_s8")


def softmax_case(shape, label: str, seed: int, beta: float = 1.0) -> Case:
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    q = _q(rng)
    x = b.tensor(shape, "int8", scale=q[0] * 2, zero_point=q[1], name="x")
    y = b.tensor(shape, "int8", scale=1 / 256, zero_point=-128, name="y")
    b.op(OPS.SOFTMAX, [x], [y], OPTIONS.SoftmaxOptions, options("SoftmaxOptions", beta=beta))
    return Case("softmax", label, b.finish([x], [y]), tuple(shape), "arm_softmax_s8")


def pad_case(shape, pads, label: str, seed: int) -> Case:
    """x -> PAD -> y on 4-D shapes (arm_pad_s8 pads n, h, w, c)."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    q = _q(rng)
    x = b.tensor(shape, "int8", scale=q[0], zero_point=q[1], name="x")
    paddings = b.tensor((len(shape), 2), "int32", scale=None, data=np.asarray(pads, np.int32), name="paddings")
    y = b.tensor(tuple(n + p0 + p1 for n, (p0, p1) in zip(shape, pads)), "int8", scale=q[0], zero_point=q[1],
                 name="y")
    b.op(OPS.PAD, [x, paddings], [y], OPTIONS.PadOptions, options("PadOptions"))
    return Case("pad", label, b.finish([x], [y]), tuple(shape), "arm_pad_s8")


def transpose_case(shape, perm, label: str, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    q = _q(rng)
    x = b.tensor(shape, "int8", scale=q[0], zero_point=q[1], name="x")
    p = b.tensor((len(perm),), "int32", scale=None, data=np.asarray(perm, np.int32), name="perm")
    y = b.tensor(tuple(shape[k] for k in perm), "int8", scale=q[0], zero_point=q[1], name="y")
    b.op(OPS.TRANSPOSE, [x, p], [y], OPTIONS.TransposeOptions, options("TransposeOptions"))
    return Case("transpose", label, b.finish([x], [y]), tuple(shape), "arm_transpose_s8")


def batch_matmul_case(x_shape, y_shape, out_shape, adj_x: bool, adj_y: bool, rhs: str, label: str, seed: int) -> Case:
    """x -> BATCH_MATMUL(x, y) -> z: y a random int8 constant, or (``rhs`` "x") x itself through a RESHAPE."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    qx, qy = _q(rng), (float(rng.uniform(0.01, 0.1)), 0)
    k = x_shape[-2] if adj_x else x_shape[-1]
    qo = (qx[0] * (qx[0] if rhs == "x" else qy[0]) * 60 * k ** 0.5, int(rng.integers(-100, 100)))
    x = b.tensor(x_shape, "int8", scale=qx[0], zero_point=qx[1], name="x")
    if rhs == "x":
        y = b.tensor(y_shape, "int8", scale=qx[0], zero_point=qx[1], name="y")
        b.op(OPS.RESHAPE, [x], [y])
    else:
        y = b.tensor(y_shape, "int8", scale=qy[0], zero_point=qy[1], data=rng.integers(-127, 128, size=y_shape),
                     name="y")
    z = b.tensor(out_shape, "int8", scale=qo[0], zero_point=qo[1], name="z")
    b.op(OPS.BATCH_MATMUL, [x, y], [z], OPTIONS.BatchMatMulOptions,
         options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y))
    return Case("batch_matmul", label, b.finish([x], [z]), tuple(x_shape), "arm_batch_matmul_s8", rhs)


def transpose_conv_case(in_shape, out_c, kernel, stride, padding: str, label: str, seed: int) -> Case:
    """x -> TRANSPOSE_CONV -> y: per-channel int8 filters (TFLite's symmetric range), an int32 bias."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    _, h, w, c = in_shape
    size = [n * s if padding == "same" else (n - 1) * s + k for n, k, s in zip((h, w), kernel, stride)]
    out_shape = (1, *size, out_c)
    q = _q(rng)
    x = b.tensor(in_shape, "int8", scale=q[0], zero_point=q[1], name="x")
    shape = b.tensor((4,), "int32", scale=None, data=np.asarray(out_shape, dtype=np.int32), name="output_shape")
    f = b.filters(rng, (out_c, *kernel, c), 0)
    bias = b.bias(rng, x, f, out_c)
    taps = -(-kernel[0] // stride[0]) * -(-kernel[1] // stride[1]) * c
    y = b.tensor(out_shape, "int8", scale=q[0] * 0.02 * taps ** 0.5, zero_point=int(rng.integers(-100, 100)),
                 name="y")
    b.op(OPS.TRANSPOSE_CONV, [shape, f, x, bias], [y], OPTIONS.TransposeConvOptions,
         options("TransposeConvOptions", padding=PADDINGS[padding], strideW=stride[1], strideH=stride[0]))
    return Case("transpose_conv", label, b.finish([x], [y]), tuple(in_shape), "arm_transpose_conv_s8")


def svdf_case(features: int, units: int, rank: int, memory: int, label: str, seed: int) -> Case:
    """x -> SVDF -> y with an int8 activation state (zero point 0) and int8 time weights (arm_svdf_s8's form),
    scales keeping the state and the output off their clamps."""
    rng = np.random.default_rng(seed)
    filters = units * rank
    b = TfliteBuilder()
    sx, sw, st, zx = 0.05, 0.01, 0.05 * 0.01 * 75 * 75 * features ** 0.5 / 60, int(rng.integers(-100, 100))
    x = b.tensor((1, features), "int8", scale=sx, zero_point=zx, name="x")
    w = b.tensor((filters, features), "int8", scale=sw, zero_point=0, data=rng.integers(-127, 128, (filters, features)))
    t = b.tensor((filters, memory), "int8", scale=0.01, zero_point=0, data=rng.integers(-127, 128, (filters, memory)))
    bias = b.tensor((units,), "int32", scale=float(np.float32(st) * np.float32(0.01)), zero_point=0,
                    data=rng.integers(-2000, 2000, units))
    s = b.tensor((1, filters * memory), "int8", scale=st, zero_point=0, name="state")
    y = b.tensor((1, units), "int8", scale=st * 0.01 * 75 * 60 * (rank * memory) ** 0.5 / 60,
                 zero_point=int(rng.integers(-50, 50)), name="y")
    b.sub.tensors[s].isVariable = True
    b.op(OPS.SVDF, [x, w, t, bias, s], [y], OPTIONS.SVDFOptions, options("SVDFOptions", rank=rank))
    return Case("svdf", label, b.finish([x], [y]), (1, features), "arm_svdf_s8")


def lstm_case(steps: int, features: int, units: int, label: str, seed: int) -> Case:
    """UNIDIRECTIONAL_SEQUENCE_LSTM, int8 (tests/ops/test_lstm.py's builder): one call the whole sequence."""
    from tests.ops.test_lstm import lstm

    return Case("lstm", label, lstm(steps=steps, features=features, units=units, seed=seed, cell_clip=0.5),
                (1, steps, features), "arm_lstm_unidirectional_s8")


def cases() -> list[Case]:
    return [
        binary_case("mul", OPS.MUL, (1, 6, 8), (1, 6, 8), "1x6x8 (attention_int8 mul_2)", 1),
        binary_case("mul", OPS.MUL, (1, 16, 16, 8), (1, 16, 16, 8), "1x16x16x8", 2),
        binary_case("mul", OPS.MUL, (1, 1001), (1, 1001), "1x1001, relu", 3, "relu"),
        binary_case("maximum", OPS.MAXIMUM, (40,), (), "40 by a scalar (audio_preprocessor_int8)", 4),
        binary_case("maximum", OPS.MAXIMUM, (1, 16, 16, 8), (1, 16, 16, 8), "1x16x16x8", 5),
        binary_case("minimum", OPS.MINIMUM, (40,), (), "40 by a scalar (audio_preprocessor_int8)", 6),
        binary_case("minimum", OPS.MINIMUM, (1, 1001), (1, 1001), "1x1001", 7),
        max_pool_case((1, 32, 32, 8), (2, 2), (2, 2), "valid", "32x32x8, 2x2 /2", 8),
        max_pool_case((1, 24, 24, 16), (3, 3), (2, 2), "same", "24x24x16, 3x3 /2 same, relu6", 9, "relu6"),
        max_pool_case((1, 25, 5, 64), (2, 1), (2, 1), "valid", "25x5x64, 2x1 /2x1", 10),
        max_pool_case((1, 15, 15, 3), (3, 3), (1, 1), "same", "15x15x3, 3x3 /1 same", 11),
        pad_case((1, 1, 48, 6), ((0, 0), (0, 0), (8, 0), (0, 0)), "1x48x6 -> 1x56x6 (tcn_int8)", 16),
        pad_case((1, 1, 32, 8), ((0, 0), (0, 0), (1, 1), (0, 0)), "1x32x8 -> 1x34x8 (unet_1d_int8)", 17),
        pad_case((1, 24, 24, 16), ((0, 0), (1, 1), (1, 1), (0, 0)), "24x24x16 -> 26x26x16", 18),
        pad_case((1, 10, 10, 3), ((0, 0), (2, 2), (2, 2), (0, 1)), "10x10x3 -> 14x14x4", 19),
        transpose_case((1, 16, 12, 8), (0, 2, 1, 3), "16x12x8, (0, 2, 1, 3)", 20),
        transpose_case((1, 1, 49, 10), (0, 1, 3, 2), "49x10, (0, 1, 3, 2)", 21),
        transpose_case((1, 8, 8, 16), (0, 3, 1, 2), "8x8x16, (0, 3, 1, 2) (NHWC to NCHW)", 22),
        transpose_case((2, 6, 4, 8), (3, 0, 2, 1), "2x6x4x8, (3, 0, 2, 1)", 23),
        softmax_case((1, 2), "1x2 (vww_tiny_int8)", 12),
        softmax_case((1, 6, 6), "1x6x6 (attention_int8)", 13),
        softmax_case((1, 12), "1x12 (a keyword model's classes)", 14),
        softmax_case((16, 100), "16x100", 15),
        batch_matmul_case((1, 6, 8), (1, 6, 8), (1, 6, 6), False, True, "x", "6x8 by (6x8)^T (attention_int8 Q K^T)",
                          24),
        batch_matmul_case((1, 6, 6), (1, 6, 6), (1, 6, 6), False, False, "x", "6x6 by 6x6, both computed", 25),
        batch_matmul_case((4, 16, 16), (4, 16, 16), (4, 16, 16), False, True, "x", "4 x 16x16 by (16x16)^T (heads)",
                          26),
        batch_matmul_case((1, 32, 64), (64, 32), (1, 32, 32), False, False, "const", "32x64 by a constant 64x32", 27),
        batch_matmul_case((2, 12, 20), (1, 20, 10), (2, 12, 10), False, False, "const",
                          "2 x 12x20 by a constant 20x10", 28),
        transpose_conv_case((1, 4, 4, 8), 4, (3, 3), (2, 2), "same", "4x4x8 -> 8x8x4, 3x3 /2 (conv_autoencoder)",
                            29),
        transpose_conv_case((1, 8, 8, 4), 1, (3, 3), (2, 2), "same", "8x8x4 -> 16x16x1, 3x3 /2 (conv_autoencoder)",
                            30),
        transpose_conv_case((1, 1, 16, 6), 4, (1, 3), (1, 2), "same", "1x16x6 -> 1x32x4, 1x3 /2 (unet_1d_int8)", 31),
        transpose_conv_case((1, 8, 8, 16), 16, (4, 4), (2, 2), "same", "8x8x16 -> 16x16x16, 4x4 /2", 32),
        transpose_conv_case((1, 12, 12, 8), 8, (2, 2), (2, 2), "valid", "12x12x8 -> 24x24x8, 2x2 /2 valid", 33),
        svdf_case(20, 12, 1, 2, "20 in, 12 filters x 2 (CMSIS-NN's svdf_int8)", 34),
        svdf_case(40, 13, 2, 3, "40 in, 26 filters x 3, rank 2 (svdf_int8_2)", 35),
        svdf_case(40, 64, 1, 8, "40 in, 64 filters x 8, rank 1", 36),
        svdf_case(64, 64, 2, 16, "64 in, 128 filters x 16, rank 2", 37),
        lstm_case(5, 6, 4, "5 steps, 6 -> 4", 38),
        lstm_case(10, 10, 32, "10 steps, 10 -> 32", 39),
        lstm_case(4, 40, 64, "4 steps, 40 -> 64", 40),
    ]


def cmsis_call(graph, case: Case) -> tuple[list[str], str, str]:
    """(declarations, the call writing cm_out from the input x, the scratch-size expression) of the case's layer
    in CMSIS-NN."""
    if case.op == "svdf":
        return svdf_call(graph, case)
    if case.op == "lstm":
        return lstm_call(graph, case)
    node = next(graph.node(n) for n in graph.order() if graph.op(n) not in ("input", "const", "reshape"))
    x, out = graph.type(node.inputs[0]), node.type
    if case.op == "mul":
        y = graph.type(node.inputs[1])
        m, s = quantize_multiplier(multiplier(x.dtype, y.dtype, out.dtype))
        lo, hi = activation_range(node.attrs.get("activation", "none"), out.dtype.qscales[0], out.dtype.zero_point)
        decls = [c_array("int8_t", "cm_y", graph.node(node.inputs[1]).attrs["value"])]
        call = (f"arm_elementwise_mul_s8(x, cm_y, {-x.dtype.zero_point}, {-y.dtype.zero_point}, cm_out, "
                f"{out.dtype.zero_point}, {m}, {s}, {lo}, {hi}, {out.size});")
        return decls, call, "0"
    if case.op in ("maximum", "minimum"):
        y = graph.type(node.inputs[1])

        def nhwc(shape):
            shape = (1,) * (4 - len(shape)) + tuple(shape)
            return dims(*shape)
        decls = [c_array("int8_t", "cm_y", graph.node(node.inputs[1]).attrs["value"]),
                 f"static const cmsis_nn_dims cm_a = {nhwc(x.shape)}, cm_b = {nhwc(y.shape)}, "
                 f"cm_o = {nhwc(out.shape)};"]
        return decls, f"{case.function}(&ctx, x, &cm_a, cm_y, &cm_b, cm_out, &cm_o);", "0"
    if case.op == "max_pool":
        fh, fw = (int(k) for k in node.attrs["filter"])
        stride = [int(s) for s in node.attrs["stride"]]
        pads = [pad_before(x.shape[1 + i], (fh, fw)[i], stride[i], 1, out.shape[1 + i]) for i in range(2)]
        lo, hi = activation_range(node.attrs.get("activation", "none"), out.dtype.qscales[0], out.dtype.zero_point)
        decls = [f"static const cmsis_nn_pool_params cm_p = {{{{{stride[1]}, {stride[0]}}}, {{{pads[1]}, {pads[0]}}}, "
                 f"{{{lo}, {hi}}}}};",
                 f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_f = {dims(1, fh, fw, 1)}, "
                 f"cm_o = {dims(*out.shape)};"]
        return decls, "arm_max_pool_s8(&ctx, &cm_p, &cm_in, x, &cm_f, &cm_o, cm_out);", "0"
    if case.op == "softmax":
        m, left, diff_min = softmax_parameters(float(node.attrs["beta"]), x.dtype.qscales[0])
        depth = x.shape[-1]
        return [], f"arm_softmax_s8(x, {x.size // depth}, {depth}, {m}, {left}, {diff_min}, cm_out);", "0"
    if case.op == "pad":
        pads = [int(p) for p in node.attrs["pads"]]
        decls = [f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_pre = {dims(*pads[0::2])}, "
                 f"cm_post = {dims(*pads[1::2])};"]
        return decls, f"arm_pad_s8(x, cm_out, {x.dtype.zero_point}, &cm_in, &cm_pre, &cm_post);", "0"
    if case.op == "transpose":
        perm = [int(p) for p in node.attrs["perm"]]
        decls = [f"static const uint32_t cm_perm[4] = {{{', '.join(map(str, perm))}}};",
                 f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_o = {dims(*out.shape)};",
                 "static const cmsis_nn_transpose_params cm_p = {4, cm_perm};"]
        return decls, "arm_transpose_s8(x, cm_out, &cm_in, &cm_o, &cm_p);", "0"
    if case.op == "batch_matmul":
        return batch_matmul_call(graph, node, case)
    if case.op == "transpose_conv":
        w_name, b_name = node.inputs[1], node.inputs[2]
        out_c, kh, kw, in_c = graph.type(w_name).shape
        q = layer_quantisation(graph, node, out_c)
        (sh, sw), (ph, pw) = node.attrs["stride"], node.attrs["pad"]
        decls = [c_array("int8_t", "cm_w", graph.node(w_name).attrs["value"]),
                 c_array("int32_t", "cm_b", graph.node(b_name).attrs["value"]),
                 c_array("int32_t", "cm_m", q.multipliers), c_array("int32_t", "cm_s", q.shifts),
                 f"static const cmsis_nn_transpose_conv_params cm_p = {{{-q.input_zero_point}, {q.output_zero_point}, "
                 f"{{{sw}, {sh}}}, {{{pw}, {ph}}}, {{0, 0}}, {{1, 1}}, {{{q.lo}, {q.hi}}}}};",
                 "static const cmsis_nn_per_channel_quant_params cm_q = {(int32_t *)cm_m, (int32_t *)cm_s};",
                 f"static const cmsis_nn_dims cm_in = {dims(*x.shape)}, cm_f = {dims(out_c, kh, kw, in_c)}, "
                 f"cm_bd = {dims(1, 1, 1, out_c)}, cm_o = {dims(*out.shape)};"]
        call = "arm_transpose_conv_s8(&ctx, &ctx, &cm_p, &cm_q, &cm_in, x, &cm_f, cm_w, &cm_bd, cm_b, &cm_o, cm_out);"
        return decls, call, "arm_transpose_conv_s8_get_buffer_size(&cm_p, &cm_in, &cm_f, &cm_o)"
    raise ValueError(f"no CMSIS-NN call for {case.op}")


def svdf_call(graph, case: Case) -> tuple[list[str], str, str]:
    """arm_svdf_s8 on its own int8 state (static, zero before the first call: the model's), the two
    requantisations as TFLite Micro's Prepare computes them."""
    state_node = next(graph.node(n) for n in graph.order() if graph.op(n) == "svdf_state")
    out_node = next(graph.node(n) for n in graph.order() if graph.op(n) == "svdf_output")
    x, st, w = (graph.type(n) for n in state_node.inputs)
    t, out = graph.type(out_node.inputs[1]), out_node.type.dtype
    filters, features = w.shape
    memory, rank = t.shape[1], int(out_node.attrs["rank"])
    units = filters // rank
    m_in, s_in = state_multiplier(x.dtype, w.dtype, st.dtype)
    m_out, s_out = output_multiplier(st.dtype, t.dtype, out)
    decls = [c_array("int8_t", "cm_wf", graph.node(state_node.inputs[2]).attrs["value"]),
             c_array("int8_t", "cm_wt", graph.node(out_node.inputs[1]).attrs["value"]),
             c_array("int32_t", "cm_b", graph.node(out_node.inputs[2]).attrs["value"]),
             f"static int8_t cm_state[{filters * memory}];",
             f"static int32_t cm_ba[{filters}], cm_bb[{units}];",
             f"static const cmsis_nn_svdf_params cm_p = {{{rank}, {x.dtype.zero_point}, {out.zero_point}, "
             "{-128, 127}, {-128, 127}};",
             f"static const cmsis_nn_per_tensor_quant_params cm_qi = {{{m_in}, {s_in}}}, "
             f"cm_qo = {{{m_out}, {s_out}}};",
             f"static const cmsis_nn_dims cm_in = {dims(1, features, 1, 1)}, "
             f"cm_sd = {dims(1, filters * memory, 1, 1)}, "
             f"cm_wfd = {dims(filters, features, 1, 1)}, cm_wtd = {dims(filters, memory, 1, 1)}, "
             f"cm_bd = {dims(units, 1, 1, 1)}, cm_o = {dims(1, units, 1, 1)};"]
    # the harness may call the wrapper more than once a row: each call from the first call's state (zeros), the
    # setup's instructions measured apart and taken off
    setup = f"for (int i = 0; i < {filters * memory}; ++i) cm_state[i] = 0;"
    call = (setup + " { cmsis_nn_context ca = {cm_ba, sizeof(cm_ba)}, cb = {cm_bb, sizeof(cm_bb)}; "
            "arm_svdf_s8(&ctx, &ca, &cb, &cm_p, &cm_qi, &cm_qo, &cm_in, x, &cm_sd, cm_state, &cm_wfd, cm_wf, "
            "&cm_wtd, cm_wt, &cm_bd, cm_b, &cm_o, cm_out); }")
    return decls, call, "0", setup


def lstm_call(graph, case: Case) -> tuple[list[str], str, str, str]:
    """arm_lstm_unidirectional_s8 from the model's first states (hidden at its zero point, cell 0, set before each
    call), its parameters as TFLite Micro's CMSIS-NN kernel computes them: per gate the two requantisations to
    2^-12 and the effective biases (bias + the weights' sums x -zero point)."""
    cell = next(graph.node(n) for n in graph.order() if graph.op(n) == "lstm_cell")
    hidden = next(graph.node(n) for n in graph.order() if graph.op(n) == "lstm_hidden")
    xt, ht, ct = (graph.type(n).dtype for n in cell.inputs[:3])
    steps, features = case.in_shape[1], case.in_shape[2]
    units = graph.type(cell.inputs[1]).size
    value = lambda n: np.asarray(graph.node(n).attrs["value"], np.int64)  # noqa: E731
    gates = {"forget": (cell.inputs[3], cell.inputs[6], cell.inputs[9], "ARM_SIGMOID"),
             "input": (cell.inputs[4], cell.inputs[7], cell.inputs[10], "ARM_SIGMOID"),
             "cell": (cell.inputs[5], cell.inputs[8], cell.inputs[11], "ARM_TANH"),
             "output": (hidden.inputs[3], hidden.inputs[4], hidden.inputs[5], "ARM_SIGMOID")}
    decls, fields = [], []
    for g, (w, r, b, act) in gates.items():
        W, R, B = value(w).reshape(units, features), value(r).reshape(units, units), value(b).reshape(units)
        decls += [c_array("int8_t", f"cm_{g}_w", W), c_array("int8_t", f"cm_{g}_r", R),
                  c_array("int32_t", f"cm_{g}_b", B),
                  c_array("int32_t", f"cm_{g}_eb", B - xt.zero_point * W.sum(axis=1)),
                  c_array("int32_t", f"cm_{g}_ehb", -ht.zero_point * R.sum(axis=1))]
        (mi, si), (mh, sh) = (lstm_op.fc_multiplier(xt, graph.type(w).dtype),
                              lstm_op.fc_multiplier(ht, graph.type(r).dtype))
        fields.append(f"{{{mi}, {si}, cm_{g}_w, cm_{g}_eb, {mh}, {sh}, cm_{g}_r, cm_{g}_ehb, cm_{g}_b, {act}}}")
    scale, unit = float(ct.qscales[0]), lstm_op.UNIT_SCALE
    (mf, sf), (mi, si) = lstm_op.mul_multiplier(unit, scale, scale), lstm_op.mul_multiplier(unit, unit, scale)
    mo, so = lstm_op.mul_multiplier(unit, unit, float(ht.qscales[0]))
    clip = float(cell.attrs["cell_clip"])
    q_clip = lstm_op.quantised_clip(clip, ct) if clip > 0 else 32767
    decls += [f"static int16_t cm_t1[{units}], cm_t2[{units}], cm_cell[{units}];",
              f"static int8_t cm_hidden[{units}];",
              f"static const cmsis_nn_lstm_params cm_p = {{0, 1, {steps}, {features}, {units}, {-xt.zero_point}, "
              f"{mf}, {sf}, {mi}, {si}, {q_clip}, {lstm_op.cell_power(ct)}, {mo}, {so}, {ht.zero_point}, "
              f"{', '.join(fields)}}};"]
    setup = (f"for (int i = 0; i < {units}; ++i) {{ cm_cell[i] = 0; cm_hidden[i] = {ht.zero_point}; }}")
    call = (setup + " { cmsis_nn_lstm_context cb = {cm_t1, cm_t2, cm_cell, cm_hidden}; "
            "(void)ctx; arm_lstm_unidirectional_s8(x, cm_out, &cm_p, &cb); }")
    return decls, call, "0", setup


def batch_matmul_call(graph, node, case: Case) -> tuple[list[str], str, str, str]:
    """arm_batch_matmul_s8 reads the lhs as rows of k and the rhs transposed (rows of k per output column), as
    TFLite Micro's CMSIS-NN kernel hands them over (transposing in its own buffers): here those buffers filled
    before the call (the setup, its instructions measured apart and taken off), a constant rhs transposed at
    compile time."""
    lhs, rhs = node.inputs
    tl, tr, out = graph.type(lhs), graph.type(rhs), node.type
    adj_x, adj_y = bool(node.attrs["adj_x"]), bool(node.attrs["adj_y"])
    m, n = out.shape[-2:]
    k = tl.shape[-2] if adj_x else tl.shape[-1]
    batch = (1,) * (2 - len(out.shape[:-2])) + tuple(out.shape[:-2])

    def nh(t):
        return (1,) * (2 - (t.rank - 2)) + tuple(t.shape[:-2])
    ln, lh = nh(tl)
    rn, rh = nh(tr)
    decls, setup = [], []
    lhs_ptr = "x"
    if adj_x:  # each batch's (k, m) into rows of k
        decls.append(f"static int8_t cm_lhs[{tl.size}];")
        setup.append(f"for (int b = 0; b < {tl.size // (m * k)}; ++b) for (int i = 0; i < {m}; ++i) "
                     f"for (int j = 0; j < {k}; ++j) cm_lhs[b * {m * k} + i * {k} + j] = x[b * {m * k} + j * {m} + i];")
        lhs_ptr = "cm_lhs"
    if case.rhs == "x":
        rhs_ptr = "x"
        if not adj_y:
            decls.append(f"static int8_t cm_rhs[{tr.size}];")
            setup.append(f"for (int b = 0; b < {tr.size // (n * k)}; ++b) for (int j = 0; j < {n}; ++j) "
                         f"for (int i = 0; i < {k}; ++i) cm_rhs[b * {n * k} + j * {k} + i] = "
                         f"x[b * {n * k} + i * {n} + j];")
            rhs_ptr = "cm_rhs"
    else:
        value = np.asarray(graph.node(rhs).attrs["value"]).reshape(-1, *tr.shape[-2:])
        decls.append(c_array("int8_t", "cm_rhs", value if adj_y else np.swapaxes(value, -1, -2)))
        rhs_ptr = "cm_rhs"
    mult, shift = quantize_multiplier(tl.dtype.qscales[0] * tr.dtype.qscales[0] / out.dtype.qscales[0])
    decls += [f"static const cmsis_nn_dims cm_l = {dims(ln, lh, m, k)}, cm_r = {dims(rn, rh, n, k)}, "
              f"cm_o = {dims(*batch, m, n)};",
              f"static const cmsis_nn_bmm_params cm_p = {{0, 0, {{{-tl.dtype.zero_point}, {-tr.dtype.zero_point}, "
              f"{out.dtype.zero_point}, {{-128, 127}}}}}};",
              f"static const cmsis_nn_per_tensor_quant_params cm_q = {{{mult}, {shift}}};"]
    call = (f"arm_batch_matmul_s8(&ctx, &cm_p, &cm_q, &cm_l, {lhs_ptr}, &cm_r, {rhs_ptr}, &cm_o, cm_out);")
    return decls, " ".join([*setup, call]), "0", " ".join(setup) or "(void)x;"


def run_cmsis(tree: Path, decls: list[str], call: str, size: str, x: np.ndarray, out_size: int, sources):
    """(outputs, instructions of the call) of one CMSIS-NN wrapper in QEMU."""
    text = WRAPPER.format(decls="\n".join(decls), out_size=out_size, scratch=SCRATCH_BYTES, size=size, call=call)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-cmsis-op-") as tmp:
        (Path(tmp) / "cm.c").write_text(text)
        (Path(tmp) / "cm.h").write_text(HEADER)
        run = run_on_target(TARGET, [Path(tmp) / "cm.c", *sources], Path(tmp) / "cm.h", "cm",
                            np.stack([x, x]).astype(np.int8), out_size + 2, "int8_t", "int16_t",
                            extra_cflags=(f"-I{tree / 'Include'}", "-O2"))
    return run.scores[1][:out_size].astype(np.int64), int(run.instructions[1])


def measure(case: Case, tree: Path, work: Path) -> dict:
    path = work / f"{case.op}.tflite"
    path.write_bytes(case.model)
    model = tinycc_ml.load_model(path)
    graph = model.graph
    x = np.random.default_rng(len(case.model)).integers(-128, 128, size=int(np.prod(case.in_shape))).astype(np.int8)
    # the first call's outputs (a stateful layer's from its first state: what the CMSIS-NN wrapper computes)
    want = np.asarray(model.run_quantised(x.reshape(1, *case.in_shape))).reshape(-1).astype(np.int64)
    # tinycc-ml: the kernel's functions in the per-function profile; the whole inference's bytes in QEMU
    build = build_network(path, TARGET, work / "out")
    backend = get_backend(TARGET)
    header = Path(build.header)
    stateful = f"{build.prefix}_step(" in header.read_text()
    if stateful:  # the profiler calls predict (one step of the same run); its harness would call step alone
        header = work / "profiled.h"
        header.write_text("\n".join(line for line in Path(build.header).read_text().splitlines()
                                    if f"{build.prefix}_step(" not in line))
    profile = function_profile(backend.simulator, build.sources, str(header), build.prefix, x[None],
                               build.n_scores, "int8_t", "int8_t", chip=backend.chip)
    # the layer's functions and the helpers they call (the shared C's, e.g. tfl_high_mul): all but the entry point
    # and run (its argmax over the outputs); a stateful layer's run counted too (its copy of the next state into
    # the state's array, with the argmax: more than the layer's own work)
    entry = {f"{build.prefix}_{name}" for name in ("predict", "scores", *(() if stateful else ("run",)))}
    kernels = {k: v for k, v in profile.items() if k.startswith(f"{build.prefix}_") and k not in entry and v}
    inlined = f"{build.prefix}_m4_" in "".join(Path(s).read_text() for s in build.sources)  # the LSTM's, in run
    if not any(k.startswith(f"{build.prefix}_m4_") for k in kernels) and not (stateful and inlined):
        raise RuntimeError(f"{case.op} {case.label}: no Cortex-M4 kernel took the layer ({sorted(kernels)})")
    ours = run_firmware(build, np.stack([x, x])).scores[1 - stateful].astype(np.int64)
    # CMSIS-NN: the call less the wrapper's own instructions
    support = sorted(str(p) for p in (tree / "Source" / "NNSupportFunctions").glob("*_s8*.c"))
    sources = [str(tree / "Source" / s) for s in SOURCES[case.function]] + support
    decls, call, size, *setup = cmsis_call(graph, case)
    theirs, count = run_cmsis(tree, decls, call, size, x, want.size, sources)
    # the wrapper alone (with any setup filling the function's operands: not the function's work)
    _, empty = run_cmsis(tree, decls, setup[0] if setup else "(void)x;", "0", x, want.size, sources)
    mine = int(round(sum(kernels.values())))
    return {"op": case.op, "layer": case.label, "function": case.function, "kernels": sorted(kernels),
            "instructions": mine, "cmsis_nn_instructions": count - empty, "wrapper_instructions": empty,
            "ratio": round(mine / (count - empty), 3),
            "equal": bool(np.array_equal(ours, theirs) and np.array_equal(ours, want)), "outputs": int(want.size)}


def table(rows: list[dict], how: str) -> dict:
    return {"name": "cmsis_nn_ops", "script": "benchmarks/cmsis_nn_ops.py",
            "columns": ["op", "layer", "CMSIS-NN function", "tinycc-ml instructions", "CMSIS-NN instructions",
                        "ratio", "outputs equal"],
            "rows": [[r["op"], r["layer"], f"`{r['function']}`", f"{r['instructions']:,}",
                      f"{r['cmsis_nn_instructions']:,}", f"{r['ratio']:.2f}", "yes" if r["equal"] else "NO"]
                     for r in rows],
            "align": [None, None, None, "right", "right", "right", None], "cmsis_nn": how}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated ops (mul, maximum, minimum, max_pool, pad, transpose, "
                    "softmax, batch_matmul, transpose_conv, svdf, lstm)")
    ap.add_argument("--cmsis-nn", type=Path, default=None, help="CMSIS-NN source tree or git directory")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    tree, how = cmsis_tree(args.cmsis_nn or MIRROR, FILES)
    if tree is None:
        print(f"CMSIS-NN unavailable: {how}")
        return 1
    only = set(filter(None, args.only.split(",")))
    rows = []
    print(f"CMSIS-NN {how}, -O2, Cortex-M4F (MPS2 AN386): instructions per layer")
    print(f"{'op':<15}{'layer':<44}{'CMSIS-NN function':<26}{'tinycc-ml':>11}{'CMSIS-NN':>11}{'ratio':>7}  equal")
    for case in cases():
        if only and case.op not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-op-") as work:
            r = measure(case, tree, Path(work))
        rows.append(r)
        print(f"{r['op']:<15}{r['layer']:<44}{r['function']:<26}{r['instructions']:>11,}"
              f"{r['cmsis_nn_instructions']:>11,}{r['ratio']:>7.2f}  {'yes' if r['equal'] else 'NO'}", flush=True)
    if not only:
        args.out.write_text(json.dumps({**table(rows, how), "cases": rows}, indent=1) + "\n")
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
