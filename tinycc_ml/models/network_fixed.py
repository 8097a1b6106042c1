"""Float networks (ONNX, float .tflite) in the project's own fixed point: power-of-two scales chosen from
calibration rows (passes/network_scales.py), int16 (precision int16) or int8 (precision int8 with
int8_dialect="pow2") activations and weights, int32 accumulators proven not to overflow. The graph the C computes
bit for bit (``run_fixed``); what the compile report and the header say about it."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.passes import network_scales  # noqa: F401  (registers the pass)
from tinycc_ml.passes.manager import PassContext, run_passes

FLOAT_NETWORK_PASSES = ["fold_channels_first", "dce", "plan_memory"]  # the float C's graph
FIXED_NETWORK_PASSES = ["fold_channels_first", "network_scales", "dce", "plan_memory"]


def lower_network_to_fixed(graph: Graph, precision: str, rows: np.ndarray, ctx: PassContext) -> Graph:
    """The fixed-point graph of a float network's graph (``NetworkModel.lower_for``: flat input), its scales from
    ``rows`` (n, input elements); its input scale in ``analyses.input_scale`` (one per element, all equal)."""
    ctx.options.precision = precision
    ctx.options.calibration = np.asarray(rows, dtype=np.float64)
    fixed_graph = run_passes(graph, FIXED_NETWORK_PASSES, ctx)
    (x,) = fixed_graph.inputs()
    x_type = fixed_graph.type(x)
    fixed_graph.analyses.input_scale = np.full(x_type.size, x_type.dtype.scale)
    return fixed_graph


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
