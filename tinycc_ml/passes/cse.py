"""Common-subexpression elimination: nodes with the same op, operands, attributes and type
are merged into the first of them."""

from __future__ import annotations

import hashlib

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


def _attr_key(value) -> object:
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, hashlib.sha256(value.tobytes()).hexdigest())
    if isinstance(value, (list, tuple)):
        return ("seq",) + tuple(_attr_key(v) for v in value)
    return (type(value).__name__, value)


@register_pass
class CommonSubexpressionElimination(Pass):
    name = "cse"
    description = "merge identical computations"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        seen: dict[object, str] = {}
        merged = 0
        for name in graph.order():
            node = graph.node(name)
            if node.op == "input":
                continue
            key = (node.op, node.inputs, node.type, tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items())))
            if key in seen:
                graph.replace_uses(name, seen[key])
                graph.remove(name)
                merged += 1
            else:
                seen[key] = name
        if merged:
            ctx.log.append(f"cse: merged {merged} node(s)")
        return graph
