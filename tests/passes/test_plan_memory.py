"""plan_memory's placement: every value live at once with another in its own elements (but an operand written
over within its lead), the arena at the bound of the largest live set where the search reaches it, never above the
schedule's first fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tinycc_ml.passes import plan_memory
from tinycc_ml.passes.plan_memory import Lifetimes

MODELS = Path(__file__).resolve().parents[2] / "data" / "mlperf-tiny"


def check_placement(life: Lifetimes, offset: dict[str, int]) -> None:
    """No value overlaps one live at once with it, except an output over its operand starting within the lead."""
    for i, a in enumerate(life.slots):
        assert offset[a] >= 0
        for b in life.slots[i + 1:]:
            (a0, a1), (b0, b1) = life.live[a], life.live[b]
            if a1 < b0 or b1 < a0:
                continue
            if (b, a) in life.leads and offset[b] <= offset[a] + life.leads[(b, a)]:
                continue  # b written over its operand a, far enough below
            assert offset[a] + life.length[a] <= offset[b] or offset[b] + life.length[b] <= offset[a], (a, b)


@st.composite
def lifetimes(draw) -> Lifetimes:
    """Values defined one per step, each live to a later step; some written over an operand dying there."""
    n = draw(st.integers(2, 9))
    names = [f"v{i}" for i in range(n)]
    live = {v: (i, draw(st.integers(i, min(n, i + 3)))) for i, v in enumerate(names)}
    length = {v: draw(st.integers(1, 40)) for v in names}
    leads = {}
    for i, v in enumerate(names):
        dying = [u for u in names[:i] if live[u][1] == i]
        if dying and draw(st.booleans()):
            leads[(v, draw(st.sampled_from(dying)))] = -draw(st.integers(0, 12))
    return Lifetimes(names, dict.fromkeys(names, "i8"), length, live, {}, leads)


def arena(life: Lifetimes, offset: dict[str, int]) -> int:
    return max(offset[n] + life.length[n] for n in life.slots)


@settings(max_examples=200, deadline=None)
@given(lifetimes())
def test_every_placement_keeps_live_values_apart_and_the_search_only_lowers_the_arena(life):
    first = plan_memory._first_fit(life.slots, life)
    check_placement(life, first)
    best = first
    for order in plan_memory._orders(life.slots, life):
        best = plan_memory._search(order, life, best, 0, budget=2000)
        check_placement(life, best)
    assert arena(life, best) <= arena(life, first)


def test_a_chain_of_layers_reaches_the_largest_live_set():
    """The anomaly detector's layers (128, 128, 128, 128, 8, 128, ...): first fit in the schedule's order puts the
    8-wide code at the arena's start and the next layer above it (264 bytes); the plan reaches the bound, 256."""
    result = tinycc_ml.compile(MODELS / "ad01_int8.tflite", target="host", name="net")
    a = result.graph.analyses
    assert a.arenas == a.arena_bounds == {"i8": 256}
    assert result.report["arena_bytes"] == 256
    life = plan_memory.lifetimes(result.graph, a.fused)
    check_placement(life, {n: a.memory_plan[n].offset for n in life.slots})
    assert arena(life, plan_memory._first_fit(life.slots, life)) == 264


def test_the_bound_counts_an_operand_written_over_within_its_lead():
    life = Lifetimes(["a", "b"], {"a": "i8", "b": "i8"}, {"a": 100, "b": 60}, {"a": (0, 1), "b": (1, 2)}, {},
                     {("b", "a"): -8})
    offset = plan_memory._first_fit(["b", "a"], life)
    check_placement(life, offset)
    assert arena(life, offset) == 108 and offset == {"b": 0, "a": 8}
    assert np.all(np.array([arena(life, plan_memory._first_fit(o, life))
                            for o in plan_memory._orders(life.slots, life)]) >= 108)
