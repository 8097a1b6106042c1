"""Tensors in the IR: N-D shapes with a declared layout and TFLite's quantisation parameters on the
element type, through the text form (round trip, a hypothesis property) and the verifier."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinycc_ml.errors import IRError, IRParseError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.types import F32, PER_TENSOR, TensorType, fixed, quantised
from tinycc_ml.ir.verify import verify

LAYOUT_LETTERS = "NHWCOI"
FLOAT32_SCALES = st.floats(min_value=2.0**-100, max_value=2.0**100, width=32)


@st.composite
def tensor_types(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    layout = "".join(draw(st.permutations(LAYOUT_LETTERS))[:rank]) if draw(st.booleans()) else ""
    kind = draw(st.sampled_from(["f32", "fx", "qi"]))
    if kind == "f32":
        dtype = F32
    elif kind == "fx":
        dtype = fixed(draw(st.sampled_from([8, 16, 32])), draw(st.integers(-8, 20)))
    else:
        bits = draw(st.sampled_from([8, 16, 32]))
        axis = draw(st.sampled_from([PER_TENSOR, *range(rank)]))
        count = 1 if axis == PER_TENSOR else shape[axis]
        scales = draw(st.lists(FLOAT32_SCALES, min_size=count, max_size=count))
        top = 2 ** (bits - 1)
        dtype = quantised(bits, scales, draw(st.integers(-top, top - 1)), axis)
    return TensorType(shape, dtype, layout)


def constant_of(draw, t: TensorType) -> np.ndarray:
    if t.dtype.is_float:
        return np.asarray(draw(st.lists(st.floats(width=32, allow_nan=False), min_size=t.size, max_size=t.size)),
                          dtype=np.float32).reshape(t.shape)
    top = 2 ** (t.dtype.bits - 1)
    values = draw(st.lists(st.integers(-top, top - 1), min_size=t.size, max_size=t.size))
    return np.asarray(values, dtype=f"int{t.dtype.bits}").reshape(t.shape)


@st.composite
def tensor_graphs(draw):
    g = Graph("tensors")
    x_type = draw(tensor_types().filter(lambda t: t.layout))
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    g.set_output("x", x)
    for i in range(draw(st.integers(0, 3))):
        t = draw(tensor_types())
        g.add("const", [], {"value": constant_of(draw, t)}, type=t, name=f"c{i}")
    return g


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_graphs())
def test_tensor_types_round_trip_through_the_text_form(g):
    verify(g)
    text = print_graph(g)
    back = parse_graph(text)
    assert back.structurally_equal(g)
    verify(back)
    assert print_graph(back) == text


def test_text_form_of_a_layout_and_quantisation():
    t = TensorType((2, 3, 3, 4), quantised(8, [0.5, 0.25], 0, axis=0), "OHWI")
    assert str(t) == "qi8(axis 0: [0.5, 0.25], 0)[2,3,3,4]@OHWI"
    assert str(TensorType((1, 49, 10, 1), quantised(8, 0.00390625, -128), "NHWC")) == \
        "qi8(0.00390625, -128)[1,49,10,1]@NHWC"
    assert str(TensorType((3,), F32)) == "f32[3]"  # vectors print as they always did


@pytest.mark.parametrize("make, message", [
    (lambda: TensorType((1, 2), F32, "NHWC"), "does not name"),
    (lambda: TensorType((1, 2), F32, "NN"), "does not name"),
    (lambda: TensorType((1, 2), F32, "nc"), "does not name"),
    (lambda: quantised(8, [1.0], 200), "zero point"),
    (lambda: quantised(8, [-1.0]), "positive"),
    (lambda: quantised(8, [1.0, 2.0]), "axis"),
    (lambda: TensorType((3, 2), quantised(8, [1.0, 2.0], 0, axis=0)), "scales on axis"),
])
def test_bad_tensor_types_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("type_text, message", [
    ("f32[1,2]@NHWC", "does not name"),
    ("qi8(0.1, 0)[2]", "float32"),
    ("qi8(axis 0: [0.5], 0)[2]", "scales on axis"),
    ("qi7(0.5, 0)[2]", "width"),
])
def test_bad_tensor_types_in_text_are_parse_errors_with_a_position(type_text, message):
    text = f'graph g {{\n  %x = input() {{name = "x"}} : f32[2]\n  %c = const() {{value = array<int8>(2)[1, 2]}} : ' \
           f'{type_text}\n  output y = %x\n}}\n'
    with pytest.raises(IRParseError, match=f"line 3.*{message}"):
        parse_graph(text)


def test_an_input_of_rank_above_one_needs_a_layout():
    g = Graph("g")
    with pytest.raises(ValueError, match="tensors with a layout"):
        g.add("input", [], {"name": "x"}, type=TensorType((2, 2), F32))
    g.add("input", [], {"name": "x"}, type=TensorType((1, 2, 2, 1), F32, "NHWC"), name="x")
    g.set_output("y", "x")
    verify(g)


def test_verifier_refuses_a_constant_whose_ints_leave_its_quantised_width():
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=TensorType((2,), F32))
    g.nx.add_node("c", op="const", inputs=(), attrs={"value": np.array([300, 1], dtype=np.int16)},
                  type=TensorType((2,), quantised(8, 0.5, 0)), order=99)
    g.set_output("y", x)
    with pytest.raises(IRError, match="outside"):
        verify(g)
