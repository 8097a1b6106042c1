"""ONNX convolutional networks (PyTorch's ``torch.onnx.export``) as float IR graphs of the network ops.

The ops (standard domain only):

    Conv (1-D and 2-D; stride, dilation, pads / auto_pad; any group: 1, one per channel (depthwise), or
    grouped),
    BatchNormalization (folded into the convolution before it), MaxPool, AveragePool,
    GlobalAveragePool, ReduceMean over the spatial axes, Gemm, MatMul [+ Add of a constant], Add of two
    tensors, Relu, Clip(0, 6) (fused into the op before them), Flatten / Reshape to (batch, features),
    Softmax, Identity, Dropout, Constant, LeakyRelu, Sigmoid (and x * Sigmoid(x): SiLU), Tanh, HardSwish,
    HardSigmoid, Elu, Gelu (erf and tanh forms)

ONNX's channels-first tensors (N, C, L) and (N, C, H, W) become the IR's NHWC: (1, 1, L, C) and
(1, H, W, C). The input keeps ONNX's shape (a row is the ONNX tensor's elements in ONNX's order) and is
transposed once; a flatten of a tensor with more than one position transposes back to channels-first
first, so the features reach the dense layers in ONNX's order. A symbolic batch dimension is taken as 1.
A padding becomes TFLite's SAME or VALID where their windows are ONNX's, else the IR's explicit pads.
Every op or attribute outside the list is refused by name, all of them in one ModelFileError.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.onnx_recurrent import RECURRENT_OPS, lower_recurrent
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.state import next_label
from tinycc_ml.ir.ops.transpose import DEPTH_TO_SPACE_MODES, depth_to_space_steps
from tinycc_ml.ir.ops.windows import out_size, pad_before
from tinycc_ml.ir.types import F32, TensorType, integer
from tinycc_ml.ir.verify import MAX_ELEMENTS, verify
from tinycc_ml.models.saved import check_array

ONNX_DOMAINS = ("", "ai.onnx")
INDEX = integer(32)  # an integer input's type in the IR and the C: indices (ONNX's int64 narrowed)
# op -> the attributes read (any other attribute is refused by name)
# elementwise float functions of the network's data -> float_unary's function (ir/ops/network/float_unary.py: the
# float32 function, float builds only); Pow by a constant 2 or 0.5 too (x * x, sqrt)
UNARY = {"Abs": "abs", "Neg": "neg", "Floor": "floor", "Ceil": "ceil", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
         "Sin": "sin", "Cos": "cos", "Softplus": "softplus", "Mish": "mish", "Selu": "selu", "Celu": "celu"}
UNARY_ATTRIBUTES = {"Selu": ("alpha", "gamma"), "Celu": ("alpha",)}
POWERS = {2.0: "square", 0.5: "sqrt"}
# a Constant node's value attributes (the dynamo exporter unoptimised writes value_ints, value_float, ...)
CONSTANT_VALUES = ("value", "value_float", "value_floats", "value_int", "value_ints")
NETWORK_OPS = {
    "Conv": ("kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"),
    "MaxPool": ("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations", "storage_order"),
    "AveragePool": ("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "count_include_pad", "dilations"),
    "GlobalAveragePool": (), "ReduceMean": ("axes", "keepdims", "noop_with_empty_axes"),
    "BatchNormalization": ("epsilon", "momentum", "training_mode", "spatial"),
    "Gemm": ("alpha", "beta", "transA", "transB"), "MatMul": (), "Add": (), "Relu": (), "Clip": ("min", "max"),
    "Flatten": ("axis",), "Reshape": ("allowzero",), "Squeeze": ("axes",), "Unsqueeze": ("axes",),
    "Softmax": ("axis",), "Identity": (), "Dropout": ("seed",),
    "Constant": CONSTANT_VALUES,
    "LeakyRelu": ("alpha",), "Sigmoid": (), "Tanh": (), "HardSwish": (), "HardSigmoid": ("alpha", "beta"),
    "Elu": ("alpha",), "Gelu": ("approximate",), "Mul": (),
    "Sub": (), "Div": (), "Max": (), "Min": (), "Transpose": ("perm",), "Slice": (),
    "Split": ("axis", "split", "num_outputs"), "Concat": ("axis",), "Pad": ("mode", "pads", "value"),
    "ReduceSum": ("axes", "keepdims", "noop_with_empty_axes"),
    "ReduceMax": ("axes", "keepdims", "noop_with_empty_axes"),
    "ReduceL2": ("axes", "keepdims", "noop_with_empty_axes"),
    "GlobalMaxPool": (),
    "ConvTranspose": ("kernel_shape", "strides", "pads", "dilations", "group", "output_padding", "auto_pad"),
    "DepthToSpace": ("blocksize", "mode"),
    "PRelu": (), "LogSoftmax": ("axis",), "LayerNormalization": ("axis", "epsilon", "stash_type"),
    "Gather": ("axis",),
    "Resize": ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
               "extrapolation_value", "antialias", "keep_aspect_ratio_policy"),
    "GRU": ("activations", "direction", "hidden_size", "layout", "linear_before_reset"),
    "LSTM": ("activations", "direction", "hidden_size", "layout", "input_forget"),
    "RNN": ("activations", "direction", "hidden_size", "layout"),
    **{op: UNARY_ATTRIBUTES.get(op, ()) for op in UNARY}, "Pow": (), "InstanceNormalization": ("epsilon",),
}
# ops lowered only where every input is a constant (the exporters' shape arithmetic): evaluated by onnx's reference
# implementation at import, like Constant nodes
CONSTANT_ONLY = ("Shape", "ConstantOfShape", "Cast", "CastLike", "Range", "Equal", "Where", "Expand", "Less",
                 "Greater", "Not", "Size", "Mod", "GreaterOrEqual", "LessOrEqual")
# comparisons of the network's data -> compare's which (ir/ops/network/compare.py), a bool tensor that only a Where
# (select) reads
COMPARISONS = {"Equal": "equal", "Greater": "greater", "GreaterOrEqual": "greater_equal", "Less": "less",
               "LessOrEqual": "less_equal"}
# elementwise ONNX op -> the IR op of two broadcast operands (Add of two tensors of one shape: tensor_add; Add of a
# constant c is the exact x - (-c); Div by a constant c, x * (1 / c))
BINARY = {"Add": "tensor_sub", "Sub": "tensor_sub", "Mul": "tensor_mul", "Div": "tensor_mul",
          "Max": "tensor_maximum", "Min": "tensor_minimum"}
# ONNX's axis -> the IR's NHWC axis of a value with 1 or 2 spatial axes
NHWC_AXIS = {1: (0, 3, 2), 2: (0, 3, 1, 2)}
# ONNX activation -> (the IR op, its attributes with ONNX's defaults)
ACTIVATIONS = {"LeakyRelu": ("leaky_relu", {"alpha": 0.01}), "Sigmoid": ("logistic", {}), "Tanh": ("tensor_tanh", {}),
               "HardSwish": ("hard_swish", {}), "HardSigmoid": ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}),
               "Elu": ("elu", {"alpha": 1.0}), "Gelu": ("gelu", {"approximate": "none"})}
# attribute values the lowering does not implement: (op, attribute) -> the values allowed
ALLOWED_VALUES = {("MaxPool", "ceil_mode"): (0, 1), ("AveragePool", "ceil_mode"): (0, 1),
                  ("MaxPool", "storage_order"): (0,), ("Pad", "mode"): ("constant",),
                  ("ReduceSum", "noop_with_empty_axes"): (0,), ("ReduceMax", "noop_with_empty_axes"): (0,),
                  ("ReduceL2", "noop_with_empty_axes"): (0,),
                  ("BatchNormalization", "training_mode"): (0,), ("ConvTranspose", "group"): (1,),
                  ("ConvTranspose", "auto_pad"): ("NOTSET",), ("LayerNormalization", "stash_type"): (1,),
                  ("Gemm", "transA"): (0,), ("Conv", "auto_pad"): ("NOTSET", "VALID", "SAME_UPPER"),
                  ("MaxPool", "auto_pad"): ("NOTSET", "VALID", "SAME_UPPER"),
                  ("AveragePool", "auto_pad"): ("NOTSET", "VALID", "SAME_UPPER"),
                  ("ReduceMean", "noop_with_empty_axes"): (0,), ("LSTM", "input_forget"): (0,),
                  ("GRU", "linear_before_reset"): (0, 1), ("Resize", "mode"): ("nearest", "linear"),
                  ("Resize", "coordinate_transformation_mode"): ("asymmetric", "half_pixel", "pytorch_half_pixel",
                                                                 "align_corners"),
                  ("Resize", "antialias"): (0,), ("Resize", "exclude_outside"): (0,),
                  ("Resize", "keep_aspect_ratio_policy"): ("stretch",), ("DepthToSpace", "mode"): DEPTH_TO_SPACE_MODES}
FUSED = ("Relu", "Clip")
# ops a stepped build lets read a value that runs over the sequence (``TensorValue.time``): they move, keep or take
# its time axis; any other op would combine time steps that a stepped build computes one per call
TIME_OPS = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Gather", "Slice", "Identity", "Dropout", *RECURRENT_OPS)
NCHW_OF_NHWC = [0, 3, 1, 2]


class _Bad(Exception):
    """A problem found in the graph (the loader adds the file's name)."""


def onnx_axis(axis, rank: int, what: str) -> int:
    """An axis attribute in ONNX's range [-rank, rank - 1], as a non-negative index (onnxruntime refuses any
    other: 1000 is no axis, not 1000 mod rank)."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise _Bad(f"{what}: axis {axis} is outside [-{rank}, {rank - 1}]")
    return axis % rank


@dataclass
class TensorValue:
    node: str  # the IR node
    shape: tuple[int, ...]  # ONNX's shape (batch 1)
    spatial: int = 0  # 1 or 2: the IR holds it as NHWC (1-D: H = 1); 0: as ONNX holds it
    time: int | None = None  # a stepped build: the axis along which a recurrent layer's sequence runs (length 1)

    @property
    def channels(self) -> int:
        return self.shape[1]


def attributes(node) -> dict:
    # deferred: onnx is an optional dependency (the [onnx] extra); the caller has imported it already
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def unsupported(graph) -> list[str]:
    """Every op and attribute of ``graph`` this importer does not lower, each named once."""
    problems: list[str] = []
    for node in graph.node:
        label = f"{node.op_type} (node {node.name!r})"
        if node.domain not in ONNX_DOMAINS:
            problems.append(f"{label} is of domain {node.domain!r}, not a standard ONNX op")
        elif node.op_type in CONSTANT_ONLY:
            continue
        elif node.op_type not in NETWORK_OPS:
            problems.append(f"op {label} is not supported")
        else:
            for name, value in attributes(node).items():
                if name not in NETWORK_OPS[node.op_type]:
                    problems.append(f"{label}: attribute {name} is not supported")
                    continue
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                allowed = ALLOWED_VALUES.get((node.op_type, name))
                if allowed is not None and value not in allowed:
                    problems.append(f"{label}: {name}={value!r} is not supported (supported: "
                                    f"{', '.join(map(str, allowed))})")
                if name == "dilations" and node.op_type != "Conv" and any(int(d) != 1 for d in value):
                    problems.append(f"{label}: dilations={list(value)} is not supported (1 only: pools, "
                                    "ConvTranspose)")
    return problems


def identifier(name: str, fallback: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_")
    if not cleaned:
        return fallback
    return cleaned if cleaned[0].isalpha() else f"n_{cleaned}"


def _ints(value, count: int, default: int, what: str, least: int | None = None) -> list[int]:
    """``count`` integers (``default`` each when absent), each at least ``least`` (ONNX: strides and dilations
    are positive; onnxruntime refuses 0)."""
    if value is None:
        return [default] * count
    value = [int(v) for v in value]
    if len(value) != count:
        raise _Bad(f"{what} has {len(value)} values, expected {count}")
    if least is not None and any(v < least for v in value):
        raise _Bad(f"{what} {value}: each must be at least {least}")
    return value


def _as_2d(values: list[int], spatial: int, fill: int) -> list[int]:
    """A 1-D window's attribute as the IR's (height, width): height 1."""
    return [fill, *values] if spatial == 1 else values


def padding_attrs(node, attrs: dict, sizes, window, strides, dilations) -> dict:
    """The IR's padding of ONNX's: TFLite's "same" or "valid" where their windows are ONNX's (the same output
    size and padding before each axis), else "explicit" with ONNX's pads (1-D: height unpadded)."""
    spatial = len(sizes)
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        return {"padding": "valid"}
    if auto == "SAME_UPPER":
        if any(d != 1 for d in dilations):  # what onnxruntime would compute is not defined: it refuses them
            raise _Bad(f"{node.op_type} node {node.name!r}: auto_pad SAME_UPPER with dilations {list(dilations)}: "
                       "onnxruntime refuses dilated SAME padding; give explicit pads")
        return {"padding": "same"}  # TFLite's SAME puts an odd padding after, as SAME_UPPER does
    pads = _ints(attrs.get("pads"), 2 * spatial, 0, f"{node.op_type} node {node.name!r}: pads")
    if any(p < 0 for p in pads):
        raise _Bad(f"{node.op_type} node {node.name!r}: negative pads {pads}")
    onnx_out = [(n + pads[i] + pads[i + spatial] - ((k - 1) * d + 1)) // s + 1
                for i, (n, k, s, d) in enumerate(zip(sizes, window, strides, dilations))]
    for mode in ("valid", "same"):
        outs = [out_size(n, k, s, d, mode) for n, k, s, d in zip(sizes, window, strides, dilations)]
        before = [0 if mode == "valid" else pad_before(n, k, s, d, o)
                  for n, k, s, d, o in zip(sizes, window, strides, dilations, outs)]
        if outs == onnx_out and before == pads[:spatial]:
            return {"padding": mode}
    return {"padding": "explicit", "pads": [0, pads[0], 0, pads[1]] if spatial == 1 else pads}


def pads_anything(attrs: dict, sizes, window, strides) -> bool:
    """Whether some window of a pool reaches into the padding."""
    if attrs["padding"] == "explicit":
        return any(attrs["pads"])
    if attrs["padding"] == "valid":
        return False
    return any((out_size(n, k, s, 1, "same") - 1) * s + k > n for n, k, s in zip(sizes, window, strides))


def onnx_slice_range(start: int, end: int, step: int, size: int) -> range:
    """The indices ONNX's Slice takes from an axis of ``size``: a negative index counts from the end, then the start
    is clamped to [0, size] (a negative step: [0, size - 1]) and the end to [0, size] ([-1, size - 1]); numpy
    differs for a negative step (a start before the axis takes nothing there, ONNX's takes element 0)."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), size), min(max(end, 0), size), step)
    return range(min(max(start, 0), size - 1), min(max(end, -1), size - 1), step)


def onnx_nearest_sources(size_in: int, size_out: int, factor, transform: str, rounding: str) -> list[int]:
    """The input index each output index of ONNX's nearest Resize reads along one axis (onnxruntime's
    arithmetic: float32 coordinates, then nearest_mode's rounding, clamped to the axis)."""
    f32 = np.float32
    sources = []
    for k in range(size_out):
        if transform == "asymmetric":
            position = f32(k) / factor
        elif transform == "align_corners":
            position = f32(0) if size_out == 1 else f32(k) * f32(size_in - 1) / f32(size_out - 1)
        elif transform == "pytorch_half_pixel" and size_out == 1:
            position = f32(0)
        else:  # half_pixel, pytorch_half_pixel
            position = (f32(k) + f32(0.5)) / factor - f32(0.5)
        if rounding == "floor":
            index = int(np.floor(position))
        elif rounding == "ceil":
            index = int(np.ceil(position))
        else:  # round_prefer_floor / round_prefer_ceil: a half goes down / up
            index = int(np.floor(position) + (1 if position - np.floor(position) > 0.5 else 0))
            if position - np.floor(position) == 0.5 and rounding == "round_prefer_ceil":
                index += 1
        sources.append(min(max(index, 0), size_in - 1))
    return sources


def fold_batch_norm(bn, w: np.ndarray, b: np.ndarray, params: list[np.ndarray], path: Path) -> tuple[np.ndarray,
                                                                                                      np.ndarray]:
    """The weights w (output channels first) and bias b of the layer before BatchNormalization node ``bn`` (its
    scale, bias, mean and var ``params``) with it folded in: w' = w * s per output channel, b' = (b - mean) * s +
    beta, s = g / sqrt(v + eps), each step rounded to float32 in that order (the arithmetic of the exporters'
    own folds, onnxscript's BatchNorm fusion that the dynamo exporter runs and the TorchScript exporter's
    Conv + BatchNorm fusion, and of onnxruntime's: a BatchNorm left in the file folds to the constants an exporter
    would have written). ModelFileError naming the file and the node."""
    channels = w.shape[0]
    gamma, beta, mean, var = (np.asarray(a, dtype=np.float32).reshape(-1) for a in params)
    if any(a.shape != (channels,) for a in (gamma, beta, mean, var)):
        raise ModelFileError(f"{path}: BatchNormalization node {bn.name!r} has parameters of shapes "
                   f"{[list(a.shape) for a in (gamma, beta, mean, var)]}, expected ({channels},) each")
    epsilon = np.float32(attributes(bn).get("epsilon", 1e-5))
    shifted = var + epsilon
    if np.any(shifted <= 0):
        raise ModelFileError(f"{path}: BatchNormalization node {bn.name!r} has a variance + epsilon <= 0")
    with np.errstate(over="ignore", invalid="ignore"):  # values beyond float32: check_array names them
        factor = gamma / np.sqrt(shifted)
        folded_w = np.asarray(w, dtype=np.float32) * factor.reshape(-1, *([1] * (w.ndim - 1)))
        folded_b = (np.asarray(b, dtype=np.float32) - mean) * factor + beta
    return check_array(folded_w, f"BatchNormalization node {bn.name!r} folded weights", path), \
        check_array(folded_b, f"BatchNormalization node {bn.name!r} folded bias", path)


def ceil_mode_pads(sizes, window, strides, pads) -> list[int]:
    """ONNX's pads with what ceil_mode adds after each axis: onnxruntime's output size rounds up, less a last window
    that would start in the padding after the input."""
    spatial = len(sizes)
    pads = list(pads)
    for k, (n, w, s) in enumerate(zip(sizes, window, strides)):
        span = n + pads[k] + pads[k + spatial] - w
        out = -(-span // s) + 1
        if (out - 1) * s >= n + pads[k]:
            out -= 1
        pads[k + spatial] += max(0, (out - 1) * s + w - (n + pads[k] + pads[k + spatial]))
    return pads


class _Lowering:
    def __init__(self, path: Path, proto_graph, weights: dict, graph: Graph, opset: int | None = None,
                 stepped: bool = False, file_steps: int | None = None):
        self.path, self.proto, self.weights, self.graph = path, proto_graph, weights, graph
        self.opset = opset
        # a stepped build: one time step per call; file_steps: the sequence's length in the file (its constants)
        self.stepped, self.file_steps = stepped, file_steps
        self.values: dict[str, TensorValue] = {}
        self.done: set[int] = set()
        self.consumers: dict[str, list[int]] = {}
        for k, node in enumerate(proto_graph.node):
            # CastLike reads only the type of its second input: not a reader of its data
            for name in node.input[:1] if node.op_type == "CastLike" else node.input:
                if name:
                    self.consumers.setdefault(name, []).append(k)
        self.outputs = {o.name for o in proto_graph.output}
        # the ONNX node being lowered (its index), and the one each IR node was created for: the IR's names are made
        # the same for both exporters' files at the end (canonical_names)
        self.current: int | None = None
        # a zero Pad's output that only a Conv reads -> (its operand, the padding before and after each spatial axis)
        self.zero_padded: dict[str, tuple[TensorValue, list[int], list[int]]] = {}
        self.origin: dict[str, int] = {}

    # ---- operands

    def value(self, node, index: int) -> TensorValue:
        name = node.input[index] if index < len(node.input) else ""
        if name in self.values:
            return self.values[name]
        if name in self.weights:
            raise _Bad(f"{node.op_type} node {node.name!r} takes the constant {name!r} where the network's data "
                       "is expected")
        raise _Bad(f"{node.op_type} node {node.name!r} reads {name!r}, which no earlier node computes")

    def const(self, node, index: int, what: str, required: bool = True) -> np.ndarray | None:
        name = node.input[index] if index < len(node.input) else ""
        if not name:
            if required:
                raise _Bad(f"{node.op_type} node {node.name!r} has no {what}")
            return None
        if name not in self.weights:
            raise _Bad(f"{node.op_type} node {node.name!r} takes its {what} {name!r} from a computed value; only "
                       "constants (initializers) are supported there")
        return check_array(self.weights[name], f"{node.op_type} node {node.name!r} {what} {name!r}", self.path)

    def int_const(self, node, index: int, what: str) -> np.ndarray:
        """An integer constant (shape, axes, starts, ends, ...) as int64, exactly: an int64 initializer's
        9223372036854775807 (PyTorch's open slice end) is no float. Float values must be whole numbers; those beyond
        int64's range saturate."""
        value = self.const(node, index, what)  # the checks and the refusal of a computed value
        raw = np.asarray(self.weights[node.input[index]])
        if raw.dtype.kind in "iub":
            return raw.astype(np.int64)
        if not np.all(value == np.round(value)):
            raise _Bad(f"{node.op_type} node {node.name!r}: its {what} {value.reshape(-1).tolist()} are not whole "
                       "numbers")
        return np.clip(value, -2.0 ** 63, 2.0 ** 63 - 1024).astype(np.int64)

    def add_const(self, array: np.ndarray, layout: str, name: str) -> str:
        array = np.asarray(array, dtype=np.float32)
        return self.add("const", [], {"value": array}, name, TensorType(array.shape, F32, layout))

    def add(self, op: str, inputs: list[str], attrs: dict, name: str, declared: TensorType | None = None) -> str:
        try:
            added = self.graph.add(op, inputs, attrs, type=declared, name=name)
        except ValueError as exc:
            raise _Bad(f"{op} for {name!r}: {exc}") from None
        if self.current is not None:
            self.origin[added] = self.current
        return added

    def only_consumer(self, name: str, ops: tuple[str, ...]):
        """The one node that reads ``name``, when it is one of ``ops`` and ``name`` is not an output."""
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.outputs:
            return None
        node = self.proto.node[users[0]]
        return (users[0], node) if node.op_type in ops and node.domain in ONNX_DOMAINS else None

    def activation_after(self, name: str) -> tuple[str, str]:
        """The activation of the Relu / Clip nodes that alone read ``name`` (marked done), and the ONNX
        value after them."""
        activation = "none"
        while (found := self.only_consumer(name, FUSED)) is not None:
            k, node = found
            kind = self.clip_kind(node) if node.op_type == "Clip" else "relu"
            if kind is None:  # a clamp to other bounds: its own maximum and minimum (standalone_activation)
                break
            activation = "relu6" if "relu6" in (kind, activation) else "relu"
            self.done.add(k)
            name = node.output[0]
        return activation, name

    def clip_kind(self, node) -> str | None:
        """relu6, relu, or None (another clamp)."""
        attrs = attributes(node)
        lo = attrs.get("min", None)
        hi = attrs.get("max", None)
        if len(node.input) > 1 and node.input[1]:
            lo = float(self.const(node, 1, "min").reshape(-1)[0])
        if len(node.input) > 2 and node.input[2]:
            hi = float(self.const(node, 2, "max").reshape(-1)[0])
        if lo == 0 and hi == 6:
            return "relu6"
        if lo == 0 and (hi is None or hi == np.inf):
            return "relu"
        return None

    def define(self, onnx_name: str, value: TensorValue) -> None:
        self.values[onnx_name] = value

    @staticmethod
    def result(node: str, shape: tuple[int, ...], time: int | None = None) -> TensorValue:
        """A value held as ONNX holds it (the recurrent lowering's outputs)."""
        return TensorValue(node, tuple(shape), 0, time)

    # ---- ops

    def conv(self, node, attrs: dict) -> None:
        x = self.spatial(self.value(node, 0), identifier(node.name or node.output[0], "conv"))
        padded = self.zero_padded.get(node.input[0])
        auto = attrs.get("auto_pad", b"NOTSET")
        if padded is not None and (auto.decode() if isinstance(auto, bytes) else auto) == "NOTSET":
            # F.pad then a Conv (a causal convolution): the Conv's own padding, no padded copy (the TorchScript
            # exporter keeps the Pad, dynamo folds it into the Conv)
            x, before, after = padded
            own = _ints(attrs.get("pads"), 2 * x.spatial, 0, f"Conv node {node.name!r}: pads")
            attrs = {**attrs, "pads": [p + q for p, q in zip(own, before + after)]}
        if not x.spatial:
            raise _Bad(f"Conv node {node.name!r} takes a tensor of shape {list(x.shape)}; expected (batch, "
                       "channels, length) or (batch, channels, height, width)")
        w = self.const(node, 1, "weights")
        if w.ndim != 2 + x.spatial:
            raise _Bad(f"Conv node {node.name!r} weights have shape {list(w.shape)} for a {x.spatial}-D input")
        out_c = w.shape[0]
        b = self.const(node, 2, "bias", required=False)
        b = np.zeros(out_c) if b is None else b.reshape(-1)
        if b.shape != (out_c,):
            raise _Bad(f"Conv node {node.name!r} bias has shape {list(b.shape)}, expected ({out_c},)")
        window = list(w.shape[2:])
        if "kernel_shape" in attrs and [int(k) for k in attrs["kernel_shape"]] != window:
            raise _Bad(f"Conv node {node.name!r}: kernel_shape {list(attrs['kernel_shape'])} disagrees with the "
                       f"weights {list(w.shape)}")
        strides = _ints(attrs.get("strides"), x.spatial, 1, f"Conv node {node.name!r} strides", least=1)
        dilations = _ints(attrs.get("dilations"), x.spatial, 1, f"Conv node {node.name!r} dilations", least=1)
        group = int(attrs.get("group", 1))
        if group < 1:
            raise _Bad(f"Conv node {node.name!r}: group {group}; it must be at least 1")
        name = node.output[0]
        found = self.only_consumer(name, ("BatchNormalization",))
        if found is not None:
            k, bn = found
            w, b = self.fold_batch_norm(bn, w, b)
            self.done.add(k)
            name = bn.output[0]
        activation, name = self.activation_after(name)
        ir_attrs = {"stride": _as_2d(strides, x.spatial, 1), "dilation": _as_2d(dilations, x.spatial, 1),
                    **self.padding(node, attrs, x, window, strides, dilations), "activation": activation}
        label = identifier(node.name or name, "conv")
        onnx_shape = list(w.shape)
        if w.ndim == 3:
            w = w[:, :, None, :]  # (O, I, 1, K)
        if group == 1:
            if w.shape[1] != x.channels:
                raise _Bad(f"Conv node {node.name!r} weights read {w.shape[1]} channels, the input has {x.channels}")
            filters = self.add_const(w.transpose(0, 2, 3, 1), "OHWI", f"{label}_filter")
            op = "conv2d"
        elif group == x.channels and w.shape[1] == 1 and out_c % group == 0:
            filters = self.add_const(w[:, 0].transpose(1, 2, 0)[None], "IHWO", f"{label}_filter")
            op, ir_attrs["depth_multiplier"] = "depthwise_conv2d", out_c // group
        elif x.channels % group == 0 and out_c % group == 0 and w.shape[1] * group == x.channels:
            filters = self.add_const(w.transpose(0, 2, 3, 1), "OHWI", f"{label}_filter")
            op, ir_attrs["groups"] = "grouped_conv2d", group
        else:
            raise _Bad(f"Conv node {node.name!r}: group={group} with weights {onnx_shape} on {x.channels} input "
                       f"channels (groups must divide the input's and the output's channels, the weights reading "
                       f"{x.channels} / group each)")
        bias = self.add_const(b, "", f"{label}_bias")
        out = self.add(op, [x.node, filters, bias], ir_attrs, label)
        self.define(name, self.spatial_value(out, x.spatial))

    def spatial_value(self, node: str, spatial: int) -> TensorValue:
        _, h, w, c = self.graph.type(node).shape
        return TensorValue(node, (1, c, w) if spatial == 1 else (1, c, h, w), spatial)

    def padding(self, node, attrs, x: TensorValue, window, strides, dilations) -> dict:
        return padding_attrs(node, attrs, list(x.shape[2:]), window, strides, dilations)

    def fold_batch_norm(self, bn, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        params = [self.const(bn, i, what) for i, what in enumerate(("scale", "bias", "mean", "var"), start=1)]
        return fold_batch_norm(bn, w, b, params, self.path)

    def pool(self, node, attrs: dict) -> None:
        x = self.spatial(self.value(node, 0), identifier(node.name or node.output[0], "pool"))
        if not x.spatial:
            raise _Bad(f"{node.op_type} node {node.name!r} takes a tensor of shape {list(x.shape)}; expected a "
                       "(batch, channels, ...) tensor with 1 or 2 spatial axes")
        what = f"{node.op_type} node {node.name!r}"
        window = _ints(attrs.get("kernel_shape"), x.spatial, 0, f"{what} kernel_shape")
        if any(k < 1 for k in window):
            raise _Bad(f"{what}: kernel_shape {window}")
        strides = _ints(attrs.get("strides"), x.spatial, 1, f"{what} strides", least=1)
        label = identifier(node.name or node.output[0], "pool")
        auto = attrs.get("auto_pad", b"NOTSET")
        explicit = (auto.decode() if isinstance(auto, bytes) else auto) == "NOTSET"
        pads = _ints(attrs.get("pads"), 2 * x.spatial, 0, f"{what} pads") if explicit else [0] * 2 * x.spatial
        if any(p < 0 for p in pads):
            raise _Bad(f"{what}: negative pads {pads}")
        if explicit and int(attrs.get("ceil_mode", 0)):
            pads = ceil_mode_pads(list(x.shape[2:]), window, strides, pads)
        if node.op_type == "AveragePool" and int(attrs.get("count_include_pad", 0)) and explicit:
            # the padding's zeros are counted: pad first, then average every window inside the padded tensor
            onnx_pads = _ints(attrs.get("pads"), 2 * x.spatial, 0, f"{what} pads")
            x = self.padded(x, [0, 0, *onnx_pads[:x.spatial]], [0, 0, *onnx_pads[x.spatial:]], f"{label}_pad")
            pads = [0] * x.spatial + [p - q for p, q in zip(pads[x.spatial:], onnx_pads[x.spatial:])]
        if explicit:
            padding = padding_attrs(node, {"pads": pads}, list(x.shape[2:]), window, strides, [1] * x.spatial)
        else:
            padding = self.padding(node, attrs, x, window, strides, [1] * x.spatial)
        if node.op_type == "AveragePool" and int(attrs.get("count_include_pad", 0)) and pads_anything(
                padding, x.shape[2:], window, strides) and not explicit:
            raise _Bad(f"{what}: count_include_pad=1 with auto_pad is not supported; give explicit pads")
        if padding["padding"] == "valid":  # a window over a whole axis has one position whatever its stride: 1, as a
            # global pool's (MaxPool2d(4) of a 4 x 4 map is the TorchScript exporter's MaxPool, dynamo's ReduceMax)
            strides = [1 if k == n else s for k, n, s in zip(window, x.shape[2:], strides)]
        activation, name = self.activation_after(node.output[0])
        op = "max_pool2d" if node.op_type == "MaxPool" else "average_pool2d"
        out = self.add(op, [x.node], {"filter": _as_2d(window, x.spatial, 1), "stride": _as_2d(strides, x.spatial, 1),
                                      **padding, "activation": activation},
                       identifier(node.name or name, "pool"))
        self.define(name, self.spatial_value(out, x.spatial))

    def global_average(self, node, keepdims: bool = True) -> None:
        self.global_pool(node, "average_pool2d", keepdims)

    def global_pool(self, node, op: str, keepdims: bool = True) -> None:
        """The average or largest value of each channel over every position."""
        x = self.spatial(self.value(node, 0), identifier(node.name or node.output[0], "global"))
        if not x.spatial:
            raise _Bad(f"{node.op_type} node {node.name!r} takes a tensor of shape {list(x.shape)} without "
                       "spatial axes")
        _, h, w, c = self.graph.type(x.node).shape
        activation, name = self.activation_after(node.output[0])
        label = identifier(node.name or name, "mean")
        out = self.add(op, [x.node], {"filter": [h, w], "stride": [1, 1], "padding": "valid",
                                      "activation": activation}, label)
        if keepdims:
            self.define(name, TensorValue(out, (1, c, *[1] * x.spatial), x.spatial))
        else:
            flat = self.add("reshape", [out], {"shape": [1, c]}, f"{label}_flat")
            self.define(name, TensorValue(flat, (1, c)))

    def reshaping(self, node, attrs: dict) -> None:
        """Flatten, Reshape, Squeeze, Unsqueeze: the ONNX shape they give, then ``reshaped``."""
        x = self.value(node, 0)
        shape, what = list(x.shape), f"{node.op_type} node {node.name!r}"
        if node.op_type == "Flatten":
            axis = onnx_axis(attrs.get("axis", 1), len(shape) + 1, what)  # Flatten's axis may be the rank
            wanted = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
        elif node.op_type == "Reshape":
            given = self.stepped_shape(x, [int(s) for s in self.int_const(node, 1, "shape").reshape(-1)])
            wanted = [shape[k] if s == 0 and not attrs.get("allowzero", 0) and k < len(shape) else s
                      for k, s in enumerate(given)]
            if wanted.count(-1) > 1 or any(s < -1 for s in wanted) or 0 in wanted:
                raise _Bad(f"{what}: shape {given} from {shape}")
            if -1 in wanted:
                known = int(np.prod([s for s in wanted if s != -1]))
                if known == 0 or int(np.prod(shape)) % known:
                    raise _Bad(f"{what}: shape {given} does not fit {shape}")
                wanted[wanted.index(-1)] = int(np.prod(shape)) // known
        else:
            axes = attrs.get("axes")
            if axes is None and len(node.input) > 1 and node.input[1]:
                axes = self.int_const(node, 1, "axes").reshape(-1).tolist()
            if node.op_type == "Unsqueeze":
                rank = len(shape) + len(axes or [])
                axes = sorted(onnx_axis(a, rank, what) for a in (axes or []))
                wanted = list(shape)
                for a in axes:
                    wanted.insert(a, 1)
            else:
                axes = [onnx_axis(a, len(shape), what) for a in axes] if axes else \
                    [k for k, s in enumerate(shape) if s == 1]
                if any(shape[a] != 1 for a in axes):
                    raise _Bad(f"{what}: squeezes axes {axes} of shape {shape}; only axes of size 1")
                wanted = [s for k, s in enumerate(shape) if k not in axes]
        if int(np.prod(wanted)) != int(np.prod(shape)) or not wanted:
            raise _Bad(f"{what}: shape {wanted} from {shape}")
        result = self.reshaped(x, tuple(wanted), identifier(node.name or node.output[0], "reshape"))
        self.define(node.output[0], self.timed(result, self.time_after_reshape(x, wanted, what)))

    def stepped_shape(self, x: TensorValue, given: list[int]) -> list[int]:
        """A Reshape's shape constant, written for the file's whole sequence, for a stepped build's one time step:
        the entry that is the sequence's length, where the elements before it are those before the time axis, is 1."""
        if not self.stepped or x.time is None or self.file_steps in (None, 1):
            return given
        before = int(np.prod(x.shape[:x.time]))
        for q, size in enumerate(given):
            kept = [x.shape[k] if s == 0 and k < len(x.shape) else s for k, s in enumerate(given[:q])]
            if size == self.file_steps and -1 not in kept and int(np.prod(kept)) == before:
                return given[:q] + [1] + given[q + 1:]
        return given

    def time_after_reshape(self, x: TensorValue, wanted, what: str) -> int | None:
        """The time axis of ``x`` reshaped to ``wanted``: the first axis with the elements before and after the time
        axis on either side (a stepped build refuses a reshape that merges it with another axis)."""
        if x.time is None:
            return None
        before, after = int(np.prod(x.shape[:x.time])), int(np.prod(x.shape[x.time + 1:]))
        for q, size in enumerate(wanted):
            if size == x.shape[x.time] and int(np.prod(wanted[:q])) == before and int(np.prod(wanted[q + 1:])) == after:
                return q
        raise _Bad(f"{what}: shape {list(wanted)} merges the time axis {x.time} of {list(x.shape)} with another axis; "
                   "a stepped build (recurrent='step') has one time step per call: compile with recurrent='unroll'")

    @staticmethod
    def timed(value: TensorValue, time: int | None) -> TensorValue:
        return value if value.time == time else TensorValue(value.node, value.shape, value.spatial, time)

    def reshaped(self, x: TensorValue, shape: tuple[int, ...], label: str) -> TensorValue:
        """``x`` in the ONNX shape ``shape`` (same elements): free where the IR's element order is kept."""
        if shape == x.shape:
            return x
        positions = [s for s in shape[2:] if s != 1]
        if x.spatial and len(shape) in (3, 4) and shape[1] == x.channels and positions == [
                s for s in x.shape[2:] if s != 1]:
            return self.as_spatial(x.node, shape, label)  # unit axes added or removed: NHWC's order is kept
        flat = self.flat(x, label)
        if len(shape) <= 2 or not x.spatial or shape[0] != 1:  # a plain value stays as ONNX holds it
            node = flat.node
            if shape != (1, flat.shape[1]):
                node = self.add("reshape", [flat.node], {"shape": list(shape)}, f"{label}_shape")
            return TensorValue(node, shape)
        if len(shape) > 4:
            raise _Bad(f"{label}: shape {list(shape)} has more than two spatial axes")
        node, channels = flat.node, shape[1]
        if channels > 1 and int(np.prod(shape[2:])) > 1:  # channels first to channels last
            spatial_shape = tuple(shape[2:]) if len(shape) == 4 else (1, shape[2])
            nchw = self.add("reshape", [node], {"shape": [1, channels, *spatial_shape]}, f"{label}_nchw")
            node = self.add("transpose", [nchw], {"perm": [0, 2, 3, 1]}, f"{label}_nhwc")
        return self.as_spatial(node, shape, label)

    def flat(self, x: TensorValue, label: str) -> TensorValue:
        """``x`` as (1, features) in ONNX's (channels-first) order."""
        size = int(np.prod(x.shape))
        node = x.node
        if x.spatial and size != x.channels:  # more than one position: back to channels first
            n, h, w, c = self.graph.type(node).shape
            node = self.add("transpose", [node], {"perm": NCHW_OF_NHWC}, f"{label}_nchw",
                            TensorType((n, c, h, w), self.graph.type(node).dtype, "NCHW"))
        if self.graph.type(node).shape != (1, size):
            node = self.add("reshape", [node], {"shape": [1, size]}, label)
        return TensorValue(node, (1, size))

    def as_spatial(self, node: str, shape: tuple[int, ...], label: str) -> TensorValue:
        nhwc = (1, 1, shape[2], shape[1]) if len(shape) == 3 else (1, shape[2], shape[3], shape[1])
        if self.graph.type(node).shape != nhwc or self.graph.type(node).layout != "NHWC":
            node = self.add("reshape", [node], {"shape": list(nhwc)}, f"{label}_nhwc",
                            TensorType(nhwc, self.graph.type(node).dtype, "NHWC"))
        return TensorValue(node, shape, len(shape) - 2)

    def plain(self, x: TensorValue, label: str) -> TensorValue:
        """``x`` held as ONNX holds it (its shape, channels first)."""
        if not x.spatial:
            return x
        node = x.node
        n, h, w, c = self.graph.type(node).shape
        if c > 1 and h * w > 1:
            node = self.add("transpose", [node], {"perm": NCHW_OF_NHWC}, f"{label}_nchw",
                            TensorType((n, c, h, w), self.graph.type(node).dtype, "NCHW"))
        if self.graph.type(node).shape != x.shape:
            node = self.add("reshape", [node], {"shape": list(x.shape)}, f"{label}_onnx")
        return TensorValue(node, x.shape)

    def spatial(self, x: TensorValue, label: str) -> TensorValue:
        """A (batch, channels, length) or (batch, channels, height, width) value as the IR's NHWC."""
        if x.spatial or len(x.shape) not in (3, 4):
            return x
        node, channels = x.node, x.shape[1]
        if channels > 1 and int(np.prod(x.shape[2:])) > 1:
            node = self.add("transpose", [node], {"perm": [0, *range(2, len(x.shape)), 1]}, f"{label}_channels_last")
        return self.as_spatial(node, x.shape, label)

    def operand(self, node, index: int) -> TensorValue | np.ndarray:
        """A computed value, or a constant as a float array."""
        name = node.input[index] if index < len(node.input) else ""
        if name in self.weights:
            return self.const(node, index, "operand").astype(np.float64)
        return self.value(node, index)

    def layout_constant(self, array: np.ndarray, rank: int, spatial: int) -> np.ndarray:
        """A constant broadcast against a value of ``rank`` axes, in that value's IR layout."""
        array = array.reshape((1,) * (rank - array.ndim) + array.shape)
        if not spatial:
            return array
        array = array.transpose(0, *range(2, rank), 1)  # channels last
        return array[:, None] if spatial == 1 else array

    def binary(self, node, op: str, a, b, label: str, attrs: dict | None = None) -> TensorValue:
        """``op`` of two operands (values or constant arrays, not both constant): ``broadcast``."""
        return self.broadcast(node, op, [a, b], label, attrs)

    def broadcast(self, node, op: str, operands: list, label: str, attrs: dict | None = None) -> TensorValue:
        """``op`` of operands (values or constant arrays, not all constant), numpy-broadcast as ONNX does: in the
        IR's NHWC where the values are spatial alike, else as ONNX holds them."""
        what = f"{node.op_type} node {node.name!r}"
        try:
            shape = tuple(int(d) for d in np.broadcast_shapes(*(v.shape for v in operands)))
        except ValueError:
            raise _Bad(f"{what}: operands of shapes {[list(v.shape) for v in operands]} do not broadcast") from None
        if not shape:
            raise _Bad(f"{what}: operands of shapes {[list(v.shape) for v in operands]}; a scalar result")
        values = [v for v in operands if isinstance(v, TensorValue)]
        if (len(values) >= 2 and len({len(v.shape) for v in values}) == 1 and len({v.spatial for v in values}) > 1
                and len(values[0].shape) in (3, 4)):
            operands = [v if isinstance(v, np.ndarray) else self.spatial(v, f"{label}_{'abc'[k]}")
                        for k, v in enumerate(operands)]
            values = [v for v in operands if isinstance(v, TensorValue)]
        alike = all(isinstance(v, np.ndarray) or (v.spatial == values[0].spatial and len(v.shape) == len(shape))
                    for v in operands)
        spatial = values[0].spatial if alike else 0
        nodes = []
        for k, v in enumerate(operands):
            if isinstance(v, np.ndarray):
                array = self.layout_constant(v, len(shape), spatial)
                nodes.append(self.add_const(array, "NHWC" if spatial else "", f"{label}_constant{k}"))
            else:
                nodes.append((v if spatial else self.plain(v, f"{label}_{k}")).node)
        out = self.add(op, nodes, attrs or {}, label)
        return self.spatial_value(out, spatial) if spatial else TensorValue(out, shape)

    def expand(self, node) -> None:
        """Expand of the network's data (F.normalize's norm, as the exporters broadcast it before the Div): numpy's
        broadcast to the constant shape, as ONNX holds the value; each axis of 1 grown by concatenations of copies
        (doubling), exact at every precision."""
        what = f"Expand node {node.name!r}"
        x = self.value(node, 0)
        wanted = [int(d) for d in self.int_const(node, 1, "shape").reshape(-1)]
        try:
            shape = tuple(int(d) for d in np.broadcast_shapes(x.shape, tuple(wanted)))
        except ValueError:
            raise _Bad(f"{what}: shape {list(x.shape)} does not broadcast to {wanted}") from None
        if shape == x.shape:
            self.define(node.output[0], x)
            return
        if int(np.prod(shape)) > MAX_ELEMENTS:
            raise _Bad(f"{what}: a tensor of shape {list(shape)}, more than {MAX_ELEMENTS} elements")
        label = identifier(node.name or node.output[0], "expand")
        x = self.reshaped(x, (1,) * (len(shape) - len(x.shape)) + x.shape, f"{label}_rank")
        x = self.plain(x, label)
        out, current = x.node, list(x.shape)
        for axis, size in enumerate(shape):
            if current[axis] == size:
                continue
            parts, have = {1: out}, 1  # copies -> the node holding that many along the axis
            while 2 * have <= size:
                parts[2 * have] = self.add("concatenation", [parts[have], parts[have]], {"axis": axis},
                                           f"{label}_{axis}_{2 * have}")
                have *= 2
            out, total = parts[have], have
            for count in sorted(parts, reverse=True):
                if total + count <= size:
                    out = self.add("concatenation", [out, parts[count]], {"axis": axis},
                                   f"{label}_{axis}_{total + count}")
                    total += count
            current[axis] = size
        self.define(node.output[0], TensorValue(out, shape))

    def comparison(self, node) -> None:
        """Greater, Less, Equal (and the or-equal forms) of the network's data: compare, a bool tensor (float
        operands; constants as float32)."""
        what = f"{node.op_type} node {node.name!r}"
        if len(node.input) != 2:
            raise _Bad(f"{what} has {len(node.input)} inputs, expected 2")
        operands = [self.operand(node, k) for k in range(2)]
        for v in operands:
            if isinstance(v, TensorValue) and not self.graph.type(v.node).dtype.is_float:
                raise _Bad(f"{what} compares {self.graph.type(v.node).dtype} values; float values are supported")
        label = identifier(node.name or node.output[0], COMPARISONS[node.op_type])
        self.define(node.output[0], self.broadcast(node, "compare", operands, label,
                                                   {"which": COMPARISONS[node.op_type]}))

    def where(self, node) -> None:
        """Where of a computed condition (a comparison's bool tensor): select, broadcast as ONNX does; the branches
        float values or constants."""
        what = f"Where node {node.name!r}"
        if len(node.input) != 3:
            raise _Bad(f"{what} has {len(node.input)} inputs, expected 3")
        if node.input[0] in self.weights:
            raise _Bad(f"{what}: a constant condition {node.input[0]!r} with computed branches; a condition computed "
                       "by a comparison is supported")
        condition = self.value(node, 0)
        if self.graph.type(condition.node).dtype.kind != "bool":
            raise _Bad(f"{what}: its condition {node.input[0]!r} is not a comparison's bool tensor")
        branches = [self.operand(node, k) for k in (1, 2)]
        for v in branches:
            if isinstance(v, TensorValue) and not self.graph.type(v.node).dtype.is_float:
                raise _Bad(f"{what} chooses between {self.graph.type(v.node).dtype} values; float values are "
                           "supported")
        if not any(isinstance(v, TensorValue) for v in branches):
            raise _Bad(f"{what} chooses between two constants; a computed value in a branch is supported")
        label = identifier(node.name or node.output[0], "select")
        self.define(node.output[0], self.broadcast(node, "select", [condition, *branches], label))

    def elementwise(self, node) -> None:
        """Sub, Mul, Div by a constant, Max, Min, and Add of a constant or broadcast: the IR's broadcast ops."""
        op, what = node.op_type, f"{node.op_type} node {node.name!r}"
        label = identifier(node.name or node.output[0], op.lower())
        operands = [self.operand(node, k) for k in range(len(node.input))]
        if op not in ("Max", "Min") and len(operands) != 2:
            raise _Bad(f"{what} has {len(operands)} inputs, expected 2")
        if not operands:
            raise _Bad(f"{what} has no inputs")
        if op == "Div" and not isinstance(operands[1], np.ndarray):  # by a computed tensor: float32 division
            self.define(node.output[0], self.binary(node, "float_binary", *operands, label, {"function": "div"}))
            return
        if op == "Div":
            operands[1] = np.asarray(1.0 / operands[1])
        if op == "Add":
            if all(isinstance(v, TensorValue) for v in operands):
                raise _Bad(f"{what} adds shapes {list(operands[0].shape)} and {list(operands[1].shape)}; "
                           "broadcasting two computed tensors in an Add is not supported")
            a, b = operands if isinstance(operands[1], np.ndarray) else operands[::-1]
            operands = [a, np.asarray(-b)]
        result = operands[0]
        for k, other in enumerate(operands[1:]):
            result = self.binary(node, BINARY[op], result, other, label if k == len(operands) - 2 else f"{label}_{k}")
        if isinstance(result, np.ndarray):  # Max / Min of one input
            raise _Bad(f"{what} reads no computed tensor")
        self.define(node.output[0], result)

    def standalone_activation(self, node) -> None:
        """Relu or Clip that no op before them fuses: relu / relu6, or a clamp by constants."""
        x = self.value(node, 0)
        label = identifier(node.name or node.output[0], node.op_type.lower())
        if node.op_type == "Relu":
            kind = "relu"
        else:
            attrs = attributes(node)
            lo, hi = attrs.get("min"), attrs.get("max")
            if len(node.input) > 1 and node.input[1]:
                lo = float(self.const(node, 1, "min").reshape(-1)[0])
            if len(node.input) > 2 and node.input[2]:
                hi = float(self.const(node, 2, "max").reshape(-1)[0])
            kind = "relu6" if (lo, hi) == (0, 6) else "relu" if lo == 0 and hi in (None, np.inf) else None
            if kind is None:
                for bound, op, suffix in ((lo, "tensor_maximum", "lo"), (hi, "tensor_minimum", "hi")):
                    if bound is not None:
                        x = self.binary(node, op, x, np.array(bound), f"{label}_{suffix}")
                self.define(node.output[0], x)
                return
        out = self.add(kind, [x.node], {}, label)
        self.define(node.output[0], TensorValue(out, x.shape, x.spatial))

    def transpose(self, node, attrs: dict) -> None:
        x = self.value(node, 0)
        rank = len(x.shape)
        perm = [int(p) for p in attrs.get("perm", range(rank - 1, -1, -1))]
        what = f"Transpose node {node.name!r}"
        if sorted(perm) != list(range(rank)):
            raise _Bad(f"{what}: perm {perm} is not a permutation of {rank} axes")
        shape = tuple(x.shape[p] for p in perm)
        label = identifier(node.name or node.output[0], "transpose")
        if x.spatial and perm == [0, *range(2, rank), 1]:  # channels last: the IR's order already
            out = self.add("reshape", [x.node], {"shape": list(shape)}, label)
        else:
            x = self.plain(x, label)
            moved = [p for p in perm if x.shape[p] != 1]
            if perm == list(range(rank)):
                out = x.node
            elif moved == sorted(moved):  # only axes of one element move: the elements keep their order
                out = self.add("reshape", [x.node], {"shape": list(shape)}, label)
            else:
                out = self.add("transpose", [x.node], {"perm": perm}, label)
        self.define(node.output[0], TensorValue(out, shape, 0, None if x.time is None else perm.index(x.time)))

    def sliced(self, x: TensorValue, begin: list[int], stride: list[int], count: list[int], label: str) -> TensorValue:
        """Per ONNX axis ``count`` elements from ``begin`` by ``stride``: strided_slice in the value's layout."""
        if begin == [0] * len(begin) and stride == [1] * len(stride) and tuple(count) == x.shape:
            return x
        if not x.spatial:
            out = self.add("strided_slice", [x.node], {"begin": begin, "stride": stride, "count": count,
                                                        "shape": count}, label)
            return TensorValue(out, tuple(count))
        axes = NHWC_AXIS[x.spatial]
        ir_shape = list(self.graph.type(x.node).shape)
        ir_begin, ir_stride, ir_count = [0] * 4, [1] * 4, list(ir_shape)
        for k, ir in enumerate(axes):
            ir_begin[ir], ir_stride[ir], ir_count[ir] = begin[k], stride[k], count[k]
        out = self.add("strided_slice", [x.node], {"begin": ir_begin, "stride": ir_stride, "count": ir_count,
                                                    "shape": ir_count}, label, TensorType(tuple(ir_count), F32, "NHWC"))
        return self.spatial_value(out, x.spatial)

    def slice(self, node) -> None:
        x = self.value(node, 0)
        rank, what = len(x.shape), f"Slice node {node.name!r}"
        ints = [self.int_const(node, k, name).reshape(-1).tolist()
                if k < len(node.input) and node.input[k] else None
                for k, name in enumerate(("data", "starts", "ends", "axes", "steps")) if k]
        starts, ends, axes, steps = ints
        axes = list(range(len(starts))) if axes is None else [onnx_axis(a, rank, what) for a in axes]
        steps = [1] * len(starts) if steps is None else steps
        if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
            raise _Bad(f"{what}: starts {starts}, ends {ends}, axes {axes}, steps {steps} do not match")
        begin, stride, count = [0] * rank, [1] * rank, list(x.shape)
        time = x.time
        for start, end, axis, step in zip(starts, ends, axes, steps):
            if step == 0:
                raise _Bad(f"{what}: step 0 on axis {axis}")
            if axis == x.time:  # a stepped build: the whole sequence, or its last step, is the current step
                time = self.stepped_time_index(node, [list(onnx_slice_range(start, end, step, self.file_steps or 1))],
                                               x.time)
                continue
            taken = onnx_slice_range(start, end, step, x.shape[axis])
            if not taken:
                raise _Bad(f"{what}: takes no element of axis {axis}; empty tensors are not supported")
            begin[axis], stride[axis], count[axis] = taken.start, step, len(taken)
        self.define(node.output[0], self.timed(self.sliced(x, begin, stride, count, identifier(
            node.name or node.output[0], "slice")), time))

    def stepped_time_index(self, node, taken: list[list[int]], time: int) -> int | None:
        """A stepped build's Gather or Slice along the time axis: the current step is the sequence's last, so only
        the whole sequence (the time axis kept) or its last step (the axis a plain one) can be taken."""
        steps = self.file_steps or 1
        if taken == [list(range(steps))]:
            return time
        if all(k in (-1, steps - 1) for part in taken for k in part) and taken:
            return None
        raise _Bad(f"{node.op_type} node {node.name!r} takes time steps {taken} of a sequence of {steps}; a stepped "
                   "build (recurrent='step') computes the current (last) step only: compile with recurrent='unroll'")

    def resize(self, node, attrs: dict) -> None:
        """Resize (F.interpolate) of the spatial axes: nearest as resize_nearest, each output position's source
        index computed here as onnxruntime computes it (float32 coordinates, the coordinate mode and nearest_mode);
        linear (bilinear) as resize_bilinear, whose coordinate modes are TFLite's: asymmetric, half_pixel
        (pytorch_half_pixel where no output axis is 1 long) and align_corners, at the scale output / input."""
        x = self.spatial(self.value(node, 0), identifier(node.name or node.output[0], "resize"))
        what = f"Resize node {node.name!r}"
        if not x.spatial:
            raise _Bad(f"{what} of a tensor of shape {list(x.shape)}; 1 or 2 spatial axes are supported")
        sizes = self.const(node, 3, "sizes", required=False) if len(node.input) > 3 else None
        scales = self.const(node, 2, "scales", required=False) if len(node.input) > 2 else None
        if (sizes is None) == (scales is None or scales.size == 0):
            raise _Bad(f"{what}: give one of scales and sizes")
        rank, size_in = len(x.shape), list(x.shape[2:])
        if sizes is not None:
            sizes = [int(v) for v in sizes.astype(np.int64).reshape(-1)]
            if len(sizes) != rank or sizes[:2] != list(x.shape[:2]):
                raise _Bad(f"{what}: sizes {sizes} for a tensor of shape {list(x.shape)}; only the spatial axes resize")
            size_out = sizes[2:]
            factors = [np.float32(o) / np.float32(i) for o, i in zip(size_out, size_in)]
        else:
            factors = [np.float32(v) for v in scales.reshape(-1)]
            if len(factors) != rank or factors[:2] != [1, 1] or any(not f > 0 for f in factors):
                raise _Bad(f"{what}: scales {[float(f) for f in factors]} for a tensor of shape {list(x.shape)}; "
                           "positive, and 1 on the batch and channels")
            factors = factors[2:]
            size_out = [int(np.floor(np.float64(i) * np.float64(f))) for i, f in zip(size_in, factors)]
        if any(o < 1 for o in size_out):
            raise _Bad(f"{what}: an output of {size_out}")
        mode = attributes(node).get("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        transform = attrs.get("coordinate_transformation_mode", b"half_pixel")
        transform = transform.decode() if isinstance(transform, bytes) else transform
        label = identifier(node.name or node.output[0], "resize")
        if mode == "nearest":
            rounding = attrs.get("nearest_mode", b"round_prefer_floor")
            rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
            sources = [onnx_nearest_sources(i, o, f, transform, rounding)
                       for i, o, f in zip(size_in, size_out, factors)]
            rows, cols = ([0], sources[0]) if x.spatial == 1 else sources
            out = self.add("resize_nearest", [x.node], {"rows": rows, "cols": cols}, label)
        else:
            if any(np.float32(i) / np.float32(o) != np.float32(1) / f for i, o, f in zip(size_in, size_out, factors)):
                raise _Bad(f"{what}: scales {[float(f) for f in factors]} from {size_in} to {size_out}: bilinear is "
                           "supported where the scale is output / input (give sizes, or scales that divide evenly)")
            if transform == "pytorch_half_pixel" and any(o == 1 for o in size_out):
                raise _Bad(f"{what}: pytorch_half_pixel to an axis of 1: give sizes above 1")
            out = self.add("resize_bilinear", [x.node], {
                "size": _as_2d(size_out, x.spatial, 1), "align_corners": int(transform == "align_corners"),
                "half_pixel_centers": int(transform in ("half_pixel", "pytorch_half_pixel"))}, label)
        self.define(node.output[0], self.spatial_value(out, x.spatial))

    def gather(self, node, attrs: dict) -> None:
        """Gather of a computed tensor at constant indices (a scalar removes the axis): strided slices; of a constant
        table at computed integer indices (PyTorch's Embedding): the IR's gather."""
        if node.input[0] in self.weights and len(node.input) > 1 and node.input[1] in self.values:
            self.embedding(node, attrs)
            return
        x = self.value(node, 0)
        what, rank = f"Gather node {node.name!r}", len(x.shape)
        axis = onnx_axis(attrs.get("axis", 0), rank, what)
        indices = self.int_const(node, 1, "indices")
        if indices.ndim > 1:
            raise _Bad(f"{what}: indices of shape {list(indices.shape)}; a scalar or a vector is supported")
        time = x.time
        if axis == x.time:
            time = self.stepped_time_index(node, [indices.reshape(-1).tolist()], x.time)
            indices = np.zeros_like(indices)
        size = x.shape[axis]
        if np.any(indices < -size) or np.any(indices >= size):
            raise _Bad(f"{what}: indices {indices.tolist()} outside an axis of {size}")
        label = identifier(node.name or node.output[0], "gather")
        parts = []
        for k, index in enumerate(indices.reshape(-1) % size):
            begin, count = [0] * rank, list(x.shape)
            begin[axis], count[axis] = int(index), 1
            parts.append(self.plain(self.sliced(x, begin, [1] * rank, count, f"{label}_{k}"), f"{label}_{k}"))
        out = parts[0].node
        for k, part in enumerate(parts[1:], start=1):
            out = self.add("concatenation", [out, part.node], {"axis": axis}, f"{label}_join{k}")
        joined = TensorValue(out, tuple(len(parts) if k == axis else d for k, d in enumerate(x.shape)))
        shape = tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1:])
        if time is not None and axis < time and indices.ndim == 0:
            time -= 1
        self.define(node.output[0], self.timed(self.reshaped(joined, shape, f"{label}_shape"), time))

    def embedding(self, node, attrs: dict) -> None:
        """Rows of a constant table picked by the network's integer input (-s..-1 counted from the end, as ONNX
        says; an index outside [-s, s) is an error, as onnxruntime's: the interpreter raises; the C clamps it and
        reports it in ``<prefix>_status()``)."""
        what = f"Gather node {node.name!r}"
        table = self.const(node, 0, "table").astype(np.float64)
        indices = self.value(node, 1)
        if self.graph.type(indices.node).dtype != INDEX:
            raise _Bad(f"{what} takes the computed float tensor {node.input[1]!r} as indices of the constant "
                       f"{node.input[0]!r}; only the network's integer input can index a constant table")
        axis = onnx_axis(attrs.get("axis", 0), table.ndim, what)
        label = identifier(node.name or node.output[0], "embedding")
        out = self.add("gather", [self.add_const(table, "", f"{label}_table"), indices.node],
                       {"axis": axis, "batch_dims": 0, "negative": 1}, label)
        self.define(node.output[0], TensorValue(out, self.graph.type(out).shape))

    def split(self, node, attrs: dict) -> None:
        x = self.value(node, 0)
        what = f"Split node {node.name!r}"
        axis = onnx_axis(attrs.get("axis", 0), len(x.shape), what)
        size = x.shape[axis]
        if len(node.input) > 1 and node.input[1]:
            sizes = self.int_const(node, 1, "split").reshape(-1).tolist()
        elif "split" in attrs:
            sizes = [int(v) for v in attrs["split"]]
        else:  # equal parts, the last smaller (num_outputs, opset 18)
            parts = int(attrs.get("num_outputs", len(node.output)))
            chunk = -(-size // max(parts, 1))
            sizes = [chunk] * (parts - 1) + [size - chunk * (parts - 1)]
        if len(sizes) != len(node.output) or sum(sizes) != size or any(s < 1 for s in sizes):
            raise _Bad(f"{what}: parts {sizes} for {len(node.output)} outputs of an axis of {size}")
        start, label = 0, identifier(node.name or node.output[0], "split")
        for k, (name, part) in enumerate(zip(node.output, sizes)):
            begin, count = [0] * len(x.shape), list(x.shape)
            begin[axis], count[axis] = start, part
            if name:
                self.define(name, self.sliced(x, begin, [1] * len(x.shape), count, f"{label}_{k}"))
            start += part

    def concat(self, node, attrs: dict) -> None:
        values = [self.value(node, k) for k in range(len(node.input))]
        what = f"Concat node {node.name!r}"
        if not values:
            raise _Bad(f"{what} has no inputs")
        rank = len(values[0].shape)
        axis = onnx_axis(attrs.get("axis", 0), rank, what)
        if any(len(v.shape) != rank or [d for k, d in enumerate(v.shape) if k != axis] !=
               [d for k, d in enumerate(values[0].shape) if k != axis] for v in values):
            raise _Bad(f"{what} on axis {axis} of shapes {[list(v.shape) for v in values]}")
        label = identifier(node.name or node.output[0], "concat")
        spatial = values[0].spatial if all(v.spatial == values[0].spatial for v in values) else 0
        if not spatial:
            values = [self.plain(v, f"{label}_{k}") for k, v in enumerate(values)]
        ir_axis = NHWC_AXIS[spatial][axis] if spatial else axis
        out = values[0].node
        for k, v in enumerate(values[1:]):
            out = self.add("concatenation", [out, v.node], {"axis": ir_axis},
                           label if k == len(values) - 2 else f"{label}_{k}")
        shape = tuple(sum(v.shape[axis] for v in values) if k == axis else d for k, d in enumerate(values[0].shape))
        self.define(node.output[0], self.spatial_value(out, spatial) if spatial else TensorValue(out, shape))

    def pad(self, node, attrs: dict) -> None:
        x = self.value(node, 0)
        rank, what = len(x.shape), f"Pad node {node.name!r}"
        if len(node.input) > 1 and node.input[1]:
            pads = self.int_const(node, 1, "pads").reshape(-1).tolist()
        else:
            pads = [int(p) for p in attrs.get("pads", [])]
        fill = attrs.get("value", 0.0)
        if len(node.input) > 2 and node.input[2]:
            fill = self.const(node, 2, "constant_value").reshape(-1)
            fill = float(fill[0]) if fill.size else 0.0
        if fill != 0:
            raise _Bad(f"{what}: constant value {fill}; only zero padding is supported")
        axes = list(range(rank))
        if len(node.input) > 3 and node.input[3]:
            axes = [onnx_axis(a, rank, what) for a in self.int_const(node, 3, "axes").reshape(-1)]
        if len(pads) != 2 * len(axes) or any(p < 0 for p in pads):
            raise _Bad(f"{what}: pads {pads} for axes {axes}; two non-negative values per axis are supported")
        before, after = [0] * rank, [0] * rank
        for k, axis in enumerate(axes):
            before[axis], after[axis] = pads[k], pads[k + len(axes)]
        if before[0] or after[0]:
            raise _Bad(f"{what} pads the batch axis")
        label = identifier(node.name or node.output[0], "pad")
        self.define(node.output[0], self.padded(x, before, after, label))
        if x.spatial and not (before[1] or after[1]) and self.only_consumer(node.output[0], ("Conv",)):
            self.zero_padded[node.output[0]] = (x, before[2:], after[2:])  # the Conv pads it instead (conv)

    def padded(self, x: TensorValue, before: list[int], after: list[int], label: str) -> TensorValue:
        """``x`` with zeros before and after each ONNX axis."""
        if not any(before) and not any(after):
            return x
        shape = tuple(d + b + a for d, b, a in zip(x.shape, before, after))
        if not x.spatial:
            out = self.add("pad", [x.node], {"pads": [p for pair in zip(before, after) for p in pair]}, label)
            return TensorValue(out, shape)
        ir_pads = [0] * 8
        for k, ir in enumerate(NHWC_AXIS[x.spatial]):
            ir_pads[2 * ir], ir_pads[2 * ir + 1] = before[k], after[k]
        out = self.add("pad", [x.node], {"pads": ir_pads}, label)
        return self.spatial_value(out, x.spatial)

    def reduce(self, node, attrs: dict) -> None:
        """ReduceMean / ReduceMax over every spatial axis: a global pool; any other axes: reduce_sum (times
        1 / count for a mean) or reduce_max; ReduceL2 (F.normalize's norm): the squares' reduce_sum, its square root
        (float_unary: float builds)."""
        x = self.value(node, 0)
        if node.op_type == "ReduceL2" and self.l2_normalisation(node, attrs, x):
            return
        if node.op_type == "ReduceL2":
            label = identifier(node.name or node.output[0], "reduce_l2")
            x = TensorValue(self.add("float_unary", [x.node], {"function": "square"}, f"{label}_squares"), x.shape,
                            x.spatial)
        rank, what = len(x.shape), f"{node.op_type} node {node.name!r}"
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self.int_const(node, 1, "axes").reshape(-1).tolist()
        axes = sorted({onnx_axis(a, rank, what) for a in axes}) if axes else list(range(rank))
        keep = bool(attrs.get("keepdims", 1))
        if 0 in axes and not keep and x.shape[0] == 1:  # (a first axis of more is a sequence's, not the batch)
            raise _Bad(f"{what} over axes {axes} of shape {list(x.shape)} removes the batch axis")
        axes = [a for a in axes if x.shape[a] != 1] or axes  # the batch (1) and unit axes reduce to themselves
        positions = [a for a in range(2, rank) if x.shape[a] != 1]
        if node.op_type in ("ReduceMean", "ReduceMax") and rank in (3, 4) and positions and axes == positions:
            self.global_pool(node, "average_pool2d" if node.op_type == "ReduceMean" else "max_pool2d", keep)
            return
        label = identifier(node.name or node.output[0], node.op_type.lower())
        ir_axes = [NHWC_AXIS[x.spatial][a] for a in axes] if x.spatial else axes
        op = "reduce_max" if node.op_type == "ReduceMax" else "reduce_sum"
        out = self.add(op, [x.node], {"axes": ir_axes, "keep_dims": 1}, label)
        kept = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
        result = self.spatial_value(out, x.spatial) if x.spatial else TensorValue(out, kept)
        if node.op_type == "ReduceMean":
            count = int(np.prod([x.shape[a] for a in axes]))
            result = self.binary(node, "tensor_mul", result, np.array([1.0 / count]), f"{label}_mean")
        if node.op_type == "ReduceL2":
            root = self.add("float_unary", [result.node], {"function": "sqrt"}, f"{label}_root")
            result = TensorValue(root, result.shape, result.spatial)
        if not keep:
            result = self.reshaped(result, tuple(d for k, d in enumerate(x.shape) if k not in axes), f"{label}_drop")
        self.define(node.output[0], result)

    def depth_to_space(self, node, attrs: dict) -> None:
        """DepthToSpace (PixelShuffle: mode CRD; DCR is TFLite's DEPTH_TO_SPACE) of an (N, C, H, W) value: in the
        IR's NHWC a reshape to rank 5, a transpose of the block axes and a reshape (ir/ops/transpose.py's steps)."""
        what = f"DepthToSpace node {node.name!r}"
        x = self.value(node, 0)
        if len(x.shape) != 4:
            raise _Bad(f"{what} of a tensor of shape {list(x.shape)}; (batch, channels, height, width) is expected")
        if "blocksize" not in attrs:
            raise _Bad(f"{what} has no blocksize")
        block, mode = int(attrs["blocksize"]), attrs.get("mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        _, c, h, w = x.shape
        if block < 1 or c % (block * block):
            raise _Bad(f"{what}: blocksize {block} on {c} channels; the channels must be a multiple of blocksize^2 "
                       f"({block * block})")
        label = identifier(node.name or node.output[0], "depth_to_space")
        x = self.spatial(x, label)
        inner, perm, outer = depth_to_space_steps(h, w, c, block, mode)
        blocks = self.add("reshape", [x.node], {"shape": list(inner)}, f"{label}_blocks")
        moved = self.add("transpose", [blocks], {"perm": perm}, f"{label}_moved")
        out = self.add("reshape", [moved], {"shape": list(outer)}, label, TensorType(outer, F32, "NHWC"))
        self.define(node.output[0], self.spatial_value(out, 2))

    def l2_normalisation(self, node, attrs: dict, x: TensorValue) -> bool:
        """F.normalize(x, dim) over the last axis (or the channels of a spatial value: the IR's last), as both
        exporters write it: Div(x, [Expand](Clip(ReduceL2(x, axes [dim], keepdims 1), min eps))), each node the only
        reader of the one before: one l2_normalization (TFLite's L2_NORMALIZATION, its least norm eps), marked done;
        False (nothing lowered) for anything else."""
        rank = len(x.shape)
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1] in self.weights:
            axes = np.asarray(self.weights[node.input[1]]).reshape(-1).tolist()
        if axes is None or len(axes) != 1 or not -rank <= int(axes[0]) < rank or not attrs.get("keepdims", 1):
            return False
        axis = int(axes[0]) % rank
        if not ((x.spatial and axis == 1) or (not x.spatial and axis == rank - 1)) or rank > 4:
            return False
        found = self.only_consumer(node.output[0], ("Clip",))
        if found is None:
            return False
        clip_k, clip = found
        bounds = [clip.input[k] if len(clip.input) > k else "" for k in (1, 2)]
        if bounds[1] or "max" in attributes(clip) or not bounds[0] or bounds[0] not in self.weights:
            return False
        epsilon = np.asarray(self.weights[bounds[0]], dtype=np.float64).reshape(-1)
        if epsilon.size != 1 or not np.isfinite(epsilon[0]) or epsilon[0] < 0:
            return False
        done, name = [clip_k], clip.output[0]
        found = self.only_consumer(name, ("Expand",))
        if found is not None:  # to x's own shape: a constant, or Shape(x)
            expand_k, expand = found
            shape_node = next((n for n in self.proto.node if expand.input[1] in n.output), None)
            if expand.input[1] in self.weights:
                shape = tuple(int(d) for d in np.asarray(self.weights[expand.input[1]]).reshape(-1))
            elif shape_node is not None and shape_node.op_type == "Shape" and list(shape_node.input) == [
                    node.input[0]] and not attributes(shape_node):
                shape = x.shape
            else:
                return False
            if shape != x.shape:
                return False
            done, name = done + [expand_k], expand.output[0]
        found = self.only_consumer(name, ("Div",))
        if found is None or list(found[1].input) != [node.input[0], name]:
            return False
        done.append(found[0])
        label = identifier(node.name or node.output[0], "l2_normalization")
        out = self.add("l2_normalization", [x.node], {"epsilon": float(epsilon[0])}, label)
        self.done.update(done)
        self.define(found[1].output[0], self.spatial_value(out, x.spatial) if x.spatial else TensorValue(out, x.shape))
        return True

    def conv_transpose(self, node, attrs: dict) -> None:
        """ConvTranspose (1-D and 2-D, group 1, no dilation): transpose_conv2d, its padding the pads before each
        axis, its size ONNX's (input - 1) stride - pads + kernel + output_padding."""
        x = self.spatial(self.value(node, 0), identifier(node.name or node.output[0], "deconv"))
        what = f"ConvTranspose node {node.name!r}"
        if not x.spatial:
            raise _Bad(f"{what} takes a tensor of shape {list(x.shape)}; expected 1 or 2 spatial axes")
        w = self.const(node, 1, "weights")
        if w.ndim != 2 + x.spatial or w.shape[0] != x.channels:
            raise _Bad(f"{what} weights have shape {list(w.shape)} for an input of shape {list(x.shape)}")
        n = x.spatial
        window = list(w.shape[2:])
        strides = _ints(attrs.get("strides"), n, 1, f"{what} strides", least=1)
        if any(d != 1 for d in _ints(attrs.get("dilations"), n, 1, f"{what} dilations", least=1)):
            raise _Bad(f"{what}: dilations {list(attrs['dilations'])} are not supported (1 only)")
        pads = _ints(attrs.get("pads"), 2 * n, 0, f"{what} pads")
        extra = _ints(attrs.get("output_padding"), n, 0, f"{what} output_padding")
        if any(p < 0 for p in pads + extra) or any(e >= s for e, s in zip(extra, strides)):
            raise _Bad(f"{what}: pads {pads}, output_padding {extra} (each output padding below its stride)")
        sizes = [(size - 1) * s - pads[k] - pads[k + n] + k_ + e
                 for k, (size, s, k_, e) in enumerate(zip(x.shape[2:], strides, window, extra))]
        if any(s < 1 for s in sizes):
            raise _Bad(f"{what} gives an output of {sizes}")
        b = self.const(node, 2, "bias", required=False)
        b = np.zeros(w.shape[1]) if b is None else b.reshape(-1)
        activation, name = self.activation_after(node.output[0])
        label = identifier(node.name or name, "deconv")
        if n == 1:
            w = w[:, :, None, :]
        filters = self.add_const(w.transpose(1, 2, 3, 0), "OHWI", f"{label}_filter")
        bias = self.add_const(b, "", f"{label}_bias")
        out = self.add("transpose_conv2d", [x.node, filters, bias],
                       {"stride": _as_2d(strides, n, 1), "pad": _as_2d(pads[:n], n, 0), "out_size": _as_2d(sizes, n, 1),
                        "activation": activation}, label)
        self.define(name, self.spatial_value(out, n))

    def last_axis_op(self, node, attrs: dict) -> None:
        """LogSoftmax over any axis, LayerNormalization over the last axis (as ONNX holds the tensor)."""
        x = self.value(node, 0)
        what = f"{node.op_type} node {node.name!r}"
        if node.op_type == "LogSoftmax":
            label = identifier(node.name or node.output[0], "logsoftmax")
            self.define(node.output[0], self.along_last_axis(x, self.softmax_axis(node, attrs, x), label,
                                                             lambda v: self.add("log_softmax", [v], {}, label)))
            return
        axis = onnx_axis(attrs.get("axis", -1), len(x.shape), what)
        if axis != len(x.shape) - 1:
            raise _Bad(f"{what} over axis {axis} of shape {list(x.shape)}; only the last axis is supported")
        label = identifier(node.name or node.output[0], node.op_type.lower())
        x = x if len(x.shape) == 2 else self.plain(x, label)
        depth = x.shape[-1]
        gamma = self.const(node, 1, "scale").reshape(-1)
        beta = self.const(node, 2, "bias", required=False)
        beta = np.zeros(depth) if beta is None else beta.reshape(-1)
        if gamma.shape != (depth,) or beta.shape != (depth,):
            raise _Bad(f"{what}: scale and bias of {gamma.size} and {beta.size} values for an axis of {depth}")
        out = self.add("layer_norm", [x.node, self.add_const(gamma, "", f"{label}_scale"),
                                      self.add_const(beta, "", f"{label}_bias")],
                       {"epsilon": float(attrs.get("epsilon", 1e-5))}, label)
        self.define(node.output[0], TensorValue(out, x.shape))

    def instance_norm(self, node, attrs: dict) -> None:
        """InstanceNormalization (nn.InstanceNorm1d/2d, and nn.GroupNorm, which both exporters write as one over
        (batch, groups, -1)): per channel over the axes after it, a layer_norm of unit scale over those axes as one
        last axis, then the channels' scale and bias (a tensor_mul and a tensor_sub by constants, where not 1 and
        0)."""
        x = self.value(node, 0)
        what = f"{node.op_type} node {node.name!r}"
        label = identifier(node.name or node.output[0], "instance_norm")
        x = self.plain(x, label)
        shape = x.shape
        if len(shape) < 3:
            raise _Bad(f"{what} of a tensor of shape {list(shape)}; (batch, channels, ...) is expected")
        channels, inner = shape[1], int(np.prod(shape[2:]))
        scale, bias = self.const(node, 1, "scale").reshape(-1), self.const(node, 2, "bias").reshape(-1)
        if scale.shape != (channels,) or bias.shape != (channels,):
            raise _Bad(f"{what}: scale and bias of {scale.size} and {bias.size} values for {channels} channels")
        rows = x.node if len(shape) == 3 else self.add("reshape", [x.node], {"shape": [shape[0], channels, inner]},
                                                        f"{label}_rows")
        out = self.add("layer_norm", [rows, self.add_const(np.ones(inner), "", f"{label}_unit"),
                                      self.add_const(np.zeros(inner), "", f"{label}_zero")],
                       {"epsilon": float(attrs.get("epsilon", 1e-5))}, label)
        value = TensorValue(out, (shape[0], channels, inner))
        per_channel = (1, channels, 1)
        if np.any(scale != 1):
            value = self.binary(node, "tensor_mul", value, scale.reshape(per_channel), f"{label}_scaled")
        if np.any(bias != 0):
            value = self.binary(node, "tensor_sub", value, -bias.reshape(per_channel), f"{label}_shifted")
        if len(shape) != 3:
            value = TensorValue(self.add("reshape", [value.node], {"shape": list(shape)}, f"{label}_onnx"), shape)
        self.define(node.output[0], value)

    def fold(self, node) -> bool:
        """A node whose inputs are all constants (or a Shape of a computed value, whose shape is known) becomes
        constants, evaluated by onnx's reference implementation: the exporters' shape arithmetic."""
        names = [n for n in node.input if n]
        if node.op_type == "Shape" and names and names[0] in self.values:
            attrs = attributes(node)
            shape = list(self.values[names[0]].shape)
            self.weights[node.output[0]] = np.array(shape[attrs.get("start", 0):attrs.get("end", len(shape))],
                                                    dtype=np.int64)
            return True
        if not names or any(n not in self.weights for n in names):
            return False
        # deferred: onnx is an optional dependency (the [onnx] extra); the caller has imported it already
        from onnx import TensorProto, helper
        from onnx.reference import ReferenceEvaluator

        feeds = {n: np.asarray(self.weights[n]) for n in names}
        inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                  for n, v in feeds.items()]
        outputs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output if o]
        opsets = [helper.make_opsetid("", self.opset)] if self.opset else None
        model = helper.make_model(helper.make_graph([node], "fold", inputs, outputs), opset_imports=opsets)
        try:
            results = ReferenceEvaluator(model).run(None, feeds)
        except Exception as exc:  # noqa: BLE001 - the reference refuses what onnxruntime would: name the node
            raise _Bad(f"{node.op_type} node {node.name!r} on constants: {type(exc).__name__}: {exc}") from None
        for name, value in zip([o for o in node.output if o], results):
            value = np.asarray(value)
            if value.size > MAX_ELEMENTS:
                raise _Bad(f"{node.op_type} node {node.name!r} makes a constant of {value.size} elements")
            self.weights[name] = value
        return True

    def dense(self, node, attrs: dict) -> None:
        what = f"{node.op_type} node {node.name!r}"
        if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] and node.input[1] not in self.weights:
            self.matmul_of_values(node, what)
            return
        x = self.value(node, 0)
        if x.spatial and node.op_type == "MatMul":  # (batch, rows, features) read as ONNX holds it, as torch does
            x = self.plain(x, identifier(node.name or node.output[0], "dense"))
        rows = x.shape[:-1]  # MatMul: a constant matrix multiplies every row of the last axis
        if x.spatial or len(x.shape) < 2 or (len(x.shape) != 2 and node.op_type != "MatMul"):
            raise _Bad(f"{what} takes a tensor of shape {list(x.shape)}; flatten it to (batch, features) first")
        if node.op_type == "Gemm":
            B = self.const(node, 1, "weights")
            if B.ndim != 2:
                raise _Bad(f"{what} weights have shape {list(B.shape)}, expected 2-D")
            W = (B if attrs.get("transB", 0) else B.T) * float(attrs.get("alpha", 1.0))
            C = self.const(node, 2, "bias", required=False)
            b = np.zeros(W.shape[0]) if C is None else C.reshape(-1) * float(attrs.get("beta", 1.0))
            name = node.output[0]
        else:
            B = self.const(node, 1, "weights")
            if B.ndim != 2:
                raise _Bad(f"{what} weights have shape {list(B.shape)}, expected 2-D")
            W, b, name = B.T, np.zeros(B.shape[1]), node.output[0]
            found = self.only_consumer(name, ("Add",))
            if found is not None:
                k, add = found
                other = [i for i in add.input if i != name]
                if len(other) == 1 and other[0] in self.weights:
                    b = self.const(add, list(add.input).index(other[0]), "bias").reshape(-1)
                    self.done.add(k)
                    name = add.output[0]
        if W.shape[1] != x.shape[-1]:
            raise _Bad(f"{what} takes {W.shape[1]} features, its input has {x.shape[-1]}")
        if b.shape != (W.shape[0],):
            raise _Bad(f"{what} bias has {b.size} values, expected {W.shape[0]}")
        found = self.only_consumer(name, ("BatchNormalization",)) if len(rows) == 1 else None
        if found is not None:  # BatchNorm1d after a Linear (the TorchScript exporter leaves it): its features' axis
            k, bn = found
            W, b = self.fold_batch_norm(bn, W, b)
            self.done.add(k)
            name = bn.output[0]
        activation, name = self.activation_after(name)
        label = identifier(node.name or name, "dense")
        weights = self.add_const(W, "OI", f"{label}_weights")
        bias = self.add_const(b, "", f"{label}_bias")
        out = self.add("fully_connected", [x.node, weights, bias], {"activation": activation}, label)
        shape = (*rows, W.shape[0])
        if len(shape) != 2 or shape[0] != 1:
            out = self.add("reshape", [out], {"shape": list(shape)}, f"{label}_rows")
        self.define(name, TensorValue(out, shape))

    def matmul_of_values(self, node, what: str) -> None:
        """MatMul of a computed right operand (attention's q k^T, its weights times v): batch_matmul over numpy's
        broadcast batch axes, each operand as ONNX holds it (the left one may be a constant)."""
        label = identifier(node.name or node.output[0], "matmul")
        operands = []
        for k, name in enumerate(node.input):
            if name in self.weights:
                value = self.const(node, k, "operand")
                operands.append(TensorValue(self.add_const(value, "", f"{label}_{'ab'[k]}"), value.shape))
            else:
                operands.append(self.plain(self.value(node, k), f"{label}_{'ab'[k]}"))
        a, b = operands
        if len(a.shape) < 2 or len(b.shape) < 2 or a.shape[-1] != b.shape[-2]:
            raise _Bad(f"{what} multiplies shapes {list(a.shape)} and {list(b.shape)}; matrices (2 to 5 axes) whose "
                       "inner sizes agree are supported")
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise _Bad(f"{what}: batch axes {list(a.shape[:-2])} and {list(b.shape[:-2])} do not broadcast") from None
        out = self.add("batch_matmul", [a.node, b.node], {"adj_x": 0, "adj_y": 0}, label)
        self.define(node.output[0], TensorValue(out, (*batch, a.shape[-2], b.shape[-1])))

    def add_tensors(self, node) -> None:
        """A sum of two computed tensors of one shape (a skip connection): tensor_add, with the activations after
        it fused; of a constant: ``elementwise``."""
        if len(node.input) != 2 or any(i in self.weights for i in node.input):
            self.elementwise(node)
            return
        a, b = self.value(node, 0), self.value(node, 1)
        if a.shape != b.shape:
            size = int(np.prod(a.shape))
            try:
                shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
            except ValueError:
                shape = None
            if shape is None or int(np.prod(shape)) != size or int(np.prod(b.shape)) != size:
                self.elementwise(node)  # refused by name there: broadcasting two computed tensors
                return
            # only unit axes differ (numpy's broadcasting of a shape with leading 1s): the same elements
            label = identifier(node.name or node.output[0], "add")
            a, b = self.reshaped(a, shape, f"{label}_a"), self.reshaped(b, shape, f"{label}_b")
        if a.spatial != b.spatial:
            label = identifier(node.name or node.output[0], "add")
            a, b = self.spatial(a, f"{label}_a"), self.spatial(b, f"{label}_b")
        activation, name = self.activation_after(node.output[0])
        if a.spatial != b.spatial:
            label = identifier(node.name or name, "add")
            a, b = self.plain(a, f"{label}_a"), self.plain(b, f"{label}_b")
        out = self.add("tensor_add", [a.node, b.node], {"activation": activation}, identifier(node.name or name, "add"))
        self.define(name, TensorValue(out, a.shape, a.spatial))

    def softmax(self, node, attrs: dict) -> None:
        x = self.value(node, 0)
        axis = self.softmax_axis(node, attrs, x)
        label = identifier(node.name or node.output[0], "softmax")
        self.define(node.output[0], self.along_last_axis(x, axis, label, lambda v: self.add(
            "softmax", [v], {"beta": 1.0}, label)))

    def softmax_axis(self, node, attrs: dict, x: TensorValue) -> int:
        """Softmax's / LogSoftmax's axis; before opset 13 they normalise over every axis from it on (the tensor
        taken as a matrix), which is one axis only where the axes after it hold one element each."""
        what = f"{node.op_type} node {node.name!r}"
        axis = onnx_axis(attrs.get("axis", -1 if self.opset is None or self.opset >= 13 else 1), len(x.shape), what)
        if self.opset is not None and self.opset < 13 and any(d != 1 for d in x.shape[axis + 1:]):
            raise _Bad(f"{what} (opset {self.opset}) normalises axes {axis}.. of shape {list(x.shape)} together; only "
                       "one axis is supported: export with opset 13 or later")
        return axis

    def along_last_axis(self, x: TensorValue, axis: int, label: str, op) -> TensorValue:
        """``op`` (IR node -> IR node: an op along the last axis) along ONNX axis ``axis`` of ``x``: the axis moved
        last and back (a reshape where the axes after it hold one element each, else a transpose)."""
        x = self.plain(x, label)
        rank = len(x.shape)
        if axis == rank - 1:
            return TensorValue(op(x.node), x.shape)
        perm = [k for k in range(rank) if k != axis] + [axis]
        moved = tuple(x.shape[p] for p in perm)
        free = all(d == 1 for d in x.shape[axis + 1:])
        last = self.add("reshape" if free else "transpose", [x.node], {"shape": list(moved)} if free else
                        {"perm": perm}, f"{label}_last")
        out = op(last)
        back = [perm.index(k) for k in range(rank)]
        return TensorValue(self.add("reshape" if free else "transpose", [out], {"shape": list(x.shape)} if free else
                                    {"perm": back}, f"{label}_back"), x.shape)

    def activation(self, node, attrs: dict) -> None:
        """An elementwise activation (ir/ops/network); a Sigmoid whose output only a Mul by its input reads is
        SiLU (x * sigmoid(x), as both of PyTorch's exporters write nn.SiLU)."""
        x = self.value(node, 0)
        op, defaults = ACTIVATIONS[node.op_type]
        ir_attrs = {}
        for key, default in defaults.items():
            value = attrs.get(key, default)
            ir_attrs[key] = value.decode() if isinstance(value, bytes) else (float(value) if key != "approximate"
                                                                              else value)
        name = node.output[0]
        if node.op_type == "Sigmoid":
            found = self.only_consumer(name, ("Mul",))
            if found is not None and sorted(found[1].input) == sorted([node.input[0], name]):
                self.done.add(found[0])
                op, name = "silu", found[1].output[0]
        out = self.add(op, [x.node], ir_attrs, identifier(node.name or name, op))
        self.define(name, TensorValue(out, x.shape, x.spatial))

    def unary(self, node) -> None:
        """An elementwise float function of the data (float builds; the fixed point refuses float_unary by
        name); Pow only by a constant exponent of 2 or 0.5."""
        x = self.value(node, 0)
        function = UNARY.get(node.op_type)
        if node.op_type == "Pow":
            exponent = self.const(node, 1, "exponent")
            function = POWERS.get(float(exponent.reshape(-1)[0])) if exponent.size == 1 else None
            if function is None:
                raise _Bad(f"Pow node {node.name!r}: exponent {exponent.reshape(-1).tolist()[:4]}; only a constant "
                           f"{' or '.join(str(p) for p in POWERS)} is supported")
        ir_attrs = {"function": function}
        for key, value in attributes(node).items():  # Selu's alpha and gamma, Celu's alpha
            ir_attrs[key] = float(value)
        if node.op_type == "Celu" and ir_attrs.get("alpha", 1.0) == 0:
            raise _Bad(f"Celu node {node.name!r}: alpha 0 (Celu divides by alpha)")
        out = self.add("float_unary", [x.node], ir_attrs, identifier(node.name or node.output[0], function))
        self.define(node.output[0], TensorValue(out, x.shape, x.spatial))

    def pass_through(self, node) -> None:
        """Identity, and Dropout as inference runs it: its input unchanged (of a constant: ``fold_constants``)."""
        self.pass_through_checks(node)
        self.define(node.output[0], self.value(node, 0))

    def pass_through_checks(self, node) -> None:
        """A Dropout is inference's: no training_mode true (its boolean mask no supported op reads)."""
        what = f"{node.op_type} node {node.name!r}"
        if node.op_type == "Dropout":
            if len(node.input) > 2 and node.input[2]:
                training = self.const(node, 2, "training_mode")
                if training.size != 1 or bool(training.reshape(-1)[0]):
                    raise _Bad(f"{what}: training_mode is not false; only inference (no dropout) is supported")

    def fold_constants(self) -> None:
        """Constant nodes, and Identity / Dropout of a constant, as weights before any op is lowered: the
        TorchScript exporter writes a Clip's bounds as Constant nodes after the Conv that fuses the Clip."""
        for k, node in enumerate(self.proto.node):
            if node.domain not in ONNX_DOMAINS or not node.output:
                continue
            if node.op_type == "Constant":
                # deferred: onnx is an optional dependency (the [onnx] extra); the caller has imported it already
                from onnx import numpy_helper

                attrs = attributes(node)
                if "value" in attrs:
                    self.weights[node.output[0]] = numpy_helper.to_array(attrs["value"])
                elif any(name in attrs for name in CONSTANT_VALUES):
                    name = next(name for name in CONSTANT_VALUES if name in attrs)
                    dtype = np.float32 if "float" in name else np.int64
                    self.weights[node.output[0]] = np.array(attrs[name], dtype=dtype)
                else:
                    raise _Bad(f"Constant node {node.name!r} without a tensor value")
            elif node.op_type == "CastLike" and len(node.input) == 2 and node.input[0] in self.weights \
                    and node.input[1] not in self.weights:
                # a constant cast like the network's data: the dynamo exporter's Clip bounds and biases (float), or
                # like an integer input (indices)
                integer_inputs = {i.name for i in self.proto.input
                                  if i.type.tensor_type.elem_type in (2, 3, 4, 5, 6, 7)}
                dtype = np.int64 if node.input[1] in integer_inputs else np.float32
                self.weights[node.output[0]] = np.asarray(self.weights[node.input[0]], dtype=dtype)
            elif node.op_type in ("Identity", "Dropout") and node.input and node.input[0] in self.weights:
                self.pass_through_checks(node)
                self.weights[node.output[0]] = self.weights[node.input[0]]
            else:
                continue
            self.done.add(k)

    def lower(self, node) -> None:
        op, attrs = node.op_type, attributes(node)
        timed = [n for n in node.input if n in self.values and self.values[n].time is not None]
        if timed and op not in TIME_OPS:
            raise _Bad(f"{op} node {node.name!r} reads {timed[0]!r}, a recurrent layer's sequence, across its time "
                       "steps; a stepped build (recurrent='step') computes one time step per call: compile with "
                       "recurrent='unroll'")
        integers = [n for n in node.input if n in self.values and self.graph.type(self.values[n].node).dtype == INDEX]
        if integers and not (op == "Gather" and node.input[0] in self.weights and list(node.input[1:]) == integers):
            raise _Bad(f"{op} node {node.name!r} reads the integer input {integers[0]!r}; only a Gather of a constant "
                       "table (an Embedding) reads integer indices")
        if op in RECURRENT_OPS:
            lower_recurrent(self, node, attrs, identifier(node.name or node.output[0], op.lower()), self.stepped)
        elif op == "Gather":
            self.gather(node, attrs)
        elif op == "Resize":
            self.resize(node, attrs)
        elif op == "Conv":
            self.conv(node, attrs)
        elif op in ("MaxPool", "AveragePool"):
            self.pool(node, attrs)
        elif op == "GlobalAveragePool":
            self.global_average(node)
        elif op in ("Flatten", "Reshape", "Squeeze", "Unsqueeze"):
            self.reshaping(node, attrs)
        elif op in ("Gemm", "MatMul"):
            self.dense(node, attrs)
        elif op == "Add":
            self.add_tensors(node)
        elif op == "Softmax":
            self.softmax(node, attrs)
        elif op in ("Identity", "Dropout"):
            self.pass_through(node)
        elif op in ACTIVATIONS:
            self.activation(node, attrs)
        elif op in BINARY:
            self.elementwise(node)
        elif op in FUSED:
            self.standalone_activation(node)
        elif op == "ConvTranspose":
            self.conv_transpose(node, attrs)
        elif op == "DepthToSpace":
            self.depth_to_space(node, attrs)
        elif op == "PRelu":
            x = self.value(node, 0)
            slope = self.const(node, 1, "slope").astype(np.float64)
            label = identifier(node.name or node.output[0], "prelu")
            alpha = self.add_const(self.layout_constant(slope, len(x.shape), x.spatial), "NHWC" if x.spatial else "",
                                   f"{label}_slope")
            self.define(node.output[0], TensorValue(self.add("prelu", [x.node, alpha], {}, label), x.shape, x.spatial))
        elif op == "InstanceNormalization":
            self.instance_norm(node, attrs)
        elif op in ("LogSoftmax", "LayerNormalization"):
            self.last_axis_op(node, attrs)
        elif op == "GlobalMaxPool":
            self.global_pool(node, "max_pool2d")
        elif op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"):
            self.reduce(node, attrs)
        elif op == "Transpose":
            self.transpose(node, attrs)
        elif op == "Slice":
            self.slice(node)
        elif op == "Split":
            self.split(node, attrs)
        elif op == "Concat":
            self.concat(node, attrs)
        elif op == "Pad":
            self.pad(node, attrs)
        elif op in UNARY or op == "Pow":
            self.unary(node)
        elif op in COMPARISONS:
            self.comparison(node)
        elif op == "Where":
            self.where(node)
        elif op == "Expand":
            self.expand(node)
        elif op in CONSTANT_ONLY:
            raise _Bad(f"{op} node {node.name!r} reads the network's data; {op} is supported on constants only (shape "
                       "arithmetic)")
        else:  # BatchNormalization
            raise _Bad(f"{op} node {node.name!r} does not follow a Conv whose only reader it is; only batch "
                       "normalisation folded into a convolution is supported")


def input_value(graph: Graph, name: str, shape: list[int], sequence_axis: int | None = None,
                stepped: bool = False) -> TensorValue:
    """The input node (ONNX's shape and order) and, for a channels-first tensor, its NHWC view; an input that is a
    recurrent layer's sequence (``sequence_axis``) stays as ONNX holds it."""
    layout = {2: "NC", 3: "NCW", 4: "NCHW"}.get(len(shape), "")
    if sequence_axis is not None and len(shape) == 3:  # the time axis T, the features C last, the batch N
        layout = "".join("T" if k == sequence_axis else "C" if k == 2 else "N" for k in range(3))
    x = graph.add("input", [], {"name": "x"}, type=TensorType(tuple(shape), F32, layout), name="x")
    if sequence_axis is not None:
        return TensorValue(x, tuple(shape), 0, sequence_axis if stepped else None)
    if len(shape) not in (3, 4):
        return TensorValue(x, tuple(shape))
    spatial = len(shape) - 2
    channels = shape[1]
    nhwc = (1, 1, shape[2], channels) if spatial == 1 else (1, shape[2], shape[3], channels)
    node = x
    if channels > 1:  # (1, C, ...) -> (1, ..., C): a channel of one needs no move
        perm = [0, 2, 1] if spatial == 1 else [0, 2, 3, 1]
        node = graph.add("transpose", [x], {"perm": perm}, name="x_channels_last")
    node = graph.add("reshape", [node], {"shape": list(nhwc)}, type=TensorType(nhwc, F32, "NHWC"), name="x_nhwc")
    return TensorValue(node, tuple(shape), spatial)


def canonical_graph(graph: Graph, proto_graph, origin: dict[str, int]) -> Graph:
    """The graph both exporters' files of one network give alike. A reshape of a reshape reads the first one's
    operand (the exporters move axes in different steps: dynamo's view / unsqueeze chains, TorchScript's Flatten),
    and what no output needs is dropped. Each ONNX node's IR nodes are named after the IR op it became, numbered in
    order (conv2d, conv2d_1, ...; its constants conv2d_filter, ...), not after the ONNX node's name (dynamo
    "node_conv2d", TorchScript "/0/Conv"). The input, the states given as inputs and what follows the last ONNX
    node keep their names."""
    source: dict[str, str] = {}  # reshape -> the operand of its chain of reshapes
    for name in graph.order():
        node = graph.node(name)
        if node.op == "reshape" and graph.op(node.inputs[0]) == "reshape":
            source[name] = source.get(node.inputs[0], graph.node(node.inputs[0]).inputs[0])
    operands = {name: (source[name],) if name in source else graph.node(name).inputs for name in graph.nx}
    needed, stack = set(), [n for _, n in graph.outputs] + [n for n in graph.nx if graph.op(n) in ("input", "state")]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack.extend(operands[name])
    order = [name for name in graph.order() if name in needed]
    label_of: dict[int, str] = {}  # ONNX node index -> its canonical label
    for name in order:  # the op of an ONNX node's last computed IR node names it
        k = origin.get(name)
        if k is not None and graph.op(name) != "const":
            label_of[k] = graph.op(name)
    taken: dict[str, int] = {}
    for k in sorted(label_of):
        op = label_of[k]
        label_of[k] = op if op not in taken else f"{op}_{taken[op]}"
        taken[op] = taken.get(op, 0) + 1
    renamed = Graph(graph.name)
    mapping: dict[str, str] = {}
    for name in order:
        node, k = graph.node(name), origin.get(name)
        new = name
        if k is not None and k in label_of:
            onnx_node = proto_graph.node[k]
            prefix = identifier(onnx_node.name or onnx_node.output[0], "")
            suffix = name[len(prefix):] if prefix and name.startswith(prefix) else f"_{name}"
            new = label_of[k] + suffix
        mapping[name] = renamed.add(node.op, [mapping[i] for i in operands[name]], node.attrs, type=node.type,
                                    name=new)
    next_labels = {next_label(n): next_label(mapping[n]) for n in graph.nx if graph.op(n) == "state"}
    renamed.outputs = [(next_labels.get(label, label), mapping[n]) for label, n in graph.outputs]
    return renamed


def network_graph(path, proto_graph, weights: dict, input_name: str, shape: list[int],
                  opset: int | None = None, states: tuple = (), sequence_axis: int | None = None,
                  stepped: bool = False, file_steps: int | None = None, indices: bool = False) -> Graph:
    """The float IR graph of an ONNX network (``shape``: its input's, batch 1); ModelFileError on anything
    it does not lower.

    ``states``: (name, shape) of the network's other inputs, each a state the stream carries from call to call (as
    PyTorch's h0 is given the h_n of the call before): a ``state`` node, zero after a reset, whose next value is the
    network's output in the same place among its outputs after the first (the scores). ``sequence_axis``: the
    input's axis that a recurrent layer reads as its sequence; ``stepped``: one time step per call (that axis is 1
    long; ``file_steps`` its length in the file's constants). ``indices``: the input holds integers (int32 in the
    C), indices that only Gather nodes of a constant table (PyTorch's Embedding) read."""
    path = Path(path)
    problems = unsupported(proto_graph)
    if problems:
        raise ModelFileError(f"{path}: {len(problems)} unsupported op(s) or attribute(s): {'; '.join(problems)}; "
                             f"supported ops: {', '.join(NETWORK_OPS)}")
    if len(proto_graph.output) != 1 + len(states):
        raise ModelFileError(f"{path}: the network has {len(proto_graph.output)} outputs and {1 + len(states)} "
                             "inputs; one output is supported, and after it one per input after the first (a state "
                             "carried from call to call: its next value)")
    if not 1 <= len(shape) <= 4:
        raise ModelFileError(f"{path}: input {input_name!r} has shape {shape}; expected (batch, features), (batch, "
                             "channels, length) or (batch, channels, height, width)")
    if int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
        raise ModelFileError(f"{path}: input {input_name!r} has shape {shape}, more than {MAX_ELEMENTS} elements")
    graph = Graph(identifier(path.stem, "onnx"))
    low = _Lowering(path, proto_graph, dict(weights), graph, opset, stepped, file_steps)
    try:
        for node in proto_graph.node:  # every op here writes its first output: a node without one computes nothing
            if not node.output or not node.output[0]:
                raise _Bad(f"node {node.name!r} ({node.op_type}) has no output")
        if indices:
            layout = {2: "NC", 3: "NCW", 4: "NCHW"}.get(len(shape), "")  # as ONNX holds it: nothing reads it spatially
            low.define(input_name, TensorValue(graph.add("input", [], {"name": "x"}, type=TensorType(
                tuple(shape), INDEX, layout), name="x"), tuple(shape)))
        else:
            low.define(input_name, input_value(graph, input_name, shape, sequence_axis, stepped))
        state_nodes = []
        for name, state_shape in states:
            state_shape = tuple(state_shape)
            state = graph.add("state", [], {"init": np.zeros(state_shape, np.float32)},
                              type=TensorType(state_shape, F32, ""), name=identifier(name, "state"))
            state_nodes.append(state)
            low.define(name, TensorValue(state, state_shape))
        low.fold_constants()
        for k, node in enumerate(proto_graph.node):
            if k in low.done:
                continue
            if set(node.output) & set(node.input):
                raise _Bad(f"node {node.name!r} ({node.op_type}) takes its own output as an input")
            low.current = k
            if not low.fold(node):
                low.lower(node)
        low.current = None
        final = proto_graph.output[0].name
        if final not in low.values:
            raise _Bad(f"the output {final!r} is computed by no supported node")
        result = low.values[final]
        out = result.node
        if (result.spatial and int(np.prod(result.shape)) != result.channels) or len(result.shape) > 2:
            out = low.flat(result, "scores").node  # ONNX's order in the scores
        graph.set_output("scores", out)
        for state, (name, state_shape), output in zip(state_nodes, states, proto_graph.output[1:]):
            if output.name not in low.values:
                raise _Bad(f"the output {output.name!r} (the next value of the input {name!r}) is computed by no "
                           "supported node")
            value = low.plain(low.values[output.name], f"{state}_next")
            if int(np.prod(value.shape)) != int(np.prod(state_shape)):
                raise _Bad(f"the output {output.name!r} of shape {list(value.shape)} cannot be the next value of the "
                           f"input {name!r} of shape {list(state_shape)}")
            node = value.node
            if graph.type(node).shape != tuple(state_shape):
                node = low.add("reshape", [node], {"shape": list(state_shape)}, f"{state}_next")
            graph.set_next_state(state, node)
        graph = canonical_graph(graph, proto_graph, low.origin)
        verify(graph)
    except _Bad as exc:
        raise ModelFileError(f"{path}: {exc}") from None
    except ValueError as exc:  # a type rule refusing what the checks above let through
        raise ModelFileError(f"{path}: {exc}") from None
    return graph
