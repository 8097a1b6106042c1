"""Expand a float network's LSTM steps (``lstm_cell``, ``lstm_hidden``: ir/ops/network/lstm.py) into the ops the
project's fixed point scales one by one (passes/network_scales.py): each gate W x + b + R h as two fully_connected
and a tensor_add, its sigmoid or tanh as logistic / tensor_tanh, and

    c' = f c + i g          (tensor_mul, tensor_mul, tensor_add)
    h' = o tanh(c')         (tensor_tanh, tensor_mul)

the same step the float ops compute (their int8/int16 forms are TFLite's, for TFLite's dialect only). A constant h
(the first step unrolled from a given initial state) joins the bias: the C computes no op of constants. The fixed
builds run it (models/network_fixed.py); the float C keeps the fused ops.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import TensorType
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


def _const_value(graph: Graph, name: str) -> np.ndarray | None:
    return np.asarray(graph.node(name).attrs["value"], np.float64) if graph.op(name) == "const" else None


def _gate(graph: Graph, x: str, h: str, w: str, r: str, bias: str, activation: str, name: str) -> str:
    """activation(W x + bias + R h), a (1, H) row."""
    b = _const_value(graph, bias)
    h_value = _const_value(graph, h)
    if h_value is not None:  # R h is a constant: part of the bias
        b = b + _const_value(graph, r) @ h_value.reshape(-1)
    units = len(b)
    b_node = graph.add("const", [], {"value": b.astype(np.float32)}, type=TensorType((units,)), name=f"{name}_bias")
    total = graph.add("fully_connected", [x, w, b_node], {"activation": "none"}, name=f"{name}_x")
    if h_value is None:
        zero = graph.add("const", [], {"value": np.zeros(units, np.float32)}, type=TensorType((units,)),
                         name=f"{name}_h_bias")
        recurrent = graph.add("fully_connected", [h, r, zero], {"activation": "none"}, name=f"{name}_h")
        total = graph.add("tensor_add", [total, recurrent], {"activation": "none"}, name=f"{name}_sum")
    return graph.add("logistic" if activation == "sigmoid" else "tensor_tanh", [total], {}, name=name)


def _vector(graph: Graph, row: str, units: int, name: str) -> str:
    """A (1, H) row as the (H,) vector the LSTM's states are."""
    return graph.add("reshape", [row], {"shape": [units]}, name=name)


@register_pass
class ExpandLstm(Pass):
    name = "expand_lstm"
    description = "a float network's lstm_cell / lstm_hidden as fully_connected, sigmoid, tanh, mul and add"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        for name in graph.order():
            node = graph.node(name)
            if node.op not in ("lstm_cell", "lstm_hidden") or not node.type.dtype.is_float:
                continue
            units = node.type.shape[0]
            if node.op == "lstm_cell":
                if float(node.attrs["cell_clip"]) > 0:
                    raise CompileError(f"node %{name} (lstm_cell): a cell clip of {node.attrs['cell_clip']} has no "
                                       "form in the project's fixed point; compile it at precision float")
                x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg = node.inputs
                f = _gate(graph, x, h, wf, rf, bf, "sigmoid", f"{name}_f")
                i = _gate(graph, x, h, wi, ri, bi, "sigmoid", f"{name}_i")
                g = _gate(graph, x, h, wg, rg, bg, node.attrs["activation"], f"{name}_g")
                kept = graph.add("tensor_mul", [f, c], {}, name=f"{name}_fc")
                new = graph.add("tensor_mul", [i, g], {}, name=f"{name}_ig")
                total = graph.add("tensor_add", [kept, new], {"activation": "none"}, name=f"{name}_sum")
            else:
                x, h, c, wo, ro, bo = node.inputs
                o = _gate(graph, x, h, wo, ro, bo, "sigmoid", f"{name}_o")
                squashed = graph.add("tensor_tanh", [c], {}, name=f"{name}_tanh")
                total = graph.add("tensor_mul", [o, squashed], {}, name=f"{name}_product")
            vector = _vector(graph, total, units, f"{name}_vector")
            graph.replace_uses(name, vector)
            graph.remove(name)
        return graph
