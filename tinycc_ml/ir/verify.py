"""The verifier: rejects an ill-formed or ill-typed graph with a message naming the node and
the rule it breaks."""

from __future__ import annotations

import networkx as nx
import numpy as np

from tinycc_ml.errors import IRError
from tinycc_ml.ir.graph import IDENTIFIER, Graph
from tinycc_ml.ir.ops import OPS, TypeRuleError, precision_of
from tinycc_ml.ir.types import IDX

MAX_ELEMENTS = 1 << 28  # per value: 1 GiB of float32, as the file reader's default limit

ATTR_KINDS = {
    "int": lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, np.ndarray),
    "bound": lambda v: (isinstance(v, np.ndarray) and v.dtype.kind == "f")
    or (isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, bool)),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(isinstance(i, (int, np.integer)) for i in v),
}

INT32 = (-(2**31 - 1), 2**31 - 1)
SHIFT = (0, 31)  # a right shift of an int32 value in C: a count of 32 or more, or a negative one, is undefined
# Every integer attribute's legal range (op -> attribute -> inclusive bounds): an integer that the
# interpreters and the C use as a shift count, a table index or a product factor outside these would
# make them raise, read outside a table, or shift by an undefined count.
INT_ATTR_RANGES = {
    "matvec": {"shift": SHIFT}, "matvec_at": {"shift": SHIFT}, "sqdist": {"shift": SHIFT}, "sum": {"shift": SHIFT},
    "scale": {"factor_q": INT32, "factor_scale": (-62, 62)},
    "kvote": {"k": (1, INT32[1]), "n_classes": (1, MAX_ELEMENTS)},
    "sqdist_kvote": {"k": (1, INT32[1]), "n_classes": (1, MAX_ELEMENTS), "shift": SHIFT},
    "exp_lut": {"lo_q": INT32, "hi_q": INT32, "drop_bits": (0, 30), "low_bits": (0, 24), "hi_scale": SHIFT,
                "lo_scale": SHIFT},
    "tanh_lut": {"drop_bits": (0, 30), "in_max_q": (0, INT32[1]), "table_scale": SHIFT},
}


def _check_int_attrs(where: str, op: str, attrs: dict) -> None:
    for key, (lo, hi) in INT_ATTR_RANGES.get(op, {}).items():
        if key in attrs and not lo <= int(attrs[key]) <= hi:
            raise IRError(f"{where}: attribute {key} = {int(attrs[key])} is outside [{lo}, {hi}]")
    if op == "tanh_lut":  # the entries i and i + 1 around |x| <= in_max_q are read
        last = int(attrs["in_max_q"]) >> int(attrs["drop_bits"])
        if not 0 <= last < len(attrs["table"]):
            raise IRError(f"{where}: in_max_q >> drop_bits = {last} indexes past the table's {len(attrs['table'])} "
                          "entries")
    if op == "clip":  # an empty or NaN interval clamps nothing sensibly (found by the IR fuzzer: lo = inf)
        lo, hi = np.asarray(attrs["lo"], dtype=np.float64), np.asarray(attrs["hi"], dtype=np.float64)
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
            raise IRError(f"{where}: clip bounds lo = {np.ravel(lo)[:3].tolist()} and hi = "
                          f"{np.ravel(hi)[:3].tolist()} are not an interval (NaN, or lo above hi)")
    if op == "exp_lut":
        if int(attrs["lo_q"]) > int(attrs["hi_q"]):
            raise IRError(f"{where}: lo_q = {attrs['lo_q']} is above hi_q = {attrs['hi_q']}")
        t = (int(attrs["hi_q"]) - int(attrs["lo_q"])) >> int(attrs["drop_bits"])
        hi_len, lo_len = len(attrs["table_hi"]), len(attrs["table_lo"])
        if (t >> int(attrs["low_bits"])) >= hi_len or min(t, (1 << int(attrs["low_bits"])) - 1) >= lo_len:
            raise IRError(f"{where}: index range up to {t} does not fit tables of {hi_len} and {lo_len} entries "
                          f"(drop_bits {attrs['drop_bits']}, low_bits {attrs['low_bits']})")


def verify(graph: Graph, complete: bool = False) -> None:
    """Raise IRError describing the first broken rule, or return None. ``complete``: the graph is
    about to be run or turned into code, so ops still waiting for the pass that lowers them (a
    fixed-point exp before exp_table) are refused too."""
    g = graph.nx
    try:
        graph.order()  # Kahn's algorithm: it finds a cycle as networkx's test does, and the loop below reads the order
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(g)
        raise IRError(f"graph {graph.name}: cycle through {' -> '.join(a for a, _ in cycle)}") from None
    if not graph.outputs:
        raise IRError(f"graph {graph.name}: no outputs")
    nodes, succ, pred = g._node, g._succ, g._pred  # the DiGraph's own dicts (its views' values, read directly)
    for name in graph.order():
        data = nodes[name]
        where = f"node %{name} ({data.get('op')})"
        if not IDENTIFIER.match(name):
            raise IRError(f"{where}: name is not an identifier")
        op = OPS.get(data.get("op"))
        if op is None:
            raise IRError(f"{where}: unknown op")
        inputs = data["inputs"]
        if op.arity is None and inputs:
            raise IRError(f"{where}: takes no operands, has {len(inputs)}")
        least, most = (op.arity, op.arity) if isinstance(op.arity, int) else (op.arity or (0, 0))
        if op.arity is not None and not least <= len(inputs) <= most:
            raise IRError(f"{where}: takes {op.arity if least == most else f'{least} to {most}'} operands, has "
                          f"{len(inputs)}")
        for operand in inputs:
            if operand not in nodes:
                raise IRError(f"{where}: operand %{operand} is not defined")
            if name not in succ[operand]:
                raise IRError(f"{where}: operand %{operand} has no edge to its user")
        if pred[name].keys() != set(inputs):
            raise IRError(f"{where}: graph edges do not match its operand list")
        for i, operand in enumerate(inputs):  # the C of every other operand reads a plain array
            if nodes[operand]["op"] == "sparse_const" and i != op.sparse_operand:
                raise IRError(f"{where}: operand {i + 1} is the sparse_const %{operand}: only a mat-vec's matrix "
                              "may be stored sparse")
        if op.dense_const_operand is not None and nodes[inputs[op.dense_const_operand]]["op"] != "const":
            raise IRError(f"{where}: operand {op.dense_const_operand + 1} must be a dense const, not "
                          f"{nodes[inputs[op.dense_const_operand]]['op']} %{inputs[op.dense_const_operand]}")
        required = {k for k, kind in op.attrs.items() if not kind.endswith("?")}
        missing = required - set(data["attrs"])
        if missing:
            raise IRError(f"{where}: missing attribute(s) {', '.join(sorted(missing))}")
        extra = set(data["attrs"]) - set(op.attrs)
        if extra:
            raise IRError(f"{where}: unknown attribute(s) {', '.join(sorted(extra))}")
        for key, kind in op.attrs.items():
            if key not in data["attrs"]:
                continue
            if not ATTR_KINDS[kind.rstrip("?")](data["attrs"][key]):
                raise IRError(f"{where}: attribute {key} must be {kind}, got {data['attrs'][key]!r:.60}")
        _check_int_attrs(where, op.name, data["attrs"])
        declared = data["type"]
        if declared.size > MAX_ELEMENTS:  # C indexes with int, and no target holds that much
            raise IRError(f"{where}: type {declared} has {declared.size} elements, over the limit of {MAX_ELEMENTS}")
        try:
            inferred = op.infer([nodes[i]["type"] for i in inputs], data["attrs"], declared)
        except TypeRuleError as exc:
            raise IRError(f"{where}: {exc}") from None
        if inferred != declared:
            raise IRError(f"{where}: declared type {declared} but the {op.name} rule gives {inferred}")
        _check_precision(where, op, declared, [nodes[i]["type"] for i in inputs], complete)
    for label, node in graph.outputs:
        if node not in nodes:
            raise IRError(f"graph {graph.name}: output {label} refers to missing node %{node}")
        if not nodes[node]["inputs"] and nodes[node]["op"] != "input":
            raise IRError(f"graph {graph.name}: output {label} names %{node}, a constant: outputs are computed "
                          "from the input")
    _check_index_ranges(graph)


def _check_index_ranges(graph: Graph) -> None:
    """Every idx value that selects (matvec_at's matrix, take's entry) stays within its table for
    every input: idx values are intervals (a constant, a branch to a child of a node, an argmax)."""
    span: dict[str, tuple[int, int]] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.type.dtype != IDX:
            continue
        if node.op == "const":
            value = np.asarray(node.attrs["value"]).reshape(-1)
            if value.size != 1 or value.dtype.kind not in "iu" or value[0] < 0:
                raise IRError(f"node %{name} (const): an idx constant must be one integer >= 0")
            span[name] = (int(value[0]), int(value[0]))
        elif node.op == "branch" and node.inputs[0] in span:
            lo, hi = span[node.inputs[0]]
            span[name] = (2 * lo + 1, 2 * hi + 2)
        elif node.op == "argmax":
            span[name] = (0, graph.type(node.inputs[0]).shape[0] - 1)
    for name in graph.order():
        node = graph.node(name)
        if node.op != "matvec_at":
            continue
        table, selector = node.inputs[0], node.inputs[1]
        size = graph.type(table).shape[0]
        lo, hi = span.get(selector, (None, None))
        if lo is None:
            raise IRError(f"node %{name} ({node.op}): selector %{selector} has no provable range")
        if hi >= size:
            raise IRError(f"node %{name} ({node.op}): selector %{selector} reaches {hi}, but %{table} holds "
                          f"{size} entries")


def _check_precision(where: str, op, declared, operand_types, complete: bool) -> None:
    """An op used in a precision whose semantics (or, for a ``complete`` graph, C) it declares unsupported
    is refused here, before an interpreter or a code generator meets it."""
    if op.leaf or (op.lowered_by and not complete):
        return
    precision = precision_of(declared, operand_types)
    # C is needed only to turn the graph into code; the interpreters run what has semantics
    for facet in (precision, f"c_{precision}") if complete else (precision,):
        if facet in op.unsupported:
            raise IRError(f"{where}: op {op.name} is not supported in {precision} precision: "
                          f"{op.unsupported[facet]}")
