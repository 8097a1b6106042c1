"""ir.graph.embed: a graph copied into another on a shared input computes what it computed alone, copies only
what the named nodes need, and refuses an input of another type."""

from __future__ import annotations

import numpy as np
import pytest

from tinycc_ml.ir.graph import Graph, embed
from tinycc_ml.ir.interp import evaluate_all
from tinycc_ml.models.lowering import add_const, add_input, add_matrix


def _model(seed: int) -> tuple[Graph, str]:
    rng = np.random.default_rng(seed)
    g = Graph("part")
    x = add_input(g, 4)
    h = g.add("matvec", [add_matrix(g, "W", rng.normal(size=(3, 4))), x], name="h")
    out = g.add("tanh", [g.add("add", [h, add_const(g, "b", rng.normal(size=3))], name="z")], name="out")
    g.add("argmax", [out], name="unused")
    return g, out


def test_two_graphs_on_one_input_compute_what_they_computed_alone():
    target = Graph("whole")
    x = add_input(target, 4)
    row = np.random.default_rng(9).normal(size=4)
    nodes = []
    for i in range(2):
        part, out = _model(i)
        mapping = embed(target, part, [out], {"x": x}, prefix=f"p{i}_")
        assert "unused" not in mapping and mapping["x"] == x
        np.testing.assert_allclose(evaluate_all(target, {x: row})[mapping[out]], evaluate_all(part, {"x": row})[out])
        nodes.append(mapping[out])
    assert len(set(nodes)) == 2 and all(n.startswith(("p0_", "p1_")) for n in nodes)


def test_an_input_of_another_type_is_refused():
    target = Graph("whole")
    x = add_input(target, 5)
    part, out = _model(0)
    with pytest.raises(ValueError, match="has no target node of its type"):
        embed(target, part, [out], {"x": x})
