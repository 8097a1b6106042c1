"""The IR text form: print -> parse gives the same graph back, and parse errors point at the
offending line and column."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinycc_ml.errors import IRParseError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, dense_to_sparse_attrs
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.types import F32, TensorType, fixed
from tinycc_ml.ir.verify import verify

# float32 values: subnormals, huge magnitudes, -0.0, infinities (NaN has no unique text form).
F32_VALUES = st.one_of(
    st.floats(width=32, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1e-45, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.1, 1 / 3]),
)
IDENTS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
ATTR_FLOATS = st.floats(allow_nan=False)  # Python floats (float64), as passes store them
STRINGS = st.text(max_size=12)  # quotes, backslashes, newlines, non-ASCII


def f32_array(draw, shape):
    n = int(np.prod(shape)) if shape else 1
    return np.array(draw(st.lists(F32_VALUES, min_size=n, max_size=n)), dtype=np.float32).reshape(shape)


@st.composite
def graphs(draw):
    """A random well-typed graph using (nearly) every op in the registry."""
    g = Graph(draw(IDENTS))

    def name():
        return draw(IDENTS)

    def const(shape):
        return g.add("const", attrs={"value": f32_array(draw, shape)}, name=name())

    def vector(n):
        """A node of type f32[n]: reuse one, or make a new input/const."""
        have = [v for v in g.order() if g.type(v) == TensorType((n,), F32)]
        if have and draw(st.booleans()):
            return draw(st.sampled_from(have))
        if draw(st.booleans()):
            return g.add("input", attrs={"name": draw(STRINGS)}, type=TensorType((n,), F32), name=name())
        return const((n,))

    def matrix(rows, cols):
        if draw(st.booleans()):
            return const((rows, cols))
        dense = f32_array(draw, (rows, cols))
        dense[np.asarray(draw(st.lists(st.booleans(), min_size=dense.size, max_size=dense.size))).reshape(
            dense.shape)] = 0.0
        return g.add("sparse_const", attrs=dense_to_sparse_attrs(dense), name=name())

    n = draw(st.integers(1, 4))
    x = g.add("input", attrs={"name": "x"}, type=TensorType((n,), F32), name="x")
    used = set()
    last = x
    for _ in range(draw(st.integers(1, 10))):
        op = draw(st.sampled_from(sorted(set(OPS) - {"input", "const", "sparse_const"})))
        used.add(op)
        k = draw(st.integers(1, 4))
        if op == "matvec":
            last = g.add("matvec", [matrix(k, n), vector(n)], name=name())
        elif op == "sqdist":
            last = g.add("sqdist", [vector(n), const((n, k))], name=name())  # only mat-vecs take sparse ones
        elif op in ("add", "sub", "mul"):
            right = const(()) if draw(st.booleans()) else vector(n)
            last = g.add(op, [vector(n), right], name=name())
        elif op == "scale":
            last = g.add("scale", [vector(n)], {"factor": draw(ATTR_FLOATS)}, name=name())
        elif op in ("exp", "tanh", "tanh_clamp", "sum", "argmax"):
            last = g.add(op, [vector(n)], name=name())
        elif op == "clip":
            lo, hi = sorted(draw(st.lists(ATTR_FLOATS, min_size=2, max_size=2)))
            last = g.add("clip", [vector(n)], {"lo": lo, "hi": hi}, name=name())
        else:  # an op added to the registry later: exercised by other tests
            continue
    if draw(st.booleans()):  # a fixed-point constant and a fixed-point op with a declared type
        bits = draw(st.sampled_from([8, 16, 32]))
        info = np.iinfo(f"int{bits}")
        ints = np.array(draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n)),
                        dtype=f"int{bits}")
        t = TensorType((n,), fixed(bits, draw(st.integers(-8, 20))))
        q = g.add("const", attrs={"value": ints}, type=t, name=name())
        g.add("add", [q, q], type=t, name=name())
    g.set_output(draw(IDENTS), last)
    if draw(st.booleans()):
        g.set_output("xx_" + draw(IDENTS), x)
    return g


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_print_parse_round_trip(g):
    verify(g)  # the generator only builds well-typed graphs
    text = print_graph(g)
    back = parse_graph(text)
    assert back.structurally_equal(g)
    verify(back)
    assert print_graph(back) == text


def test_round_trip_keeps_float32_bits_exactly():
    values = np.array([-0.0, 0.0, 1e-45, np.float32(1e-40), 3.4028235e38, -np.inf, np.inf,
                       np.nextafter(np.float32(1), np.float32(2)), np.float32(0.1)], dtype=np.float32)
    g = Graph("bits")
    c = g.add("const", attrs={"value": values}, name="c")
    g.set_output("c", c)
    back = parse_graph(print_graph(g)).node("c").attrs["value"]
    assert back.dtype == np.float32
    assert back.tobytes() == values.tobytes()  # -0.0 keeps its sign, subnormals survive


def test_structural_equality_sees_a_one_bit_change():
    # The round-trip property is only as strong as this oracle.
    g = Graph("m")
    c = g.add("const", attrs={"value": np.array([1.0, 2.0], dtype=np.float32)}, name="c")
    g.set_output("c", c)
    back = parse_graph(print_graph(g))
    back.node("c").attrs["value"][1] = np.nextafter(np.float32(2.0), np.float32(3.0))
    assert not back.structurally_equal(g)
    back = parse_graph(print_graph(g).replace("output c", "output d"))
    assert not back.structurally_equal(g)


def test_protonn_graph_round_trips():
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(1)
    W = rng.normal(size=(3, 6))
    W[np.abs(W) < 1.0] = 0.0  # sparse enough to be stored CSC
    model = ProtoNNModel(W, rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), 0.7, rng.normal(size=6),
                         rng.uniform(0.5, 2, size=6))
    g = model.lower()
    assert "sparse_const" in {n.op for n in g.nodes()}
    assert parse_graph(print_graph(g)).structurally_equal(g)


def test_elided_constants_are_marked_and_not_parseable():
    g = Graph("m")
    c = g.add("const", attrs={"value": np.arange(20, dtype=np.float32)}, name="c")
    g.set_output("c", c)
    text = print_graph(g, elide_constants=True)
    assert "[...]" in text
    with pytest.raises(IRParseError):
        parse_graph(text)


# ---------------------------------------------------------------- errors with positions

HEAD = 'graph g {\n  %x = input() {name = "x"} : f32[3]\n'


def position_of(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the start of the n-th ``needle`` in ``text``."""
    i = -1
    for _ in range(occurrence):
        i = text.index(needle, i + 1)
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, column


def error_position(text: str) -> tuple[int, int, str]:
    with pytest.raises(IRParseError) as info:
        parse_graph(text, source="model.ir")
    message = str(info.value)
    assert "\n" not in message
    m = re.match(r"model\.ir: line (\d+), column (\d+): (.*)", message)
    assert m, message
    return int(m.group(1)), int(m.group(2)), m.group(3)


@pytest.mark.parametrize("text, needle, occurrence, words", [
    (HEAD + "  %y = exp(%x) ? f32[3]\n  output y = %y\n}\n", "?", 1, "unexpected"),
    (HEAD + "  %y = exp(%z) : f32[3]\n  output y = %y\n}\n", "%z", 1, "%z"),
    (HEAD + "  %y = frob(%x) : f32[3]\n  output y = %y\n}\n", "frob", 1, "frob"),
    (HEAD + "  %x = exp(%x) : f32[3]\n  output y = %x\n}\n", "%x", 2, "%x"),
    (HEAD + "  output y = %nowhere\n}\n", "%nowhere", 1, "nowhere"),
    (HEAD + "  %c = const() {value = array<float32>(2)[1.0]} : f32[2]\n  output y = %c\n}\n",
     "float32", 1, "2"),
    (HEAD + "  %c = const() {value = array<complex64>(1)[1.0]} : f32[1]\n  output y = %c\n}\n",
     "complex64", 1, "complex64"),
    (HEAD + "  %c = const() {value = array<int16>(1)[1]} : fx12.3[1]\n  output y = %c\n}\n",
     "fx12.3", 1, "12"),
    ("graph g {\n\n   %x = = input() : f32[3]\n}\n", "= input", 1, "unexpected"),
])
def test_parse_errors_carry_line_and_column(text, needle, occurrence, words):
    line, column, message = error_position(text)
    assert (line, column) == position_of(text, needle, occurrence)
    assert words in message


def test_truncated_text_is_a_parse_error_with_a_position():
    line, column, _ = error_position(HEAD)
    assert line >= 2 and column >= 1
