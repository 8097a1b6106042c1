"""Cortex-M4 / M33 kernels for TFLite's int8 and 16x8 LSTM step (tinycc_ml/ir/ops/network/lstm.py: ``lstm_cell``
then ``lstm_hidden``), bit for bit the shared C's and so tflite-micro's.

The gates' fully connected sums are the step's work (4 gates x units x (inputs + units) products): here each is
a dot product on SMLAD, per 4 int8 values one LDR, two SXTB16 and two SMLAD against the weights widened to int16
at compile time (lanes 0, 2 and 1, 3, as ``m4_svdf.time_words``), rows padded to whole groups of 4 with zero
weights; each sum, and each product of the cell arithmetic, requantised on SMMLAR (``m4_network.requant_call``)
where its bound proves that exact. The
input's and the hidden state's zero points are folded into per-unit constants (sum (x - z) w = sum x w -
z sum w: TFLite's int32 sums, which the reader proves never wrap, equal modulo 2^32, so equal), the bias too. x and
h are copied into word buffers first (their last group's padding meets zero weights). Everything after the sums
(requantisation to 2^-12, the int16 sigmoid and tanh, the cell and hidden arithmetic) is the shared C's
(``lstm_cell_c``, ``lstm_hidden_c``), which takes these sums in place of its loops.

16x8 (int16 input and hidden state, int64 sums): the int16 values' words go to SMLAD as they are, against the
weights widened to int16 in pairs; where every int16 input keeps a row's products' sum within int32 (checked per
layer), that sum is SMLAD's and the bias (with the zero points' terms) is added in int64, then TFLite's 64-bit
requantisation as the shared C writes it; else the shared C.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import named_helper, requant_bound, requant_call, rq_helper, simd_helpers
from tinycc_ml.target import Node, lstm_cell_c, lstm_hidden_c

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
