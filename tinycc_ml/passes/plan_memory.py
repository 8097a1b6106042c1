"""Memory planning: give every intermediate vector a slot in a static arena, reusing the
space of values that are dead (liveness over the schedule, first fit by offset).

There is one arena per C element type, so generated code indexes typed arrays and never
type-puns. The plan is stored in ``graph.analyses``: ``memory_plan`` = {node: ArenaSlot(arena, offset,
length)} in elements, and ``arenas`` = {arena: length}. Constants, inputs and scalars
take no arena space (scalars are locals), nor does the score vector: the entry points write it
into the caller's buffer. A reshape takes none either: it names its operand's elements (the operand
stays live as long as the reshape is used; a reshape giving the scores puts its operand in the
caller's buffer).

In place: a value may be written over an operand that dies where it is computed, starting at most the lead its
op's rule allows after it (``OpDef.alias``: element-wise ops and activations 0; TFLite's quantised convolutions,
depthwise convolutions and pools written position by position a little below the input they still read; see
``windows.window_lead``). The placement tries a few orders and then searches, stopping at the bound of the largest
live set (``lower_bound``, reported beside the plan in ``graph.analyses.arena_bounds``).

Integer builds also fuse element-wise chains (``fused_chains``, stored in ``graph.analyses.fused``): a
vector whose only user is an element-wise op (add, sub, mul, scale, clip with scalar bounds) of the same
shape whose other operands are constants — a mat-vec's bias, a relu — is not stored: each element goes
through the chain where the producer stores it (a mat-vec kernel's epilogue), and only the chain's last
value is kept, in the head's own slot (so wherever a kernel stores the head, the pointer it holds is the
right one): the chain's last value shares the head's slot, live until its own last use; the chain's
inner values take no space. Graph outputs are never fused away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.ir.analyses import ArenaSlot
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.registry import OPS
from tinycc_ml.passes.manager import Pass, PassContext, register_pass

LEAF_OPS = ("input", "const", "sparse_const", "state")  # state: static RAM of its own, outside the arenas
FUSED_OPS = ("add", "sub", "mul", "scale", "clip")  # element-wise ops a store can compute (codegen/c_fixed.py)
KERNEL_READERS = ("matvec", "matvec_at", "sqdist")
SEARCH_BUDGET = 20000  # placements tried by _search: a deterministic limit, not a time
SEARCH_MAX_VALUES = 400  # the search recurses once per value: above this, the best placement order stands


def _fusable_user(graph: Graph, name: str, outputs: set) -> str | None:
    """The element-wise user that may take ``name``'s elements in its producer's store, or None."""
    users = graph.users(name)
    t = graph.type(name)
    if name in outputs or len(users) != 1 or t.rank == 0 or t.dtype.kind != "fx":
        return None
    if graph.op(name) == "reshape":  # no code and no slot of its own (its root's elements): nothing stores a chain
        return None
    u = graph.node(users[0])
    if u.name in outputs or u.op not in FUSED_OPS or u.type.shape != t.shape or u.type.dtype.kind != "fx":
        return None
    others = [i for i in u.inputs if i != name]
    if u.inputs.count(name) != 1 or any(graph.op(i) != "const" for i in others):
        return None
    if arena_key(u.type.dtype) != arena_key(t.dtype):
        return None  # the last value takes the head's slot
    if u.op == "clip" and (np.ndim(u.attrs["lo"]) or np.ndim(u.attrs["hi"])):
        return None
    if u.op == "clip" and u.type.dtype.scale == t.dtype.scale and any(
            graph.op(w) in KERNEL_READERS for w in graph.users(u.name)):
        return None  # a clamp feeding a kernel: targets fuse it with the kernel's input pass (input_clamp.py)
    return u.name


def fused_chains(graph: Graph) -> dict[str, list[str]]:
    """head -> its chain of element-wise users (see the module doc); heads are not leaves."""
    outputs = {n for _, n in graph.outputs}
    chains: dict[str, list[str]] = {}
    taken: set[str] = set()
    for n in graph.order():
        if n in taken or graph.op(n) in LEAF_OPS:
            continue
        chain, cur = [], n
        while (u := _fusable_user(graph, cur, outputs)) is not None:
            chain.append(u)
            cur = u
        if chain:
            chains[n] = chain
            taken.update(chain)
    return chains


def arena_key(dtype) -> str:
    """Values sharing an arena share a C element type (TFLite's quantised tensors: their integer width)."""
    if dtype.kind in ("fx", "qi", "int"):
        return f"i{dtype.bits}"
    if dtype.kind == "uint":
        return f"u{dtype.bits}"
    return {"f32": "f32", "idx": "i32", "bool": "u8"}[dtype.kind]


def element_bytes(key: str) -> int:
    return {"f32": 4, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "i64": 8, "u16": 2, "u32": 4, "u64": 8}[key]


def state_bytes(graph: Graph) -> int:
    """Static RAM of the state kept between calls (ir/ops/state.py): outside the arenas, never shared."""
    return sum(graph.type(n).size * element_bytes(arena_key(graph.type(n).dtype)) for n, _ in graph.states())


def reshape_roots(graph: Graph) -> dict[str, str]:
    """Each reshape node -> the value whose elements it names (through chains of reshapes)."""
    roots: dict[str, str] = {}
    for n in graph.order():
        if graph.op(n) == "reshape":
            x = graph.node(n).inputs[0]
            roots[n] = roots.get(x, x)
    return roots


@dataclass
class Lifetimes:
    """What the placement needs: the values that take a slot (schedule order), each one's arena key, length and
    live range [defined, last use] in schedule positions (two values whose ranges meet are live at once), the
    fused chains' tails (-> the head whose slot they take) and the allowed overlaps: (value, operand) -> lead
    (the value may start at most ``lead`` elements after its operand, which dies where the value is computed)."""

    slots: list[str]
    key: dict[str, str]
    length: dict[str, int]
    live: dict[str, tuple[int, int]]
    shares: dict[str, str]
    leads: dict[tuple[str, str], int]


def alias_leads(graph: Graph, name: str) -> dict[str, int]:
    """Operand -> lead: the operands ``name`` may be written over, its op's rule (``OpDef.alias``)."""
    rule = OPS[graph.op(name)].alias
    return rule(graph, graph.node(name)) if rule else {}


def lifetimes(graph: Graph, fused: dict[str, list[str]] | None = None, virtual=()) -> Lifetimes:
    fused = fused or {}
    order = graph.order()
    position = {n: i for i, n in enumerate(order)}
    outputs = {n for _, n in graph.outputs}
    last_use = {
        n: len(order) if n in outputs else max((position[u] for u in graph.users(n)), default=position[n])
        for n in order
    }
    inner = {m for members in fused.values() for m in members[:-1]}
    shares = {members[-1]: head for head, members in fused.items()}  # the last value -> its head's slot
    for tail, head in shares.items():
        last_use[head] = max(last_use[head], last_use[tail])
    # a reshape is free: it names its operand's elements (its root's slot, kept live as long as the reshape)
    roots = reshape_roots(graph)
    for n, root in roots.items():
        last_use[root] = max(last_use[root], last_use[n])
    caller_owned = {roots.get(n, n) for label, n in graph.outputs if label == "scores"}  # the caller's buffer
    slots = [n for n in order
             if not (graph.op(n) in LEAF_OPS or graph.type(n).rank == 0 or n in caller_owned or n in inner
                     or n in virtual or n in roots or n in shares)]
    key = {n: arena_key(graph.type(n).dtype) for n in slots}
    taken = set(slots)
    leads: dict[tuple[str, str], int] = {}
    for n in slots:
        for operand, lead in alias_leads(graph, n).items():
            root = roots.get(operand, operand)
            if root in taken and last_use[root] == position[n] and key[root] == key[n]:
                leads[(n, root)] = min(lead, leads.get((n, root), lead))
    return Lifetimes(slots, key, {n: graph.type(n).size for n in slots},
                     {n: (position[n], last_use[n]) for n in slots}, shares, leads)


def _forbidden(n: str, offset: dict[str, int], life: Lifetimes) -> list[tuple[int, int]]:
    """The open intervals of starts where ``n`` would overlap a placed value live at once with it (an operand it
    may be written over: only above the lead)."""
    (n0, n1), size = life.live[n], life.length[n]
    forbidden = []
    for m, at in offset.items():
        (m0, m1) = life.live[m]
        if m1 < n0 or n1 < m0:
            continue
        if (n, m) in life.leads:  # n written over m: it starts at most the lead after m
            forbidden.append((at + life.leads[(n, m)], at + life.length[m]))
        elif (m, n) in life.leads:  # m written over n
            forbidden.append((at - size, at - life.leads[(m, n)]))
        else:
            forbidden.append((at - size, at + life.length[m]))
    return forbidden


def _starts(forbidden: list[tuple[int, int]]) -> list[int]:
    """The starts a value may take that touch a placed value (above or below it) or the arena's start, lowest
    first."""
    edges = {0, *(hi for _, hi in forbidden), *(lo for lo, _ in forbidden)}
    return sorted(c for c in edges if c >= 0 and not any(lo < c < hi for lo, hi in forbidden))


def _first_fit(names: list[str], life: Lifetimes) -> dict[str, int]:
    """Each value at the lowest offset where it overlaps no value live at once with it (but an operand it may be
    written over, above its lead), placed in the order of ``names``."""
    offset: dict[str, int] = {}
    for n in names:
        offset[n] = _starts(_forbidden(n, offset, life))[0]
    return offset


def _search(names: list[str], life: Lifetimes, best: dict[str, int], bound: int,
            budget: int = SEARCH_BUDGET) -> dict[str, int]:
    """A placement smaller than ``best`` if one is found trying every value's feasible starts (depth first, in the
    order of ``names``) within ``budget`` placements, stopping at ``bound``; else ``best`` (also for more than
    SEARCH_MAX_VALUES values)."""
    if len(names) > SEARCH_MAX_VALUES:  # one Python frame per value placed: an unrolled sequence's thousands
        return best
    top = max(best[n] + life.length[n] for n in names)
    offset: dict[str, int] = {}
    tries = 0

    def place(i: int) -> bool:
        nonlocal best, top, tries
        if i == len(names):
            best, top = dict(offset), max(offset[n] + life.length[n] for n in names)
            return top <= bound
        n = names[i]
        for start in _starts(_forbidden(n, offset, life)):
            if start + life.length[n] >= top or tries >= budget:
                break
            tries += 1
            offset[n] = start
            if place(i + 1):
                return True
            del offset[n]
        return False

    place(0)
    return best


def _orders(names: list[str], life: Lifetimes) -> list[list[str]]:
    """The placement orders tried: the schedule, its reverse (a chain of values each written over its operand
    drifts down the arena: placed from its end), and the largest values first (TFLite Micro's greedy), either
    tie order."""
    largest = sorted(names, key=lambda n: -life.length[n])
    return [names, names[::-1], largest, sorted(names[::-1], key=lambda n: -life.length[n])]


def plan(graph: Graph, fused: dict[str, list[str]] | None = None,
         virtual=()) -> tuple[dict[str, ArenaSlot], dict[str, int]]:
    """The slots and arena lengths; ``fused`` chains (head -> members): the last member shares its head's
    slot, the others take none; ``virtual``: vectors that take no slot (a backend computes them where
    they are read, e.g. the input clamp applied on read). Per arena, the smallest of the placement orders
    (``_orders``; the schedule's first where they tie), then, above the bound of the largest live set
    (``lower_bound``), a bounded search for a smaller one (``_search``)."""
    life = lifetimes(graph, fused, virtual)
    bounds = lower_bound(graph, fused, virtual)
    placed: dict[str, ArenaSlot] = {}
    arenas: dict[str, int] = {}
    for key in sorted(set(life.key.values())):
        names = [n for n in life.slots if life.key[n] == key]
        best = min((_first_fit(order, life) for order in _orders(names, life)),
                   key=lambda at: max(at[n] + life.length[n] for n in names))
        for order in _orders(names, life)[:3]:
            if max(best[n] + life.length[n] for n in names) <= bounds[key]:
                break
            best = _search(order, life, best, bounds[key])
        for n in names:
            placed[n] = ArenaSlot(key, best[n], life.length[n])
        arenas[key] = max(best[n] + life.length[n] for n in names)
    for tail, head in life.shares.items():
        if head in placed:
            placed[tail] = placed[head]
    return {n: placed[n] for n in graph.order() if n in placed}, dict(sorted(arenas.items()))


def lower_bound(graph: Graph, fused: dict[str, list[str]] | None = None, virtual=()) -> dict[str, int]:
    """Per arena, the largest live set any placement must hold (elements): at each step, the values live there,
    the one computed there overlapping its dying operand as far as its lead allows (the best such operand)."""
    life = lifetimes(graph, fused, virtual)
    bounds: dict[str, int] = {}
    steps = sorted({life.live[n][0] for n in life.slots})
    for step in steps:
        live = [n for n in life.slots if life.live[n][0] <= step <= life.live[n][1]]
        for key in {life.key[n] for n in live}:
            total = sum(life.length[n] for n in live if life.key[n] == key)
            saving = max((0, *(life.length[n] + life.length[o] - max(life.length[o] - lead, life.length[n])
                          for (n, o), lead in life.leads.items() if life.live[n][0] == step and life.key[n] == key)))
            bounds[key] = max(bounds.get(key, 0), total - saving)
    return dict(sorted(bounds.items()))


@register_pass
class PlanMemory(Pass):
    name = "plan_memory"
    description = "assign intermediate vectors to static arenas by liveness"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        a = graph.analyses
        a.fused = fused_chains(graph)
        a.memory_plan, a.arenas = plan(graph, a.fused)
        a.arena_bounds = lower_bound(graph, a.fused)
        used = sum(length * element_bytes(key) for key, length in a.arenas.items())
        bound = sum(length * element_bytes(key) for key, length in a.arena_bounds.items())
        naive = sum(length * element_bytes(key) for key, _, length in a.memory_plan.values())
        ctx.log.append(f"plan_memory: arenas {used} bytes (largest live set: {bound}; without reuse: {naive})")
        return graph
