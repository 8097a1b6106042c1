"""Float networks (ONNX, through importers/onnx_network.py) quantised to TFLite's int8 dialect: the graph
the C for TFLite's int8 ops computes exactly, so every target that runs TFLite int8 networks runs these.

Post-training quantisation from calibration rows, as TFLite's converter does it:

- activations (the input and every computed tensor): asymmetric int8, the range [min, max] the float
  network reaches on the calibration rows, widened to hold 0 (real 0 must be exact: padding, ReLU);
  scale = (max - min) / 255, zero point = -128 - min / scale rounded;
- convolution filters: symmetric int8 per output channel (scale max|w| / 127, zero point 0); dense
  weights per tensor (TFLite's FULLY_CONNECTED); biases int32 at input scale x filter scale;
- pools, reshapes, transposes, slices, pads, resizes and largest values keep their input's
  quantisation (TFLite requires it), and a concatenation's operands and MAXIMUM / MINIMUM's share their result's (a
  constant operand quantised so): as the converter does, the tensors such ops link form groups (union-find), each
  group one quantisation covering the ranges of all its tensors, which their producers take; where a producer's
  quantisation is fixed (the network's input, softmax's) and the group's range is not within it, a requantisation
  (TFLite's QUANTIZE int8 -> int8) comes between it and the op of the group reading it;
- ADD, SUB, MUL, PRELU, SUM / MEAN over axes and the activations take their calibrated range, a constant operand
  (PRELU's slope too) its own asymmetric int8; softmax gives TFLite's fixed 1/256, -128, L2_NORMALIZATION 1/128, 0;
- a comparison (GREATER, LESS, EQUAL, ...) reads each operand at its own quantisation (a constant its own int8) and
  gives bools; SELECT_V2's branches and result share one quantisation (a group, as MAXIMUM's), its condition read
  as it is;
- an Embedding (GATHER of a constant table by integer indices, the network's input left as those integers): the
  table asymmetric int8 over its whole range, which the gathered values keep;
- an unrolled LSTM: weights symmetric int8 per tensor, biases int32, the hidden state int8 (its output's
  quantisation), the cell state int16 at a power-of-two scale; LayerNorm as the ops the converter writes for it.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.errors import CompileError, DataError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_batch
from tinycc_ml.ir.ops.network.activations import FUNCTIONS
from tinycc_ml.ir.types import DType, TensorType, quantised
from tinycc_ml.ir.verify import verify

INT8_LEVELS = 255
INT32_LIMIT = 2**31 - 1
SOFTMAX_OUTPUT = quantised(8, 1 / 256, -128)
L2_NORMALIZATION_OUTPUT = quantised(8, 1 / 128, 0)
KEEP_QUANTISATION = ("average_pool2d", "max_pool2d", "reshape", "transpose", "strided_slice", "pad", "reduce_max",
                     "reduce_min", "relu6", "resize_nearest", "resize_bilinear")
# ops whose output takes the range it reaches on the calibration rows (the activations: ir/ops/network)
CALIBRATED_OUTPUT = ("tensor_add", "tensor_sub", "tensor_mul", "batch_matmul", "relu", "leaky_relu", "prelu",
                     "reduce_sum", "squared_difference", *FUNCTIONS)
QUANTISED_UNARY = ("abs", "rsqrt")  # float_unary functions TFLite Micro runs on int8 (quantised_unary)
# ops comparing or copying stored integers: every operand (a constant quantised so) and the result share one
SHARED_QUANTISATION = ("tensor_maximum", "tensor_minimum", "concatenation")
SAME_QUANTISATION = KEEP_QUANTISATION + SHARED_QUANTISATION
# an LSTM step's state operand sharing the result's quantisation (the layer's hidden state, its cell state: one
# variable tensor each in TFLite): lstm_hidden's h (its output is the next h), lstm_cell's c
LSTM_STATE = {"lstm_hidden": 1, "lstm_cell": 2}
# None: one scale per tensor
FILTER_AXIS = {"conv2d": 0, "grouped_conv2d": 0, "depthwise_conv2d": 3, "fully_connected": None,
               "transpose_conv2d": 0}


def activation_dtype(values: np.ndarray) -> DType:
    """Asymmetric int8 covering the values and 0."""
    lo = min(float(np.min(values)), 0.0)
    hi = max(float(np.max(values)), 0.0)
    span = hi - lo
    if not np.isfinite(span):
        raise DataError(f"calibration data drive a network value to {lo:g}..{hi:g}")
    scale = float(np.float32(span / INT8_LEVELS)) if span > 0 else 1.0 / INT8_LEVELS
    zero_point = int(np.clip(round(-128 - lo / scale), -128, 127))
    return quantised(8, scale, zero_point)


def symmetric_scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    """max|w| / 127 per index of ``axis`` (None: one scale), float32 values; all-zero slices get 1."""
    if axis is None:
        largest = np.array([np.max(np.abs(w))])
    else:
        largest = np.max(np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1), axis=1)
    return np.where(largest > 0, largest / 127, 1.0).astype(np.float32).astype(np.float64)


def _quantise_layer(q: Graph, graph: Graph, name: str, x: str, out: DType) -> str:
    node = graph.node(name)
    w = np.asarray(graph.node(node.inputs[1]).attrs["value"], dtype=np.float64)
    b = np.asarray(graph.node(node.inputs[2]).attrs["value"], dtype=np.float64).reshape(-1)
    axis = FILTER_AXIS[node.op]
    scales = symmetric_scales(w, axis)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    wq = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    x_scale = q.type(x).dtype.qscales[0]
    bias_scales = np.array([float(np.float32(x_scale * s)) for s in np.broadcast_to(scales, b.shape)])
    bq = np.round(b / bias_scales)
    if np.any(np.abs(bq) > INT32_LIMIT):
        raise DataError(f"node %{name}: a bias of {np.max(np.abs(b)):g} over its scale {np.min(bias_scales):g} "
                        "passes int32; the calibration rows span too little for this network's biases")
    w_type = graph.type(node.inputs[1])
    per_channel = axis is not None
    w_dtype = quantised(8, scales, 0, axis if per_channel else -1)
    b_dtype = quantised(32, bias_scales if per_channel else bias_scales[:1], 0, 0 if per_channel else -1)
    filters = q.add("const", [], {"value": wq}, type=w_type.with_dtype(w_dtype), name=node.inputs[1])
    bias = q.add("const", [], {"value": bq.astype(np.int32)}, type=TensorType(b.shape, b_dtype),
                 name=node.inputs[2])
    return q.add(node.op, [x, filters, bias], node.attrs, type=node.type.with_dtype(out), name=name)


def _quantise_constant(q: Graph, graph: Graph, name: str, dtype: DType | None = None) -> str:
    """A constant operand of an elementwise op at ``dtype`` (default: asymmetric int8 covering its values)."""
    dtype = dtype or activation_dtype(np.asarray(graph.node(name).attrs["value"], dtype=np.float64))
    return q.add("const", [], {"value": _constant_ints(graph, name, dtype)}, type=graph.type(name).with_dtype(dtype),
                 name=f"{name}_q")


def _constant_ints(graph: Graph, name: str, dtype: DType) -> np.ndarray:
    """A float constant's integers at an int8 or int16 quantisation (rounded half to even, saturated)."""
    values = np.asarray(graph.node(name).attrs["value"], dtype=np.float64)
    ints = np.clip(np.round(values / dtype.qscales[0]) + dtype.zero_point, *dtype.integer_range)
    return ints.astype(np.int8 if dtype.bits == 8 else np.int16)


class Groups:
    """Union-find over tensors: the operands and result of an op that keeps or shares quantisation are one group."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        root = name
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while name != root:  # path compression
            self.parent[name], name = root, self.parent[name]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)  # the same root whatever the order: byte-identical output


def fixed_dtype(graph: Graph, name: str, values: dict) -> DType | None:
    """The quantisation a tensor's producer fixes (the network's input: its calibrated range; softmax: 1/256), None
    for one free to take its group's."""
    op = graph.op(name)
    if op == "input":  # integer indices (an Embedding's) stay the integers they are
        return graph.type(name).dtype if graph.type(name).dtype.is_integer else activation_dtype(values[name])
    if op == "softmax":
        return SOFTMAX_OUTPUT
    if op == "l2_normalization":  # TFLite Micro's kernel gives steps of 1/128 around 0, as the converter writes
        return L2_NORMALIZATION_OUTPUT
    if op == "gather" and graph.op(graph.node(name).inputs[0]) == "const":  # an embedding table: its whole range
        return activation_dtype(np.asarray(graph.node(graph.node(name).inputs[0]).attrs["value"]))
    return None


def cell_dtype(lo: float, hi: float) -> DType:
    """An LSTM's cell state as TFLite's converter quantises it: symmetric int16, the scale 2^k / 32768 of the least
    power of two 2^k holding the calibrated values (TFLite Micro's kernel reads the cell at a power of two)."""
    largest = max(abs(lo), abs(hi), 2.0**-8)
    return quantised(16, 2.0 ** (math.ceil(math.log2(largest)) - 15), 0)


def _holds(dtype: DType, lo: float, hi: float) -> bool:
    """Whether an int8 quantisation represents lo..hi (to within one step: softmax's 1.0 at 255/256)."""
    scale = dtype.qscales[0]
    return lo >= scale * (-128 - dtype.zero_point) - scale and hi <= scale * (127 - dtype.zero_point) + scale


def group_dtypes(graph: Graph, values: dict) -> tuple[dict[str, DType], dict[str, DType]]:
    """Each computed tensor's quantisation as its producer writes it, and as the ops of its group read it (they
    differ only for a fixed producer whose group needs a wider range: requantised)."""
    groups = Groups()
    # a comparison's bools (and their moves: transpose, reshape) are no int8 values: each keeps its type, alone
    masks = {n for n in graph.order() if graph.type(n).dtype.kind == "bool"}
    computed = [n for n in graph.order() if graph.op(n) != "const" and n not in masks]
    for name in computed:
        op, operands = graph.op(name), graph.node(name).inputs
        linked = operands if op in SAME_QUANTISATION else [operands[LSTM_STATE[op]]] if op in LSTM_STATE else \
            operands[1:] if op == "select" else []
        for operand in linked:
            if graph.op(operand) != "const":
                groups.union(name, operand)
    members: dict[str, list[str]] = {}
    for name in computed:
        members.setdefault(groups.find(name), []).append(name)
    written, read = {}, {}
    for names in members.values():
        lo = min(float(np.min(values[n])) for n in names)
        hi = max(float(np.max(values[n])) for n in names)
        fixed = {n: d for n in names if (d := fixed_dtype(graph, n, values)) is not None}
        distinct = set(fixed.values())
        if any(graph.op(n) == "lstm_cell" for n in names):  # an LSTM's cell state: int16, a power-of-two scale
            distinct, shared = set(), cell_dtype(lo, hi)
        elif any(not d.is_quantised for d in distinct):  # integer indices: no quantisation
            (shared,) = distinct
        elif len(distinct) == 1 and _holds(next(iter(distinct)), lo, hi):
            shared = next(iter(distinct))
        else:
            shared = activation_dtype(np.array([lo, hi]))
        for n in names:
            written[n], read[n] = fixed.get(n, shared), shared
    for n in masks:
        written[n] = read[n] = graph.type(n).dtype
    return written, read


def _read_as(q: Graph, name: str, dtype: DType, requantised: dict) -> str:
    """``name`` at ``dtype``: itself, or its requantisation (TFLite's QUANTIZE int8 -> int8; one per tensor)."""
    if q.type(name).dtype == dtype:
        return name
    if name not in requantised:
        requantised[name] = q.add("requantize", [name], {}, type=q.type(name).with_dtype(dtype),
                                  name=f"{name}_requantised")
    return requantised[name]


def _lstm_constant(q: Graph, graph: Graph, name: str, dtype: DType, ints: np.ndarray, constants: dict) -> str:
    if (name, dtype) not in constants:
        constants[name, dtype] = q.add("const", [], {"value": ints}, type=graph.type(name).with_dtype(dtype),
                                       name=name)
    return constants[name, dtype]


def _quantise_lstm_step(q: Graph, graph: Graph, name: str, ins: list, state_dtypes: dict, constants: dict) -> str:
    """One step of an LSTM (lstm_cell or lstm_hidden) in TFLite's int8 LSTM: weights symmetric int8 per tensor, each
    gate's bias int32 at input scale x its input weight's scale, the hidden state int8 (its group's quantisation,
    the layer's output's), the cell state int16 at a power-of-two scale (``cell_dtype``)."""
    node = graph.node(name)
    x = ins[0]
    states = []
    for k in (1, 2):  # h, c: a constant initial state at the quantisation of the state it starts
        operand = node.inputs[k]
        states.append(ins[k] if ins[k] is not None else
                      _lstm_constant(q, graph, operand, state_dtypes[operand], _constant_ints(graph, operand,
                                     state_dtypes[operand]), constants))
    gates = 3 if node.op == "lstm_cell" else 1
    weight_names = node.inputs[3:3 + 2 * gates]
    bias_names = node.inputs[3 + 2 * gates:]
    weights, scales = [], []
    for w_name in weight_names:
        w = np.asarray(graph.node(w_name).attrs["value"], dtype=np.float64)
        (scale,) = symmetric_scales(w, None)
        scales.append(scale)
        weights.append(_lstm_constant(q, graph, w_name, quantised(8, scale, 0),
                                      np.clip(np.round(w / scale), -127, 127).astype(np.int8), constants))
    x_scale = q.type(x).dtype.qscales[0]
    biases = []
    for b_name, w_scale in zip(bias_names, scales):  # the input weights' scales, in the biases' order
        b = np.asarray(graph.node(b_name).attrs["value"], dtype=np.float64)
        bias_scale = float(np.float32(x_scale * w_scale))
        bq = np.round(b / bias_scale)
        if np.any(np.abs(bq) > INT32_LIMIT):
            raise DataError(f"node %{name}: a bias of {np.max(np.abs(b)):g} over its scale {bias_scale:g} passes "
                            "int32; the calibration rows span too little for this network's biases")
        biases.append(_lstm_constant(q, graph, b_name, quantised(32, bias_scale, 0), bq.astype(np.int32), constants))
    return q.add(node.op, [x, *states, *weights, *biases], node.attrs, name=name)


def _constant(graph: Graph, value, t: TensorType, name: str) -> str:
    """A float constant of type ``t``, ``value`` broadcast to its shape."""
    return graph.add("const", [], {"value": np.broadcast_to(np.asarray(value, np.float32), t.shape).copy()},
                     type=TensorType(t.shape, t.dtype), name=name)


def decompose_layer_norms(graph: Graph) -> Graph:
    """Each layer_norm as the ops TFLite's converter writes for one, which its int8 kernels run: MEAN,
    SQUARED_DIFFERENCE with the mean, MEAN (the variance), ADD epsilon, RSQRT, then SUB the mean, MUL by the
    reciprocal, MUL by gamma, ADD beta (the same float arithmetic to float32 rounding; each intermediate calibrated,
    as the converter's are)."""
    norms = [n for n in graph.order() if graph.op(n) == "layer_norm"]
    if not norms:
        return graph
    graph = graph.copy()
    for name in norms:
        node = graph.node(name)
        x, gamma, beta = node.inputs
        t = graph.type(x)
        last = {"axes": [t.rank - 1], "keep_dims": 1, "mean": 1}
        reduced = TensorType((*t.shape[:-1], 1), t.dtype)

        mean = graph.add("reduce_sum", [x], last, type=reduced, name=f"{name}_mean")
        squares = graph.add("squared_difference", [x, mean], {}, name=f"{name}_squares")
        variance = graph.add("reduce_sum", [squares], last, type=reduced, name=f"{name}_variance")
        shifted = graph.add("tensor_add", [variance, _constant(graph, node.attrs["epsilon"], reduced,
                                                                 f"{name}_epsilon")],
                            name=f"{name}_plus_epsilon")
        inverse = graph.add("float_unary", [shifted], {"function": "rsqrt"}, name=f"{name}_rsqrt")
        centred = graph.add("tensor_sub", [x, mean], {}, type=t, name=f"{name}_centred")
        normed = graph.add("tensor_mul", [centred, inverse], {}, type=t, name=f"{name}_normed")
        gammas = np.asarray(graph.node(gamma).attrs["value"], np.float32).reshape(-1)
        betas = np.asarray(graph.node(beta).attrs["value"], np.float32).reshape(-1)
        scaled = graph.add("tensor_mul", [normed, _constant(graph, gammas, TensorType((t.shape[-1],), t.dtype),
                                                                  f"{name}_gamma")], {}, type=t,
                           name=f"{name}_scaled")
        out = graph.add("tensor_add", [scaled, _constant(graph, betas, t, f"{name}_beta")], {}, type=node.type,
                        name=f"{name}_shifted")
        graph.replace_uses(name, out)
        graph.remove(name)
    return graph


def quantise_network(graph: Graph, rows: np.ndarray) -> Graph:
    """The int8 graph of a float network graph, its ranges from ``rows`` (n, *input shape)."""
    graph = decompose_layer_norms(graph)
    for name in graph.order():
        if graph.op(name) == "state":
            raise CompileError(f"node %{name}: op state (an input carried from call to call) has no int8 "
                               "quantisation in TFLite's dialect: the calibration rows give it no range")
    values = evaluate_batch(graph, np.asarray(rows, dtype=np.float64))
    q = Graph(graph.name)
    new: dict[str, str] = {}
    written, read = group_dtypes(graph, values)
    requantised: dict[str, str] = {}
    constants: dict[tuple[str, DType], str] = {}  # an LSTM's weights, quantised once for all its steps
    state_dtypes = {}  # an LSTM's constant initial states: the quantisation of the state they start
    for name in graph.order():
        if graph.op(name) in LSTM_STATE:
            state = graph.node(name).inputs[LSTM_STATE[graph.op(name)]]
            if graph.op(state) == "const":
                state_dtypes[state] = read[name]
    for name in graph.order():
        node = graph.node(name)
        if node.op == "const":
            continue  # quantised with the op that reads it
        if node.op == "input":
            new[name] = q.add("input", [], node.attrs, type=node.type.with_dtype(written[name]), name=name)
            continue
        ins = [new.get(i) for i in node.inputs]
        out = written[name]
        try:
            if node.type.dtype.kind == "bool" and node.op in KEEP_QUANTISATION:  # a mask moved: the same bools
                new[name] = q.add(node.op, ins, node.attrs, type=node.type, name=name)
                continue
            if node.op in SAME_QUANTISATION:
                ins = [_read_as(q, i, read[name], requantised) if i is not None else
                       _quantise_constant(q, graph, c, read[name]) for i, c in zip(ins, node.inputs)]
            elif node.op in CALIBRATED_OUTPUT:
                ins = [i if i is not None else _quantise_constant(q, graph, c) for i, c in zip(ins, node.inputs)]
            if node.op in FILTER_AXIS:
                new[name] = _quantise_layer(q, graph, name, ins[0], out)
            elif node.op in LSTM_STATE:
                new[name] = _quantise_lstm_step(q, graph, name, ins, state_dtypes, constants)
            elif node.op == "gather" and ins[0] is None and ins[1] is not None:  # the table at its own range
                table = _quantise_constant(q, graph, node.inputs[0], out)
                new[name] = q.add(node.op, [table, ins[1]], node.attrs, type=node.type.with_dtype(out), name=name)
            elif node.op == "compare":  # each operand its own quantisation (a constant too), a bool result
                ins = [i if i is not None else _quantise_constant(q, graph, c) for i, c in zip(ins, node.inputs)]
                new[name] = q.add(node.op, ins, node.attrs, type=node.type, name=name)
            elif node.op == "select":  # the branches and the result one quantisation; the condition as it is
                branches = [_read_as(q, i, read[name], requantised) if i is not None else
                            _quantise_constant(q, graph, c, read[name]) for i, c in zip(ins[1:], node.inputs[1:])]
                new[name] = q.add(node.op, [ins[0], *branches], node.attrs, type=node.type.with_dtype(out), name=name)
            elif node.op == "float_unary" and node.attrs["function"] in QUANTISED_UNARY:
                new[name] = q.add("quantised_unary", ins, node.attrs, type=node.type.with_dtype(out), name=name)
            elif node.op in SAME_QUANTISATION or node.op in CALIBRATED_OUTPUT or node.op in ("softmax",
                                                                                            "l2_normalization"):
                new[name] = q.add(node.op, ins, node.attrs, type=node.type.with_dtype(out), name=name)
            else:
                function = f" (function {node.attrs['function']})" if node.op == "float_unary" else ""
                raise CompileError(f"node %{name}: op {node.op}{function} has no int8 quantisation")
        except ValueError as exc:  # the op's type rule refuses the scales (a requantisation beyond int32's shifts)
            raise DataError(f"node %{name}: {exc}; the weights' and the calibrated values' scales are too far apart "
                            "for int8 (a weight far larger than the others?)") from None
    for label, name in graph.outputs:
        q.set_output(label, new[name])
    verify(q)
    return q
