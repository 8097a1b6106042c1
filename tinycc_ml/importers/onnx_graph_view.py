"""An ONNX graph's producers, readers and constants, as the importers that fold a pattern of nodes into one
(onnx_unrolled_rnn.py, onnx_erf_gelu.py, onnx_activation_folds.py) look them up."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from tinycc_ml.importers.onnx_network import attributes


class GraphView:
    """Producers, readers and constants (the initializers and Constant nodes) of an onnx GraphProto."""

    def __init__(self, graph, weights: dict[str, np.ndarray]):
        self.graph, self.weights = graph, weights
        self.producer = {out: node for node in graph.node for out in node.output if out}
        self.readers: dict[str, list] = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                if name:
                    self.readers[name].append(node)
        self.outputs = {o.name for o in graph.output}

    def const(self, name: str) -> np.ndarray | None:
        """The constant ``name`` (an initializer, or a Constant node's tensor), None for a computed value or a tensor
        onnx cannot read (the lowering names that fault)."""
        if name in self.weights:
            return np.asarray(self.weights[name])
        node = self.producer.get(name)
        if node is None or node.op_type != "Constant":
            return None
        value = attributes(node).get("value")
        if value is None:
            return None
        from onnx import numpy_helper  # deferred: onnx is an optional dependency

        try:
            return numpy_helper.to_array(value)
        except Exception:  # noqa: BLE001 - a tensor onnx cannot read: no constant for a pattern
            return None

    def scalar(self, name: str) -> float | None:
        """A float constant of one element as a float, else None."""
        value = self.const(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 and value.dtype.kind == "f" \
            else None

    def single(self, name: str, op: str):
        """The ``op`` node computing ``name`` as its first output when that node's output is read by one node alone
        and is no graph output, else None."""
        node = self.producer.get(name)
        ok = (node is not None and node.op_type == op and node.output[0] == name and len(self.readers[name]) == 1
              and name not in self.outputs)
        return node if ok else None


def rewritten(graph, replaced: dict[int, object], removed: set[int]):
    """A copy of ``graph`` with the nodes ``replaced`` (by id) swapped for their new ones, those ``removed`` dropped;
    the graph itself where there is nothing to do."""
    if not replaced and not removed:
        return graph
    import onnx  # deferred: onnx is an optional dependency

    folded = onnx.GraphProto()
    folded.CopyFrom(graph)
    del folded.node[:]
    folded.node.extend(replaced.get(id(node), node) for node in graph.node if id(node) not in removed)
    return folded
