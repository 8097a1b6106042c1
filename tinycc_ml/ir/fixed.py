"""The fixed-point reference interpreter: the definition of every op on integers, written so
that C reproduces it exactly (numpy int64 holds the values; every intermediate that C keeps in
an int32 is checked to fit one, so a passing run also checks the overflow proofs).

Conventions, shared with the C code generator:
- A value of type fx<b>.<s> holds an int of b bits whose real value is int * 2^-s.
- Products of two stored values are formed in 32 bits (int16 x int16 always fits).
- ``rshift(v, k)`` is a rounding shift: (v + 2^(k-1)) >> k for k > 0 (arithmetic shift, so
  halves round up, towards +inf); v * 2^-k for k < 0; v for k == 0.
- Results are saturated to their storage width (never wrapped).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError, IRError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import row_chunks
from tinycc_ml.ir.ops import COMPARISONS, kvote_counts, sparse_to_dense

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class FixedOverflow(IRError, AssertionError):
    """An int32 intermediate left its range: a bug in the overflow proofs, or a hand-written
    graph whose types cannot hold its values."""


def check32(v, where: str):
    v = np.asarray(v)
    if v.size and (v.min() < INT32_MIN or v.max() > INT32_MAX):
        raise FixedOverflow(f"{where}: int32 intermediate out of range [{v.min()}, {v.max()}]")
    return v


def rshift(v, k: int):
    v = np.asarray(v, dtype=np.int64)
    if k >= 63:  # |v| < 2^63 <= 2^(k-1): the rounded quotient is 0 (hand-written graphs get here)
        return np.zeros_like(v)
    if k <= -63:  # beyond int64: saturate, so the range checks report it
        return np.sign(v) * np.int64(2**63 - 1)
    if k > 0:
        return (v + (1 << (k - 1))) >> k
    if k < 0:
        return v * (1 << -k)
    return v


def saturate(v, bits: int):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return np.clip(np.asarray(v, dtype=np.int64), lo, hi)


def product_shift(graph: Graph, name: str) -> int:
    return int(graph.node(name).attrs.get("shift", 0))


def const_ints(graph: Graph, name: str) -> np.ndarray:
    node = graph.node(name)
    if node.op == "sparse_const":
        return sparse_to_dense(node.attrs).astype(np.int64)
    return node.attrs["value"].astype(np.int64)


MAX_ALIGN_SHIFT = 15


def align_shifts(sa: int, sb: int) -> tuple[int, int, int]:
    """Common scale for add/sub/cmp/select and the left shifts (negative: rounding right shifts)
    bringing each operand to it: the finer scale, unless that would shift a 16-bit value left by
    more than 15 bits (then the finer operand is rounded down to scale min + 15)."""
    c = min(max(sa, sb), min(sa, sb) + MAX_ALIGN_SHIFT)
    return c, c - sa, c - sb


def clip_bounds(lo: float, hi: float, dtype) -> tuple[int, int]:
    """Integer bounds of clip for an operand of type ``dtype``, within its storage range."""
    top = 2 ** (dtype.bits - 1)
    lo_q = np.maximum(np.ceil(np.asarray(lo) * 2.0**dtype.scale), -top).astype(np.int64)
    hi_q = np.minimum(np.floor(np.asarray(hi) * 2.0**dtype.scale), top - 1).astype(np.int64)
    return lo_q, hi_q


def exp_lut_index(x, attrs):
    """Table indices (hi, lo) of exp_lut for int inputs x: shared by the interpreter, the error
    analysis and (in C form) the code generator."""
    t = np.clip(np.asarray(x, dtype=np.int64), attrs["lo_q"], attrs["hi_q"]) - attrs["lo_q"]
    t = rshift(t, attrs["drop_bits"])
    return t >> attrs["low_bits"], t & ((1 << attrs["low_bits"]) - 1)


def tanh_lut_value(x, attrs):
    """tanh_lut before the output shift: linear interpolation between the entries around |x|,
    then the sign of x (the table holds tanh on [0, in_max])."""
    x = np.asarray(x, dtype=np.int64)
    a = np.minimum(np.abs(x), attrs["in_max_q"])
    i, f = a >> attrs["drop_bits"], a & ((1 << attrs["drop_bits"]) - 1)
    table = attrs["table"].astype(np.int64)
    y0, y1 = table[i], table[np.minimum(i + 1, len(table) - 1)]
    return np.sign(x) * (y0 + rshift((y1 - y0) * f, attrs["drop_bits"]))


def _eval_node(graph: Graph, name: str, vals: dict[str, np.ndarray]) -> np.ndarray:
    node = graph.node(name)
    op, t = node.op, node.type
    ins = [vals[i] for i in node.inputs]
    in_types = [graph.type(i) for i in node.inputs]
    where = f"%{name} ({op})"
    bits = t.dtype.bits if t.dtype.is_fixed else 32
    so = t.dtype.scale
    if op == "matvec":
        A, x = ins
        sa, sx = (tt.dtype.scale for tt in in_types)
        h = product_shift(graph, name)
        prods = check32(A[None, :, :] * x[:, None, :], where)
        acc = check32(np.sum(rshift(prods, h), axis=2), where)
        return saturate(rshift(acc, sa + sx - h - so), bits)
    if op == "matvec_at":
        M, k, x = ins
        sm, sx = in_types[0].dtype.scale, in_types[2].dtype.scale
        h = product_shift(graph, name)
        Mk = M[k] if k.ndim else np.broadcast_to(M[int(k)], (len(x),) + M.shape[1:])
        prods = check32(Mk * x[:, None, :], where)
        acc = check32(np.sum(rshift(prods, h), axis=2), where)
        return saturate(rshift(acc, sm + sx - h - so), bits)
    if op == "branch":
        k, s = ins
        return 2 * k + np.where(s.reshape(len(s), -1)[:, 0] > 0, 1, 2)
    if op == "sqdist":
        x, M = ins
        sx = in_types[0].dtype.scale
        h = product_shift(graph, name)
        d = rshift(check32(M[None, :, :] - x[:, :, None], where), h)
        acc = check32(np.sum(check32(d * d, where), axis=1), where)
        return saturate(rshift(acc, 2 * (sx - h) - so), bits)
    if op in ("add", "sub", "cmp", "select", "mul"):
        # a batched scalar meets a vector: give it a trailing axis to broadcast against
        ins = [v[:, None] if graph.type(i).rank == 0 and v.ndim == 1 and t.rank == 1 else v
               for i, v in zip(node.inputs, ins)]
    if op in ("add", "sub", "cmp", "select"):
        if op == "select":
            cond, a, b = ins
            ta, tb = in_types[1:]
        else:
            a, b = ins
            ta, tb = in_types
        c, la, lb = align_shifts(ta.dtype.scale, tb.dtype.scale)
        a, b = check32(rshift(a, -la), where), check32(rshift(b, -lb), where)
        if op == "cmp":
            return COMPARISONS[node.attrs["pred"]](a, b).astype(np.int64)
        if op == "select":
            return saturate(rshift(np.where(cond != 0, a, b), c - so), bits)
        r = check32(a + b if op == "add" else a - b, where)
        return saturate(rshift(r, c - so), bits)
    if op == "mul":
        (a, b), (ta, tb) = ins, in_types
        return saturate(rshift(check32(a * b, where), ta.dtype.scale + tb.dtype.scale - so), bits)
    if op == "scale":
        (a,), (ta,) = ins, in_types
        prod = check32(a * node.attrs["factor_q"], where)
        return saturate(rshift(prod, ta.dtype.scale + node.attrs["factor_scale"] - so), bits)
    if op == "clip":
        (a,), (ta,) = ins, in_types
        lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], ta.dtype)
        return saturate(rshift(np.clip(a, lo, hi), ta.dtype.scale - so), bits)
    if op == "tanh_clamp":
        (a,), (ta,) = ins, in_types
        sa = ta.dtype.scale
        one = rshift(np.int64(1), -sa) if sa >= 0 else np.int64(0)
        return saturate(rshift(np.clip(a, -one, one), sa - so), bits)
    if op == "tanh_lut":
        (a,) = ins
        return saturate(rshift(tanh_lut_value(a, node.attrs), node.attrs["table_scale"] - so), bits)
    if op == "exp_lut":
        (a,) = ins
        at = node.attrs
        hi_idx, lo_idx = exp_lut_index(a, at)
        prod = check32(at["table_hi"].astype(np.int64)[hi_idx] * at["table_lo"].astype(np.int64)[lo_idx], where)
        return saturate(rshift(prod, at["hi_scale"] + at["lo_scale"] - so), bits)
    if op == "sign":
        (a,) = ins
        return saturate(rshift(np.sign(a), -so), bits)
    if op == "sum":
        (a,), (ta,) = ins, in_types
        h = product_shift(graph, name)
        acc = check32(np.sum(rshift(a, h), axis=tuple(range(1, a.ndim))), where)
        return saturate(rshift(acc, ta.dtype.scale - h - so), bits)
    if op == "segment_min":
        (a,), (ta,) = ins, in_types
        offs = node.attrs["offsets"]
        mins = np.stack([a[:, lo:hi].min(axis=1) for lo, hi in zip(offs, offs[1:])], axis=1)
        return saturate(rshift(mins, ta.dtype.scale - so), bits)
    if op == "kvote":
        (a,) = ins
        at = node.attrs
        votes = np.stack([kvote_counts(row, at["labels"], int(at["k"]), int(at["n_classes"])) for row in a])
        return saturate(rshift(votes.astype(np.int64), -so), bits)
    if op in ("argmax", "argmin"):
        (a,) = ins
        return (np.argmax(a, axis=1) if op == "argmax" else np.argmin(a, axis=1)).astype(np.int64)
    if op == "take":
        table, i = ins
        return table[i] if table.ndim == 1 else table[np.arange(len(i)), i]
    raise NotImplementedError(f"no fixed-point semantics for op {op} ({where})")


def run_fixed(graph: Graph, Xq) -> dict[str, np.ndarray]:
    """Run an integer graph on rows of integer inputs (already at the input's scale).

    Returns every output stacked over rows. Constants are ints at their type's scale.
    """
    (input_name,) = graph.inputs()
    Xq = np.asarray(Xq)
    if Xq.ndim == 1:
        Xq = Xq[None, :]
    in_type = graph.type(input_name)
    if Xq.ndim != 2 or Xq.shape[1] != in_type.shape[0]:
        raise DataError(f"input has shape {Xq.shape}, expected (n, {in_type.shape[0]})")
    if not np.issubdtype(Xq.dtype, np.integer):
        raise DataError(f"fixed-point inputs must be integers, got {Xq.dtype}")
    parts = [_run_rows(graph, input_name, Xq[rows]) for rows in row_chunks(graph, len(Xq))]
    return {label: np.concatenate([p[label] for p in parts]) for label, _ in graph.outputs}


def _run_rows(graph: Graph, input_name: str, Xq: np.ndarray) -> dict[str, np.ndarray]:
    vals: dict[str, np.ndarray] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "input":
            vals[name] = saturate(Xq, node.type.dtype.bits)
        elif node.op in ("const", "sparse_const"):
            vals[name] = const_ints(graph, name)
        else:
            vals[name] = _eval_node(graph, name, vals)
    return {label: vals[node] for label, node in graph.outputs}


def quantise(X, scale: int, bits: int) -> np.ndarray:
    """Real rows to ints at ``scale``: round to nearest (halves up), saturate to ``bits``."""
    return saturate(np.floor(np.asarray(X, dtype=np.float64) * 2.0**scale + 0.5), bits)
