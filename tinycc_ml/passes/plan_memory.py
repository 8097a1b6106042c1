"""Memory planning: give every intermediate vector a slot in a static arena, reusing the
space of values that are dead (liveness over the schedule, first fit by offset).

There is one arena per C element type, so generated code indexes typed arrays and never
type-puns. The plan is stored in ``graph.analyses``: ``memory_plan`` = {node: ArenaSlot(arena, offset,
length)} in elements, and ``arenas`` = {arena: length}. Constants, inputs and scalars
take no arena space (scalars are locals), nor does the score vector: the entry points write it
into the caller's buffer.
"""

from __future__ import annotations

from tinycc_ml.ir.analyses import ArenaSlot
from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

LEAF_OPS = ("input", "const", "sparse_const")


def arena_key(dtype) -> str:
    """Values sharing an arena share a C element type."""
    if dtype.kind == "fx":
        return f"i{dtype.bits}"
    return {"f32": "f32", "idx": "i32", "bool": "u8"}[dtype.kind]


def element_bytes(key: str) -> int:
    return {"f32": 4, "i32": 4, "i16": 2, "i8": 1, "u8": 1}[key]


def plan(graph: Graph, virtual=()) -> tuple[dict[str, ArenaSlot], dict[str, int]]:
    """The slots and arena lengths; ``virtual``: vectors that take no slot (a backend computes them where
    they are read, e.g. the input clamp applied on read)."""
    order = graph.order()
    position = {n: i for i, n in enumerate(order)}
    outputs = {n for _, n in graph.outputs}
    last_use = {
        n: len(order) if n in outputs else max((position[u] for u in graph.users(n)), default=position[n])
        for n in order
    }
    caller_owned = {n for label, n in graph.outputs if label == "scores"}  # written into the caller's buffer
    live: list[tuple[str, int, int, str]] = []  # (arena, offset, length, node)
    placed: dict[str, ArenaSlot] = {}
    arenas: dict[str, int] = {}
    for i, n in enumerate(order):
        t = graph.type(n)
        # Operands of this node stay live (last_use >= i), so an output never overlaps its inputs.
        live = [entry for entry in live if last_use[entry[3]] >= i]
        if graph.op(n) in LEAF_OPS or t.rank == 0 or n in caller_owned or n in virtual:
            continue
        key, length = arena_key(t.dtype), t.size
        offset = 0
        for _, o, s, _ in sorted(e for e in live if e[0] == key):
            if offset + length <= o:
                break
            offset = max(offset, o + s)
        live.append((key, offset, length, n))
        placed[n] = ArenaSlot(key, offset, length)
        arenas[key] = max(arenas.get(key, 0), offset + length)
    return placed, dict(sorted(arenas.items()))


@register_pass
class PlanMemory(Pass):
    name = "plan_memory"
    description = "assign intermediate vectors to static arenas by liveness"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        a = graph.analyses
        a.memory_plan, a.arenas = plan(graph)
        used = sum(length * element_bytes(key) for key, length in a.arenas.items())
        naive = sum(length * element_bytes(key) for key, _, length in a.memory_plan.values())
        ctx.log.append(f"plan_memory: arenas {used} bytes (without reuse: {naive})")
        return graph
