"""Float networks (ONNX, float .tflite) in the project's own fixed point: power-of-two scales chosen from
calibration rows (passes/network_scales.py), int16 (precision int16) or int8 (precision int8 with
int8_dialect="pow2") activations and weights, int32 accumulators proven not to overflow. The graph the C computes
bit for bit (``run_fixed``); what the compile report and the header say about it."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.ops.network.activations import FUNCTIONS
from tinycc_ml.passes.manager import PassContext, run_passes
from tinycc_ml.passes.network_scales import ELEMENTWISE, LAYERS, NetworkOverflowError

# the values whose scale network_scales chooses
SCALED_OPS = ("input", "tensor_add", "reduce_sum", *ELEMENTWISE, *LAYERS, *FUNCTIONS)
SEARCH_STEPS = (1, -1)  # bits finer (saturating the largest values) or coarser
SEARCH_MIN_ROWS, SEARCH_MAX_ROWS = 8, 250
# each trial scales and runs the whole graph: past this many scaled values (an unrolled recurrent layer's copies of
# one step, each searched apart) the search would take minutes, so the scales stay the calibrated ones
SEARCH_MAX_VALUES = 100

log = logging.getLogger(__name__)

FLOAT_NETWORK_PASSES = ["fold_channels_first", "dce", "plan_memory"]  # the float C's graph
FIXED_NETWORK_PASSES = ["fold_channels_first", "expand_lstm", "network_scales", "dce", "plan_memory"]
CHOSEN_FROM = 2  # the passes before it give the float graph whose scales are chosen (and searched)


def lower_network_to_fixed(graph: Graph, precision: str, rows: np.ndarray, ctx: PassContext) -> Graph:
    """The fixed-point graph of a float network's graph (``NetworkModel.lower_for``: flat input), its scales from
    ``rows`` (n, input elements) and, unless ``search=False``, the search's adjustments; its input scale in
    ``analyses.input_scale`` (one per element, all equal)."""
    ctx.options.precision = precision
    ctx.options.calibration = np.asarray(rows, dtype=np.float64)
    graph = run_passes(graph, FIXED_NETWORK_PASSES[:CHOSEN_FROM], ctx)  # the float graph the scales are chosen for
    if precision == "int8":
        graph = equalised_if_better(graph, ctx)
    ctx.options.scale_adjust = search_network_scales(graph, ctx) if ctx.options.search else {}
    fixed_graph = run_passes(graph, FIXED_NETWORK_PASSES[CHOSEN_FROM:], ctx)
    (x,) = fixed_graph.inputs()
    x_type = fixed_graph.type(x)
    fixed_graph.analyses.input_scale = np.full(x_type.size, x_type.dtype.scale)
    return fixed_graph


def held_out_rows(graph: Graph, ctx: PassContext) -> np.ndarray | None:
    """The calibration rows the scale choices are judged on (a quarter, 8 to 250), or None (too few). A graph with
    state takes its rows as one stream (a stepped recurrent layer: successive time steps), so its held-out rows
    are the stream's last 250, in order (a quarter of a stream is a few sequences: choices fitted to them lost
    3.6 points of the zoo's 2-layer LSTM)."""
    rows = ctx.options.calibration
    share = min(SEARCH_MAX_ROWS, max(SEARCH_MIN_ROWS, len(rows) // 4))
    if graph.states():
        held = rows[max(0, len(rows) - SEARCH_MAX_ROWS):]
    else:
        held = rows[np.random.default_rng(0).permutation(len(rows))[:share]]
    return None if len(held) < SEARCH_MIN_ROWS else held


def held_out_score(graph: Graph, ctx: PassContext, held: np.ndarray, want: dict, adjust: dict) -> tuple[int, float]:
    """(predictions unlike the float network's, the scores' mean error) of the fixed-point graph with the scale
    adjustments ``adjust`` on the held-out rows (``want``: the float network's results on them)."""
    trial = PassContext(options=replace(ctx.options, scale_adjust=adjust), debug=False)
    fixed_graph = run_passes(graph.copy(), ["network_scales"], trial)
    got = run_fixed(fixed_graph, quantise_rows(fixed_graph, held))
    scale = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    return (int(np.sum(got["prediction"] != want["prediction"])),
            float(np.mean(np.abs(got["scores"] * 2.0**-scale - want["scores"]))))


def equalised_if_better(graph: Graph, ctx: PassContext) -> Graph:
    """The graph after passes/equalize_channels.py where that changes it and its fixed point agrees with the float
    network on the held-out rows at least as well (equal float values either way); else the graph as it was."""
    equalised = run_passes(graph.copy(), ["equalize_channels"], ctx)
    held = held_out_rows(graph, ctx)
    if held is None or equalised.structurally_equal(graph):
        return graph
    want = run_float(graph, held)
    try:
        better = held_out_score(equalised, ctx, held, want, {}) <= held_out_score(graph, ctx, held, want, {})
    except NetworkOverflowError:
        return graph
    log.info("channel equalisation %s", "kept" if better else "not kept (the held-out rows agree less)")
    return equalised if better else graph


def search_network_scales(graph: Graph, ctx: PassContext) -> dict[str, int]:
    """Per-value scale adjustments (one bit finer or coarser at a time, coordinate descent, two rounds) that lower
    the disagreement with the float network's predictions on held-out calibration rows (a quarter, 8 to 250;
    ties: the scores' mean error), as the dense models' search does (passes/fixed_pipeline.py); none for a graph
    with more than SEARCH_MAX_VALUES scaled values."""
    held = held_out_rows(graph, ctx)
    if held is None:
        return {}
    want = run_float(graph, held)

    def score(adjust: dict) -> tuple[int, float]:
        return held_out_score(graph, ctx, held, want, adjust)

    candidates = [n for n in graph.order() if graph.op(n) in SCALED_OPS and graph.type(n).dtype.is_float]
    if len(candidates) > SEARCH_MAX_VALUES:
        log.info("network scale search skipped: %d scaled values (at most %d are searched)", len(candidates),
                 SEARCH_MAX_VALUES)
        return {}
    adjust: dict[str, int] = {}
    best = score(adjust)
    for _round in range(2):
        improved = False
        for name in candidates:
            for delta in SEARCH_STEPS:
                trial = {**adjust, name: adjust.get(name, 0) + delta}
                try:
                    trial_score = score(trial)
                except NetworkOverflowError:
                    continue
                if trial_score < best:
                    best, adjust, improved = trial_score, trial, True
                    break
        if not improved:
            break
    log.info("network scale search: %d adjustment(s), %d held-out disagreement(s)", len(adjust), best[0])
    return {k: v for k, v in adjust.items() if v}


def quantise_rows(fixed_graph: Graph, rows) -> np.ndarray:
    """Real input rows as the integers the C takes (int8 or int16): round(x 2^s), saturated to the input's width."""
    x_type = fixed_graph.type(fixed_graph.inputs()[0])
    ints = quantise(np.asarray(rows, dtype=np.float64).reshape(-1, x_type.size), x_type.dtype.scale, x_type.dtype.bits)
    return ints.astype(np.int8 if x_type.dtype.bits == 8 else np.int16)


def fixed_agreement(float_graph: Graph, fixed_graph: Graph, rows: np.ndarray) -> dict:
    """The fixed-point build against the float network on the calibration rows: the share of equal predictions
    and the scores' largest error (real units)."""
    want = run_float(float_graph, rows)
    got = run_fixed(fixed_graph, quantise_rows(fixed_graph, rows))
    scale = fixed_graph.type(fixed_graph.output("scores")).dtype.scale
    error = np.abs(got["scores"] * 2.0**-scale - want["scores"])
    return {"agreement_with_float": float(np.mean(got["prediction"] == want["prediction"])),
            "score_error": {"max_abs": float(np.max(error)), "mean_abs": float(np.mean(error))}}


def fixed_network_description(fixed_graph: Graph, figures: dict, rows: int) -> list[str]:
    """What the header says about a fixed-point network's interface."""
    x_type = fixed_graph.type(fixed_graph.inputs()[0]).dtype
    scores = fixed_graph.type(fixed_graph.output("scores")).dtype
    return [f"Input: int{x_type.bits}, x_int[k] = round(x[k] * 2^{x_type.scale}) saturated to int{x_type.bits} "
            "(the input tensor's elements in order).",
            f"Scores: {scores}, real = int * 2^-{scores.scale}; every layer's int32 accumulator is proven not to "
            "overflow, activations saturate, never wrap.",
            f"Agreement with the float network on {rows} calibration rows: "
            f"{100 * figures['agreement_with_float']:.2f}%."]


def fixed_values_report(fixed_graph: Graph) -> dict:
    """Each computed value's fixed-point type (the report's ``values``)."""
    return {n: {"type": str(fixed_graph.type(n).dtype), "scale": fixed_graph.type(n).dtype.scale}
            for n in fixed_graph.order()
            if fixed_graph.type(n).dtype.is_fixed and fixed_graph.op(n) != "const"}
