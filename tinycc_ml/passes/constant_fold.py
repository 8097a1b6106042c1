"""Constant folding: a float op whose operands are all constants becomes one constant; and two
constant offsets in a row, (z -+ c1) +- c2 with the inner value used once, become one add of
z's shape (z + c): the normalisation's offset (fold_input_affine) and the layer's bias are then one
add, one rounding and saturation fewer in integer code."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

CONSTANT_OPS = ("const", "sparse_const")


@register_pass
class ConstantFold(Pass):
    name = "constant_fold"
    description = "evaluate float ops whose operands are all constants"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        folded = 0
        for name in graph.order():
            node = graph.node(name)
            if OPS[node.op].arity is None or not node.type.dtype.is_float:
                continue
            if not all(graph.op(i) in CONSTANT_OPS for i in node.inputs):
                continue
            operands = [OPS[graph.op(i)].evaluate([], graph.node(i).attrs) for i in node.inputs]
            value = np.asarray(OPS[node.op].evaluate(operands, node.attrs), dtype=np.float32)
            const = graph.add("const", attrs={"value": value}, name=f"{name}_folded")
            graph.replace_uses(name, const)
            folded += 1
        merged = 0
        for name in graph.order():
            if name in graph and self._merge_offsets(graph, name):
                merged += 1
        if folded:
            ctx.log.append(f"constant_fold: folded {folded} node(s)")
        if merged:
            ctx.log.append(f"constant_fold: merged {merged} pair(s) of constant offsets")
        return graph

    @staticmethod
    def _offset(graph: Graph, name: str) -> tuple[str, np.ndarray] | None:
        """(z, c) of a float add(z, c) / add(c, z) / sub(z, c) with c constant: the node is z + c."""
        node = graph.node(name)
        if node.op not in ("add", "sub") or not node.type.dtype.is_float:
            return None
        a, b = node.inputs
        const_a, const_b = graph.op(a) in CONSTANT_OPS, graph.op(b) in CONSTANT_OPS
        if const_a == const_b or (node.op == "sub" and const_a):
            return None
        z, c = (b, a) if const_a else (a, b)
        value = np.asarray(OPS[graph.op(c)].evaluate([], graph.node(c).attrs), dtype=np.float64)
        return z, -value if node.op == "sub" else value

    def _merge_offsets(self, graph: Graph, name: str) -> bool:
        outer = self._offset(graph, name)
        if outer is None or graph.op(outer[0]) not in ("add", "sub"):
            return False
        inner_name = outer[0]
        inner = self._offset(graph, inner_name)
        if inner is None or graph.users(inner_name) != [name] or any(n == inner_name for _, n in graph.outputs):
            return False
        z = inner[0]
        shape = graph.type(name).shape
        if graph.type(z).shape != shape:
            return False
        value = np.broadcast_to(inner[1] + outer[1], shape).astype(np.float32)
        const = graph.add("const", attrs={"value": value}, name=f"{name}_offset")
        graph.replace_uses(name, graph.add("add", [z, const], name=f"{name}_folded"))
        return True
