"""The dataflow graph: a networkx DiGraph whose nodes are SSA values.

Each node holds ``op`` (a name in the op registry), ``inputs`` (operand node names, in order;
the DiGraph's edges mirror them for graph algorithms), ``attrs`` (a dict) and ``type`` (a
TensorType). ``outputs`` names the graph's results in order, as (label, node) pairs.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from tinycc_ml.ir.analyses import Analyses
from tinycc_ml.ir.ops import OPS, TypeRuleError
from tinycc_ml.ir.ops.state import next_label
from tinycc_ml.ir.types import TensorType

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: dict
    type: TensorType


class Graph:
    # no other attributes: what passes learn goes in ``analyses``, typed
    __slots__ = ("name", "nx", "outputs", "_order", "analyses", "_edits", "_topo")

    def __init__(self, name: str = "model"):
        if not IDENTIFIER.match(name):
            raise ValueError(f"graph name {name!r} is not an identifier")
        self.name = name
        self.nx = nx.DiGraph()
        self.outputs: list[tuple[str, str]] = []
        self._order = 0  # insertion counter: keeps every traversal deterministic
        self.analyses = Analyses()  # what passes learnt about it (see ir/analyses.py)
        self._edits = 0  # rewrites of operands by this class's methods (the order kept depends on them)
        self._topo = None  # (its stamp, the topological order) as order() last computed it

    # ---- building
    def fresh_name(self, hint: str = "v") -> str:
        base = hint if IDENTIFIER.match(hint) else "v"
        if base not in self.nx:
            return base
        i = 1
        while f"{base}_{i}" in self.nx:
            i += 1
        return f"{base}_{i}"

    def add(self, op: str, inputs: Iterable[str] = (), attrs: dict | None = None,
            type: TensorType | None = None, name: str | None = None) -> str:
        """Add a node; its type is inferred from the op's rule unless given."""
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}")
        inputs = tuple(inputs)
        attrs = dict(attrs or {})
        for operand in inputs:
            if operand not in self.nx:
                raise ValueError(f"operand {operand!r} of new {op} node does not exist")
        try:
            type = OPS[op].infer([self.type(i) for i in inputs], attrs, type)
        except TypeRuleError as exc:
            raise ValueError(f"{op}: {exc}") from None
        name = self.fresh_name(name or op)
        self._order += 1
        self.nx.add_node(name, op=op, inputs=inputs, attrs=attrs, type=type, order=self._order)
        for operand in inputs:
            self.nx.add_edge(operand, name)
        return name

    def add_as(self, node: Node) -> None:
        """Add ``node`` as an earlier build added it from the same operands (choose_scales.ScaleMemo): its name,
        type and attributes as they were (no type inference: the earlier build inferred and checked the type);
        its attrs dict copied."""
        if node.name in self.nx or not all(operand in self.nx for operand in node.inputs):
            raise ValueError(f"%{node.name}: the name is taken, or an operand does not exist")
        self._order += 1
        self.nx.add_node(node.name, op=node.op, inputs=node.inputs, attrs=dict(node.attrs), type=node.type,
                         order=self._order)
        for operand in node.inputs:
            self.nx.add_edge(operand, node.name)

    def added_since(self, count: int) -> list[str]:
        """The names of the nodes added after the graph held ``count`` nodes (none removed since), in order."""
        nodes = self.nx._node
        return list(reversed(list(itertools.islice(reversed(nodes), len(nodes) - count))))

    def set_next_state(self, state: str, node: str) -> None:
        """The value ``state`` (a ``state`` node) holds for the next call: the output ``next_<state>``."""
        mine, theirs = self.type(state), self.type(node)
        if self.op(state) != "state" or (mine.shape, mine.dtype) != (theirs.shape, theirs.dtype):
            raise ValueError(f"%{node} ({self.type(node)}) cannot be the next value of %{state} ({self.type(state)})")
        self.set_output(next_label(state), node)

    def states(self) -> list[tuple[str, str]]:
        """Each state node with the node giving its next value (itself when the graph never changes it)."""
        outputs = dict(self.outputs)
        return [(n, outputs.get(next_label(n), n)) for n in self.order() if self.op(n) == "state"]

    def result_outputs(self) -> list[tuple[str, str]]:
        """The outputs a caller reads: all but the states' next values."""
        states = {next_label(n) for n in self.nx if self.op(n) == "state"}
        return [(label, n) for label, n in self.outputs if label not in states]

    def set_output(self, label: str, node: str) -> None:
        self.outputs = [(lab, n) for lab, n in self.outputs if lab != label] + [(label, node)]

    # ---- reading
    # the node's data read from the DiGraph's own dict (what ``nx.nodes[name]`` returns, without its view's
    # per-call overhead: passes and the interpreters read nodes tens of thousands of times per integer build)
    def node(self, name: str) -> Node:
        d = self.nx._node[name]
        return Node(name, d["op"], d["inputs"], d["attrs"], d["type"])

    def type(self, name: str) -> TensorType:
        return self.nx._node[name]["type"]

    def op(self, name: str) -> str:
        return self.nx._node[name]["op"]

    def __contains__(self, name: str) -> bool:
        return name in self.nx

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def _stamp(self) -> tuple:
        """What the topological order depends on: the nodes and edges, as the methods that add, rewire or remove
        them leave them (a node added: ``_order``; removed: the count; an edge rewired: ``_edits``). Edges change only
        with them (dce removes nodes, the text parser adds them as ``add`` does)."""
        return id(self.nx), self._order, self._edits, len(self.nx._node)

    def order(self) -> list[str]:
        """Topological order, ties broken by insertion order (deterministic); kept until the graph changes."""
        stamp = self._stamp()
        if self._topo is not None and self._topo[0] == stamp:
            return list(self._topo[1])
        result = self._kahn()
        self._topo = (stamp, result)
        return list(result)

    def _kahn(self) -> list[str]:
        # Kahn's algorithm on the adjacency dicts: passes ask for the order hundreds of times per
        # compile, and networkx's generic version costs several times as much
        nodes, succ, pred = self.nx._node, self.nx._succ, self.nx._pred
        waiting = {n: len(pred[n]) for n in nodes}
        ready = [(nodes[n]["order"], n) for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        result = []
        while ready:
            _, n = heapq.heappop(ready)
            result.append(n)
            for user in succ[n]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, (nodes[user]["order"], user))
        if len(result) != len(nodes):
            raise nx.NetworkXUnfeasible("the graph has a cycle")
        return result

    def nodes(self) -> list[Node]:
        return [self.node(n) for n in self.order()]

    def inputs(self) -> list[str]:
        return [n for n in self.order() if self.op(n) == "input"]

    def users(self, name: str) -> list[str]:
        return sorted(self.nx.successors(name), key=lambda n: self.nx.nodes[n]["order"])

    def output(self, label: str) -> str:
        for lab, node in self.outputs:
            if lab == label:
                return node
        raise KeyError(label)

    # ---- rewriting
    def replace_uses(self, old: str, new: str, keep: tuple[str, ...] = ()) -> None:
        """Point every use of ``old`` (operands and outputs) at ``new``, except by the nodes in
        ``keep`` (e.g. ``new`` itself when it wraps ``old``)."""
        for user in self.users(old):
            if user in keep:
                continue
            data = self.nx.nodes[user]
            data["inputs"] = tuple(new if i == old else i for i in data["inputs"])
            self.nx.remove_edge(old, user)
            self.nx.add_edge(new, user)
            self._edits += 1
        self.outputs = [(lab, new if n == old else n) for lab, n in self.outputs]

    def replace_operand(self, user: str, old: str, new: str) -> None:
        """Point ``user``'s operands ``old`` at ``new`` (its other readers keep ``old``)."""
        data = self.nx.nodes[user]
        data["inputs"] = tuple(new if i == old else i for i in data["inputs"])
        self.nx.remove_edge(old, user)
        self.nx.add_edge(new, user)
        self._edits += 1

    def remove(self, name: str) -> None:
        if any(True for _ in self.nx.successors(name)):
            raise ValueError(f"cannot remove {name}: it still has users")
        self.nx.remove_node(name)

    def copy(self) -> Graph:
        other = Graph(self.name)
        other.nx = self.nx.copy()
        for n in other.nx.nodes:
            other.nx.nodes[n]["attrs"] = dict(other.nx.nodes[n]["attrs"])
        other.outputs = list(self.outputs)
        other._order = self._order
        other.analyses = self.analyses.copy()
        return other

    # ---- comparison (used by round-trip tests)
    def structurally_equal(self, other: Graph) -> bool:
        if self.name != other.name or self.outputs != other.outputs:
            return False
        mine, theirs = self.nodes(), other.nodes()
        if [n.name for n in mine] != [n.name for n in theirs]:
            return False
        return all(
            a.op == b.op and a.inputs == b.inputs and a.type == b.type and attrs_equal(a.attrs, b.attrs)
            for a, b in zip(mine, theirs)
        )


def attrs_equal(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
                return False
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        elif type(x) is not type(y) or x != y:
            if not (isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and list(x) == list(y)):
                return False
    return True


def embed(target: Graph, source: Graph, nodes: Iterable[str], inputs: dict[str, str],
          prefix: str = "") -> dict[str, str]:
    """Copy into ``target`` the nodes of ``source`` that ``nodes`` are computed from (graph composition):
    ``inputs`` maps each of ``source``'s input nodes they read to the ``target`` node standing for it (same
    type); the copies' names are ``prefix`` + their names (made unique). Returns source name -> target name."""
    needed: set[str] = set()
    for name in nodes:
        needed |= nx.ancestors(source.nx, name) | {name}
    mapping: dict[str, str] = {}
    for name in source.order():  # topological: operands are copied first
        if name not in needed:
            continue
        node = source.node(name)
        if node.op == "input":
            if name not in inputs or target.type(inputs[name]) != node.type:
                raise ValueError(f"input %{name} ({node.type}) of the embedded graph has no target node of its type")
            mapping[name] = inputs[name]
            continue
        mapping[name] = target.add(node.op, [mapping[i] for i in node.inputs], node.attrs, type=node.type,
                                   name=prefix + name)
    return mapping
