"""The frame stack of a front end's stream: the compiled graph of a window cut in two where its frames' features join,
so that ``<name>_feed`` computes each frame's features once (the frame graph, on one frame's values) and runs the
rest (the stack graph: the window-level steps and the model) on the stack of the last frames' features.

A node is frame-wise when every non-constant operand is frame-wise and the op maps each frame to its own values:
elementwise functions, reshapes between (frames, k) and (frames * k,), products and sums with a constant that is the
same for every frame, the power spectrum (and the log mel power), a fully-connected layer on the frames' rows, a
reduction within each frame. The frames are those of the one ``take`` that reads the input at starts 0, hop, 2 hop, ...
(a Framer); the ops before it work value by value. Every node keeps its type (an integer build's scales): the frame
graph computes each frame exactly as the window's graph does, so the stream's decisions are those of
``<name>_predict``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import IDX, TensorType
from tinycc_ml.passes.plan_memory import fused_chains, lower_bound, plan

ELEMENTWISE = {"clip", "log", "sqrt", "abs", "scale", "float_unary", "quantize", "dequantize", "relu", "logistic",
               "tanh"}
BINARY = {"tensor_mul", "tensor_add", "tensor_sub", "mul", "add", "sub"}
REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min"}


@dataclass
class FrameStack:
    frame_graph: Graph  # one frame's values -> its features (output "scores")
    stack_graph: Graph  # the stacked features of a window -> the model's scores and prediction
    frame_values: int  # input values a frame reads
    frame_hop: int  # input values between frames
    frames: int  # frames in a window
    features: int  # features of one frame


def _frames_of_take(g: Graph, take: str) -> tuple[int, int, int] | None:
    """(frames, frame length, hop) of a take of the input at starts 0, hop, 2 hop, ...; None for any other take."""
    node = g.node(take)
    indices = np.asarray(node.attrs.get("indices", []), dtype=np.int64)
    if node.attrs.get("axis") != 0 or g.type(node.inputs[0]).rank != 1 or indices.size == 0:
        return None
    length = int(np.argmax(np.diff(indices) != 1)) + 1 if np.any(np.diff(indices) != 1) else indices.size
    if indices.size % length or indices[0] != 0:
        return None
    frames = indices.size // length
    hop = int(indices[length]) if frames > 1 else length
    expected = (np.arange(frames)[:, None] * hop + np.arange(length)[None, :]).ravel()
    return (frames, length, hop) if np.array_equal(indices, expected) and hop >= 1 else None


def _per_frame_shape(shape: tuple, frames: int) -> tuple | None:
    """The shape of one frame of a (frames, ...) or (frames * k,) tensor; None when it is neither."""
    if len(shape) >= 2 and shape[0] == frames:
        return (1, *shape[1:])
    if len(shape) == 1 and shape[0] % frames == 0:
        return (shape[0] // frames,)
    return None


def _frame_constant(value: np.ndarray, node_shape: tuple, frames: int) -> np.ndarray | None:
    """A constant operand as one frame needs it: broadcast over the frames already (its shape is the node's
    trailing dimensions), or the same values for every frame of a (frames * k,) node; None when frames differ."""
    value = np.asarray(value)
    if len(node_shape) >= 2 and value.ndim < len(node_shape):
        return value
    if value.ndim == len(node_shape) >= 2 and value.shape[0] == frames:  # one row per frame: the same rows
        return value[:1].copy() if np.all(value == value[:1]) else None
    if value.ndim == 1 and len(node_shape) == 1 and value.size == node_shape[0]:
        per = value.reshape(frames, -1)
        return per[0].copy() if np.all(per == per[0]) else None
    if value.size == 1:
        return value
    return None


def _broadcasts_per_frame(operand: tuple, shape: tuple, frames: int) -> bool:
    """Whether a frame-wise operand of ``operand``'s shape gives frame f's values to frame f of ``shape`` (the same
    shape, or (frames, 1) per-frame statistics against (frames, k))."""
    if operand == shape:
        return True
    return (len(operand) == len(shape) >= 2 and operand[0] == shape[0] == frames
            and all(a in (1, b) for a, b in zip(operand[1:], shape[1:])))


def split_frame_stack(graph: Graph) -> FrameStack | str:
    """The frame and stack graphs of ``graph`` (a front end's window graph, after its passes), or why there is none."""
    order = graph.order()
    (x,) = graph.inputs()
    takes = [n for n in order if graph.op(n) == "take" and _frames_of_take(graph, n)]
    if len(takes) != 1:
        return "the front end does not begin with a Framer's frames" if not takes else "the input is framed twice"
    take = takes[0]
    frames, length, hop = _frames_of_take(graph, take)
    if frames < 2:
        return "a window of one frame has nothing to keep between hops"
    sample_wise = {x}  # before the take: value by value
    frame_wise: dict[str, tuple] = {}  # node -> the shape of one frame of it
    consts: dict[str, np.ndarray] = {}  # constant operands as the frame graph holds them
    for n in order:
        node = graph.node(n)
        if n == take:
            if node.inputs[0] in sample_wise:
                frame_wise[n] = (length,)
            continue
        if node.op == "const" or n in sample_wise:
            continue
        ins = [i for i in node.inputs if graph.op(i) != "const"]
        if node.op in ELEMENTWISE and ins and all(i in sample_wise for i in ins) and not frame_wise:
            sample_wise.add(n)
            continue
        if not ins or not all(i in frame_wise for i in ins):
            continue
        shape = _per_frame_shape(tuple(node.type.shape), frames)
        if shape is None:
            continue
        if node.op in ELEMENTWISE or node.op in ("reshape", "power_spectrum", "log_mel_power"):
            ok = True
        elif node.op == "fully_connected":
            ok = len(ins) == 1 and node.inputs[0] in ins and graph.type(ins[0]).rank == 2
        elif node.op in REDUCTIONS:
            axes = [a % graph.type(ins[0]).rank for a in node.attrs.get("axes", [])]
            ok = graph.type(ins[0]).rank == 2 and axes == [1]
        elif node.op in BINARY:
            ok = True
            for i in node.inputs:
                if graph.op(i) == "const":
                    value = _frame_constant(graph.node(i).attrs["value"], tuple(node.type.shape), frames)
                    ok = ok and value is not None
                    if value is not None:
                        consts[i] = value
                elif not _broadcasts_per_frame(tuple(graph.type(i).shape), tuple(node.type.shape), frames):
                    ok = False
        else:
            ok = False
        if ok:
            frame_wise[n] = shape
    inside = sample_wise | set(frame_wise)
    boundary = [n for n in frame_wise if any(u not in inside for u in graph.users(n))
                or any(n == o for _, o in graph.outputs)]
    if len(boundary) != 1:
        return ("the frames' features leave the frame-wise steps at more than one place" if boundary else
                "no step after the frames works frame by frame")
    (cut,) = boundary
    if any(u not in inside for s in sample_wise for u in graph.users(s) if u != take and s != x) or \
            any(u not in inside for u in graph.users(x)):
        return "the window's samples are read other than through its frames"
    features = int(np.prod(frame_wise[cut]))
    parts = [_frame_graph(graph, order, inside, frame_wise, consts, cut, take, length),
             _stack_graph(graph, order, inside, cut)]
    for part in parts:  # each part's own intermediates (plan_memory's analyses, as the pass computes them)
        a = part.analyses
        a.fused = fused_chains(part)
        a.memory_plan, a.arenas = plan(part, a.fused)
        a.arena_bounds = lower_bound(part, a.fused)
    return FrameStack(*parts, length, hop, frames, features)


def _frame_graph(graph: Graph, order: list[str], inside: set[str], frame_wise: dict[str, tuple],
                 consts: dict[str, np.ndarray], cut: str, take: str, length: int) -> Graph:
    g = Graph(f"{graph.name}_frame")
    g.analyses = graph.analyses.copy()
    needed = _ancestors(graph, cut)
    for n in order:
        if n not in needed:
            continue
        node = graph.node(n)
        if node.op == "const":
            t, value = node.type, np.asarray(node.attrs["value"])
            if n in consts:  # the values of one frame
                value = np.asarray(consts[n], dtype=value.dtype)
                t = TensorType(value.shape, t.dtype, t.layout if len(t.layout) == value.ndim else "")
            g.add("const", attrs={**node.attrs, "value": value}, type=t, name=n)
            continue
        t = node.type
        shape = frame_wise.get(n, (length,))  # the values before the take: one frame's
        attrs = dict(node.attrs)
        if n == take:
            attrs["indices"] = list(range(length))
        elif node.op == "reshape":
            attrs["shape"] = list(shape)
        g.add(node.op, node.inputs, attrs, type=TensorType(shape, t.dtype, t.layout), name=n)
    out = cut
    if len(frame_wise[cut]) != 1:
        out = g.add("reshape", [cut], {"shape": [int(np.prod(frame_wise[cut]))]},
                    type=TensorType((int(np.prod(frame_wise[cut])),), g.type(cut).dtype), name="frame_features")
    g.set_output("scores", out)
    g.set_output("prediction", g.add("argmax", [out], {}, type=TensorType((), IDX), name="frame_argmax"))
    return g


def _stack_graph(graph: Graph, order: list[str], inside: set[str], cut: str) -> Graph:
    g = graph.copy()
    g.name = f"{graph.name}_stack"
    stacked = g.add("input", attrs={"name": "x"}, type=TensorType((graph.type(cut).size,), graph.type(cut).dtype),
                    name="stacked_features")
    g.replace_uses(cut, stacked)
    for n in reversed(order):
        if n in inside or (graph.op(n) == "const" and not g.users(n)):
            if n in g and not g.users(n):
                g.remove(n)
    return g


def _ancestors(graph: Graph, node: str) -> set[str]:
    seen, todo = {node}, [node]
    while todo:
        for i in graph.node(todo.pop()).inputs:
            if i not in seen:
                seen.add(i)
                todo.append(i)
    return seen
