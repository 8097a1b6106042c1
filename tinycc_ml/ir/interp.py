"""The float reference interpreter: the living definition of what every op means in real
arithmetic (evaluated in float64, the op registry's semantics)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS


def evaluate_all(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Value of every node for one sample; ``inputs`` maps input node names to vectors."""
    values: dict[str, np.ndarray] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "input":
            if name not in inputs:
                raise DataError(f"no value given for input %{name}")
            value = np.asarray(inputs[name], dtype=np.float64)
            if value.shape != node.type.shape:
                raise DataError(f"input %{name} has shape {value.shape}, expected {node.type.shape}")
            values[name] = value
        else:
            values[name] = np.asarray(OPS[node.op].evaluate([values[i] for i in node.inputs], node.attrs))
    return values


def run_float(graph: Graph, X) -> dict[str, np.ndarray]:
    """Run a single-input graph over the rows of ``X``; returns each output stacked over rows."""
    (input_name,) = graph.inputs()
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[None, :]
    rows = [evaluate_all(graph, {input_name: x}) for x in X]
    return {label: np.stack([r[node] for r in rows]) for label, node in graph.outputs}
