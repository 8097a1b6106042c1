"""Printing and parsing the IR text form (grammar in ir.lark).

``parse_graph(print_graph(g))`` gives back a graph structurally equal to ``g``: node names,
order, types and attributes (arrays keep their dtype and exact values: float32 elements are
printed with the shortest text that reads back to the same float32).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import lark
import numpy as np

from tinycc_ml.errors import IRParseError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.types import PER_TENSOR, DType, TensorType, parse_dtype

TEXT_SCALE_LIMIT = 62  # far beyond any scale the compiler chooses; keeps 2^scale and shifts exact
ARRAY_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16")


def _format_number(value) -> str:
    if isinstance(value, (np.floating, float)):
        if isinstance(value, np.float32):
            return np.format_float_scientific(value, unique=True, trim="-")
        return repr(float(value))
    return str(int(value))


def _format_attr(value, elide: bool) -> str:
    if isinstance(value, np.ndarray):
        dims = ",".join(str(d) for d in value.shape)
        if elide and value.size > 8:
            return f"array<{value.dtype}>({dims})[...]"
        flat = value.reshape(-1)
        if value.dtype.kind == "f":
            body = ", ".join(_format_number(v) for v in flat)
        else:
            body = ", ".join(str(int(v)) for v in flat)
        return f"array<{value.dtype}>({dims})[{body}]"
    if isinstance(value, bool):
        raise TypeError("bool attributes are not part of the text form")
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_attr(v, elide) for v in value) + "]"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return _format_number(value)
    raise TypeError(f"attribute value {value!r} has no text form")


def print_graph(graph: Graph, elide_constants: bool = False) -> str:
    """The text form. With ``elide_constants`` large arrays print as ``[...]`` (not parseable)."""
    lines = [f"graph {graph.name} {{"]
    for node in graph.nodes():
        operands = ", ".join(f"%{i}" for i in node.inputs)
        attrs = ""
        if node.attrs:
            items = ", ".join(f"{k} = {_format_attr(v, elide_constants)}" for k, v in sorted(node.attrs.items()))
            attrs = f" {{{items}}}"
        lines.append(f"  %{node.name} = {node.op}({operands}){attrs} : {node.type}")
    for label, node in graph.outputs:
        lines.append(f"  output {label} = %{node}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = (Path(__file__).with_name("ir.lark")).read_text()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def _parse_number(token: str):
    if any(c in token for c in ".eEn"):
        return float(token)
    return int(token)


class _Build(lark.visitors.Transformer):
    def number(self, items):
        return _parse_number(str(items[0]))

    def string(self, items):
        return json.loads(str(items[0]))

    def list(self, items):
        return [i for i in items if i is not None]

    def dims(self, items):
        return tuple(int(i) for i in items if i is not None)

    def plain_dtype(self, items):
        (token,) = items
        try:
            return parse_dtype(str(token))
        except ValueError as exc:
            raise _SemanticError(token, str(exc)) from None

    def per_tensor(self, items):
        return PER_TENSOR, [items[0]]

    def per_axis(self, items):
        axis, *scales = items
        return int(axis), [s for s in scales if s is not None]

    def quantised_dtype(self, items):
        token, (axis, scales), zero_point = items
        try:
            bits = int(str(token)[2:])
            if any(float(np.float32(s)) != float(s) for s in scales):
                raise ValueError("quantisation scales must be float32 values (TFLite stores float32)")
            return DType("qi", bits, 0, tuple(float(s) for s in scales), int(zero_point), axis)
        except ValueError as exc:
            raise _SemanticError(token, str(exc)) from None

    def array(self, items):
        dtype, dims, *numbers = items
        numbers = [n for n in numbers if n is not None]
        if str(dtype) not in ARRAY_DTYPES:
            raise _SemanticError(dtype, f"array element type {dtype!s} is not one of {', '.join(ARRAY_DTYPES)}")
        size = math.prod(dims) if dims else 1
        if len(numbers) != size:
            raise _SemanticError(dtype, f"array of shape {dims} needs {size} values, has {len(numbers)}")
        kind = np.dtype(str(dtype))
        try:
            if kind.kind == "f":
                with np.errstate(over="raise"):
                    values = np.array([str(n) for n in numbers], dtype=np.float64).astype(kind)
            else:
                ints = [int(str(n)) for n in numbers]
                info = np.iinfo(kind)
                wrong = next((i for i in ints if not info.min <= i <= info.max), None)
                if wrong is not None:
                    raise _SemanticError(dtype, f"{wrong} does not fit in {kind}")
                values = np.array(ints, dtype=kind)
        except ValueError:
            raise _SemanticError(dtype, f"an {kind} array holds a value that is not an integer") from None
        except FloatingPointError:
            raise _SemanticError(dtype, f"a value of the array does not fit in {kind}") from None
        return values.reshape(dims)


class _SemanticError(Exception):
    def __init__(self, token, message):
        super().__init__(message)
        self.line = getattr(token, "line", None) or getattr(getattr(token, "meta", None), "line", "?")
        self.column = getattr(token, "column", None) or getattr(getattr(token, "meta", None), "column", "?")
        self.message = message


def parse_graph(text: str, source: str = "<ir>") -> Graph:
    """Parse the text form; errors carry ``source``, line and column."""
    try:
        tree = _parser().parse(text)
        tree = _Build().transform(tree)
        return _to_graph(tree)
    except lark.exceptions.UnexpectedInput as exc:
        context = exc.get_context(text, span=30).splitlines()[0].strip() if text else ""
        raise IRParseError(f"{source}: line {exc.line}, column {exc.column}: unexpected input near {context!r}") \
            from None
    except lark.exceptions.VisitError as exc:
        inner = exc.orig_exc
        if isinstance(inner, _SemanticError):
            raise IRParseError(f"{source}: line {inner.line}, column {inner.column}: {inner.message}") from None
        # any other failure while building a value is still a fault of the text at that node
        meta = getattr(exc.obj, "meta", None)
        where = f"line {getattr(meta, 'line', '?')}, column {getattr(meta, 'column', '?')}"
        raise IRParseError(f"{source}: {where}: bad {exc.rule}: {inner}") from None
    except _SemanticError as exc:
        raise IRParseError(f"{source}: line {exc.line}, column {exc.column}: {exc.message}") from None
    except RecursionError:
        raise IRParseError(f"{source}: nested too deeply to parse") from None
    except lark.exceptions.LarkError as exc:
        raise IRParseError(f"{source}: {' '.join(str(exc).split())[:200]}") from None


def _to_graph(tree) -> Graph:
    name_token, *stmts = tree.children
    graph = Graph(str(name_token))
    outputs = []
    for stmt in stmts:
        if stmt.data == "output":
            label, value = stmt.children
            outputs.append((str(label), str(value)[1:], value))
            continue
        value, op, operands, attrs, type_tree = stmt.children
        name = str(value)[1:]
        if name in graph:
            raise _SemanticError(value, f"%{name} is defined twice")
        if str(op) not in OPS:
            raise _SemanticError(op, f"unknown op {op!s}")
        inputs = []
        for operand in operands.children:
            if operand is None:
                continue
            if str(operand)[1:] not in graph:
                raise _SemanticError(operand, f"{operand!s} is used before it is defined")
            inputs.append(str(operand)[1:])
        attr_dict = {}
        if attrs is not None:
            for attr in attrs.children:
                if attr is None:
                    continue
                key, val = attr.children
                attr_dict[str(key)] = val
        dtype, dims, layout = type_tree.children
        dtype_token = type_tree  # its position: where the type starts
        try:
            declared = TensorType(dims, dtype, str(layout) if layout is not None else "")
        except ValueError as exc:
            raise _SemanticError(dtype_token, str(exc)) from None
        if declared.dtype.is_fixed and abs(declared.dtype.scale) > TEXT_SCALE_LIMIT:
            raise _SemanticError(dtype_token, f"fixed-point scale {declared.dtype.scale} is outside "
                                              f"+-{TEXT_SCALE_LIMIT}")
        # Nodes are placed as written; the verifier, not the parser, judges their types.
        graph._order += 1
        graph.nx.add_node(name, op=str(op), inputs=tuple(inputs), attrs=attr_dict, type=declared,
                          order=graph._order)
        for operand in inputs:
            graph.nx.add_edge(operand, name)
    for label, node, token in outputs:
        if node not in graph:
            raise _SemanticError(token, f"output {label} refers to undefined %{node}")
        graph.set_output(label, node)
    return graph
