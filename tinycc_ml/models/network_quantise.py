"""Float networks (ONNX, through importers/onnx_network.py) quantised to TFLite's int8 dialect: the graph
the C for TFLite's int8 ops computes exactly, so every target that runs TFLite int8 networks runs these.

Post-training quantisation from calibration rows, as TFLite's converter does it:

- activations (the input and every computed tensor): asymmetric int8, the range [min, max] the float
  network reaches on the calibration rows, widened to hold 0 (real 0 must be exact: padding, ReLU);
  scale = (max - min) / 255, zero point = -128 - min / scale rounded;
- convolution filters: symmetric int8 per output channel (scale max|w| / 127, zero point 0); dense
  weights per tensor (TFLite's FULLY_CONNECTED); biases int32 at input scale x filter scale;
- pools, reshapes, transposes, slices, pads and largest values keep their input's quantisation (TFLite requires
  it), as do a concatenation's operands (refused by name where they differ) and MAXIMUM / MINIMUM's (a constant
  operand takes the other's); SUB and MUL take their calibrated range, a constant operand its own asymmetric
  int8; softmax gives TFLite's fixed 1/256, -128.
"""

from __future__ import annotations

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
KEEP_QUANTISATION = ("average_pool2d", "max_pool2d", "reshape", "transpose", "strided_slice", "pad", "reduce_max",
                     "reduce_min", "relu6")
# ops whose output takes the range it reaches on the calibration rows (the activations: ir/ops/network)
CALIBRATED_OUTPUT = ("tensor_add", "tensor_sub", "tensor_mul", "relu", "leaky_relu", *FUNCTIONS)
# ops comparing or copying stored integers: every operand (a constant quantised so) and the result share one
SHARED_QUANTISATION = ("tensor_maximum", "tensor_minimum", "concatenation")
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
    values = np.asarray(graph.node(name).attrs["value"], dtype=np.float64)
    dtype = dtype or activation_dtype(values)
    scale = dtype.qscales[0]
    ints = np.clip(np.round(values / scale) + dtype.zero_point, -128, 127).astype(np.int8)
    return q.add("const", [], {"value": ints}, type=graph.type(name).with_dtype(dtype), name=f"{name}_q")


def quantise_network(graph: Graph, rows: np.ndarray) -> Graph:
    """The int8 graph of a float network graph, its ranges from ``rows`` (n, *input shape)."""
    values = evaluate_batch(graph, np.asarray(rows, dtype=np.float64))
    q = Graph(graph.name)
    new: dict[str, str] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "const":
            continue  # quantised with the op that reads it
        if node.op == "input":
            new[name] = q.add("input", [], node.attrs, type=node.type.with_dtype(activation_dtype(values[name])),
                              name=name)
            continue
        ins = [new.get(i) for i in node.inputs]
        try:
            computed = [q.type(i).dtype for i in ins if i is not None]
            if node.op in SHARED_QUANTISATION:
                if any(d != computed[0] for d in computed):
                    raise CompileError(f"node %{name}: {node.op} compares or copies stored int8 values: its operands "
                                       f"need one quantisation, the calibration gives {', '.join(map(str, computed))}; "
                                       "compile this network at float or in the project's fixed point")
                ins = [i if i is not None else _quantise_constant(q, graph, c, computed[0])
                       for i, c in zip(ins, node.inputs)]
            elif node.op in CALIBRATED_OUTPUT:
                ins = [i if i is not None else _quantise_constant(q, graph, c) for i, c in zip(ins, node.inputs)]
            if node.op in FILTER_AXIS:
                new[name] = _quantise_layer(q, graph, name, ins[0], activation_dtype(values[name]))
            elif node.op in KEEP_QUANTISATION or node.op in SHARED_QUANTISATION:
                new[name] = q.add(node.op, ins, node.attrs, type=node.type.with_dtype(q.type(ins[0]).dtype),
                                  name=name)
            elif node.op in CALIBRATED_OUTPUT:
                new[name] = q.add(node.op, ins, node.attrs, type=node.type.with_dtype(activation_dtype(values[name])),
                                  name=name)
            elif node.op == "softmax":
                new[name] = q.add(node.op, ins, node.attrs, type=node.type.with_dtype(SOFTMAX_OUTPUT), name=name)
            else:
                raise CompileError(f"node %{name}: op {node.op} has no int8 quantisation")
        except ValueError as exc:  # the op's type rule refuses the scales (a requantisation beyond int32's shifts)
            raise DataError(f"node %{name}: {exc}; the weights' and the calibrated values' scales are too far apart "
                            "for int8 (a weight far larger than the others?)") from None
    for label, name in graph.outputs:
        q.set_output(label, new[name])
    verify(q)
    return q
