"""The op registry: one entry per op, holding every facet of its meaning.

Facets of an entry (``OpDef``):
- ``infer``: the type rule (operand types, attributes, declared type -> result type);
- ``evaluate``: float semantics for one sample (numpy, float64): the reference everything is
  diffed against; ``evaluate_rows`` optionally gives the same arithmetic vectorised over rows;
- ``fixed``: integer (fixed-point) semantics over rows (see ``FixedCall``), the definition the C
  code must reproduce bit for bit;
- ``interval``: the interval rule of range analysis (elementwise proven bounds);
- ``acc_bound``: the bound on the integer the op's 32-bit accumulator (or result) can reach,
  used by the overflow proofs of scale choice (see ``BoundCall``);
- ``output_shift`` (ops with an int32 accumulator): the right shift from the accumulator's integer to the
  result's scale, the one rule the interpreter, the C tables and every target kernel use;
- ``macs``: multiply-accumulates one evaluation performs (reports, cost models);
- ``c``: the op's portable C per precision, for the ops whose module holds it (the network ops of
  ``ir/ops/network/``, one module per op: semantics, C and front-end lowering in one place); the older ops'
  C lives in the code tables of ``tinycc_ml.codegen`` (c_float.py, c_fixed.py, c_network*.py). Both end in
  ``codegen.emitter.C_CODE`` (one table per precision; targets override entries).

An op without a facet must say why in ``unsupported`` ({facet: reason}); the registry test walks
every entry and fails on a facet that is neither present nor declared unsupported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tinycc_ml.ir.types import DType, TensorType

FACETS = ("float", "fixed", "interval", "acc_bound", "c_float", "c_fixed")


class TypeRuleError(Exception):
    """Raised by a type rule; the verifier adds the node's name."""


@dataclass
class FixedCall:
    """What integer semantics see: operand values as int64 arrays (computed values carry a
    leading row axis, constants do not), their types, the node's type and attributes."""

    ins: list[np.ndarray]
    in_types: list[TensorType]
    type: TensorType
    attrs: dict
    where: str  # "%name (op)", for overflow messages

    @property
    def bits(self) -> int:
        return self.type.dtype.bits if self.type.dtype.is_fixed else 32

    @property
    def scale(self) -> int:
        return self.type.dtype.scale

    def in_scale(self, i: int) -> int:
        return self.in_types[i].dtype.scale

    @property
    def shift(self) -> int:
        """The product shift of mat-vecs, distances and sums (0 when absent)."""
        return int(self.attrs.get("shift", 0))

    def broadcast_scalars(self) -> list[np.ndarray]:
        """Operands where a batched scalar meets a vector get a trailing axis to broadcast."""
        return [v[:, None] if t.rank == 0 and v.ndim == 1 and self.type.rank == 1 else v
                for v, t in zip(self.ins, self.in_types)]


@dataclass
class BoundCall:
    """What an overflow proof sees: the largest |int| each operand can hold (None for a constant,
    whose quantised values are in ``consts``), the operands' scales, the scale chosen for the
    result and its width. ``acc_bound`` returns (largest |int| before the final rounding shift,
    the scale of that integer)."""

    bounds: list[int | None]
    scales: list[int]
    consts: list[np.ndarray | None]
    attrs: dict
    out_scale: int
    out_bits: int
    in_types: list[TensorType]

    @property
    def saturated(self) -> tuple[int, int]:
        """The rule of an op whose result is saturated to its width anyway."""
        return 2 ** (self.out_bits - 1), self.out_scale


Interval = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class OpDef:
    name: str
    # None: the op takes no operands and gets its type from the node; (least, most): its last operands are optional
    # (a signal op's ring buffer, which some parameters leave empty)
    arity: int | tuple[int, int] | None
    infer: Callable[[list[TensorType], dict, TensorType | None], TensorType]
    evaluate: Callable[[list[np.ndarray], dict], np.ndarray]
    # name -> "int"|"float"|"str"|"array"|"ints"|"bound"; a trailing "?" marks an optional attribute
    # (fixed-point graphs carry shift amounts and tables that float graphs do not)
    attrs: dict[str, str] = field(default_factory=dict)
    doc: str = ""
    # the float semantics vectorised over rows: (operands, which carry a row axis, attrs, rows, result
    # rank) -> values, or None where this form does not apply (the interpreter then goes row by row)
    evaluate_rows: Callable[[list[np.ndarray], list[bool], dict, int, int], np.ndarray | None] | None = None
    fixed: Callable[[FixedCall], np.ndarray] | None = None
    interval: Callable[[dict, list[Interval], tuple[int, ...]], Interval] | None = None
    # a fused op's values computed but never stored (sqdist_kvote's distances): (attrs, operand intervals) ->
    # their interval, which the float32 range check and the input bound must see as they see a stored value
    inner_interval: Callable[[dict, list[Interval]], Interval] | None = None
    acc_bound: Callable[[BoundCall], tuple[int, int]] | None = None
    # how scale choice quantises a constant operand: "weights" (a mat-vec's matrix, own scale),
    # "prototypes" (an sqdist's matrix, at the point's scale), "factor" (a scalar attribute)
    constant_operand: str | None = None
    # the index of an operand that must be a dense ``const`` (its C reads the stored array, e.g. transposed)
    dense_const_operand: int | None = None
    # the index of the operand that may be a ``sparse_const`` (the mat-vec's matrix); no other operand may
    sparse_operand: int | None = None
    leaf: bool = False  # input and constants: no code of their own
    lowered_by: str | None = None  # the pass that replaces it in fixed-point graphs (exp -> exp_lut)
    unsupported: dict[str, str] = field(default_factory=dict)  # facet -> why the op has none
    # fixed point: (operand types, result type, attrs) -> right shift from the int32 accumulator to the result
    output_shift: Callable[[list[TensorType], TensorType, dict], int] | None = None
    # (operand types, stored non-zeros of each operand: a sparse constant's count, else None) -> MACs
    # (operand types, stored non-zeros of sparse operands, result type) -> multiply-accumulates
    macs: Callable[[list[TensorType], list[int | None], TensorType], int] | None = None
    # the op's portable C per precision ("float", "fixed"), held beside its semantics: (emitter, node) -> lines,
    # written against the emitter's interface; the code tables take it (codegen's ``C_CODE``)
    c: dict[str, Callable] = field(default_factory=dict)
    # in place: (graph, node) -> {operand name: lead}: the result may be written over that operand's elements (where
    # the operand dies at this node) when it starts at most ``lead`` elements after the operand (lead <= 0); every
    # implementation of the op, on every target, keeps to it; plan_memory consumes it (None: never in place)
    alias: Callable[[object, object], dict[str, int]] | None = None

    def supports(self, facet: str) -> bool:
        if facet in ("c_float", "c_fixed"):
            return facet[2:] not in self.unsupported
        return facet not in self.unsupported and getattr(self, "evaluate" if facet == "float" else facet) is not None


OPS: dict[str, OpDef] = {}


def precision_of(result: TensorType, operands: list[TensorType]) -> str:
    """Which semantics and code table a node uses: "fixed" when it or an operand is fixed point, quantised
    (TFLite's int8: integer semantics too) or a plain integer."""
    integer = [t.dtype.is_fixed or t.dtype.is_quantised or t.dtype.is_integer for t in (result, *operands)]
    return "fixed" if any(integer) else "float"


def node_output_shift(graph, name: str) -> int:
    """The right shift from node ``name``'s accumulator to its result's scale (its op's ``output_shift``)."""
    node = graph.node(name)
    rule = OPS[node.op].output_shift
    if rule is None:
        raise ValueError(f"op {node.op} has no accumulator shift")
    return rule([graph.type(i) for i in node.inputs], node.type, node.attrs)


def node_macs(graph, name: str) -> int:
    """Multiply-accumulates of one evaluation of node ``name`` (0 for ops without a ``macs`` facet)."""
    node = graph.node(name)
    rule = OPS[node.op].macs
    if rule is None:
        return 0
    stored = [len(graph.node(i).attrs["values"]) if graph.op(i) == "sparse_const" else None for i in node.inputs]
    return rule([graph.type(i) for i in node.inputs], stored, node.type)


def register_op(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    return op


# ---------------------------------------------------------------- type-rule helpers


def need(cond: bool, message: str) -> None:
    if not cond:
        raise TypeRuleError(message)


def float_or_fixed(t: TensorType, what: str) -> None:
    if t.dtype.kind not in ("f32", "fx"):  # the message formatted only when it is raised (type rules run often)
        need(False, f"{what} must be numeric (f32 or fixed), got {t.dtype}")


def same_numeric_kind(ts: list[TensorType]) -> None:
    kinds = {t.dtype.kind for t in ts}
    if len(kinds) != 1:
        need(False, f"operands mix element types {', '.join(str(t.dtype) for t in ts)}")


def result_dtype(ts: list[TensorType], declared: TensorType | None) -> DType:
    # A fixed-point result carries the scale the scale-selection pass chose, so it is declared.
    if ts[0].dtype.is_fixed:
        need(declared is not None and declared.dtype.is_fixed, "a fixed-point result needs a declared fixed type")
        return declared.dtype
    return ts[0].dtype


def infer_unary(ts, attrs, declared):
    (a,) = ts
    float_or_fixed(a, "operand")
    return TensorType(a.shape, result_dtype(ts, declared))


def monotone_interval(f):
    """The interval rule of an elementwise non-decreasing function."""
    return lambda attrs, ivs, shape: (f(ivs[0][0], attrs), f(ivs[0][1], attrs))
