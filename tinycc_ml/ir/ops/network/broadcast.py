"""Broadcasting of TFLite's binary elementwise ops (MUL, SUB, MAXIMUM, MINIMUM, ...): numpy's rule, the shorter
shape padded with leading 1s and every axis equal or 1, as TFLite's BroadcastBinaryFunction6DSlow and
ProcessBroadcastShapes allow (up to 6 axes); the values with the interpreter's row axis, and the C loop."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import float_activation
from tinycc_ml.ir.ops.registry import need
from tinycc_ml.ir.ops.windows import network_result, quantised_operand

MAX_RANK = 6


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], what: str) -> tuple[int, ...]:
    need(max(len(a), len(b)) <= MAX_RANK, f"{what}: operands of {len(a)} and {len(b)} dimensions (at most {MAX_RANK})")
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        need(False, f"{what}: shapes {list(a)} and {list(b)} do not broadcast")
        raise


def binary_result(ts, declared, name: str):
    """The result type of a broadcast binary op: float, int8 or int16 operands of one kind (no form in the project's
    fixed point yet), the broadcast shape with the higher-rank operand's layout."""
    a, b = ts
    need(not a.dtype.is_fixed and not b.dtype.is_fixed, f"{name} has no form in the project's fixed point yet: "
                                                       "compile the network at float or as TFLite's int8")
    need(a.dtype.kind == b.dtype.kind, f"operands mix {a.dtype} and {b.dtype}")
    bits = a.dtype.bits if a.dtype.is_quantised else 8
    result = network_result(a, declared, broadcast_shape(a.shape, b.shape, name),
                            a.layout if a.rank >= b.rank else b.layout, bits)
    if a.dtype.is_quantised:
        need(bits in (8, 16), f"operands must be qi8 or qi16, got {a.dtype}")
        quantised_operand(a, "first operand", bits)
        quantised_operand(b, "second operand", bits)
    return result


def with_rows(values: list[np.ndarray], types) -> list[np.ndarray]:
    """The operands of a FixedCall with a row axis each (a constant has none: it gets one of length 1)."""
    values = [np.asarray(v) for v in values]
    return [v if v.ndim == t.rank + 1 else v[None] for v, t in zip(values, types)]


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Each output axis' step in an operand of ``shape`` (0 where the operand is broadcast along it)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    steps, step = [], 1
    for d in reversed(padded):
        steps.append(step if d != 1 else 0)
        step *= d
    return steps[::-1]


def c_loop(em, node, body) -> list[str]:
    """C visiting every output element of the binary op ``node``: ``body(a, b)`` is the element's expression from
    its operands' element expressions. One flat loop where neither operand is broadcast; else one loop per axis
    with each operand's offset stepped by its own strides."""
    a_name, b_name = node.inputs
    ta, tb, out = em.graph.type(a_name), em.graph.type(b_name), node.type
    y = em.var(node.name)
    if ta.shape == tb.shape == out.shape:
        return [f"for (long i = 0; i < {out.size}; ++i)",
                f"    {y}[i] = {body(em.at(a_name, 'i'), em.at(b_name, 'i'))};"]
    shape = out.shape or (1,)
    sa, sb = _strides(ta.shape, shape), _strides(tb.shape, shape)
    lines, indent = ["{", "    long o = 0;"], "    "
    for axis, extent in enumerate(shape):
        lines.append(f"{indent}for (long d{axis} = 0; d{axis} < {extent}; ++d{axis})")
        indent += "    "

    def offset(strides):
        terms = [f"d{axis} * {s}" if s != 1 else f"d{axis}" for axis, s in enumerate(strides) if s]
        return " + ".join(terms) or "0"

    lines += [f"{indent}{y}[o++] = {body(em.at(a_name, offset(sa)), em.at(b_name, offset(sb)))};", "}"]
    return lines


def c_float_arithmetic(symbol: str):
    """The float C of a broadcast binary op whose element is ``(a) symbol (b)``, then its fused activation."""
    def c(em, node) -> list[str]:
        activation = float_activation(em, node.attrs.get("activation", "none"))
        element = "({a}) " + symbol + " ({b})"
        return c_loop(em, node, lambda a, b: (f"{activation}({element.format(a=a, b=b)})" if activation
                                              else element.format(a=a, b=b)))
    return c
