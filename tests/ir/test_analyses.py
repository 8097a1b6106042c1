"""Analyses live in graph.analyses: typed, copied with the graph, shown in IR dumps."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_iris

import tinycc_ml
from tinycc_ml.ir.analyses import ArenaSlot, Range
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.protonn import ProtoNNModel


def test_copy_carries_an_independent_record():
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=TensorType((2,), F32))
    g.set_output("scores", g.add("exp", [x]))
    g.analyses.ranges[x] = Range(-1.0, 2.0)
    g.analyses.input_scale = np.array([3, 4])
    g.analyses.memory_plan["exp"] = ArenaSlot("f32", 0, 2)
    other = g.copy()
    assert other.analyses.ranges[x].hi == 2.0 and other.analyses.input_scale.tolist() == [3, 4]
    other.analyses.ranges[x].hi = 5.0
    other.analyses.input_scale[0] = 9
    assert g.analyses.ranges[x].hi == 2.0 and g.analyses.input_scale.tolist() == [3, 4]


def test_dump_after_a_pass_shows_its_results(capsys):
    X, _ = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    model = ProtoNNModel(W=rng.normal(size=(3, 4)), B=rng.normal(size=(3, 5)), Z=rng.normal(size=(3, 5)), gamma=0.5)
    result = tinycc_ml.compile(model, precision="int16", calibration=X,
                               dump_ir_after=["range_analysis", "plan_memory"])
    dumps = capsys.readouterr().err.split("// IR after ")
    ranges = [d for d in dumps if d.startswith("range_analysis")]
    assert ranges and "# range %" in ranges[0] and "calibrated [" in ranges[0]
    planned = [d for d in dumps if d.startswith("plan_memory")][-1]
    assert "# memory %" in planned and "# overflow %" in planned
    assert result.graph.analyses.memory_plan and result.graph.analyses.input_scale is not None


def test_the_kept_order_follows_every_rewrite():
    """Graph.order is kept between calls: a node added, an operand rewired (replace_uses, replace_operand) or a
    node removed gives the order computed anew."""
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.types import F32, TensorType

    g = Graph("m")
    x = g.add("input", [], {"name": "x"}, type=TensorType((2,), F32), name="x")
    a = g.add("tanh", [x], name="a")
    b = g.add("tanh", [x], name="b")
    c = g.add("add", [a, b], name="c")
    g.set_output("scores", c)
    assert g.order() == ["x", "a", "b", "c"]
    g.replace_operand(a, x, b)  # a now reads b: b first
    assert g.order() == ["x", "b", "a", "c"]
    d = g.add("tanh", [x], name="d")
    g.replace_uses(b, d)
    assert g.order() == ["x", "b", "d", "a", "c"]
    g.remove(b)
    assert g.order() == ["x", "d", "a", "c"]
    order = g.order()
    order.append("junk")  # a caller's list is its own
    assert g.order() == ["x", "d", "a", "c"]
