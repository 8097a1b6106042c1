"""Cortex-M4 / M33 kernels for TFLite's int8 and 16x8 LSTM step (tinycc_ml/ir/ops/network/lstm.py: ``lstm_cell``
then ``lstm_hidden``), bit for bit the shared C's and so tflite-micro's.

The step function (``fused_cell``): one function per layer (``m4_lstm_<first step's cell>``, -O2, shared by the
layer's steps) computes a whole step: the lstm_cell node's call gives it the step's input, hidden and cell state,
and it stores the new cell state as the cell node's value and the new hidden state into a scratch per layer,
which the lstm_hidden node copies as its value (``fused_copy``). The input and the hidden state go once per step
into aligned word buffers: int8 values widened (per 4 SXTB16's two words, lanes 0, 2 and 1, 3), int16 ones
(16x8) as they are; a last partial group padded with zeros, against zero weights. Then per unit its four gates'
rows (forget, input, cell, output) together: the input's four sums, then the hidden state's, each in an inline
asm block unrolled at literal offsets (per 4 values one LDRD of the buffer, two LDMs of the four gates'
compile-time int16 weights, eight SMLAD: 11 instructions for 16 multiply-accumulates), the accumulators starting
from per-unit constants (the bias and the zero points' terms: sum (x - z) w = sum x w - z sum w) that lead the
unit's words in the weight stream. int8: TFLite's int32 sums, which the reader proves never wrap, equal modulo
2^32, so equal; each is requantised to 2^-12 on SMMULR / SMMLAR where its bound proves that exact. 16x8: each
gate's sum, its bias included, proven within int32 (so SMLAD's), requantised as TFLite's 64-bit
MultiplyByQuantizedMultiplier (one SMULL by the multiplier rounded to 16 bits). ``fused_hidden`` declines a
layer where a proof fails. The two sums saturated with SSAT, added and saturated; the int16 sigmoid and tanh are
one row of a 512-row table (``activation_table``: TFLite's interpolation, its rounding, reflection and
saturation folded in) and one MLA; the cell and hidden products are TFLite's int16 MulElementwise on SMMLAR.

A step the step function declines: each gate's sum is a dot product on SMLAD, against the weights widened to
int16 at compile time (int8 values: per 4 one LDR, two SXTB16 and two SMLAD; int16 values: their words as they
are), the zero points and the bias folded into per-unit starts; 16x8 where every int16 input keeps a row's
products' sum within int32 (checked per layer), that sum is SMLAD's and the bias (with the zero points' terms) is
added in int64, then TFLite's 64-bit requantisation as the shared C writes it; else the shared C. Everything
after the sums (requantisation, the int16 sigmoid and tanh, the cell and hidden arithmetic) is the shared C's
(``lstm_cell_c``, ``lstm_hidden_c``), which takes these sums in place of its loops.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import (
    copy_bytes,
    named_helper,
    requant_bound,
    requant_call,
    rq_helper,
    shared_function,
    simd_helpers,
)
from tinycc_ml.target import (
    LSTM_UNIT_SCALE,
    SIGMOID_TABLE,
    Node,
    lstm_cell_c,
    lstm_cell_tanh_parameters,
    lstm_fc_multiplier,
    lstm_hidden_c,
    lstm_mul_multiplier,
    lstm_quantised_clip,
)

GATE_SUMS = {"lstm_cell": ((3, 6, 9), (4, 7, 10), (5, 8, 11)), "lstm_hidden": ((3, 4, 5),)}  # (w, r, bias) inputs


def _int8(t) -> bool:
    return t.dtype.is_quantised and t.dtype.bits == 8


def _computed(em, name: str) -> bool:
    return em.graph.op(name) not in ("const", "sparse_const") and name not in em.inline_values \
        and name != em.read_clamp


def _int16(t) -> bool:
    return t.dtype.is_quantised and t.dtype.bits == 16


def _weights(em, node: Node, n: str, width: int) -> np.ndarray:
    return np.asarray(em.graph.node(n).attrs["value"], np.int64).reshape(-1, width)


def lstm_claims(em, node: Node) -> bool:
    """int8 input and hidden state (int32 sums), or int16 ones (16x8: int64 sums) whose products' sums every int16
    input keeps within int32 (the bias then added in int64); constant weights and biases."""
    g = em.graph
    x, h = node.inputs[0], node.inputs[1]
    xt, ht = g.type(x), g.type(h)
    if not (_computed(em, x) and _computed(em, h)
            and all(g.op(n) == "const" for k in GATE_SUMS[node.op] for n in (node.inputs[i] for i in k))):
        return False
    if _int8(xt) and _int8(ht):
        return True
    if not (_int16(xt) and _int16(ht)):
        return False
    reach = [32768 + abs(t.dtype.zero_point) for t in (xt, ht)]
    return all(int(np.max(reach[k] * np.abs(_weights(em, node, node.inputs[i], t.size)).sum(axis=1))) < 1 << 31
               for w_r_b in GATE_SUMS[node.op] for k, (i, t) in enumerate(zip(w_r_b[:2], (xt, ht))))


def gate_words(W: np.ndarray) -> tuple[np.ndarray, int]:
    """(int32 words, groups per row): each row's int8 weights widened to int16, padded with zeros to whole groups
    of 4, per group two words (lanes 0, 2 and 1, 3: SXTB16's splits of an input word)."""
    rows, n = W.shape
    groups = -(-n // 4)
    padded = np.zeros((rows, 4 * groups), np.int16)
    padded[:, :n] = W
    r = padded.reshape(rows, groups, 4)
    halves = np.stack([r[:, :, [0, 2]], r[:, :, [1, 3]]], axis=2)
    return np.ascontiguousarray(halves).view("<i4").reshape(-1), groups


def pair_words(W: np.ndarray) -> tuple[np.ndarray, int]:
    """(int32 words, pairs per row): each row's int8 weights widened to int16, padded with a zero to whole pairs,
    a pair per word as the int16 input's words hold their values (16x8)."""
    rows, n = W.shape
    pairs = -(-n // 2)
    padded = np.zeros((rows, 2 * pairs), np.int16)
    padded[:, :n] = W
    return np.ascontiguousarray(padded).view("<i4").reshape(-1), pairs


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def _dot(em) -> str:
    rd, odd = simd_helpers(em)
    return named_helper(em, "m4_lstm_dot", f"""\
/* acc + the dot product of groups x 4 int8 values at x with the int16 weight words at w (SMLAD) */
/* inlined: its counts are literals at each call, the x buffer's address a constant */
static inline __attribute__((always_inline)) int32_t @m4_lstm_dot(const int8_t *x, const int32_t *w,
                                                                  int32_t groups, int32_t acc)
{{
    for (; groups > 1; groups -= 2, x += 8, w += 4) {{
        const int32_t u = {rd}(x), v = {rd}(x + 4);
        acc = __smlad(w[0], __sxtb16(u), acc);
        acc = __smlad(w[1], {odd}(u), acc);
        acc = __smlad(w[2], __sxtb16(v), acc);
        acc = __smlad(w[3], {odd}(v), acc);
    }}
    if (groups) {{
        const int32_t u = {rd}(x);
        acc = __smlad(w[0], __sxtb16(u), acc);
        acc = __smlad(w[1], {odd}(u), acc);
    }}
    return acc;
}}
""")


def _dot16(em) -> str:
    return named_helper(em, "m4_lstm_dot16", """\
/* acc + the dot product of pairs x 2 int16 values at x (words) with the int16 weight words at w (SMLAD) */
static inline __attribute__((always_inline)) int32_t @m4_lstm_dot16(const uint32_t *x, const int32_t *w,
                                                                    int32_t pairs, int32_t acc)
{
    for (; pairs > 1; pairs -= 2, x += 2, w += 2) {
        acc = __smlad(w[0], (int32_t)x[0], acc);
        acc = __smlad(w[1], (int32_t)x[1], acc);
    }
    if (pairs)
        acc = __smlad(w[0], (int32_t)x[0], acc);
    return acc;
}
""")


def _word_copy(em, buffer: str, source: str, n: int, bits: int) -> str:
    """The int8 (int16) vector ``source`` of n values copied into the scratch word buffer ``buffer`` (its padding
    left as it is: it meets zero weights)."""
    em.scratch(buffer, "uint32_t", -(-n * bits // 32))
    return f"for (long k = 0; k < {n}; ++k) ((int{bits}_t *){buffer})[k] = {source}[k];"


def lstm_step(em, node: Node) -> list[str] | None:
    if not lstm_claims(em, node):
        return None
    if node.op == "lstm_cell" and fused_hidden(em, node) is not None:
        return fused_cell(em, node)
    if node.op == "lstm_hidden" and fused_cell_of(em, node) is not None:
        return fused_copy(em, node)
    g = em.graph
    x, h = node.inputs[0], node.inputs[1]
    xt, ht = g.type(x), g.type(h)
    wide = xt.dtype.bits == 16  # 16x8: int16 words as they are, the bias and zero points added in int64
    dot, words, start_t = (_dot16(em), pair_words, "int64_t") if wide else (_dot(em), gate_words, "int32_t")
    xb, hb = em.sym("m4_lstm_x"), em.sym("m4_lstm_h")
    prologue = [f"/* %{node.name}: the gates' sums on SMLAD (arm.m4_lstm) */",
                _word_copy(em, xb, em.var(x), xt.size, xt.dtype.bits),
                _word_copy(em, hb, em.var(h), ht.size, ht.dtype.bits)]
    arrays = {}
    for w_i, r_i, b_i in GATE_SUMS[node.op]:
        w, r, b = (node.inputs[i] for i in (w_i, r_i, b_i))
        W, R = _weights(em, node, w, xt.size), _weights(em, node, r, ht.size)
        bias = np.asarray(g.node(b).attrs["value"], np.int64).reshape(-1)
        w_words, w_groups = words(W)
        r_words, r_groups = words(R)
        start_x = bias - xt.dtype.zero_point * W.sum(axis=1)
        start_h = -ht.dtype.zero_point * R.sum(axis=1)
        if not wide:
            start_x, start_h = (_wrap32(v).astype(np.int32) for v in (start_x, start_h))
        syms = [em.add_const_array(em.sym(f"{node.name}_{n}_m4{k}"), v, t, f"%{node.name}: {what}")
                for n, k, v, t, what in (
                    (w, "w", w_words, "int32_t", "the input weights widened to int16 (words as the input's)"),
                    (r, "w", r_words, "int32_t", "the recurrent weights widened likewise"),
                    (w, "s", start_x, start_t, "per unit the bias less the input's zero point x the weights' sum"),
                    (r, "s", start_h, start_t, "per unit -(the hidden state's zero point x the weights' sum)"))]
        reach_x, reach_h = 128 + abs(xt.dtype.zero_point), 128 + abs(ht.dtype.zero_point)  # |code - zero point|
        bounds = (int(np.max(np.abs(bias) + reach_x * np.abs(W).sum(axis=1))),
                  int(np.max(reach_h * np.abs(R).sum(axis=1))))
        arrays[(w, r)] = (syms, w_groups, r_groups, bounds)

    def sums(name: str, x_name: str, h_name: str, w: str, r: str, bias: str, qx, qh):
        (w_sym, r_sym, sx, sh), w_groups, r_groups, bounds = arrays[(w, r)]
        if wide:  # int32 sums of the products (proven by lstm_claims), then int64 with the starts
            return [f"const int64_t {name}_a = {sx}[j] + (int64_t){dot}({xb}, {w_sym} + j * {w_groups}, "
                    f"{w_groups}, 0);",
                    f"const int64_t {name}_b = {sh}[j] + (int64_t){dot}({hb}, {r_sym} + j * {r_groups}, "
                    f"{r_groups}, 0);"], None, None
        lines = [f"const int32_t {name}_a = {dot}((const int8_t *){xb}, {w_sym} + j * {2 * w_groups}, {w_groups}, "
                 f"{sx}[j]);",
                 f"const int32_t {name}_b = {dot}((const int8_t *){hb}, {r_sym} + j * {2 * r_groups}, {r_groups}, "
                 f"{sh}[j]);"]
        # TFLite's requantisation on SMMLAR where the sums' bound proves it exact, else the shared C's
        return lines, requant(f"{name}_a", qx, bounds[0]), requant(f"{name}_b", qh, bounds[1])

    def requant(product: str, q, bound: int) -> str | None:
        return requant_call(rq_helper(em, False), product, *q) if requant_bound(bound, *q) is not None else None

    emit = lstm_cell_c if node.op == "lstm_cell" else lstm_hidden_c
    return emit(em, node, sums, prologue, requant)


# ---------------------------------------------------------------- the step function: one per layer, a whole step

GATE_NAMES = "figo"  # forget, input, cell and output gates: a unit's four rows, in this order
INT16 = 32767 * 32768  # |a product of two int16 values, one a sigmoid's or tanh's|: the products' bound
TABLE_BITS = {"logistic": (9, 10), "tanh": (8, 8)}  # (interpolation fraction bits, output shift)


def _gate_inputs(em, cell: Node, hidden: Node) -> list[tuple[str, str, str]]:
    """(input weight, recurrent weight, bias) per gate, forget, input, cell, output."""
    c, h = cell.inputs, hidden.inputs
    return [(c[3], c[6], c[9]), (c[4], c[7], c[10]), (c[5], c[8], c[11]), (h[3], h[4], h[5])]


def _gate_requants(em, cell: Node, hidden: Node):
    """Per gate ((mx, sx), (mh, sh), bound of the input's sum, bound of the hidden state's): TFLite's
    requantisations of the two sums to 2^-12 and the sums' bounds (bias, input and hidden state at their
    extremes)."""
    g = em.graph
    xt, ht = g.type(cell.inputs[0]).dtype, g.type(cell.inputs[1]).dtype
    top = 1 << (xt.bits - 1)
    reach_x, reach_h = top + abs(xt.zero_point), top + abs(ht.zero_point)  # |code - zero point|
    out = []
    for w, r, b in _gate_inputs(em, cell, hidden):
        W, R = _weights(em, cell, w, g.type(cell.inputs[0]).size), _weights(em, cell, r, g.type(cell.inputs[1]).size)
        bias = np.asarray(g.node(b).attrs["value"], np.int64).reshape(-1)
        out.append((lstm_fc_multiplier(xt, g.type(w).dtype), lstm_fc_multiplier(ht, g.type(r).dtype),
                    int(np.max(np.abs(bias) + reach_x * np.abs(W).sum(axis=1))),
                    int(np.max(reach_h * np.abs(R).sum(axis=1)))))
    return out


def _product_requants(em, cell: Node, hidden: Node):
    """The cell's and hidden state's int16 products' requantisations: f c, i g (to the cell's scale) and
    o tanh(c) (to the hidden state's)."""
    scale = float(em.graph.type(cell.name).dtype.qscales[0])
    unit = LSTM_UNIT_SCALE
    return (lstm_mul_multiplier(unit, scale, scale), lstm_mul_multiplier(unit, unit, scale),
            lstm_mul_multiplier(unit, unit, float(hidden.type.dtype.qscales[0])))


def fused_hidden(em, cell: Node) -> Node | None:
    """The lstm_hidden node computed with ``cell`` by one function (``fused_cell``), or None (the two nodes'
    sums on SMLAD one by one, ``lstm_step``): an int8 or 16x8 step whose one user of the new cell state reading
    the same input and hidden state is an lstm_hidden with constant weights, every requantisation proven exact
    on SMMLAR (16x8: each gate's sum, with its bias, proven within int32 and requantised as TFLite's 64-bit
    MultiplyByQuantizedMultiplier on SMULL)."""
    g = em.graph
    x, h, c = cell.inputs[:3]
    xt, ht = g.type(x), g.type(h)
    wide = _int16(xt) and _int16(ht)
    if not ((wide or (_int8(xt) and _int8(ht))) and lstm_claims(em, cell) and _computed(em, c)):
        return None
    partners = [g.node(u) for u in g.users(cell.name) if g.op(u) == "lstm_hidden"
                and tuple(g.node(u).inputs[:3]) == (x, h, cell.name)]
    if len(partners) != 1 or not lstm_claims(em, partners[0]) or partners[0].type.dtype.bits != xt.dtype.bits:
        return None
    hidden = partners[0]
    sums = [(b, q) for qx, qh, bx, bh in _gate_requants(em, cell, hidden) for b, q in ((bx, qx), (bh, qh))]
    if wide:
        proofs = [b < 1 << 31 and 1 <= _total_shift(*q) <= 62 for b, q in sums]
    else:
        proofs = [requant_bound(b, *q) is not None for b, q in sums]
    proofs += [requant_bound(INT16, *q) is not None for q in _product_requants(em, cell, hidden)]
    return hidden if all(proofs) else None


def _total_shift(multiplier: int, shift: int) -> int:
    """TFLite's 64-bit MultiplyByQuantizedMultiplier: its one right shift (of the product by the multiplier
    rounded to 16 bits)."""
    return 15 - shift


def _requant64(x: str, multiplier: int, shift: int) -> str:
    """C for TFLite's 64-bit MultiplyByQuantizedMultiplier (``requantise64``) of the int32 ``x``: one SMULL by the
    multiplier rounded to 16 bits, the rounding added and shifted in 64 bits, cut to int32 as TFLite's cast."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    total = _total_shift(multiplier, shift)
    return (f"(int32_t)(uint32_t)(uint64_t)(((int64_t)({x}) * {reduced} + ((int64_t)1 << {total - 1})) "
            f">> {total})")


def fused_cell_of(em, hidden: Node) -> Node | None:
    """The lstm_cell node whose function (``fused_cell``) computed ``hidden``'s values, or None."""
    g = em.graph
    c = hidden.inputs[2]
    if g.op(c) != "lstm_cell":
        return None
    cell = g.node(c)
    partner = fused_hidden(em, cell)
    return cell if partner is not None and partner.name == hidden.name else None


def activation_table(op: str) -> np.ndarray:
    """TFLite's int16 ``op`` ("logistic" or "tanh", output at 2^-15) of v (the input rescaled, as
    ``tflite_sigmoid.c_int16``) as (a + (v & (2^bits - 1)) d) >> shift with (a, d) the row floor(v / 2^bits)
    of this (512, 2) table, rows -256..255 (row 0 at 256; v saturated to them first): the interpolation of
    the table of sigmoid(i / 24) with its rounding, its sign's reflection and its saturation folded into a and d
    (TFLite interpolates |v| then reflects; over a row of negative v the reflection is linear too).
    tests/backends/test_m4_op_kernels.py checks every int16 input against ``logistic_int16`` and ``tanh_int16``."""
    T = SIGMOID_TABLE.astype(np.int64)
    rows = np.zeros((512, 2), np.int64)
    for k in range(-256, 256):
        if op == "logistic":  # r = (a << 9) + low (b - a); y = (r + 512) >> 10, or 32768 - that for v < 0
            if k >= 255:
                row = ((0x7FFF << 10) + 512, 0)
            elif k >= 0:
                row = ((T[k] << 9) + 512, T[k + 1] - T[k])
            elif k == -256:
                row = ((1 << 25) - (0x7FFF << 10) + 511, 0)
            elif k == -255:  # |v| in (254.0, 255.0] steps: 1 throughout (TFLite's saturated value at the end)
                row = (1 << 10, 0)
            else:
                row = ((1 << 25) + 511 - (T[-k] << 9), T[-k] - T[-k - 1])
        else:  # r = (a << 8) + low (b - a); y = (r - 2^23 + 128) >> 8, or its negation for v < 0
            if k >= 255:
                row = ((0xFFFF << 8) - (1 << 23) + 128, 0)
            elif k >= 0:
                row = ((T[k] << 8) - (1 << 23) + 128, T[k + 1] - T[k])
            elif k == -256:
                row = ((1 << 23) + 127 - (0xFFFF << 8), 0)
            else:
                row = ((1 << 23) + 127 - (T[-k] << 8), T[-k] - T[-k - 1])
        rows[k + 256] = row
    return rows


def _quad_words(W: np.ndarray, natural: bool) -> np.ndarray:
    """(rows, groups, 2) int32 words: each row's int8 weights widened to int16, padded with zeros to whole groups of
    4, per group two words: ``natural`` (int16 inputs as they lie in memory) values 0, 1 and 2, 3, else SXTB16's
    splits of an int8 input word, values 0, 2 and 1, 3 (``gate_words``)."""
    if not natural:
        return gate_words(W)[0].reshape(W.shape[0], -1, 2)
    rows, n = W.shape
    padded = np.zeros((rows, 4 * -(-n // 4)), np.int16)
    padded[:, :n] = W
    return np.ascontiguousarray(padded).view("<i4").reshape(rows, -1, 2)


def fused_weights(em, cell: Node, hidden: Node) -> np.ndarray:
    """The layer's weight stream (int32 words) as the function reads it: per unit the four gates' starts of the
    input's sums (bias - input zero point x the row's sum), per 4 inputs two LDMs of four words (the gates' int16
    weights for inputs 0, 2, then 1, 3 as SXTB16 splits int8 inputs; 16x8: 0, 1, then 2, 3), then the hidden
    state's likewise (its starts -zero point x the row's sum). int8: the starts wrap as the int32 sums do;
    16x8: ``fused_hidden`` proved them within int32."""
    g = em.graph
    x, h = cell.inputs[:2]
    xt, ht = g.type(x), g.type(h)
    natural = _int16(xt)
    units = ht.size
    parts_x, parts_h, starts_x, starts_h = [], [], [], []
    for w, r, b in _gate_inputs(em, cell, hidden):
        W, R = _weights(em, cell, w, xt.size), _weights(em, cell, r, ht.size)
        bias = np.asarray(g.node(b).attrs["value"], np.int64).reshape(-1)
        parts_x.append(_quad_words(W, natural))
        parts_h.append(_quad_words(R, natural))
        starts_x.append(_wrap32(bias - xt.dtype.zero_point * W.sum(axis=1)))
        starts_h.append(_wrap32(-ht.dtype.zero_point * R.sum(axis=1)))
    stream = [np.stack(starts_x, axis=1), np.stack(parts_x, axis=-1).reshape(units, -1),
              np.stack(starts_h, axis=1), np.stack(parts_h, axis=-1).reshape(units, -1)]
    return np.concatenate([np.asarray(a, np.int64) for a in stream], axis=1).astype(np.int32).reshape(-1)


def _dot_asm(groups: int, src: str) -> list[str]:
    """Inline asm: the four accumulators a0..a3 plus the dot products of ``groups`` x 4 widened values at ``src``
    (two words per 4: lanes 0, 2 and 1, 3) with the stream's words at wp (per 4 values two LDMs of the four
    gates' words); literal offsets, unrolled; beyond 64 groups a loop of 8 per iteration."""
    def group(offset: str) -> list[str]:
        lines = [f"ldrd %[xe], %[xo], {offset}"]
        for half in ("xe", "xo"):
            lines.append("ldm %[wp]!, {%[w0], %[w1], %[w2], %[w3]}")
            lines += [f"smlad %[a{k}], %[w{k}], %[{half}], %[a{k}]" for k in range(4)]
        return lines
    if groups <= 64:
        body = [line for q in range(groups) for line in group(f"[%[{src}], #{8 * q}]")]
        operands = f'"r"({src})'
    else:
        rest, loops = groups % 8, groups // 8
        body = [line for q in range(rest) for line in group(f"[%[p], #{8 * q}]")]
        if rest:
            body.append(f"add %[p], %[p], #{8 * rest}")
        body += ["1:"] + [line for _ in range(8) for line in group("[%[p]], #8")] + ["subs %[n], %[n], #1",
                                                                                    "bne 1b"]
        operands = None
    text = [f'    "{line}\\n"' for line in body]
    outs = ('[a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [wp] "+r"(wp), [xe] "=&r"(xe), '
            '[xo] "=&r"(xo), [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)')
    if operands is None:
        pre = [f"{{ const uint32_t *p = {src}; int32_t n = {loops};"]
        outs += ', [p] "+r"(p), [n] "+r"(n)'
        return pre + ["__asm__ volatile("] + text + [f"    : {outs} : : \"cc\", \"memory\");", "}"]
    return ["__asm__ volatile("] + text + [f"    : {outs} : [{src}] {operands} : \"memory\");"]


def _requant(em, x: str, multiplier: int, shift: int) -> str:
    """C for TFLite's MultiplyByQuantizedMultiplier of x (proven exact on SMMLAR: ``requant_bound``): without a right
    shift one SMMULR of x 2^(left + 1) (SMMLAR's accumulator 0), else ``m4_network.requant_call``."""
    if shift < 0:
        return requant_call(rq_helper(em, False), x, multiplier, shift)
    smmulr = named_helper(em, "m4_smmulr", """\
static inline __attribute__((always_inline)) int32_t @m4_smmulr(int32_t a, int32_t b)
{
    int32_t v;
    __asm__("smmulr %0, %1, %2" : "=r"(v) : "r"(a), "r"(b));
    return v;
}
""")
    return f"{smmulr}((int32_t)((uint32_t)({x}) << {shift + 1}), {multiplier})"


def _activation(name: str, op: str, x: str, multiplier: int, shift: int, table: str) -> list[str]:
    """C statements declaring ``int32_t name``: TFLite's int16 ``op`` of the int32 ``x``, its rescaling as
    ``c_int16``, then one row of ``activation_table`` (``table``: a pointer to its row 0) and one multiply-add."""
    bits, out = TABLE_BITS[op]
    rounding = f" + {1 << (shift - 1)}" if shift else ""
    return [f"const int32_t {name}_v = ({x} * {multiplier}{rounding}) >> {shift};",
            f"const int32_t *{name}_r = {table} + 2 * __ssat({name}_v >> {bits}, 9);",
            f"int32_t {name}_a, {name}_d;",
            f'__asm__("ldrd %0, %1, [%2]" : "=r"({name}_a), "=r"({name}_d) : "r"({name}_r));  /* one load: a, d */',
            f"const int32_t {name} = ({name}_a + ({name}_v & {(1 << bits) - 1}) * {name}_d) >> {out};"]


def fused_cell(em, cell: Node) -> list[str]:
    """The layer's step function (``m4_lstm_<first step's cell>``, shared by its steps) called on this step's
    input, hidden and cell state: the new cell state into the cell node's storage, the new hidden state into
    the layer's scratch (``fused_copy`` stores it as the lstm_hidden node's value)."""
    g = em.graph
    hidden = fused_hidden(em, cell)
    x, h, c = cell.inputs[:3]
    xt, ht = g.type(x), g.type(h)
    features, units = xt.size, ht.size
    gx, gh = -(-features // 4), -(-units // 4)
    bits = xt.dtype.bits
    ctype = f"int{bits}_t"
    rd, odd = simd_helpers(em)
    weights = em.add_const_array(em.sym(f"{cell.name}_m4lstm"), fused_weights(em, cell, hidden), "int32_t",
                                 f"%{cell.name}: per unit its gates' starts and int16 weights, input then hidden "
                                 "state (arm.m4_lstm.fused_weights)")
    tables = {op: em.add_const_array(em.sym(f"m4_lstm_{op}"), activation_table(op).reshape(-1), "int32_t",
                                     f"TFLite's int16 {op} by rows of the rescaled input (arm.m4_lstm)")
              for op in ("logistic", "tanh")}
    xw, hw = em.sym("m4_lstm_xw"), em.sym("m4_lstm_hw")
    em.scratch(xw, "uint32_t", 2 * gx)
    em.scratch(hw, "uint32_t", 2 * gh)
    requants = _gate_requants(em, cell, hidden)
    (mk, ma, mo) = _product_requants(em, cell, hidden)
    ct = g.type(c).dtype
    out = hidden.type.dtype
    lo, hi = out.integer_range
    acts = ["logistic", "logistic", "logistic" if cell.attrs["activation"] == "sigmoid" else "tanh", "logistic"]

    def widen(src: str, dst: str, n: int) -> list[str]:
        whole, tail = divmod(n, 4)
        lines = []
        if bits == 16:  # the words as they are, into the aligned buffer (LDRD), the last group padded with zeros
            if whole:
                lines += [f"    for (int32_t q = 0; q < {2 * whole}; ++q) {dst}[q] = (uint32_t){rd}("
                          f"(const int8_t *){src} + 4 * q);"]
            for w in range(2 * whole, 2 * -(-n // 4)):
                halves = [f"((uint32_t)(uint16_t){src}[{2 * w + k}] << {16 * k})" for k in (0, 1) if 2 * w + k < n]
                lines.append(f"    {dst}[{w}] = {' | '.join(halves) or '0u'};")
            return lines
        if whole:
            lines += [f"    for (int32_t q = 0; q < {whole}; ++q) {{",
                      f"        const int32_t v = {rd}({src} + 4 * q);",
                      f"        {dst}[2 * q] = (uint32_t)__sxtb16(v); {dst}[2 * q + 1] = (uint32_t){odd}(v);",
                      "    }"]
        if tail:
            fill = " | ".join(f"((uint32_t)(uint8_t){src}[{4 * whole + k}] << {8 * k})" for k in range(tail))
            lines += [f"    {{ const int32_t v = (int32_t)({fill});",
                      f"      {dst}[{2 * whole}] = (uint32_t)__sxtb16(v);",
                      f"      {dst}[{2 * whole + 1}] = (uint32_t){odd}(v); }}"]
        return lines

    def sat16(v: str) -> str:
        return f"__ssat({v}, 16)"

    kind = "16x8" if bits == 16 else "int8"
    lines = [f"/* a step of TFLite's {kind} LSTM, {features} inputs, {units} units (arm.m4_lstm.fused_cell) */",
             f'__attribute__((optimize("O2"))) static void @SYM@(const {ctype} *x, const {ctype} *h, '
             f"const int16_t *cp, int16_t *co, {ctype} *ho)",
             "{",
             *widen("x", xw, features), *widen("h", hw, units),
             f"    const int32_t *wp = {weights};",
             f"    const int32_t *lg = {tables['logistic']} + 512, *th = {tables['tanh']} + 512;",
             f"    for (int32_t j = 0; j < {units}; ++j) {{",
             "        int32_t a0 = wp[0], a1 = wp[1], a2 = wp[2], a3 = wp[3], xe, xo;",
             '        register int32_t w0 __asm__("r8"), w1 __asm__("r9"), w2 __asm__("r10"), w3 __asm__("r11");',
             "        wp += 4;"]
    lines += ["        " + line for line in _dot_asm(gx, xw)]
    gate_requant = (lambda a, q: _requant64(a, *q)) if bits == 16 else (lambda a, q: _requant(em, a, *q))
    lines.append("        const int32_t " + ", ".join(
        f"s{k} = {sat16(gate_requant(f'a{k}', requants[k][0]))}" for k in range(4)) + ";")
    lines += ["        a0 = wp[0]; a1 = wp[1]; a2 = wp[2]; a3 = wp[3];", "        wp += 4;"]
    lines += ["        " + line for line in _dot_asm(gh, hw)]
    lines.append("        const int32_t " + ", ".join(
        f"t{k} = {sat16(f's{k} + ' + sat16(gate_requant(f'a{k}', requants[k][1])))}" for k in range(4)) + ";")
    for k, (name, op) in enumerate(zip(GATE_NAMES, acts)):
        table = "lg" if op == "logistic" else "th"
        lines += ["        " + line for line in _activation(name, op, f"t{k}", 3, 0, table)]
    kept, added = (sat16(_requant(em, p, *m)) for p, m in (("f * cp[j]", mk), ("i * g", ma)))
    lines.append(f"        int32_t cell = {sat16(f'{kept} + {added}')};")
    clip = float(cell.attrs["cell_clip"])
    if clip > 0:
        q = lstm_quantised_clip(clip, ct)
        lines.append(f"        cell = cell > {q} ? {q} : (cell < {-q} ? {-q} : cell);")
    tm, ts = lstm_cell_tanh_parameters(ct)
    lines += ["        co[j] = (int16_t)cell;",
              *("        " + line for line in _activation("squashed", "tanh", "cell", tm, ts, "th")),
              f"        const int32_t y = {_requant(em, 'o * squashed', *mo)} + {out.zero_point};",
              f"        ho[j] = ({ctype})(y < {lo} ? {lo} : (y > {hi} ? {hi} : y));"
              if (lo, hi) != (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) else
              f"        ho[j] = ({ctype})__ssat(y, {bits});",
              "    }", "}", ""]
    function = shared_function(em, f"m4_lstm_{cell.name}", [("", "\n".join(lines))])
    em.scratch(_handoff(em, cell), ctype, units)
    return [f"/* %{cell.name}, %{hidden.name}: the step on SMLAD (arm.m4_lstm) */",
            f"{function}({em.var(x)}, {em.var(h)}, {em.var(c)}, {em.var(cell.name)}, {_handoff(em, cell)});"]


def _handoff(em, cell: Node) -> str:
    """The layer's scratch holding a step's new hidden state between its lstm_cell's call and its lstm_hidden's
    copy: one per layer (named after the cell state the layer's first step reads)."""
    g = em.graph
    c = cell.inputs[2]
    while g.op(c) == "lstm_cell":
        c = g.node(c).inputs[2]
    return em.sym(f"m4_lstm_h_{c}")


def fused_copy(em, hidden: Node) -> list[str]:
    """lstm_hidden of a step computed by its cell's function: the hidden state copied from the layer's scratch."""
    cell = fused_cell_of(em, hidden)
    return [f"/* %{hidden.name}: computed by %{cell.name}'s call (arm.m4_lstm) */",
            *copy_bytes(em, f"((int8_t *){em.var(hidden.name)})", f"((const int8_t *){_handoff(em, cell)})",
                        hidden.type.size * hidden.type.dtype.bits // 8)]
