"""ONNX's recurrent layers, GRU, LSTM and RNN (as torch.nn.GRU / LSTM / RNN export them), lowered time step by time
step onto the IR's ops; one step of one direction is

    GRU (ONNX's gates z, r, n; PyTorch writes linear_before_reset=1, 0 is ONNX's default):
        z = sigmoid(W_z x + Wb_z + Rb_z + R_z h),  r likewise,
        n = tanh(W_n x + Wb_n + r (R_n h + Rb_n))       (linear_before_reset=0: tanh(W_n x + Wb_n + R_n (r h) + Rb_n))
        h' = n + z (h - n)                               (ONNX's (1 - z) n + z h)
      as fully_connected, tensor_add, logistic, tensor_mul, tensor_tanh and tensor_sub;
    LSTM (gates i, o, f, c; no peepholes, no clip): c' = f c + i g, h' = o tanh(c'), as lstm_cell and lstm_hidden
      (ir/ops/network/lstm.py: the same step in float), each gate's two biases added;
    RNN (Tanh, or Relu): h' = f(W x + Wb + Rb + R h), as fully_connected, tensor_add (relu fused) and tensor_tanh.

Unrolled (``recurrent="unroll"``): every time step of the sequence in one call, from an initial state that is zero,
a constant, or a value the graph computes (PyTorch's h0 input: a state the stream carries from call to call, see
``onnx_network``). Stepped (``recurrent="step"``): the sequence is one time step long, and each initial state the
graph does not compute becomes a ``state`` node (ir/ops/state.py): its initial value after a reset, its next value
the step's final state; so a stream of steps computes what the unrolled layer computes on the whole sequence. A
layer that reads the sequence backwards (reverse, bidirectional) cannot be stepped: refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.types import F32, TensorType

GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}
# each direction's activations: those the lowering implements (ONNX's defaults first)
ACTIVATIONS = {"GRU": (("Sigmoid", "Tanh"),), "LSTM": (("Sigmoid", "Tanh", "Tanh"),), "RNN": (("Tanh",), ("Relu",))}
DIRECTIONS = ("forward", "reverse", "bidirectional")
RECURRENT_OPS = tuple(GATES)


class RecurrentError(ValueError):
    """A recurrent node the lowering refuses (the importer adds the file's name)."""


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def sequence_axis(attrs: dict) -> int:
    """The axis of a recurrent node's input X (and output Y) along which the sequence runs."""
    return 1 if int(attrs.get("layout", 0)) == 1 else 0


def input_sequence_axis(proto_graph, input_name: str, attributes) -> tuple[int | None, list[str]]:
    """The axis of the network's input that is a recurrent layer's sequence (followed back through Transpose and
    Identity nodes from the layer's X), and the layers whose X is computed otherwise (a Conv over the sequence, or
    another recurrent layer), by label."""
    producers = {name: node for node in proto_graph.node for name in node.output if name}
    axis, others = None, []
    for node in proto_graph.node:
        if node.op_type not in RECURRENT_OPS or not node.input:
            continue
        name, k = node.input[0], sequence_axis(attributes(node))
        while name != input_name and name in producers and producers[name].op_type in ("Transpose", "Identity"):
            source = producers[name]
            if source.op_type == "Transpose":
                perm = attributes(source).get("perm")
                if perm is None or k >= len(perm):
                    break
                k = int(perm[k])
            name = source.input[0] if source.input else ""
        if name == input_name:
            axis = k if axis is None else axis
        else:
            source = producers.get(name)
            others.append(f"{node.op_type} node {node.name!r} reads {name!r}"
                          + (f" ({source.op_type} node {source.name!r})" if source is not None else ""))
    return axis, others


class _Layer:
    """One recurrent node being lowered: its checked parameters and the IR nodes it adds."""

    def __init__(self, low, node, attrs: dict, label: str, stepped: bool):
        self.low, self.node, self.label, self.stepped = low, node, label, stepped
        self.op, self.what = node.op_type, f"{node.op_type} node {node.name!r}"
        self.layout = int(attrs.get("layout", 0))
        if self.layout not in (0, 1):
            self.refuse(f"layout {self.layout} (0: sequence first, 1: batch first)")
        self.x = low.plain(low.value(node, 0), f"{label}_x")
        if len(self.x.shape) != 3:
            self.refuse(f"an input of shape {list(self.x.shape)}; expected 3 axes (sequence, batch, features; batch "
                        "first with layout 1)")
        shape = self.x.shape
        self.steps, batch, self.features = (shape[1], shape[0], shape[2]) if self.layout else shape
        if batch != 1:
            self.refuse(f"a batch of {batch} in an input of shape {list(shape)}; one sequence is supported")
        if "hidden_size" not in attrs or int(attrs["hidden_size"]) < 1:
            self.refuse("no positive hidden_size")
        self.hidden = int(attrs["hidden_size"])
        self.direction = _text(attrs.get("direction", "forward"))
        if self.direction not in DIRECTIONS:
            self.refuse(f"direction {self.direction!r} (supported: {', '.join(DIRECTIONS)})")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        if stepped and self.direction != "forward":
            self.refuse(f"direction {self.direction!r} reads the sequence backwards, which a stepped build (one time "
                        "step per call) cannot: compile it unrolled (recurrent='unroll')")
        if stepped and self.x.time != sequence_axis(attrs):
            self.refuse("a stepped build (recurrent='step') takes one time step of the network's input per call; "
                        "this layer's input is not the sequence of steps")
        given = [_text(a) for a in attrs.get("activations", [])]
        self.activations = tuple(given[:len(given) // self.dirs]) if given else ACTIVATIONS[self.op][0]
        if (given and given != list(self.activations) * self.dirs) or self.activations not in ACTIVATIONS[self.op]:
            allowed = " or ".join(str(list(a)) for a in ACTIVATIONS[self.op])
            self.refuse(f"activations {given} (supported: {allowed} per direction)")
        self.linear_before_reset = int(attrs.get("linear_before_reset", 0))
        gates = GATES[self.op]
        self.W = self.parameter(1, "input weights W", (self.dirs, gates * self.hidden, self.features))
        self.R = self.parameter(2, "recurrent weights R", (self.dirs, gates * self.hidden, self.hidden))
        self.B = self.parameter(3, "biases B", (self.dirs, 2 * gates * self.hidden), required=False)
        if self.B is None:
            self.B = np.zeros((self.dirs, 2 * gates * self.hidden))
        lengths = self.parameter(4, "sequence_lens", None, required=False)
        if lengths is not None and np.any(lengths.reshape(-1) != self.steps):
            self.refuse(f"sequence_lens {lengths.reshape(-1).tolist()}; only whole sequences ({self.steps} steps) are "
                        "supported")
        if self.op == "LSTM" and len(node.input) > 7 and node.input[7]:
            self.refuse("peephole weights P are not supported (PyTorch writes none)")

    def refuse(self, problem: str):
        raise RecurrentError(f"{self.what}: {problem}")

    def parameter(self, index: int, what: str, shape, required: bool = True) -> np.ndarray | None:
        node = self.node
        name = node.input[index] if index < len(node.input) else ""
        if name and name not in self.low.weights:
            self.refuse(f"its {what} {name!r} is computed; only constants (initializers) are supported there")
        array = self.low.const(node, index, what, required=required)
        if array is not None and shape is not None and array.shape != shape:
            self.refuse(f"{what} of shape {list(array.shape)}, expected {list(shape)}")
        return None if array is None else array.astype(np.float64)

    # ---- IR nodes

    def add(self, op: str, inputs: list[str], attrs: dict, name: str, declared=None) -> str:
        return self.low.add(op, inputs, attrs, name, declared)

    def const(self, array, layout: str, name: str) -> str:
        return self.low.add_const(array, layout, name)

    def vector_shape(self) -> tuple[int, ...]:
        """How a step's vectors are held: (H,) for lstm_cell / lstm_hidden, (1, H) as fully_connected gives them."""
        return (self.hidden,) if self.op == "LSTM" else (1, self.hidden)

    def input_step(self, t: int, name: str) -> str:
        """The input's time step t as a vector."""
        begin = [0, t, 0] if self.layout else [t, 0, 0]
        count = [1, 1, self.features]
        shape = [self.features] if self.op == "LSTM" else [1, self.features]
        return self.add("strided_slice", [self.x.node], {"begin": begin, "stride": [1, 1, 1], "count": count,
                                                         "shape": shape}, name)

    def initial(self, index: int, what: str) -> tuple[list[str], list[str]]:
        """Each direction's initial state and, stepped, the ``state`` nodes whose next value is the final one."""
        node, low = self.node, self.low
        name = node.input[index] if index < len(node.input) else ""
        shape = (1, self.dirs, self.hidden) if self.layout else (self.dirs, 1, self.hidden)
        vector = self.vector_shape()
        if name and name not in low.weights:  # a computed value: PyTorch's h0 / c0 (a state carried by the graph)
            value = low.plain(low.value(node, index), f"{self.label}_{what}0")
            if value.shape != shape:
                self.refuse(f"initial {what} of shape {list(value.shape)}, expected {list(shape)}")
            starts = []
            for d in range(self.dirs):
                begin = [0, d, 0] if self.layout else [d, 0, 0]
                starts.append(self.add("strided_slice", [value.node], {
                    "begin": begin, "stride": [1, 1, 1], "count": [1, 1, self.hidden], "shape": list(vector)},
                    f"{self.label}_{what}0_{d}"))
            return starts, []
        array = low.const(node, index, f"initial {what}", required=False) if name else None
        array = np.zeros(shape) if array is None else array.astype(np.float64)
        if array.shape != shape:
            self.refuse(f"initial {what} of shape {list(array.shape)}, expected {list(shape)}")
        rows = [(array[0, d] if self.layout else array[d, 0]).reshape(vector) for d in range(self.dirs)]
        if not self.stepped:
            return [self.const(row, "", f"{self.label}_{what}0_{d}") for d, row in enumerate(rows)], []
        states = [low.add("state", [], {"init": row.astype(np.float32)}, f"{self.label}_{what}",
                          TensorType(vector, F32, "")) for row in rows]
        return states, states

    def gate_constants(self, d: int, gate: int, name: str) -> tuple[str, str, np.ndarray, np.ndarray]:
        """Gate ``gate`` of direction d: its input and recurrent weight nodes, and its two biases."""
        rows = slice(gate * self.hidden, (gate + 1) * self.hidden)
        gates = GATES[self.op]
        w = self.const(self.W[d, rows], "OI", f"{name}_W")
        r = self.const(self.R[d, rows], "OI", f"{name}_R")
        return w, r, self.B[d, rows], self.B[d, gates * self.hidden:][rows]

    def constant(self, name: str) -> np.ndarray | None:
        """The value of a constant node (an initial state unrolled from), else None."""
        graph = self.low.graph
        return np.asarray(graph.node(name).attrs["value"], np.float64) if graph.op(name) == "const" else None

    def matrix(self, weights: str) -> np.ndarray:
        return np.asarray(self.low.graph.node(weights).attrs["value"], np.float64)

    def gate_sum(self, x: str, w: str, bias: np.ndarray, h: str, r: str, name: str, activation: str = "none") -> str:
        """W x + bias + R h; from a constant h (the first step unrolled), R h joins the bias: the C computes no op
        of constants."""
        h_value = self.constant(h)
        if h_value is not None:
            return self.dense(x, w, bias + self.matrix(r) @ h_value.reshape(-1), f"{name}_sum", activation)
        total = [self.dense(x, w, bias, f"{name}_x"), self.dense(h, r, np.zeros(self.hidden), f"{name}_h")]
        return self.add("tensor_add", total, {"activation": activation}, f"{name}_sum")

    def dense(self, x: str, weights: str, bias: np.ndarray | str, name: str, activation: str = "none") -> str:
        if not isinstance(bias, str):
            bias = self.const(bias, "", f"{name}_bias")
        return self.add("fully_connected", [x, weights, bias], {"activation": activation}, name)

    # ---- one direction

    def run(self, d: int, h: str, c: str | None) -> tuple[list[str], str, str | None]:
        """The hidden state after each time step (in the sequence's order) and the last cell state."""
        order = range(self.steps - 1, -1, -1) if (self.direction == "reverse" or d == 1) else range(self.steps)
        name = f"{self.label}_d{d}" if self.dirs > 1 else self.label
        hs = {}
        if self.op == "GRU":
            step = self.gru(d, name)
        elif self.op == "RNN":
            step = self.rnn(d, name)
        else:
            step = self.lstm(d, name)
        for t in order:
            h, c = step(self.input_step(t, f"{name}_x{t}"), h, c, f"{name}_t{t}")
            hs[t] = h
        return [hs[t] for t in range(self.steps)], h, c

    def gru(self, d: int, name: str):
        (wz, rz, wbz, rbz), (wr, rr, wbr, rbr), (wn, rn, wbn, rbn) = (
            self.gate_constants(d, k, f"{name}_{gate}") for k, gate in enumerate("zrn"))
        bn, brn = self.const(wbn, "", f"{name}_n_bias"), self.const(rbn, "", f"{name}_n_recurrent_bias")

        def step(x: str, h: str, c, at: str):
            gate = {g: self.add("logistic", [self.gate_sum(x, w, wb + rb, h, r, f"{at}_{g}")], {}, f"{at}_{g}")
                    for g, w, r, wb, rb in (("z", wz, rz, wbz, rbz), ("r", wr, rr, wbr, rbr))}
            h_value = self.constant(h)
            if self.linear_before_reset:
                nh = (self.dense(h, rn, brn, f"{at}_nh") if h_value is None else
                      self.const((self.matrix(rn) @ h_value.reshape(-1) + rbn).reshape(1, -1), "", f"{at}_nh"))
                recurrent = self.add("tensor_mul", [gate["r"], nh], {}, f"{at}_rnh")
            elif h_value is not None and not np.any(h_value):  # r h is zero: R_n (r h) + Rb_n is Rb_n
                recurrent = None
            else:
                reset = self.add("tensor_mul", [gate["r"], h], {}, f"{at}_rh")
                recurrent = self.dense(reset, rn, brn, f"{at}_rnh")
            total = (self.dense(x, wn, wbn + rbn, f"{at}_n_sum") if recurrent is None else
                     self.add("tensor_add", [self.dense(x, wn, bn, f"{at}_nx"), recurrent], {"activation": "none"},
                              f"{at}_n_sum"))
            n = self.add("tensor_tanh", [total], {}, f"{at}_n")
            kept = self.add("tensor_mul", [gate["z"], self.add("tensor_sub", [h, n], {}, f"{at}_h_minus_n")], {},
                            f"{at}_kept")
            return self.add("tensor_add", [n, kept], {"activation": "none"}, f"{at}_h"), c

        return step

    def rnn(self, d: int, name: str):
        w, r, wb, rb = self.gate_constants(d, 0, name)
        relu = self.activations == ("Relu",)

        def step(x: str, h: str, c, at: str):
            total = self.gate_sum(x, w, wb + rb, h, r, at, "relu" if relu else "none")
            return (total if relu else self.add("tensor_tanh", [total], {}, f"{at}_h")), c

        return step

    def lstm(self, d: int, name: str):
        # ONNX's gate order: input, output, forget, cell
        (wi, ri, wbi, rbi), (wo, ro, wbo, rbo), (wf, rf, wbf, rbf), (wg, rg, wbg, rbg) = (
            self.gate_constants(d, k, f"{name}_{gate}") for k, gate in enumerate("iofc"))
        bi, bo, bf, bg = (self.const(wb + rb, "", f"{name}_{gate}_bias")
                          for gate, wb, rb in (("i", wbi, rbi), ("o", wbo, rbo), ("f", wbf, rbf), ("c", wbg, rbg)))

        def step(x: str, h: str, c: str, at: str):
            c = self.add("lstm_cell", [x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg],
                         {"activation": "tanh", "cell_clip": 0.0}, f"{at}_c")
            return self.add("lstm_hidden", [x, h, c, wo, ro, bo], {}, f"{at}_h"), c

        return step

    # ---- outputs

    def joined(self, parts: list[str], axis: int, name: str) -> str:
        out = parts[0]
        for k, part in enumerate(parts[1:], start=1):
            out = self.add("concatenation", [out, part], {"axis": axis}, name if k == len(parts) - 1 else f"{name}_{k}")
        return out

    def sequence_output(self, hs: list[list[str]]) -> str:
        """Y: (sequence, directions, 1, H), or with layout 1 (1, sequence, directions, H)."""
        steps = []
        for t in range(self.steps):
            pieces = [self.add("reshape", [hs[d][t]], {"shape": [1, 1, 1, self.hidden]}, f"{self.label}_y{t}_{d}")
                      for d in range(self.dirs)]
            steps.append(self.joined(pieces, 2 if self.layout else 1, f"{self.label}_y{t}"))
        return self.joined(steps, 1 if self.layout else 0, f"{self.label}_y")

    def final_output(self, finals: list[str], what: str) -> str:
        """Y_h / Y_c: (directions, 1, H), or with layout 1 (1, directions, H)."""
        pieces = [self.add("reshape", [f], {"shape": [1, 1, self.hidden]}, f"{self.label}_{what}n_{d}")
                  for d, f in enumerate(finals)]
        return self.joined(pieces, 1 if self.layout else 0, f"{self.label}_{what}n")


def lower_recurrent(low, node, attrs: dict, label: str, stepped: bool) -> None:
    """GRU, LSTM or RNN ``node``: its outputs Y, Y_h (and LSTM's Y_c) defined where the graph reads them."""
    layer = _Layer(low, node, attrs, label, stepped)
    hs, states = layer.initial(5, "h")
    cs, cell_states = layer.initial(6, "c") if layer.op == "LSTM" else ([None] * layer.dirs, [])
    sequences, finals, cells = [], [], []
    for d in range(layer.dirs):
        sequence, h, c = layer.run(d, hs[d], cs[d])
        sequences.append(sequence)
        finals.append(h)
        cells.append(c)
    for state, final in zip(states + cell_states, finals + cells):
        low.graph.set_next_state(state, final)
    outputs = list(node.output) + [""] * 3

    def read(name: str) -> bool:
        return bool(name) and (name in low.consumers or name in low.outputs)

    if read(outputs[0]):
        time = sequence_axis(attrs) if stepped else None
        y_shape = ((1, layer.steps, layer.dirs, layer.hidden) if layer.layout
                   else (layer.steps, layer.dirs, 1, layer.hidden))
        low.define(outputs[0], low.result(layer.sequence_output(sequences), y_shape, time))
    state_shape = (1, layer.dirs, layer.hidden) if layer.layout else (layer.dirs, 1, layer.hidden)
    if read(outputs[1]):
        low.define(outputs[1], low.result(layer.final_output(finals, "h"), state_shape))
    if layer.op == "LSTM" and read(outputs[2]):
        low.define(outputs[2], low.result(layer.final_output(cells, "c"), state_shape))
