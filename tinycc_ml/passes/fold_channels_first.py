"""Fold the channels-first input of a 1-D convolution into the convolution (ONNX/PyTorch Conv1d networks).

The importer meets ONNX's (N, C, W) with a transpose to (N, W, C) and a reshape to NHWC (N, 1, W, C), a copy of
the whole input before the first convolution reads it. A 1-D convolution over C channels is also a 2-D one over
the (N, C, W, 1) view of the untransposed elements (a free reshape): kernel height C (every channel, no padding
along it), one channel, the filter (O, 1, K, C) stored as (O, C, K, 1). Same sums, no copy: the input's RAM is
the caller's only. Applied where every reader of the transposed tensor is such a convolution (float graphs: the
project's float and fixed-point builds; TFLite's int8 form keeps its graph).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import IRError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.ops.windows import axis_geometry
from tinycc_ml.ir.types import TensorType
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


def _foldable(graph: Graph, transpose: str) -> str | None:
    """The NHWC reshape of a (N, C, W) -> (N, W, C) transpose read only by 1-D convolutions, or None."""
    node = graph.node(transpose)
    x = graph.type(node.inputs[0])
    if node.op != "transpose" or x.rank != 3 or [int(p) for p in node.attrs["perm"]] != [0, 2, 1] \
            or not x.dtype.is_float or len(graph.users(transpose)) != 1:
        return None
    (view,) = graph.users(transpose)
    n, c, w = x.shape
    if graph.op(view) != "reshape" or graph.type(view).shape != (n, 1, w, c) or not graph.users(view):
        return None
    for user in graph.users(view):
        conv = graph.node(user)
        pads = [int(p) for p in conv.attrs.get("pads", [0, 0, 0, 0])]
        if conv.op != "conv2d" or conv.inputs[0] != view or graph.op(conv.inputs[1]) != "const" \
                or graph.type(conv.inputs[1]).shape[1] != 1 or (conv.attrs["padding"] == "explicit"
                                                                and pads[0] + pads[2] != 0):
            return None
    return view


def _conv_over_channels(graph: Graph, conv_name: str, columns: str) -> None:
    """Rewrite the convolution ``conv_name`` to read the (N, C, W, 1) view ``columns`` (its name, result and
    bias kept; its filter a new constant, the old one removed once no convolution reads it)."""
    conv = graph.node(conv_name)
    x = graph.type(conv.inputs[0])
    w = np.asarray(graph.node(conv.inputs[1]).attrs["value"])
    kernel = w.shape[2]
    stride, dilation = int(conv.attrs.get("stride", [1, 1])[1]), int(conv.attrs.get("dilation", [1, 1])[1])
    width = x.shape[2]
    out_w, before = axis_geometry(width, kernel, stride, dilation, conv.attrs, 1)
    after = max(0, (out_w - 1) * stride + (kernel - 1) * dilation + 1 - width - before)
    filters = np.ascontiguousarray(w[:, 0, :, :].transpose(0, 2, 1)[..., None])
    w_type = graph.type(conv.inputs[1])
    w_name = graph.add("const", [], {"value": filters},
                       type=TensorType(filters.shape, w_type.dtype, w_type.layout), name=f"{conv.inputs[1]}_columns")
    attrs = {**conv.attrs, "padding": "explicit", "pads": [0, before, 0, after], "stride": [1, stride],
             "dilation": [1, dilation]}
    inputs = (columns, w_name, conv.inputs[2])
    if OPS["conv2d"].infer([graph.type(i) for i in inputs], attrs, conv.type) != conv.type:
        raise IRError(f"node %{conv_name}: its convolution over the channels-first view gives another shape")
    for old, new in ((conv.inputs[0], columns), (conv.inputs[1], w_name)):
        graph.replace_operand(conv_name, old, new)
    data = graph.nx.nodes[conv_name]
    data["inputs"], data["attrs"] = inputs, attrs
    if not graph.users(conv.inputs[1]):
        graph.remove(conv.inputs[1])


@register_pass
class FoldChannelsFirst(Pass):
    name = "fold_channels_first"
    description = "read a Conv1d's channels-first input in place: no transposed copy"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        folded = 0
        for name in graph.order():
            if name not in graph or graph.op(name) != "transpose":
                continue
            view = _foldable(graph, name)
            if view is None:
                continue
            source = graph.node(name).inputs[0]
            n, c, w = graph.type(source).shape
            columns = graph.add("reshape", [source], {"shape": [n, c, w, 1]},
                                type=TensorType((n, c, w, 1), graph.type(source).dtype, "NHWC"),
                                name=f"{source}_columns")
            for conv in graph.users(view):
                _conv_over_channels(graph, conv, columns)
            graph.remove(view)
            graph.remove(name)
            folded += 1
        ctx.log.append(f"fold_channels_first: {folded} channels-first input(s) read in place")
        return graph
