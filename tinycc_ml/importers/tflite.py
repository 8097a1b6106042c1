"""TFLite flatbuffers (``.tflite``): int8 networks lowered to the IR's network ops.

The flatbuffer is read here, not by a generated binding: every offset, vector and string is checked
against the file's bounds before it is followed (a truncated or hostile file gives one ModelFileError
naming the file and the problem), and a tensor's element count is checked before anything is
allocated for it. Only what the lowering uses is read (schema: tensorflow/lite/schema/schema.fbs).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tinycc_ml.errors import IRError, ModelFileError
from tinycc_ml.importers.flexbuffers import FlexBufferError, read_map
from tinycc_ml.importers.tflite_names import BUILTIN_OPERATOR_NAMES
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, FixedCall, TypeRuleError
from tinycc_ml.ir.ops.frontends import TFLITE_BUILTINS, TFLITE_CUSTOMS
from tinycc_ml.ir.ops.network.integer_arith import lower_integer
from tinycc_ml.ir.ops.network.shape_constants import broadcast_value
from tinycc_ml.ir.ops.tflite_arith import ACC64_BITS, INT32_MAX, INT32_MIN
from tinycc_ml.ir.types import BOOL, F32, TensorType, integer, quantised
from tinycc_ml.ir.verify import MAX_ELEMENTS, verify
from tinycc_ml.models.network import NetworkModel

MAX_FILE_BYTES = 1 << 30
MAX_CONCATENATED = 64  # inputs of one CONCATENATION (lowered to a chain of two-input concatenations)
MAX_INPUTS = MAX_OUTPUTS = 16  # a network's inputs (one flat input vector) and outputs (one score vector)
MAX_DEPTH = 64  # nested tables followed from the root (a cycle of offsets stops here)
TENSOR_TYPES = {0: ("float32", np.float32), 2: ("int32", np.int32), 9: ("int8", np.int8), 3: ("uint8", np.uint8),
                7: ("int16", np.int16), 4: ("int64", np.int64), 1: ("float16", None), 6: ("bool", np.bool_),
                12: ("uint64", np.uint64), 15: ("uint32", np.uint32), 16: ("uint16", np.uint16),
                13: ("resource", None)}  # resource: a VAR_HANDLE's handle, no data
STORED_AS = {name: numpy_type for name, numpy_type in TENSOR_TYPES.values()} | {"bool": np.uint8}
# integer tensors without quantisation parameters: plain integers (audio samples, spectra, the signal library's)
PLAIN_INTEGERS = {"int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True),
                  "uint8": (8, False), "uint16": (16, False), "uint32": (32, False), "uint64": (64, False)}
ACTIVATIONS = {0: "none", 1: "relu", 3: "relu6"}
ACTIVATION_NAMES = {2: "RELU_N1_TO_1", 4: "TANH", 5: "SIGN_BIT"}
PADDINGS = {0: "same", 1: "valid"}
# the options table each operator reads (schema.fbs' BuiltinOptions union); those marked required have no defaults
# a file may leave out (strides, window sizes: a field the schema gives no default is 0 when absent, and refused)
OPTIONS = {"CONV_2D": (1, True), "DEPTHWISE_CONV_2D": (2, True), "AVERAGE_POOL_2D": (5, True),
           "MAX_POOL_2D": (5, True), "L2_POOL_2D": (5, True), "FULLY_CONNECTED": (8, False), "SOFTMAX": (9, False),
           "CONCATENATION": (10, False), "ADD": (11, False), "RESHAPE": (17, False), "PAD": (22, False),
           "PADV2": (43, False), "MEAN": (27, False), "VAR_HANDLE": (111, False), "CALL_ONCE": (103, False),
           "READ_VARIABLE": (112, False), "ASSIGN_VARIABLE": (113, False), "WHILE": (93, False), "IF": (92, False)}
# (least, most) inputs of each operator (optional ones may be -1)
INPUT_COUNTS = {"CONV_2D": (2, 3), "DEPTHWISE_CONV_2D": (2, 3), "FULLY_CONNECTED": (2, 3), "AVERAGE_POOL_2D": (1, 1),
                "L2_POOL_2D": (1, 1),
                "ADD": (2, 2), "RESHAPE": (1, 2), "SOFTMAX": (1, 1), "MAX_POOL_2D": (1, 1), "PAD": (2, 2),
                "PADV2": (3, 3), "MEAN": (2, 2), "RELU": (1, 1), "RELU6": (1, 1),
                "CONCATENATION": (2, MAX_CONCATENATED), "VAR_HANDLE": (0, 0), "CALL_ONCE": (0, 0),
                "READ_VARIABLE": (1, 1), "ASSIGN_VARIABLE": (2, 2), "WHILE": (1, 64), "IF": (1, 64)}
# beyond one output tensor
OUTPUT_COUNTS = {"ASSIGN_VARIABLE": (0, 0), "CALL_ONCE": (0, 0), "WHILE": (1, 64), "IF": (1, 64)}
OPTIONAL_INPUTS = {"CONV_2D": (2,), "DEPTHWISE_CONV_2D": (2,), "FULLY_CONNECTED": (2,), "RESHAPE": (1,)}  # may be -1
# the axis of an operand's per-channel scales: the operator's, whatever quantized_dimension the file names
# (tflite-micro reads them along it; converters leave a stale one on biases)
FILTER_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}
QUANTISED_TYPES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}  # their widths in the IR's qi types
SMALLEST_SCALE = float(np.finfo(np.float32).tiny)  # a denormal scale flushes every requantisation to zero
SUPPORTED = ("ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
             "MAX_POOL_2D", "L2_POOL_2D", "MEAN", "PAD", "PADV2", "RELU", "RELU6", "RESHAPE", "SOFTMAX", "VAR_HANDLE",
             "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "WHILE", "IF")


class _Bad(Exception):
    """A problem found in the file (the loader adds the file's name)."""


class _Buffer:
    def __init__(self, data: bytes):
        self.data = data

    def need(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise _Bad(f"{what} at byte {offset} (+{size}) runs past the end of the file ({len(self.data)} bytes): "
                       "truncated or corrupt")

    def scalar(self, offset: int, fmt: str, what: str):
        self.need(offset, struct.calcsize(fmt), what)
        return struct.unpack_from("<" + fmt, self.data, offset)[0]


@dataclass
class _Table:
    buf: _Buffer
    pos: int
    what: str
    depth: int = 0

    @classmethod
    def at(cls, buf: _Buffer, pos: int, what: str, depth: int) -> _Table:
        if depth > MAX_DEPTH:
            raise _Bad(f"{what}: tables nested more than {MAX_DEPTH} deep")
        vtable = pos - buf.scalar(pos, "i", what)
        vsize = buf.scalar(vtable, "H", f"{what}'s field table")
        if vsize < 4 or vsize % 2:
            raise _Bad(f"{what}: field table of {vsize} bytes is malformed")
        buf.need(vtable, vsize, f"{what}'s field table")
        return cls(buf, pos, what, depth)

    def _field(self, index: int) -> int:
        vtable = self.pos - self.buf.scalar(self.pos, "i", self.what)
        vsize = self.buf.scalar(vtable, "H", self.what)
        if 4 + 2 * index >= vsize:
            return 0
        return self.buf.scalar(vtable + 4 + 2 * index, "H", self.what)

    def present(self, index: int) -> bool:
        """Whether the field is in the file (a writer leaves out one equal to the schema's default)."""
        return self._field(index) != 0

    def scalar(self, index: int, fmt: str, default, name: str):
        offset = self._field(index)
        return default if offset == 0 else self.buf.scalar(self.pos + offset, fmt, f"{self.what}.{name}")

    def _target(self, index: int, name: str) -> int | None:
        offset = self._field(index)
        if offset == 0:
            return None
        at = self.pos + offset
        return at + self.buf.scalar(at, "I", f"{self.what}.{name}")

    def table(self, index: int, name: str) -> _Table | None:
        target = self._target(index, name)
        return None if target is None else _Table.at(self.buf, target, f"{self.what}.{name}", self.depth + 1)

    def _vector(self, index: int, name: str, item: int) -> tuple[int, int] | None:
        target = self._target(index, name)
        if target is None:
            return None
        count = self.buf.scalar(target, "I", f"{self.what}.{name}")
        self.buf.need(target + 4, count * item, f"{self.what}.{name} ({count} entries)")
        return target + 4, count

    def array(self, index: int, name: str, dtype) -> np.ndarray:
        dtype = np.dtype(dtype).newbyteorder("<")
        found = self._vector(index, name, dtype.itemsize)
        if found is None:
            return np.zeros(0, dtype=dtype)
        start, count = found
        return np.frombuffer(self.buf.data, dtype=dtype, count=count, offset=start).copy()

    def tables(self, index: int, name: str) -> list[_Table]:
        found = self._vector(index, name, 4)
        if found is None:
            return []
        start, count = found
        return [_Table.at(self.buf, start + 4 * i + self.buf.scalar(start + 4 * i, "I", name), f"{name}[{i}]",
                          self.depth + 1) for i in range(count)]

    def string(self, index: int, name: str) -> str:
        found = self._vector(index, name, 1)
        if found is None:
            return ""
        start, count = found
        return self.buf.data[start:start + count].decode("utf-8", errors="replace")


@dataclass
class _Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    type_name: str
    scales: np.ndarray
    zero_points: np.ndarray
    axis: int
    data: np.ndarray | None  # constant contents, typed and shaped
    variable: bool = False  # a variable tensor (an LSTM's state): its data, if any, is its initial value
    dynamic: bool = False  # a dimension below 1 (refused where an operator reads or writes it)


def _read_tensor(t: _Table, index: int, buffers: list[_Table]) -> _Tensor:
    name = t.string(3, "name") or f"tensor{index}"
    shape = tuple(int(d) for d in t.array(0, "shape", np.int32))
    code = t.scalar(1, "b", 0, "type")
    if code not in TENSOR_TYPES:
        raise _Bad(f"tensor {name!r}: unknown element type {code}")
    type_name, dtype = TENSOR_TYPES[code]
    dynamic = any(d <= 0 for d in shape)  # converters leave such tensors as an operator's intermediates
    size = math.prod(max(d, 0) for d in shape)
    if size > MAX_ELEMENTS:
        raise _Bad(f"tensor {name!r}: shape {list(shape)} has {size} elements, over the limit of {MAX_ELEMENTS}")
    q = t.table(4, "quantization")
    scales = q.array(2, "scale", np.float32) if q is not None else np.zeros(0, np.float32)
    zero_points = q.array(3, "zero_point", np.int64) if q is not None else np.zeros(0, np.int64)
    axis = int(q.scalar(6, "i", 0, "quantized_dimension")) if q is not None else 0
    buffer_index = t.scalar(2, "I", 0, "buffer")
    data = None
    if buffer_index >= len(buffers):
        raise _Bad(f"tensor {name!r}: buffer {buffer_index} of {len(buffers)}")
    if buffer_index:
        raw = buffers[buffer_index].array(0, "data", np.uint8)
        if buffers[buffer_index].scalar(1, "Q", 0, "offset"):
            raise _Bad(f"tensor {name!r}: data stored outside the flatbuffer (models over 2 GB) is not supported")
        if raw.size:
            if dtype is None:
                raise _Bad(f"tensor {name!r}: constant {type_name} data is not supported")
            if dynamic or raw.size != size * np.dtype(dtype).itemsize:
                raise _Bad(f"tensor {name!r}: {raw.size} bytes of data for {size} {type_name} elements")
            data = raw.view(np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)
            if type_name == "bool":  # one byte each, held as 0 or 1 (the IR's bool constants are integers)
                data = (raw != 0).astype(np.uint8).reshape(shape)
    return _Tensor(index, name, shape, type_name, scales, zero_points, axis, data,
                   bool(t.scalar(5, "B", 0, "is_variable")), dynamic)


def _options(operator: _Table, op: str, k: int) -> _Table | None:
    """The operator's options table, checked to be of the operator's kind (None: the defaults)."""
    options = operator.table(4, "builtin_options")
    builtin = TFLITE_BUILTINS.get(op)
    expected, required = OPTIONS.get(op, (None, False) if builtin is None else (builtin.options,
                                                                                builtin.options_required))
    kind = operator.scalar(3, "B", 0, "builtin_options_type")
    if options is None:
        if required:
            raise _Bad(f"operator {k} ({op}) has no options (its strides and window are not optional)")
        return None
    if expected is not None and kind != expected:
        raise _Bad(f"operator {k} ({op}): options of union type {kind}, expected {expected}")
    return options


def _opcode_name(code: _Table) -> str:
    deprecated = code.scalar(0, "b", 0, "deprecated_builtin_code")
    builtin = code.scalar(3, "i", 0, "builtin_code")
    number = max(int(deprecated), int(builtin))
    if number == 32:
        return f"CUSTOM ({code.string(1, 'custom_code')})"
    return BUILTIN_OPERATOR_NAMES.get(number, f"builtin operator {number}")


class _Lowering:
    """Turns the subgraph's operators into IR nodes, one per operator (constants become const nodes)."""

    def __init__(self, graph: Graph, tensors: list[_Tensor], variable_inits: dict | None = None):
        self.graph, self.tensors = graph, tensors
        self.values: dict[int, str] = {}
        self.where = "operator"  # the operator being lowered, for messages: "operator 3 (CONV_2D)"
        # resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE): each a state node
        self.handles: dict[int, tuple[str, str]] = {}  # handle tensor -> (container, shared name)
        self.variable_inits = variable_inits or {}  # (container, shared name) -> its initial _Tensor (CALL_ONCE)
        self.variables: dict[tuple[str, str], dict] = {}  # -> state node, its current value, its tensor

    def variable(self, handle: int, like: _Tensor) -> dict:
        """The variable a handle names, as a state node (created at its first use, from the value CALL_ONCE's
        subgraph assigns it)."""
        if handle not in self.handles:
            raise _Bad(f"{self.where}: tensor {self.tensors[handle].name!r} is not a VAR_HANDLE's handle")
        key = self.handles[handle]
        if key not in self.variables:
            init = self.variable_inits.get(key)
            if init is None:
                raise _Bad(f"{self.where}: variable {key[1]!r} is read or written before any initialisation (no "
                           "CALL_ONCE subgraph assigns it)")
            if init.type_name != like.type_name or tuple(init.shape) != tuple(like.shape) \
                    or init.scales.tolist() != like.scales.tolist() \
                    or init.zero_points.tolist() != like.zero_points.tolist():
                raise _Bad(f"{self.where}: variable {key[1]!r} is initialised as {init.type_name}"
                           f"{list(init.shape)} but used as {like.type_name}{list(like.shape)} (or quantised "
                           "otherwise)")
            ty = self.tensor_type(like)
            data = init.data.reshape(-1)
            data = data.astype(np.float32) if ty.dtype.is_float else data.astype(np.int64)
            state = self.graph.add("state", [], {"init": data}, type=TensorType((ty.size,), ty.dtype),
                                   name=_identifier(f"var_{key[1]}"))
            self.variables[key] = {"state": state, "current": state, "tensor": like, "assigned": False}
        return self.variables[key]

    def finish_variables(self) -> None:
        """Each assigned variable's last value as its state's next value."""
        for variable in self.variables.values():
            if variable["assigned"]:
                self.graph.set_next_state(variable["state"], variable["current"])

    def dtype(self, t: _Tensor, axis: int | None = None):
        """The tensor's element type; ``axis``: the operator's axis of per-channel scales (None: per tensor)."""
        if t.type_name == "float32":
            return F32
        if t.type_name == "bool":
            return BOOL
        if t.type_name in PLAIN_INTEGERS and t.scales.size == 0:
            return integer(*PLAIN_INTEGERS[t.type_name])
        if t.type_name not in QUANTISED_TYPES:
            raise _Bad(f"tensor {t.name!r}: {t.type_name} tensors are not supported (int8 networks: int8 values, "
                       "int32 biases; 16x8 networks: int16 values, int8 weights, int64 or int32 biases)")
        if t.scales.size == 0:
            raise _Bad(f"tensor {t.name!r}: {t.type_name} without quantisation parameters")
        bad = [float(s) for s in t.scales if not SMALLEST_SCALE <= float(s) < math.inf]
        if bad:
            raise _Bad(f"tensor {t.name!r}: scale {bad[0]:.3g} is not a positive normal float32")
        if t.zero_points.size == 0:
            raise _Bad(f"tensor {t.name!r}: scales without zero points (tflite-micro reads it as not quantised)")
        bits = QUANTISED_TYPES[t.type_name]
        zero_points = t.zero_points
        if np.any(zero_points != zero_points[0]):
            raise _Bad(f"tensor {t.name!r}: per-channel zero points that differ are not supported")
        if t.scales.size == 1:
            return quantised(bits, t.scales, int(zero_points[0]))
        if axis is None:
            raise _Bad(f"tensor {t.name!r}: per-channel quantisation is supported on filters and biases only")
        if t.shape[axis] != t.scales.size:
            raise _Bad(f"tensor {t.name!r}: {t.scales.size} scales for the {t.shape[axis]} channels on axis {axis} "
                       f"of shape {list(t.shape)}")
        if len(t.shape) > 1 and not (0 <= t.axis < len(t.shape) and t.shape[t.axis] == t.scales.size):
            # a filter's quantized_dimension indexes its shape in tflite-micro's Prepare (a bias has one axis)
            raise _Bad(f"tensor {t.name!r}: quantized_dimension {t.axis} of shape {list(t.shape)} does not hold its "
                       f"{t.scales.size} channels")
        return quantised(bits, t.scales, int(zero_points[0]), axis)

    def tensor_type(self, t: _Tensor, layout: str = "", axis: int | None = None) -> TensorType:
        if t.dynamic:
            raise _Bad(f"tensor {t.name!r}: shape {list(t.shape)} has a dimension below 1 (dynamic shapes are not "
                       "supported)")
        try:
            return TensorType(t.shape, self.dtype(t, axis), layout)
        except ValueError as exc:
            raise _Bad(f"tensor {t.name!r}: {exc}") from None

    def layout(self, t: _Tensor) -> str:
        return {1: "C", 2: "NC", 3: "NWC", 4: "NHWC", 5: "NDHWC"}.get(len(t.shape), "")

    def value(self, index: int, layout: str | None = None, axis: int | None = None) -> str:
        if index in self.values:
            return self.values[index]
        t = self.tensors[index]
        if t.data is None:
            raise _Bad(f"tensor {t.name!r} is read before any operator computes it")
        node = self.graph.add("const", [], {"value": t.data},
                              type=self.tensor_type(t, self.layout(t) if layout is None else layout, axis),
                              name=_identifier(t.name))
        self.values[index] = node
        return node

    def step(self, op: str, inputs: list[str], attrs: dict, shape, like: _Tensor, name: str) -> str:
        """An intermediate node of an operator lowered to several ops: of ``shape``, typed as tensor ``like``."""
        try:
            return self.graph.add(op, inputs, attrs, type=TensorType(tuple(int(d) for d in shape), self.dtype(like)),
                                  name=name)
        except ValueError as exc:
            raise _Bad(f"{self.where} giving {like.name!r}: {exc}") from None

    def ints(self, index: int, op: str, what: str) -> np.ndarray:
        """The values of a constant int32/int64 operand (axes, permutations, shapes)."""
        return _constant_ints(self.tensors[index], op, what)

    def check_accumulator(self, x_index: int, bias_index: int, by_channel: np.ndarray, out: _Tensor,
                          bias_bits: int = 32) -> None:
        """Refuses a layer whose accumulator can leave its range for some input (``_check_accumulator``)."""
        _check_accumulator(self, self.tensors[x_index], bias_index, by_channel, out, bias_bits)

    def name_of(self, t: _Tensor) -> str:
        """A C identifier from the tensor's name (the IR node's name)."""
        return _identifier(t.name)

    def check_bias_type(self, options: _Table | None, index: int, op: str, x_index: int | None = None) -> int:
        return _check_bias_type(options, index, op, None if x_index is None else self.tensors[x_index])

    def activation(self, options: _Table | None, index: int, op: str) -> str:
        """The fused activation an operator's options name at field ``index``."""
        return _activation(options, index, op)

    def bias(self, index: int, channels: int, name: str, real: bool = False, bits: int = 32) -> str:
        """The bias operand; a layer without one gets zeros (float32 ones for a float layer: ``real``; int64 ones
        for a 16x8 layer summing in int64: ``bits``)."""
        if index >= 0:
            return self.value(index, "", axis=0)
        if real:
            return self.graph.add("const", [], {"value": np.zeros(channels, np.float32)},
                                  type=TensorType((channels,), F32), name=f"{name}_no_bias")
        zeros = np.zeros(channels, np.int64 if bits == 64 else np.int32)
        return self.graph.add("const", [], {"value": zeros}, type=TensorType((channels,), quantised(bits, 1.0)),
                              name=f"{name}_no_bias")

    def add(self, op: str, inputs: list[str], attrs: dict, out: _Tensor) -> None:
        """A node computing ``out``: refused unless the op computes the shape the file declares (tflite-micro's
        kernels would read the declared one)."""
        if out.data is not None:  # read as the constant elsewhere, while tflite-micro's operator writes over it
            raise _Bad(f"{self.where} giving {out.name!r}: the tensor holds constant data (its buffer) but an operator "
                       "writes it")
        try:
            node = self.graph.add(op, inputs, attrs, type=self.tensor_type(out, self.layout(out)),
                                  name=_identifier(out.name))
        except ValueError as exc:
            raise _Bad(f"{self.where} giving {out.name!r}: {exc}") from None
        if attrs.get("activation") == "relu6" and out.scales.size:  # a float tensor clamps at 6.0 itself
            _check_relu6_range(out, self.where)
        computed = self.graph.type(node).shape
        if computed != out.shape:
            raise _Bad(f"{self.where} giving {out.name!r}: the tensor declares shape {list(out.shape)}, the "
                       f"operator computes {list(computed)}")
        self.values[out.index] = node


def _check_relu6_range(out: _Tensor, where: str) -> None:
    """tflite-micro's CalculateActivationRangeQuantized refuses a fused RELU6 whose 6 at the output's scale (float32
    arithmetic, rounded) is not an int32."""
    with np.errstate(over="ignore", divide="ignore"):
        six = np.float32(6.0) / np.float32(out.scales[0])
    if not float(six) < 2.0**31:
        raise _Bad(f"{where} giving {out.name!r}: a fused RELU6 at output scale {float(out.scales[0]):.3g} puts 6 "
                   "beyond int32")


def _check_bias_scale(low: _Lowering, x: _Tensor, w: _Tensor, bias: int, out: _Tensor) -> None:
    """tflite-micro's FULLY_CONNECTED requires the bias's scale within 2% of the output's scale of input scale x
    weight scale (GetQuantizedConvolutionMultipler)."""
    if bias < 0 or x.type_name not in ("int8", "int16") or w.scales.size > 1:  # per channel: no such check
        return
    product = float(np.float32(x.scales[0]) * np.float32(w.scales[0]))
    bias_scale = float(low.tensors[bias].scales[0])
    if not abs(product - bias_scale) / float(out.scales[0]) <= 0.02:
        raise _Bad(f"{low.where} giving {out.name!r}: bias scale {bias_scale:.6g} is not input scale x weight scale "
                   f"{product:.6g} (within 2% of the output scale {float(out.scales[0]):.3g}, as tflite-micro needs)")


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name.split("/")[-1] or "t")
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"t_{cleaned}"


def _activation(options: _Table | None, index: int, op: str) -> str:
    code = options.scalar(index, "b", 0, "fused_activation_function") if options is not None else 0
    if code not in ACTIVATIONS:
        raise _Bad(f"{op}: fused activation {ACTIVATION_NAMES.get(code, code)} is not supported")
    return ACTIVATIONS[code]


def _padding(options: _Table | None, op: str) -> str:
    code = options.scalar(0, "b", 0, "padding") if options is not None else 0
    if code not in PADDINGS:
        raise _Bad(f"{op}: padding {code} is not supported")
    return PADDINGS[code]


def _constant_ints(t: _Tensor, op: str, what: str) -> np.ndarray:
    if t.data is None or t.type_name not in ("int32", "int64"):
        raise _Bad(f"{op}: {what} {t.name!r} must be a constant int32 tensor")
    return t.data.astype(np.int64)


def _ranked(t: _Tensor, rank: int, op: str, what: str) -> _Tensor:
    if len(t.shape) != rank:
        raise _Bad(f"{op}: {what} {t.name!r} has shape {list(t.shape)}, expected {rank} dimensions")
    return t


def _at_least_one(options: _Table, index: int, name: str, op: str, default: int) -> int:
    """A stride, dilation or window size: read at the schema's default when absent (0 for those without one), and
    refused below 1 (tflite-micro would run with it and compute no convolution's or pool's values)."""
    value = int(options.scalar(index, "i", default, name))
    if value < 1:
        absent = " (absent from the file: the schema's default)" if not options.present(index) else ""
        raise _Bad(f"{op}: {name} is {value}{absent}; it must be at least 1")
    return value


def _check_bias_type(options: _Table | None, index: int, op: str, x: _Tensor | None = None) -> int:
    """The options' quantized_bias_type: none (0, FLOAT32, the default), INT32, or (a 16x8 layer: int16 input
    ``x``) INT64; tflite-micro refuses a type it does not know, and int8 networks have int32 biases. Returns the
    width of a missing bias: a 16x8 layer sums in int64 unless the type says INT32."""
    code = int(options.scalar(index, "b", 0, "quantized_bias_type")) if options is not None else 0
    wide = x is not None and x.type_name == "int16"
    if code not in ((0, 2, 4) if wide else (0, 2)):
        raise _Bad(f"{op}: quantized_bias_type {TENSOR_TYPES.get(code, (code,))[0]} is not supported (int8 networks "
                   "have int32 biases; 16x8 networks int64 or int32)")
    return 64 if wide and code != 2 else 32


def _bias_bits(low: _Lowering, bias: int, missing: int) -> int:
    """A layer's accumulator width: its bias tensor's (int64 or int32), or ``missing`` without one."""
    return 64 if bias >= 0 and low.tensors[bias].type_name == "int64" else (missing if bias < 0 else 32)


def _window(options: _Table, op: str, dilation: tuple[int, int] | None) -> dict:
    """Strides (fields 2, 1: stride_h, stride_w, no default) and dilations (``dilation``: their fields, default
    1) of a CONV_2D's or DEPTHWISE_CONV_2D's options."""
    attrs = {"stride": [_at_least_one(options, 2, "stride_h", op, 0), _at_least_one(options, 1, "stride_w", op, 0)],
             "padding": _padding(options, op)}
    if dilation is not None:
        attrs["dilation"] = [_at_least_one(options, dilation[0], "dilation_h_factor", op, 1),
                             _at_least_one(options, dilation[1], "dilation_w_factor", op, 1)]
    return attrs


MAX_DILATED_EXTENT = 4096  # a dilated filter's span in rows or columns: far past any input a microcontroller holds


def _check_extent(attrs: dict, kernel: tuple[int, int], op: str) -> None:
    """Refuses a dilated filter spanning more than MAX_DILATED_EXTENT rows or columns (the interpreter pads its
    input by the span: a dilation of 2^31 - 1 would ask for terabytes)."""
    for axis, (size, dilation) in enumerate(zip(kernel, attrs.get("dilation", [1, 1]))):
        span = (int(size) - 1) * int(dilation) + 1
        if span > MAX_DILATED_EXTENT:
            raise _Bad(f"{op}: a filter of {size} dilated by {dilation} spans {span} "
                       f"{'rows' if axis == 0 else 'columns'}, over the {MAX_DILATED_EXTENT} supported")


def _check_accumulator(low: _Lowering, x: _Tensor, bias: int, by_channel: np.ndarray, out: _Tensor,
                       bias_bits: int = 32) -> None:
    """Refuses a layer whose accumulator (the products' sum, then the bias) can leave its range for some input:
    an int32 one TFLite's kernels wrap silently; a 16x8 layer's int64 one beyond the +-2^47 TFLite's
    requantisation assumes. ``by_channel``: the filter's values, one row per output channel."""
    if x.type_name not in ("int8", "int16"):
        return
    top = 127 if x.type_name == "int8" else 32767
    zero_point = int(x.zero_points[0]) if x.zero_points.size else 0
    w64 = by_channel.astype(np.int64)
    ends = np.stack([w64 * (top - zero_point), w64 * (-top - 1 - zero_point)])  # each product's extremes
    high, low_end = ends.max(axis=0).sum(axis=1), ends.min(axis=0).sum(axis=1)
    b = low.tensors[bias].data if bias >= 0 else None
    b = np.zeros(len(w64), np.int64) if b is None else b.astype(np.int64).reshape(-1)
    lowest, highest = (INT32_MIN, INT32_MAX) if bias_bits == 32 else (-(1 << ACC64_BITS), (1 << ACC64_BITS) - 1)
    for c in range(len(w64)):
        worst = (int(low_end[c]) + min(0, int(b[c])), int(high[c]) + max(0, int(b[c])))
        if worst[0] < lowest or worst[1] > highest:
            reach = "pass int32, where TFLite wraps it" if bias_bits == 32 else \
                f"pass +-2^{ACC64_BITS}, beyond what TFLite's 16x8 requantisation assumes"
            raise _Bad(f"{low.where} giving {out.name!r}: channel {c}'s accumulator (bias {int(b[c])}, products "
                       f"{int(low_end[c])}..{int(high[c])} over {x.type_name} inputs) can {reach}")


def _pad_constant(c: _Tensor, x: _Tensor, out: _Tensor, op: str) -> float:
    """PADV2's padding value as stored, checked as TFLite Micro's Prepare checks it."""
    if c.data is None or c.data.size != 1 or c.type_name != x.type_name:
        raise _Bad(f"{op}: the constant value must be one constant {x.type_name} element")
    if x.type_name == "int8" and (not np.array_equal(c.zero_points[:1], out.zero_points[:1])
                                  or not np.array_equal(c.scales[:1].astype(np.float64),
                                                        out.scales[:1].astype(np.float64))):
        raise _Bad(f"{op}: the constant value's quantisation must be the output's")
    return float(c.data.reshape(-1)[0])


def _lower_operator(low: _Lowering, op: str, options: _Table | None, ins: list[int], outs: list[int]) -> None:
    if op in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"):  # some have no input or output
        _lower_variable(low, op, options, ins, outs)
        return
    if op == "WHILE":
        _lower_while(low, options, ins, outs)
        return
    if op == "IF":
        _lower_if(low, options, ins, outs)
        return
    out = low.tensors[outs[0]]
    name = _identifier(out.name)
    bias = ins[2] if len(ins) > 2 else -1
    x = low.tensors[ins[0]]
    if op == "CONV_2D":
        w = _ranked(low.tensors[ins[1]], 4, op, "filter")
        bias_bits = _bias_bits(low, bias, _check_bias_type(options, 6, op, x))
        attrs = {**_window(options, op, (5, 4)), "activation": _activation(options, 3, op)}
        _check_extent(attrs, (w.shape[1], w.shape[2]), op)
        low.add("conv2d", [low.value(ins[0]), low.value(ins[1], "OHWI", FILTER_AXIS[op]),
                           low.bias(bias, w.shape[0], name, real=x.type_name == "float32", bits=bias_bits)], attrs,
                out)
        if w.data is not None:
            _check_accumulator(low, x, bias, w.data.reshape(w.shape[0], -1), out, bias_bits)
    elif op == "DEPTHWISE_CONV_2D":
        w = _ranked(low.tensors[ins[1]], 4, op, "filter")
        x_channels = _ranked(low.tensors[ins[0]], 4, op, "input").shape[-1]
        multiplier = w.shape[-1] // max(1, x_channels)
        declared = int(options.scalar(3, "i", 0, "depth_multiplier"))
        if declared != multiplier:  # tflite-micro's kernel loops over the declared one
            raise _Bad(f"{op}: depth_multiplier {declared}, but the filter's {w.shape[-1]} channels for the input's "
                       f"{x_channels} make {w.shape[-1] / max(1, x_channels):g}")
        attrs = {**_window(options, op, (6, 5)), "activation": _activation(options, 4, op),
                 "depth_multiplier": multiplier}
        _check_extent(attrs, (w.shape[1], w.shape[2]), op)
        bias_bits = 64 if x.type_name == "int16" else 32  # TFLite's 16x8 depthwise kernel reads int64 biases
        low.add("depthwise_conv2d", [low.value(ins[0]), low.value(ins[1], "IHWO", FILTER_AXIS[op]),
                                     low.bias(bias, w.shape[-1], name, real=x.type_name == "float32",
                                              bits=bias_bits)], attrs, out)
        if w.data is not None:
            _check_accumulator(low, x, bias, w.data.reshape(-1, w.shape[-1]).T, out, bias_bits)
    elif op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        attrs = {**_window(options, op, None), "activation": _activation(options, 5, op),
                 "filter": [_at_least_one(options, 4, "filter_height", op, 0),
                            _at_least_one(options, 3, "filter_width", op, 0)]}
        low.add("average_pool2d" if op == "AVERAGE_POOL_2D" else "max_pool2d", [low.value(ins[0])], attrs, out)
    elif op == "L2_POOL_2D":  # float32: sqrt of the window's mean square, as TFLite Micro's L2Pool sums and divides
        if x.type_name != "float32":
            raise _Bad(f"{op}: {x.type_name} tensors (TFLite Micro's kernel takes float32)")
        activation = _activation(options, 5, op)
        attrs = {**_window(options, op, None), "activation": "none",
                 "filter": [_at_least_one(options, 4, "filter_height", op, 0),
                            _at_least_one(options, 3, "filter_width", op, 0)]}
        squares = low.step("float_unary", [low.value(ins[0])], {"function": "square"}, x.shape, x, f"{name}_squares")
        means = low.step("average_pool2d", [squares], attrs, out.shape, out, f"{name}_means")
        if activation == "none":
            low.add("float_unary", [means], {"function": "sqrt"}, out)
        else:  # the fused activation after the root (RELU: nothing to clamp below 0; RELU6: at 6)
            root = low.step("float_unary", [means], {"function": "sqrt"}, out.shape, out, f"{name}_root")
            low.add(activation, [root], {}, out)
    elif op in ("PAD", "PADV2"):
        x = low.tensors[ins[0]]
        paddings = _constant_ints(low.tensors[ins[1]], op, "paddings")
        if paddings.shape != (len(x.shape), 2):
            raise _Bad(f"{op}: paddings of shape {list(paddings.shape)} for an input of {len(x.shape)} dimensions")
        attrs = {"pads": [int(p) for p in paddings.reshape(-1)]}
        if len(ins) > 2 and ins[2] >= 0:  # PADV2's constant: stored as the input is, a scalar
            attrs["fill"] = _pad_constant(low.tensors[ins[2]], x, out, op)
        low.add("pad", [low.value(ins[0])], attrs, out)
    elif op == "MEAN":
        x = low.tensors[ins[0]]
        rank, given = len(x.shape), [int(a) for a in _constant_ints(low.tensors[ins[1]], op, "axes").ravel()]
        outside = [a for a in given if not -rank <= a < rank]
        if outside:  # TFLite's ResolveAxis refuses them (tflite-micro's MEAN reads them as int16: another axis)
            raise _Bad(f"{op}: axis {outside[0]} is outside [{-rank}, {rank - 1}] for a {rank}-dimensional tensor")
        axes = sorted({a % rank for a in given})
        keep = int(bool(options.scalar(0, "B", 0, "keep_dims"))) if options is not None else 0
        if len(x.shape) == 4 and axes == [1, 2]:  # a global average pool
            low.add("mean", [low.value(ins[0])], {"axes": [1, 2], "keep_dims": keep}, out)
        elif x.type_name in ("float32", "int8", "int16"):  # any other axes: QuantizedMeanOrSum's mean
            low.add("reduce_sum", [low.value(ins[0])], {"axes": axes, "keep_dims": keep, "mean": 1}, out)
        else:
            raise _Bad(f"{op}: {x.type_name} tensors (TFLite Micro takes float32, int8 and int16)")
    elif op == "CONCATENATION":
        rank = len(low.tensors[ins[0]].shape)
        axis = options.scalar(0, "i", 0, "axis") if options is not None else 0
        if _activation(options, 1, op) != "none":
            raise _Bad(f"{op}: a fused activation is not supported")
        if not -rank <= axis < rank:
            raise _Bad(f"{op}: axis {axis} of a {rank}-dimensional tensor")
        axis %= rank
        # a chain of two-input concatenations, each part typed as the output (one quantisation, as TFLite needs)
        joined = low.value(ins[0])
        for k, index in enumerate(ins[1:], start=1):
            part = low.tensors[index]
            if k < len(ins) - 1:
                shape = list(low.graph.type(joined).shape)
                if len(part.shape) != len(shape):
                    raise _Bad(f"{op}: inputs of {len(shape)} and {len(part.shape)} dimensions")
                shape[axis] += part.shape[axis]
                try:
                    joined = low.graph.add("concatenation", [joined, low.value(index)], {"axis": axis},
                                           type=TensorType(tuple(shape), low.dtype(out), low.layout(out)),
                                           name=f"{name}_part{k}")
                except ValueError as exc:
                    raise _Bad(f"{low.where} giving {out.name!r}: {exc}") from None
            else:
                low.add("concatenation", [joined, low.value(index)], {"axis": axis}, out)
    elif op in ("RELU", "RELU6"):
        low.add(op.lower(), [low.value(ins[0])], {}, out)
    elif op == "FULLY_CONNECTED":
        if options is not None and options.scalar(1, "b", 0, "weights_format"):
            raise _Bad(f"{op}: shuffled weights are not supported")
        keep_num_dims = options is not None and bool(options.scalar(2, "b", 0, "keep_num_dims"))
        w = _ranked(low.tensors[ins[1]], 2, op, "weights")
        bias_bits = _bias_bits(low, bias, _check_bias_type(options, 4, op, x))
        operands = [low.value(ins[0]), low.value(ins[1], "OI", FILTER_AXIS[op]),
                    low.bias(bias, w.shape[0], name, real=x.type_name == "float32", bits=bias_bits)]
        attrs = {"activation": _activation(options, 0, op)}
        if keep_num_dims:  # the rows' product, then the input's leading axes kept (the output declares them)
            if tuple(out.shape) != tuple(x.shape[:-1]) + (w.shape[0],):
                raise _Bad(f"{low.where} giving {out.name!r}: keep_num_dims gives shape "
                           f"{list(x.shape[:-1]) + [w.shape[0]]}, the tensor declares {list(out.shape)}")
            rows = low.step("fully_connected", operands, attrs, (math.prod(x.shape[:-1]), w.shape[0]), out,
                            f"{name}_rows")
            low.add("reshape", [rows], {"shape": list(out.shape)}, out)
        else:
            low.add("fully_connected", operands, attrs, out)
        _check_bias_scale(low, x, w, bias, out)
        if w.data is not None:
            _check_accumulator(low, x, bias, w.data, out, bias_bits)
    elif op == "ADD" and low.graph.type(low.value(ins[0])).dtype.is_integer:  # unquantised integers
        lower_integer(low, "integer_add", options, ins, outs, 0, op)
    elif op == "ADD":
        a, b = low.value(ins[0]), low.value(ins[1])
        if low.tensors[ins[0]].shape != low.tensors[ins[1]].shape:  # broadcast: each operand copied to the shape
            try:
                shape = np.broadcast_shapes(low.tensors[ins[0]].shape, low.tensors[ins[1]].shape)
            except ValueError:
                raise _Bad(f"{op}: shapes {list(low.tensors[ins[0]].shape)} and {list(low.tensors[ins[1]].shape)} "
                           "do not broadcast") from None
            a = broadcast_value(low, a, low.tensors[ins[0]], shape, f"{name}_a")
            b = broadcast_value(low, b, low.tensors[ins[1]], shape, f"{name}_b")
        low.add("tensor_add", [a, b], {"activation": _activation(options, 0, op)}, out)
    elif op == "RESHAPE":
        low.add("reshape", [low.value(ins[0])], {"shape": list(out.shape)}, out)
    elif op == "SOFTMAX":
        beta = options.scalar(0, "f", 0.0, "beta") if options is not None else 0.0  # schema.fbs' default
        low.add("softmax", [low.value(ins[0])], {"beta": float(beta)}, out)
    elif op.startswith("CUSTOM ("):
        raise _Bad(f"{op}: custom operator {op[8:-1]!r} is not supported (supported: "
                   f"{', '.join(sorted(TFLITE_CUSTOMS)) or 'none'})")
    elif op in TFLITE_BUILTINS:  # an op whose module lowers it (ir/ops/network/, ...)
        try:
            TFLITE_BUILTINS[op].lower(low, options, ins, outs)
        except TypeRuleError as exc:
            raise _Bad(f"{low.where}: {exc}") from None
    else:
        raise _Bad(f"operator {op} is not supported (supported: {', '.join(supported_builtins())})")


def _var_handle_key(options: _Table | None) -> tuple[str, str]:
    """VarHandleOptions' (container, shared_name): what names a resource variable."""
    if options is None:
        return "", ""
    return options.string(0, "container") or "", options.string(1, "shared_name") or ""


def _lower_variable(low: _Lowering, op: str, options: _Table | None, ins: list[int], outs: list[int]) -> None:
    """TFLite's resource variables as state: VAR_HANDLE names one, READ_VARIABLE gives its current value (its state
    node until an ASSIGN_VARIABLE in this call gives another), ASSIGN_VARIABLE its next one; CALL_ONCE's subgraph
    was read for the initial values (read_tflite)."""
    if op == "CALL_ONCE":
        return
    if op == "VAR_HANDLE":
        low.handles[outs[0]] = _var_handle_key(options)
        return
    if op == "READ_VARIABLE":
        out = low.tensors[outs[0]]
        variable = low.variable(ins[0], out)
        ty = low.tensor_type(out, low.layout(out))
        try:
            node = low.graph.add("reshape", [variable["current"]], {"shape": list(ty.shape)}, type=ty,
                                 name=_identifier(out.name))
        except ValueError as exc:
            raise _Bad(f"{low.where} giving {out.name!r}: {exc}") from None
        low.values[out.index] = node
        return
    value = low.tensors[ins[1]]  # ASSIGN_VARIABLE
    variable = low.variable(ins[0], value)
    size = math.prod(value.shape)
    variable["current"] = low.step("reshape", [low.value(ins[1])], {"shape": [size]}, (size,), value,
                                   _identifier(f"{value.name}_assigned"))
    variable["assigned"] = True


def _initial_values(subgraphs: list[_Table], codes: list[_Table], buffers: list[_Table]) -> dict:
    """The subgraphs CALL_ONCE runs once (from subgraph 0): the constants their ASSIGN_VARIABLEs give each
    variable; every other subgraph (IF, WHILE bodies) refused by name."""
    init_indices, loop_indices = set(), set()
    for sub in subgraphs:  # the subgraphs CALL_ONCE and WHILE name (a WHILE's body may hold another WHILE)
        for k, operator in enumerate(sub.tables(3, "operators")):
            index = operator.scalar(0, "I", 0, "opcode_index")
            op = _opcode_name(codes[index]) if index < len(codes) else ""
            options = _options(operator, op, k) if op in ("CALL_ONCE", "WHILE", "IF") else None
            if op == "CALL_ONCE":
                init_indices.add(int(options.scalar(0, "i", 0, "init_subgraph_index")) if options is not None else 0)
            elif op in ("WHILE", "IF") and options is not None:  # a WHILE's condition and body, an IF's branches
                loop_indices |= {int(options.scalar(0, "i", 0, "cond_subgraph_index")),
                                 int(options.scalar(1, "i", 0, "body_subgraph_index"))}
    others = sorted(set(range(1, len(subgraphs))) - init_indices - loop_indices)
    if others or not (init_indices | loop_indices) <= set(range(1, len(subgraphs))):
        raise _Bad(f"{len(subgraphs)} subgraphs: only CALL_ONCE's initialisation subgraphs and WHILE's are read "
                   f"(subgraph {(others or sorted(init_indices | loop_indices))[0]} is none of them)")
    inits: dict[tuple[str, str], _Tensor] = {}
    for s in sorted(init_indices):
        tensors = [_read_tensor(t, i, buffers) for i, t in enumerate(subgraphs[s].tables(0, "tensors"))]
        handles: dict[int, tuple[str, str]] = {}
        for k, operator in enumerate(subgraphs[s].tables(3, "operators")):
            index = operator.scalar(0, "I", 0, "opcode_index")
            op = _opcode_name(codes[index]) if index < len(codes) else f"opcode {index}"
            ins = [int(i) for i in operator.array(1, "inputs", np.int32)]
            outs = [int(i) for i in operator.array(2, "outputs", np.int32)]
            if any(not 0 <= i < len(tensors) for i in ins + outs):
                raise _Bad(f"subgraph {s} operator {k} ({op}): tensor indices {ins} -> {outs} are malformed")
            if op == "VAR_HANDLE" and len(outs) == 1:
                handles[outs[0]] = _var_handle_key(_options(operator, op, k))
            elif op == "ASSIGN_VARIABLE" and len(ins) == 2 and ins[0] in handles and tensors[ins[1]].data is not None:
                inits[handles[ins[0]]] = tensors[ins[1]]
            else:
                raise _Bad(f"subgraph {s} (CALL_ONCE's) operator {k} ({op}): only VAR_HANDLE and ASSIGN_VARIABLE of "
                           "constants are supported there")
    return inits


def _lower_custom(low: _Lowering, custom, operator: _Table, ins: list[int], outs: list[int], n_tensors: int) -> None:
    """A custom operator (TFLite Micro's signal library, ...): its counts of inputs and outputs checked, its
    custom_options read as a FlexBuffer map, then its module's lowering."""
    (least, most), (least_out, most_out) = custom.inputs, custom.outputs
    if not least <= len(ins) <= most or not least_out <= len(outs) <= most_out \
            or any(not 0 <= i < n_tensors for i in ins + outs):
        raise _Bad(f"{low.where}: tensors {ins} -> {outs}, expected {least} to {most} inputs and {least_out} to "
                   f"{most_out} outputs")
    if operator.scalar(6, "b", 0, "custom_options_format") != 0:
        raise _Bad(f"{low.where}: custom options not in FlexBuffers (the only format TFLite defines)")
    try:
        options = read_map(operator.array(5, "custom_options", np.uint8).tobytes())
    except FlexBufferError as exc:
        raise _Bad(f"{low.where}: custom options: {exc}") from None
    try:
        custom.lower(low, options, ins, outs)
    except TypeRuleError as exc:
        raise _Bad(f"{low.where}: {exc}") from None


def supported_builtins() -> list[str]:
    """Every TFLite builtin operator the reader lowers."""
    return sorted({*SUPPORTED, *TFLITE_BUILTINS})


def _input_quantize(operators: list[_Table], codes: list[_Table], tensors: list[_Tensor],
                    x: int) -> tuple[int, int] | None:
    """(operator, its output tensor) of the QUANTIZE a converter puts first when the network takes float32
    (inference_input_type float32): the float input's only reader, to a per-tensor int8/int16 tensor. The network's
    input is then that tensor (the build's float entry point quantises as QUANTIZE does); None otherwise."""
    if tensors[x].type_name != "float32":
        return None
    readers = []
    for k, operator in enumerate(operators):
        if x in operator.array(1, "inputs", np.int32).tolist():
            readers.append(k)
    if len(readers) != 1:
        return None
    operator = operators[readers[0]]
    index = operator.scalar(0, "I", 0, "opcode_index")
    outs = operator.array(2, "outputs", np.int32).tolist()
    if index >= len(codes) or _opcode_name(codes[index]) != "QUANTIZE" or len(outs) != 1 \
            or not 0 <= outs[0] < len(tensors):
        return None
    out = tensors[outs[0]]
    if out.type_name not in ("int8", "int16") or out.scales.size != 1 or out.data is not None:
        return None
    return readers[0], outs[0]


def _several_inputs(low: _Lowering, xs: list[_Tensor]) -> None:
    """One flat input holding the file's inputs in order, each input a retyped slice of it: the flat vector has
    the inputs' type where they share one, else the plain integers of their width (each input's codes)."""
    kinds = sorted({t.type_name for t in xs})
    types = [low.tensor_type(t, low.layout(t)) for t in xs]
    flat_dtype = types[0].dtype
    if len(kinds) != 1:  # integers of several widths: the widest plain signed integers hold every input's codes
        if any(t.dtype.is_float or t.dtype.integer_range[0] >= 0 for t in types):
            raise _Bad(f"inputs of types {', '.join(kinds)}: the inputs of a network must share one element type, "
                       "or all be signed integers")
        flat_dtype = integer(max(t.dtype.bits for t in types), True)
    elif any(t.dtype != flat_dtype for t in types) and not flat_dtype.is_float:
        bits = flat_dtype.bits
        flat_dtype = integer(bits, True) if flat_dtype.is_quantised else flat_dtype
    total = sum(t.size for t in types)
    flat = low.graph.add("input", [], {"name": "x"}, type=TensorType((total,), flat_dtype), name="x_inputs")
    offset = 0
    for t, ty in zip(xs, types):
        low.values[t.index] = low.graph.add("retyped_slice", [flat], {"offset": offset, "shape": list(ty.shape)},
                                            type=ty, name=_identifier(t.name))
        offset += ty.size


MAX_WHILE_STEPS = 4096  # a WHILE unrolled beyond this is refused (its trip count is what the C would repeat)



def _fold(low: _Lowering, index: int) -> None:
    """Tensor ``index``'s node, if an op computed it from constants alone, replaced by a constant of its value (the
    tensor's data set too, so later operators see a constant)."""
    node = low.values.get(index)
    graph = low.graph
    if node is None or graph.op(node) == "const":
        return
    n = graph.node(node)
    if not n.inputs or any(graph.op(i) != "const" for i in n.inputs) or graph.op(node) == "state":
        return
    ty = graph.type(node)
    values = [graph.node(i).attrs["value"] for i in n.inputs]
    if ty.dtype.is_float:
        value = np.asarray(OPS[n.op].evaluate([np.asarray(v, np.float64) for v in values], n.attrs), np.float32)
    else:
        call = FixedCall([np.asarray(v, np.int64) for v in values], [graph.type(i) for i in n.inputs], ty, n.attrs,
                         f"%{node} ({n.op})")
        value = np.asarray(OPS[n.op].fixed(call), np.int64)
    t = low.tensors[index]
    stored = STORED_AS[t.type_name]
    value = value.reshape(ty.shape).astype(stored)
    low.values[index] = graph.add("const", [], {"value": value}, type=ty, name=f"{node}_folded")
    low.tensors[index] = replace(t, data=value.reshape(t.shape))


def _lower_subgraph(low: _Lowering, index: int, inputs: list[str], where: str) -> list[str]:
    """Subgraph ``index`` (a WHILE's condition or body) lowered into the same graph, its inputs bound to the nodes
    ``inputs`` (constants stay constants): its outputs' nodes."""
    subgraphs, codes, buffers = low.model
    sub = subgraphs[index]
    tensors = [_read_tensor(t, i, buffers) for i, t in enumerate(sub.tables(0, "tensors"))]
    ins, outs = sub.array(1, "inputs", np.int32), sub.array(2, "outputs", np.int32)
    if len(ins) != len(inputs) or any(not 0 <= i < len(tensors) for i in (*ins, *outs)):
        raise _Bad(f"{where}: subgraph {index} takes {len(ins)} inputs, the WHILE carries {len(inputs)}")
    inner = _Lowering(low.graph, tensors)
    inner.model = low.model
    for t, node in zip(ins, inputs):
        inner.values[int(t)] = node
        if low.graph.op(node) == "const":
            data = low.graph.node(node).attrs["value"]
            stored = STORED_AS[tensors[t].type_name]
            if stored is not None:
                tensors[t] = replace(tensors[t], data=np.asarray(data).astype(stored).reshape(tensors[t].shape))
    _lower_operators(inner, sub.tables(3, "operators"), codes, fold=True, where=f"{where}subgraph {index} ")
    missing = [int(o) for o in outs if int(o) not in inner.values]
    if missing:
        raise _Bad(f"{where}: subgraph {index} computes no value for its output tensor {missing[0]}")
    return [inner.values[int(o)] for o in outs]


def _lower_while(low: _Lowering, options: _Table | None, ins: list[int], outs: list[int]) -> None:
    """WHILE unrolled at compile time: its condition must follow from constants (a loop counter against a bound,
    as converters write recurrent layers), each turn's body lowered into the graph with the values it carries."""
    cond = int(options.scalar(0, "i", 0, "cond_subgraph_index")) if options is not None else 0
    body = int(options.scalar(1, "i", 0, "body_subgraph_index")) if options is not None else 0
    n_subgraphs = len(low.model[0])
    if not (0 < cond < n_subgraphs and 0 < body < n_subgraphs) or cond == body:
        raise _Bad(f"{low.where}: condition subgraph {cond} and body subgraph {body} of {n_subgraphs}")
    where = low.where
    carried = [low.value(i) for i in ins]
    for step in range(MAX_WHILE_STEPS + 1):
        (flag,) = _lower_subgraph(low, cond, carried, f"{where}, condition {step}: ")[:1]
        if low.graph.op(flag) != "const":
            raise _Bad(f"{where}: the loop's condition depends on the input (only WHILE loops whose trip count "
                       "follows from constants are supported: they are unrolled)")
        if not bool(np.asarray(low.graph.node(flag).attrs["value"]).reshape(-1)[0]):
            break
        if step == MAX_WHILE_STEPS:
            raise _Bad(f"{where}: the loop runs more than {MAX_WHILE_STEPS} times (it is unrolled: refused)")
        carried = _lower_subgraph(low, body, carried, f"{where}, turn {step}: ")
    for o, node in zip(outs, carried):
        declared = low.tensors[o]
        if tuple(low.graph.type(node).shape) != tuple(declared.shape):
            raise _Bad(f"{where}: output {declared.name!r} declares shape {list(declared.shape)}, the loop gives "
                       f"{list(low.graph.type(node).shape)}")
        low.values[o] = node
        if low.graph.op(node) == "const":
            low.tensors[o] = replace(declared, data=np.asarray(low.graph.node(node).attrs["value"]).reshape(
                declared.shape))


STATEFUL = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")


def _stateful(low: _Lowering, index: int) -> bool:
    """Whether subgraph ``index`` touches resource variables."""
    subgraphs, codes, _ = low.model
    return any(_opcode_name(codes[o.scalar(0, "I", 0, "opcode_index")]) in STATEFUL
               for o in subgraphs[index].tables(3, "operators")
               if o.scalar(0, "I", 0, "opcode_index") < len(codes))


def _lower_if(low: _Lowering, options: _Table | None, ins: list[int], outs: list[int]) -> None:
    """IF: a condition that follows from constants lowers its branch alone; a computed one lowers both branches
    (pure: TFLite Micro runs one, whose outputs are copied) and selects each output by the condition (SELECT_V2's
    copy of stored values). Branches that touch resource variables under a computed condition are refused."""
    then_index = int(options.scalar(0, "i", 0, "then_subgraph_index")) if options is not None else 0
    else_index = int(options.scalar(1, "i", 0, "else_subgraph_index")) if options is not None else 0
    n_subgraphs = len(low.model[0])
    if not (0 < then_index < n_subgraphs and 0 < else_index < n_subgraphs):
        raise _Bad(f"{low.where}: then subgraph {then_index} and else subgraph {else_index} of {n_subgraphs}")
    where = low.where
    condition = low.tensors[ins[0]]
    if condition.type_name != "bool" or math.prod(condition.shape) != 1:
        raise _Bad(f"{where}: the condition {condition.name!r} must be one bool (TFLite Micro reads its first element)")
    flag = low.value(ins[0])
    carried = [low.value(i) for i in ins[1:]]
    if low.graph.op(flag) == "const":
        chosen = then_index if bool(np.asarray(low.graph.node(flag).attrs["value"]).reshape(-1)[0]) else else_index
        results = _lower_subgraph(low, chosen, carried, f"{where}, {'then' if chosen == then_index else 'else'}: ")
    else:
        if _stateful(low, then_index) or _stateful(low, else_index):
            raise _Bad(f"{where}: branches that read or assign resource variables under a condition computed from the "
                       "input are not supported (both branches are computed and one result kept)")
        taken = _lower_subgraph(low, then_index, carried, f"{where}, then: ")
        other = _lower_subgraph(low, else_index, carried, f"{where}, else: ")
        results = []
        for o, a, b in zip(outs, taken, other):
            declared = low.tensors[o]
            results.append(low.step("select", [flag, a, b], {}, declared.shape, declared,
                                    f"{_identifier(declared.name)}_chosen"))
    if len(results) != len(outs):
        raise _Bad(f"{where}: the branch gives {len(results)} outputs, the IF declares {len(outs)}")
    for o, node in zip(outs, results):
        declared = low.tensors[o]
        if tuple(low.graph.type(node).shape) != tuple(declared.shape):
            raise _Bad(f"{where}: output {declared.name!r} declares shape {list(declared.shape)}, the branch gives "
                       f"{list(low.graph.type(node).shape)}")
        low.values[o] = node


def _lower_operators(low: _Lowering, operators: list[_Table], codes: list[_Table], skipped: int | None = None,
                     fold: bool = False, where: str = "") -> None:
    """Each operator of a subgraph lowered in order (``skipped``: the input QUANTIZE the reader made the input);
    ``fold``: values computed from constants alone become constants at once (a WHILE's counters and what they
    index: its condition and the trip count follow from them at compile time)."""
    tensors = low.tensors
    for k, operator in enumerate(operators):
        if k == skipped:
            continue
        index = operator.scalar(0, "I", 0, "opcode_index")
        if index >= len(codes):
            raise _Bad(f"{where}operator {k}: opcode {index} of {len(codes)}")
        op = _opcode_name(codes[index])
        ins = [int(i) for i in operator.array(1, "inputs", np.int32)]
        outs = [int(i) for i in operator.array(2, "outputs", np.int32)]
        custom = TFLITE_CUSTOMS.get(op[8:-1]) if op.startswith("CUSTOM (") else None
        if custom is not None:
            low.where = f"{where}operator {k} ({op})"
            _lower_custom(low, custom, operator, ins, outs, len(tensors))
            continue
        least_out, most_out = TFLITE_BUILTINS[op].outputs if op in TFLITE_BUILTINS else OUTPUT_COUNTS.get(op, (1, 1))
        takes_none = INPUT_COUNTS.get(op, (1, 1))[0] == 0
        if not least_out <= len(outs) <= most_out or (not ins and not takes_none) \
                or any(not -1 <= i < len(tensors) for i in ins + outs) or (ins and ins[0] < 0) \
                or (outs and min(outs) < 0):
            raise _Bad(f"{where}operator {k} ({op}): tensor indices {ins} -> {outs} are malformed")
        least, most = INPUT_COUNTS.get(op, TFLITE_BUILTINS[op].inputs if op in TFLITE_BUILTINS else (1, len(ins)))
        optional = OPTIONAL_INPUTS.get(op, TFLITE_BUILTINS[op].optional if op in TFLITE_BUILTINS else ())
        if not least <= len(ins) <= most or any(i < 0 and k not in optional for k, i in enumerate(ins)):
            raise _Bad(f"{where}operator {k} ({op}): inputs {ins}, expected {least} to {most} tensors")
        low.where = f"{where}operator {k} ({op})"
        _lower_operator(low, op, _options(operator, op, k), ins, outs)
        if fold:
            for o in outs:
                _fold(low, o)


def read_tflite(data: bytes, name: str = "model") -> Graph:
    """The IR graph of a ``.tflite`` file's bytes (its first subgraph); raises _Bad."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise _Bad("not a TFLite flatbuffer (no TFL3 identifier)")
    buf = _Buffer(data)
    model = _Table.at(buf, buf.scalar(0, "I", "root offset"), "model", 0)
    codes = model.tables(1, "operator_codes")
    subgraphs = model.tables(2, "subgraphs")
    buffers = model.tables(4, "buffers")
    if not subgraphs:
        raise _Bad("no subgraph")
    variable_inits = _initial_values(subgraphs, codes, buffers) if len(subgraphs) > 1 else {}
    sub = subgraphs[0]
    tensors = [_read_tensor(t, i, buffers) for i, t in enumerate(sub.tables(0, "tensors"))]
    inputs, outputs = sub.array(1, "inputs", np.int32), sub.array(2, "outputs", np.int32)
    if not 1 <= len(inputs) <= MAX_INPUTS or not 1 <= len(outputs) <= MAX_OUTPUTS:
        raise _Bad(f"{len(inputs)} inputs and {len(outputs)} outputs: 1 to {MAX_INPUTS} inputs and 1 to "
                   f"{MAX_OUTPUTS} outputs are supported")
    for index in (*inputs, *outputs):
        if not 0 <= index < len(tensors):
            raise _Bad(f"input/output tensor index {index} of {len(tensors)} tensors")
    if len(set(int(i) for i in inputs)) != len(inputs):
        raise _Bad(f"input tensors {inputs.tolist()}: one tensor named twice")
    graph = Graph(_identifier(name))
    low = _Lowering(graph, tensors, variable_inits)
    operators = sub.tables(3, "operators")
    skipped = _input_quantize(operators, codes, tensors, int(inputs[0])) if len(inputs) == 1 else None
    x = tensors[int(inputs[0])] if skipped is None else tensors[skipped[1]]
    try:
        if len(inputs) == 1:
            low.values[x.index] = graph.add("input", [], {"name": "x"}, type=low.tensor_type(x, low.layout(x)),
                                            name=_identifier(x.name))
        else:
            _several_inputs(low, [tensors[int(i)] for i in inputs])
    except ValueError as exc:
        raise _Bad(f"input tensor {x.name!r}: {exc}") from None
    low.model = (subgraphs, codes, buffers)
    _lower_operators(low, operators, codes, skipped[0] if skipped is not None else None)
    low.finish_variables()
    for i, index in enumerate(outputs):
        if int(index) not in low.values or graph.op(low.values[int(index)]) in ("input", "const"):
            raise _Bad(f"output tensor {tensors[int(index)].name!r} is computed by no operator")
        graph.set_output("scores" if i == 0 else f"output{i}", low.values[int(index)])
    return graph


def load_tflite_model(path) -> NetworkModel:
    """``load_model``'s reader of ``.tflite`` files: the network as a model."""
    return NetworkModel(load_tflite(path), Path(path).name)


def load_tflite(path) -> Graph:
    """The IR graph of a ``.tflite`` file: TFLite's int8 network, each operator one IR op with its
    quantisation in the types (errors: one ModelFileError naming the file and the problem)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise _Bad(f"{size} bytes, over the limit of {MAX_FILE_BYTES}")
        graph = read_tflite(path.read_bytes(), path.stem)
        verify(graph)
    except (_Bad, IRError) as exc:  # IRError: the verifier's rules broken by the file's graph
        raise ModelFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: {exc.strerror or exc}") from None
    except RecursionError:
        raise ModelFileError(f"{path}: tables nested too deeply") from None
    return graph


