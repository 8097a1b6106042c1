"""Lowering a float graph to integer code: the fixed-point pipeline and the scale search.

    1 prepare_input:  float passes -> input_scales -> input clamp
    2 analyse_ranges: range_analysis
    3 search_scales:  choose_scales + tables, scored on held-out rows, per-value adjustments
    4 FIXED_PASSES:   choose_scales -> exp_table -> tanh_approx -> dce -> plan_memory
    5 fixed_report, 6 fixed_description: what the compile report and the header say

The search (better than SeeDot's single global max-scale knob): starting from the calibrated
choice, coordinate descent over per-value scale adjustments (one bit coarser or finer at a
time), scored on held-out calibration rows by disagreement with the float model's
predictions, ties broken by the mean absolute score error (regression, graph.analyses.task: on every
affordable calibration row, counting as wrong a row whose value is off by more than 1% of the
value's spread, e.g. a saturated intermediate). Held-out rows that are reference points of the model
(kNN calibrated on its own training set) are left out: they tell no scale apart; without at least
MIN_SEARCH_ROWS others the static choice stands. It stops where it cannot help: a trial whose build equals
an earlier one (an adjustment a clamp or a later choice undoes) is not scored again, and a build with no more
disagreements and score error than the float model's own on the input rounded to its grid (the one scale
the search does not adjust) ends it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tinycc_ml.cache import load_result, source_fingerprint, store_result
from tinycc_ml.ir.fixed import FixedOverflow, quantise, run_fixed, run_fixed_keyed, run_fixed_once
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import evaluate_batch, row_chunks, run_float, work_per_row
from tinycc_ml.ir.text import print_graph
from tinycc_ml.passes import choose_scales, exp_table, input_scales, range_analysis, tanh_approx  # noqa: F401
from tinycc_ml.passes.choose_scales import ScaleMemo
from tinycc_ml.passes.manager import PassContext, run_passes
from tinycc_ml.progress import Progress

FLOAT_PREP = ["fold_input_affine", "constant_fold", "cse", "dce"]
FIXED_PASSES = ["choose_scales", "exp_table", "tanh_approx", "fuse_nearest", "dce", "plan_memory"]
SEARCHED_PASSES = 3  # the FIXED_PASSES a scale search's trial runs (what a scale changes); the rest run once
SEARCH_ADJUSTMENTS = (-1, 1, -2)
WEIGHT_ADJUSTMENTS = (1, 2, 3, 4)  # finer weight scales: saturate outliers, resolve the bulk
FLOAT32_COINCIDENT = 1e-12  # squared distance per squared norm: float32 rounding of a copy (2^-48 a term)
MIN_SEARCH_ROWS = 8  # fewer held-out rows than this cannot rank adjustments: keep the static choice
SEARCH_ELEMENTS = 2**26  # products per scoring run of the search: keeps big models (kNN) quick
REGRESSION_TOLERANCE = 0.01  # of the value's calibrated spread: a larger error counts as a wrong row
PROFILE_ELEMENTS = 2**29  # products or distance terms per pass over the calibration (range profile, report)
MIN_PROFILE_ROWS = 1000  # rows always profiled (all of them when there are fewer)
# the search's whole work, in products or distance terms scored plus TRIAL_NODE_WORK per node rebuilt per trial:
# a wide graph (GaussianNB over 784 features: ~200 nodes, ~400 trials a round) is searched for a bounded time;
# the graphs of the benchmarks and tests stay below it (their choice is unchanged)
SEARCH_TOTAL_WORK = 2**33
TRIAL_NODE_WORK = 2**17  # a node's share of one trial's rebuild (the passes' Python), in products' time
MIN_SEARCH_TRIALS = 16
KEPT_VALUE_BYTES = 1 << 27  # the search's values kept across trials (run_fixed_keyed), at most
SEARCH_CACHE = "scale-search"  # cache kind: the search's choice and the report's agreement, per input

log = logging.getLogger(__name__)


def insert_input_clamp(graph: Graph, lo: np.ndarray, hi: np.ndarray, per_feature: bool) -> Graph:
    """Clamp the input to its calibrated range, so that everything after it is proven for it:
    one range for all features (two compares against constants, the default) or one per feature
    (tighter proofs, but two bounds read from flash per feature)."""
    (x,) = graph.inputs()
    if all(graph.op(u) == "tree_ensemble" for u in graph.users(x)):
        return graph  # trees only compare the input: nothing to prove, and a clamp would change decisions
    bounds = {"lo": lo.astype(np.float64), "hi": hi.astype(np.float64)}
    if not per_feature or (np.all(lo == lo[0]) and np.all(hi == hi[0])):
        bounds = {"lo": float(np.min(lo)), "hi": float(np.max(hi))}
    clamp = graph.add("clip", [x], bounds, name="x_clamped")
    graph.replace_uses(x, clamp, keep=(clamp,))
    return graph


def _score(fixed_graph: Graph, X: np.ndarray, float_out: dict, regression: bool = False,
           quantised: dict | None = None, keyed: tuple[dict, dict] | None = None) -> tuple[int, float]:
    """``quantised``: the rows X quantised at each input scale so far (the search's trials mostly share one);
    ``keyed``: (the build's node keys, the values of earlier trials by key) for run_fixed_keyed."""
    # X is already x * 2^s_k (see input_scales): only the input's own scale remains
    s_in = fixed_graph.type(fixed_graph.inputs()[0]).dtype.scale
    key = int(s_in) if quantised is not None and np.ndim(s_in) == 0 else None
    if key is None or key not in quantised:
        rows = quantise(X, s_in, 16)
        if key is not None:
            quantised[key] = rows
    else:
        rows = quantised[key]
    try:
        got = run_fixed_keyed(fixed_graph, rows, *keyed) if keyed is not None and key is not None else None
        if got is None:
            got = run_fixed(fixed_graph, rows)
    except FixedOverflow:
        return len(X) + 1, float("inf")
    s_scores = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    error = np.abs(got["scores"] * 2.0**-s_scores - float_out["scores"])
    if regression:  # the value is the prediction: rows off by over 1% of its spread (a saturation) count first
        return int(np.sum(error > value_tolerance(float_out["scores"]))), float(np.mean(error))
    disagree = int(np.sum(got["prediction"] != float_out["prediction"]))
    return disagree, float(np.mean(error))


@dataclass
class ChosenBuild:
    """The scale search's build of its choice (the first SEARCHED_PASSES of FIXED_PASSES, run in ``ctx``): the final
    build goes on from it instead of choosing every scale again."""

    graph: Graph
    ctx: PassContext


@dataclass
class PreparedInput:
    """The float graph with its input clamp, and the calibration rows in the units it takes."""

    graph: Graph
    calibration: np.ndarray  # x * 2^s_k per feature k
    feature_scales: np.ndarray  # s_k
    lo: np.ndarray  # the clamp, in those units
    hi: np.ndarray
    per_feature: bool


def prepare_input(graph: Graph, calibration: np.ndarray, ctx: PassContext) -> PreparedInput:
    """Stage 1: float clean-up, per-feature input scales absorbed into the model, the input clamp."""
    opts = ctx.options
    graph = run_passes(graph, FLOAT_PREP, ctx)
    opts.calibration = calibration
    graph = run_passes(graph, ["input_scales"], ctx)
    feature_scales = graph.analyses.input_scale
    calibration = calibration * 2.0**feature_scales  # the rewritten graph takes x * 2^s_k
    if opts.input_range is not None:  # declared by the user, in real units
        lo, hi = (np.broadcast_to(np.asarray(v, dtype=np.float64), feature_scales.shape) * 2.0**feature_scales
                  for v in opts.input_range)
    else:
        lo, hi = calibration.min(axis=0), calibration.max(axis=0)
    lo, hi = np.floor(lo), np.ceil(hi)  # whole units of the integer input
    per_feature = opts.input_clamp == "per_feature"
    graph = insert_input_clamp(graph, lo, hi, per_feature)
    if not per_feature:
        lo, hi = np.full_like(lo, np.min(lo)), np.full_like(hi, np.max(hi))
    return PreparedInput(graph, calibration, feature_scales, lo, hi, per_feature)


def profile_rows(graph: Graph, calibration: np.ndarray) -> np.ndarray:
    """The calibration rows the range profile, the search and the report evaluate: all of them, or a seeded
    random subset when the model is big and the rows are many (kNN over its own training set would cost
    reference rows x calibration rows distances per pass); at least MIN_PROFILE_ROWS."""
    limit = max(MIN_PROFILE_ROWS, PROFILE_ELEMENTS // work_per_row(graph))
    if len(calibration) <= limit:
        return calibration
    return calibration[np.sort(np.random.default_rng(0).choice(len(calibration), limit, replace=False))]


def analyse_ranges(prep: PreparedInput, ctx: PassContext) -> Graph:
    """Stage 2: calibrated and proven ranges of every value (graph.analyses.ranges)."""
    ctx.options.calibration = prep.calibration
    ctx.options.input_bounds = (prep.lo, prep.hi)
    return run_passes(prep.graph, ["range_analysis"], ctx)


def reference_rows(graph: Graph, X: np.ndarray) -> np.ndarray:
    """Rows of X that coincide with a constant reference point of some sqdist (to float32 rounding,
    in which constants are stored)."""
    found = np.zeros(len(X), dtype=bool)
    distances = [n for n in graph.order()
                 if graph.op(n) == "sqdist" and graph.op(graph.node(n).inputs[1]) in ("const", "sparse_const")]
    if not distances or not len(X):
        return found
    for rows in row_chunks(graph, len(X)):
        values = evaluate_batch(graph, X[rows])
        for d in distances:
            point = values[graph.node(d).inputs[0]]
            found[rows] |= np.min(values[d], axis=1) <= FLOAT32_COINCIDENT * np.sum(point * point, axis=1)
    return found


def search_work_per_row(graph: Graph) -> int:
    """Products and distance terms of one row through every mat-vec and distance of ``graph``."""
    return sum(max(graph.type(i).size for i in graph.node(m).inputs)
               for m in graph.order() if graph.op(m) in ("matvec", "matvec_at", "sqdist", "sqdist_kvote"))


def max_search_trials(graph: Graph, rows: int) -> int:
    """Trials the search may run on ``rows`` held-out rows: SEARCH_TOTAL_WORK over one trial's work (scoring
    every row, rebuilding every node), at least MIN_SEARCH_TRIALS."""
    trial = rows * search_work_per_row(graph) + TRIAL_NODE_WORK * len(graph.order())
    return max(MIN_SEARCH_TRIALS, SEARCH_TOTAL_WORK // max(1, trial))


def search_scales(graph: Graph, calibration: np.ndarray, ctx: PassContext,
                  memo: ScaleMemo | None = None) -> tuple[dict[str, int], tuple[int, float], ChosenBuild | None]:
    """Stage 3: per-value scale adjustments that reduce disagreement with the float model on
    held-out calibration rows (a quarter of them, at most 1000, fewer for big models); their score, and the build of
    them (None where no build was made). ``memo``: the steps of choose_scales kept for ``graph`` so far
    (lower_to_fixed's, shared with its other builds of it)."""
    rng = np.random.default_rng(0)
    affordable = max(64, SEARCH_ELEMENTS // work_per_row(graph))
    # regression: no argmax absorbs a saturated value, so every affordable row is checked, not a quarter
    regression = graph.analyses.task_kind == "regression"
    share = len(calibration) if regression else max(8, len(calibration) // 4)
    held = calibration[rng.permutation(len(calibration))[: min(1000, affordable, share)]]
    # a row that is one of the model's reference points (kNN calibrated on its own training set) is
    # nearest to itself at any scale: it cannot tell scales apart, and the score-error tie-break
    # would then favour coarse distances that flush the near neighbours of real inputs together
    held = held[~reference_rows(graph, held)]
    if len(held) < MIN_SEARCH_ROWS:
        log.info("scale search: %d held-out row(s) that are not reference points, keeping the static scales",
                 len(held))
        return {}, (0, 0.0), None
    float_out = run_float(graph, held)

    # the trials' steps of choose_scales that a change leaves alike
    memo = memo if memo is not None else ScaleMemo(graph)
    own_digests: dict = {}  # build_keys: the nodes' own digests, shared by the trials

    def build(adjust: dict) -> tuple[Graph, PassContext]:
        trial = PassContext(options=replace(ctx.options, scale_adjust=adjust, scale_memo=memo), debug=False)
        # no copy of the graph: choose_scales (the first) reads it and builds a new one, which the others rewrite
        return run_passes(graph, FIXED_PASSES[:SEARCHED_PASSES], trial), trial

    held_quantised: dict[int, np.ndarray] = {}
    values_by_key: dict[bytes, np.ndarray] = {}  # the trials' values on the held-out rows (run_fixed_keyed)

    kept = [0, 0]  # values_by_key's entries counted so far, and their bytes

    def score(fixed_graph: Graph, keys: dict[str, bytes]) -> tuple[int, float]:
        fresh = len(values_by_key) - kept[0]  # the entries the runs since added (a dict keeps insertion order)
        kept[:] = [len(values_by_key),
                   kept[1] + sum(np.asarray(v).nbytes for v in itertools.islice(reversed(values_by_key.values()),
                                                                                 fresh))]
        if kept[1] > KEPT_VALUE_BYTES:
            values_by_key.clear()  # a wide graph's values (kNN's distances): kept a few trials at most
            kept[:] = [0, 0]
        return _score(fixed_graph, held, float_out, regression, held_quantised, (keys, values_by_key))

    adjust: dict[str, int] = {}
    chosen = ChosenBuild(*build(adjust))  # the build of ``adjust``
    base = chosen.graph
    base_fingerprint, base_keys = build_keys(base, own_digests)
    best = score(base, base_keys)
    if not ctx.options.search or best == (0, 0.0):
        return adjust, best, chosen  # not asked for, or nothing to gain: every row agrees with no score error
    floor = rounding_floor(graph, base, held, float_out, regression)
    if at_floor(best, floor):
        log.info("scale search: nothing to gain (%d disagreement(s), all from the input's rounding)", best[0])
        return adjust, best, chosen
    seen = {base_fingerprint}  # builds already scored: an adjustment that changes nothing is not rescored
    # regression: only coarser activation scales, which keep the headroom choose_scales leaves
    deltas = tuple(d for d in SEARCH_ADJUSTMENTS if d < 0) if regression else SEARCH_ADJUSTMENTS
    candidates = [(n, deltas) for n in graph.order()
                  if graph.type(n).dtype.is_float and graph.op(n) not in ("const", "sparse_const", "clip", "input")]
    candidates += [(f"{n}.weights", WEIGHT_ADJUSTMENTS) for n in graph.order() if graph.op(n) == "matvec"]
    trials = min(2 * sum(len(deltas) for _, deltas in candidates), max_search_trials(graph, len(held)))
    done = skipped = 0
    with Progress("scale search", total=trials, unit="trials") as bar:
        for _round in range(2):
            improved = False
            for name, deltas in candidates:
                for delta in deltas[: max(0, trials - done)]:
                    done += 1
                    trial_adjust = {**adjust, name: adjust.get(name, 0) + delta}
                    if delta > 0 and name.endswith(".weights") and \
                            memo.weights_at_cap(chosen.graph, name.removesuffix(".weights"), adjust):
                        # finer weights that the accumulator's bound lowers back: the current build again (seen)
                        bar.advance(note=f"round {_round + 1}, {best[0]} disagreements")
                        skipped += 1
                        continue
                    trial, trial_ctx = build(trial_adjust)
                    bar.advance(note=f"round {_round + 1}, {best[0]} disagreements")
                    fingerprint, keys = build_keys(trial, own_digests)
                    if fingerprint in seen:
                        skipped += 1
                        continue
                    seen.add(fingerprint)
                    trial_score = score(trial, keys)
                    if trial_score < best:
                        best, adjust, improved = trial_score, trial_adjust, True
                        chosen = ChosenBuild(trial, trial_ctx)
                        break
                if at_floor(best, floor):
                    break
            if not improved or done >= trials or at_floor(best, floor):
                break
    if done >= trials < 2 * sum(len(deltas) for _, deltas in candidates):
        log.info("scale search: stopped after %d trials (the work cap of a graph this wide)", done)
    if at_floor(best, floor):
        log.info("scale search: stopped at the input's rounding floor (%d disagreement(s))", best[0])
    log.info("scale search: %d adjustment(s), %d held-out disagreement(s); %d of %d trials built what an earlier "
             "trial built (not scored)", len(adjust), best[0], skipped, done)
    return adjust, best, chosen


def rounding_floor(graph: Graph, base: Graph, X: np.ndarray, float_out: dict, regression: bool) -> tuple[int, float]:
    """What no scale adjustment can remove: the float model's own disagreements and score error on the held-out
    rows rounded to the integer input's grid (the input's scale is the one value the search does not adjust)."""
    s_in = base.type(base.inputs()[0]).dtype.scale
    seen = quantise(X, s_in, 16) * 2.0**-s_in
    if np.array_equal(seen, X):  # the input's grid holds every row (whole-number pixels): nothing is lost
        return 0, 0.0
    rounded = run_float(graph, seen)
    error = np.abs(rounded["scores"] - float_out["scores"])
    if regression:
        return int(np.sum(error > value_tolerance(float_out["scores"]))), float(np.mean(error))
    return int(np.sum(rounded["prediction"] != float_out["prediction"])), float(np.mean(error))


def at_floor(best: tuple[int, float], floor: tuple[int, float]) -> bool:
    """The search cannot help: no more disagreements, and no more score error, than the input's rounding makes."""
    return best[0] <= floor[0] and best[1] <= floor[1]


def build_fingerprint(fixed_graph: Graph) -> str:
    """Every node's op, inputs, type and attributes: equal fingerprints, equal builds (and equal scores)."""
    return build_keys(fixed_graph)[0]


def build_keys(fixed_graph: Graph, known: dict | None = None) -> tuple[str, dict[str, bytes]]:
    """(build_fingerprint, each node's key): a digest of the node's own digest (its name, op, type and attributes)
    and its operands' keys, so equal keys are equal values on equal rows (run_fixed_keyed); the fingerprint digests
    every node's key and the outputs. ``known``: own digests kept across calls (the scale search's trials share most
    nodes and their attribute objects: ScaleMemo), by the node's name, op, type and its attributes' identities (the
    objects are kept with the digest, so an identity is never another object's)."""
    keys: dict[str, bytes] = {}
    whole = hashlib.sha256()
    data = fixed_graph.nx._node  # each node's op, inputs, attrs and type (Graph.node's fields), read directly
    for name in fixed_graph.order():
        d = data[name]
        op, inputs, node_type = d["op"], d["inputs"], d["type"]
        items = sorted(d["attrs"].items())
        ident = (name, op, node_type, len(inputs), tuple((k, id(v)) for k, v in items))
        kept = known.get(ident) if known is not None else None
        if kept is None:
            own = hashlib.sha256(f"{name}|{op}|{node_type}|{len(inputs)}".encode())
            for key, value in items:
                own.update(f"|{key}=".encode())
                _digest_value(own, value)
            kept = (own.digest(), [v for _, v in items])
            if known is not None:
                known[ident] = kept
        digest = hashlib.sha256(kept[0])
        for operand in inputs:
            digest.update(keys[operand])
        keys[name] = digest.digest()
        whole.update(keys[name])
    whole.update(repr(fixed_graph.outputs).encode())
    return whole.hexdigest(), keys


def _digest_value(digest, value) -> None:
    if isinstance(value, np.ndarray):  # every element (repr elides long arrays); its bytes read in place
        digest.update(f"{value.dtype}{value.shape}".encode())
        data = np.ascontiguousarray(value)
        digest.update(data.tobytes() if data.dtype.hasobject or not data.size else memoryview(data).cast("B"))
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)}[".encode())
        for item in value:
            _digest_value(digest, item)
    elif isinstance(value, dict):
        digest.update(f"dict{len(value)}{{".encode())
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _digest_value(digest, value[key])
    else:
        digest.update(repr(value).encode())


def fixed_report(graph: Graph, fixed_graph: Graph, prep: PreparedInput, s_in: np.ndarray, adjust: dict,
                 held_out_disagreements: int) -> dict:
    """Stage 5: per-value types, scales, ranges and overflow safety; tables; agreement with float."""
    values = {}
    for name in fixed_graph.order():
        t = fixed_graph.type(name)
        if not t.dtype.is_fixed or fixed_graph.op(name) in ("const", "sparse_const"):
            continue
        r = graph.analyses.ranges.get(name)
        values[name] = {
            "type": str(t.dtype), "scale": t.dtype.scale,
            "calibrated_range": [r.lo, r.hi] if r else None,
            "static_range": [r.static_lo, r.static_hi] if r and r.static_lo is not None else None,
            "overflow_safety": fixed_graph.analyses.safety.get(name, "calibration"),
        }
    fs = prep.feature_scales
    return {
        "values": values,
        "scale_adjustments": adjust,
        "exp_tables": fixed_graph.analyses.exp_tables,
        "tanh": fixed_graph.analyses.tanh_tables,
        "input_scale": s_in.tolist(),
        "input_range": [(prep.lo * 2.0**-fs).tolist(), (prep.hi * 2.0**-fs).tolist()],
        "calibration_rows": len(prep.calibration),
        "held_out_disagreements": held_out_disagreements,
    }


def agreement(graph: Graph, fixed_graph: Graph, prep: PreparedInput, s_in: np.ndarray) -> dict:
    """The integer build against the float model on every profiled calibration row: the share of equal
    predictions, and the scores' error in the model's units (regression: the value's fixed-point error)."""
    kept = graph.analyses.profile_outputs  # range_analysis's run of these rows, when the graph is as it left it
    if kept is not None and kept[0] is prep.calibration and kept[1] == tuple(graph.order()):
        float_all = kept[2]
    else:
        float_all = run_float(graph, prep.calibration)
    fixed_all = run_fixed_once(fixed_graph, quantise(prep.calibration, s_in - prep.feature_scales, 16))
    s_scores = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    error = np.abs(fixed_all["scores"] * 2.0**-s_scores - float_all["scores"])
    figures = {"score_error": {"max_abs": float(np.max(error)), "mean_abs": float(np.mean(error))}}
    if graph.analyses.task_kind == "regression":  # a row agrees when its value is within the tolerance
        tolerance = value_tolerance(float_all["scores"])
        figures["score_error"]["tolerance"] = tolerance
        figures["agreement_with_float"] = float(np.mean(np.max(error, axis=1) <= tolerance))
    else:
        figures["agreement_with_float"] = float(np.mean(fixed_all["prediction"] == float_all["prediction"]))
    return figures


def value_tolerance(values: np.ndarray) -> float:
    """The error a regression value may have: REGRESSION_TOLERANCE of its spread over the rows."""
    return REGRESSION_TOLERANCE * (float(np.ptp(values)) or 1.0)


def _valid_entry(entry: dict, graph: Graph) -> bool:
    """A cached search result of the shape lower_to_fixed stores, naming only values of this graph."""
    adjust, best, figures = entry.get("adjust"), entry.get("best"), entry.get("figures")
    names = set(graph.order())
    return (isinstance(adjust, dict) and isinstance(best, list) and len(best) == 2 and isinstance(figures, dict)
            and all(isinstance(v, int) and (k in names or k.removesuffix(".weights") in names)
                    for k, v in adjust.items())
            and isinstance(best[0], int) and isinstance(best[1], (int, float))
            and isinstance(figures.get("agreement_with_float"), (int, float))
            and isinstance(figures.get("score_error"), dict))


def search_key(graph: Graph, prep: PreparedInput, opts) -> str:
    """Everything the search and the agreement figures depend on: the compiler's own sources, the graph
    with its analyses and task, the profiled calibration rows, the input clamp and the user's options."""
    digest = hashlib.sha256()
    options = [opts.precision, opts.input_range, opts.input_clamp, opts.search, opts.tanh, opts.tanh_max_error,
               opts.exp_max_error, opts.target]
    for part in (source_fingerprint(), print_graph(graph, elide_constants=True), "\n".join(graph.analyses.describe()),
                 json.dumps(graph.analyses.task, sort_keys=True, default=repr), repr(options)):
        digest.update(part.encode() + b"\0")
    for node in graph.nodes():  # the constants' exact bits (the text above elides large arrays)
        for _name, value in sorted(node.attrs.items()):
            if isinstance(value, np.ndarray):
                _digest_value(digest, value)
    for array in (prep.calibration, prep.feature_scales, prep.lo, prep.hi):
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes() + b"\0")
    return digest.hexdigest()[:40]


def _clamped(graph: Graph) -> bool:
    (x,) = graph.inputs()
    return any(graph.op(u) == "clip" for u in graph.users(x))


def fixed_description(fixed_graph: Graph, s_in: np.ndarray, report: dict, per_feature: bool) -> list[str]:
    """Stage 6: what the header says about the integer interface."""
    s_scores = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    uniform = bool(np.all(s_in == s_in[0]))
    return [
        "Input: int16, x_int[k] = round(x[k] * 2^s[k]) saturated to int16, with "
        + (f"s[k] = {s_in[0]} for every k." if uniform else "s[k] from the header's _INPUT_SHIFTS macro."),
        ("x_int is clamped to the calibrated range" + (" of its feature" if per_feature else " of all features")
         + "; out-of-range inputs and intermediates saturate, never wrap.") if _clamped(fixed_graph) else
        "x_int is not clamped: the trees only compare it (every decision is exact on the input grid).",
        f"Scores: {fixed_graph.type(fixed_graph.output('scores')).dtype}, real = int * 2^-{s_scores}.",
        f"Agreement with the float model on {report['calibration_rows']} calibration rows: "
        f"{100 * report['agreement_with_float']:.2f}%.",
    ]


def lower_to_fixed(graph: Graph, precision: str, calibration: np.ndarray, ctx: PassContext, report: dict,
                   description: list[str], before_search: Callable[[Graph], None] | None = None) -> Graph:
    """The float graph to integer code, stage by stage; fills ``report`` and ``description``.
    ``before_search``: called with the build before any scale search (its sizes are the searched build's: the
    search changes scales, not types), e.g. to refuse a build that cannot fit before the search's work."""
    ctx.options.precision = precision
    prep = prepare_input(graph, calibration, ctx)  # the input's scales and clamp from every row
    given = len(prep.calibration)
    prep = replace(prep, calibration=profile_rows(prep.graph, prep.calibration))
    if len(prep.calibration) < given:
        log.info("calibration: %d of %d rows profiled (the model's %d terms per row)", len(prep.calibration), given,
                 work_per_row(prep.graph))
    graph = analyse_ranges(prep, ctx)
    # an unchanged rebuild takes the search's choice and the agreement figures from the cache
    key = search_key(graph, prep, ctx.options)
    cached = load_result(SEARCH_CACHE, key)
    if cached is not None and not _valid_entry(cached, graph):
        log.warning("scale search: ignoring a malformed cache entry %s", key[:12])
        cached = None
    chosen = None  # the search's build of its choice, where it ran
    if cached is not None:
        adjust, best = cached["adjust"], tuple(cached["best"])
        log.info("scale search: the choice of an identical earlier compile (cache %s)", key[:12])
    # the steps of choose_scales kept across this graph's builds (the check before the search, its trials, the
    # build chosen): each is the build choosing anew gives (ScaleMemo); choose_scales reads ``graph`` and builds
    # a new graph, which the passes after it rewrite, so ``graph`` itself is not copied
    memo = ScaleMemo(graph)
    if cached is None:
        if before_search is not None:
            before_search(run_passes(graph, FIXED_PASSES, PassContext(
                options=replace(ctx.options, scale_adjust={}, scale_memo=memo), debug=False)))
        adjust, best, chosen = search_scales(graph, prep.calibration, ctx, memo)
    ctx.options.scale_adjust, ctx.options.scale_memo = adjust, memo
    if ctx.dump_after & {"all", *FIXED_PASSES[:SEARCHED_PASSES]}:
        chosen = None  # the IR after those passes is asked for: this build runs them
    try:
        if chosen is not None:  # the search built it: its log and timings are this build's, the rest runs here
            ctx.log.extend(chosen.ctx.log)
            for name, seconds in chosen.ctx.timings.items():
                ctx.timings[name] = ctx.timings.get(name, 0.0) + seconds
            fixed_graph = run_passes(chosen.graph, FIXED_PASSES[SEARCHED_PASSES:], ctx)
        else:
            fixed_graph = run_passes(graph, FIXED_PASSES, ctx)  # stage 4: scales, tables, memory
    finally:
        ctx.options.scale_memo = None
    s_in = prep.feature_scales + fixed_graph.type(fixed_graph.inputs()[0]).dtype.scale
    fixed_graph.analyses.input_scale = s_in
    if cached is not None:
        figures = cached["figures"]
    else:
        figures = agreement(graph, fixed_graph, prep, s_in)
        store_result(SEARCH_CACHE, key, {"adjust": adjust, "best": list(best), "figures": figures})
    report.update(fixed_report(graph, fixed_graph, prep, s_in, adjust, best[0]), **figures,
                  calibration_rows_given=given)
    description += fixed_description(fixed_graph, s_in, report, prep.per_feature)
    return fixed_graph
