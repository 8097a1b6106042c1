"""Lowering a float graph to integer code: the fixed-point pipeline and the scale search.

    float passes -> input clamp -> range_analysis -> choose_scales -> exp_table -> dce -> plan_memory

The search (better than SeeDot's single global max-scale knob): starting from the calibrated
choice, coordinate descent over per-value scale adjustments (one bit coarser or finer at a
time), scored on held-out calibration rows by disagreement with the float model's
predictions, ties broken by the mean absolute score error.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.fixed import FixedOverflow, quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float, work_per_row
from tinycc_ml.passes import choose_scales, exp_table, input_scales, range_analysis, tanh_approx  # noqa: F401
from tinycc_ml.passes.manager import PassContext, run_passes
from tinycc_ml.progress import Progress

FLOAT_PREP = ["fold_input_affine", "constant_fold", "cse", "dce"]
FIXED_PASSES = ["choose_scales", "exp_table", "tanh_approx", "dce", "plan_memory"]
SEARCH_ADJUSTMENTS = (-1, 1, -2)
WEIGHT_ADJUSTMENTS = (1, 2, 3, 4)  # finer weight scales: saturate outliers, resolve the bulk
SEARCH_ELEMENTS = 2**26  # products per scoring run of the search: keeps big models (kNN) quick


def insert_input_clamp(graph: Graph, lo: np.ndarray, hi: np.ndarray, per_feature: bool) -> Graph:
    """Clamp the input to its calibrated range, so that everything after it is proven for it:
    one range for all features (two compares against constants, the default) or one per feature
    (tighter proofs, but two bounds read from flash per feature)."""
    (x,) = graph.inputs()
    bounds = {"lo": lo.astype(np.float64), "hi": hi.astype(np.float64)}
    if not per_feature or (np.all(lo == lo[0]) and np.all(hi == hi[0])):
        bounds = {"lo": float(np.min(lo)), "hi": float(np.max(hi))}
    clamp = graph.add("clip", [x], bounds, name="x_clamped")
    graph.replace_uses(x, clamp, keep=(clamp,))
    return graph


def _score(fixed_graph: Graph, X: np.ndarray, float_out: dict) -> tuple[int, float]:
    # X is already x * 2^s_k (see input_scales): only the input's own scale remains
    s_in = fixed_graph.type(fixed_graph.inputs()[0]).dtype.scale
    try:
        got = run_fixed(fixed_graph, quantise(X, s_in, 16))
    except FixedOverflow:
        return len(X) + 1, float("inf")
    s_scores = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    disagree = int(np.sum(got["prediction"] != float_out["prediction"]))
    err = float(np.mean(np.abs(got["scores"] * 2.0**-s_scores - float_out["scores"])))
    return disagree, err


def lower_to_fixed(graph: Graph, precision: str, calibration: np.ndarray, ctx: PassContext, report: dict,
                   description: list[str]) -> Graph:
    graph = run_passes(graph, FLOAT_PREP, ctx)
    ctx.options.update(calibration=calibration, precision=precision)
    graph = run_passes(graph, ["input_scales"], ctx)
    feature_scales = graph.input_scale
    calibration = calibration * 2.0**feature_scales  # the rewritten graph takes x * 2^s_k
    if "input_range" in ctx.options:  # declared by the user, in real units
        lo, hi = (np.broadcast_to(np.asarray(v, dtype=np.float64), feature_scales.shape) * 2.0**feature_scales
                  for v in ctx.options["input_range"])
    else:
        lo, hi = calibration.min(axis=0), calibration.max(axis=0)
    lo, hi = np.floor(lo), np.ceil(hi)  # whole units of the integer input
    per_feature = ctx.options.get("input_clamp", "global") == "per_feature"
    graph = insert_input_clamp(graph, lo, hi, per_feature)
    if not per_feature:
        lo, hi = np.full_like(lo, np.min(lo)), np.full_like(hi, np.max(hi))
    ctx.options.update(calibration=calibration, input_range=(lo, hi))
    graph = run_passes(graph, ["range_analysis"], ctx)

    # hold out a quarter of the rows (at most 1000, fewer for big models) to score scale choices
    rng = np.random.default_rng(0)
    affordable = max(64, SEARCH_ELEMENTS // work_per_row(graph))
    held = calibration[rng.permutation(len(calibration))[: min(1000, affordable, max(8, len(calibration) // 4))]]
    float_out = run_float(graph, held)

    def build(adjust: dict) -> Graph:
        trial = PassContext(options={**ctx.options, "scale_adjust": adjust}, debug=False)
        return run_passes(graph.copy_with_ranges(), FIXED_PASSES[:3], trial)

    adjust: dict[str, int] = {}
    best = _score(build(adjust), held, float_out)
    if ctx.options.get("search", True):
        candidates = [(n, SEARCH_ADJUSTMENTS) for n in graph.order()
                      if graph.type(n).dtype.is_float and graph.op(n) not in ("const", "sparse_const", "clip", "input")]
        candidates += [(f"{n}.weights", WEIGHT_ADJUSTMENTS) for n in graph.order() if graph.op(n) == "matvec"]
        trials = 2 * sum(len(deltas) for _, deltas in candidates)
        with Progress("scale search", total=trials, unit="trials") as bar:
            for _round in range(2):
                improved = False
                for name, deltas in candidates:
                    for delta in deltas:
                        trial_adjust = {**adjust, name: adjust.get(name, 0) + delta}
                        score = _score(build(trial_adjust), held, float_out)
                        bar.advance(note=f"round {_round + 1}, {best[0]} disagreements")
                        if score < best:
                            best, adjust, improved = score, trial_adjust, True
                            break
                if not improved:
                    break
    ctx.options["scale_adjust"] = adjust
    fixed_graph = run_passes(graph.copy_with_ranges(), FIXED_PASSES, ctx)

    values = {}
    for name in fixed_graph.order():
        t = fixed_graph.type(name)
        if not t.dtype.is_fixed or fixed_graph.op(name) in ("const", "sparse_const"):
            continue
        r = graph.ranges.get(name)
        values[name] = {
            "type": str(t.dtype), "scale": t.dtype.scale,
            "calibrated_range": [r.lo, r.hi] if r else None,
            "static_range": [r.static_lo, r.static_hi] if r and r.static_lo is not None else None,
            "overflow_safety": fixed_graph.safety.get(name, "calibration"),
        }
    s_in = feature_scales + fixed_graph.type(fixed_graph.inputs()[0]).dtype.scale
    float_all = run_float(graph, calibration)
    fixed_all = run_fixed(fixed_graph, quantise(calibration, s_in - feature_scales, 16))
    report.update({
        "values": values,
        "scale_adjustments": adjust,
        "exp_tables": ctx.options.get("exp_tables", []),
        "tanh": ctx.options.get("tanh_tables", []),
        "input_scale": s_in.tolist(),
        "input_range": [(lo * 2.0**-feature_scales).tolist(), (hi * 2.0**-feature_scales).tolist()],
        "calibration_rows": len(calibration),
        "agreement_with_float": float(np.mean(fixed_all["prediction"] == float_all["prediction"])),
        "held_out_disagreements": best[0],
    })
    fixed_graph.input_scale = s_in
    s_scores = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    uniform = bool(np.all(s_in == s_in[0]))
    description += [
        "Input: int16, x_int[k] = round(x[k] * 2^s[k]) saturated to int16, with "
        + (f"s[k] = {s_in[0]} for every k." if uniform else "s[k] from the header's _INPUT_SHIFTS macro."),
        "x_int is clamped to the calibrated range" + (" of its feature" if per_feature else " of all features")
        + "; out-of-range inputs and intermediates saturate, never wrap.",
        f"Scores: {fixed_graph.type(fixed_graph.output('scores')).dtype}, real = int * 2^-{s_scores}.",
        f"Agreement with the float model on {len(calibration)} calibration rows: "
        f"{100 * report['agreement_with_float']:.2f}%.",
    ]
    return fixed_graph
