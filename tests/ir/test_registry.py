"""The op registry is the single owner of each op: every facet is present or declared unsupported
with a reason, and the code tables and the verifier follow the registry."""

from __future__ import annotations

import numpy as np
import pytest

from tinycc_ml.codegen.emitter import C_CODE
from tinycc_ml.errors import IRError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import FACETS, OPS
from tinycc_ml.ir.text import parse_graph
from tinycc_ml.ir.types import TensorType, fixed
from tinycc_ml.ir.verify import verify


def facet_present(op, facet: str) -> bool:
    if facet == "float":
        return op.evaluate is not None
    if facet in ("c_float", "c_fixed"):
        return op.leaf or op.name in C_CODE[facet[2:]]
    return getattr(op, facet) is not None


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_every_facet_or_says_why_not(name):
    op = OPS[name]
    for facet in FACETS:
        if facet in op.unsupported:
            assert op.unsupported[facet].strip(), f"{name}: declares {facet} unsupported without a reason"
            assert not facet_present(op, facet), f"{name}: declares {facet} unsupported but has it"
        else:
            assert facet_present(op, facet), f"op {name} has no {facet} facet and does not declare it unsupported"
    assert op.doc, f"op {name} has no documentation"


def test_code_tables_hold_only_registered_ops():
    for precision, table in C_CODE.items():
        assert set(table) <= set(OPS), f"{precision} C for unknown ops {set(table) - set(OPS)}"


def test_an_unsupported_precision_is_refused_by_the_verifier_naming_op_precision_and_node():
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=TensorType((3,), fixed(16, 8)))
    e = g.add("exp", [x], type=TensorType((3,), fixed(16, 8)), name="bad_exp")
    g.set_output("scores", e)
    verify(g)  # a pass (exp_table) still has to lower it
    with pytest.raises(IRError, match=r"%bad_exp.*exp.*fixed precision"):
        verify(g, complete=True)


def test_a_float_graph_with_a_table_op_is_refused():
    text = """graph g {
  %x = input() {name = "x"} : f32[2]
  %t = tanh_lut(%x) {drop_bits = 2, in_max_q = 8, table = array<int16>(3)[0, 1, 2], table_scale = 4} : f32[2]
  output scores = %t
}"""
    g = parse_graph(text)
    with pytest.raises(IRError, match=r"%t.*tanh_lut.*float precision"):
        verify(g, complete=True)


def test_fixed_interpreter_refuses_an_op_without_integer_semantics():
    from tinycc_ml.ir.fixed import run_fixed

    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=TensorType((2,), fixed(16, 4)))
    g.set_output("scores", g.add("tanh", [x], type=TensorType((2,), fixed(16, 4))))
    with pytest.raises(IRError, match="tanh"):
        run_fixed(g, np.zeros((1, 2), dtype=np.int16))
