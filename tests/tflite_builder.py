"""Small int8 TFLite networks built in the tests (flatbuffers through the schema's object API, as
tests/importers/test_tflite.py packs its edited models), and tflite-micro's outputs for them: the oracle
the C of a network is compared with on each target.

    net = NetBuilder(seed=3)
    x = net.input((8, 8, 3))
    y = net.conv(x, 4, (3, 3), stride=(2, 1), padding="same", activation="relu6")
    data = net.finish(net.softmax(net.fc(net.flatten(y), 5)))

Each layer's output scale is chosen from its operands' so that random int8 inputs give outputs spread
over the int8 range (neither all saturated nor all zero), which is where requantisation errors would show.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from tflite_micro.python.tflite_micro import runtime

schema = runtime.schema_fb
ACTIVATIONS = {"none": 0, "relu": 1, "relu6": 3}
# tflite-micro's arena for the tests' small models (its default, ten times the file, is too small for a model whose
# tensors outgrow its few weights: a PAD or TRANSPOSE of a drawn shape)
ARENA_BYTES = 1 << 20
PADDINGS = {"same": 0, "valid": 1}
INPUT_SPREAD = 74.0  # standard deviation of uniform int8 values
OUTPUT_SPREAD = 40.0  # aimed standard deviation of a layer's int8 outputs


def tflm_raw_outputs(data: bytes, X) -> np.ndarray:
    """tflite-micro's interpreter (its reference kernels) on each row of X, given and returned as they are."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES)
    outs = []
    for x in X:
        interpreter.set_input(x, 0)
        interpreter.invoke()
        outs.append(interpreter.get_output(0).copy())
    return np.stack(outs)


def tflm_joined_outputs(data: bytes, rows: list[list[np.ndarray]]) -> np.ndarray:
    """tflite-micro's outputs, flattened and joined in order, for each row of inputs."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES)
    n_out = len(runtime.schema_fb.Model.GetRootAsModel(data, 0).Subgraphs(0).OutputsAsNumpy())
    joined = []
    for inputs in rows:
        for k, x in enumerate(inputs):
            interpreter.set_input(x, k)
        interpreter.invoke()
        joined.append(np.concatenate([interpreter.get_output(k).reshape(-1).copy() for k in range(n_out)]))
    return np.stack(joined)


def tflm_outputs(data: bytes, X: np.ndarray) -> np.ndarray:
    """tflite-micro's output 0 (flattened) for each int8 row of X, each row reshaped to the input's shape."""
    shape = runtime.Interpreter.from_bytes(data).get_input_details(0)["shape"]
    rows = [np.asarray(x, dtype=np.int8).reshape(shape) for x in X]
    return tflm_raw_outputs(data, rows).reshape(len(rows), -1)


class NetBuilder:
    """A one-subgraph int8 model, layer by layer; tensors by index, shapes NHWC with batch 1."""

    def __init__(self, seed: int = 0, bias_reach: int = 3000, activation_bits: int = 8, bias_bits: int = 32):
        """``activation_bits`` 16: TFLite's 16x8 quantisation (int16 activations, zero points 0, int8 weights,
        ``bias_bits`` 64 or 32)."""
        self.rng = np.random.default_rng(seed)
        self.activation_bits, self.bias_bits = activation_bits, bias_bits
        self.unit = 256 if activation_bits == 16 else 1  # an int16 value's spread per int8 value's
        self.bias_reach = bias_reach * self.unit  # biases drawn from [-bias_reach, bias_reach)
        self.activation_type = schema.TensorType.INT16 if activation_bits == 16 else schema.TensorType.INT8
        self.buffers = [schema.BufferT()]
        self.tensors: list = []
        self.shapes: list[tuple[int, ...]] = []
        self.scales: list[float] = []
        self.spreads: list[float] = []  # the int8 values' standard deviation each tensor is expected to have
        self.operators: list = []
        self.codes: list[int] = []
        self.inputs: list[int] = []

    # ---- tensors
    def tensor(self, shape, scale, zero_point, dtype=schema.TensorType.INT8, data: np.ndarray | None = None,
               axis: int = 0) -> int:
        t = schema.TensorT()
        t.shape = list(shape)
        t.type = dtype
        t.name = f"t{len(self.tensors)}"
        q = schema.QuantizationParametersT()
        q.scale = [float(s) for s in np.atleast_1d(scale)]
        q.zeroPoint = [int(z) for z in np.broadcast_to(zero_point, (len(q.scale),))]
        q.quantizedDimension = axis
        t.quantization = q
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8).tolist()
            self.buffers.append(buffer)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        self.shapes.append(tuple(shape))
        self.scales.append(float(np.mean(np.atleast_1d(scale))))
        self.spreads.append(OUTPUT_SPREAD * self.unit)
        return len(self.tensors) - 1

    def activation_tensor(self, shape, scale) -> int:
        if self.activation_bits == 16:  # TFLite's 16-bit activations are symmetric
            return self.tensor(shape, float(np.float32(scale)), 0, self.activation_type)
        return self.tensor(shape, float(np.float32(scale)), int(self.rng.integers(-20, 21)))

    def input(self, shape, scale: float = 0.05, zero_point: int = -3, real: bool = False) -> int:
        """The network's input; ``real``: a float32 input the first operator QUANTIZEs (the returned tensor), as a
        converter writes for inference_input_type float32."""
        if self.activation_bits == 16:
            index = self.tensor((1, *shape), scale / self.unit, 0, self.activation_type)
        else:
            index = self.tensor((1, *shape), scale, zero_point)
        self.spreads[index] = INPUT_SPREAD * self.unit
        if real:
            self.inputs.append(self.float_tensor((1, *shape)))
            self.operator(schema.BuiltinOperator.QUANTIZE, [self.inputs[-1]], index)
        else:
            self.inputs.append(index)
        return index

    def float_tensor(self, shape) -> int:
        t = schema.TensorT()
        t.shape, t.type, t.name = list(shape), schema.TensorType.FLOAT32, f"t{len(self.tensors)}"
        self.tensors.append(t)
        self.shapes.append(tuple(shape))
        self.scales.append(1.0)
        self.spreads.append(1.0)
        return len(self.tensors) - 1

    def dequantize(self, x) -> int:
        """DEQUANTIZE to a float32 output (inference_output_type float32)."""
        return self.operator(schema.BuiltinOperator.DEQUANTIZE, [x], self.float_tensor(self.shapes[x]))

    def requantize(self, x, scale: float, bits: int) -> int:
        """QUANTIZE of an integer tensor to another scale (and width: ``bits``)."""
        dtype = schema.TensorType.INT16 if bits == 16 else schema.TensorType.INT8
        out = self.tensor(self.shapes[x], float(np.float32(scale)), 0 if bits == 16 else 5, dtype)
        return self.operator(schema.BuiltinOperator.QUANTIZE, [x], out)

    def operator(self, code: int, inputs, output: int, options_type: int = 0, options=None) -> int:
        if code not in self.codes:
            self.codes.append(code)
        op = schema.OperatorT()
        op.opcodeIndex = self.codes.index(code)
        op.inputs, op.outputs = [int(i) for i in inputs], [output]
        op.builtinOptionsType, op.builtinOptions = options_type, options
        self.operators.append(op)
        return output

    def weights(self, shape, channels: int, axis: int, per_channel: bool, fan_in: int, x: int, activation: str):
        """int8 filters, their scales (per channel or one), the int32 bias and the output scale."""
        w = self.rng.integers(-127, 128, size=shape).astype(np.int8)
        w_scales = self.rng.uniform(0.002, 0.02, size=channels if per_channel else 1)
        x_scale = self.scales[x]
        if activation == "relu6":  # real outputs spread over about [-3, 3]: relu6's clamp at 6 cuts a few
            w_scales *= 3.0 / (self.spreads[x] * 73.0 * np.sqrt(fan_in) * x_scale * float(np.mean(w_scales)))
        w_tensor = self.tensor(shape, w_scales, 0, data=w, axis=axis if per_channel else 0)
        b_scales = np.broadcast_to(np.float32(x_scale) * w_scales.astype(np.float32), (channels,))
        wide = self.bias_bits == 64
        bias = self.rng.integers(-self.bias_reach, self.bias_reach, size=channels)
        bias = bias.astype(np.int64 if wide else np.int32)
        b_tensor = self.tensor((channels,), b_scales if per_channel else b_scales[:1], 0,
                               schema.TensorType.INT64 if wide else schema.TensorType.INT32, bias, 0)
        spread = self.spreads[x] * 73.0 * np.sqrt(fan_in) * x_scale * float(np.mean(w_scales))
        return w_tensor, b_tensor, spread / (OUTPUT_SPREAD * self.unit)

    # ---- layers
    @staticmethod
    def out_size(n, k, stride, dilation, padding):
        reach = (k - 1) * dilation + 1
        return -(-n // stride) if padding == "same" else -(-(n - reach + 1) // stride)

    def conv(self, x, channels, kernel=(3, 3), stride=(1, 1), dilation=(1, 1), padding="same", activation="none",
             per_channel=True) -> int:
        _, h, w, c = self.shapes[x]
        wt, bt, scale = self.weights((channels, *kernel, c), channels, 0, per_channel, kernel[0] * kernel[1] * c, x,
                                      activation)
        oh, ow = (self.out_size(n, k, s, d, padding) for n, k, s, d in zip((h, w), kernel, stride, dilation))
        out = self.activation_tensor((1, oh, ow, channels), scale)
        options = schema.Conv2DOptionsT()
        options.padding, options.strideH, options.strideW = PADDINGS[padding], stride[0], stride[1]
        options.dilationHFactor, options.dilationWFactor = dilation
        options.fusedActivationFunction = ACTIVATIONS[activation]
        return self.operator(schema.BuiltinOperator.CONV_2D, [x, wt, bt], out, schema.BuiltinOptions.Conv2DOptions,
                             options)

    def depthwise(self, x, multiplier=1, kernel=(3, 3), stride=(1, 1), dilation=(1, 1), padding="same",
                  activation="none", per_channel=True) -> int:
        _, h, w, c = self.shapes[x]
        channels = c * multiplier
        wt, bt, scale = self.weights((1, *kernel, channels), channels, 3, per_channel, kernel[0] * kernel[1], x,
                                      activation)
        oh, ow = (self.out_size(n, k, s, d, padding) for n, k, s, d in zip((h, w), kernel, stride, dilation))
        out = self.activation_tensor((1, oh, ow, channels), scale)
        options = schema.DepthwiseConv2DOptionsT()
        options.padding, options.strideH, options.strideW = PADDINGS[padding], stride[0], stride[1]
        options.dilationHFactor, options.dilationWFactor = dilation
        options.depthMultiplier = multiplier
        options.fusedActivationFunction = ACTIVATIONS[activation]
        return self.operator(schema.BuiltinOperator.DEPTHWISE_CONV_2D, [x, wt, bt], out,
                             schema.BuiltinOptions.DepthwiseConv2DOptions, options)

    def average_pool(self, x, window=(2, 2), stride=(2, 2), padding="valid", activation="none") -> int:
        return self.pool(schema.BuiltinOperator.AVERAGE_POOL_2D, x, window, stride, padding, activation)

    def max_pool(self, x, window=(2, 2), stride=(2, 2), padding="valid", activation="none") -> int:
        return self.pool(schema.BuiltinOperator.MAX_POOL_2D, x, window, stride, padding, activation)

    def pool(self, code: int, x, window, stride, padding: str, activation: str) -> int:
        _, h, w, c = self.shapes[x]
        oh, ow = (self.out_size(n, k, s, 1, padding) for n, k, s in zip((h, w), window, stride))
        t = self.tensors[x].quantization  # TFLite's quantised pooling keeps its input's quantisation
        out = self.tensor((1, oh, ow, c), t.scale[0], t.zeroPoint[0], self.activation_type)
        options = schema.Pool2DOptionsT()
        options.padding, options.strideH, options.strideW = PADDINGS[padding], stride[0], stride[1]
        options.filterHeight, options.filterWidth = window
        options.fusedActivationFunction = ACTIVATIONS[activation]
        return self.operator(code, [x], out, schema.BuiltinOptions.Pool2DOptions, options)

    def flatten(self, x) -> int:
        size = int(np.prod(self.shapes[x]))
        t = self.tensors[x].quantization
        out = self.tensor((1, size), t.scale[0], t.zeroPoint[0], self.activation_type)
        options = schema.ReshapeOptionsT()
        options.newShape = [1, size]
        return self.operator(schema.BuiltinOperator.RESHAPE, [x], out, schema.BuiltinOptions.ReshapeOptions, options)

    def fc(self, x, units, activation="none") -> int:
        depth = self.shapes[x][-1]
        wt, bt, scale = self.weights((units, depth), units, 0, False, depth, x, activation)
        out = self.activation_tensor((1, units), scale)
        options = schema.FullyConnectedOptionsT()
        options.fusedActivationFunction = ACTIVATIONS[activation]
        return self.operator(schema.BuiltinOperator.FULLY_CONNECTED, [x, wt, bt], out,
                             schema.BuiltinOptions.FullyConnectedOptions, options)

    def add(self, a, b, activation="none") -> int:
        assert self.shapes[a] == self.shapes[b]
        out = self.activation_tensor(self.shapes[a], 1.2 * max(self.scales[a], self.scales[b]))
        options = schema.AddOptionsT()
        options.fusedActivationFunction = ACTIVATIONS[activation]
        return self.operator(schema.BuiltinOperator.ADD, [a, b], out, schema.BuiltinOptions.AddOptions, options)

    def softmax(self, x, spread: float = 2.0) -> int:
        """Softmax with beta such that the logits' expected spread is ``spread`` (not one class saturating)."""
        # what TFLite's int8 (int16) softmax requires
        out = (self.tensor(self.shapes[x], 1 / 32768, 0, self.activation_type) if self.activation_bits == 16
               else self.tensor(self.shapes[x], 1 / 256, -128))
        options = schema.SoftmaxOptionsT()
        options.beta = float(np.float32(spread / (self.spreads[x] * self.scales[x])))
        return self.operator(schema.BuiltinOperator.SOFTMAX, [x], out, schema.BuiltinOptions.SoftmaxOptions, options)

    # ---- the file
    def finish(self, output: int) -> bytes:
        sub = schema.SubGraphT()
        sub.tensors, sub.inputs, sub.outputs, sub.operators = self.tensors, self.inputs, [output], self.operators
        model = schema.ModelT()
        model.version = 3
        model.subgraphs, model.buffers = [sub], self.buffers
        model.operatorCodes = []
        for code in self.codes:
            oc = schema.OperatorCodeT()
            oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
            model.operatorCodes.append(oc)
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def float_model(seed: int = 0, softmax: bool = True) -> bytes:
    """A float32 network (CONV_2D stride 2 + relu, RESHAPE, FULLY_CONNECTED, SOFTMAX unless ``softmax`` is
    False; 8x8x2 input), as a converter writes one without quantisation: what the project quantises from
    calibration rows."""
    rng = np.random.default_rng(seed)
    buffers, tensors, operators, codes = [schema.BufferT()], [], [], []

    def tensor(shape, data=None, dtype=schema.TensorType.FLOAT32) -> int:
        t = schema.TensorT()
        t.shape, t.type, t.name = list(shape), dtype, f"t{len(tensors)}"
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8).tolist()
            buffers.append(buffer)
            t.buffer = len(buffers) - 1
        tensors.append(t)
        return len(tensors) - 1

    def operator(code, inputs, output, options_type, options) -> None:
        if code not in codes:
            codes.append(code)
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = codes.index(code), list(inputs), [output]
        op.builtinOptionsType, op.builtinOptions = options_type, options
        operators.append(op)

    def weights(*shape, spread: float) -> int:
        return tensor(shape, rng.normal(0, spread, shape).astype(np.float32))

    x, conv = tensor((1, 8, 8, 2)), tensor((1, 4, 4, 4))
    options = schema.Conv2DOptionsT()
    options.padding, options.strideH, options.strideW = PADDINGS["same"], 2, 2
    options.dilationHFactor = options.dilationWFactor = 1
    options.fusedActivationFunction = ACTIVATIONS["relu"]
    operator(schema.BuiltinOperator.CONV_2D, [x, weights(4, 3, 3, 2, spread=0.3), weights(4, spread=0.1)], conv,
             schema.BuiltinOptions.Conv2DOptions, options)
    flat = tensor((1, 64))
    reshape = schema.ReshapeOptionsT()
    reshape.newShape = [1, 64]
    shape = tensor((2,), np.array([1, 64], np.int32), schema.TensorType.INT32)
    operator(schema.BuiltinOperator.RESHAPE, [conv, shape], flat, schema.BuiltinOptions.ReshapeOptions, reshape)
    logits, out = tensor((1, 5)), tensor((1, 5))
    operator(schema.BuiltinOperator.FULLY_CONNECTED, [flat, weights(5, 64, spread=0.2), weights(5, spread=0.1)], logits,
             schema.BuiltinOptions.FullyConnectedOptions, schema.FullyConnectedOptionsT())
    if softmax:
        options = schema.SoftmaxOptionsT()
        options.beta = 1.0
        operator(schema.BuiltinOperator.SOFTMAX, [logits], out, schema.BuiltinOptions.SoftmaxOptions, options)
    else:
        out = logits
    subgraph = schema.SubGraphT()
    subgraph.tensors, subgraph.operators, subgraph.inputs, subgraph.outputs = tensors, operators, [x], [out]
    model = schema.ModelT()
    model.version, model.subgraphs, model.buffers, model.operatorCodes = 3, [subgraph], buffers, []
    for code in codes:
        opcode = schema.OperatorCodeT()
        opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), 1
        model.operatorCodes.append(opcode)
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), b"TFL3")
    return bytes(builder.Output())
