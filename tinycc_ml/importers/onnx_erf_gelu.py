"""GELU as the TorchScript exporter writes it below opset 20, read back as the one Gelu node (the erf form):

    x * (1 + Erf(x / sqrt 2)) * 0.5        Div (or Mul by 1 / sqrt 2), Erf, Add 1, Mul by x, Mul by 0.5

(each Mul and Add with its operands in either order). Each intermediate must be read by the next node alone; any
other graph is left as it is (Erf by itself is refused by name).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.importers.onnx_graph_view import GraphView, rewritten

ROOT_HALF = float(np.float32(np.sqrt(0.5)))
ROOT_TWO = float(np.float32(np.sqrt(2.0)))


def fold_erf_gelu(graph, weights: dict[str, np.ndarray]):
    """``graph`` (an onnx GraphProto) with each erf-form GELU as a Gelu node; the graph itself where there is
    none."""
    from onnx import helper  # deferred: onnx is an optional dependency

    g = GraphView(graph, weights)

    def split(node, want) -> tuple[str, str] | None:
        """A binary node's operands as (the other, the one ``want`` accepts)."""
        if node is None or len(node.input) != 2:
            return None
        a, b = node.input
        if want(b):
            return a, b
        return (b, a) if want(a) else None

    replaced: dict[int, object] = {}  # id of the last Mul -> its Gelu
    removed: set[int] = set()
    for last in graph.node:
        if last.op_type != "Mul":
            continue
        found = split(last, lambda n: g.scalar(n) == 0.5)
        product = g.single(found[0], "Mul") if found else None
        for x, added_name in ([tuple(product.input), tuple(product.input)[::-1]] if product else []):
            added = g.single(added_name, "Add")
            parts = split(added, lambda n: g.scalar(n) == 1.0)
            erf = g.single(parts[0], "Erf") if parts else None
            scaled = g.single(erf.input[0], "Div") or g.single(erf.input[0], "Mul") if erf else None
            if scaled is None or scaled.input[0] != x:
                continue
            factor = g.scalar(scaled.input[1])
            if factor is None or abs(factor - (ROOT_TWO if scaled.op_type == "Div" else ROOT_HALF)) > 1e-6:
                continue
            nodes = (product, added, erf, scaled)
            if any(id(n) in removed for n in nodes):
                continue
            removed.update(id(n) for n in nodes)
            replaced[id(last)] = helper.make_node("Gelu", [x], [last.output[0]], name=last.name or last.output[0])
            break
    return rewritten(graph, replaced, removed)
