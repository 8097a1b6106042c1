"""A torch.nn.RNN that the dynamo exporter unrolled, read back as the one ONNX RNN node the TorchScript exporter
writes for it, so that both files give the same network (the same C) and the dynamo file can be stepped.

The dynamo exporter writes a one-layer, one-direction RNN (tanh or relu, initial state zero) over T steps as

    L = MatMul(X, W^T) + b_ih                                     X: (T, B, I), the sequence first
    g_t = Squeeze(Slice(L, [t], [t + 1], axes [0]), [0])          t = 0 .. T-1
    h_0 = f(c + g_0)                                              c: the constant b_hh (0 R^T + b_hh), (1, B, H)
    h_t = f((MatMul(h_{t-1}, R^T) + b_hh) + g_t)
    Y = Concat(h_0, ..., h_{T-1}, axis 0)                         (T, B, H)

which is RNN(X, W, R, [b_ih, b_hh]) with activation f, its Y squeezed on the direction axis and its Y_h h_{T-1}.
Every part is checked (the same R and b_hh at every step, slices in order and covering L, the constant equal to
b_hh, each intermediate read by nothing outside the pattern); a graph that differs anywhere is left as it is and
runs unrolled, node by node (the same arithmetic, so still exact). Only the sum's order differs from ONNX's RNN
(f(x W^T + h R^T + b_ih + b_hh) in the lowering), within float32 rounding of the file's.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.importers.onnx_graph_view import GraphView
from tinycc_ml.importers.onnx_network import attributes

ACTIVATION_NODES = {"Tanh": "Tanh", "Relu": "Relu"}  # the nonlinearity's node -> RNN's activation name


class _NoMatch(Exception):
    pass


def _need(condition: bool) -> None:
    if not condition:
        raise _NoMatch


class _Graph(GraphView):
    """Producers, consumers and constants of an ONNX graph (the initializers and Constant nodes), and its ranks."""

    def __init__(self, graph, weights: dict[str, np.ndarray], opsets):
        super().__init__(graph, weights)
        self.opsets, self.ranks = opsets, None

    def rank(self, name: str) -> int | None:
        """A value's rank as ONNX's shape inference gives it (None where it cannot)."""
        if self.ranks is None:
            import onnx  # deferred: onnx is an optional dependency

            self.ranks = {}
            try:
                model = onnx.helper.make_model(self.graph, opset_imports=self.opsets)
                inferred = onnx.shape_inference.infer_shapes(model).graph
            except Exception:  # a graph the inference cannot follow: no rank known, nothing folded on it
                return None
            for v in [*inferred.value_info, *inferred.input, *inferred.output]:
                if v.type.tensor_type.HasField("shape"):
                    self.ranks[v.name] = len(v.type.tensor_type.shape.dim)
        return self.ranks.get(name)

    def const(self, name: str) -> np.ndarray:
        """The constant ``name``; no match where it is none."""
        value = super().const(name)
        _need(value is not None)
        return value

    def is_const(self, name: str) -> bool:
        return super().const(name) is not None

    def node_of(self, name: str, op: str):
        node = self.producer.get(name)
        _need(node is not None and node.op_type == op and node.output[0] == name)
        return node

    def only_read_by(self, name: str, allowed: set[int]) -> None:
        """``name`` is read by the nodes ``allowed`` (by id) alone, and is no graph output."""
        _need(name not in self.outputs and all(id(n) in allowed for n in self.readers[name]))

    def ints(self, node, k: int, attr: str) -> list[int] | None:
        """An int list given as input ``k`` (a constant) or as attribute ``attr`` (older opsets)."""
        if len(node.input) > k and node.input[k]:
            value = self.const(node.input[k])
            _need(value.dtype.kind in "iu")
            return [int(v) for v in value.reshape(-1)]
        value = attributes(node).get(attr)
        return None if value is None else [int(v) for v in value]


def _split_add(g: _Graph, node, want_const: bool) -> tuple[str, str]:
    """An Add's operands as (computed, constant) with ``want_const``, else both as given."""
    _need(node.op_type == "Add" and len(node.input) == 2)
    a, b = node.input
    if not want_const:
        return a, b
    if g.is_const(b) and not g.is_const(a):
        return a, b
    _need(g.is_const(a) and not g.is_const(b))
    return b, a


def _step_input(g: _Graph, name: str) -> tuple[str, int, list]:
    """g_t = Squeeze(Slice(L, [t], [t + 1], axes [0]), [0]): (L, t, the two nodes)."""
    squeeze = g.node_of(name, "Squeeze")
    _need(g.ints(squeeze, 1, "axes") == [0])
    sl = g.node_of(squeeze.input[0], "Slice")
    _need(len(sl.input) >= 3)
    starts, ends = g.ints(sl, 1, "starts"), g.ints(sl, 2, "ends")
    axes = g.ints(sl, 3, "axes") if len(sl.input) > 3 or "axes" in attributes(sl) else [0]
    steps = g.ints(sl, 4, "steps") if len(sl.input) > 4 else None
    _need(axes == [0] and steps in (None, [1]) and starts is not None and ends is not None)
    _need(len(starts) == 1 and len(ends) == 1 and starts[0] >= 0 and ends[0] == starts[0] + 1)
    return sl.input[0], starts[0], [sl, squeeze]


class _Match:
    """One unrolled RNN found back from its Concat."""

    def __init__(self, g: _Graph, concat):
        self.g, self.concat = g, concat
        _need(concat.op_type == "Concat" and attributes(concat).get("axis") == 0 and len(concat.input) >= 2)
        hs = list(concat.input)
        _need(len(set(hs)) == len(hs))
        acts = [g.producer.get(h) for h in hs]
        _need(all(a is not None and a.op_type in ACTIVATION_NODES for a in acts))
        self.activation = ACTIVATION_NODES[acts[0].op_type]
        _need(all(a.op_type == acts[0].op_type for a in acts))
        self.nodes = list(acts) + [concat]
        self.steps = len(hs)
        L, R_name, bhh_name = None, None, None
        for t, act in enumerate(acts):
            add = g.node_of(act.input[0], "Add")
            self.nodes.append(add)
            found = None
            for k in (0, 1):  # which operand is the step's slice of L
                try:
                    found = (_step_input(g, add.input[k]), add.input[1 - k])
                    break
                except _NoMatch:
                    continue
            _need(found is not None)
            (source, start, parts), recurrent = found
            _need(start == t and (L is None or source == L))
            L = source
            self.nodes += parts
            if t == 0 and g.is_const(recurrent):  # a zero initial state: 0 R^T + b_hh folded
                self.first, self.initial = recurrent, ""
                continue
            computed, bias = _split_add(g, g.node_of(recurrent, "Add"), True)
            self.nodes.append(g.producer[recurrent])
            mm = g.node_of(computed, "MatMul")
            _need(g.is_const(mm.input[1]))
            if t == 0:  # a given initial state, (1, B, H) as RNN's initial_h
                self.first, self.initial = None, mm.input[0]
                _need(g.rank(self.initial) == 3)
            else:
                _need(mm.input[0] == hs[t - 1])
            self.nodes.append(mm)
            _need(R_name is None or (mm.input[1] == R_name and bias == bhh_name))
            R_name, bhh_name = mm.input[1], bias
        _need(R_name is not None)
        computed, bih_name = _split_add(g, g.node_of(L, "Add"), True)
        self.nodes.append(g.producer[L])
        mm = g.node_of(computed, "MatMul")
        _need(g.is_const(mm.input[1]))
        self.nodes.append(mm)
        self.x = mm.input[0]
        W_t, R_t = g.const(mm.input[1]), g.const(R_name)
        b_ih, b_hh = g.const(bih_name), g.const(bhh_name)
        _need(all(a.dtype == np.float32 for a in (W_t, R_t, b_ih, b_hh)))
        _need(W_t.ndim == 2 and R_t.ndim == 2 and R_t.shape[0] == R_t.shape[1] == W_t.shape[1])
        hidden = R_t.shape[0]
        _need(b_ih.shape == (hidden,) and b_hh.shape == (hidden,))
        if self.first is not None:  # h_0's sum 0 R^T + b_hh is b_hh exactly, of the steps' shape (1, B, H)
            first = g.const(self.first)
            _need(first.dtype == np.float32 and first.ndim == 3 and first.shape[0] == 1 and first.shape[2] == hidden)
            _need(np.array_equal(first.view(np.uint32), np.broadcast_to(b_hh, first.shape).view(np.uint32)))
        self.hidden, self.W, self.R = hidden, np.ascontiguousarray(W_t.T), np.ascontiguousarray(R_t.T)
        self.B = np.concatenate([b_ih, b_hh])
        # every intermediate read inside the pattern alone; h_{T-1} may be read elsewhere (it is Y_h)
        inside = {id(n) for n in self.nodes}
        for node in self.nodes:
            if node is concat:
                continue
            for out in node.output:
                if out and out != hs[-1]:
                    g.only_read_by(out, inside)
        self.last = hs[-1]
        _need(len({id(n) for n in self.nodes}) == len(self.nodes))


def fold_unrolled_rnns(graph, weights: dict[str, np.ndarray], opsets):
    """``graph`` (an onnx GraphProto; ``opsets`` its model's opset_import) with each unrolled RNN (the module's
    docstring) as an RNN node, and the weights with the new nodes' constants; the graph itself where there is
    none."""
    import onnx  # deferred: onnx is an optional dependency
    from onnx import helper

    g = _Graph(graph, weights, list(opsets))
    opset = next((o.version for o in opsets if o.domain in ("", "ai.onnx")), None)
    matches = []
    taken: set[int] = set()
    for node in graph.node:
        if node.op_type != "Concat":
            continue
        try:
            m = _Match(g, node)
        except _NoMatch:
            continue
        if taken.isdisjoint(id(n) for n in m.nodes):
            matches.append(m)
            taken.update(id(n) for n in m.nodes)
    if not matches:
        return graph, weights
    weights = dict(weights)
    names = {n for node in graph.node for n in node.output} | set(weights) | {i.name for i in graph.input}

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.add(name)
        return name

    first_of = {}  # a match's first node's position -> the nodes that replace the match
    for m in matches:
        label = m.concat.name or m.concat.output[0]
        w, r, b = fresh(f"{label}_rnn_W"), fresh(f"{label}_rnn_R"), fresh(f"{label}_rnn_B")
        weights[w], weights[r], weights[b] = m.W[None], m.R[None], m.B[None]
        y, y_h = fresh(f"{label}_rnn_Y"), m.last if m.last in g.readers or m.last in g.outputs else ""
        inputs = [m.x, w, r, b] + (["", m.initial] if m.initial else [])
        rnn = helper.make_node("RNN", inputs, [y, y_h] if y_h else [y], name=fresh(f"{label}_rnn"),
                               hidden_size=m.hidden, activations=[m.activation])
        if opset is not None and opset >= 13:
            axes = fresh(f"{label}_rnn_axes")
            weights[axes] = np.array([1], np.int64)
            squeeze = helper.make_node("Squeeze", [y, axes], [m.concat.output[0]], name=fresh(f"{label}_rnn_Y_seq"))
        else:
            squeeze = helper.make_node("Squeeze", [y], [m.concat.output[0]], axes=[1], name=fresh(f"{label}_rnn_Y_seq"))
        # where h_{T-1} was computed: after everything the pattern reads, before what reads h_{T-1} or Y
        position = next(k for k, node in enumerate(graph.node) if m.last in node.output)
        first_of[position] = [rnn, squeeze]
    nodes = []
    for k, node in enumerate(graph.node):
        nodes += first_of.get(k, [])
        if id(node) not in taken:
            nodes.append(node)
    folded = onnx.GraphProto()
    folded.CopyFrom(graph)
    del folded.node[:]
    folded.node.extend(nodes)
    return folded, weights
