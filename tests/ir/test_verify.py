"""The verifier rejects ill-formed and ill-typed graphs, naming the node and the rule."""

from __future__ import annotations

import numpy as np
import pytest

from tinycc_ml.errors import IRError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import dense_to_sparse_attrs
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.ir.verify import verify


def fails(graph: Graph, *words: str) -> str:
    with pytest.raises(IRError) as info:
        verify(graph)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def base() -> Graph:
    """x: f32[4]; W: f32[3,4]; p = W x; s = exp(p)."""
    g = Graph("m")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((4,), F32), name="x")
    w = g.add("const", attrs={"value": np.ones((3, 4), dtype=np.float32)}, name="W")
    p = g.add("matvec", [w, x], name="p")
    s = g.add("exp", [p], name="s")
    g.set_output("scores", s)
    g.set_output("prediction", g.add("argmax", [s], name="pred"))
    return g


def test_a_well_typed_graph_passes():
    verify(base())
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(0)
    model = ProtoNNModel(rng.normal(size=(2, 5)), rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), 1.0)
    verify(model.lower())


def test_matvec_shape_mismatch_names_node_and_shapes():
    g = base()
    g.nx.nodes["W"]["attrs"]["value"] = np.ones((3, 5), dtype=np.float32)
    g.nx.nodes["W"]["type"] = TensorType((3, 5), F32)
    fails(g, "%p", "matvec", "(3, 5)", "(4,)")


def test_wrong_arity():
    g = base()
    g.nx.nodes["s"]["inputs"] = ("p", "p")
    fails(g, "%s", "exp", "1", "2")
    g = base()
    g.nx.remove_edge("x", "p")
    g.nx.nodes["p"]["inputs"] = ("W",)
    fails(g, "%p", "matvec", "2", "1")


def test_operands_of_a_leaf():
    g = base()
    g.nx.nodes["W"]["inputs"] = ("x",)
    g.nx.add_edge("x", "W")
    fails(g, "%W", "const", "operand")


def test_unknown_op():
    g = base()
    g.nx.nodes["s"]["op"] = "frobnicate"
    fails(g, "%s", "frobnicate", "unknown op")


def test_missing_and_unknown_attributes():
    g = base()
    g.nx.nodes["s"]["op"] = "scale"  # scale needs a factor
    fails(g, "%s", "scale", "factor")
    g = base()
    g.nx.nodes["x"]["attrs"] = {}
    fails(g, "%x", "input", "name")
    g = base()
    g.nx.nodes["s"]["attrs"] = {"bogus": 1}
    fails(g, "%s", "bogus")


def test_attribute_of_the_wrong_kind():
    g = base()
    g.nx.nodes["s"]["op"] = "scale"
    g.nx.nodes["s"]["attrs"] = {"factor": "two"}
    fails(g, "%s", "factor", "float")


def test_cycle():
    g = base()
    g.nx.nodes["p"]["inputs"] = ("W", "s")
    g.nx.add_edge("s", "p")
    message = fails(g, "cycle")
    assert "p" in message and "s" in message


def test_declared_type_disagreeing_with_the_rule():
    text = print_graph(base()).replace("= matvec(%W, %x) : f32[3]", "= matvec(%W, %x) : f32[4]")
    text = text.replace("= exp(%p) : f32[3]", "= exp(%p) : f32[4]")
    fails(parse_graph(text), "%p", "matvec", "f32[4]", "f32[3]")
    g = base()
    g.nx.nodes["pred"]["type"] = TensorType((), F32)
    fails(g, "%pred", "argmax", "idx")


def test_mixed_element_types():
    g = base()
    g.nx.nodes["x"]["type"] = TensorType((4,), g.type("p").dtype.__class__("fx", 16, 4))
    fails(g, "%p", "matvec")


def test_edges_must_mirror_operands():
    g = base()
    g.nx.add_edge("W", "s")
    fails(g, "%s", "edges")


def test_no_outputs_and_missing_output_node():
    g = base()
    g.outputs = []
    fails(g, "outputs")
    g = base()
    g.outputs.append(("extra", "ghost"))
    fails(g, "ghost")


def sparse_graph(**change) -> Graph:
    dense = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 5.0, 0.0]], dtype=np.float32)
    attrs = dense_to_sparse_attrs(dense)
    g = Graph("sp")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((3,), F32), name="x")
    w = g.add("sparse_const", attrs=attrs, name="Ws")
    g.set_output("scores", g.add("matvec", [w, x], name="p"))
    for key, value in change.items():
        g.nx.nodes["Ws"]["attrs"][key] = value
    return g


def test_sparse_csc_is_checked():
    verify(sparse_graph())
    fails(sparse_graph(col_ptr=np.array([0, 2, 3], dtype=np.int32)), "%Ws", "col_ptr")  # too short
    fails(sparse_graph(col_ptr=np.array([0, 3, 2, 5], dtype=np.int32)), "%Ws", "decrease")
    fails(sparse_graph(col_ptr=np.array([1, 2, 3, 5], dtype=np.int32)), "%Ws", "col_ptr")
    fails(sparse_graph(col_ptr=np.array([0, 2, 3, 4], dtype=np.int32)), "%Ws", "values")  # nnz mismatch
    fails(sparse_graph(row_indices=np.array([0, 2, 2, 0, 7], dtype=np.int32)), "%Ws", "row index")
    fails(sparse_graph(row_indices=np.array([2, 0, 2, 0, 1], dtype=np.int32)), "%Ws", "column 0", "ascending")
    fails(sparse_graph(shape=[3, 3, 1]), "%Ws")
