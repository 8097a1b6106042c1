"""Repeated node code as one C function: an unrolled recurrent layer's time steps (and any other nodes whose C is the
same but for the values it reads and writes) call one static function, each with its own values' pointers, instead
of one copy of the step's loops per time step. The C stays small (a 32-step bidirectional GRU: one step's code per
direction, not 64) and the compiler's time with it; each call computes what its inline copy computed, in the same
order (the function's body is that copy's text with the pointers as parameters).

A node's code is outlined where every value it reads or writes (besides constants, which it names as globals) is a
vector in an arena, its text names no other value, the input, the scores or a lane of the host's block, holds no
``return``, ``static`` or ``goto``; and where at least ``MIN_REPEATS`` nodes of the function have that text (or a
function of that text exists already: the host's block function and a split run reuse it). The functions are
``noinline`` where the compiler knows the attribute: inlined back, they would be the copies again.
"""

from __future__ import annotations

import re

MIN_REPEATS = 8  # code fewer nodes of a function share stays inline (a network's few alike activations)
ARG = "step_arg"  # the parameters' names: step_arg0, step_arg1, ...
# what outlined code may not name: another value's pointer, the input, the scores, the block's lane, control flow
# leaving the node, state kept in the body
COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
FOREIGN = re.compile(r"\bv_\w|\bx\b|\bscores\b|\blane_r\b|\breturn\b|\bgoto\b|\bstatic\b")


def outline_form(em, node, lines: list[str]) -> tuple[str, list[str], list[str]] | None:
    """(the code's text with its values' pointers as parameters, those pointers' C expressions, their arenas),
    or None where the node's code cannot be a function (see the module's docstring)."""
    g = em.graph
    fused = g.analyses.fused
    if node.name in fused or node.name == em.read_clamp or \
            any(node.name in members for members in fused.values()):
        return None
    plan = g.analyses.memory_plan
    exprs, arenas = [], []
    for name in dict.fromkeys((*node.inputs, node.name)):
        if g.op(name) == "const":
            continue
        root = em.reshape_roots.get(name, name)
        if root not in plan or em.is_scores(name) or g.type(name).rank == 0 or name in em.inline_values:
            return None
        expr = em.var(name)
        if expr not in exprs:
            exprs.append(expr)
            arenas.append(plan[root][0])
    text = "\n".join(lines)
    if not exprs or ARG in text:
        return None
    for k in sorted(range(len(exprs)), key=lambda k: -len(exprs[k])):  # a longer name first: v_a1 before v_a
        text = re.sub(_word(exprs[k]), f"{ARG}{k}", text)
    code = COMMENT.sub("", text)  # every parameter used by the code (not only named in a comment)
    if FOREIGN.search(text) or any(not re.search(rf"\b{ARG}{k}\b", code) for k in range(len(exprs))):
        return None
    return text, exprs, arenas


def _word(expr: str) -> str:
    """A pattern matching the C expression ``expr`` as a whole (a name: not inside a longer name)."""
    head = r"\b" if re.match(r"\w", expr) else ""
    tail = r"\b" if re.search(r"\w$", expr) else ""
    return head + re.escape(expr) + tail


def function_text(name: str, text: str, types: list[str], noinline: str) -> str:
    params = ", ".join(f"{t} *{ARG}{k}" for k, t in enumerate(types))
    body = "\n".join("    " + line if line else line for line in text.split("\n"))
    return f"{noinline} static void {name}({params})\n{{\n{body}\n}}\n"


def noinline_macro(macro: str) -> str:
    return (f"#if defined(__GNUC__)\n#define {macro} __attribute__((noinline))\n#else\n#define {macro}\n#endif\n")
