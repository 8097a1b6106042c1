"""Every fixed-point op, compiled to host C, agrees bit for bit with the fixed-point interpreter,
and tracks the float interpreter: random small graphs mixing the ops (hypothesis)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.base import Model


class GraphModel(Model):
    """A model that is just a float graph (for exercising the compiler on arbitrary graphs)."""

    family = "graph_under_test"

    def __init__(self, graph: Graph):
        self.graph = graph

    @property
    def input_dim(self):
        return self.graph.type(self.graph.inputs()[0]).shape[0]

    def lower(self):
        return self.graph.copy()

    def describe(self):
        return "test graph"


def random_ensemble(rng, n_features: int, L: int) -> dict:
    """2-4 random complete trees of depth 1-3 with thresholds drawn like the values they test."""
    vector = rng.random() < 0.5
    feature, threshold, value, roots = [], [], [], []
    for _ in range(int(rng.integers(2, 5))):
        depth = int(rng.integers(1, 4))
        roots.append(len(feature))
        n_inner, n_leaves = 2**depth - 1, 2**depth
        feature += rng.integers(0, n_features, n_inner).tolist() + [-1] * n_leaves
        threshold += rng.normal(size=n_inner).tolist() + [0.0] * n_leaves
        value += [[0.0] * (L if vector else 1)] * n_inner + rng.normal(size=(n_leaves, L if vector else 1)).tolist()
    left, right = [], []
    for r_i, r in enumerate(roots):
        end = roots[r_i + 1] if r_i + 1 < len(roots) else len(feature)
        n_inner = (end - r - 1) // 2
        for i in range(end - r):  # heap order inside the tree: children of i at 2i+1, 2i+2
            inner = i < n_inner
            left.append(r + 2 * i + 1 if inner else -1)
            right.append(r + 2 * i + 2 if inner else -1)
    n_trees = len(roots)
    sides = rng.choice(["absent", "left", "right", "mixed"])  # where a missing value (NaN) goes
    dl = {} if sides == "absent" else {"default_left": (
        np.full(len(feature), int(sides == "left")) if sides != "mixed" else rng.integers(0, 2, len(feature))
    ).astype(np.int8)}
    return {**dl, "feature": np.array(feature, dtype=np.int32), "threshold": np.array(threshold, dtype=np.float32),
            "left": np.array(left, dtype=np.int32), "right": np.array(right, dtype=np.int32),
            "value": np.array(value, dtype=np.float32), "roots": np.array(roots, dtype=np.int32),
            "tree_output": np.full(n_trees, -1, dtype=np.int32) if vector
            else rng.integers(0, L, n_trees).astype(np.int32),
            "n_outputs": L, "compare": "le" if rng.random() < 0.5 else "lt"}


def build_graph(rng, D, H, L, ops, tanh_scale):
    g = Graph("g")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((D,), F32), name="x")
    w1 = g.add("const", attrs={"value": rng.normal(size=(H, D)).astype(np.float32)}, name="w1")
    h = g.add("matvec", [w1, x], name="h")
    if "tanh" in ops:
        h = g.add("tanh", [g.add("scale", [h], {"factor": tanh_scale}, name="pre")], name="t")
    if "mul" in ops:
        h2 = g.add("matvec", [g.add("const", attrs={"value": rng.normal(size=(H, D)).astype(np.float32)}), x])
        h = g.add("mul", [h, h2], name="prod")
    if "add" in ops:
        b = g.add("const", attrs={"value": rng.normal(size=H).astype(np.float32)}, name="bias")
        h = g.add("add", [h, b], name="biased")
    if "sub" in ops:
        h = g.add("sub", [h, g.add("sum", [h], name="total")], name="centred")
    if "clip" in ops:
        h = g.add("clip", [h], {"lo": -1.5, "hi": 2.0}, name="clipped")
    if "forest" in ops:  # a tree ensemble over the hidden layer (vector leaves) or the input (scalar leaves)
        src = h if rng.random() < 0.5 else x
        scores = g.add("tree_ensemble", [src], random_ensemble(rng, g.type(src).shape[0], L), name="scores")
    elif "tree" in ops:  # a depth-2 Bonsai-style walk: only the nodes on the path are evaluated
        depth, n_nodes = 2, 7
        stack = {k: g.add("const", attrs={"value": rng.normal(size=s).astype(np.float32)}, name=k)
                 for k, s in (("W3", (n_nodes, L, H)), ("V3", (n_nodes, L, H)), ("T3", (3, 1, H)))}
        from tinycc_ml.ir.types import IDX

        k = g.add("const", attrs={"value": np.array(0, dtype=np.int32)}, type=TensorType((), IDX), name="root")
        total = None
        for level in range(depth + 1):
            w = g.add("matvec_at", [stack["W3"], k, h], name=f"w{level}")
            v = g.add("tanh", [g.add("matvec_at", [stack["V3"], k, h], name=f"v{level}")], name=f"tv{level}")
            part = g.add("mul", [w, v], name=f"part{level}")
            total = part if total is None else g.add("add", [total, part], name=f"sum{level}")
            if level < depth:
                k = g.add("branch", [k, g.add("matvec_at", [stack["T3"], k, h], name=f"theta{level}")],
                          name=f"node{level + 1}")
        scores = total
    elif "nearest" in ops:  # reference points sorted by label: per-class nearest, or a k-vote
        m = 3 * L
        P = rng.normal(size=(H, m)).astype(np.float32)
        d = g.add("sqdist", [h, g.add("const", attrs={"value": P}, name="P")], name="d")
        labels = np.repeat(np.arange(L), 3).astype(np.int32)
        if m >= 5 and rng.random() < 0.5:
            scores = g.add("kvote", [d], {"k": 5, "n_classes": L, "labels": labels}, name="scores")
        else:
            per_class = g.add("segment_min", [d], {"offsets": list(range(0, m + 1, 3))}, name="per_class")
            scores = g.add("scale", [per_class], {"factor": -1.0}, name="scores")
    elif {"ovo", "ovr"} & ops:  # one-vs-one votes of pair decisions (kernel SVMs)
        pairs = g.add("matvec", [g.add("const", attrs={"value": rng.normal(size=(L * (L - 1) // 2, H))
                                                       .astype(np.float32)}, name="pair_w"), h], name="pairs")
        # scikit-learn's one-vs-rest decision of them (three classes or more), else the votes
        scores = g.add("ovr_decision" if "ovr" in ops and L > 2 else "ovo_votes", [pairs], {"n_classes": L},
                       name="scores")
    elif "sqdist" in ops:
        P = rng.normal(size=(H, L)).astype(np.float32)
        d = g.add("sqdist", [h, g.add("const", attrs={"value": P}, name="P")], name="d")
        scores = g.add("scale", [d], {"factor": -1.0}, name="scores")
    else:
        w2 = g.add("const", attrs={"value": rng.normal(size=(L, H)).astype(np.float32)}, name="w2")
        scores = g.add("matvec", [w2, h], name="scores")
    g.set_output("scores", scores)
    g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
    return g


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    D=st.integers(1, 12), H=st.integers(1, 8), L=st.integers(2, 5),
    ops=st.sets(st.sampled_from(["tanh", "mul", "add", "sub", "clip", "sqdist", "tree", "nearest", "ovo",
                                 "ovr", "forest"])),
    tanh_mode=st.sampled_from(["clamp", "table", "auto"]),
    tanh_scale=st.sampled_from([0.1, 1.0, 3.0]),
    precision=st.sampled_from(["int16", "int8"]),
)
def test_random_graphs_bit_exact_and_close_to_float(seed, D, H, L, ops, tanh_mode, tanh_scale, precision):
    check_random_graph(seed, D, H, L, ops, tanh_mode, tanh_scale, precision)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_the_one_vs_rest_decision_is_bit_exact(seed, precision):
    check_random_graph(seed, 4 + seed, 3 + seed % 3, 3 + seed % 3, {"ovr"}, "auto", 1.0, precision)


def check_random_graph(seed, D, H, L, ops, tanh_mode, tanh_scale, precision):
    rng = np.random.default_rng(seed)
    graph = build_graph(rng, D, H, L, ops, tanh_scale)
    X = rng.normal(size=(64, D))
    result = tinycc_ml.compile(GraphModel(graph), precision=precision, calibration=X, tanh=tanh_mode, search=False)
    missing = X[:8].copy()
    missing[rng.random(missing.shape) < 0.3] = np.nan  # the missing code reaches every op's C
    rows = np.concatenate([X, 4 * X, missing])
    Xq = quantise(rows, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, expected["scores"])
    np.testing.assert_array_equal(predictions, expected["prediction"])
    if (tanh_mode == "clamp" and {"tanh", "tree"} & ops) or ({"nearest", "ovo", "ovr"} & ops and "tree" not in ops):
        # the clamp is a different function from tanh by design; nearest-point scores saturate
        # for far classes on purpose (only the near ones decide): no closeness to claim
        return
    # on the calibration rows themselves the integer scores follow the float ones
    s_scores = result.graph.type(result.graph.output("scores")).dtype.scale
    float_scores = run_float(graph, X)["scores"]
    fixed_scores = expected["scores"][: len(X)] * 2.0**-s_scores
    spread = np.max(np.abs(float_scores)) + 1e-9
    assert np.median(np.abs(fixed_scores - float_scores)) / spread < 0.05


def test_tanh_table_is_more_accurate_than_the_clamp():
    rng = np.random.default_rng(0)
    graph = build_graph(rng, 6, 4, 3, {"tanh"}, 1.0)
    X = rng.normal(size=(200, 6))
    report = tinycc_ml.compile(GraphModel(graph), precision="int16", calibration=X, tanh="auto").report
    (info,) = report["tanh"]
    assert info["form"] == "table"
    assert info["table_max_abs_error"] < info["clamp_max_abs_error"]
    assert info["table_max_abs_error"] <= 2.0**-9
    assert info["table_bytes"] > 0
    clamp = tinycc_ml.compile(GraphModel(graph), precision="int16", calibration=X, tanh="clamp").report
    assert clamp["tanh"][0]["form"] == "clamp" and clamp["tanh"][0]["table_bytes"] == 0


@pytest.mark.parametrize("seed, head", [(seed, "nearest") for seed in range(6)] + [(0, "ovo"), (1, "ovo")])
def test_nearest_point_heads_are_bit_exact_and_agree_with_float(seed, head):
    rng = np.random.default_rng(seed)
    graph = build_graph(rng, 8, 5, 4, {head}, 1.0)
    X = rng.normal(size=(300, 8))
    result = tinycc_ml.compile(GraphModel(graph), precision="int16", calibration=X)
    Xq = quantise(X, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)
    scores, predictions = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, expected["scores"])
    np.testing.assert_array_equal(predictions, expected["prediction"])
    assert np.mean(predictions == run_float(graph, X)["prediction"]) >= 0.97


@pytest.mark.parametrize("sim_target", ["host", "avr", "cortex-m0"], indirect=True)
@pytest.mark.parametrize("lo, hi", [(33.0, 40.0), (-40.0, -33.0)])
def test_clip_bound_beyond_its_operands_range_binds_on_every_target(sim_target, lo, hi, tmp_path):
    from tinycc_ml.codegen.backend import get_backend

    # h = W x stays within about +-4 on these rows, so the clamp's result is one bound everywhere
    rng = np.random.default_rng(3)
    g = Graph("g")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((4,), F32), name="x")
    h = g.add("matvec", [g.add("const", attrs={"value": rng.uniform(-0.5, 0.5, (3, 4)).astype(np.float32)}), x],
              name="h")
    c = g.add("clip", [h], {"lo": lo, "hi": hi}, name="far_clip")
    scores = g.add("sub", [c, h], name="scores")
    g.set_output("scores", scores)
    g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
    X = rng.uniform(-1, 1, (40, 4))
    result = tinycc_ml.compile(GraphModel(g), target=sim_target, precision="int16", calibration=X,
                               out_dir=tmp_path, name="far")
    Xq = quantise(X, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)["scores"]
    run = get_backend(sim_target).simulate(tmp_path, result.output, X)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64), expected)
    s = result.graph.type(result.graph.output("scores")).dtype.scale
    float_scores = run_float(g, X)["scores"]
    assert np.max(np.abs(expected * 2.0**-s - float_scores)) < 0.01 * (hi if lo > 0 else -lo)


@pytest.mark.parametrize("sim_target", ["host", "avr", "cortex-m0"], indirect=True)
def test_output_finer_than_its_accumulator_never_overflows_int32(sim_target, tmp_path):
    from tinycc_ml.codegen.backend import get_backend

    # calibration rows have x0 == x1, so the first row's output is 0 there and its calibrated range
    # asks for the finest scale, far finer than its accumulator's: a left shift in C. Rows with
    # x0 != x1 make the accumulator large; shifted left in int32 it wrapped (scores of the wrong sign).
    g = Graph("g")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((2,), F32), name="x")
    W = np.array([[1000.0, -1000.0], [1e-3, 1e-3]], np.float32)
    h = g.add("matvec", [g.add("const", attrs={"value": W}, name="W"), x], name="h")
    g.set_output("scores", h)
    g.set_output("prediction", g.add("argmax", [h], name="prediction"))
    t = np.linspace(0, 1, 64)
    result = tinycc_ml.compile(GraphModel(g), target=sim_target, precision="int16",
                               calibration=np.stack([t, t], axis=1), search=False, out_dir=tmp_path, name="shl")
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.25], [0.3, 0.3]])
    expected = run_fixed(result.graph, quantise(X, result.output.input_scale, 16))["scores"]
    assert expected[0, 0] > 0 > expected[1, 0]  # 1000 (x0 - x1): saturated, with its sign
    run = get_backend(sim_target).simulate(tmp_path, result.output, X)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64), expected)


@pytest.mark.parametrize("sim_target", ["avr", "cortex-m0"], indirect=True)
def test_the_one_vs_rest_decision_of_an_svc_is_bit_exact_on_the_chips(sim_target, tmp_path):
    """scikit-learn's decision_function_shape='ovr' (its default) in int16: int64 sums and one rounded division
    per class, on the chips as in the interpreter."""
    from sklearn.datasets import load_iris
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from tinycc_ml.codegen.backend import get_backend

    X, y = load_iris(return_X_y=True)
    est = make_pipeline(StandardScaler(), SVC(C=0.5)).fit(X, y)
    result = tinycc_ml.compile(est, target=sim_target, precision="int16", calibration=X, out_dir=tmp_path,
                               name="ovr")
    assert any(result.graph.op(n) == "ovr_decision" for n in result.graph.order())
    rows = X[::5]
    expected = run_fixed(result.graph, quantise(rows, result.output.input_scale, 16))
    run = get_backend(sim_target).simulate(tmp_path, result.output, rows)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64), expected["scores"])
    s = result.graph.type(result.graph.output("scores")).dtype.scale
    np.testing.assert_allclose(expected["scores"] * 2.0**-s, est.decision_function(rows), atol=0.05)
