"""Which of TFLite Micro's operators tinycc-ml compiles, measured: for every builtin operator TFLite Micro's op
resolver registers (``micro_mutable_op_resolver.h``; its signal library aside), at int8, 16x8 (int16 activations,
int8 weights) and float32, a one-operator model is built with TFLite's flatbuffer schema, run by tflite-micro and
by tinycc-ml's C on each target, and the outputs compared element for element.

    python benchmarks/tflite_coverage.py [--targets host,cortex-m4,cortex-m0] [--rows 8] [--no-write]

A cell says where the C equals tflite-micro's outputs exactly ("host M4 M0"), or the first target where it did
not and how, or tinycc-ml's refusal; an operator with no model here is "not supported" (tinycc-ml's reader refuses
it by name). Every claim is measured on the run that printed it.

TFLite Micro's signal library (its custom operators) has a table of its own, by element type (int16, int32,
float32): each operator's one-operator model run over a stream of rows taken as successive calls (its state
carried), int32 inputs read as int16 samples through a CAST (the measurement harnesses feed int16, int8 or float).

    python benchmarks/tflite_coverage.py --signal-only   # the signal table alone
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.ops.signal.stream_check import tflite_micro_outputs  # noqa: E402
from tests.tflite_builder import tflm_joined_outputs  # noqa: E402
from tests.tflite_models import TfliteBuilder, options, schema  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402

OP, OPT = schema.BuiltinOperator, schema.BuiltinOptions
# TFLite Micro's op resolver (micro_mutable_op_resolver.h): every builtin it can register, signal library aside
RESOLVER = ("ABS ADD ADD_N ARG_MAX ARG_MIN ASSIGN_VARIABLE AVERAGE_POOL_2D BATCH_MATMUL BATCH_TO_SPACE_ND "
            "BROADCAST_ARGS BROADCAST_TO CALL_ONCE CAST CEIL CONCATENATION CONV_2D COS CUMSUM DEPTH_TO_SPACE "
            "DEPTHWISE_CONV_2D DEQUANTIZE DETECTION_POSTPROCESS DIV DYNAMIC_UPDATE_SLICE ELU EMBEDDING_LOOKUP EQUAL "
            "EXP EXPAND_DIMS FILL FLOOR FLOOR_DIV FLOOR_MOD FULLY_CONNECTED GATHER GATHER_ND GREATER GREATER_EQUAL "
            "HARD_SWISH IF L2_NORMALIZATION L2_POOL_2D LEAKY_RELU LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT "
            "LOGICAL_OR LOGISTIC LOG_SOFTMAX MAXIMUM MAX_POOL_2D MIRROR_PAD MEAN MINIMUM MUL NEG NOT_EQUAL PACK PAD "
            "PADV2 PRELU QUANTIZE READ_VARIABLE REDUCE_ALL REDUCE_MAX REDUCE_MIN RELU RELU6 RESHAPE RESIZE_BILINEAR "
            "RESIZE_NEAREST_NEIGHBOR REVERSE_V2 ROUND RSQRT SELECT_V2 SHAPE SIN SLICE SOFTMAX SPACE_TO_BATCH_ND "
            "SPACE_TO_DEPTH SPLIT SPLIT_V SQUEEZE SQRT SQUARE SQUARED_DIFFERENCE STRIDED_SLICE SUB SUM SVDF TANH "
            "TRANSPOSE_CONV TRANSPOSE UNPACK UNIDIRECTIONAL_SEQUENCE_LSTM VAR_HANDLE WHILE ZEROS_LIKE").split()
KINDS = ("int8", "16x8", "float32")
SHAPE = (1, 4, 4, 3)
Q_IN, Q_OUT = (0.05, -3), (0.04, 5)


def act(b, shape, kind: str, q, **fields) -> int:
    """An activation tensor of ``kind`` ("int8", "16x8": int16 at a 256 times finer scale, zero point 0, as TFLite's
    16x8 quantisation writes them; "float32") with the int8 quantisation ``q``; a constant's ``data`` given as int8
    values or floats is spread over int16 for 16x8."""
    if kind == "16x8":
        data = fields.pop("data", None)
        if data is not None:
            fields["data"] = np.asarray(data, dtype=np.int64) * 256
        return b.tensor(shape, "int16", scale=q[0] / 256, zero_point=0, **fields)
    return b.tensor(shape, kind, scale=q[0], zero_point=q[1], **fields)


def _rng():
    return np.random.default_rng(7)


def unary(code, opts=None, out_q=Q_OUT):
    def build(kind):
        b = TfliteBuilder()
        x = act(b, SHAPE, kind, Q_IN, name="x")
        y = act(b, SHAPE, kind, out_q, name="y")
        b.op(code, [x], [y], *(opts or (0, None)))
        return b.finish([x], [y])
    return build


def binary(code, opts=None, same_q=False):
    def build(kind):
        b = TfliteBuilder()
        x = act(b, SHAPE, kind, Q_IN, name="x")
        data = _rng().normal(0, 2, size=(3,)).astype(np.float32) if kind == "float32" else _rng().integers(-128, 128, 3)
        q = Q_IN if same_q else (0.03, 7)
        c = act(b, (3,), kind, q, data=data, name="c")
        y = act(b, SHAPE, kind, (Q_IN if same_q else Q_OUT))
        b.op(code, [x, c], [y], *(opts or (0, None)))
        return b.finish([x], [y])
    return build


def layer(code, kind, w_shape, out_shape, opts, axis):
    b = TfliteBuilder()
    rng = _rng()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    channels = w_shape[axis]
    if kind == "float32":
        w = b.tensor(w_shape, kind, scale=None, data=rng.normal(0, 0.3, size=w_shape).astype(np.float32))
        bias = b.tensor((channels,), kind, scale=None, data=rng.normal(0, 0.1, size=channels).astype(np.float32))
    else:
        w = b.filters(rng, w_shape, axis)
        bias = b.bias(rng, x, w, channels, 64 if kind == "16x8" else 32)
    y = act(b, out_shape, kind, (0.1, -4), name="y")
    b.op(code, [x, w, bias], [y], *opts)
    return b.finish([x], [y])


def reshaped(code, out_shape, const=None, opts=None):
    def build(kind):
        b = TfliteBuilder()
        x = act(b, SHAPE, kind, Q_IN, name="x")
        ins = [x] + ([b.tensor((len(const),), "int32", scale=None, data=np.asarray(const))] if const is not None
                     else [])
        y = act(b, out_shape, kind, Q_IN, name="y")
        b.op(code, ins, [y], *(opts or (0, None)))
        z = act(b, out_shape, kind, Q_IN, name="z")
        b.op(OP.RELU, [y], [z])  # a model computes something
        return b.finish([x], [z])
    return build


PROBES = {
    "SUB": binary(OP.SUB, (OPT.SubOptions, options("SubOptions"))),
    "MUL": binary(OP.MUL, (OPT.MulOptions, options("MulOptions"))),
    "MAXIMUM": binary(OP.MAXIMUM, same_q=True),
    "MINIMUM": binary(OP.MINIMUM, same_q=True),
    "RELU": unary(OP.RELU),
    "RELU6": unary(OP.RELU6, out_q=Q_IN),
    "LEAKY_RELU": unary(OP.LEAKY_RELU, (OPT.LeakyReluOptions, options("LeakyReluOptions", alpha=0.2))),
    "SOFTMAX": lambda kind: unary(OP.SOFTMAX, (OPT.SoftmaxOptions, options("SoftmaxOptions", beta=1.0)),
                                  (1 / 128, 0) if kind == "16x8" else (1 / 256, -128))(kind),
    "AVERAGE_POOL_2D": lambda kind: _pooled(OP.AVERAGE_POOL_2D, kind),
    "MAX_POOL_2D": lambda kind: _pooled(OP.MAX_POOL_2D, kind),
    "L2_POOL_2D": lambda kind: _pooled(OP.L2_POOL_2D, kind),
    "CONV_2D": lambda kind: layer(OP.CONV_2D, kind, (5, 3, 3, 3), (1, 4, 4, 5),
                                  (OPT.Conv2DOptions, options("Conv2DOptions", padding=0, strideW=1, strideH=1,
                                                              dilationWFactor=1, dilationHFactor=1)), 0),
    "DEPTHWISE_CONV_2D": lambda kind: layer(OP.DEPTHWISE_CONV_2D, kind, (1, 3, 3, 3), (1, 4, 4, 3),
                                            (OPT.DepthwiseConv2DOptions,
                                             options("DepthwiseConv2DOptions", padding=0, strideW=1, strideH=1,
                                                     depthMultiplier=1, dilationWFactor=1, dilationHFactor=1)), 3),
    "RESHAPE": reshaped(OP.RESHAPE, (1, 48), const=[1, 48]),
    "TRANSPOSE": reshaped(OP.TRANSPOSE, (1, 3, 4, 4), const=[0, 3, 1, 2]),
    "SQUEEZE": reshaped(OP.SQUEEZE, (4, 4, 3)),
    "EXPAND_DIMS": reshaped(OP.EXPAND_DIMS, (1, 4, 4, 3, 1), const=[4]),
    "LOGISTIC": lambda kind: _sigmoid(OP.LOGISTIC, kind),
    "TANH": lambda kind: _sigmoid(OP.TANH, kind),
    "HARD_SWISH": unary(OP.HARD_SWISH, out_q=(0.03, -20)),
    "REVERSE_V2": reshaped(OP.REVERSE_V2, SHAPE, const=[1, 2]),
    "DEPTH_TO_SPACE": lambda kind: _blocks(OP.DEPTH_TO_SPACE, kind, (1, 2, 2, 12), (1, 4, 4, 3),
                                           (OPT.DepthToSpaceOptions, options("DepthToSpaceOptions", blockSize=2))),
    "SPACE_TO_DEPTH": lambda kind: _blocks(OP.SPACE_TO_DEPTH, kind, SHAPE, (1, 2, 2, 12),
                                           (OPT.SpaceToDepthOptions, options("SpaceToDepthOptions", blockSize=2))),
    "SPLIT": lambda kind: _parts(OP.SPLIT, kind, (OPT.SplitOptions, options("SplitOptions", numSplits=2))),
    "SPLIT_V": lambda kind: _parts(OP.SPLIT_V, kind, (OPT.SplitVOptions, options("SplitVOptions", numSplits=2))),
    "UNPACK": lambda kind: _unpack_pack(kind),
    "PACK": lambda kind: _unpack_pack(kind),
    "PRELU": lambda kind: _prelu(kind),
    "PADV2": lambda kind: _padv2(kind),
    "MIRROR_PAD": lambda kind: _with_constant(OP.MIRROR_PAD, (1, 6, 5, 3), [[0, 0], [1, 1], [0, 1], [0, 0]],
                                              (OPT.MirrorPadOptions, options("MirrorPadOptions", mode=1)))(kind),
    **{name: (lambda code: lambda kind: unary(code, out_q=Q_IN)(kind))(getattr(OP, name))
       for name in ("ABS", "NEG", "FLOOR", "CEIL", "ROUND", "SQUARE", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS")},
    "UNIDIRECTIONAL_SEQUENCE_LSTM": lambda kind: _lstm(kind),
    "SVDF": lambda kind: _svdf(kind),
    "ARG_MAX": lambda kind: _arg(OP.ARG_MAX, kind),
    "ARG_MIN": lambda kind: _arg(OP.ARG_MIN, kind),
    "SUM": lambda kind: _with_constant(OP.SUM, (1, 3), [1, 2], (OPT.ReducerOptions, options("ReducerOptions")),
                                       out_q=(0.3, 7))(kind),
    "REDUCE_MAX": lambda kind: _with_constant(OP.REDUCE_MAX, (1, 4, 1, 3), [2], (
        OPT.ReducerOptions, options("ReducerOptions", keepDims=True)))(kind),
    "REDUCE_MIN": lambda kind: _with_constant(OP.REDUCE_MIN, (1, 4, 1, 3), [2], (
        OPT.ReducerOptions, options("ReducerOptions", keepDims=True)))(kind),
    "RESIZE_BILINEAR": lambda kind: _with_constant(
        OP.RESIZE_BILINEAR, (1, 7, 9, 3), [7, 9],
        (OPT.ResizeBilinearOptions, options("ResizeBilinearOptions", halfPixelCenters=True)))(kind),
    "RESIZE_NEAREST_NEIGHBOR": lambda kind: _with_constant(
        OP.RESIZE_NEAREST_NEIGHBOR, (1, 7, 9, 3), [7, 9],
        (OPT.ResizeNearestNeighborOptions, options("ResizeNearestNeighborOptions", halfPixelCenters=True)))(kind),
}


def _arg(code, kind):
    """ARG_MAX / ARG_MIN over the channels: int32 indices."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    axis = b.tensor((1,), "int32", scale=None, data=np.asarray([3], dtype=np.int32))
    y = b.tensor(SHAPE[:3], "int32", scale=None, name="y")
    name = "ArgMaxOptions" if code == OP.ARG_MAX else "ArgMinOptions"
    b.op(code, [x, axis], [y], getattr(OPT, name), options(name, outputType=2))
    return b.finish([x], [y])


def _svdf(kind):
    """SVDF of rank 2 over 12 features, 4 units, memory 5: its state carried between calls (int16 state at 16x8's
    column: TFLite Micro's SVDF takes int8 input only there)."""
    rng = _rng()
    b = TfliteBuilder()
    real = kind == "float32"
    x_kind = {"float32": "float32", "16x8": "int16"}.get(kind, "int8")  # TFLite Micro's SVDF: no int16 input
    x = b.tensor((1, 12), x_kind, scale=None if real else 0.05, zero_point=0 if kind == "16x8" else -2, name="x")
    if real:
        w = b.tensor((8, 12), kind, scale=None, data=rng.normal(0, 0.4, (8, 12)).astype(np.float32))
        t = b.tensor((8, 5), kind, scale=None, data=rng.normal(0, 0.4, (8, 5)).astype(np.float32))
        bias = b.tensor((4,), kind, scale=None, data=rng.normal(0, 0.2, 4).astype(np.float32))
    else:
        w = b.tensor((8, 12), "int8", scale=0.01, zero_point=0, data=rng.integers(-127, 128, (8, 12)))
        t = b.tensor((8, 5), "int16", scale=2.0**-14, zero_point=0, data=rng.integers(-32767, 32768, (8, 5)))
        bias = b.tensor((4,), "int32", scale=float(np.float32(2.0**-10) * np.float32(2.0**-14)), zero_point=0,
                        data=rng.integers(-20000, 20000, 4))
    s = b.tensor((1, 40), "float32" if real else "int16", scale=None if real else 2.0**-10, zero_point=0)
    b.sub.tensors[s].isVariable = True
    y = b.tensor((1, 4), "float32" if real else "int8", scale=None if real else 0.05, zero_point=5, name="y")
    b.op(OP.SVDF, [x, w, t, bias, s], [y], OPT.SVDFOptions, options("SVDFOptions", rank=2))
    return b.finish([x], [y])


def _lstm(kind):
    """An LSTM of 4 units over the input's 4 rows of 12 features (time steps), states carried between calls; 16x8
    as TFLite writes it: int16 activations, int64 biases."""
    rng = _rng()
    b = TfliteBuilder()
    wide = kind == "16x8"
    x = act(b, (1, 4, 12), kind, Q_IN, name="x")
    ins = [x]
    for k in range(8):
        shape = (4, 12 if k < 4 else 4)
        if kind == "float32":
            ins.append(b.tensor(shape, kind, scale=None, data=rng.normal(0, 0.5, shape).astype(np.float32)))
        else:
            ins.append(b.tensor(shape, "int8", scale=0.01, zero_point=0, data=rng.integers(-127, 128, shape)))
    ins += [-1, -1, -1]
    for _ in range(4):
        if kind == "float32":
            ins.append(b.tensor((4,), kind, scale=None, data=rng.normal(0, 0.3, 4).astype(np.float32)))
        else:
            scale = np.float32(b.sub.tensors[x].quantization.scale[0] * 0.01)
            ins.append(b.tensor((4,), "int64" if wide else "int32", scale=scale, zero_point=0,
                                data=rng.integers(-2000, 2000, 4)))
    ins += [-1, -1]
    h = act(b, (1, 4), kind, (0.02, 3), name="h")
    c = b.tensor((1, 4), "float32" if kind == "float32" else "int16", scale=None if kind == "float32" else 2.0**-11,
                 zero_point=0, name="c")
    b.sub.tensors[h].isVariable = b.sub.tensors[c].isVariable = True
    ins += [h, c, -1, -1, -1, -1]
    y = act(b, (1, 4, 4), kind, (0.02, 3), name="y")
    b.op(OP.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [y], OPT.UnidirectionalSequenceLSTMOptions,
         options("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=4))
    return b.finish([x], [y])


def _padv2(kind):
    """PADV2 with a constant of the input's quantisation (the lowest value: a max pool's padding)."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    paddings = b.tensor((4, 2), "int32", scale=None, data=np.asarray([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32))
    c = act(b, (1,), kind, Q_IN, data=np.asarray([-1.5], np.float32) if kind == "float32" else np.asarray([-128]))
    y = act(b, (1, 6, 5, 3), kind, Q_IN, name="y")
    b.op(OP.PADV2, [x, paddings, c], [y], OPT.PadV2Options, options("PadV2Options"))
    return b.finish([x], [y])


def _prelu(kind):
    """PRELU with one int8 (float) slope per channel."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    if kind == "float32":
        a = b.tensor((1, 1, 3), "float32", scale=None, data=np.asarray([[[0.2, -0.5, 1.5]]], dtype=np.float32))
    else:
        a = b.tensor((1, 1, 3), "int8", scale=0.01, zero_point=-20, data=np.asarray([[[40, -60, 120]]]))
    y = act(b, SHAPE, kind, Q_OUT, name="y")
    b.op(OP.PRELU, [x, a], [y])
    return b.finish([x], [y])


def _sigmoid(code, kind):
    """LOGISTIC / TANH at the output quantisation TFLite's converter writes (int16: 2^-15, a power-of-two input)."""
    b = TfliteBuilder()
    if kind == "16x8":
        x = b.tensor(SHAPE, "int16", scale=2.0 ** -12, zero_point=0, name="x")
        y = b.tensor(SHAPE, "int16", scale=2.0 ** -15, zero_point=0, name="y")
    else:
        x = act(b, SHAPE, kind, Q_IN, name="x")
        y = act(b, SHAPE, kind, (1 / 256, -128) if code == OP.LOGISTIC else (1 / 128, 0), name="y")
    b.op(code, [x], [y])
    return b.finish([x], [y])


def _blocks(code, kind, in_shape, out_shape, opts):
    b = TfliteBuilder()
    x = act(b, in_shape, kind, Q_IN, name="x")
    y = act(b, out_shape, kind, Q_IN, name="y")
    b.op(code, [x], [y], *opts)
    return b.finish([x], [y])


def _parts(code, kind, opts):
    """SPLIT / SPLIT_V of the input's width in two, joined again the other way round."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    halves = [act(b, (1, 4, 2, 3), kind, Q_IN) for _ in range(2)]
    axis = b.tensor((), "int32", scale=None, data=np.asarray(2, dtype=np.int32))
    if code == OP.SPLIT:
        b.op(code, [axis, x], halves, *opts)
    else:
        sizes = b.tensor((2,), "int32", scale=None, data=np.asarray([2, -1], dtype=np.int32))
        b.op(code, [x, sizes, axis], halves, *opts)
    z = act(b, SHAPE, kind, Q_IN, name="z")
    b.op(OP.CONCATENATION, halves[::-1], [z], OPT.ConcatenationOptions, options("ConcatenationOptions", axis=2))
    return b.finish([x], [z])


def _unpack_pack(kind):
    """UNPACK along the height, PACK of the rows back in reverse order."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    rows = [act(b, (1, 4, 3), kind, Q_IN) for _ in range(4)]
    b.op(OP.UNPACK, [x], rows, OPT.UnpackOptions, options("UnpackOptions", num=4, axis=1))
    z = act(b, SHAPE, kind, Q_IN, name="z")
    b.op(OP.PACK, rows[::-1], [z], OPT.PackOptions, options("PackOptions", valuesCount=4, axis=1))
    return b.finish([x], [z])


def _pooled(code, kind):
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    y = act(b, (1, 2, 2, 3), kind, Q_IN, name="y")
    b.op(code, [x], [y], OPT.Pool2DOptions, options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2,
                                                    filterHeight=2))
    return b.finish([x], [y])


def _add(kind):
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    c = act(b, SHAPE, kind, (0.03, 7), name="c",
                 data=_rng().normal(0, 2, size=SHAPE).astype(np.float32) if kind == "float32"
                 else _rng().integers(-128, 128, SHAPE))
    y = act(b, SHAPE, kind, Q_OUT, name="y")
    b.op(OP.ADD, [x, c], [y], OPT.AddOptions, options("AddOptions"))
    return b.finish([x], [y])


def _fully_connected(kind):
    b = TfliteBuilder()
    rng = _rng()
    x = act(b, (1, 48), kind, Q_IN, name="x")
    if kind == "float32":
        w = b.tensor((5, 48), kind, scale=None, data=rng.normal(0, 0.3, size=(5, 48)).astype(np.float32))
        bias = b.tensor((5,), kind, scale=None, data=rng.normal(0, 0.1, size=5).astype(np.float32))
    else:
        w = b.filters(rng, (5, 48), 0, per_channel=False)
        bias = b.bias(rng, x, w, 5, 64 if kind == "16x8" else 32)
    y = act(b, (1, 5), kind, (0.1, -4), name="y")
    b.op(OP.FULLY_CONNECTED, [x, w, bias], [y], OPT.FullyConnectedOptions, options("FullyConnectedOptions"))
    return b.finish([x], [y])


def _concatenation(kind):
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    y = act(b, SHAPE, kind, Q_IN, name="y")
    b.op(OP.RELU, [x], [y])
    z = act(b, (1, 4, 4, 6), kind, Q_IN, name="z")
    b.op(OP.CONCATENATION, [x, y], [z], OPT.ConcatenationOptions, options("ConcatenationOptions", axis=3))
    return b.finish([x], [z])


def _with_constant(code, out_shape, constant, opts=None, out_q=Q_IN):
    def build(kind):
        b = TfliteBuilder()
        x = act(b, SHAPE, kind, Q_IN, name="x")
        c = b.tensor(np.shape(constant), "int32", scale=None, data=np.asarray(constant), name="c")
        y = act(b, out_shape, kind, out_q, name="y")
        b.op(code, [x, c], [y], *(opts or (0, None)))
        return b.finish([x], [y])
    return build


def _strided_slice(kind):
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    consts = [b.tensor((4,), "int32", scale=None, data=np.asarray(v, dtype=np.int32))
              for v in ([0, 1, 0, 0], [1, 4, 4, 3], [1, 2, 1, 2])]
    y = act(b, (1, 2, 4, 2), kind, Q_IN, name="y")
    b.op(OP.STRIDED_SLICE, [x, *consts], [y], OPT.StridedSliceOptions, options("StridedSliceOptions"))
    return b.finish([x], [y])


def _slice(kind):
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    consts = [b.tensor((4,), "int32", scale=None, data=np.asarray(v, dtype=np.int32))
              for v in ([0, 1, 1, 0], [1, 2, -1, 2])]
    y = act(b, (1, 2, 3, 2), kind, Q_IN, name="y")
    b.op(OP.SLICE, [x, *consts], [y])
    z = act(b, (1, 2, 3, 2), kind, Q_IN, name="z")
    b.op(OP.RELU, [y], [z])
    return b.finish([x], [z])


def _transpose_conv(kind):
    b = TfliteBuilder()
    rng = _rng()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    shape = b.tensor((4,), "int32", scale=None, data=np.asarray([1, 8, 8, 2], dtype=np.int32))
    if kind == "float32":
        w = b.tensor((2, 3, 3, 3), kind, scale=None, data=rng.normal(0, 0.3, size=(2, 3, 3, 3)).astype(np.float32))
        bias = b.tensor((2,), kind, scale=None, data=rng.normal(0, 0.1, size=2).astype(np.float32))
    else:
        w = b.filters(rng, (2, 3, 3, 3), 0)
        bias = b.bias(rng, x, w, 2, 64 if kind == "16x8" else 32)
    y = act(b, (1, 8, 8, 2), kind, (0.1, -4), name="y")
    b.op(OP.TRANSPOSE_CONV, [shape, w, x, bias], [y], OPT.TransposeConvOptions,
         options("TransposeConvOptions", padding=0, strideW=2, strideH=2))
    return b.finish([x], [y])


def _quantize(kind):
    """float32 input -> QUANTIZE (the network's input, as converters write it) -> RELU."""
    b = TfliteBuilder()
    x = b.tensor(SHAPE, "float32", scale=None, name="x")
    q = act(b, SHAPE, kind, Q_IN, name="q")
    b.op(OP.QUANTIZE, [x], [q])
    y = act(b, SHAPE, kind, Q_OUT, name="y")
    b.op(OP.RELU, [q], [y])
    return b.finish([x], [y])


def _dequantize(kind):
    """RELU -> DEQUANTIZE: float32 output."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    y = act(b, SHAPE, kind, Q_OUT, name="y")
    b.op(OP.RELU, [x], [y])
    z = b.tensor(SHAPE, "float32", scale=None, name="z")
    b.op(OP.DEQUANTIZE, [y], [z])
    return b.finish([x], [z])


def _masked(kind, then=None):
    """x -> GREATER(x, c) -> a bool mask; ``then(b, x, mask)`` -> the output tensor (None: the mask is the output).
    16x8: TFLite Micro compares no int16 tensors (GREATER's int16 case runs without multipliers): refused."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    data = _rng().normal(0, 2, size=(3,)).astype(np.float32) if kind == "float32" else _rng().integers(-128, 128, 3)
    c = act(b, (3,), kind, (0.03, 7), data=data, name="c")
    mask = b.tensor(SHAPE, "bool", scale=None, name="mask")
    b.op(OP.GREATER, [x, c], [mask])
    out = mask if then is None else then(b, kind, x, c, mask)
    return b.finish([x], [out])


def _comparison(code):
    def build(kind):
        b = TfliteBuilder()
        x = act(b, SHAPE, kind, Q_IN, name="x")
        data = (np.round(_rng().normal(0, 2, size=(3,))).astype(np.float32) if kind == "float32"
                else _rng().integers(-128, 128, 3))
        c = act(b, (3,), kind, Q_IN if code in (OP.EQUAL, OP.NOT_EQUAL) else (0.03, 7), data=data, name="c")
        y = b.tensor(SHAPE, "bool", scale=None, name="y")
        b.op(code, [x, c], [y])
        return b.finish([x], [y])
    return build


def _logical(code):
    def then(b, kind, x, c, mask):
        if code == OP.LOGICAL_NOT:
            y = b.tensor(SHAPE, "bool", scale=None, name="y")
            b.op(code, [mask], [y])
            return y
        other = b.tensor(SHAPE, "bool", scale=None, name="other")
        b.op(OP.LESS, [x, c], [other])
        y = b.tensor(SHAPE, "bool", scale=None, name="y")
        b.op(code, [mask, other], [y])
        return y
    return lambda kind: _masked(kind, then)


def _select_v2(kind):
    def then(b, kind, x, c, mask):
        y = act(b, SHAPE, kind, Q_IN, name="y")
        data = _rng().normal(0, 2, size=(3,)).astype(np.float32) if kind == "float32" else _rng().integers(-128, 128, 3)
        d = act(b, (3,), kind, Q_IN, data=data, name="d")
        b.op(OP.SELECT_V2, [mask, x, d], [y])
        return y
    if kind != "16x8":
        return _masked(kind, then)
    b = TfliteBuilder()  # int16: no comparison to compute a mask, a constant one
    x = act(b, SHAPE, kind, Q_IN, name="x")
    mask = b.tensor((1, 4, 1, 3), "bool", scale=None, data=_rng().integers(0, 2, size=(1, 4, 1, 3)).astype(bool))
    d = act(b, (3,), kind, Q_IN, data=_rng().integers(-128, 128, 3), name="d")
    y = act(b, SHAPE, kind, Q_IN, name="y")
    b.op(OP.SELECT_V2, [mask, x, d], [y])
    return b.finish([x], [y])


def _gather(kind):
    """GATHER of x by indices ARG_MAX computes (batch_dims 3): each position's largest channel."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    axis = b.tensor((1,), "int32", scale=None, data=np.asarray([3], dtype=np.int32), name="axis")
    index = b.tensor(SHAPE[:3], "int32", scale=None, name="index")
    b.op(OP.ARG_MAX, [x, axis], [index], OPT.ArgMaxOptions, options("ArgMaxOptions", outputType=2))
    y = act(b, SHAPE[:3], kind, Q_IN, name="y")
    b.op(OP.GATHER, [x, index], [y], OPT.GatherOptions, options("GatherOptions", axis=3, batchDims=3))
    return b.finish([x], [y])


def _embedding_lookup(kind):
    """A constant table (float32, int8) looked up by ids ARG_MAX computes from x (TFLite Micro has no int16 table, nor
    an int16 ARG_MAX: 16x8 is not applicable)."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    axis = b.tensor((1,), "int32", scale=None, data=np.asarray([3], dtype=np.int32), name="axis")
    index = b.tensor(SHAPE[:3], "int32", scale=None, name="index")
    b.op(OP.ARG_MAX, [x, axis], [index], OPT.ArgMaxOptions, options("ArgMaxOptions", outputType=2))
    ids = b.tensor((16,), "int32", scale=None, name="ids")
    b.op(OP.RESHAPE, [index], [ids])
    if kind == "float32":
        table = b.tensor((3, 5), kind, scale=None, data=_rng().normal(0, 2, size=(3, 5)).astype(np.float32))
    else:
        table = b.tensor((3, 5), "int8", scale=0.02, zero_point=0, data=_rng().integers(-128, 128, size=(3, 5)))
    y = (b.tensor((16, 5), "float32", scale=None, name="y") if kind != "int8"
         else b.tensor((16, 5), "int8", scale=0.02, zero_point=0, name="y"))
    b.op(OP.EMBEDDING_LOOKUP, [ids, table], [y])
    return b.finish([x], [y])


def _batch_matmul(kind):
    """x (1, 4, 4, 3) as a batch of 4x3 matrices times a constant (1, 1, 3, 5), int8 with zero points."""
    b = TfliteBuilder()
    x = act(b, SHAPE, kind, Q_IN, name="x")
    data = _rng().normal(0, 1, size=(1, 1, 3, 5)).astype(np.float32) if kind == "float32" else \
        _rng().integers(-128, 128, size=(1, 1, 3, 5))
    c = act(b, (1, 1, 3, 5), kind, (0.03, 0 if kind == "16x8" else 7), data=data, name="c")
    y = act(b, (1, 4, 4, 5), kind, (0.2, -4), name="y")
    b.op(OP.BATCH_MATMUL, [x, c], [y], OPT.BatchMatMulOptions, options("BatchMatMulOptions"))
    return b.finish([x], [y])


def _space_batch(code, in_shape, out_shape):
    """2x2 blocks, no padding (TFLite Micro writes an unset value into SPACE_TO_BATCH_ND's padding)."""
    def build(kind):
        b = TfliteBuilder()
        x = act(b, in_shape, kind, Q_IN, name="x")
        block = b.tensor((2,), "int32", scale=None, data=np.asarray([2, 2], dtype=np.int32), name="block")
        edges = b.tensor((2, 2), "int32", scale=None, data=np.zeros((2, 2), dtype=np.int32), name="edges")
        y = act(b, out_shape, kind, Q_IN, name="y")
        b.op(code, [x, block, edges], [y])
        return b.finish([x], [y])
    return build


def _shape_probe(build_name: str):
    """A model of tests/ops/test_shape_constants.py (SHAPE, ZEROS_LIKE, FILL, BROADCAST_TO, BROADCAST_ARGS inside a
    model that computes with them); 16x8 as int16 tensors."""
    def build(kind):
        from tests.ops import test_shape_constants

        return getattr(test_shape_constants, build_name)(INT16.get(kind, kind))
    return build


def _file_probe(files: dict):
    """A converter-written file per kind (resource variables, a WHILE loop): its rows run as one stream of calls
    on both sides."""
    def build(kind):
        name = files.get(kind)
        return None if name is None else (REPO / "tests" / "data" / name).read_bytes()
    return build


def _test_probe(module: str, build, kinds=("int8", "float32")):
    """A model built by a test module of tests/ops (``build(kind)``, the test's own kind names), for ``kinds``."""
    def probe(kind):
        import importlib

        if kind not in kinds:
            return None
        return build(importlib.import_module(f"tests.ops.{module}"), kind)
    return probe


VARIABLES = {"int8": "tflite/variables_int8.tflite", "16x8": "tflite/variables_16x8.tflite",
             "float32": "tflite/variables_float.tflite"}
# forms with no model here, and why
NO_MODEL = {("WHILE", "16x8"): "not measured (TensorFlow's converter writes none: no loop tensor calibrated at 16x8)",
            **{("REDUCE_ALL", kind): "not applicable (a bool operator)" for kind in ("int8", "16x8")},
            **{("DETECTION_POSTPROCESS", kind): "not measured (TFLite Micro's kernel reads float32 boxes and scores)"
               for kind in ("int8", "16x8")}}
INT16 = {"16x8": "int16"}  # the test modules' name for 16x8's activations
ALL_KINDS = ("int8", "16x8", "float32")
PROBES.update({
    "SHAPE": _shape_probe("shape_then_reshape"), "ZEROS_LIKE": _shape_probe("zeros_like_added"),
    "FILL": _shape_probe("filled_product"), "BROADCAST_TO": _shape_probe("broadcast"),
    "BROADCAST_ARGS": _shape_probe("broadcast_args_reshape"),
    **dict.fromkeys(("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"), _file_probe(VARIABLES)),
    "WHILE": _file_probe({"float32": "keras/lstm_keywords_float.tflite", "int8": "tflite/while_int8.tflite"}),
    "SPACE_TO_BATCH_ND": _space_batch(OP.SPACE_TO_BATCH_ND, SHAPE, (4, 2, 2, 3)),
    "BATCH_TO_SPACE_ND": _space_batch(OP.BATCH_TO_SPACE_ND, (4, 2, 2, 3), SHAPE),
    "SQUARED_DIFFERENCE": binary(OP.SQUARED_DIFFERENCE),
    "ELU": unary(OP.ELU),
    "LOG_SOFTMAX": lambda kind: unary(OP.LOG_SOFTMAX, out_q=(16 / 256, 127))(kind),
    "L2_NORMALIZATION": unary(OP.L2_NORMALIZATION, (OPT.L2NormOptions, options("L2NormOptions")), out_q=(1 / 128, 0)),
    "ADD_N": _test_probe("test_add_n", lambda m, kind: m.add_n_model(2, 1, INT16.get(kind, kind)), ALL_KINDS),
    "CAST": _test_probe("test_cast", lambda m, kind: m.cast_model(INT16.get(kind, kind), "int32", kind != "float32"),
                        ALL_KINDS),
    "CUMSUM": _test_probe("test_cumsum", lambda m, kind: m.cumsum_model(1, False, False, INT16.get(kind, kind)),
                          ALL_KINDS),
    "GATHER_ND": _test_probe("test_gather_nd", lambda m, kind: m.constant_indices(
        INT16.get(kind, kind), np.asarray([[1, 4], [0, 0]])), ALL_KINDS),
    "DYNAMIC_UPDATE_SLICE": _test_probe("test_dynamic_update_slice", lambda m, kind: m.constant_update(
        INT16.get(kind, kind), (2, 3, 4), [1, 2, 3]), ALL_KINDS),
    # 16x8: a constant condition (TFLite Micro's GREATER leaves int16's multipliers unset: no computed one)
    "IF": _test_probe("test_if", lambda m, kind: m.if_model(kind) if kind != "16x8" else m.if_model("int16", True),
                      ALL_KINDS),
    "DETECTION_POSTPROCESS": _test_probe("test_detection_postprocess", lambda m, kind: m.model(
        True, constant_scores=True), ("float32",)),
    "REDUCE_ALL": _test_probe("test_reduce_all", lambda m, kind: m.all_model([0, 2], False), ("float32",)),
    "DIV": binary(OP.DIV, (OPT.DivOptions, options("DivOptions"))),
    "FLOOR_DIV": binary(OP.FLOOR_DIV),
    "FLOOR_MOD": binary(OP.FLOOR_MOD),
    "BATCH_MATMUL": _batch_matmul,
    "GATHER": _gather, "EMBEDDING_LOOKUP": _embedding_lookup,
    **{name: _comparison(getattr(OP, name))
       for name in ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")},
    **{name: _logical(getattr(OP, name)) for name in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")},
    "SELECT_V2": _select_v2,
    "QUANTIZE": _quantize, "DEQUANTIZE": _dequantize,
    "STRIDED_SLICE": _strided_slice, "TRANSPOSE_CONV": _transpose_conv,
    "SLICE": _slice,
    "ADD": _add, "FULLY_CONNECTED": _fully_connected, "CONCATENATION": _concatenation,
    "PAD": _with_constant(OP.PAD, (1, 6, 5, 3), [[0, 0], [1, 1], [0, 1], [0, 0]]),
    "MEAN": _with_constant(OP.MEAN, (1, 1, 1, 3), [1, 2], (OPT.ReducerOptions, options("ReducerOptions",
                                                                                        keepDims=True)), Q_OUT),
})


def rows(kind: str, size: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    if kind == "float32":
        return rng.normal(0, 3, size=(n, size)).astype(np.float32)
    if kind == "16x8":
        return rng.integers(-32768, 32768, size=(n, size)).astype(np.int16)
    return rng.integers(-128, 128, size=(n, size)).astype(np.int8)


def measure(op: str, kind: str, targets: list[str], n: int) -> str:
    if op in ("QUANTIZE", "DEQUANTIZE") and kind == "float32":
        return "not applicable"
    data = PROBES[op](kind)
    if data is None:
        return NO_MODEL.get((op, kind), "not measured (no model of this type here)")
    subgraph = schema.Model.GetRootAsModel(data, 0).Subgraphs(0)
    first = subgraph.Tensors(int(subgraph.Inputs(0)))
    shape = tuple(first.ShapeAsNumpy())
    real_input = first.Type() == schema.TensorType.FLOAT32
    X = rows("float32" if real_input else kind, int(np.prod(shape)), n)
    if op == "RSQRT" and kind == "int8":  # a code below the zero point stops tflite-micro's Invoke (tested apart)
        X = np.maximum(X, Q_IN[1]).astype(X.dtype)
    try:
        want = tflm_joined_outputs(data, [[x.reshape(shape)] for x in X]).reshape(n, -1)  # every output, joined
    except RuntimeError:  # TFLite Micro's kernel does not take this type: neither may tinycc-ml
        with tempfile.TemporaryDirectory() as work:
            path = Path(work) / "op.tflite"
            path.write_bytes(data)
            try:
                tinycc_ml.load_model(path)
            except TinyccError:
                return "not applicable (tflite-micro refuses it; refused here too)"
        return "ACCEPTED, though tflite-micro refuses it"
    exact = []
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "op.tflite"
        path.write_bytes(data)
        for target in targets:
            try:
                result = tinycc_ml.compile(path, target=target, out_dir=Path(work) / target, name="op",
                                           precision={"float32": "float", "16x8": "int16"}.get(kind, "int8"))
                if target == "host":
                    got = (result.load().run_raw(X)[0] if not (kind == "float32" or real_input)
                           else result.load().scores(X))
                else:  # the simulators take real rows, quantised by the build as its input says
                    model = tinycc_ml.load_model(path)
                    x = model.graph.type(model.input_name).dtype
                    real = (X.astype(np.float64) if kind == "float32" or real_input
                            else (X.astype(np.float64) - x.zero_point) * x.qscales[0])
                    got = get_backend(target).simulate(Path(work) / target, result.output, real).scores
            except TinyccError as exc:  # the reason, without the temporary file's name
                reason = str(exc).splitlines()[0].split("op.tflite: ", 1)[-1]
                return f"refused on {target}: {reason[:160]}"
            got = np.asarray(got).reshape(n, -1)
            got = got.astype(want.dtype)
            floating = np.issubdtype(want.dtype, np.floating)
            if not np.array_equal(got, want, equal_nan=floating):  # a NaN where tflite-micro has one is equal
                same = (got == want) | (np.isnan(got) & np.isnan(want)) if floating else got == want
                return f"differs on {target} ({int(np.sum(~same))} of {want.size})"
            exact.append({"host": "host", "cortex-m4": "M4", "cortex-m0": "M0", "avr": "AVR"}.get(target, target))
    return "exact: " + " ".join(exact)


SIGNAL_KINDS = ("int16", "int32", "float32")
SIGNAL_TYPES = {"int16": 7, "int32": 2, "float32": 0}


def _signal(op: str, x_shape, y_shape, options, kinds=SIGNAL_KINDS, flag: bool = False, y_kind: str | None = None):
    """A probe of custom operator ``op``: kind -> the model (None where TFLite Micro has no such kernel)."""
    def probe(kind):
        if kind not in kinds:
            return None
        b = TfliteBuilder()
        x = b.tensor(x_shape, "int16" if kind == "int32" else kind, scale=None, name="x")
        if kind == "int32":
            wide = b.tensor(x_shape, "int32", scale=None, name="wide")
            b.op(OP.CAST, [x], [wide])
        outs = [b.tensor(y_shape, y_kind or kind, scale=None, name="y")]
        if flag:
            outs.append(b.tensor((), "bool", scale=None, name="valid"))
        b.custom_op(op, [wide if kind == "int32" else x], outs,
                    {**options, **({"T": SIGNAL_TYPES[kind]} if "T" in options else {})})
        return b.finish([x], outs[:1])
    return probe


SIGNAL_PROBES = {
    "SignalRfft": _signal("SignalRfft", (60,), (66,), {"T": 0, "fft_length": 64}),
    "SignalIrfft": _signal("SignalIrfft", (66,), (64,), {"T": 0, "fft_length": 64}),
    "SignalWindow": None,  # with a constant operand: tests/ops/signal (the micro_speech preprocessors)
    "SignalFramer": _signal("SignalFramer", (320,), (2, 400), {"frame_size": 400, "frame_step": 160,
                                                               "prefill": True}, ("int16",), flag=True),
    "SignalStacker": _signal("SignalStacker", (8,), (24,), {"num_channels": 8, "stacker_left_context": 2,
                                                            "stacker_right_context": 0, "stacker_step": 1},
                             ("int16",), flag=True),
    "SignalDelay": _signal("SignalDelay", (2, 6), (2, 6), {"delay_length": 9}, ("int16",)),
    "SignalOverlapAdd": _signal("SignalOverlapAdd", (2, 8), (6,), {"T": 0, "frame_step": 3}, ("int16", "float32")),
    "SignalFftAutoScale": None, "SignalEnergy": None, "SignalFilterBank": None, "SignalFilterBankSquareRoot": None,
    "SignalFilterBankSpectralSubtraction": None, "SignalPCAN": None, "SignalFilterBankLog": None,
}
SIGNAL_IN_PREPROCESSOR = "exact in the micro_speech int16 front ends (tests/ops/signal)"


def measure_signal(op: str, kind: str, targets: list[str], n: int) -> str:
    """One signal operator at one element type over a stream of n calls, on each target."""
    if SIGNAL_PROBES[op] is None:
        return SIGNAL_IN_PREPROCESSOR if kind == "int16" else "not applicable"
    data = SIGNAL_PROBES[op](kind)
    if data is None:
        return "not applicable (no such kernel)"
    first = schema.Model.GetRootAsModel(data, 0).Subgraphs(0).Tensors(0)
    shape = tuple(first.ShapeAsNumpy())
    X = rows("float32" if kind == "float32" else "16x8", int(np.prod(shape)), n)
    (want,) = tflite_micro_outputs(data, X.reshape(n, *shape))  # one interpreter: its state carried
    exact = []
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "op.tflite"
        path.write_bytes(data)
        for target in targets:
            try:
                result = tinycc_ml.compile(path, target=target, out_dir=Path(work) / target, name="op")
                got = (result.load().run_raw(X)[0] if target == "host" else
                       get_backend(target).simulate(Path(work) / target, result.output, X.astype(np.float64)).scores)
            except TinyccError as exc:  # the reason, without the temporary file's name
                reason = str(exc).splitlines()[0].split("op.tflite: ", 1)[-1]
                return f"refused on {target}: {reason[:160]}"
            got = np.asarray(got).reshape(n, -1).astype(want.dtype)
            if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):  # every bit, floats included
                return f"differs on {target} ({int(np.sum(got != want))} of {want.size})"
            exact.append({"host": "host", "cortex-m4": "M4", "cortex-m0": "M0", "avr": "AVR"}.get(target, target))
    return "exact: " + " ".join(exact)


def signal_table(targets: list[str], n: int) -> list[list[str]]:
    table = []
    for op in SIGNAL_PROBES:
        table.append([op, *(measure_signal(op, kind, targets, n) for kind in SIGNAL_KINDS)])
        print(f"  {op}: {table[-1][1:]}", flush=True)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="host,cortex-m4,cortex-m0")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--signal-only", action="store_true", help="measure the signal library's table alone")
    parser.add_argument("--ops", help="measure these operators alone (comma-separated; the table is not written)")
    args = parser.parse_args()
    if args.ops:
        for op in args.ops.split(","):
            print(f"  {op}: {[measure(op, kind, args.targets.split(','), args.rows) for kind in KINDS]}", flush=True)
        return
    targets = args.targets.split(",")
    results = None if args.no_write else Path(__file__).parent / "results"
    write_table("tflite_signal_coverage", ["custom operator", *SIGNAL_KINDS], signal_table(targets, args.rows),
                script=f"benchmarks/tflite_coverage.py --targets {args.targets} --rows {args.rows}",
                results_dir=results)
    if args.signal_only:
        return
    table = []
    for op in RESOLVER:
        if op not in PROBES:
            table.append([op, "not supported", "not supported", "not supported"])
            continue
        table.append([op, *(measure(op, kind, targets, args.rows) for kind in KINDS)])
        print(f"  {op}: {table[-1][1:]}", flush=True)
    supported = sum(1 for row in table if any(cell.startswith("exact") for cell in row[1:]))
    print(f"{supported} of {len(RESOLVER)} operators compile exactly at some type")
    write_table("tflite_coverage", ["operator", *KINDS], table,
                script=f"benchmarks/tflite_coverage.py --targets {args.targets} --rows {args.rows}",
                results_dir=None if args.no_write else Path(__file__).parent / "results")


if __name__ == "__main__":
    main()
