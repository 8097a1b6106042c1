"""Power-of-two channel equalisation before a float network's int8 power-of-two scales (precision int8, the pow2
dialect): where a layer's output channel c feeds the next layer only through a ReLU (or nothing), its filter and
bias are divided by 2^k_c and the next layer's weights reading channel c multiplied by 2^k_c. ReLU(x / 2^k) =
ReLU(x) / 2^k and scaling by a power of two is exact in floating point, so the float network computes the same
values bit for bit; but each layer then stores one power-of-two weight scale per tensor, and a channel whose
weights are much smaller than its tensor's largest (a grouped convolution's weakest group: up to 3.3 bits lost)
keeps more of its bits. k_c = round(log2(sqrt(r1_c / r2_c))), r1_c the largest |weight| of channel c's filter and
r2_c of the next layer's weights reading it, brings both to sqrt(r1_c r2_c) (cross-layer equalisation, Nagel et
al. 2019, restricted to powers of two so that nothing rounds). The activation between them then holds channels
at different levels under one scale: the trade is measured, not assumed: models/network_fixed.py keeps the
equalised graph only where it agrees with the float network on the held-out calibration rows at least as often.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

LAYERS = ("conv2d", "grouped_conv2d", "fully_connected")
HOMOGENEOUS = ("none", "relu")  # f(x / 2^k) = f(x) / 2^k (relu6 and the rest are not)


def _pairs(graph: Graph) -> list[tuple[str, str]]:
    """(first layer, next layer) where the first's output reaches only the next, through at most a ReLU."""
    out = []
    for name in graph.order():
        node = graph.node(name)
        if node.op not in LAYERS or node.attrs.get("activation", "none") not in HOMOGENEOUS \
                or any(graph.op(i) != "const" for i in node.inputs[1:]) or len(node.inputs) < 3:
            continue
        value = name
        users = graph.users(value)
        if len(users) == 1 and graph.op(users[0]) == "relu":
            value = users[0]
            users = graph.users(value)
        if len(users) != 1 or graph.op(users[0]) not in LAYERS:
            continue
        second = graph.node(users[0])
        if second.inputs[0] != value or graph.op(second.inputs[1]) != "const":
            continue
        results = {n for _, n in graph.outputs}
        if graph.type(name).shape[-1] != _in_channels(graph, second) or {name, value} & results:
            continue
        out.append((name, second.name))
    return out


def _in_channels(graph: Graph, node) -> int:
    w = graph.type(node.inputs[1]).shape
    if node.op == "fully_connected":
        return w[1]
    return w[3] * (int(node.attrs["groups"]) if node.op == "grouped_conv2d" else 1)


def _input_channel_view(w: np.ndarray, node) -> list[tuple[tuple, ...]]:
    """For each input channel c of ``node``: the index of its weights in w."""
    if node.op == "fully_connected":
        return [(slice(None), c) for c in range(w.shape[1])]
    if node.op == "conv2d":
        return [(Ellipsis, c) for c in range(w.shape[3])]
    groups = int(node.attrs["groups"])
    per_out, per_in = w.shape[0] // groups, w.shape[3]
    return [(slice(g * per_out, (g + 1) * per_out), Ellipsis, j) for g in range(groups) for j in range(per_in)]


def _exponents(w1: np.ndarray, w2: np.ndarray, second) -> np.ndarray:
    r1 = np.max(np.abs(w1.reshape(w1.shape[0], -1)), axis=1)
    r2 = np.array([np.max(np.abs(w2[index])) for index in _input_channel_view(w2, second)])
    k = np.zeros(len(r1), dtype=np.int64)
    usable = (r1 > 0) & (r2 > 0)
    k[usable] = np.round(0.5 * np.log2(r1[usable] / r2[usable])).astype(np.int64)
    return k


def _const(graph: Graph, name: str, value: np.ndarray, like: str) -> str:
    """A constant of ``like``'s type holding ``value`` (a power-of-two multiple of its values: exact in its dtype)."""
    stored = np.asarray(graph.node(like).attrs["value"])
    return graph.add("const", [], {"value": value.astype(stored.dtype)}, type=graph.type(like), name=name)


@register_pass
class EqualizeChannels(Pass):
    name = "equalize_channels"
    description = "power-of-two cross-layer channel equalisation of ReLU-joined layers (exact in float)"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        pairs = _pairs(graph)
        if not pairs:
            return graph
        out = graph.copy()
        for first, second in pairs:
            a, b = out.node(first), out.node(second)
            w1 = np.asarray(out.node(a.inputs[1]).attrs["value"], dtype=np.float64)
            b1 = np.asarray(out.node(a.inputs[2]).attrs["value"], dtype=np.float64)
            w2 = np.asarray(out.node(b.inputs[1]).attrs["value"], dtype=np.float64)
            k = _exponents(w1, w2, b)
            if not k.any():
                continue
            scale = np.ldexp(1.0, -k)
            w2 = w2.copy()
            for c, index in enumerate(_input_channel_view(w2, b)):
                w2[index] = np.ldexp(w2[index], int(k[c]))
            for user, old, value in ((first, a.inputs[1], w1 * scale.reshape(-1, *[1] * (w1.ndim - 1))),
                                     (first, a.inputs[2], b1 * scale), (second, b.inputs[1], w2)):
                out.replace_operand(user, old, _const(out, f"{old}_eq", value, old))
        return out
