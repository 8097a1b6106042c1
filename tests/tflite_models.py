"""Small int8 .tflite models built in the tests (flatbuffers' object API of TFLite's schema, as tflite-micro
ships it): the one-operator networks the reader's lowering is checked on against tflite-micro, and seeds of
the hostile-file fuzzer (tests/tflite_fuzzing.py).

``TfliteBuilder`` adds tensors (int8 activations, int8 filters per channel or per tensor, int32 biases at
input scale x filter scale, as TFLite's converter writes them) and operators, and packs the model.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
from tflite_micro.python.tflite_micro import runtime

from tests.tflite_builder import NetBuilder, tflm_raw_outputs

schema = runtime.schema_fb
TYPES = {"float32": 0, "int32": 2, "int8": 9, "int64": 4, "int16": 7, "uint32": 15, "uint64": 12, "bool": 6}
REPO = Path(__file__).resolve().parents[1]
# MLPerf Tiny's four int8 models, kept in the repository (data/mlperf-tiny/README.md: provenance, license)
MLPERF_MODELS = REPO / "data" / "mlperf-tiny"
MLPERF = ("kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8")


def packed(model) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def unpacked(data: bytes):
    """The object form of a .tflite file's bytes (to edit, then ``packed``)."""
    return schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))


class TfliteBuilder:
    def __init__(self):
        self.model = schema.ModelT()
        self.model.version = 3
        self.model.operatorCodes, self.model.buffers = [], [schema.BufferT()]  # buffer 0: no data
        self.sub = schema.SubGraphT()
        self.sub.tensors, self.sub.operators = [], []
        self.model.subgraphs = [self.sub]

    def tensor(self, shape, kind: str = "int8", scale=0.05, zero_point=0, data=None, axis: int = 0,
               name: str | None = None) -> int:
        t = schema.TensorT()
        t.shape = np.asarray(shape, dtype=np.int32)
        t.type = TYPES[kind]
        t.name = (name or f"t{len(self.sub.tensors)}").encode()
        t.buffer = 0
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).astype(np.dtype(kind).newbyteorder("<"))
                                        .tobytes(), dtype=np.uint8)
            self.model.buffers.append(buffer)
            t.buffer = len(self.model.buffers) - 1
        if scale is not None and kind != "float32":
            q = schema.QuantizationParametersT()
            q.scale = np.atleast_1d(np.asarray(scale, dtype=np.float32))
            q.zeroPoint = np.atleast_1d(np.asarray(zero_point, dtype=np.int64))
            if q.zeroPoint.size != q.scale.size:
                q.zeroPoint = np.full(q.scale.size, int(q.zeroPoint[0]), dtype=np.int64)
            q.quantizedDimension = axis
            t.quantization = q
        self.sub.tensors.append(t)
        return len(self.sub.tensors) - 1

    def filters(self, rng, shape, axis: int, per_channel: bool = True) -> int:
        scales = rng.uniform(0.002, 0.05, size=shape[axis] if per_channel else 1)
        return self.tensor(shape, scale=scales, data=rng.integers(-127, 128, size=shape), axis=axis)

    def bias(self, rng, x: int, w: int, channels: int, bits: int = 32) -> int:
        """int32 biases (``bits`` 64: a 16x8 layer's int64 ones, 256 times the reach)."""
        x_scale = float(self.sub.tensors[x].quantization.scale[0])
        w_scales = np.asarray(self.sub.tensors[w].quantization.scale)  # one per channel, or one
        reach = 3000 if bits == 32 else 3000 * 256
        return self.tensor((channels,), f"int{bits}", scale=np.float32(x_scale * w_scales),
                           data=rng.integers(-reach, reach, size=channels))

    def op(self, code: int, inputs, outputs, options_type: int = 0, options=None) -> None:
        codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in self.model.operatorCodes]
        if code not in codes:
            opcode = schema.OperatorCodeT()
            opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), 1
            self.model.operatorCodes.append(opcode)
            codes.append(code)
        op = schema.OperatorT()
        op.opcodeIndex = codes.index(code)
        op.inputs = np.asarray(inputs, dtype=np.int32)
        op.outputs = np.asarray(outputs, dtype=np.int32)
        op.builtinOptionsType, op.builtinOptions = options_type, options
        self.sub.operators.append(op)

    def custom_op(self, name: str, inputs, outputs, options: dict | None = None) -> None:
        """A custom operator (TFLite Micro's signal library: "SignalRfft", ...) with its options as a FlexBuffer map."""
        from flatbuffers import flexbuffers

        codes = [c.customCode.decode() if c.customCode else None for c in self.model.operatorCodes]
        if name not in codes:
            opcode = schema.OperatorCodeT()
            opcode.builtinCode = opcode.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
            opcode.customCode, opcode.version = name.encode(), 1
            self.model.operatorCodes.append(opcode)
            codes.append(name)
        op = schema.OperatorT()
        op.opcodeIndex = codes.index(name)
        op.inputs = np.asarray(inputs, dtype=np.int32)
        op.outputs = np.asarray(outputs, dtype=np.int32)
        op.customOptions = np.frombuffer(bytes(flexbuffers.Dumps(options or {})), dtype=np.uint8)
        self.sub.operators.append(op)

    def finish(self, inputs, outputs) -> bytes:
        self.sub.inputs = np.asarray(inputs, dtype=np.int32)
        self.sub.outputs = np.asarray(outputs, dtype=np.int32)
        return packed(self.model)


def options(kind: str, **fields):
    """A builtin options object (``Conv2DOptionsT`` ...) with ``fields`` set (camelCase names)."""
    made = getattr(schema, f"{kind}T")()
    for key, value in fields.items():
        setattr(made, key, value)
    return made


def conv_net(seed: int = 0) -> bytes:
    """CONV_2D (per-channel, relu6) -> DEPTHWISE_CONV_2D -> AVERAGE_POOL_2D -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    op = schema.BuiltinOperator
    x = b.tensor((1, 8, 8, 3), scale=0.04, zero_point=-3, name="x")
    w = b.filters(rng, (4, 3, 3, 3), 0)
    conv = b.tensor((1, 4, 4, 4), scale=0.03, zero_point=-128, name="conv")
    b.op(op.CONV_2D, [x, w, b.bias(rng, x, w, 4)], [conv], schema.BuiltinOptions.Conv2DOptions,
         options("Conv2DOptions", padding=0, strideW=2, strideH=2, fusedActivationFunction=3,
                 dilationWFactor=1, dilationHFactor=1))
    dw = b.filters(rng, (1, 3, 3, 8), 3)
    depth = b.tensor((1, 4, 4, 8), scale=0.05, zero_point=5, name="depthwise")
    b.op(op.DEPTHWISE_CONV_2D, [conv, dw, b.bias(rng, conv, dw, 8)], [depth],
         schema.BuiltinOptions.DepthwiseConv2DOptions,
         options("DepthwiseConv2DOptions", padding=0, strideW=1, strideH=1, depthMultiplier=2,
                 fusedActivationFunction=1, dilationWFactor=1, dilationHFactor=1))
    pool = b.tensor((1, 2, 2, 8), scale=0.05, zero_point=5, name="pool")
    b.op(op.AVERAGE_POOL_2D, [depth], [pool], schema.BuiltinOptions.Pool2DOptions,
         options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=2))
    shape = b.tensor((2,), "int32", scale=None, data=np.array([1, 32]), name="shape")
    flat = b.tensor((1, 32), scale=0.05, zero_point=5, name="flat")
    b.op(op.RESHAPE, [pool, shape], [flat])
    fw = b.filters(rng, (5, 32), 0, per_channel=False)
    fc = b.tensor((1, 5), scale=0.1, zero_point=-7, name="logits")
    b.op(op.FULLY_CONNECTED, [flat, fw, b.bias(rng, flat, fw, 5)], [fc], schema.BuiltinOptions.FullyConnectedOptions,
         options("FullyConnectedOptions"))
    out = b.tensor((1, 5), scale=1 / 256, zero_point=-128, name="probabilities")
    b.op(op.SOFTMAX, [fc], [out], schema.BuiltinOptions.SoftmaxOptions, options("SoftmaxOptions", beta=1.0))
    return b.finish([x], [out])


def add_net(seed: int = 1) -> bytes:
    """A residual block: CONV_2D (per-tensor, valid) and ADD of the input with it (relu)."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    op = schema.BuiltinOperator
    x = b.tensor((1, 5, 5, 2), scale=0.02, zero_point=10, name="x")
    w = b.filters(rng, (2, 1, 1, 2), 0, per_channel=False)
    conv = b.tensor((1, 5, 5, 2), scale=0.03, zero_point=-2, name="conv")
    b.op(op.CONV_2D, [x, w, b.bias(rng, x, w, 2)], [conv], schema.BuiltinOptions.Conv2DOptions,
         options("Conv2DOptions", padding=1, strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1))
    out = b.tensor((1, 5, 5, 2), scale=0.04, zero_point=-20, name="sum")
    b.op(op.ADD, [x, conv], [out], schema.BuiltinOptions.AddOptions,
         options("AddOptions", fusedActivationFunction=1))
    return b.finish([x], [out])


def pool_net(seed: int = 2) -> bytes:
    """CONV_2D -> PAD -> MAX_POOL_2D -> RELU -> RELU6, CONCATENATION of the two -> MEAN (GlobalAveragePooling2D)
    -> FULLY_CONNECTED."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    op = schema.BuiltinOperator
    x = b.tensor((1, 6, 6, 2), scale=0.03, zero_point=4, name="x")
    w = b.filters(rng, (4, 3, 3, 2), 0)
    conv = b.tensor((1, 6, 6, 4), scale=0.05, zero_point=-9, name="conv")
    b.op(op.CONV_2D, [x, w, b.bias(rng, x, w, 4)], [conv], schema.BuiltinOptions.Conv2DOptions,
         options("Conv2DOptions", padding=0, strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1))
    paddings = b.tensor((4, 2), "int32", scale=None, data=np.array([[0, 0], [1, 1], [0, 2], [0, 0]]), name="paddings")
    padded = b.tensor((1, 8, 8, 4), scale=0.05, zero_point=-9, name="padded")
    b.op(op.PAD, [conv, paddings], [padded], schema.BuiltinOptions.PadOptions, options("PadOptions"))
    pooled = b.tensor((1, 4, 4, 4), scale=0.05, zero_point=-9, name="pooled")
    b.op(op.MAX_POOL_2D, [padded], [pooled], schema.BuiltinOptions.Pool2DOptions,
         options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=2))
    relu = b.tensor((1, 4, 4, 4), scale=0.04, zero_point=-128, name="relu")
    b.op(op.RELU, [pooled], [relu])
    relu6 = b.tensor((1, 4, 4, 4), scale=0.04, zero_point=-128, name="relu6")
    b.op(op.RELU6, [relu], [relu6])
    both = b.tensor((1, 4, 4, 8), scale=0.04, zero_point=-128, name="both")
    b.op(op.CONCATENATION, [relu, relu6], [both], schema.BuiltinOptions.ConcatenationOptions,
         options("ConcatenationOptions", axis=3))
    axes = b.tensor((2,), "int32", scale=None, data=np.array([1, 2]), name="axes")
    mean = b.tensor((1, 8), scale=0.03, zero_point=-100, name="mean")
    b.op(op.MEAN, [both, axes], [mean], schema.BuiltinOptions.ReducerOptions, options("ReducerOptions"))
    fw = b.filters(rng, (3, 8), 0, per_channel=False)
    out = b.tensor((1, 3), scale=0.1, zero_point=0, name="out")
    b.op(op.FULLY_CONNECTED, [mean, fw, b.bias(rng, mean, fw, 3)], [out], schema.BuiltinOptions.FullyConnectedOptions,
         options("FullyConnectedOptions"))
    return b.finish([x], [out])


def tflite_micro_outputs(data: bytes, X: np.ndarray) -> np.ndarray:
    """tflite-micro's interpreter (its reference kernels) on each row of X."""
    return tflm_raw_outputs(data, X)


def ds_cnn_1d(seed: int = 5) -> bytes:
    """A 1-D depthwise-separable CNN over 98 frames of 10 features, laid out as Keras' Conv1D converts ([1, 1, T, C]):
    CONV_2D 1x5 stride 2 (64 channels), four blocks of DEPTHWISE_CONV_2D 1x3 and pointwise CONV_2D (relu), the
    average over time, FULLY_CONNECTED (12), SOFTMAX."""
    n = NetBuilder(seed)
    y = n.conv(n.input((1, 98, 10)), 64, (1, 5), (1, 2), activation="relu")
    for _ in range(4):
        y = n.depthwise(y, 1, (1, 3), activation="relu")
        y = n.conv(y, 64, (1, 1), activation="relu")
    y = n.average_pool(y, (1, 49), (1, 49))
    return n.finish(n.softmax(n.fc(n.flatten(y), 12)))
