"""Cortex-M4 / M33 kernel for TFLite's int8 BATCH_MATMUL (tinycc_ml/ir/ops/network/batch_matmul.py), bit for bit
the shared C's and so tflite-micro's: out = requantise(sum_k (l - zl)(r - zr)) + zo per broadcast batch.

Each batch's product is ``m4_network``'s matrix function of kind "2x2w16": the lhs rows are its columns (two at
a time, widened by SXTB16 once for all outputs), the rhs columns its channels as int16 words (r - zr: lanes
k 4t, 4t + 2, then 4t + 1, 4t + 3, as SXTB16 splits an input word), per 16 multiply-accumulates one LDM of
the two columns, two LDRD of weights and 8 SMLAD; the lhs zero point folded into a per-column bias,
-zl sum_k (r - zr). A constant rhs (one matrix for every batch) is arranged so at compile time, in flash. A
computed one is arranged at run time per batch (``m4_bmm_<layer>_rhs``, skipped where the batch reuses the
last matrix): for a row-major rhs (k, n) two columns' bytes of rows k and k + 2 read as halfwords make one word
whose SXTB16 splits are both columns' weight words; for adj_y (n, k) a column's word splits in place; SSUB16
takes zr off, SMLAD by 0x00010001 sums each word's lanes into the column's bias. lhs rows not contiguous in
words (adj_x, or k not a multiple of 4) are copied into a buffer first (the padding's weights are 0).

Requantisation as the matrix function's epilogue (``m4_network``: SMMLAR where the accumulator is proven
small, from the int8 ranges; else TFLite's int64 form), one multiplier for the layer (per tensor).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_elementwise import operands_ok
from tinycc_ml.arm.m4_network import (
    MAX_RIGHT_SHIFT,
    SMALL_ACC,
    channel_params,
    fold_zero_point,
    matrix_function,
    simd_helpers,
    tflite_int8,
)
from tinycc_ml.target import LayerQuantisation, Node, batch_multiplier, matrix_shape


def _batch_steps(shape: tuple[int, ...], batch: tuple[int, ...]) -> list[int]:
    """Each output batch axis' step in an operand's elements (0 where the operand is broadcast along it)."""
    padded = (1,) * (len(batch) - (len(shape) - 2)) + tuple(shape[:-2])
    steps, step = [], shape[-2] * shape[-1]
    for d in reversed(padded):
        steps.append(step if d != 1 else 0)
        step *= d
    return steps[::-1]


def _plan(em, node: Node) -> dict | None:
    g = em.graph
    lhs, rhs = node.inputs
    tl, tr, out = g.type(lhs), g.type(rhs), node.type.dtype
    m, k = matrix_shape(tl, bool(node.attrs["adj_x"]))
    n = node.type.shape[-1]
    mult, shift = batch_multiplier(tl.dtype, tr.dtype, out)
    if mult <= 0 or not -MAX_RIGHT_SHIFT <= shift <= 30:
        return None
    zl, zr = int(tl.dtype.zero_point), int(tr.dtype.zero_point)
    const_rhs = g.op(rhs) == "const" and all(s == 0 for s in _batch_steps(tr.shape, node.type.shape[:-2]))
    if g.op(lhs) == "const" and const_rhs:
        return None  # folded by the compiler; nothing to run
    if const_rhs:
        w = _operand_matrix(np.asarray(g.node(rhs).attrs["value"], np.int64), tr.shape, bool(node.attrs["adj_y"]))
        w = w - zr  # n x k
    else:
        w = None
    # |acc| <= |zl| sum |w| + 128 sum |w|, |w| <= 255 where the rhs is computed
    reach = np.abs(w).sum(axis=1) if w is not None else np.full(n, 255 * k, np.int64)
    bound = (abs(zl) + 128) * reach
    return {"m": m, "k": k, "n": n, "zl": zl, "zr": zr, "mult": mult, "shift": shift, "w": w, "bound": bound,
            "zo": int(out.zero_point)}


def _operand_matrix(value: np.ndarray, shape, adj_y: bool) -> np.ndarray:
    """A constant rhs of one matrix as n x k (each output column's k values in a row)."""
    mat = value.reshape(shape[-2], shape[-1])
    return mat if adj_y else mat.T


def batch_matmul_claims(em, node: Node) -> bool:
    return tflite_int8(em, node) and operands_ok(em, node) and _plan(em, node) is not None


def rhs_words(w: np.ndarray) -> tuple[np.ndarray, int]:
    """n x k int16 weights as the "2x2w16" matrix function reads them: k padded to a multiple of 4 and n to a
    multiple of 2 with zeros; per pair of channels and per 4 inputs t, channel 0's words (lanes k 4t, 4t + 2),
    (4t + 1, 4t + 3), then channel 1's. Returns (int32 words, k / 4 rounded up)."""
    n, k = w.shape
    kp, np2 = -(-k // 4) * 4, -(-n // 2) * 2
    rows = np.zeros((np2, kp), np.int16)
    rows[:n, :k] = w
    r = rows.reshape(np2, kp // 4, 4)
    halves = np.stack([r[:, :, [0, 2]], r[:, :, [1, 3]]], axis=2)  # n, t, word, lane
    words = np.ascontiguousarray(halves).view("<i4").reshape(np2 // 2, 2, kp // 4, 2)
    return np.ascontiguousarray(words.transpose(0, 2, 1, 3)).reshape(-1), kp // 4


def _splat16(v: int) -> int:
    return ((v & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)


def _rhs_function(em, node: Node, plan: dict, w_sym: str, b_sym: str, adj_y: bool) -> str:
    """The run-time arrangement of one batch's rhs into the weight words (w_sym) and per-column biases (b_sym,
    -zl sum_k (r - zr)): rhs_words' layout."""
    rd, odd = simd_helpers(em)
    symbol = em.sym(f"m4_bmm_{node.name}_rhs")
    k, n, zl, zr = plan["k"], plan["n"], plan["zl"], plan["zr"]
    kw4, full = -(-k // 4), k // 4
    z2 = _splat16(zr)

    def off(s: str) -> str:  # the zero point taken off both lanes
        return f"__ssub16({s}, {z2})" if zr else s

    def element(c: str, kk: int) -> str:
        return f"r[{c} * {k} + {kk}]" if adj_y else f"r[{kk} * {n} + {c}]"

    def tail(c: str, at: int, acc: str) -> list[str]:
        """The last, partial group of 4 inputs of column c (k not a multiple of 4): its two words from scalars
        into d[at], d[at + 1], the inputs beyond k weighing 0."""
        if full == kw4:
            return []
        v = [f"((int32_t){element(c, 4 * full + i)} - {zr})" if 4 * full + i < k else "0" for i in range(4)]
        return [f"{{ const int32_t v0 = {v[0]}, v1 = {v[1]}, v2 = {v[2]}, v3 = {v[3]};",
                f"  d[{at}] = (int32_t)(((uint32_t)v0 & 0xFFFFu) | ((uint32_t)v2 << 16));",
                f"  d[{at + 1}] = (int32_t)(((uint32_t)v1 & 0xFFFFu) | ((uint32_t)v3 << 16));",
                f"  {acc} += v0 + v1 + v2 + v3; }}"]

    lines = [f"/* %{node.name}: one batch's rhs as int16 weight words (r - zr), per column -zl sum (r - zr) */",
             f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *r)', "{",
             f"    int32_t *w = {w_sym}, *bias = {b_sym};"]
    if adj_y:  # rows of k: a column's word splits in place
        lines += [f"    for (int32_t c = 0; c < {n}; ++c) {{",
                  f"        int32_t *d = w + (c >> 1) * {4 * kw4} + (c & 1) * 2;",
                  f"        const int8_t *p = r + c * {k};",
                  "        int32_t s = 0;",
                  f"        for (int32_t t = 0; t < {full}; ++t, p += 4) {{",
                  f"            const int32_t x = {rd}(p);",
                  f"            const int32_t e = {off('__sxtb16(x)')}, o = {off(f'{odd}(x)')};",
                  "            d[4 * t] = e;",
                  "            d[4 * t + 1] = o;",
                  "            s = __smlad(e, 0x00010001, s);",
                  "            s = __smlad(o, 0x00010001, s);",
                  "        }",
                  *("        " + line for line in tail("c", 4 * full, "s")),
                  f"        bias[c] = {-zl} * s;",
                  "    }"]
    else:  # row-major (k, n): two columns' bytes of rows 4t, 4t + 2 (and 4t + 1, 4t + 3) as halfwords
        lines += [f"    for (int32_t c = 0; c < {n - n % 2}; c += 2) {{",
                  f"        int32_t *d = w + (c >> 1) * {4 * kw4};",
                  "        const int8_t *p = r + c;",
                  "        int32_t s0 = 0, s1 = 0;",
                  f"        for (int32_t t = 0; t < {full}; ++t, p += {4 * n}, d += 4) {{",
                  "            uint16_t h0, h1, h2, h3;",
                  f"            __builtin_memcpy(&h0, p, 2); __builtin_memcpy(&h1, p + {n}, 2);",
                  f"            __builtin_memcpy(&h2, p + {2 * n}, 2); __builtin_memcpy(&h3, p + {3 * n}, 2);",
                  "            const int32_t x = (int32_t)((uint32_t)h0 | ((uint32_t)h2 << 16));",
                  "            const int32_t y = (int32_t)((uint32_t)h1 | ((uint32_t)h3 << 16));",
                  f"            const int32_t a0 = {off('__sxtb16(x)')}, a1 = {off('__sxtb16(y)')};",
                  f"            const int32_t b0 = {off(f'{odd}(x)')}, b1 = {off(f'{odd}(y)')};",
                  "            d[0] = a0; d[1] = a1; d[2] = b0; d[3] = b1;",
                  "            s0 = __smlad(a0, 0x00010001, s0); s0 = __smlad(a1, 0x00010001, s0);",
                  "            s1 = __smlad(b0, 0x00010001, s1); s1 = __smlad(b1, 0x00010001, s1);",
                  "        }",
                  *("        " + line for line in tail("c", 0, "s0")),
                  *("        " + line for line in tail("(c + 1)", 2, "s1")),
                  f"        bias[c] = {-zl} * s0;",
                  f"        bias[c + 1] = {-zl} * s1;",
                  "    }"]
        if n % 2:  # the last column alone
            c = n - 1
            lines += ["    {",
                      f"        int32_t *d = w + {(c >> 1) * 4 * kw4};",
                      "        int32_t s = 0;",
                      f"        for (int32_t t = 0; t < {full}; ++t, d += 4) {{",
                      f"            const int8_t *p = r + t * {4 * n} + {c};",
                      f"            const int32_t v0 = (int32_t)p[0] - {zr}, v1 = (int32_t)p[{n}] - {zr};",
                      f"            const int32_t v2 = (int32_t)p[{2 * n}] - {zr}, v3 = (int32_t)p[{3 * n}] - {zr};",
                      "            d[0] = (int32_t)(((uint32_t)v0 & 0xFFFFu) | ((uint32_t)v2 << 16));",
                      "            d[1] = (int32_t)(((uint32_t)v1 & 0xFFFFu) | ((uint32_t)v3 << 16));",
                      "            s += v0 + v1 + v2 + v3;",
                      "        }",
                      *("        " + line for line in tail(str(c), 0, "s")),
                      f"        bias[{c}] = {-zl} * s;",
                      "    }"]
    if n % 2:  # the pair's second column: weights 0 (the buffers are shared with other layers)
        base = (n >> 1) * 4 * kw4
        lines += [f"    for (int32_t t = 0; t < {kw4}; ++t) {{ w[{base + 2} + 4 * t] = 0; "
                  f"w[{base + 3} + 4 * t] = 0; }}",
                  f"    bias[{n}] = 0;"]
    lines += ["}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def _pack_function(em, node: Node, plan: dict, adj_x: bool) -> tuple[str, str]:
    """(the copy of one batch's lhs rows into whole words, its buffer): row i's k values kp bytes apart."""
    m, k = plan["m"], plan["k"]
    kp = -(-k // 4) * 4
    buf = em.sym("m4_bmm_rows")
    em.scratch(buf, "uint32_t", m * kp // 4)
    symbol = em.sym(f"m4_bmm_{node.name}_rows")
    at = f"a[j * {m} + i]" if adj_x else f"a[i * {k} + j]"
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: one batch's lhs rows, {k} values each, {kp} bytes apart */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *a, int8_t *rows)', "{",
        f"    for (int32_t i = 0; i < {m}; ++i, rows += {kp})",
        f"        for (int32_t j = 0; j < {k}; ++j)",
        f"            rows[j] = {at};",
        "}", ""])
    return symbol, buf


def batch_matmul(em, node: Node) -> list[str] | None:
    plan = _plan(em, node)
    if plan is None or not operands_ok(em, node):
        return None
    g = em.graph
    lhs, rhs = node.inputs
    adj_x, adj_y = bool(node.attrs["adj_x"]), bool(node.attrs["adj_y"])
    m, k, n = plan["m"], plan["k"], plan["n"]
    kw4 = -(-k // 4)
    batch = node.type.shape[:-2]
    q = LayerQuantisation(plan["zl"], np.array([plan["mult"]] * n), np.array([plan["shift"]] * n), plan["zo"],
                          -128, 127)
    small = plan["bound"] * (1 << max(plan["shift"], 0)) < SMALL_ACC
    fold = bool(small.all()) and fold_zero_point(plan["bound"], q.multipliers, q.shifts, plan["zo"])
    mode = "fold" if fold else "plain" if small.all() else "wide"
    wide = ~small if plan["w"] is not None else np.full(n, not small.all())
    if plan["w"] is not None:  # a constant rhs: its words and biases in flash
        bias = -plan["zl"] * plan["w"].sum(axis=1)
        params = channel_params(bias, q.multipliers, q.shifts, 2, mode, wide, plan["zo"] if fold else None)
        words, _ = rhs_words(plan["w"])
        w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), words, "int32_t",
                                   f"%{node.name}: the rhs as {n} columns of {k} int16 weights (r - zr), "
                                   "pairs of columns interleaved")
        p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                                   f"%{node.name}: per column {', '.join(params.stored)} (m4_rq)")
        prep = None
    else:  # a computed rhs: arranged per batch into buffers
        params = channel_params(np.zeros(n, np.int64), q.multipliers, q.shifts, 2, mode, wide,
                                plan["zo"] if fold else None)
        if params.per_channel != 1:
            return None
        w_sym, p_sym = em.sym("m4_bmm_w"), em.sym("m4_bmm_bias")
        em.scratch(w_sym, "int32_t", (-(-n // 2) * 2) * 2 * kw4)
        em.scratch(p_sym, "int32_t", -(-n // 2) * 2)
        prep = _rhs_function(em, node, plan, w_sym, p_sym, adj_y)
    packed = adj_x or k % 4 != 0
    mm = matrix_function(em, f"{node.name}", q, "2x2w16", w_sym, params, p_sym, kw4, n,
                         4 * kw4 if packed else k)
    pack = _pack_function(em, node, plan, adj_x) if packed else None
    sl, sr = _batch_steps(g.type(lhs).shape, batch), _batch_steps(g.type(rhs).shape, batch)
    symbol = em.sym(f"m4_bmm_{node.name}")
    lines = [f"/* %{node.name}: TFLite's int8 BATCH_MATMUL, {' x '.join(map(str, batch)) or 1} batches of "
             f"{m}x{k} by {k}x{n} */",
             f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *a, const int8_t *b, '
             "int8_t *out)", "{"]
    if prep is not None:
        lines.append("    const int8_t *arranged = 0;  /* the rhs whose words the buffers hold */")
    else:
        lines.append("    (void)b;")
    indent = "    "
    for axis, extent in enumerate(batch):
        lines.append(f"{indent}for (int32_t d{axis} = 0; d{axis} < {extent}; ++d{axis})")
        indent += "    "

    def at(steps) -> str:
        return " + ".join(f"d{a} * {s}" for a, s in enumerate(steps) if s) or "0"

    lines += [f"{indent}{{", f"{indent}    const int8_t *pa = a + {at(sl)};"]
    if prep is not None:
        lines += [f"{indent}    const int8_t *pb = b + {at(sr)};",
                  f"{indent}    if (pb != arranged) {{ {prep}(pb); arranged = pb; }}"]
    if pack is not None:
        lines += [f"{indent}    {pack[0]}(pa, (int8_t *){pack[1]});",
                  f"{indent}    {mm}((const int8_t *){pack[1]}, {m}, out);"]
    else:
        lines.append(f"{indent}    {mm}(pa, {m}, out);")
    lines += [f"{indent}    out += {m * n};", f"{indent}}}", "}", ""]
    em.helpers[symbol] = "\n".join(lines)

    def pointer(name: str) -> str:
        return em.const_array(name) if g.op(name) == "const" else em.var(name)

    return [f"{symbol}({pointer(lhs)}, {pointer(rhs)}, {em.var(node.name)});"]
