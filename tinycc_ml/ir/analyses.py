"""What passes learn about a graph, in one typed record that travels with it (``graph.analyses``):
copied by ``Graph.copy``, shown by ``--dump-ir-after`` (as comments after the graph), and read by
later passes and the backends. Each field names the pass that fills it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

import numpy as np


@dataclass
class Range:
    """range_analysis: what a value spans."""

    lo: float  # calibrated minimum over all elements
    hi: float
    static_lo: float | None = None  # proven interval, if known
    static_hi: float | None = None
    # i-th entry: the largest, over calibration rows, of the row's (i+1)-th smallest element; what a
    # value read only through minimum-like ops (segment_min, kvote) needs to resolve
    low_order: tuple[float, ...] = ()

    @property
    def abs_max(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def static_abs_max(self) -> float | None:
        if self.static_lo is None:
            return None
        return max(abs(self.static_lo), abs(self.static_hi))


class ArenaSlot(NamedTuple):
    """plan_memory: where an intermediate vector lives (offset and length in elements)."""

    arena: str  # "f32", "i32", "i16", "i8" or "u8"
    offset: int
    length: int


def multiply_accumulates(graph) -> int:
    """Multiply-accumulates one run of a network's convolutions and fully connected layers takes (0 for
    graphs without them): what bounds its time on a target."""
    total = 0
    for name in graph.order():
        op = graph.op(name)
        if op in ("conv2d", "grouped_conv2d", "depthwise_conv2d"):
            _, kh, kw, depth = graph.type(graph.node(name).inputs[1]).shape  # a grouped filter's depth: a group's
            total += graph.type(name).size * kh * kw * (1 if op == "depthwise_conv2d" else depth)
        elif op == "fully_connected":
            total += graph.type(name).size * graph.type(graph.node(name).inputs[1]).shape[1]
    return int(total)


def task_kind(task: dict | None) -> str | None:
    """"classification", "regression" or "multilabel" of a task dict; None where none was recorded."""
    return (task or {}).get("kind")


# Analyses' dicts whose values are immutable (str, int, ArenaSlot): a copy of the dict is an independent one
FLAT_DICTS = ("safety", "memory_plan", "arenas", "arena_bounds")


@dataclass
class Analyses:
    ranges: dict[str, Range] = field(default_factory=dict)  # range_analysis
    safety: dict[str, str] = field(default_factory=dict)  # choose_scales: "proven", "calibration", "input"
    # input_scales, then the fixed pipeline: integer builds take x_int[k] = round(x[k] * 2^input_scale[k])
    input_scale: np.ndarray | None = None
    memory_plan: dict[str, ArenaSlot] = field(default_factory=dict)  # plan_memory
    arenas: dict[str, int] = field(default_factory=dict)  # plan_memory: arena -> length in elements
    # plan_memory: arena -> the largest live set any placement must hold (elements), the bound beside ``arenas``
    arena_bounds: dict[str, int] = field(default_factory=dict)
    # plan_memory: head -> the element-wise nodes computed in its store (integer builds; see plan_memory)
    fused: dict[str, list[str]] = field(default_factory=dict)
    exp_tables: list[dict] = field(default_factory=list)  # exp_table: size and measured error per table
    tanh_tables: list[dict] = field(default_factory=list)  # tanh_approx: form and measured error
    task: dict | None = None  # compile, from the model: what the scores mean (classes, regression, labels)
    # compile, from the user's option: what kernels favour where they have a choice (weights' layout in flash):
    # "size" or "speed"
    optimize: str = "size"
    # compile (float builds): the inputs proven to stay within float32, {"bound": R} or {"lo", "hi"} per feature
    input_bound: dict | None = None
    # patch_stages: the split, grid, arena and extra MACs of patch-based execution (its report), None without
    patches: dict | None = None
    # ir.fixed.run_fixed_once: (the graph's fingerprint, {"rows", "hashes", "order", "outputs"}) of the rows the
    # integer interpreter has run on this graph; a copy starts without (its passes may change what a row gives)
    rows_run: tuple | None = None
    # range_analysis: (the calibration rows profiled, the graph's order then, its outputs' float values on them as
    # ir.interp.run_float gives them), so the agreement with the float model does not run them again; not copied
    profile_outputs: tuple | None = None

    @property
    def task_kind(self) -> str | None:
        return task_kind(self.task)

    def copy(self) -> Analyses:
        """An independent record (every mutable part copied; ``rows_run`` and ``profile_outputs`` dropped). The
        scale search copies a graph per trial: the ranges (flat records of numbers) and the dicts of immutable values
        are copied directly, every other field deeply."""
        out = replace(self, rows_run=None, profile_outputs=None)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "ranges":
                # each Range anew from its fields (dataclasses.replace's value, at a fraction of its cost)
                value = {name: Range(r.lo, r.hi, r.static_lo, r.static_hi, r.low_order) for name, r in value.items()}
            elif f.name in FLAT_DICTS:
                value = dict(value)
            elif isinstance(value, np.ndarray):
                value = value.copy()
            elif f.name in ("rows_run", "profile_outputs"):
                continue
            elif not isinstance(value, (str, type(None))):
                value = copy.deepcopy(value)
            setattr(out, f.name, value)
        return out

    def describe(self) -> list[str]:
        """Text lines for IR dumps."""
        lines = []
        for name, r in self.ranges.items():
            static = "" if r.static_lo is None else f", proven [{r.static_lo:.6g}, {r.static_hi:.6g}]"
            lines.append(f"range %{name}: calibrated [{r.lo:.6g}, {r.hi:.6g}]{static}")
        lines += [f"overflow %{name}: {how}" for name, how in self.safety.items()]
        if self.input_scale is not None:
            scales = np.asarray(self.input_scale).reshape(-1)
            lines.append(f"input scales: {sorted(set(int(s) for s in scales))} over {len(scales)} features")
        lines += [f"memory %{name}: {slot.arena}[{slot.offset}:{slot.offset + slot.length}]"
                  for name, slot in self.memory_plan.items()]
        lines += [f"arena {key}: {length} elements (largest live set {self.arena_bounds.get(key, '?')})"
                  for key, length in self.arenas.items()]
        lines += [f"fused %{head}: {', '.join('%' + m for m in members)} in its store"
                  for head, members in self.fused.items()]
        lines += [f"exp table: {t}" for t in self.exp_tables]
        lines += [f"tanh: {t}" for t in self.tanh_tables]
        return lines
