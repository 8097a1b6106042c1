"""Broadcasting of TFLite's binary elementwise ops (MUL, SUB, MAXIMUM, MINIMUM, ...): numpy's rule, the shorter
shape padded with leading 1s and every axis equal or 1, as TFLite's BroadcastBinaryFunction6DSlow and
ProcessBroadcastShapes allow (up to 6 axes); the values with the interpreter's row axis, and the C loop.

The project's fixed point (fx, power-of-two scales; ``passes/network_scales.py`` chooses them): a computed operand
is fx8 or fx16 (the result's width); a constant one of SUB, MAXIMUM or MINIMUM is fx32 at the result's scale, of MUL
fx8 / fx16 at a scale of its own. SUB, MAXIMUM and MINIMUM round each operand right to the result's scale (halves up,
``arith.rshift``), then subtract or compare in int32; MUL multiplies the integers (exact: |a b| <= 2^30) and rounds
the product right from the sum of the operands' scales to the result's. The result is saturated to its width and
clamped by the fused activation."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.arith import check32, rshift, saturate
from tinycc_ml.ir.ops.c_primitives import clamp_to, float_activation
from tinycc_ml.ir.ops.pow2_arith import activation_bounds, check_shift, clamp_activation
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
    if a.dtype.is_fixed or b.dtype.is_fixed:
        return _pow2_result(ts, declared, name)
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


def rows_aligned(values, batched, rank: int) -> list[np.ndarray]:
    """Operands of a broadcast op over rows, each of ``rank`` + 1 dimensions (rows first): a computed operand's
    missing leading axes inserted after its row axis, a constant's before its own (numpy alone would align a
    computed operand's row axis with another's first axis)."""
    out = []
    for v, is_batched in zip(values, batched):
        v = np.asarray(v)
        if is_batched:
            out.append(v.reshape(v.shape[:1] + (1,) * (rank + 1 - v.ndim) + v.shape[1:]))
        else:
            out.append(v.reshape((1,) * (rank + 1 - v.ndim) + v.shape))
    return out


def with_rows_aligned(values: list[np.ndarray], types) -> list[np.ndarray]:
    """``with_rows``, then every operand given the same number of dimensions: missing axes after the row axis."""
    values = with_rows([np.asarray(v, dtype=np.int64) for v in values], types)
    width = max(v.ndim for v in values)
    return [v.reshape(v.shape[:1] + (1,) * (width - v.ndim) + v.shape[1:]) for v in values]


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Each output axis' step in an operand of ``shape`` (0 where the operand is broadcast along it)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    steps, step = [], 1
    for d in reversed(padded):
        steps.append(step if d != 1 else 0)
        step *= d
    return steps[::-1]


def c_loop(em, node, body) -> list[str]:
    """C visiting every output element of the broadcast op ``node``: ``body(a, b, ...)`` is the element's expression
    from its operands' element expressions. One flat loop where no operand is broadcast; else one loop per axis
    with each operand's offset stepped by its own strides."""
    out = node.type
    types = [em.graph.type(name) for name in node.inputs]
    y = em.var(node.name)
    if all(t.shape == out.shape for t in types):
        return [f"for (long i = 0; i < {out.size}; ++i)",
                f"    {y}[i] = {body(*(em.at(name, 'i') for name in node.inputs))};"]
    shape = out.shape or (1,)
    strides = [_strides(t.shape, shape) for t in types]
    lines, indent = ["{", "    long o = 0;"], "    "
    for axis, extent in enumerate(shape):
        lines.append(f"{indent}for (long d{axis} = 0; d{axis} < {extent}; ++d{axis})")
        indent += "    "

    def offset(strides):
        terms = [f"d{axis} * {s}" if s != 1 else f"d{axis}" for axis, s in enumerate(strides) if s]
        return " + ".join(terms) or "0"

    elements = (em.at(name, offset(steps)) for name, steps in zip(node.inputs, strides))
    lines += [f"{indent}{y}[o++] = {body(*elements)};", "}"]
    return lines


def c_float_arithmetic(symbol: str):
    """The float C of a broadcast binary op whose element is ``(a) symbol (b)``, then its fused activation."""
    def c(em, node) -> list[str]:
        activation = float_activation(em, node.attrs.get("activation", "none"))
        element = "({a}) " + symbol + " ({b})"
        return c_loop(em, node, lambda a, b: (f"{activation}({element.format(a=a, b=b)})" if activation
                                              else element.format(a=a, b=b)))
    return c


def _pow2_result(ts, declared, name: str):
    """The fixed-point result type: the computed operands' width, each shift to the result's scale in [0, 31]."""
    need(all(t.dtype.is_fixed for t in ts), f"{name}: operands mix {ts[0].dtype} and {ts[1].dtype}")
    widths = sorted({t.dtype.bits for t in ts})
    need(widths[0] in (8, 16) and (len(widths) == 1 or (widths[1] == 32 and name != "tensor_mul")),
         f"{name}: operands {ts[0].dtype} and {ts[1].dtype} (fx8 or fx16; a constant of SUB, MAXIMUM, MINIMUM may be "
         "fx32)")
    reference = ts[0] if ts[0].dtype.bits == widths[0] else ts[1]
    shape = broadcast_shape(ts[0].shape, ts[1].shape, name)
    result = network_result(reference, declared, shape, ts[0].layout if ts[0].rank >= ts[1].rank else ts[1].layout)
    for k, shift in enumerate(pow2_shifts(name, [t.dtype.scale for t in ts], result.dtype.scale)):
        check_shift(shift, f"{name} operand {k + 1}")
    return result


def pow2_shifts(name: str, scales: list[int], out_scale: int) -> list[int]:
    """The right shifts to the result's scale: of each operand, or (MUL) one of the product."""
    if name == "tensor_mul":
        return [sum(scales) - out_scale]
    return [s - out_scale for s in scales]


def pow2_fixed(call, name: str, combine) -> np.ndarray:
    """The fixed-point semantics of a binary op whose integer result is ``combine(a, b)`` of the operands rounded to
    the result's scale (MUL: ``combine`` is the product, rounded after)."""
    a, b = with_rows_aligned(call.ins, call.in_types)
    shifts = pow2_shifts(name, [t.dtype.scale for t in call.in_types], call.scale)
    if name == "tensor_mul":
        value = rshift(check32(a * b, call.where), shifts[0])
    else:
        value = check32(combine(rshift(a, shifts[0]), rshift(b, shifts[1])), call.where)
    return clamp_activation(saturate(value, call.bits), call.attrs.get("activation", "none"), call.type.dtype)


def _rshift_c(expr: str, k: int) -> str:
    """arith.rshift in int32 C (the proofs keep |expr| <= 2^30: the rounding constant cannot overflow)."""
    return f"(({expr} + INT32_C({1 << (k - 1)})) >> {k})" if k else expr


def c_pow2(em, node, combine) -> list[str]:
    """The C of ``pow2_fixed``: ``combine(a, b)`` of two int32 C expressions."""
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    shifts = pow2_shifts(node.op, [ta.scale, tb.scale], node.type.dtype.scale)
    lo, hi = activation_bounds(node.attrs.get("activation", "none"), node.type.dtype)
    clamp = clamp_to(em, node.type.dtype.bits)

    def element(a, b):
        a, b = f"(int32_t){a}", f"(int32_t){b}"
        if node.op == "tensor_mul":
            value = _rshift_c(f"({a} * {b})", shifts[0])
        else:
            value = combine(_rshift_c(a, shifts[0]), _rshift_c(b, shifts[1]))
        return f"{clamp}({value}, INT32_C({lo}), INT32_C({hi}))"

    return c_loop(em, node, element)


def last_axis_rows(em, node, kind: str, body: list[str]) -> list[str]:
    """C running ``body`` once per row of the last axis (softmax-like ops): ``in`` and ``out`` point at the row of
    ``kind`` elements; ``{depth}`` in a body line is the row's length."""
    depth = em.graph.type(node.inputs[0]).shape[-1]
    return ["{",
            f"    for (long r = 0; r < {node.type.size // depth}; ++r) {{",
            f"        const {kind} *in = {em.var(node.inputs[0])} + r * {depth};",
            f"        {kind} *out = {em.var(node.name)} + r * {depth};",
            *[f"        {line}".format(depth=depth) for line in body],
            "    }",
            "}"]
