"""Dead-code elimination: drop every node no output depends on."""

from __future__ import annotations

import networkx as nx

from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


@register_pass
class DeadCodeElimination(Pass):
    name = "dce"
    description = "remove nodes that no output depends on"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        live = set()
        for _, node in graph.outputs:
            live.add(node)
            live |= nx.ancestors(graph.nx, node)
        # Inputs stay: they are the model's interface even when unused.
        dead = [n for n in graph.order() if n not in live and graph.op(n) != "input"]
        graph.nx.remove_nodes_from(dead)
        if dead:
            ctx.log.append(f"dce: removed {len(dead)} node(s)")
        return graph
