"""A mat-vec's store and its fused element-wise chain as one epilogue a kernel can run on its accumulators.

A dense mat-vec head h = sat16(rshift(acc, s)) (16-bit result, 1 <= s <= 30) followed by its fused chain
(plan_memory: an MLP layer's bias and relu) often equals

    E(y) = below if y < lo, above if y > hi, else y * 2^n,    y = (acc + c_r) >> s   (floor)

with c_r = off_r 2^s + 2^(s-1), off_r the chain's per-row constant (an add/sub of the head's scale): the
rounding and the bias join the kernels' row constants (mod 2^32, as the offset-binary corrections), and
the kernel runs one shift, two compares and the store per row. ``fold`` builds E and proves it: the
chain's own fixed-point semantics (the op registry's, as run_fixed runs them) evaluated on every int16
value of h for every row must give E(h + off_r), the saturated ends included (then every accumulator
gives the same value: a saturated h is at an end, where E is constant too); and acc + c_r fits int32
(|acc| <= sum_k |A_rk| * max|x|). Anything else (tables, products, an end E does not reach) is None:
the kernels keep their C epilogue then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.codegen.c_fixed import identity_chain
from tinycc_ml.ir.fixed import clip_bounds, const_ints
from tinycc_ml.ir.ops import OPS, FixedCall
from tinycc_ml.ir.ops.registry import node_output_shift

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Epilogue:
    """E(y) of the module doc for head ``head``; ``last``: the value stored (the chain's last, or the head);
    ``bias``: c_r per row (int64, added to the accumulator before the shift)."""

    head: str
    last: str
    shift: int
    n: int
    relu: bool  # below = 0, lo = 0; else below = -32768, lo = -32768 >> n (signed saturation)
    bias: np.ndarray
    amax: int  # the largest |acc + c_r| over the rows

    @property
    def hi(self) -> int:
        return 32767 >> self.n


def _chain_offsets(g, head: str, chain: list[str]) -> tuple[np.ndarray, int, bool] | None:
    """(per-row offset, total left shift n, relu) read off the chain's structure: [add/sub const]? [clip]?."""
    rows = g.type(head).shape[0]
    off = np.zeros(rows, np.int64)
    scale = g.type(head).dtype.scale
    steps = list(chain)
    prev = head
    if steps and g.op(steps[0]) in ("add", "sub"):
        node = g.node(steps[0])
        a, b = node.inputs
        if g.op(a) != "const" and g.op(b) == "const" and a == prev:
            c = b
        elif node.op == "add" and g.op(a) == "const" and b == prev:
            c = a
        else:
            return None
        if g.type(c).dtype.scale != scale or g.type(c).dtype.bits != 16:
            return None
        v = const_ints(g, c).astype(np.int64)
        off = np.broadcast_to(-v if node.op == "sub" else v, (rows,)).astype(np.int64)
        prev = steps.pop(0)
    relu = False
    if steps and g.op(steps[0]) == "clip":
        node = g.node(steps[0])
        if np.ndim(node.attrs["lo"]) or float(node.attrs["lo"]) != 0.0:
            return None
        relu = True
        prev = steps.pop(0)
    if steps:
        return None
    for m in [head, *chain]:
        if g.type(m).dtype.bits != 16 or g.type(m).dtype.kind != "fx":
            return None
    n = g.type(prev).dtype.scale - scale
    return off, n, relu


def x_interval(g, x_name: str) -> tuple[int, int]:
    """Integer bounds of the vector a mat-vec reads: a clip's (the input clamp, a relu), else int16's."""
    node = g.node(x_name)
    if node.op == "clip" and not np.ndim(node.attrs["lo"]) and not np.ndim(node.attrs["hi"]):
        lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], g.type(node.inputs[0]).dtype)
        n = node.type.dtype.scale - g.type(node.inputs[0]).dtype.scale  # a finer result: the bounds shifted
        if n >= 0:
            return max(-32768, int(lo) << n), min(32767, int(hi) << n)
    return -32768, 32767


CHUNK = 16  # rows verified together


def run_chain(g, head: str, chain: list[str], h: np.ndarray, r: int, count: int = CHUNK) -> np.ndarray:
    """The chain's values (the registry's integer semantics, as run_fixed runs them) for head values ``h`` (a
    column) in rows r .. r + count (the chain's per-row constants sliced to them)."""
    rows = g.type(head).shape[0]
    keep = slice(r, min(rows, r + count))
    vals = {head: np.repeat(h, keep.stop - keep.start, axis=1)}
    for m in chain:
        node = g.node(m)
        ins = []
        for i in node.inputs:
            if i in vals:
                ins.append(vals[i])
                continue
            c = const_ints(g, i).astype(np.int64)
            ins.append(c[keep] if c.ndim == 1 and len(c) == rows else c)
        call = FixedCall(ins, [g.type(i) for i in node.inputs], node.type, node.attrs, f"%{m} ({node.op})")
        vals[m] = OPS[node.op].fixed(call)
    return vals[chain[-1]] if chain else vals[head]


def fold(em, head: str, chain: list[str] | None = None) -> Epilogue | None:
    """fold_once, remembered per emitter (the kernels ask more than once)."""
    key = (head, None if chain is None else tuple(chain))
    if key not in em.folded_epilogues:
        em.folded_epilogues[key] = fold_once(em, head, chain)
    return em.folded_epilogues[key]


def fold_once(em, head: str, chain: list[str] | None = None) -> Epilogue | None:
    """The proven Epilogue of mat-vec ``head`` and its fused chain (or ``chain``: the element-wise steps a
    kernel's store takes, e.g. the output's bias) as the module doc says, or None."""
    g = em.graph
    node = g.node(head)
    if node.op != "matvec" or node.type.dtype.bits != 16 or g.op(node.inputs[0]) != "const":
        return None
    s = node_output_shift(g, head)
    if not 1 <= s <= 30:
        return None
    chain = list(g.analyses.fused.get(head, [])) if chain is None else list(chain)
    A = const_ints(g, node.inputs[0]).astype(np.int64)
    xlo, xhi = x_interval(g, node.inputs[1])
    # the accumulator's reach per row, and so the head's: where it never saturates, its ends need no check
    acc_hi = np.where(A > 0, A * xhi, A * xlo).sum(axis=1)
    acc_lo = np.where(A > 0, A * xlo, A * xhi).sum(axis=1)
    t_lo = np.maximum(-32768, (acc_lo + (1 << (s - 1))) >> s)
    t_hi = np.minimum(32767, (acc_hi + (1 << (s - 1))) >> s)
    shape = _chain_offsets(g, head, chain)
    if shape is None:
        return None
    off, n, relu = shape
    if not 0 <= n <= min(s, 14):  # y * 2^n stays within int32 for every y = acc >> s
        return None
    rows = len(off)
    lo, hi = (0, 32767 >> n) if relu else (-(32768 >> n), 32767 >> n)
    h = np.arange(-32768, 32768, dtype=np.int64)[:, None]
    for r in range(0, rows, CHUNK):  # a few rows at a time: 65,536 values each
        want = run_chain(g, head, chain, h, r)
        y = h + off[None, r:r + CHUNK]
        got = np.where(y < lo, 0 if relu else -32768, np.where(y > hi, 32767, y << n))
        reach = (h >= t_lo[None, r:r + CHUNK]) & (h <= t_hi[None, r:r + CHUNK])
        if not np.array_equal(np.where(reach, want, 0), np.where(reach, got, 0)):
            return None
        # the ends: a head that saturates is at an end of the table, where E must already be at its own end
        if not (np.all((want[0] == (0 if relu else -32768)) | (t_lo[r:r + CHUNK] > -32768))
                and np.all((want[-1] == 32767) | (t_hi[r:r + CHUNK] < 32767))):
            return None
    bias = (off << s) + (1 << (s - 1))
    amax = int(np.max(np.maximum(np.abs(acc_lo + bias), np.abs(acc_hi + bias))))
    if np.any(np.maximum(np.abs(acc_lo), np.abs(acc_hi)) + np.abs(bias) > INT32_MAX):
        return None
    return Epilogue(head, chain[-1] if chain else head, s, n, relu, bias, amax)


def output_bias(em, node) -> str | None:
    """The scores when they are ``node`` (a mat-vec with no fused chain) plus a constant, its only use: the
    kernel may store the scores with the bias folded in (the add's own code then stores nothing). Only for a
    mat-vec reading a fused chain's last value (a network's output layer): then it runs in the same function
    as the add, before it (a mat-vec of the input runs in the streaming entry points' feed(), the add in the
    tail that finish() runs too), and the add's code, emitted after it, sees the mat-vec stored it."""
    g = em.graph
    users = g.users(node.name)
    if len(users) != 1 or users[0] != em.scores_node or any(n == node.name for _, n in g.outputs):
        return None
    x = node.inputs[1]
    if not any(chain and chain[-1] == x and not identity_chain(em, chain) for chain in g.analyses.fused.values()):
        return None
    u = g.node(users[0])
    others = [i for i in u.inputs if i != node.name]
    if u.op != "add" or len(others) != 1 or g.op(others[0]) != "const" or u.type.shape != node.type.shape:
        return None
    return u.name
