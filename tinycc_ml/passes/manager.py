"""The pass manager: named passes collected into named pipelines, verification after each pass
in debug mode, and IR dumps after any pass."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.text import print_graph
from tinycc_ml.ir.verify import verify
from tinycc_ml.plugins import Registry

TANH_FORMS = ("auto", "clamp", "table")
INPUT_CLAMPS = ("global", "per_feature")
OPTIMIZE_GOALS = ("size", "speed")  # what kernels favour where they have a choice: flash, or instructions
INT8_DIALECTS = ("tflite", "pow2")  # a float network at precision int8: TFLite's int8, or the project's fixed point


@dataclass(frozen=True)
class TargetAttributes:
    """What a target tells the passes, so that no pass imports a backend (TVM's target attributes):
    ``Backend.target_attributes()`` fills it, ``PassOptions.target`` carries it."""

    name: str = "host"
    # int8 builds: significant bits kept of each sqdist's prototypes (M = M8 2^k, so 8-bit distance kernels
    # can store M8); None keeps every bit of the int16 prototypes
    prototype_bits: int | None = 8
    # wsqdist: product shifts k that are 7 or 0 mod 8 are cheap (the AVR moves bytes, where other shifts cost a
    # cycle per bit and byte); its terms' scale then goes up to this many bits coarser to get one
    byte_shift_bits: int = 0


@dataclass
class PassOptions:
    """The passes' options. Those a user may set through ``compile(**options)`` are USER_OPTIONS;
    the rest are filled by the pipelines."""

    precision: str = "float"  # "float", "int16" or "int8"
    fold_mean: bool = True  # fold_input_affine: fold the mean subtraction too (integer builds)
    # fixed pipeline, user-settable
    input_range: tuple | None = None  # (lo, hi) of the input in real units; default: the calibrated range
    input_clamp: str = "global"  # one clamp range for all features, or "per_feature"
    search: bool = True  # search per-value scale adjustments on held-out calibration rows
    tanh: str = "auto"  # tanh_approx: "auto", "clamp" or "table"
    tanh_max_error: float | None = None  # tanh_approx: error bound of the table (default 2^-9)
    exp_max_error: float | None = None  # exp_table: error bound of the tables (default 2^-10 of the range)
    int8_dialect: str = "tflite"  # a float network at int8: TFLite's quantisation, or "pow2" (power-of-two scales)
    # kernels with a choice of layout (a network's weights on the Cortex-M4/M33): "size" keeps int8 weights in
    # flash, "speed" widens them to int16 where that saves instructions
    optimize: str = "size"
    # a quantised network's activation arena at most this many bytes: its early layers computed by patches
    # (patch_stages) when the whole layers do not fit
    ram_limit: int | None = None
    target: TargetAttributes = field(default_factory=TargetAttributes)  # set by compile() from the backend
    # fixed pipeline, internal
    calibration: np.ndarray | None = None  # rows at the input's integer scale per feature (x * 2^s_k)
    input_bounds: tuple[np.ndarray, np.ndarray] | None = None  # the input clamp, in those units
    scale_adjust: dict[str, int] = field(default_factory=dict)  # choose_scales: bits per value (the search)
    scale_memo: Any = None  # choose_scales.ScaleMemo: the steps the search's trials share (None: choose anew)

    USER_OPTIONS = ("input_range", "input_clamp", "search", "tanh", "tanh_max_error", "exp_max_error", "int8_dialect",
                    "optimize", "ram_limit")

    @classmethod
    def from_user(cls, precision: str, options: dict, target: TargetAttributes | None = None) -> PassOptions:
        unknown = sorted(set(options) - set(cls.USER_OPTIONS))
        if unknown:
            raise CompileError(f"unknown compile option {unknown[0]!r}; options: {', '.join(cls.USER_OPTIONS)}")
        opts = cls(precision=precision, fold_mean=precision != "float", target=target or TargetAttributes(),
                   **options)
        if opts.tanh not in TANH_FORMS:
            raise CompileError(f"tanh={opts.tanh!r} is not one of {', '.join(TANH_FORMS)}")
        if opts.int8_dialect not in INT8_DIALECTS:
            raise CompileError(f"int8_dialect={opts.int8_dialect!r} is not one of {', '.join(INT8_DIALECTS)}")
        if opts.optimize not in OPTIMIZE_GOALS:
            raise CompileError(f"optimize={opts.optimize!r} is not one of {', '.join(OPTIMIZE_GOALS)}")
        if opts.input_clamp not in INPUT_CLAMPS:
            raise CompileError(f"input_clamp={opts.input_clamp!r} is not one of {', '.join(INPUT_CLAMPS)}")
        return opts


@dataclass
class PassContext:
    """What passes may read besides the graph: typed options, and a log the compile report shows."""

    options: PassOptions = field(default_factory=PassOptions)
    debug: bool = True
    dump_after: set[str] = field(default_factory=set)  # pass names, or {"all"}
    dump: Callable[[str], None] = lambda text: sys.stderr.write(text)
    log: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


log = logging.getLogger(__name__)


class Pass:
    name: str = ""
    description: str = ""

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        """Rewrite ``graph`` (in place or not) and return the result."""
        raise NotImplementedError


BUILTIN_PASSES = {name: f"tinycc_ml.passes.{name}:{cls}" for name, cls in [
    ("choose_scales", "ChooseScales"), ("constant_fold", "ConstantFold"), ("cse", "CommonSubexpressionElimination"),
    ("dce", "DeadCodeElimination"), ("equalize_channels", "EqualizeChannels"), ("exp_table", "ExpTable"),
    ("expand_lstm", "ExpandLstm"),
    ("fold_channels_first", "FoldChannelsFirst"),
    ("fold_input_affine", "FoldInputAffine"),
    ("fuse_nearest", "FuseNearest"),
    ("input_scales", "InputScales"), ("network_scales", "NetworkScales"), ("patch_stages", "PatchStages"),
    ("plan_memory", "PlanMemory"),
    ("range_analysis", "RangeAnalysis"),
    ("tanh_approx", "TanhApprox")]}
# Pass classes by name (plug-ins: entry-point group tinycc_ml.passes, or the register_pass decorator).
PASSES = Registry("pass", "tinycc_ml.passes", BUILTIN_PASSES)
PIPELINES: dict[str, list[str]] = {}


def register_pass(cls: type[Pass]) -> type[Pass]:
    PASSES.register(cls.name, cls)
    return cls


def run_passes(graph: Graph, names: list[str], ctx: PassContext | None = None) -> Graph:
    ctx = ctx or PassContext()
    unknown = [n for n in ctx.dump_after if n != "all" and n not in PASSES]
    if unknown:
        raise CompileError(f"--dump-ir-after: unknown pass {unknown[0]!r}; passes: {', '.join(sorted(PASSES))}")
    if ctx.debug:
        verify(graph)
    for name in names:
        start = time.perf_counter()
        graph = PASSES[name]().run(graph, ctx)
        ctx.timings[name] = ctx.timings.get(name, 0.0) + time.perf_counter() - start
        log.debug("pass %s: %.3f s", name, time.perf_counter() - start)
        if ctx.debug:
            verify(graph)
        if "all" in ctx.dump_after or name in ctx.dump_after:
            analyses = "".join(f"# {line}\n" for line in graph.analyses.describe())
            ctx.dump(f"// IR after {name}\n" + print_graph(graph, elide_constants=True) + analyses)
    return graph


def run_pipeline(graph: Graph, pipeline: str, ctx: PassContext | None = None) -> Graph:
    if pipeline not in PIPELINES:
        raise CompileError(f"unknown pipeline {pipeline!r}; pipelines: {', '.join(sorted(PIPELINES))}")
    return run_passes(graph, PIPELINES[pipeline], ctx)
