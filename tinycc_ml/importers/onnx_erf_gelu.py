"""GELU as the TorchScript exporter writes it below opset 20, read back as the one Gelu node (the erf form):

    x * (1 + Erf(x / sqrt 2)) * 0.5        Div (or Mul by 1 / sqrt 2), Erf, Add 1, Mul by x, Mul by 0.5

(each Mul and Add with its operands in either order). Each intermediate must be read by the next node alone; any
other graph is left as it is (Erf by itself is refused by name).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.importers.onnx_network import attributes

ROOT_HALF = float(np.float32(np.sqrt(0.5)))
ROOT_TWO = float(np.float32(np.sqrt(2.0)))


def fold_erf_gelu(graph, weights: dict[str, np.ndarray]):
    """``graph`` (an onnx GraphProto) with each erf-form GELU as a Gelu node; the graph itself where there is
    none."""
    import onnx  # deferred: onnx is an optional dependency
    from onnx import helper, numpy_helper

    producer = {out: node for node in graph.node for out in node.output if out}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}

    def scalar(name: str) -> float | None:
        value = weights.get(name)
        node = producer.get(name)
        if value is None and node is not None and node.op_type == "Constant" and "value" in attributes(node):
            try:
                value = numpy_helper.to_array(attributes(node)["value"])
            except Exception:  # a tensor onnx cannot read: not this pattern
                return None
        value = None if value is None else np.asarray(value)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 and value.dtype.kind == "f" \
            else None

    def single(name: str, op: str):
        node = producer.get(name)
        ok = node is not None and node.op_type == op and readers.get(name) == 1 and name not in outputs
        return node if ok else None

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
        found = split(last, lambda n: scalar(n) == 0.5)
        product = single(found[0], "Mul") if found else None
        for x, added_name in ([tuple(product.input), tuple(product.input)[::-1]] if product else []):
            added = single(added_name, "Add")
            parts = split(added, lambda n: scalar(n) == 1.0)
            erf = single(parts[0], "Erf") if parts else None
            scaled = single(erf.input[0], "Div") or single(erf.input[0], "Mul") if erf else None
            if scaled is None or scaled.input[0] != x:
                continue
            factor = scalar(scaled.input[1])
            if factor is None or abs(factor - (ROOT_TWO if scaled.op_type == "Div" else ROOT_HALF)) > 1e-6:
                continue
            nodes = (product, added, erf, scaled)
            if any(id(n) in removed for n in nodes):
                continue
            removed.update(id(n) for n in nodes)
            replaced[id(last)] = helper.make_node("Gelu", [x], [last.output[0]], name=last.name or last.output[0])
            break
    if not replaced:
        return graph
    folded = onnx.GraphProto()
    folded.CopyFrom(graph)
    del folded.node[:]
    folded.node.extend(replaced.get(id(node), node) for node in graph.node if id(node) not in removed)
    return folded
