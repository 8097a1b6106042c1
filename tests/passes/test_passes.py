"""Passes keep the interpreter's answers, do what they say, and the pass manager verifies,
dumps and reports."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.errors import IRError, TinyccError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.text import parse_graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.passes import PASSES, PIPELINES, PassContext, run_passes, run_pipeline
from tinycc_ml.passes.manager import Pass


@st.composite
def protonn_models(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    D, d, m, L = draw(st.integers(1, 12)), draw(st.integers(1, 6)), draw(st.integers(1, 8)), draw(st.integers(1, 4))
    density = draw(st.sampled_from([1.0, 0.6, 0.3, 0.1]))
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, D)) * (rng.random((d, D)) < density)
    B = rng.normal(size=(d, m))
    Z = rng.normal(size=(L, m))
    mean = rng.normal(size=D) * 3 if draw(st.booleans()) else None
    std = rng.uniform(0.2, 5.0, size=D) if draw(st.booleans()) else None
    # gamma near 1 / typical distance keeps exp(-gamma^2 d^2) away from total underflow
    gamma = draw(st.floats(0.05, 2.0)) / np.sqrt(d)
    X = rng.normal(size=(5, D)) * (std if std is not None else 1.0) + (mean if mean is not None else 0.0)
    return ProtoNNModel(W, B, Z, gamma, mean, std), X


def assert_scores_close(got, want, model=None, X=None):
    """Relative to each row's largest score; float32 constants perturb an exponent e by about
    |e| * 2^-23 per folded product, so far-away prototypes (large |e|) get proportionally more room."""
    scale = np.max(np.abs(want), axis=1, keepdims=True) + 1e-30
    room = 1e-4
    if model is not None:
        xn = (X - (model.mean if model.mean is not None else 0)) / (model.std if model.std is not None else 1)
        e = model.gamma**2 * np.sum(((model.W @ xn.T)[:, :, None] - model.B[:, None, :]) ** 2, axis=0)
        room = 1e-4 * np.maximum(1.0, np.max(e, axis=1, keepdims=True))
    err = np.abs(got - want) / scale
    assert np.all(err < room), f"relative errors {err.max():.3g} beyond {np.min(room):.3g}"


def ops_of(g: Graph) -> list[str]:
    return [n.op for n in g.nodes()]


@settings(max_examples=40, deadline=None)
@given(protonn_models())
def test_float_pipeline_preserves_outputs(case):
    model, X = case
    g = model.lower()
    before = run_float(g, X)
    # float32 storage of parameters vs the float64 numpy reference
    assert_scores_close(before["scores"], model.scores(X))
    after_graph = run_pipeline(g.copy(), "float", PassContext())
    after = run_float(after_graph, X)
    assert_scores_close(after["scores"], before["scores"], model, X)
    # nothing of the normalisation is left to compute on the device
    (x,) = after_graph.inputs()
    assert [after_graph.op(u) for u in after_graph.users(x)] == ["matvec"]
    # (stable_argmax's sub and mul rescale the similarities at run time: no constant operand)
    assert not [n for n in after_graph.order() if after_graph.op(n) in ("mul", "sub")
                and any(after_graph.op(i) in ("const", "sparse_const") for i in after_graph.node(n).inputs)]


@settings(max_examples=40, deadline=None)
@given(protonn_models())
def test_fold_input_affine_alone(case):
    model, X = case
    g = model.lower()
    before = run_float(g, X)
    ctx = PassContext()
    folded = run_passes(g.copy(), ["fold_input_affine", "dce"], ctx)
    assert_scores_close(run_float(folded, X)["scores"], before["scores"], model, X)
    normalised = model.mean is not None or model.std is not None
    assert any("fold_input_affine" in line for line in ctx.log) == normalised
    w_old = g.node("W")
    (x,) = folded.inputs()
    (projection,) = folded.users(x)  # after folding, the projection reads the raw input
    w_new = folded.node(folded.node(projection).inputs[0])
    assert w_new.type.shape == w_old.type.shape
    assert w_new.op == w_old.op  # a sparse W stays sparse ...
    if w_old.op == "sparse_const":  # ... with the same pattern
        np.testing.assert_array_equal(w_new.attrs["row_indices"], w_old.attrs["row_indices"])
        np.testing.assert_array_equal(w_new.attrs["col_ptr"], w_old.attrs["col_ptr"])


def test_fold_input_affine_rewrites_the_weights_exactly():
    W = np.array([[1.0, 2.0], [0.0, -1.0]])
    mean, std = np.array([1.0, -2.0]), np.array([2.0, 4.0])
    model = ProtoNNModel(W, np.zeros((2, 1)), np.ones((1, 1)), 1.0, mean, std)
    g = run_passes(model.lower(), ["fold_input_affine", "dce"], PassContext())
    (mv,) = [n for n in g.nodes() if n.op == "matvec" and g.op(n.inputs[1]) == "input"]
    Wf = g.node(mv.inputs[0]).attrs["value"]
    np.testing.assert_allclose(Wf, [[0.5, 0.5], [0.0, -0.25]])
    (sq,) = [n for n in g.nodes() if n.op == "sqdist"]
    assert sq.inputs[0] == mv.name  # the offset went into the prototypes
    # B' = B + W diag(1/std) mean = 0 + [0.5*1 + 0.5*-2, -0.25*-2]
    np.testing.assert_allclose(g.node(sq.inputs[1]).attrs["value"][:, 0], [-0.5, 0.5])


def small_graph() -> Graph:
    g = Graph("t")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((3,), F32), name="x")
    a = g.add("const", attrs={"value": np.array([1.0, 2.0, 3.0], dtype=np.float32)}, name="a")
    b = g.add("const", attrs={"value": np.array([0.5, 0.25, -1.0], dtype=np.float32)}, name="b")
    ab = g.add("mul", [a, b], name="ab")
    e = g.add("exp", [ab], name="e")
    y = g.add("add", [x, e], name="y")
    g.set_output("scores", y)
    g.set_output("prediction", g.add("argmax", [y], name="pred"))
    return g


def test_constant_fold():
    g = small_graph()
    X = np.array([[0.0, 1.0, -1.0], [3.0, -2.0, 0.5]])
    before = run_float(g, X)
    ctx = PassContext()
    out = run_passes(g, ["constant_fold", "dce"], ctx)
    assert "mul" not in ops_of(out) and "exp" not in ops_of(out)
    y = out.node(out.output("scores"))
    assert y.op == "add" and out.op(y.inputs[1]) == "const"
    np.testing.assert_allclose(out.node(y.inputs[1]).attrs["value"], np.exp([0.5, 0.5, -3.0]), rtol=1e-6)
    np.testing.assert_allclose(run_float(out, X)["scores"], before["scores"], rtol=1e-6)
    assert any("constant_fold" in line for line in ctx.log)


def test_dce_removes_dead_nodes_but_keeps_inputs():
    g = small_graph()
    x = g.inputs()[0]
    g.add("tanh", [g.add("exp", [x], name="dead1")], name="dead2")
    spare = g.add("input", attrs={"name": "spare"}, type=TensorType((2,), F32), name="spare")
    out = run_passes(g, ["dce"], PassContext())
    assert "dead1" not in out and "dead2" not in out
    assert spare in out and x in out
    assert {"a", "b", "ab", "e", "y", "pred"} <= set(out.nx.nodes)


def test_cse_merges_duplicates():
    g = Graph("t")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((3,), F32), name="x")
    c1 = g.add("const", attrs={"value": np.ones(3, dtype=np.float32)}, name="c1")
    c2 = g.add("const", attrs={"value": np.ones(3, dtype=np.float32)}, name="c2")
    c3 = g.add("const", attrs={"value": np.full(3, 2.0, dtype=np.float32)}, name="c3")
    e1 = g.add("exp", [g.add("sub", [x, c1], name="s1")], name="e1")
    e2 = g.add("exp", [g.add("sub", [x, c2], name="s2")], name="e2")
    e3 = g.add("exp", [g.add("sub", [x, c3], name="s3")], name="e3")  # differs: kept
    k1 = g.add("scale", [e1], {"factor": 2.0}, name="k1")
    k2 = g.add("scale", [e1], {"factor": 3.0}, name="k2")  # differs: kept
    total = g.add("add", [g.add("add", [k1, e2], name="t1"), g.add("add", [k2, e3], name="t2")], name="t")
    g.set_output("scores", total)
    X = np.array([[0.1, 0.2, 0.3], [-1.0, 0.0, 1.0]])
    before = run_float(g, X)
    ctx = PassContext()
    out = run_passes(g, ["cse", "dce"], ctx)
    ops = ops_of(out)
    assert ops.count("exp") == 2 and ops.count("sub") == 2 and ops.count("scale") == 2
    assert ops.count("const") == 2
    assert "c2" not in out and "e2" not in out  # merged into the first ones
    np.testing.assert_allclose(run_float(out, X)["scores"], before["scores"], rtol=1e-12)


def test_dump_after_one_pass_and_all():
    model = ProtoNNModel(np.eye(2), np.zeros((2, 3)), np.ones((2, 3)), 1.0, np.zeros(2), np.ones(2))
    dumps: list[str] = []
    run_pipeline(model.lower(), "float", PassContext(dump_after={"cse"}, dump=dumps.append))
    assert len(dumps) == 1
    assert "after cse" in dumps[0] and "graph protonn" in dumps[0] and "%scores" in dumps[0]
    dumps.clear()
    run_pipeline(model.lower(), "float", PassContext(dump_after={"all"}, dump=dumps.append))
    assert len(dumps) == len(PIPELINES["float"])
    for name, text in zip(PIPELINES["float"], dumps, strict=True):
        assert f"after {name}" in text
    # the dump after fold_input_affine shows the rewritten projection, not the normalisation
    after_fold = dumps[0].split("\n", 1)[1]
    assert "%W_folded" in after_fold


def test_dump_of_an_unknown_pass_names_it():
    with pytest.raises((ValueError, TinyccError), match="no_such_pass"):
        run_pipeline(small_graph(), "float", PassContext(dump_after={"no_such_pass"}))


def test_unknown_pipeline_is_named():
    with pytest.raises((ValueError, TinyccError), match="nonsense"):
        run_pipeline(small_graph(), "nonsense", PassContext())


class BreakTypes(Pass):
    """A buggy pass: gives the exp node a type its rule does not give."""

    name = "test_break_types"
    description = "test only"

    def run(self, graph, ctx):
        graph.nx.nodes["e"]["type"] = TensorType((4,), F32)
        return graph


class DropOperand(Pass):
    name = "test_drop_operand"
    description = "test only"

    def run(self, graph, ctx):
        graph.nx.remove_node("ab")  # "e" still names it as its operand
        return graph


@pytest.mark.parametrize("bad", [BreakTypes, DropOperand])
def test_verification_after_each_pass_catches_a_broken_graph(monkeypatch, bad):
    monkeypatch.setitem(PASSES, bad.name, bad)
    with pytest.raises(IRError, match="%e"):
        run_passes(small_graph(), ["cse", bad.name, "dce"], PassContext())
    # without debug verification the broken graph goes through unnoticed
    run_passes(small_graph(), [bad.name], PassContext(debug=False))


def test_passes_work_on_parsed_text():
    text = """graph t {
      %x = input() {name = "x"} : f32[2]
      %a = const() {value = array<float32>(2)[1.0, 2.0]} : f32[2]
      %b = const() {value = array<float32>(2)[1.0, 2.0]} : f32[2]
      %s = add(%a, %b) : f32[2]
      %y = mul(%x, %s) : f32[2]
      %unused = exp(%x) : f32[2]
      output scores = %y
    }"""
    out = run_passes(parse_graph(text), ["cse", "constant_fold", "dce"], PassContext())
    assert sorted(ops_of(out)) == ["const", "input", "mul"]
    np.testing.assert_allclose(run_float(out, [[1.0, -1.0]])["scores"], [[2.0, -4.0]])


@settings(max_examples=30, deadline=None)
@given(protonn_models(), st.sampled_from(["float", "int16", "int8"]))
def test_memory_plan_never_overlaps_live_values(case, precision):
    import tinycc_ml
    from tinycc_ml.passes.plan_memory import arena_key

    model, X = case
    graph = tinycc_ml.compile(model, precision=precision, calibration=np.concatenate([X] * 4)).graph
    order = graph.order()
    position = {n: i for i, n in enumerate(order)}
    outputs = {n for _, n in graph.outputs}
    plan, arenas = graph.analyses.memory_plan, graph.analyses.arenas
    assert graph.output("scores") not in plan  # the caller's buffer holds the scores
    for name, slot in plan.items():
        assert slot.arena == arena_key(graph.type(name).dtype) and slot.length == graph.type(name).size
        assert slot.offset + slot.length <= arenas[slot.arena]

    def live(n):  # from its definition to its last use (outputs: to the end)
        end = len(order) if n in outputs else max((position[u] for u in graph.users(n)), default=position[n])
        return position[n], end

    names = sorted(plan)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            sa, sb = plan[a], plan[b]
            (a0, a1), (b0, b1) = live(a), live(b)
            if sa.arena != sb.arena or a1 < b0 or b1 < a0:
                continue  # different arenas, or never live at once
            assert sa.offset + sa.length <= sb.offset or sb.offset + sb.length <= sa.offset, (a, b)


def test_bias_and_relu_are_fused_into_the_matvec_store_and_share_its_slot():
    """plan_memory's fused chains: the mat-vec's bias (add), and a relu (clip) that changes the scale, are
    computed where the mat-vec stores an element; their last value takes the mat-vec's slot; outputs are
    never fused away (a relu at its input's scale feeding a mat-vec stays: kernels_clip fuses it there). (Bit for
    bit: the random graphs of tests/backends/test_fixed_ops.py and every family on the simulated chips.)"""
    import tinycc_ml
    from tinycc_ml.models.mlp import MLPModel

    rng = np.random.default_rng(0)
    model = MLPModel([rng.normal(size=(6, 4)), rng.normal(size=(3, 6))], [rng.normal(size=6), rng.normal(size=3)],
                     activation="relu")
    X = rng.normal(size=(40, 4))
    result = tinycc_ml.compile(model, precision="int16", calibration=X, search=False, name="m")
    a = result.graph.analyses
    (head, chain), = [(h, c) for h, c in a.fused.items() if result.graph.op(h) == "matvec"][:1]
    assert result.graph.op(chain[0]) == "add" and {result.graph.op(n) for n in chain} <= {"add", "clip"}
    assert a.memory_plan[chain[-1]] == a.memory_plan[head] and not set(chain[:-1]) & set(a.memory_plan)
    outputs = {n for _, n in result.graph.outputs}
    assert not outputs & {m for c in a.fused.values() for m in c}
    assert f"computed in the store of %{head}" in result.files["m.c"]
    assert any("fused" in line for line in a.describe())
