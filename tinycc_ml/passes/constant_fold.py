"""Constant folding: a float op whose operands are all constants becomes one constant."""

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
        if folded:
            ctx.log.append(f"constant_fold: folded {folded} node(s)")
        return graph
