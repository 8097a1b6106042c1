"""The scale search stops where it cannot help: a trial that builds what an earlier trial built is not scored
again (same choice, fewer scoring runs), and a search whose build already makes no more disagreements and no
more score error than the input's own rounding makes does not run at all."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.passes import fixed_pipeline


@pytest.fixture
def scored(monkeypatch):
    """Counts the scoring runs (each runs the integer interpreter on every held-out row)."""
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    calls = []
    real = fixed_pipeline._score
    monkeypatch.setattr(fixed_pipeline, "_score", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_a_trial_that_builds_an_earlier_build_is_not_scored_again_and_the_choice_is_unchanged(scored, monkeypatch):
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    skipping = tinycc_ml.compile(model, precision="int16", calibration=X[:400])
    with_skips = len(scored)
    del scored[:]
    fresh = iter(range(10**9))  # every build looks new: the search as it was, scoring every trial
    real_keys = fixed_pipeline.build_keys
    monkeypatch.setattr(fixed_pipeline, "build_keys", lambda graph, *known: (next(fresh), real_keys(graph, *known)[1]))
    # and every trial run on the interpreter from scratch (no values of earlier trials: run_fixed_keyed)
    monkeypatch.setattr(fixed_pipeline, "run_fixed_keyed", lambda *args: None)
    scoring_all = tinycc_ml.compile(model, precision="int16", calibration=X[:400])
    assert len(scored) > with_skips
    assert skipping.files == scoring_all.files
    assert skipping.report["scale_adjustments"] == scoring_all.report["scale_adjustments"]
    assert skipping.report["held_out_disagreements"] == scoring_all.report["held_out_disagreements"]


def test_trials_keyed_by_their_values_run_as_the_interpreter_runs_them(monkeypatch):
    """run_fixed_keyed (the search's trials reuse the values an earlier trial computed, by a digest of each node
    and its operands) gives run_fixed's outputs on every trial of an MLP's search, and reuses values."""
    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.ir import fixed

    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    X, y = load_digits(return_X_y=True)
    clf = MLPClassifier((16,), max_iter=60, random_state=0).fit(X[:500], y[:500])
    runs, reused = [], []
    real = fixed_pipeline.run_fixed_keyed

    def checked(graph, rows, keys, memo):
        before = set(memo)
        got = real(graph, rows, keys, memo)
        want = fixed.run_fixed(graph, rows)
        assert got.keys() == want.keys()
        for label in want:
            np.testing.assert_array_equal(got[label], want[label])
        runs.append(1)
        reused.append(len(before & set(keys.values())))
        return got

    monkeypatch.setattr(fixed_pipeline, "run_fixed_keyed", checked)
    tinycc_ml.compile(clf, precision="int16", calibration=X[:400])
    assert len(runs) > 2 and sum(reused) > 0


def test_the_fingerprint_tells_builds_apart_by_any_scale():
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    graph = tinycc_ml.compile(model, precision="int16", calibration=X[:400]).graph
    same = graph.copy()
    assert fixed_pipeline.build_fingerprint(same) == fixed_pipeline.build_fingerprint(graph)
    const = next(n for n in same.nodes() if isinstance(n.attrs.get("value"), np.ndarray))
    const.attrs["value"] = const.attrs["value"].copy()
    const.attrs["value"].flat[-1] += 1  # one element past what repr would show
    assert fixed_pipeline.build_fingerprint(same) != fixed_pipeline.build_fingerprint(graph)


def test_a_build_at_the_input_rounding_floor_is_not_searched(scored):
    # scores (x, -x): the integer build computes them exactly from the rounded input, so its only
    # disagreements with the float model are rows within half an input step of the boundary at 0
    model = LinearModel(np.array([[1.0], [-1.0]]), np.zeros(2))
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(-1, 1, 200), rng.uniform(-1e-7, 1e-7, 40)])[:, None]
    out = tinycc_ml.compile(model, precision="int16", calibration=X)
    assert out.report["held_out_disagreements"] > 0  # the near-boundary rows: no scale can resolve them
    assert len(scored) == 1  # the static choice scored once, the search not run
    assert out.report["scale_adjustments"] == {}


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_trials_replayed_from_the_memo_build_what_choosing_anew_builds(monkeypatch, precision):
    """choose_scales.ScaleMemo: every trial of a tanh MLP's search (adjustments that change scales, shifts and
    saturations downstream) builds, with the steps replayed from earlier trials, the graph choose_scales builds
    from scratch: the same nodes in the same order, names, operands, types and attributes; and steps are replayed."""
    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.passes import choose_scales
    from tinycc_ml.passes.manager import PassContext

    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    X, y = load_digits(return_X_y=True)
    clf = MLPClassifier((12, 8), max_iter=60, random_state=0, activation="tanh").fit(X[:500], y[:500])
    real, replays, trials = choose_scales.ScaleMemo.replay, [], []

    def counted(self, *args):
        after = real(self, *args)
        replays.append(after is not None)
        return after

    real_passes = fixed_pipeline.run_passes

    def checked(graph, names, ctx=None):
        got = real_passes(graph, names, ctx)
        if ctx is not None and ctx.options.scale_memo is not None:
            from dataclasses import replace
            fresh = real_passes(graph, names, PassContext(options=replace(ctx.options, scale_memo=None), debug=False))
            assert got.structurally_equal(fresh)
            assert [got.type(n) for n in got.order()] == [fresh.type(n) for n in fresh.order()]
            assert got.analyses.safety == fresh.analyses.safety
            trials.append(1)
        return got

    monkeypatch.setattr(choose_scales.ScaleMemo, "replay", counted)
    monkeypatch.setattr(fixed_pipeline, "run_passes", checked)
    out = tinycc_ml.compile(clf, precision=precision, calibration=X[:400])
    assert len(trials) > 10 and any(replays) and not all(replays)
    assert out.report["scale_adjustments"]  # the search moved scales: the replays met changed operands


def test_the_memo_serves_only_its_own_graph_and_options():
    from tinycc_ml.passes.choose_scales import ScaleMemo

    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    graph = tinycc_ml.compile(model, precision="int16", calibration=X[:400]).graph
    memo = ScaleMemo(graph)
    assert memo.holds(graph, (16, 8, 0))
    assert not memo.holds(graph, (8, 8, 0))  # another precision's builds
    assert not memo.holds(graph.copy(), (16, 8, 0))  # another graph


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_finer_weights_skipped_unbuilt_are_the_current_build_again(monkeypatch, precision):
    """ScaleMemo.weights_at_cap: a finer-weights trial the search skips without building is, built from scratch
    (choose_scales without the memo), the build of the adjustments it started from; and the compile is the one a
    search building every trial makes (same files, choice and held-out disagreements)."""
    from dataclasses import replace

    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.passes.choose_scales import ScaleMemo
    from tinycc_ml.passes.manager import PassContext

    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    X, y = load_digits(return_X_y=True)
    clf = MLPClassifier((32,), max_iter=80, random_state=0).fit(X[:600], y[:600])
    options, skips = [], []
    real_passes, real_cap = fixed_pipeline.run_passes, ScaleMemo.weights_at_cap

    def recorded(graph, names, ctx=None):
        if ctx is not None and ctx.options.scale_memo is not None:
            options.append(ctx.options)
        return real_passes(graph, names, ctx)

    def fresh(graph, adjust):
        ctx = PassContext(options=replace(options[-1], scale_adjust=adjust, scale_memo=None), debug=False)
        return fixed_pipeline.build_fingerprint(real_passes(graph, fixed_pipeline.FIXED_PASSES[:3], ctx))

    def checked(self, build, name, adjust):
        capped = real_cap(self, build, name, adjust)
        if capped:
            here = fresh(self.graph, adjust)
            for delta in fixed_pipeline.WEIGHT_ADJUSTMENTS:
                finer = {**adjust, f"{name}.weights": adjust.get(f"{name}.weights", 0) + delta}
                assert fresh(self.graph, finer) == here
            skips.append(name)
        return capped

    monkeypatch.setattr(fixed_pipeline, "run_passes", recorded)
    monkeypatch.setattr(ScaleMemo, "weights_at_cap", checked)
    skipping = tinycc_ml.compile(clf, precision=precision, calibration=X[:400])
    monkeypatch.setattr(ScaleMemo, "weights_at_cap", lambda self, build, name, adjust: False)
    building = tinycc_ml.compile(clf, precision=precision, calibration=X[:400])
    if precision == "int16":  # 16-bit weights meet the accumulator's bound
        assert skips
    assert skipping.files == building.files
    for key in ("scale_adjustments", "held_out_disagreements", "agreement_with_float"):
        assert skipping.report[key] == building.report[key]
