"""Cortex-M4 / M33 kernel for TFLite's int8 TRANSPOSE_CONV (tinycc_ml/ir/ops/network/transpose_conv.py), bit for bit
the shared C's and so tflite-micro's.

A transposed convolution of stride (sh, sw) is sh x sw ordinary stride-1 convolutions, one per output phase: an
output row oy gathers only the filter rows ky = (oy + ph) mod sh + t sh, reading input rows
(oy + ph) div sh - t (t = 0, 1, ...), and likewise across. So per phase (ry, rx) the layer is a matrix product
over the phase's output positions (a = (oy + ph) div sh, b = (ox + pw) div sw): a column the phase's taps'
inputs (t_y, t_x, channel: ``m4_tconv_<layer>_col`` copies them in words, taps outside the input filled with the
input zero point), the sub-filter's rows (channels x taps x input channels) the weights, the input zero point
folded into the bias (bias - zx sum(w) over the phase's taps): ``m4_network``'s matrix function on pairs of
channels (``paired_rows``, two columns by four channels, 32 multiply-accumulates in 16 SMLAD), storing each
position sw C bytes after the last (a phase row's positions are sw output columns apart); a layer of one or two
channels on two channels a group instead (int16 weights, "2x2w16": a group of four would be mostly padding),
its pair of outputs through a small buffer. The columns: per phase a function with the taps unrolled, a
position whose taps all lie inside the input copied at literal offsets. No int32 buffer of the output: each
output element is computed once, complete. A phase with no taps (a filter smaller than the stride) stores its
channels' requantised biases. The layer is one function (``m4_tconv_<layer>``), its phases' loops in literals.

Claimed where every phase's rows pair (TFLite's symmetric weights always do) and its accumulators are small
enough (``PAIRED_ACC``), else the shared C.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import (
    PAIRED_ACC,
    accumulator_bound,
    arranged_rows,
    channel_params,
    copy_bytes,
    fill_bytes,
    fold_zero_point,
    matrix_function,
    paired_params,
    paired_rows,
    shifts_ok,
    small_accumulators,
    tflite_int8,
)
from tinycc_ml.target import Node, layer_quantisation, multiply_by_quantized_multiplier


def phase_taps(k: int, s: int, r: int) -> list[int]:
    """The filter taps ky = r, r + s, ... below k of the output phase r (r = (oy + pad) mod s)."""
    return list(range(r, k, s))


def phase_range(size: int, s: int, r: int, pad: int) -> tuple[int, int]:
    """[a0, a1): the phase indices a of the outputs o = a s + r - pad inside [0, size)."""
    a0 = -(-(pad - r) // s)  # >= 0: r < s
    return a0, max((size - 1 + pad - r) // s + 1, a0)


def _phases(em, node: Node):
    """Per phase (ry, rx): (taps across rows, taps across columns, weights out_c x K, folded bias), or None where a
    phase cannot take the paired matrix function."""
    g = em.graph
    x_name, w_name, b_name = node.inputs
    out_c, kh, kw, in_c = g.type(w_name).shape
    sh, sw = (int(s) for s in node.attrs["stride"])
    q = layer_quantisation(g, node, out_c)
    W = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(out_c, kh, kw, in_c)
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    phases = {}
    for ry in range(sh):
        for rx in range(sw):
            ty, tx = phase_taps(kh, sh, ry), phase_taps(kw, sw, rx)
            Wp = W[:, ty][:, :, tx].reshape(out_c, -1)
            if Wp.shape[1] == 0:
                phases[ry, rx] = (ty, tx, None, bias)
                continue
            folded = bias - q.input_zero_point * Wp.sum(axis=1)
            if (not small_accumulators(folded, Wp, 128, q.shifts).all() or paired_rows(Wp) is None
                    or not np.all(accumulator_bound(folded, Wp, 128)[1::2] < PAIRED_ACC)):
                return None
            phases[ry, rx] = (ty, tx, Wp, folded)
    return q, phases


def transpose_conv_claims(em, node: Node) -> bool:
    g = em.graph
    x_name, w_name, b_name = node.inputs
    if not tflite_int8(em, node) or g.op(x_name) in ("const", "sparse_const") or x_name in em.inline_values:
        return False
    if g.op(w_name) != "const" or g.op(b_name) != "const" or x_name == em.read_clamp:
        return False
    q = layer_quantisation(g, node, g.type(w_name).shape[0])
    return shifts_ok(q) and _phases(em, node) is not None


def _column_function(em, node: Node, ry: int, rx: int, ty: list[int], tx: list[int], kp: int) -> str:
    """m4_tconv_<layer>_col<ry><rx>(x, col, a, b, n): the columns (kp bytes apart) of the n (1 or 2) positions
    (a, b), (a, b + 1) of phase (ry, rx): per tap (t_y, t_x) input (a - t_y, b - t_x)'s channels, or the zero point
    outside; a position whose taps all lie inside the input copied at literal offsets, unchecked."""
    g = em.graph
    x = g.type(node.inputs[0])
    _, H, W, C = x.shape
    zx = int(x.dtype.zero_point)
    nty, ntx = len(ty), len(tx)
    symbol = em.sym(f"m4_tconv_{node.name}_col{ry}{rx}")
    inside = [line for t in range(nty) for u in range(ntx)
              for line in copy_bytes(em, f"(col + {(t * ntx + u) * C})", f"(s - {(t * W + u) * C})", C)]
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: phase ({ry}, {rx})'s columns, {nty}x{ntx} taps of {C} channels */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, int8_t *col, int32_t a, '
        "int32_t b, int32_t n)", "{",
        f"    for (int32_t j = 0; j < n; ++j, col += {kp}) {{",
        "        const int32_t bj = b + j;",
        f"        if (a >= {nty - 1} && a < {H} && bj >= {ntx - 1} && bj < {W}) {{",
        f"            const int8_t *s = x + (a * {W} + bj) * {C};",
        *("            " + line for line in inside),
        "            continue;",
        "        }",
        "        int8_t *d = col;",
        f"        for (int32_t t = 0; t < {nty}; ++t) {{",
        "            const int32_t iy = a - t;",
        f"            for (int32_t u = 0; u < {ntx}; ++u, d += {C}) {{",
        "                const int32_t ix = bj - u;",
        f"                if (iy < 0 || iy >= {H} || ix < 0 || ix >= {W}) {{",
        *("                    " + line for line in fill_bytes("d", zx, C)),
        "                } else {",
        f"                    const int8_t *src = x + (iy * {W} + ix) * {C};",
        *("                    " + line for line in copy_bytes(em, "d", "src", C)),
        "                }",
        "            }",
        "        }",
        "    }",
        "}", ""])
    return symbol


def transpose_conv(em, node: Node) -> list[str] | None:
    planned = _phases(em, node)
    if planned is None:
        return None
    q, phases = planned
    g = em.graph
    x_name, w_name, _ = node.inputs
    out_c, kh, kw, in_c = g.type(w_name).shape
    sh, sw = (int(s) for s in node.attrs["stride"])
    ph, pw = (int(p) for p in node.attrs["pad"])
    OH, OW = (int(v) for v in node.attrs["out_size"])
    col = em.sym("m4_col")
    narrow = out_c <= 2  # two channels a group (int16 weights), the pair of outputs through a buffer
    symbol = em.sym(f"m4_tconv_{node.name}")
    lines = [f"/* %{node.name}: TFLite's int8 TRANSPOSE_CONV, {sh}x{sw} phases */",
             f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, int8_t *out)', "{",
             f"    int8_t *col = (int8_t *){col};"]
    if narrow:
        lines.append(f"    int8_t pair[{2 * out_c}];")
    for (ry, rx), (ty, tx, Wp, folded) in phases.items():
        a0, a1 = phase_range(OH, sh, ry, ph)
        b0, b1 = phase_range(OW, sw, rx, pw)
        if a0 >= a1 or b0 >= b1:
            continue
        first = f"(a * {sh} + {ry - ph}) * {OW} + {b0 * sw + rx - pw}"
        lines.append(f"    /* phase ({ry}, {rx}): filter rows {ty}, columns {tx} */")
        if Wp is None:  # no taps: every output the channel's requantised bias
            values = np.clip(multiply_by_quantized_multiplier(folded, q.multipliers, q.shifts) + q.output_zero_point,
                             q.lo, q.hi)
            v_sym = em.add_const_array(em.sym(f"{node.name}_m4c{ry}{rx}"), values.astype(np.int8), "int8_t",
                                       f"%{node.name}: the outputs of phase ({ry}, {rx}), which no tap reaches")
            lines += [f"    for (int32_t a = {a0}; a < {a1}; ++a)",
                      f"        for (int32_t b = 0; b < {b1 - b0}; ++b)",
                      f"            for (int32_t o = 0; o < {out_c}; ++o) out[({first} + b * {sw}) * {out_c} + o] "
                      f"= {v_sym}[o];"]
            continue
        k = Wp.shape[1]
        kp = -(-k // 4) * 4
        em.scratch(col, "uint32_t", 2 * kp // 4)
        bound = accumulator_bound(folded, Wp, 128)
        fold = fold_zero_point(bound, q.multipliers, q.shifts, q.output_zero_point)
        name = f"{node.name}_p{ry}{rx}"
        group = 2 if narrow else 4
        params = channel_params(folded, q.multipliers, q.shifts, group, "fold" if fold else "plain", None,
                                q.output_zero_point if fold else None)
        if narrow:
            words, kw4 = arranged_rows(Wp, 2, True)
        else:
            params = paired_params(params)
            words, kw4 = paired_rows(Wp)
        w_sym = em.add_const_array(em.sym(f"{name}_m4w"), words, "int32_t",
                                   f"%{node.name}: phase ({ry}, {rx})'s {out_c}x{k} weights, "
                                   + ("widened to int16, pairs of rows interleaved" if narrow
                                      else "int8, pairs of rows in words (paired_rows)"))
        p_sym = em.add_const_array(em.sym(f"{name}_m4q"), params.words, "int32_t",
                                   f"%{node.name}: phase ({ry}, {rx}) per channel {', '.join(params.stored)} (m4_rq)")
        column = _column_function(em, node, ry, rx, ty, tx, kp)
        # the columns' padding bytes (k to kp) meet zero weights: left as they are
        lines += [f"    for (int32_t a = {a0}; a < {a1}; ++a)",
                  f"        for (int32_t b = 0; b < {b1 - b0}; b += 2) {{",
                  f"            const int32_t n = b + 1 < {b1 - b0} ? 2 : 1;",
                  f"            int8_t *o = out + ({first} + b * {sw}) * {out_c};",
                  f"            {column}(x, col, a, b + {b0}, n);"]
        if narrow:
            mm = matrix_function(em, name, q, "2x2w16", w_sym, params, p_sym, kw4, out_c, kp)
            lines += [f"            {mm}(col, n, pair);",
                      *(f"            o[{c}] = pair[{c}];" for c in range(out_c)),
                      "            if (n == 2) { " + " ".join(f"o[{sw * out_c + c}] = pair[{out_c + c}];"
                                                        for c in range(out_c)) + " }"]
        else:
            mm = matrix_function(em, name, q, "2x4p", w_sym, params, p_sym, kw4, out_c, kp, sw * out_c)
            lines.append(f"            {mm}(col, n, o);")
        lines.append("        }")
    lines += ["}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
