"""The pass manager: named passes collected into named pipelines, verification after each pass
in debug mode, and IR dumps after any pass."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.text import print_graph
from tinycc_ml.ir.verify import verify
from tinycc_ml.plugins import Registry


@dataclass
class PassContext:
    """What passes may read besides the graph: options, and a log the compile report shows."""

    options: dict = field(default_factory=dict)
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
    ("dce", "DeadCodeElimination"), ("exp_table", "ExpTable"), ("fold_input_affine", "FoldInputAffine"),
    ("input_scales", "InputScales"), ("plan_memory", "PlanMemory"), ("range_analysis", "RangeAnalysis"),
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
            ctx.dump(f"// IR after {name}\n" + print_graph(graph, elide_constants=True))
    return graph


def run_pipeline(graph: Graph, pipeline: str, ctx: PassContext | None = None) -> Graph:
    if pipeline not in PIPELINES:
        raise CompileError(f"unknown pipeline {pipeline!r}; pipelines: {', '.join(sorted(PIPELINES))}")
    return run_passes(graph, PIPELINES[pipeline], ctx)
