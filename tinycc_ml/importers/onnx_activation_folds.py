"""Activations that PyTorch's exporters spell as several ONNX nodes, read back as the one node the other exporter (or
a later opset) writes, so that both exporters' files give the same network (the same C) and each runs as the one op:

    Mul(x, Tanh(Softplus(x)))              -> Mish(x)              F.mish, TorchScript exporter (opset < 18)
    Where(Greater(x, t), x, Softplus(x))   -> Softplus(x)          F.softplus (beta 1, threshold t >= 16), dynamo
    Where(Greater(x, 0), x, Mul(x, a))     -> LeakyRelu(x, a)      torch.where(x > 0, x, a * x)

The Softplus fold is exact in float32: above t >= 16, log(1 + e^-x) < e^-16 < 2^-23 (half an ulp of x >= 16), so
x + log(1 + e^-x) rounds to x. The LeakyRelu fold is x > 0 ? x : x a, LeakyRelu's own arithmetic (GreaterOrEqual,
and Less / LessOrEqual with the Where's branches swapped, differ from it at x = 0 alone, where both give a zero).
Mul operands in either order; each intermediate must be read by the pattern alone and be no graph output, else the
graph is left as it is (lowered node by node: Greater and Where as a comparison and a select, float builds).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.importers.onnx_graph_view import GraphView, rewritten

SOFTPLUS_EXACT_ABOVE = 16.0  # log1p(e^-16) = 1.1e-7 < 2^-20 / 2: half an ulp of any float32 at or above 16
POSITIVE = {"Greater": True, "GreaterOrEqual": True, "Less": False, "LessOrEqual": False}  # the comparison is x > 0


def _other(node, name: str) -> str | None:
    """The operand of a two-operand node other than ``name``."""
    if len(node.input) != 2 or name not in node.input:
        return None
    a, b = node.input
    return b if a == name else a


def _mish(g: GraphView, mul):
    for k in (0, 1):
        x, root = mul.input[k], mul.input[1 - k]
        tanh = g.single(root, "Tanh")
        softplus = g.single(tanh.input[0], "Softplus") if tanh is not None and len(tanh.input) == 1 else None
        if softplus is not None and list(softplus.input) == [x]:
            return "Mish", [x], {}, (tanh, softplus)
    return None


def _where(g: GraphView, where):
    condition, first, second = where.input
    compare = g.producer.get(condition)
    if compare is None or compare.op_type not in POSITIVE or g.single(condition, compare.op_type) is None or \
            len(compare.input) != 2:
        return None
    x, limit = compare.input
    if g.const(x) is not None:
        return None
    positive_first = POSITIVE[compare.op_type]
    chosen, other = (first, second) if positive_first else (second, first)  # (x's branch, the other)
    threshold = g.scalar(limit)
    if compare.op_type == "Greater" and chosen == x and threshold is not None and threshold >= SOFTPLUS_EXACT_ABOVE:
        softplus = g.single(other, "Softplus")
        if softplus is not None and list(softplus.input) == [x]:
            return "Softplus", [x], {}, (compare, softplus)
    if threshold != 0.0 or chosen != x:
        return None
    mul = g.single(other, "Mul")
    alpha = g.scalar(_other(mul, x)) if mul is not None and list(mul.input).count(x) == 1 else None
    if alpha is None:
        return None
    return "LeakyRelu", [x], {"alpha": alpha}, (compare, mul)


PATTERNS = {"Mul": _mish, "Where": _where}  # the pattern's last node -> its matcher


def fold_activations(graph, weights: dict[str, np.ndarray]):
    """``graph`` (an onnx GraphProto) with each pattern of the module's docstring as its one node; the graph itself
    where there is none."""
    from onnx import helper  # deferred: onnx is an optional dependency

    g = GraphView(graph, weights)
    replaced: dict[int, object] = {}
    removed: set[int] = set()
    for last in graph.node:
        if last.op_type not in PATTERNS or last.domain not in ("", "ai.onnx") or len(last.output) != 1:
            continue
        if len(last.input) != (2 if last.op_type == "Mul" else 3):
            continue
        found = PATTERNS[last.op_type](g, last)
        if found is None:
            continue
        op, inputs, attrs, inner = found
        if any(id(n) in removed for n in inner):
            continue
        removed.update(id(n) for n in inner)
        replaced[id(last)] = helper.make_node(op, inputs, [last.output[0]], name=last.name or last.output[0], **attrs)
    return rewritten(graph, replaced, removed)
