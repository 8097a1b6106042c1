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


CHUNK_ELEMENTS = 2**24  # elements per intermediate (a mat-vec's products, a distance's differences)


def _batch_node(graph: Graph, name: str, vals: dict, batched: dict, n: int) -> np.ndarray:
    """One node over n rows: the op's vectorised form where it has one (the same arithmetic as
    its definition), else its definition row by row."""
    node = graph.node(name)
    ins = [vals[i] for i in node.inputs]
    # which operands carry a row axis (a node of constants only is computed once, without one)
    flags = [batched[i] and np.ndim(vals[i]) == graph.type(i).rank + 1 for i in node.inputs]
    op = OPS[node.op]
    if op.evaluate_rows is not None:
        value = op.evaluate_rows(ins, flags, node.attrs, n, node.type.rank)
        if value is not None:
            return value
    return np.stack([np.asarray(op.evaluate([v[r] if f else v for v, f in zip(ins, flags)], node.attrs))
                     for r in range(n)])


def evaluate_batch(graph: Graph, X: np.ndarray, state: dict | None = None) -> dict[str, np.ndarray]:
    """Value of every node for the rows of X: computed values carry a leading row axis,
    constants do not. A graph with state takes one row at a time (``state``: the contents of its states, by
    default their initial ones)."""
    vals: dict[str, np.ndarray] = {}
    batched: dict[str, bool] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "input":
            if X.shape[1:] != node.type.shape:
                raise DataError(f"input %{name} has shape {X.shape[1:]}, expected {node.type.shape}")
            vals[name], batched[name] = X, True
        elif node.op == "state":  # one row: its contents when the call began
            contents = node.attrs["init"] if state is None else state[name]
            vals[name], batched[name] = np.asarray(contents, dtype=np.float64)[None], True
        elif not node.inputs:
            vals[name], batched[name] = np.asarray(OPS[node.op].evaluate([], node.attrs)), False
        else:
            value = np.asarray(_batch_node(graph, name, vals, batched, len(X)))
            vals[name] = value.astype(np.float64) if node.type.dtype.is_float else value
            batched[name] = True
    return {n: v for n, v in vals.items() if batched[n]}


def work_per_row(graph: Graph) -> int:
    """The largest per-row intermediate: the products of a mat-vec, the differences of a distance."""
    return max([1] + [max(graph.type(i).size for i in graph.node(m).inputs)
                      for m in graph.order() if graph.op(m) in ("matvec", "matvec_at", "sqdist", "sqdist_kvote")])


def row_chunks(graph: Graph, n: int) -> list[slice]:
    """Row slices small enough that the biggest per-row intermediate stays within CHUNK_ELEMENTS
    (used by both interpreters: kNN over a whole training set would need tens of GB at once)."""
    step = max(1, CHUNK_ELEMENTS // work_per_row(graph))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def run_float_stream(graph: Graph, X, state: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """A graph with state over rows taken as successive calls (as ``fixed.run_fixed_stream``): the outputs
    stacked over rows (the states' next values left out) and the state after the last row."""
    X = np.asarray(X, dtype=np.float64)
    (x,) = graph.inputs()
    if X.ndim == graph.type(x).rank:
        X = X[None]
    state = {n: np.array(graph.node(n).attrs["init"]) for n, _ in graph.states()} if state is None else dict(state)
    rows = []
    for r in range(len(X)):
        vals = evaluate_batch(graph, X[r:r + 1], state)
        state = {n: np.asarray(vals[nxt][0]) if nxt != n else state[n] for n, nxt in graph.states()}
        rows.append(vals)
    return {label: np.concatenate([v[n] for v in rows]) for label, n in graph.result_outputs()}, state


def run_float(graph: Graph, X) -> dict[str, np.ndarray]:
    """Run a single-input graph over the rows of ``X``; returns each output stacked over rows (a graph with
    state: the rows as successive calls from its initial state, ``run_float_stream``)."""
    if graph.states():
        return run_float_stream(graph, X)[0]
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[None, :]
    parts = [evaluate_batch(graph, X[rows]) for rows in row_chunks(graph, len(X))]
    return {label: np.concatenate([p[node] for p in parts]) for label, node in graph.outputs}
