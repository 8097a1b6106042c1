"""Cortex-M4 / M33 kernels for TFLite's int8 SVDF (tinycc_ml/ir/ops/network/svdf.py: ``svdf_state`` then
``svdf_output``), bit for bit the shared C's and so tflite-micro's; an int8 activation state of zero point 0 (as
CMSIS-NN's arm_svdf_s8 takes it).

The state stays where the op module keeps it (the ``state`` node's static array, the next value copied back by
the graph's state machinery): these kernels compute the same two values into the same storage.

``svdf_state`` (``m4_svdf_<layer>``): the state shifted one step as one copy of its bytes one place down (unaligned
words, forward: safe where the new value shares the state's storage; each filter's last byte is overwritten
next), then each filter's FC of the input into its last byte: ``m4_network``'s one-column matrix function on
pairs of filters ("1x4p": per 4 inputs 4 SXTB16 and 8 SMLAD for four filters), storing filter r at r memory +
memory - 1 (a per-filter offset word); the input zero point folded into a per-filter bias, its clamp to int8 the
epilogue's SSAT (the state's zero point 0: clamped, then stored).

``svdf_output`` (``m4_svdf_out_<layer>``): a unit's rank filters' memories are contiguous in the state and in the
time weights, so a unit's sum is one dot product of rank x memory bytes: per 4 state bytes one LDR, two SXTB16 and
two SMLAD against the time weights widened to int16 at compile time (lanes 0, 2 and 1, 3: one LDRD), unrolled at
literal offsets; the tail's bytes against int16 weights one by one; the bias as the accumulator's start;
TFLite's requantisation as the matrix functions' epilogue (SMMLAR where the accumulator is proven small).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import (
    PAIRED_ACC,
    SMALL_ACC,
    accumulator_bound,
    channel_epilogue,
    channel_params,
    copy_bytes,
    fold_zero_point,
    matrix_function,
    paired_params,
    paired_rows,
    shifts_ok,
    simd_helpers,
    small_accumulators,
)
from tinycc_ml.target import LayerQuantisation, Node
from tinycc_ml.target import svdf_output_multiplier as output_multiplier
from tinycc_ml.target import svdf_state_multiplier as state_multiplier

UNROLL = 16  # a unit's groups of 4 state bytes unrolled whole up to this many


def _int8(t) -> bool:
    return t.dtype.is_quantised and t.dtype.bits == 8


def _const(em, name: str) -> bool:
    return em.graph.op(name) == "const"


def _computed(em, name: str) -> bool:
    return em.graph.op(name) not in ("const", "sparse_const") and name not in em.inline_values \
        and name != em.read_clamp


# ---------------------------------------------------------------- svdf_state

def _state_plan(em, node: Node):
    g = em.graph
    x_name, s_name, w_name = node.inputs
    x, st, w = (g.type(n) for n in node.inputs)
    if not (_int8(x) and _int8(st) and _int8(w) and st.dtype.zero_point == 0 and _const(em, w_name)
            and _computed(em, x_name) and _computed(em, s_name)):
        return None
    filters, inputs = w.shape
    m, s = state_multiplier(x.dtype, w.dtype, st.dtype)
    q = LayerQuantisation(int(x.dtype.zero_point), np.full(filters, m, np.int64), np.full(filters, s, np.int64), 0,
                          -128, 127)
    W = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(filters, inputs)
    folded = -q.input_zero_point * W.sum(axis=1)
    if (not shifts_ok(q) or not small_accumulators(folded, W, 128, q.shifts).all() or paired_rows(W) is None
            or not np.all(accumulator_bound(folded, W, 128)[1::2] < PAIRED_ACC)):
        return None
    return q, W, folded


def _shift_copy(em, n: int) -> list[str]:
    """C copying y[i] = s[i + 1] for i < n (a literal), forward: 16 bytes a loop iteration in unaligned words
    (literal offsets), then words and bytes."""
    rd = simd_helpers(em)[0]
    blocks, rest = divmod(n, 16)
    lines = []
    if blocks:
        lines += [f"for (int32_t i = 0; i < {16 * blocks}; i += 16) {{",
                  *(f"    {{ const int32_t v = {rd}(s + 1 + i + {4 * k}); __builtin_memcpy(y + i + {4 * k}, &v, 4); }}"
                    for k in range(4)), "}"]
    return lines + copy_bytes(em, f"(y + {16 * blocks})", f"(s + {16 * blocks + 1})", rest)


def svdf_state_claims(em, node: Node) -> bool:
    return _state_plan(em, node) is not None


def svdf_state(em, node: Node) -> list[str] | None:
    plan = _state_plan(em, node)
    if plan is None:
        return None
    q, W, folded = plan
    x_name, s_name, _ = node.inputs
    filters, inputs = W.shape
    memory = int(node.attrs["memory"])
    n = filters * memory
    fold = fold_zero_point(accumulator_bound(folded, W, 128), q.multipliers, q.shifts, 0)
    params = channel_params(folded, q.multipliers, q.shifts, 4, "fold" if fold else "plain", None, 0 if fold else None)
    params = paired_params(params, np.arange(filters) * memory + memory - 1)
    words, kw4 = paired_rows(W)
    w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), words, "int32_t",
                               f"%{node.name}: {filters}x{inputs} int8 feature weights, pairs of rows in words "
                               "(paired_rows)")
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                               f"%{node.name}: per filter {', '.join(params.stored)} (m4_rq; dst: its last byte)")
    mm = matrix_function(em, node.name, q, "1x4p", w_sym, params, p_sym, kw4, filters, 4 * kw4, 0)
    symbol = em.sym(f"m4_svdf_{node.name}")
    lines = [f"/* %{node.name}: TFLite's int8 SVDF state, {filters} filters x {memory} steps */",
             f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, const int8_t *s, '
             "int8_t *y)", "{"]
    if n > 1:
        lines += ["    /* one step on: each byte from the next (forward: in place too) */",
                  *("    " + line for line in _shift_copy(em, n - 1))]
    else:
        lines.append("    (void)s;")
    if inputs % 4:  # the input in whole words: a copy, its last word's tail meeting zero weights
        buf = em.sym("m4_svdf_x")
        em.scratch(buf, "uint32_t", kw4)
        lines += [f"    int8_t *xp = (int8_t *){buf};",
                  f"    for (int32_t i = 0; i < {inputs}; ++i) xp[i] = x[i];",
                  f"    {mm}(xp, 1, y);"]
    else:
        lines.append(f"    {mm}(x, 1, y);")
    lines += ["}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({em.var(x_name)}, {em.var(s_name)}, {em.var(node.name)});"]


# ---------------------------------------------------------------- svdf_output

def _output_plan(em, node: Node):
    g = em.graph
    s_name, t_name, b_name = node.inputs
    st, tt = g.type(s_name), g.type(t_name)
    out = node.type.dtype
    if not (_int8(st) and _int8(tt) and st.dtype.zero_point == 0 and _const(em, t_name) and _const(em, b_name)
            and _computed(em, s_name) and out.is_quantised and out.bits == 8):
        return None
    filters, memory = tt.shape
    rank = int(node.attrs["rank"])
    units = filters // rank
    m, s = output_multiplier(st.dtype, tt.dtype, out)
    q = LayerQuantisation(0, np.full(units, m, np.int64), np.full(units, s, np.int64), int(out.zero_point), -128, 127)
    if not shifts_ok(q):
        return None
    T = np.asarray(g.node(t_name).attrs["value"], np.int64).reshape(units, rank * memory)
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(units)
    return q, T, bias


def svdf_output_claims(em, node: Node) -> bool:
    return _output_plan(em, node) is not None


def time_words(T: np.ndarray) -> np.ndarray:
    """Per unit its weights' whole groups of 4 as two int16 words each (lanes 0, 2 and 1, 3: SXTB16's splits of a
    state word), int32."""
    units, length = T.shape
    groups = length // 4
    r = T[:, :4 * groups].reshape(units, groups, 4).astype(np.int16)
    halves = np.stack([r[:, :, [0, 2]], r[:, :, [1, 3]]], axis=2)
    return np.ascontiguousarray(halves).view("<i4").reshape(-1)


def svdf_output(em, node: Node) -> list[str] | None:
    plan = _output_plan(em, node)
    if plan is None:
        return None
    q, T, bias = plan
    s_name = node.inputs[0]
    rd, odd = simd_helpers(em)
    units, length = T.shape
    groups, tail = divmod(length, 4)
    bound = accumulator_bound(bias, T, 128)
    small = bound * (1 << np.maximum(q.shifts, 0)) < SMALL_ACC
    fold = bool(small.all()) and fold_zero_point(bound, q.multipliers, q.shifts, q.output_zero_point)
    mode = "fold" if fold else "plain" if small.all() else "wide"
    params = channel_params(bias, q.multipliers, q.shifts, 1, mode, ~small, q.output_zero_point if fold else None)
    P = params.per_channel
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                               f"%{node.name}: per unit {', '.join(params.stored)} (m4_rq)")
    lines = []
    if groups:
        t_sym = em.add_const_array(em.sym(f"{node.name}_m4t"), time_words(T), "int32_t",
                                   f"%{node.name}: per unit the time weights widened to int16, lanes (0, 2), (1, 3)")
        lines.append(f"    const int32_t *t = {t_sym};")
    if tail:
        tail_sym = em.add_const_array(em.sym(f"{node.name}_m4tt"), T[:, 4 * groups:].astype(np.int16), "int16_t",
                                      f"%{node.name}: per unit its last {tail} time weights")
        lines.append(f"    const int16_t *tt = {tail_sym};")
    symbol = em.sym(f"m4_svdf_out_{node.name}")
    body = ["        int32_t acc = q[0];"]
    if groups <= UNROLL:  # literal offsets: per 4 bytes LDR, two SXTB16, LDRD, two SMLAD
        for i in range(groups):
            body += [f"        {{ const int32_t v = {rd}(s + {4 * i});",
                     f"          acc = __smlad(t[{2 * i}], __sxtb16(v), acc);",
                     f"          acc = __smlad(t[{2 * i + 1}], {odd}(v), acc); }}"]
        if groups:
            body.append(f"        t += {2 * groups};")
    else:
        body += ["        const int8_t *p = s;",
                 f"        for (int32_t i = 0; i < {groups // 4}; ++i, p += 16, t += 8) {{",
                 *(line for k in range(4) for line in (
                     f"            {{ const int32_t v = {rd}(p + {4 * k});",
                     f"              acc = __smlad(t[{2 * k}], __sxtb16(v), acc);",
                     f"              acc = __smlad(t[{2 * k + 1}], {odd}(v), acc); }}")),
                 "        }",
                 *(line for k in range(groups % 4) for line in (
                     f"        {{ const int32_t v = {rd}(p + {4 * k});",
                     f"          acc = __smlad(t[{2 * k}], __sxtb16(v), acc);",
                     f"          acc = __smlad(t[{2 * k + 1}], {odd}(v), acc); }}")),
                 *([f"        t += {2 * (groups % 4)};"] if groups % 4 else [])]
    for j in range(tail):
        body.append(f"        acc += (int32_t)s[{4 * groups + j}] * tt[{j}];")
    if tail:
        body.append(f"        tt += {tail};")
    body += channel_epilogue(em, q, params, [("q", [("acc", "y[u]")])], "        ")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 SVDF output, {units} units of {length} state bytes */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *s, int8_t *y)', "{",
        f"    const int32_t *q = {p_sym};", *lines,
        f"    for (int32_t u = 0; u < {units}; ++u, q += {P}, s += {length}) {{", *body, "    }", "}", ""])
    return [f"{symbol}({em.var(s_name)}, {em.var(node.name)});"]
