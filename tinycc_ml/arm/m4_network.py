"""Cortex-M4 / M33 kernels for TFLite's int8 network layers: convolutions, depthwise convolutions and fully
connected layers on the DSP extension (SXTB16 widens two int8 lanes to int16, SMLAD multiplies two pairs and
adds both products, SMLABB / SMLATT one lane each), each with TFLite's requantisation, output zero point and
activation clamp in its epilogue; bit for bit the shared C's (codegen/c_network.py) and so tflite-micro's.

Convolutions and fully connected layers are one matrix product, one function per layer with its geometry in
literals (``matrix_function``): output channels x columns, a column the K = kh kw C_in int8 inputs of one output
position (im2col, two columns at a time), or the input itself where a column is already contiguous (a 1 x 1
stride-1 convolution, a fully connected layer). The weights are rearranged at compile time: rows padded to a
multiple of 4 bytes (zero weights), the rows of each group of output channels interleaved word by word, so
one pointer walks them; the input zero point is folded into the bias, bias' = bias - zx sum(w), so the inner
loop multiplies the raw int8 inputs (taps in the padding are filled with zx in the column: their terms
cancel, as TFLite skips them). SXTB16 splits a word into bytes 0, 2 and bytes 1, 3; inputs and weights are
both split so, so the products line up with no reordering. The inner loop is inline asm (GCC spilled a
pointer in C), 4 steps per iteration:

- convolutions (and fully connected layers with several rows), int8 weights: two columns by four channels on
  pairs of channels (``paired_rows``): the two columns widened to int16 once for all the layer's channels
  (``m4_widen2``, into a scratch pair: SXTB16 and SXTB16 ROR #8 of each input word); a pair's weights for two
  inputs in one word whose halves read as int16 are 256 c1 + c0, so per word SMLAD of the raw word (256 acc1 +
  acc0) and, after one SXTB16, of its even bytes (acc0): per step 4 inputs deep 4 input words and 4 weight words
  by single loads back to back at immediate offsets (a load after one that wrote back its base is not
  pipelined), 4 SXTB16, 16 SMLAD for 32 multiply-accumulates (acc1 = (raw - even) / 256,
  exact while |acc1| < 2^23, checked per layer); channels whose weights are all zero (pruned) are left out,
  their output a constant stored after the product;
- where a layer cannot be paired (an accumulator too large, a weight -128 under a negative one), two columns by
  two channels: per channel 1 LDR and 2 SXTB16 per step (15 instructions for 16 multiply-accumulates), or where
  the build favours speed (``optimize="speed"``, ``weight_layout``) the weights widened to int16 at compile
  time, 1 LDRD per channel (11 for 16); 8 SMLAD either way;
- fully connected layers with one row (each weight used once: int8 whatever the build favours): one column by
  four channels, 1 LDR and 2 SXTB16 of inputs, 1 LDM of weights; paired, 4 SXTB16 and 8 SMLAD for 16 (else 8
  SXTB16, 8 SMLAD).

im2col is a function per layer too (``im2col_function``): a window row inside the input copied whole in words, the
padding's taps filled with zx in words. Where a tap's channels are whole words, the output rows of even width and
there is no dilation across, no im2col (``rows_function``, ``RowLayout``): per output row its kh input rows widened
into the scratch, the paired kernel reading both columns of a pair in place from them (``_block_rows``); where
consecutive windows overlap the rows stay in a ring, each widened once per layer. The paired kernels unroll up to 16
steps a loop iteration by the layer's weight bytes (``unroll_steps``); where the block's first step runs once (no
loop around it) the second column's accumulators start in its first SMLADs, their addend the first column's biases
(no copies), and unrolled blocks read every step at its own offsets. A window row across the border in im2col is zx,
the input's bytes, zx in three runs. Depthwise 3x3 layers of stride 1 or 2 go first to ``m4_network_planar``'s
planar kernel (chosen there by modelled cycles).

Depthwise convolutions (depth multiplier 1, channels a multiple of 4), one function per layer, 4 channels at a
time, a tap's weights as int16 lanes channels 0, 2 and 1, 3 (as SXTB16 splits the input word): split from the
int8 word in registers, once for two positions, or stored so (``optimize="speed"``): positions
whose window lies inside the input two at a time (each weight word loaded once for both; at a stride equal to
the dilation each input word too, the first position's tap k the second's k - 1), the taps unrolled in an asm
block, the input zero point folded into the bias, SMLABB / SMLATT (one channel per lane product); the rows
across the top and bottom borders and the border columns likewise over their taps inside (literal ranges, a
bias per range of taps); a wide layer's corners in an edge function over the taps inside the input (the range
computed per position), x - zx in SSUB16. Layers of one geometry and epilogue share the functions (KWS's
four), their data the arguments.

The kernels' functions are compiled at -O2 whatever the build's flags (``optimize`` attribute): at -Os GCC
spills the inner loops' accumulators, about twice the instructions.

Requantisation, exact where the accumulator is proven small (|acc| 2^left < 2^30 from the weights, the bias
and the int8 range: checked per layer at compile time, else the shared C): gemmlowp's
SaturatingRoundingDoublingHighMul(a, m) is (a m + 2^30) >> 31 for every a when m > 0 (both of its rounding
cases agree on this form; its one saturating case needs m = INT32_MIN), which is the high word of 2a m + 2^31;
RoundingDivideByPOT(h, r) is (h + 2^(r-1) - [h < 0]) >> r for r > 0 (no overflow: |h| < 2^30), and [h < 0] may
be [a < 0]: they differ only where h = 0 > a, and there both sums lie in [0, 2^r). So one SMMLAR (t + the
rounded high word of a2 m) computes h + 2^(r-1) - [a < 0] from a2 = a 2^(left+1) and t = 2^(r-1) + (a2 >> 31).
Where the bounds allow (``fold_zero_point``) the output zero point joins the rounding nudge
(((h + 2^(r-1) - [h < 0]) >> r) + zp = (h - [h < 0] + 2^(r-1) + zp 2^r) >> r), and the clamp is SSAT to int8
(then the activation's bounds where narrower): per output LSL, ADD, SMMLAR, ASR, SSAT, STRB, the channel's
constants loaded once for its columns. A layer stores per channel its bias and only the requantisation fields
that differ between its channels (``ChannelParams``); the shared ones are literals. The 2x4p blocks do all of it
in their asm statement (``asm_epilogue``, ``_paired_asm_body``): biases loaded, products, requantisation, stores,
the channel words' and destinations' pointers memory operands the block advances, the weights' pointer carried in
its register from group to group (GCC reloaded and copied them around each block). TFLite's ADD: m4_add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.target import Node, layer_quantisation, multiply_by_quantized_multiplier, window_of

MAX_RIGHT_SHIFT = 31  # RoundingDivideByPOT's exponent range; beyond it the shared C (and TFLite) assert


def named_helper(em, name: str, text: str) -> str:
    symbol = em.sym(name)
    if symbol not in em.helpers:
        em.helpers[symbol] = text.replace("@", em.prefix + "_")
    return symbol


def simd_helpers(em) -> tuple[str, str]:
    """(rd32, sxtb16_ror8): an unaligned word read (one LDR on the M4) and SXTB16 of bytes 1 and 3."""
    rd = named_helper(em, "m4_rd32", """\
static inline __attribute__((always_inline)) int32_t @m4_rd32(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
""")
    odd = named_helper(em, "m4_sxtb16_ror8", """\
static inline __attribute__((always_inline)) int32_t @m4_sxtb16_ror8(int32_t v)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
""")
    return rd, odd


def inside_range(n_out: int, n_in: int, k: int, s: int, d: int, p: int) -> tuple[int, int]:
    """[lo, hi): the output positions whose window lies wholly inside the input (an empty range when none)."""
    lo = -(-p // s)
    hi = (n_in - 1 - (k - 1) * d + p) // s + 1
    lo, hi = min(max(lo, 0), n_out), min(max(hi, 0), n_out)
    return lo, max(lo, hi)


def _tap_range(i0: int, n_in: int, k: int, d: int) -> tuple[int, int]:
    """[k0, k1): the taps k of a window starting at input index i0 (dilation d) inside [0, n_in)."""
    k0 = 0 if i0 >= 0 else (-i0 + d - 1) // d
    k1 = 0 if n_in - i0 <= 0 else min(k, (n_in - i0 + d - 1) // d)
    return k0, max(k0, k1)


def depthwise_function(em, name: str, win, channels: int, kh: int, kw: int, q, w16: bool, params: ChannelParams,
                       bias_at) -> str:
    """A layer's depthwise convolution (multiplier 1) as its own functions, its geometry in literals, 4
    channels at a time: ``<sym>(x, out, wgt, prm, bias)``, its weights, its ChannelParams (the input zero point
    folded into the bias) and its other biases (``bias_at(kx0, kx1, ky0, ky1)``: the offset of the biases with
    the zero point's terms of those taps folded in; ``bias_at(None)``: the raw ones) as arguments, so that
    layers of one geometry and epilogue share the functions (``shared_function``): positions whose window lies
    inside the input two at a time (each weight pair loaded once for both), the taps unrolled in an asm block;
    the rows across the top and bottom borders and the border columns likewise over their taps inside the
    input; a wide layer's corners in an edge function over the taps inside, x - zx in SSUB16."""
    rd, odd = simd_helpers(em)
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    zx2 = ((q.input_zero_point & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)
    C, T, P = channels, kh * kw, params.per_channel
    tw = 2 if w16 else 1  # words per tap and 4 channels
    W, OW = win.width, win.out_width
    symbol, edge = "@SYM@", "@SYM@_edge"

    def tap_weights(t: str) -> str:
        """we, wo: tap t's weights of the 4 channels as int16 lanes (0, 2) and (1, 3): two stored words, or the
        int8 word split by SXTB16."""
        if w16:
            return f"const int32_t we = wg[2 * ({t})], wo = wg[2 * ({t}) + 1];"
        return f"const int32_t w = wg[{t}], we = __sxtb16(w), wo = {odd}(w);"

    def macs(acc: str, w_e: str, w_o: str, u: str) -> list[str]:
        return [f"{acc}0 = __smlabb({w_e}, {u}e, {acc}0);", f"{acc}2 = __smlatt({w_e}, {u}e, {acc}2);",
                f"{acc}1 = __smlabb({w_o}, {u}o, {acc}1);", f"{acc}3 = __smlatt({w_o}, {u}o, {acc}3);"]

    def stores(accs: list[tuple[str, str]], indent: str) -> list[str]:
        return channel_epilogue(em, q, params, [(f"q + {k * P}", [(f"{a}{k}", f"{o}[{k}]") for a, o in accs])
                                        for k in range(4)], indent)

    (oy_lo, oy_hi), (ox_lo, ox_hi) = (inside_range(win.out_height, win.height, kh, sy, dy, py),
                                      inside_range(OW, W, kw, sx, dx, px))
    # the border columns of the rows inside unrolled too; those of the rows across the border (the corners) too
    # where they are a quarter of a row or more (narrow layers: the code for little time otherwise), else the edge
    # function
    unrolled = 4 * (OW - (ox_hi - ox_lo)) >= OW

    def edge_lines(b_at: int) -> list[str]:
        """The border: one position, the taps inside the input."""
        return [
            f"/* depthwise {kh}x{kw}, {C} channels: a position whose window crosses the border */",
            f'__attribute__((optimize("O2"), noinline)) static void {edge}(const int8_t *x, int8_t *out, int32_t oy, '
            "int32_t ox, const int32_t *wgt, const int32_t *prm, const int32_t *bias)", "{",
            f"    const int32_t iy0 = oy * {sy} - {py}, ix0 = ox * {sx} - {px};",
            f"    const int32_t ky0 = iy0 >= 0 ? 0 : (-iy0 + {dy - 1}) / {dy};",
            f"    const int32_t ky_end = {win.height} - iy0 <= 0 ? 0 : ({win.height} - iy0 + {dy - 1}) / {dy};",
            f"    const int32_t ky1 = ky_end < {kh} ? ky_end : {kh};",
            f"    const int32_t kx0 = ix0 >= 0 ? 0 : (-ix0 + {dx - 1}) / {dx};",
            f"    const int32_t kx_end = {W} - ix0 <= 0 ? 0 : ({W} - ix0 + {dx - 1}) / {dx};",
            f"    const int32_t kx1 = kx_end < {kw} ? kx_end : {kw};",
            f"    int8_t *o = out + (oy * {OW} + ox) * {C};",
            f"    const int32_t *q = prm, *b = bias + {b_at}, *wg = wgt;",
            f"    for (int32_t c = 0; c < {C}; c += 4, o += 4, q += {4 * P}, b += 4, wg += {tw * T}) {{",
            "        int32_t a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];",
            "        for (int32_t ky = ky0; ky < ky1; ++ky)",
            "        for (int32_t kx = kx0; kx < kx1; ++kx) {",
            f"            const int32_t u = {rd}(x + ((iy0 + ky * {dy}) * {W} + ix0 + kx * {dx}) * {C} + c);",
            f"            const int32_t ue = __ssub16(__sxtb16(u), {zx2}), uo = __ssub16({odd}(u), {zx2});",
            "            " + tap_weights(f"ky * {kw} + kx"),
            *("            " + m for m in macs("a", "we", "wo", "u")),
            "        }",
            *stores([("a", "o")], "        "),
            "    }", "}", ""]
    edge_text = ("\n".join(edge_lines(bias_at(None))) if not unrolled and (ox_lo > 0 or ox_hi < OW)
                 and (oy_lo > 0 or oy_hi < win.out_height) else None)

    def inside(n: int, column: int | None = None, row: int | None = None) -> list[str]:
        """n (1 or 2) positions from (oy, ox) whose windows lie inside the input; or with ``column`` the one
        position ox = column whose window crosses the left or right border, with ``row`` (a literal oy) a
        position of a row whose windows cross the top or bottom border: the taps inside the input (literal
        ranges), the bias the zero point's terms over them folded in (column_bias)."""
        accs = "ab"[:n]
        kx0, kx1 = (0, kw) if column is None else _tap_range(column * sx - px, W, kw, dx)
        ky0, ky1 = (0, kh) if row is None else _tap_range(row * sy - py, win.height, kh, dy)
        iy = "iy0" if row is None else f"{row * sy - py + ky0 * dy}"
        ix = f"ox * {sx} - {px}" if column is None else f"{column * sx - px + kx0 * dx}"
        body = [f"const int8_t *xp = x + ({iy} * {W} + {ix}) * {C};",
                f"int8_t *o = out + ({'oy' if row is None else row} * {OW} + {'ox' if column is None else column})"
                f" * {C};",
                "const int32_t *q = prm, *wg = wgt;"]
        if (kx0, kx1, ky0, ky1) == (0, kw, 0, kh):
            body += [f"for (int32_t c = 0; c < {C}; c += 4, xp += 4, o += 4, q += {4 * P}, wg += {tw * T}) {{",
                     "    " + " ".join(f"int32_t {a}0 = q[0], {a}1 = q[{P}], {a}2 = q[{2 * P}], {a}3 = q[{3 * P}];"
                                       for a in accs)]
        else:
            body += [f"const int32_t *b = bias + {bias_at(kx0, kx1, ky0, ky1)};",
                     f"for (int32_t c = 0; c < {C}; c += 4, xp += 4, o += 4, q += {4 * P}, wg += {tw * T}, b += 4) {{",
                     "    " + " ".join(f"int32_t {a}0 = b[0], {a}1 = b[1], {a}2 = b[2], {a}3 = b[3];"
                                       for a in accs)]
        taps = [(ky * kw + kx, ((ky - ky0) * dy * W + (kx - kx0) * dx) * C) for ky in range(ky0, ky1)
                for kx in range(kx0, kx1)]
        if taps and tap_offsets_fit(taps, n * sx * C):
            body.append("    int32_t u, ue, w, we;")
            ops = {f"{a}{k}": "+r" for a in accs for k in range(4)}
            ops.update({"u": "=&r", "ue": "=&r", "w": "=&r", "we": "=&r"})
            if n == 2 and sx == dx:  # the second position's tap k reads the first's tap k + 1: a word per column
                lines = [line for ky in range(ky0, ky1)
                         for line in depthwise_row(ky * kw, (ky - ky0) * dy * W * C, kw, dx * C, w16)]
            else:
                lines = [line for t, off in taps for line in depthwise_tap(t, [off + i * sx * C for i in range(n)],
                                                                           accs, w16).split("\n")]
            body += ["    __asm__(", *(f'        "{line}\\n"' for line in lines),
                     "        : " + ", ".join(f'[{k}] "{c}"({k})' for k, c in ops.items()),
                     '        : [xr] "r"(xp), [wg] "r"(wg) : "memory");']
        else:
            for t, off in taps:
                body += ["    {", f"        {tap_weights(str(t))}"]
                for i, a in enumerate(accs):
                    body += [f"        const int32_t {a}u = {rd}(xp + {off + i * sx * C});",
                             f"        const int32_t {a}ue = __sxtb16({a}u), {a}uo = {odd}({a}u);",
                             *("        " + m for m in macs(a, "we", "wo", f"{a}u"))]
                body.append("    }")
        body += stores([(a, "o" if i == 0 else f"(o + {C})") for i, a in enumerate(accs)], "    ")
        body.append("}")
        return body

    def border_column(column: int, row: int | None = None) -> list[str]:
        if not unrolled and row is not None:
            return [f"        {edge}(x, out, {row}, {column}, wgt, prm, bias);"]
        return ["        {", *("            " + line for line in inside(1, column, row)), "        }"]

    def row_body(row: int | None = None) -> list[str]:
        """One output row: oy in a loop over the rows inside, or the literal ``row`` across the border."""
        rest = ([f"        if (ox < {ox_hi}) {{",  # an odd count inside
                 *("            " + line for line in inside(1, None, row)),
                 "            ++ox;",
                 "        }"] if (ox_hi - ox_lo) % 2 else [])
        return [*(line for column in range(ox_lo) for line in border_column(column, row)),
                f"        int32_t ox = {ox_lo};",
                f"        for (; ox + 1 < {ox_hi}; ox += 2) {{",
                *("            " + line for line in inside(2, None, row)),
                "        }",
                *rest,
                *(line for column in range(ox_hi, OW) for line in border_column(column, row)),
                "        (void)ox;"]

    def border_row(row: int) -> list[str]:
        return ["    {", *row_body(row), "    }"]

    lines = [
        f"/* depthwise {kh}x{kw}, {C} channels, 4 at a time (SMLABB / SMLATT, int16 weights) */",
        # noclone: GCC's constant-propagated clone of a small layer's function found no registers for the two
        # positions' asm block (14 operands): "impossible constraints"
        f'__attribute__((optimize("O2"), noclone)) static void {symbol}(const int8_t *x, int8_t *out, '
        "const int32_t *wgt, const int32_t *prm, const int32_t *bias)", "{",
        "    (void)bias;  /* none where every window lies inside the input */",
        *(line for row in range(oy_lo) for line in border_row(row)),
        f"    for (int32_t oy = {oy_lo}; oy < {oy_hi}; ++oy) {{",
        f"        const int32_t iy0 = oy * {sy} - {py};",
        "        (void)iy0;",
        *row_body(),
        "    }",
        *(line for row in range(oy_hi, win.out_height) for line in border_row(row)),
        "}", ""]
    return shared_function(em, f"m4_dw_{name}", [(suffix, text) for suffix, text in
                                                  (("_edge", edge_text), ("", "\n".join(lines))) if text])


def shared_function(em, name: str, texts: list[tuple[str, str]]) -> str:
    """The symbol of a kernel's functions (``texts``: (suffix of its symbol, text), the symbol written @SYM@, the
    layer's data their arguments):
    the first layer's name (``name``) for these texts, or the symbol of a layer that emitted the same texts
    before (KWS's four depthwise layers: one function)."""
    key = "\n".join(text for _, text in texts)
    if key not in em.shared_kernels:
        symbol = em.sym(name)
        for suffix, text in texts:
            em.helpers[symbol + suffix] = text.replace("@SYM@", symbol)
        em.shared_kernels[key] = symbol
    return em.shared_kernels[key]


def tap_offsets_fit(taps: list[tuple[int, int]], span: int) -> bool:
    """Whether every input load of the taps (byte offsets from the first position's window, positions ``span``
    bytes wide) is an LDR's immediate offset (at most 4095)."""
    return max(off for _, off in taps) + span <= 4095


def depthwise_tap(t: int, offsets: list[int], accs: str, w16: bool) -> str:
    """One tap of the depthwise asm block: its weights of 4 channels as int16 lanes (we: channels 0, 2; w:
    1, 3) from one int8 word split by SXTB16 or two stored words, then per position (its input word at
    offsets[i] from xr) the word split likewise and SMLABB / SMLATT per channel. The first input load and
    the weights' are back to back (a load after a load is pipelined)."""
    lines = [f"ldr %[u], [%[xr], #{offsets[0]}]"]
    if w16:
        lines += [f"ldr %[we], [%[wg], #{8 * t}]", f"ldr %[w], [%[wg], #{8 * t + 4}]"]
    else:
        lines += [f"ldr %[w], [%[wg], #{4 * t}]", "sxtb16 %[we], %[w]", "sxtb16 %[w], %[w], ror #8"]
    for i, (a, off) in enumerate(zip(accs, offsets)):
        if i:
            lines.append(f"ldr %[u], [%[xr], #{off}]")
        lines += ["sxtb16 %[ue], %[u]", "sxtb16 %[u], %[u], ror #8",
                  f"smlabb %[{a}0], %[we], %[ue], %[{a}0]", f"smlatt %[{a}2], %[we], %[ue], %[{a}2]",
                  f"smlabb %[{a}1], %[w], %[u], %[{a}1]", f"smlatt %[{a}3], %[w], %[u], %[{a}3]"]
    return "\n".join(lines)


def depthwise_row(t0: int, off: int, kw: int, step: int, w16: bool) -> list[str]:
    """One window row (taps t0.., input words ``step`` bytes apart from ``off``) of two positions one tap apart
    (stride equal to the dilation): each input word loaded and split once, for the first position's tap k and
    the second's tap k - 1 (registers as ``depthwise_tap``'s)."""
    lines = [f"ldr %[u], [%[xr], #{off}]", "sxtb16 %[ue], %[u]", "sxtb16 %[u], %[u], ror #8"]
    for k in range(kw):
        t = t0 + k
        if w16:
            lines += [f"ldr %[we], [%[wg], #{8 * t}]", f"ldr %[w], [%[wg], #{8 * t + 4}]"]
        else:
            lines += [f"ldr %[w], [%[wg], #{4 * t}]", "sxtb16 %[we], %[w]", "sxtb16 %[w], %[w], ror #8"]
        for i, a in enumerate("ab"):
            if i:
                lines += [f"ldr %[u], [%[xr], #{off + (k + 1) * step}]", "sxtb16 %[ue], %[u]",
                          "sxtb16 %[u], %[u], ror #8"]
            lines += [f"smlabb %[{a}0], %[we], %[ue], %[{a}0]", f"smlatt %[{a}2], %[we], %[ue], %[{a}2]",
                      f"smlabb %[{a}1], %[w], %[u], %[{a}1]", f"smlatt %[{a}3], %[w], %[u], %[{a}3]"]
    return lines


def depthwise_weights(W: np.ndarray, w16: bool) -> np.ndarray:
    """Depthwise weights (channels x taps, int8) as the depthwise functions read them: per group of 4
    channels, per tap, the int8 word of the 4 channels, or with ``w16`` two words of int16 lanes: channels
    (0, 2), then (1, 3) (SXTB16's split of an input word)."""
    c, t = W.shape
    r = W.astype(np.int8).reshape(c // 4, 4, t).transpose(0, 2, 1)  # groups, taps, 4 channels
    if not w16:
        return np.ascontiguousarray(r).view("<i4").reshape(-1)
    lanes = np.ascontiguousarray(r.astype(np.int16)[:, :, [0, 2, 1, 3]])
    return lanes.view("<i4").reshape(-1)


# ---------------------------------------------------------------- a layer's matrix product


def rq_helper(em, wide: bool) -> str:
    """m4_rq (or m4_rq_wide): a channel's requantisation from its constants in registers, before the output
    zero point and the clamp. m4_rq(a2, m, r, nu, nm) takes the accumulator already shifted left by sl (the
    module's docstring: SMMLAR adds the rounding nudge and the sign's correction to the high product in one
    instruction); m4_rq_wide(acc, m, sl, r) is for any accumulator: the high product in int64 and
    RoundingDivideByPOT as TFLite writes it."""
    if not wide:
        named_helper(em, "m4_rq_fold", """\
static inline __attribute__((always_inline)) int32_t @m4_rq_fold(int32_t a2, int32_t m, int32_t r, int32_t nudge)
{
    /* m4_rq for r > 0 (the output zero point in the nudge): the correction always applies */
    int32_t t, v;
    __asm__("add %0, %2, %3, asr #31\\n\\tsmmlar %1, %3, %4, %0" : "=&r"(t), "=r"(v) : "r"(nudge), "r"(a2), "r"(m));
    return v >> r;
}
""")
        return named_helper(em, "m4_rq", """\
static inline __attribute__((always_inline)) int32_t @m4_rq(int32_t a2, int32_t m, int32_t r, int32_t nudge,
                                                            int32_t negmask)
{
    int32_t v;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(v) : "r"(a2), "r"(m), "r"(nudge + ((a2 >> 31) & negmask)));
    return v >> r;
}
""")
    return named_helper(em, "m4_rq_wide", """\
static inline __attribute__((always_inline)) int32_t @m4_rq_wide(int32_t acc, int32_t m, int32_t sl, int32_t r)
{
    const int32_t x = (int32_t)((uint32_t)acc << (sl - 1));
    const int32_t high = (int32_t)(((int64_t)x * m + ((int64_t)1 << 30)) >> 31);
    const uint32_t mask = (1u << r) - 1u;
    const int32_t remainder = (int32_t)((uint32_t)high & mask);
    const int32_t threshold = (int32_t)(mask >> 1) + (high < 0 ? 1 : 0);
    return (high >> r) + (remainder > threshold ? 1 : 0);
}
""")


def _shifted(acc, sl: str) -> str:
    """C for an accumulator shifted left by sl (a literal or a variable): ``acc`` a C expression, or for the odd
    channel of a pair (``paired_rows``) the pair's two accumulators (raw, even), whose difference is 256 acc."""
    if isinstance(acc, str):
        return f"(int32_t)((uint32_t){acc} << {sl})"
    raw, even = acc
    d = f"(int32_t)((uint32_t){raw} - (uint32_t){even})"
    if sl.isdigit() and int(sl) <= 8:  # 256 acc >> (8 - sl): exact, the low 8 bits are zero
        return f"({d} >> {8 - int(sl)})"
    return f"(int32_t)((uint32_t)({d} >> 8) << {sl})"


def saturated(v: str, lo: int, hi: int, bits: int = 8) -> str:
    """``v`` (an int32 expression) clamped to [lo, hi] (literals): SSAT to ``bits``, then the activation's
    bounds where narrower."""
    e = f"__ssat({v}, {bits})"
    if lo > -(1 << (bits - 1)):
        e = f"@max({e}, {lo})"
    if hi < (1 << (bits - 1)) - 1:
        e = f"@min({e}, {hi})"
    return e


def minmax_helpers(em) -> None:
    named_helper(em, "max", "static inline __attribute__((always_inline)) int32_t @max(int32_t a, int32_t b) "
            "{ return a > b ? a : b; }\n")
    named_helper(em, "min", "static inline __attribute__((always_inline)) int32_t @min(int32_t a, int32_t b) "
            "{ return a < b ? a : b; }\n")


def channel_epilogue(em, q, params: ChannelParams, channels: list, indent: str) -> list[str]:
    """Stores of requantised accumulators: ``channels`` as (pointer to a channel's words, [(acc, destination) or
    (acc, destination, guard), ...]) groups sharing a channel's constants (a guarded store happens where the
    guard holds; ``acc`` a C expression, or (raw, even) for the odd channel of a pair, see ``_shifted``).
    ``params.mode``: "wide" (some channel's accumulator not proven small: its flag picks the int64 form; never
    paired), "fold" (the output zero point in the rounding nudge) or "plain"."""
    minmax_helpers(em)
    mode = params.mode
    fast = rq_helper(em, False)
    slow = rq_helper(em, True) if mode == "wide" else None
    lines = []
    for pq, pairs in channels:
        lines.append(f"{indent}{{")
        if any(name not in params.literals for name in EPILOGUE_FIELDS[mode]):  # else every field is a literal
            lines.append(f"{indent}    const int32_t *cq = {pq};")
        # sl only as a variable where it differs between channels (a literal shift folds into the code)
        sl = str(params.literals["sl"]) if "sl" in params.literals and mode != "wide" else "sl"
        lines.append(f"{indent}    const int32_t " + ", ".join(f"{name} = {params.field(name, 'cq')}"
                                                        for name in EPILOGUE_FIELDS[mode]
                                                        if name != "sl" or sl == "sl") + ";")
        for acc, dst, *guard in pairs:
            if mode == "fold":  # r > 0: the sign's correction always applies
                v = saturated(f"{fast}_fold({_shifted(acc, sl)}, m, r, nu)", q.lo, q.hi)
            else:
                v = f"{fast}({_shifted(acc, sl)}, m, r, nu, nm)"
                if mode == "wide":
                    v = f"(big ? {slow}({acc}, m, sl, r) : {v})"
                v = saturated(f"{v} + {q.output_zero_point}", q.lo, q.hi)
            store = f"{dst} = (int8_t){v};"
            lines.append(f"{indent}    " + (f"if ({guard[0]}) {store}" if guard else store))
        lines.append(f"{indent}}}")
    return [line.replace("@", em.prefix + "_") for line in lines]


def asm_block(steps: list[str], iters: int, rem: int, operands: dict[str, str], indent: str) -> list[str]:
    """An inline asm block: ``rem`` single steps, then ``iters`` times the unrolled ``steps`` (a loop on n)."""
    body = []
    step = steps[0]
    for _ in range(rem):
        body += step.split("\n")
    if iters:
        if iters > 1:
            body.append("1:")
        for s in steps:
            body += s.split("\n")
        if iters > 1:
            body += ["subs %[n], %[n], #1", "bne 1b"]
    return asm_text(body, {k: c for k, c in operands.items() if k != "n" or iters > 1}, indent)


def asm_text(body: list[str], operands: dict[str, str], indent: str) -> list[str]:
    """An inline asm statement of the instructions ``body``, its operands (name: constraint) all outputs."""
    outs = ", ".join(f'[{k}] "{c}"({k})' for k, c in operands.items())
    text = [f'{indent}    "{line}\\n"' for line in body]
    return [f"{indent}__asm__(", *text, f"{indent}    : {outs}", f'{indent}    : : "cc", "memory");']


def step_2x2(w16: bool) -> str:
    """One step 4 inputs deep of two columns by two channels, the columns widened (m4_widen2's words: one LDM
    into u, uo, v, vo, registers fixed in ascending order); the weights int16 words (LDRD) or an int8 word
    split by SXTB16 in registers."""
    lines = ["ldm %[x]!, {%[u], %[v], %[uo], %[vo]}"]
    for a, b in (("a00", "a01"), ("a10", "a11")):
        if w16:
            lines.append("ldrd %[w0], %[w1], [%[wp]], #8")
        else:
            lines += ["ldr %[w1], [%[wp]], #4", "sxtb16 %[w0], %[w1]", "sxtb16 %[w1], %[w1], ror #8"]
        lines += [f"smlad %[{a}], %[w0], %[u], %[{a}]", f"smlad %[{b}], %[w0], %[v], %[{b}]",
                  f"smlad %[{a}], %[w1], %[uo], %[{a}]", f"smlad %[{b}], %[w1], %[vo], %[{b}]"]
    return "\n".join(lines)


def widen_helper(em) -> str:
    """m4_widen2(c0, c1, dst, kw4): two columns of 4 kw4 int8 inputs as the matrix steps read them, per 4 inputs
    four words of int16 lanes: c0's (x0, x2), c1's (x0, x2), then c0's (x1, x3), c1's (x1, x3) (SXTB16's two
    splits, the weights' lanes).
    Each column is widened once for all the layer's channels (in the inner loop it was once per two): per 4
    inputs both words' loads back to back, one STM of the four words (registers fixed in ascending order), two
    steps per iteration."""
    step = ("ldr %[u], [%[c0]], #4\\n\\tldr %[v], [%[c1]], #4\\n\\tsxtb16 %[a], %[u]\\n\\tsxtb16 %[b], %[v]\\n\\t"
            "sxtb16 %[c], %[u], ror #8\\n\\tsxtb16 %[d], %[v], ror #8\\n\\tstm %[dst]!, {%[a], %[b], %[c], %[d]}")
    ops = ('[c0] "+r"(c0), [c1] "+r"(c1), [dst] "+r"(dst), [u] "=&r"(u), [v] "=&r"(v), [a] "=&r"(a), '
           '[b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d) : : "memory"')
    return named_helper(em, "m4_widen2", f"""\
__attribute__((optimize("O2"), noinline)) static void @m4_widen2(const int8_t *c0, const int8_t *c1, int32_t *dst,
                                                               int32_t kw4)
{{
    register int32_t a __asm__("r8"), b __asm__("r9"), c __asm__("r10"), d __asm__("r11");
    int32_t u, v;
    if (kw4 & 1)
        __asm__ volatile("{step}" : {ops});
    for (int32_t n = kw4 >> 1; n > 0; --n)
        __asm__ volatile("{step}\\n\\t{step}" : {ops});
}}
""")


def _step_1x4() -> str:
    """One step 4 inputs deep of one column by four channels (int8 weights, the four words in one LDM into
    w0..w3, registers fixed in ascending order; each word's even bytes into the previous word's register)."""
    lines = ["ldr %[u], [%[x]], #4", "sxtb16 %[ue], %[u]", "sxtb16 %[u], %[u], ror #8",
             "ldm %[wp]!, {%[w0], %[w1], %[w2], %[w3]}"]
    spare = {"w0": "t", "w1": "w0", "w2": "w1", "w3": "w2"}
    for k, w in enumerate(("w0", "w1", "w2", "w3")):
        e = spare[w]
        lines += [f"sxtb16 %[{e}], %[{w}]", f"sxtb16 %[{w}], %[{w}], ror #8",
                  f"smlad %[a{k}], %[{e}], %[ue], %[a{k}]", f"smlad %[a{k}], %[{w}], %[u], %[a{k}]"]
    return "\n".join(lines)


def _pair_macs(w: str, us: tuple[str, ...], accs: list[tuple[str, str]], seed: bool = False) -> list[str]:
    """A pair's word w (``paired_rows``) times the int16 lanes of each input register in ``us``: the raw word's
    halves (256 c1 + c0) into the raw accumulators, then, split in place by SXTB16, c0 into the even ones;
    ``accs``: (raw, even) per input register. ``seed`` (the block's first multiply-accumulates): the second
    column's accumulators start from the first's (its bias, not yet added to), no copies before the asm."""
    if seed:  # the second column's first, its addend the first column's accumulator before its own
        accs, us = accs[::-1], us[::-1]
        lines = [f"smlad %[{r}], %[{w}], %[{u}], %[{accs[-1][0]}]" for u, (r, _) in zip(us, accs)]
        lines.append(f"sxtb16 %[{w}], %[{w}]")
        return lines + [f"smlad %[{e}], %[{w}], %[{u}], %[{accs[-1][1]}]" for u, (_, e) in zip(us, accs)]
    lines = [f"smlad %[{r}], %[{w}], %[{u}], %[{r}]" for u, (r, _) in zip(us, accs)]
    lines.append(f"sxtb16 %[{w}], %[{w}]")
    return lines + [f"smlad %[{e}], %[{w}], %[{u}], %[{e}]" for u, (_, e) in zip(us, accs)]


def _step_2x4p(i: int, seed: bool = False) -> list[str]:
    """Step i (of an unrolled run) 4 inputs deep of two columns (m4_widen2's words) by four channels (two pairs,
    ``paired_rows``' four words): per half of the inputs (lanes x0, x2, then x1, x3) both columns' words and
    the two pairs' words (w, w1) loaded back to back at immediate offsets (a load after a load is pipelined;
    not after one whose base it wrote back), 32 multiply-accumulates in 16 SMLAD; ``seed``: the block's first step
    (``_pair_macs``' seed in its first half, which touches every accumulator)."""
    lines = []
    for half in (0, 1):
        o = 16 * i + 8 * half
        lines += [f"ldr %[u], [%[x], #{o}]", f"ldr %[v], [%[x], #{o + 4}]", f"ldr %[w], [%[wp], #{o}]",
                  f"ldr %[w1], [%[wp], #{o + 4}]"]
        for k, w in enumerate(("w", "w1")):
            lines += _pair_macs(w, ("u", "v"), [(f"r{k}u", f"e{k}u"), (f"r{k}v", f"e{k}v")], seed and not half)
    return lines


def _seeded(iters: int, rem: int) -> bool:
    """Whether ``_block_2x4p``'s first step runs once (not inside its loop): the second column's accumulators
    then start from the first's (``_pair_macs``' seed)."""
    return rem > 0 or iters == 1


def _block_2x4p(per: int, iters: int, rem: int) -> list[str]:
    """The 2x4p asm: ``rem`` steps, then ``iters`` times ``per`` steps, the pointers advanced once per run; the
    loop's count in memory (``n``: the registers hold 8 accumulators, 2 pointers and 4 words), decremented
    through w, dead there. With no loop every step at its own offsets, only wp advanced (x is dead after the
    block: the caller starts each block's x afresh)."""
    seed = _seeded(iters, rem)
    if iters <= 1:
        steps = rem + (per if iters else 0)
        return [line for i in range(steps) for line in _step_2x4p(i, seed and i == 0)] + [
            f"add %[wp], %[wp], #{16 * steps}"]
    body = []
    for run, loop in ((rem, False), (per if iters else 0, iters > 1)):
        if not run:
            continue
        if loop:
            body.append("1:")
        body += [line for i in range(run) for line in _step_2x4p(i, seed and not body and i == 0)]
        body += [f"add %[x], %[x], #{16 * run}", f"add %[wp], %[wp], #{16 * run}"]
        if loop:
            body += ["ldr %[w], %[n]", "subs %[w], %[w], #1", "str %[w], %[n]", "bne 1b"]
    return body


def _step_rows(j: int, d: int) -> list[str]:
    """Step j of a window row's segment (``rows_function``'s widened rows: per 4 inputs the even lanes' word, then
    the odd lanes'), two columns ``d`` bytes apart, by four channels (two pairs): as ``_step_2x4p``."""
    lines = []
    for half in (0, 1):
        o = 8 * j + 4 * half
        lines += [f"ldr %[u], [%[x], #{o}]", f"ldr %[v], [%[x], #{o + d}]", f"ldr %[w], [%[wp], #{16 * j + 8 * half}]",
                  f"ldr %[w1], [%[wp], #{16 * j + 8 * half + 4}]"]
        for k, w in enumerate(("w", "w1")):
            lines += _pair_macs(w, ("u", "v"), [(f"r{k}u", f"e{k}u"), (f"r{k}v", f"e{k}v")])
    return lines


def _loop_end(counter: str, label: str) -> list[str]:
    return [f"ldr %[w], %[{counter}]", "subs %[w], %[w], #1", f"str %[w], %[{counter}]", f"bne {label}"]


def _block_rows(rows) -> list[str]:
    """The 2x4p asm on widened rows (``RowLayout``): per window row its segment of steps (at most 24 unrolled,
    else runs of up to 16 in a loop, ``n2`` in memory), x then moved to the next row's segment; the rows' loop
    ``n`` in memory a mask shifted right once a row: the loop ends when it is zero (its top bit kh - 1), and
    where a ring's last slot was the row, the bit shifted out, x wraps to the first slot."""
    seg, per = rows.segment_steps, rows.run_steps
    body = ["1:"] if rows.kh > 1 else []
    if per == seg:
        body += [line for j in range(seg) for line in _step_rows(j, rows.d)]
        body += [f"add %[x], %[x], #{rows.row_bytes}", f"add %[wp], %[wp], #{16 * seg}"]
    else:
        body += [f"mov %[w], #{seg // per}", "str %[w], %[n2]", "2:"]
        body += [line for j in range(per) for line in _step_rows(j, rows.d)]
        body += [f"add %[x], %[x], #{8 * per}", f"add %[wp], %[wp], #{16 * per}", *_loop_end("n2", "2b")]
        body.append(f"add %[x], %[x], #{rows.row_bytes - 8 * seg}")
    if rows.kh == 1:
        return body
    wrap = ["it cs", f"subcs %[x], %[x], #{rows.kh * rows.row_bytes}"] if rows.ring else []
    return body + ["ldr %[w], %[n]", "lsrs %[w], %[w], #1", "str %[w], %[n]", *wrap, "bne 1b"]


@dataclass(frozen=True)
class RowLayout:
    """A convolution's input as ``rows_function`` widens it for one output row: its kh window rows, row_bytes
    apart, per pixel its channels' words (even lanes, odd lanes per 4); an output position's column starts d bytes
    after the previous one's (stride x channels x 2) and its window row is segment_steps steps of 4 inputs."""

    kh: int
    row_bytes: int
    segment_steps: int
    d: int
    unroll: int  # steps unrolled at most (``unroll_steps``)
    ring: bool = False  # the kh rows a ring the window starts anywhere in (``ring_rows``)

    @property
    def run_steps(self) -> int:
        return max(r for r in range(1, min(self.segment_steps, self.unroll) + 1) if self.segment_steps % r == 0)


def _step_1x4p() -> str:
    """One step 4 inputs deep of one column (its int8 word split by SXTB16) by four channels (two pairs, the
    four words in one LDM into w0..w3, registers fixed in ascending order)."""
    lines = ["ldr %[u], [%[x]], #4", "sxtb16 %[ue], %[u]", "sxtb16 %[u], %[u], ror #8",
             "ldm %[wp]!, {%[w0], %[w1], %[w2], %[w3]}"]
    for k, (w, u) in enumerate((("w0", "ue"), ("w1", "ue"), ("w2", "u"), ("w3", "u"))):
        lines += _pair_macs(w, (u,), [(f"r{k % 2}", f"e{k % 2}")])
    return "\n".join(lines)


def unroll_steps(weight_bytes: int) -> int:
    """Steps a paired matrix kernel unrolls per loop iteration (its count lives in memory: 9 cycles an iteration,
    2 to 7% of the 30-cycle steps): more where the layer's weights are large enough that the code (112 bytes a
    step) stays a small part of its flash (the default build keeps model flash near the file's size)."""
    return 16 if weight_bytes >= 4096 else 8 if weight_bytes >= 2048 else 4


def split_steps(kw4: int, unroll: int = 4) -> tuple[int, int, int]:
    """(steps per loop iteration, iterations, single steps before the loop) for kw4 steps."""
    u = min(unroll, kw4)
    return u, kw4 // u, kw4 % u


def widen_call(em, pair: str, stride: int, kw4: int, widened: bool) -> str:
    """The line widening a matrix function's two columns c0 and c0 + stride into the pair buffer, or where the
    caller wrote them there widened (``widened``: im2col_widen_function) none."""
    if widened:
        return "        (void)c0;  /* the columns widened by the caller */"
    return f"        {widen_helper(em)}(c0, two ? c0 + {stride} : c0, (int32_t *){pair}, {kw4});"


def matrix_function(em, name: str, q, kind: str, w_sym: str, params: ChannelParams, p_sym: str, kw4: int,
                    out_c: int, stride: int, out_stride: int | None = None, constants=(), widened: bool = False,
                    rows: RowLayout | None = None) -> str:
    """A layer's matrix product as its own function (geometry and output constants in literals):
    ``<sym>(cols, n_cols, out)``: out[p * out_c + o] for columns p (``stride`` bytes apart) and channels o.
    kind "2x2" (two columns widened by m4_widen2 into a scratch buffer, by two channels: int8 weight words,
    or with "2x2w16" int16 lanes), "1x4" (one column in place, words per four channels), or on pairs of
    channels (``paired_rows``) "2x4p" (two widened columns by four channels) and "1x4p" (one column in place by
    four channels)."""
    symbol = em.sym(f"m4_mm_{name}")
    P = params.per_channel
    weights = "int16" if kind == "2x2w16" else "int8"
    lines = [f"/* %{name}: {out_c} channels x columns of {4 * kw4} int8 inputs, {kind} ({weights} weights) */",
             f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *cols, int32_t n_cols, int8_t *out'
             f'{", int32_t s0" if rows is not None else ""})', "{"]
    if rows is not None:  # the window from slot s0 of the rows (rows_function); its rows' loop count a mask
        lines += [f"    const int32_t wrap = {1 << (rows.kh - 1)} | 1 << ({rows.kh - 1} - s0);  /* see _block_rows */",
                  f"    cols += s0 * {rows.row_bytes};"]
    per, iters, rem = split_steps(kw4)
    if kind in ("1x4p", "2x4p"):
        lines += _paired_body(em, q, kind, w_sym, params, p_sym, kw4, out_c, stride, out_stride or out_c, constants,
                              widened, rows)
    elif kind == "1x4":
        group = -(-out_c // 4) * 4
        lines += [
            "    for (int32_t p = 0; p < n_cols; ++p) {",
            f"        const int8_t *c0 = cols + p * {stride};",
            f"        int8_t *o0 = out + p * {out_c};",
            f"        const int32_t *wp = {w_sym}, *q = {p_sym};",
            f"        for (int32_t o = 0; o < {group}; o += 4, q += {4 * P}) {{",
            f"            int32_t a0 = q[0], a1 = q[{P}], a2 = q[{2 * P}], a3 = q[{3 * P}];",
            "            const int8_t *x = c0;",
            f"            int32_t n = {iters}, u, ue, t;",
            '            register int32_t w0 __asm__("r8"), w1 __asm__("r9"), w2 __asm__("r10"), w3 __asm__("r11");']
        ops = {k: "+r" for k in ("a0", "a1", "a2", "a3", "x", "wp", "n")}
        ops.update({k: "=&r" for k in ("u", "ue", "w0", "w1", "w2", "w3", "t")})
        lines += asm_block([_step_1x4()] * per, iters, rem, ops, "            ")
        lines.append("            (void)n;")
        for k in range(4):
            lines.append(f"            if (o + {k} < {out_c}) {{")
            lines += channel_epilogue(em, q, params, [(f"q + {k * P}", [(f"a{k}", f"o0[o + {k}]")])],
                                      "                ")
            lines.append("            }")
        lines += ["        }", "    }", "}", ""]
    else:
        pair = em.sym("m4_pair")
        em.scratch(pair, "uint32_t", 4 * kw4)
        lines += [
            "    for (int32_t p = 0; p < n_cols; p += 2) {",
            f"        const int8_t *c0 = cols + p * {stride};",
            "        const int32_t two = p + 1 < n_cols;  /* else a last column: computed twice, stored twice */",
            widen_call(em, pair, stride, kw4, widened),
            f"        int8_t *o0 = out + p * {out_c}, *o1 = two ? o0 + {out_c} : o0;",
            f"        const int32_t *wp = {w_sym}, *q = {p_sym};",
            f"        for (int32_t o = 0; o < {out_c}; o += 2, q += {2 * P}) {{",
            f"            int32_t a00 = q[0], a01 = q[0], a10 = q[{P}], a11 = q[{P}];",
            f"            const uint32_t *x = {pair};",
            f"            int32_t n = {iters}, w0, w1;",
            '            register int32_t u __asm__("r8"), v __asm__("r9"), uo __asm__("r10"), vo __asm__("r11");']
        ops = {k: "+r" for k in ("a00", "a01", "a10", "a11", "x", "wp", "n")}
        ops.update({k: "=&r" for k in ("u", "uo", "v", "vo", "w0", "w1")})
        lines += asm_block([step_2x2(kind == "2x2w16")] * per, iters, rem, ops, "            ")
        lines.append("            (void)n;")
        lines += channel_epilogue(em, q, params, [("q", [("a00", "o0[o]"), ("a01", "o1[o]")])],
                           "            ")
        lines.append(f"            if (o + 1 < {out_c}) {{")
        second = [("a10", "o0[o + 1]"), ("a11", "o1[o + 1]")]
        lines += channel_epilogue(em, q, params, [(f"q + {P}", second)], "                ")
        lines += ["            }", "        }", "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def _paired_body(em, q, kind: str, w_sym: str, params: ChannelParams, p_sym: str, kw4: int, out_c: int,
                 stride: int, out_stride: int, constants=(), widened: bool = False,
                 rows: RowLayout | None = None) -> list[str]:
    """matrix_function's loops over columns and groups of four channels for the paired kinds: per pair the
    even channel's accumulator and the raw one (its bias word: bias0 + 256 bias1, see ``paired_params``), the
    odd channel's acc the difference / 256; out_c channels computed, out_stride bytes an output position (each
    channel stored at its "dst" word where they differ), the channels left out stored ``constants`` ((offset,
    value) literals) at each position."""
    P = params.per_channel
    group = -(-out_c // 4) * 4
    per, iters, rem = split_steps(kw4, unroll_steps(4 * kw4 * group))
    two = kind == "2x4p"
    cols = ("u", "v") if two else ("",)
    seeded = two and rows is None and _seeded(iters, rem)  # the second column's accumulators start in the asm
    if two and asm_epilogue_ok(params, q, out_c):
        return _paired_asm_body(em, q, w_sym, params, p_sym, kw4, out_c, stride, out_stride, constants, widened,
                                rows, (per, iters, rem))
    lines = []
    if rows is not None:  # the columns are in the widened rows the caller wrote (rows_function): none to widen
        lines += [
            "    for (int32_t p = 0; p < n_cols; p += 2) {",
            f"        const int8_t *c0 = cols + p * {stride};",
            f"        int8_t *o1 = out + (p + 1) * {out_stride};"]
    elif two:
        pair = em.sym("m4_pair")
        em.scratch(pair, "uint32_t", 4 * kw4)
        lines += [
            "    for (int32_t p = 0; p < n_cols; p += 2) {",
            f"        const int8_t *c0 = cols + p * {stride};",
            "        const int32_t two = p + 1 < n_cols;  /* else a last column: computed twice, stored twice */",
            widen_call(em, pair, stride, kw4, widened),
            f"        int8_t *o1 = two ? out + (p + 1) * {out_stride} : out + p * {out_stride};"]
    else:
        lines += ["    for (int32_t p = 0; p < n_cols; ++p) {",
                  f"        const int8_t *c0 = cols + p * {stride};"]
    lines += [
        f"        int8_t *o0 = out + p * {out_stride};",
        f"        const int32_t *wp = {w_sym}, *q = {p_sym};",
        f"        for (int32_t o = 0; o < {group}; o += 4, q += {4 * P}) {{",
        "            " + " ".join(f"int32_t e0{c} = q[0], r0{c} = q[{P}], e1{c} = q[{2 * P}], r1{c} = q[{3 * P}];"
                                  if c != "v" or not seeded else "int32_t e0v, r0v, e1v, r1v;" for c in cols),
        f"            const {'uint32_t' if two else 'int8_t'} *x = "
        f"{'(const uint32_t *)c0' if rows is not None else pair if two else 'c0'};",
        f"            int32_t n = {'wrap' if rows is not None else iters};"]
    accs = [f"{a}{k}{c}" for k in (0, 1) for a in "er" for c in cols]
    ops = {k: "=&r" if seeded and k.endswith("v") else "+r" for k in (*accs, "x", "wp", "n")}
    if rows is not None:
        lines += ["            int32_t u, v, w, w1, n2 = 0;"]
        ops["n"], ops["n2"] = "+m", "+m"
        ops.update({k: "=&r" for k in ("u", "v", "w", "w1")})
        lines += asm_text(_block_rows(rows), ops, "            ")
        lines.append("            (void)n2;")
    elif two:
        lines.append("            int32_t u, v, w, w1;")
        if iters > 1:
            ops["n"] = "+m"
        else:
            del ops["n"]
        ops.update({k: "=&r" for k in ("u", "v", "w", "w1")})
        lines += asm_text(_block_2x4p(per, iters, rem), ops, "            ")
    else:
        lines += ["            int32_t u, ue;",
                  '            register int32_t w0 __asm__("r8"), w1 __asm__("r9"), w2 __asm__("r10"), '
                  'w3 __asm__("r11");']
        ops.update({k: "=&r" for k in ("u", "ue", "w0", "w1", "w2", "w3")})
        lines += asm_block([_step_1x4p()] * per, iters, rem, ops, "            ")
    lines.append("            (void)n;")
    for k in range(4):
        even = f"e{k // 2}"
        raw = f"r{k // 2}"
        stores = []
        for i, c in enumerate(cols):
            acc = f"{even}{c}" if k % 2 == 0 else (f"{raw}{c}", f"{even}{c}")
            at = f"q[{k * P + params.stored.index('dst')}]" if "dst" in params.stored else f"o + {k}"
            stores.append((acc, f"o{i}[{at}]"))
        guard = k and out_c % 4 and k >= out_c % 4
        lines.append(f"            if (o + {k} < {out_c}) {{" if guard else "            {")
        lines += channel_epilogue(em, q, params, [(f"q + {k * P}", stores)], "                ")
        lines.append("            }")
    lines.append("        }")
    lines += [f"        o{i}[{offset}] = {value};" for offset, value in constants for i in range(len(cols))]
    return lines + ["    }", "}", ""]


def asm_epilogue_ok(params: ChannelParams, q, out_c: int) -> bool:
    """Whether the 2x4p block's requantisation is written in its asm (``asm_epilogue``): every channel's
    accumulator proven small ("fold" or "plain"), the sign's correction and the left shift literals, every channel
    stored at its own
    offset or at its "dst" word (then a last group's padding channels too: stored first, over by the live ones),
    else whole groups of four."""
    return (params.mode in ("fold", "plain") and not {"nm", "sl"} & set(params.stored)
            and ("dst" in params.stored or out_c % 4 == 0))


def mov32(reg: str, value: int) -> list[str]:
    """Operand ``reg`` = value (MOVW, and MOVT where the high half is not zero)."""
    value &= 0xFFFFFFFF
    return [f"movw %[{reg}], #{value & 0xFFFF}", *([f"movt %[{reg}], #{value >> 16}"] if value >> 16 else [])]


def clamp_at(a: str, bound: int, cond: str) -> list[str]:
    """a = bound where a ``cond`` bound (an IT block; negative literals through CMN / MVN)."""
    if bound >= 0:
        return [f"cmp {a}, #{bound}", f"it {cond}", f"mov{cond} {a}, #{bound}"]
    return [f"cmn {a}, #{-bound}", f"it {cond}", f"mvn{cond} {a}, #{-bound - 1}"]


def requantise_group(lit: dict, mode: str, q, field_address) -> list[str]:
    """A 2x4p block's four channels requantised in asm, both positions: the odd channels' 256 acc1 (raw - even),
    the fields every channel shares in registers once (m in w1, nu in v), per channel its own fields loaded from
    ``field_address(k, name)`` (an address operand, None where the field is a literal) then ``requantise_output``
    per accumulator."""
    body = [f"sub %[r{j}{c}], %[r{j}{c}], %[e{j}{c}]" for j in (0, 1) for c in "uv"]  # 256 acc1
    if "m" in lit:
        body += mov32("w1", lit["m"])
    if "nu" in lit:
        body += mov32("v", lit["nu"])
    for k in range(4):
        body += [f"ldr %[{reg}], {address}" for name, reg in (("m", "w1"), ("r", "u"), ("nu", "v"))
                 if (address := field_address(k, name)) is not None]
        for c in "uv":
            body += requantise_output(f"%[{'er'[k % 2]}{k // 2}{c}]", k % 2 == 1, lit, mode, q)
    return body


def requantise_output(a: str, odd: bool, lit: dict, mode: str, q) -> list[str]:
    """One 2x4p accumulator's requantisation in asm (``asm_epilogue``), in place in register ``a``: an odd channel's
    (raw - even) = 256 acc1 scaled to acc1 << sl, else LSL sl; SMMLAR by the multiplier (w1) with the rounding
    addend v (t = nu - [a < 0] into w where ``correct``), the right shift (register u or literal r), the zero point
    ("plain"), SSAT (with the shift in "fold" mode) and the activation's bounds where narrower than int8."""
    sl = lit["sl"]
    if odd:
        body = ([f"asr {a}, {a}, #{8 - sl}"] if sl < 8 else []) if sl <= 8 else [f"asr {a}, {a}, #8",
                                                                                 f"lsl {a}, {a}, #{sl}"]
    else:
        body = [f"lsl {a}, {a}, #{sl}"]
    if mode == "fold" or lit["nm"] != 0:  # t = nu - [a < 0], else t = nu
        body += [f"add %[w], %[v], {a}, asr #31", f"smmlar {a}, {a}, %[w1], %[w]"]
    else:
        body.append(f"smmlar {a}, {a}, %[w1], %[v]")
    if "r" not in lit:
        body.append(f"asr {a}, {a}, %[u]")
    elif lit["r"] and mode == "plain":
        body.append(f"asr {a}, {a}, #{lit['r']}")
    zp = q.output_zero_point if mode == "plain" else 0
    if zp:
        body.append(f"add {a}, {a}, #{zp}" if zp > 0 else f"sub {a}, {a}, #{-zp}")
    body.append(f"ssat {a}, #8, {a}, asr #{lit['r']}" if mode == "fold" and "r" in lit else f"ssat {a}, #8, {a}")
    if q.lo > -128:
        body += clamp_at(a, q.lo, "lt")
    if q.hi < 127:
        body += clamp_at(a, q.hi, "gt")
    return body


def asm_epilogue(params: ChannelParams, q, out_stride: int, second: bool) -> list[str]:
    """The 2x4p block's requantisation and stores in its asm, after the multiply-accumulates (channel_epilogue's
    arithmetic, instruction for instruction: module docstring): the channel words' pointer loaded from the
    memory operand ``qq`` into x, per channel its stored fields by single loads back to back (m into w1, r u,
    nu v; the fields every channel shares in registers once, or as immediates: sl in the shifts, r in SSAT's
    shift in the "fold" mode), t in w (wp untouched: the next group's weights); per output LSL (or the odd
    channel's SUB and ASR), ADD t = nu + [a < 0] correction, SMMLAR, ASR r and SSAT (one instruction where r is
    shared: SSAT's shift), the zero point's ADD ("plain"), the activation's bounds where narrower than int8 (CMP
    and an IT block); then the two columns' outputs by STRB from the destination pointers ``d0`` (and ``d1``
    where ``second``, else d0 + out_stride), then advanced by 4 in memory, or at each channel's "dst" offset from
    them; ``qq`` already at the next group's words (the fields at offsets back from it)."""
    P, lit = params.per_channel, params.literals
    at = {name: params.stored.index(name) for name in params.stored}
    back = 16 * P  # qq already at the next group's words (_paired_asm_body)
    mode = params.mode
    body = ["ldr %[x], %[qq]"] if any(f in at for f in ("m", "r", "nu", "dst")) else []
    body += requantise_group(lit, mode, q, lambda k, name: f"[%[x], #{4 * (k * P + at[name]) - back}]"
                             if name in at else None)
    if "dst" in at:  # per channel its offset (w) from the positions' starts d0 (v) and d1 (u), the last channel first
        body += ["ldr %[v], %[d0]", "ldr %[u], %[d1]" if second else f"add %[u], %[v], #{out_stride}"]
        for k in (3, 2, 1, 0):
            body += [f"ldr %[w], [%[x], #{4 * (k * P + at['dst']) - back}]",
                     *(f"strb %[{'er'[k % 2]}{k // 2}{c}], [%[{p}], %[w]]" for c, p in (("u", "v"), ("v", "u")))]
        return body
    body.append("ldr %[x], %[d0]")
    if second:
        body.append("ldr %[u], %[d1]")
    for k in range(4):
        for c in "uv":
            a = f"%[{'er'[k % 2]}{k // 2}{c}]"
            where = f"[%[x], #{k}]" if c == "u" else f"[%[u], #{k}]" if second else f"[%[x], #{out_stride + k}]"
            body.append(f"strb {a}, {where}")
    # the destinations advanced to the next group's
    return body + ["add %[x], %[x], #4", "str %[x], %[d0]",
                   *(["add %[u], %[u], #4", "str %[u], %[d1]"] if second else [])]


def _paired_asm_body(em, q, w_sym: str, params: ChannelParams, p_sym: str, kw4: int, out_c: int, stride: int,
                     out_stride: int, constants, widened: bool, rows: RowLayout | None, split) -> list[str]:
    """_paired_body for the 2x4p kind with its requantisation in the asm (``asm_epilogue_ok``): per block of two
    columns by four channels one asm statement: the biases loaded from the channel words (the second column's
    seeded in its first multiply-accumulates where the block's first step runs once), the multiply-accumulates,
    ``asm_epilogue``; the pointers it reads (channel words, destinations) memory operands it advances to the next
    group's (no C between the blocks but the loop's count), the weights' pointer carried from group to group in
    its register (the products leave it at the next group's)."""
    P = params.per_channel
    group = -(-out_c // 4) * 4
    per, iters, rem = split
    seeded = rows is None and _seeded(iters, rem)
    lines = ["    for (int32_t p = 0; p < n_cols; p += 2) {",
             f"        const int8_t *c0 = cols + p * {stride};"]
    second = rows is None  # an odd last column: o1 = o0 (computed twice, stored twice)
    if rows is None:
        pair = em.sym("m4_pair")
        em.scratch(pair, "uint32_t", 4 * kw4)
        lines += ["        const int32_t two = p + 1 < n_cols;  /* else a last column: computed twice, stored twice */",
                  widen_call(em, pair, stride, kw4, widened),
                  f"        int8_t *o1 = two ? out + (p + 1) * {out_stride} : out + p * {out_stride};"]
    lines += [
        f"        int8_t *o0 = out + p * {out_stride};",
        f"        const int32_t *wp = {w_sym}, *qq = {p_sym};",
        "        int8_t *d0 = o0;" + (" int8_t *d1 = o1;" if second else ""),
        f"        for (int32_t o = 0; o < {group}; o += 4) {{",
        f"            const uint32_t *x = {'(const uint32_t *)c0' if rows is not None else pair};",
        f"            int32_t n = {'wrap' if rows is not None else iters};",
        "            int32_t e0u, r0u, e1u, r1u, e0v, r0v, e1v, r1v, u, v, w, w1;"]
    accs = [f"{a}{k}{c}" for k in (0, 1) for a in "er" for c in "uv"]
    outs = {k: "=&r" for k in accs}
    outs.update({"x": "+&r", "wp": "+&r", "n": "+m"})  # earlyclobber: no input may share their registers
    outs.update({k: "=&r" for k in ("u", "v", "w", "w1")})
    body = ["ldr %[w], %[qq]"]
    body += [f"ldr %[{a}{j}{c}], [%[w], #{4 * P * (2 * j + (a == 'r'))}]" for c in ("u",) + (() if seeded else ("v",))
             for j in (0, 1) for a in "er"]
    body += [f"add %[w], %[w], #{16 * P}", "str %[w], %[qq]"]
    if rows is not None:
        lines.append("            int32_t n2 = 0;")
        outs["n2"] = "+m"
        body += _block_rows(rows)
    else:
        if iters <= 1:
            del outs["n"]
        body += _block_2x4p(per, iters, rem)
    body += asm_epilogue(params, q, out_stride, second)
    outs.update({"qq": "+m", "d0": "+m", **({"d1": "+m"} if second else {})})
    lines += ["            __asm__ volatile(", *(f'                "{line}\\n"' for line in body),
              "                : " + ", ".join(f'[{k}] "{c}"({k})' for k, c in outs.items()),
              '                : : "cc", "memory");']
    lines += ["            (void)n;", *(["            (void)n2;"] if rows is not None else []), "        }"]
    lines += [f"        o0[{offset}] = {value}; {'o1' if second else 'o0'}[{offset + (0 if second else out_stride)}] = "
              f"{value};" for offset, value in constants]
    return lines + ["    }", "}", ""]


def paired_rows(W: np.ndarray) -> tuple[np.ndarray, int] | None:
    """int8 rows (out_c x K) as the paired kinds read them, or None where a row cannot be paired: K padded to a
    multiple of 4, the channels to a multiple of 4 (zero rows); per group of 4 channels (pairs c0, c1 and c2,
    c3) and per 4 inputs j four words: pair 0's and pair 1's for inputs 4j, 4j + 2 (SXTB16's even lanes of an
    input word), then both for 4j + 1, 4j + 3. A pair's word for inputs a, b holds bytes c0[a], c1[a] - [c0[a] <
    0], c0[b], c1[b] - [c0[b] < 0]: SXTB16 of it gives c0's two weights, and its halves read as int16 are
    256 c1 + c0 (the low byte's sign borrowed from the high one), so one SMLAD of the raw word accumulates
    256 acc1 + acc0 beside acc0: 4 weights multiplied by 2 inputs for one SXTB16 (two for int8 words split
    whole). None where some c1 - [c0 < 0] leaves int8 (c1 = -128 under a negative c0: never in TFLite's
    symmetric weights, which keep to [-127, 127])."""
    out_c, k = W.shape
    kp, n = -(-k // 4) * 4, -(-out_c // 4) * 4
    rows = np.zeros((n, kp), np.int16)
    rows[:out_c, :k] = W
    c0, c1 = rows[0::2], rows[1::2] - (rows[0::2] < 0)
    if c1.min() < -128:
        return None
    pairs = np.stack([c0, c1], axis=-1).reshape(n // 4, 2, kp // 4, 4, 2)  # groups, pair, j, input, (c0, c1)
    halves = np.stack([pairs[:, :, :, [0, 2]], pairs[:, :, :, [1, 3]]], axis=3)  # groups, pair, j, half, 2, 2
    words = halves.transpose(0, 2, 3, 1, 4, 5).astype(np.int8)  # groups, j, half, pair, lane, byte
    return np.ascontiguousarray(words).reshape(-1, 4).view("<i4").reshape(-1), kp // 4


def paired_params(params: ChannelParams, channels: np.ndarray | None = None) -> ChannelParams:
    """A layer's ChannelParams for the paired kinds: each odd channel's bias word bias0 + 256 bias1 (int32
    arithmetic wraps), the raw accumulator's start; with ``channels`` (the output channel of each row, where
    some are left out) a last word per channel, its offset in an output position ("dst"; the padding rows' the
    last live channel's, which asm_epilogue stores after them)."""
    words = params.words.astype(np.int64).reshape(-1, params.per_channel)
    words[1::2, 0] = (words[0::2, 0] + 256 * words[1::2, 0] + (1 << 31)) % (1 << 32) - (1 << 31)
    stored = params.stored
    if channels is not None:
        dst = np.zeros((len(words), 1), np.int64)
        dst[:len(channels), 0] = channels
        dst[len(channels):, 0] = channels[-1]
        words, stored = np.hstack([words, dst]), (*stored, "dst")
    return ChannelParams(params.mode, words.astype(np.int32).reshape(-1), stored, params.literals)


PAIRED_ACC = 1 << 23  # |acc1| below this: 256 acc1 fits int32, the raw and even accumulators' difference


def arranged_rows(W: np.ndarray, group: int, w16: bool) -> tuple[np.ndarray, int]:
    """int8 rows (out_c x K) as a matrix function reads them: K padded to a multiple of 4 with zeros, the
    channel count to a multiple of ``group`` with zero rows, per group of channels and per 4 inputs j their
    words in channel order: with ``w16`` two int16 words per channel (inputs 4j, 4j + 2, then 4j + 1, 4j + 3:
    SXTB16's two splits of the input word), else the int8 word. Returns (int32 words, K / 4)."""
    out_c, k = W.shape
    kp = -(-k // 4) * 4
    n = -(-out_c // group) * group
    rows = np.zeros((n, kp), np.int8)
    rows[:out_c, :k] = W
    if not w16:
        words = rows.view("<i4").reshape(n // group, group, kp // 4).transpose(0, 2, 1).reshape(-1)
        return words, kp // 4
    r = rows.reshape(n, kp // 4, 4).astype(np.int16)
    halves = np.stack([r[:, :, [0, 2]], r[:, :, [1, 3]]], axis=2)  # n, kp/4, 2 words, 2 lanes
    words = np.ascontiguousarray(halves).view("<i4").reshape(n, kp // 4, 2)
    words = words.reshape(n // group, group, kp // 4, 2).transpose(0, 2, 1, 3).reshape(-1)
    return words, kp // 4


# ---------------------------------------------------------------- compile-time arrangement


# the fields of a channel's requantisation each epilogue reads (after its bias): the multiplier, left shift + 1,
# right shift, 2^(right-1) (+ zp 2^right when the zero point is folded), -[right > 0], and 1 where the
# accumulator is not proven small (m4_rq_wide)
EPILOGUE_FIELDS = {"fold": ("m", "sl", "r", "nu"), "plain": ("m", "sl", "r", "nu", "nm"),
                   "wide": ("m", "sl", "r", "nu", "nm", "big")}
SMALL_ACC = 1 << 30  # |acc| 2^left below this: the SMMULR form is exact


@dataclass(frozen=True)
class ChannelParams:
    """A layer's per-channel constants as its kernels read them: per channel int32 words, its bias first, then
    the fields of EPILOGUE_FIELDS[mode] that differ between the layer's channels (``stored``); the fields every
    channel shares are literals in the code (a per-tensor layer stores its biases alone)."""

    mode: str  # "fold", "plain" or "wide" (see channel_epilogue)
    words: np.ndarray  # int32, channels (padded) x len(stored), flattened
    stored: tuple[str, ...]
    literals: dict[str, int]

    @property
    def per_channel(self) -> int:
        return len(self.stored)

    def field(self, name: str, pointer: str) -> str:
        """C for one field of the channel whose words ``pointer`` points at."""
        return str(self.literals[name]) if name in self.literals else f"{pointer}[{self.stored.index(name)}]"


def channel_params(bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, group: int, mode: str,
                   wide: np.ndarray | None = None, fold_zp: int | None = None) -> ChannelParams:
    """The layer's ChannelParams; the channel count padded to a multiple of ``group`` (zeros); ``wide``: the
    channels whose accumulators are not proven small; ``fold_zp``: the output zero point folded into the nudge
    (2^(r-1) + zp 2^r; see fold_zero_point)."""
    left, right = np.maximum(shift, 0).astype(np.int64), np.maximum(-shift, 0).astype(np.int64)
    nudge = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0)
    if fold_zp is not None:
        nudge = nudge + np.left_shift(np.int64(fold_zp), right)
    values = {"m": mult.astype(np.int64), "sl": left + 1, "r": right, "nu": nudge,
              "nm": np.where(right > 0, -1, 0), "big": np.zeros(len(bias), np.int64) if wide is None else wide}
    # a field every channel shares is a literal (not INT32_MIN: no such C literal)
    literals = {name: int(values[name][0]) for name in EPILOGUE_FIELDS[mode]
                if np.all(values[name] == values[name][0]) and values[name][0] != -(1 << 31)}
    stored = ("bias", *(name for name in EPILOGUE_FIELDS[mode] if name not in literals))
    n = -(-len(bias) // group) * group
    words = np.zeros((n, len(stored)), np.int64)
    words[:len(bias), 0] = (bias.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 arithmetic wraps
    for k, name in enumerate(stored[1:], 1):
        words[:len(bias), k] = values[name]
    return ChannelParams(mode, words.astype(np.int32).reshape(-1), stored, literals)


def accumulator_bound(bias: np.ndarray, W: np.ndarray, x_reach: int) -> np.ndarray:
    """Per channel a bound of |acc|: |bias| + x_reach sum |w| (x_reach: the largest |input| the sum
    multiplies)."""
    return np.abs(bias.astype(np.int64)) + x_reach * np.abs(W.astype(np.int64)).sum(axis=1)


def small_accumulators(bias: np.ndarray, W: np.ndarray, x_reach: int, shift: np.ndarray) -> np.ndarray:
    """Per channel whether |acc| 2^left stays below SMALL_ACC (accumulator_bound)."""
    return accumulator_bound(bias, W, x_reach) * (1 << np.maximum(shift, 0).astype(np.int64)) < SMALL_ACC


def fold_zero_point(bound: np.ndarray, mult: np.ndarray, shift: np.ndarray, zp: int) -> bool:
    """Whether every channel's requantisation may take the output zero point inside its rounding shift:
    ((h + 2^(r-1) - [h < 0]) >> r) + zp = (h + (h >> 31) + 2^(r-1) + zp 2^r) >> r (adding a multiple of 2^r
    commutes with the floor) when r > 0 and the sum stays in int32: |h| <= (|acc| 2^left m >> 31) + 1 from
    the accumulators' bounds (already proven small)."""
    left = np.maximum(shift, 0).astype(np.int64)
    right = np.maximum(-shift, 0).astype(np.int64)
    if not np.all(right > 0) or np.any(right > 23):
        return False
    high = ((bound.astype(np.int64) << left) * mult.astype(np.int64) >> 31) + 1
    return bool(np.all(high + 1 + (1 << (right - 1)) + abs(zp) * (1 << right) < (1 << 31)))


def shifts_ok(q) -> bool:
    return bool(np.all(q.shifts >= -MAX_RIGHT_SHIFT) and np.all(q.shifts <= 30) and np.all(q.multipliers >= 0))


def tflite_int8(em, node: Node) -> bool:
    """These kernels compute TFLite's int8 layers (the project's fixed point and TFLite's 16x8 layers take the
    shared C)."""
    return node.type.dtype.is_quantised and node.type.dtype.bits == 8 and all(
        em.graph.type(i).dtype.bits in (8, 32) for i in node.inputs)


def computed_input(em, node: Node) -> bool:
    return em.graph.op(node.inputs[0]) not in ("const", "sparse_const") and all(
        em.graph.op(i) == "const" for i in node.inputs[1:])


def _matrix_function(em, node: Node, W: np.ndarray, q, kind: str, stride: int, widened: bool = False,
                     layout: RowLayout | None = None) -> str | None:
    """A layer's matrix function (``matrix_function``) and the flash arrays it reads: its rearranged weights
    and channel parameters (bias' = bias - zx sum(w); the wide epilogue where an accumulator may be too large
    for the SMMULR one). Channels whose weights are all zero (pruned: their output one constant, whatever their
    bias) are left out of the paired kinds, which then store each channel at its offset (a channel word) and
    those channels' constants."""
    bias = np.asarray(em.graph.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1)
    folded = bias - q.input_zero_point * W.astype(np.int64).sum(axis=1)
    out_c = W.shape[0]
    live = np.any(W != 0, axis=1)
    if kind in ("1x4", "2x2") and not live.all() and live.any():
        candidates = [np.nonzero(live)[0], np.arange(out_c)]
    else:
        candidates = [np.arange(out_c)]
    for live_rows in candidates:  # the live channels paired where they can be, else every channel
        Wr, fr, mult, shift = W[live_rows], folded[live_rows], q.multipliers[live_rows], q.shifts[live_rows]
        small = small_accumulators(fr, Wr, 128, shift)
        paired = paired_rows(Wr) if kind in ("1x4", "2x2") and small.all() else None
        if paired is not None and np.all(accumulator_bound(fr, Wr, 128)[1::2] < PAIRED_ACC):
            break
        paired = None
    if paired is None:
        live_rows = np.arange(out_c)
        Wr, fr, mult, shift = W, folded, q.multipliers, q.shifts
        small = small_accumulators(fr, Wr, 128, shift)
    else:
        kind = {"1x4": "1x4p", "2x2": "2x4p"}[kind]
    if layout is not None and kind != "2x4p":
        return None  # the widened rows are for the paired kernel: the caller's im2col instead
    group = 4 if kind in ("1x4", "1x4p", "2x4p") else 2
    words, kw4 = paired if paired is not None else arranged_rows(Wr, group, kind == "2x2w16")
    w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), words, "int32_t",
                               f"%{node.name}: {len(live_rows)}x{W.shape[1]} int8 weights"
                               f"{' widened to int16' if kind == '2x2w16' else ''}, rows padded to words, "
                               f"groups of {group} rows interleaved"
                               f"{', pairs of rows in words (paired_rows)' if paired is not None else ''}")
    bound = accumulator_bound(fr, Wr, 128)
    fold = small.all() and fold_zero_point(bound, mult, shift, q.output_zero_point)
    mode = "fold" if fold else "plain" if small.all() else "wide"
    params = channel_params(fr, mult, shift, group, mode, ~small, q.output_zero_point if fold else None)
    if paired is not None:
        params = paired_params(params, None if len(live_rows) == out_c else live_rows)
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                               f"%{node.name}: per channel {', '.join(params.stored)} (m4_rq)")
    # a channel of zero weights: acc = bias at every position, its output TFLite's requantisation of it (stored by
    # the kernel at each position, literals)
    dead = np.setdiff1d(np.arange(out_c), live_rows)
    values = np.clip(multiply_by_quantized_multiplier(bias[dead], q.multipliers[dead], q.shifts[dead])
                     + q.output_zero_point, q.lo, q.hi)
    return matrix_function(em, node.name, q, kind, w_sym, params, p_sym, kw4, len(live_rows), stride, out_c,
                           [(int(c), int(v)) for c, v in zip(dead, values)], widened, layout)


def weight_layout(em, node: Node, reused: bool) -> bool:
    """Whether a layer's weights are widened to int16 in flash: where the build favours speed
    (``graph.analyses.optimize``) and the kernel reads each weight more than once per inference (``reused``:
    widening then saves its unpacking every time); recorded with the reason in ``em.weight_layouts``."""
    if not reused:
        em.weight_layouts[node.name] = ("int8", "each weight read once per inference: widening saves nothing")
        return False
    speed = em.graph.analyses.optimize == "speed"
    em.weight_layouts[node.name] = (("int16", "optimize='speed': widened in flash, no unpacking in the inner loops")
                                    if speed else ("int8", "optimize='size', the default: split by SXTB16 in "
                                                           "registers"))
    return speed


# ---------------------------------------------------------------- the kernels


def fully_connected(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    out_c, depth = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if not computed_input(em, node) or depth % 4 or not shifts_ok(q):
        return None
    rows = g.type(x_name).size // depth
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, depth)
    # one row: four channels per input word; several: two by two
    kind = "1x4" if rows == 1 else "2x2"
    if weight_layout(em, node, rows > 1):
        kind = "2x2w16"
    function = _matrix_function(em, node, W, q, kind, depth)
    return [f"{function}({em.var(x_name)}, {rows}, {em.var(node.name)});"]


def conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if not computed_input(em, node) or x.shape[0] != 1 or not shifts_ok(q):
        return None
    win = window_of(g, node, (kh, kw))
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, kh * kw * in_c)
    positions = win.out_height * win.out_width
    xs, out = em.var(x_name), em.var(node.name)
    pointwise = (kh, kw) == (1, 1) and win.stride == (1, 1) and win.pad == (0, 0)
    in_place = pointwise and in_c % 4 == 0  # each position's inputs are already a column
    kp = -(-kh * kw * in_c // 4) * 4
    stride = in_c if in_place else kp
    # int8 weights split in registers, or widened to int16 in flash where the build favours speed (each is
    # read once per two output positions)
    # a window's taps whole words of channels: im2col writes the columns widened, as the matrix kernels read them
    widened = not in_place and in_c % 4 == 0
    layout = row_layout(win, kh, kw, in_c, out_c) if widened and not weight_layout(em, node, positions > 1) else None
    if layout is not None:
        function = _matrix_function(em, node, W, q, "2x2", layout.d, True, layout)
        if function is not None:
            fill = rows_function(em, node.name, win, kh, kw, in_c, q.input_zero_point, layout)
            return [f"for (int32_t oy = 0; oy < {win.out_height}; ++oy)",
                    f"    {function}((const int8_t *){em.sym('m4_pair')}, {win.out_width}, "
                    f"{out} + oy * {win.out_width * out_c}, {fill}({xs}, oy));"]
    function = _matrix_function(em, node, W, q, "2x2w16" if weight_layout(em, node, positions > 1) else "2x2",
                                stride, widened)
    if in_place:
        return [f"{function}({xs}, {positions}, {out});"]
    if widened:
        fill = im2col_widen_function(em, node.name, win, kh, kw, in_c, q.input_zero_point)
        return [f"for (int32_t p = 0; p < {positions}; p += 2) {{",
                f"    const int32_t n = p + 1 < {positions} ? 2 : 1;",
                f"    {fill}({xs}, p, n);",
                f"    {function}({xs}, n, {out} + p * {out_c});",
                "}"]
    # im2col: two columns at a time in a static buffer, the padding's taps holding zx
    kw4 = kp // 4
    col = em.sym("m4_col")
    em.scratch(col, "uint32_t", 2 * kw4)  # words: the columns stay aligned
    fill = im2col_function(em, node.name, win, kh, kw, in_c, kp, q.input_zero_point)
    return ["{",
            f"    int8_t *col = (int8_t *){col};",
            f"    for (int32_t i = {kh * kw * in_c}; i < {2 * kp}; ++i) col[i] = 0;  /* rows padded to words */",
            f"    for (int32_t p = 0; p < {positions}; p += 2) {{",
            f"        const int32_t n = p + 1 < {positions} ? 2 : 1;",
            f"        {fill}({xs}, col, p, n);",
            f"        {function}(col, n, {out} + p * {out_c});",
            "    }",
            "}"]


def copy_bytes(em, dst: str, src: str, n: int) -> list[str]:
    """C statements copying n (a literal) bytes: unaligned words (one LDR and one STR each), then bytes."""
    rd = simd_helpers(em)[0]
    words, tail = divmod(n, 4)
    if words <= 16:
        lines = [f"{{ const int32_t v = {rd}({src} + {4 * i}); __builtin_memcpy({dst} + {4 * i}, &v, 4); }}"
                 for i in range(words)]
    else:
        lines = [f"for (int32_t i = 0; i < {4 * words}; i += 4) {{ const int32_t v = {rd}({src} + i); "
                 f"__builtin_memcpy({dst} + i, &v, 4); }}"]
    return lines + [f"{dst}[{4 * words + i}] = {src}[{4 * words + i}];" for i in range(tail)]


def fill_bytes(dst: str, value: int, n: int) -> list[str]:
    """C statements setting n (a literal) bytes to value: words, then bytes."""
    word = ((value & 0xFF) * 0x01010101 + (1 << 31)) % (1 << 32) - (1 << 31)
    words, tail = divmod(n, 4)
    lines = ([f"for (int32_t i = 0; i < {4 * words}; i += 4) {{ const int32_t v = {word}; "
              f"__builtin_memcpy({dst} + i, &v, 4); }}"] if words else [])
    return lines + [f"{dst}[{4 * words + i}] = {value};" for i in range(tail)]


def im2col_function(em, name: str, win, kh: int, kw: int, in_c: int, kp: int, zx: int) -> str:
    """A layer's im2col as its own function: the n (1 or 2) columns of positions p.. into col (kp bytes
    apart), the taps in the padding holding zx; a window row inside the input copied whole (its taps are
    contiguous when the dilation across is 1)."""
    symbol = em.sym(f"m4_im2col_{name}")
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    H, W, OW = win.height, win.width, win.out_width
    row = kw * in_c
    whole = (copy_bytes(em, "dst", "src", row) if dx == 1 else
             [line for kx in range(kw) for line in copy_bytes(em, f"(dst + {kx * in_c})",
                                                                 f"(src + {kx * dx * in_c})", in_c)])
    lines = [
        f"/* %{name}: im2col, {kh}x{kw} windows of {in_c} channels */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *x, int8_t *col, int32_t p, '
        "int32_t n)", "{",
        "    for (int32_t k = 0; k < n; ++k) {",
        f"        const int32_t oy = (p + k) / {OW}, ox = (p + k) % {OW};",
        f"        const int32_t ix0 = ox * {sx} - {px};",
        f"        const int inside = ix0 >= 0 && ix0 + {(kw - 1) * dx} < {W};",
        f"        int8_t *dst = col + k * {kp};",
        f"        for (int32_t ky = 0; ky < {kh}; ++ky, dst += {row}) {{",
        f"            const int32_t iy = oy * {sy} - {py} + ky * {dy};",
        f"            if (iy < 0 || iy >= {H}) {{",
        *("                " + line for line in fill_bytes("dst", zx, row)),
        "                continue;",
        "            }",
        "            if (inside) {",
        f"                const int8_t *src = x + (iy * {W} + ix0) * {in_c};",
        *("                " + line for line in whole),
        "                continue;",
        "            }",
        *(["            {  /* the taps inside one run of bytes (dilation 1): zx, the input's, zx */",
           f"                const int32_t b0 = (ix0 < 0 ? -ix0 : 0) * {in_c};",
           f"                const int32_t b1 = ({W} - ix0 < {kw} ? {W} - ix0 : {kw}) * {in_c};",
           f"                const int8_t *src = x + (iy * {W} + ix0) * {in_c};",
           "                int32_t b = 0;",
           f"                for (; b < b0; ++b) dst[b] = {zx};",
           "                for (; b < b1; ++b) dst[b] = src[b];",
           f"                for (; b < {row}; ++b) dst[b] = {zx};",
           "                continue;",
           "            }"] if dx == 1 else []),
        f"            for (int32_t kx = 0; kx < {kw}; ++kx) {{",
        f"                const int32_t ix = ix0 + kx * {dx};",
        f"                int8_t *d = dst + kx * {in_c};",
        f"                if (ix < 0 || ix >= {W}) {{",
        *("                    " + line for line in fill_bytes("d", zx, in_c)),
        "                } else {",
        f"                    const int8_t *src = x + (iy * {W} + ix) * {in_c};",
        *("                    " + line for line in copy_bytes(em, "d", "src", in_c)),
        "                }",
        "            }",
        "        }",
        "    }",
        "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def row_widen_helper(em) -> str:
    """m4_widen_row(s, d, n2): n2 times two input words (8 int8, any alignment) widened, per word its even lanes'
    word then its odd lanes' (SXTB16, SXTB16 ROR #8): both loads back to back at immediate offsets, one STM of the
    four words (registers fixed in ascending order), two steps per iteration."""
    def step(at: int) -> str:
        return (f"ldr %[u], [%[s], #{at}]\\n\\tldr %[v], [%[s], #{at + 4}]\\n\\tsxtb16 %[a], %[u]\\n\\t"
                "sxtb16 %[b], %[u], ror #8\\n\\tsxtb16 %[c], %[v]\\n\\tsxtb16 %[e], %[v], ror #8\\n\\t"
                "stm %[d]!, {%[a], %[b], %[c], %[e]}")
    ops = ('[s] "+r"(s), [d] "+r"(d), [u] "=&r"(u), [v] "=&r"(v), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), '
           '[e] "=&r"(e) : : "memory"')
    return named_helper(em, "m4_widen_row", f"""\
__attribute__((optimize("O2"), noinline)) static void @m4_widen_row(const int8_t *s, int32_t *d, int32_t n2)
{{
    register int32_t a __asm__("r8"), b __asm__("r9"), c __asm__("r10"), e __asm__("r11");
    int32_t u, v;
    if (n2 & 1)
        __asm__ volatile("{step(0)}\\n\\tadd %[s], %[s], #8" : {ops});
    for (int32_t n = n2 >> 1; n > 0; --n)
        __asm__ volatile("{step(0)}\\n\\t{step(8)}\\n\\tadd %[s], %[s], #16" : {ops});
}}
""")


WHOLE_SEGMENT = 12  # steps of a window row the rows kernel unrolls whole (1,344 bytes of code)


def row_layout(win, kh: int, kw: int, in_c: int, out_c: int) -> RowLayout | None:
    """The widened rows' layout of a convolution whose columns the paired kernel may read from them in place
    (``rows_function``): output rows of an even width (its columns in pairs), no dilation across (a window row's
    taps contiguous), immediate offsets within reach; else None (im2col)."""
    sx, dx = win.stride[1], win.dilation[1]
    pixels = (win.out_width - 1) * sx + kw
    row_bytes = 2 * pixels * in_c
    segment = kw * in_c // 4
    if win.out_width % 2 or dx != 1 or row_bytes > 4095 or 8 * min(segment, 24) + 2 * sx * in_c > 4095:
        return None
    # a segment of up to WHOLE_SEGMENT steps unrolled whole (one loop, over the window's rows: ~9 cycles a run
    # less per block), longer ones in runs of unroll_steps
    unroll = segment if segment <= WHOLE_SEGMENT else unroll_steps(out_c * kh * kw * in_c)
    ring = win.dilation[0] == 1 and win.stride[0] < kh and kh * row_bytes <= 4095
    return RowLayout(kh, row_bytes, segment, 2 * sx * in_c, unroll, ring)


def rows_function(em, name: str, win, kh: int, kw: int, in_c: int, zx: int, layout: RowLayout) -> str:
    """A convolution's input rows for output row oy, widened into the pair buffer as the paired kernel reads
    them in place (``RowLayout``): its kh window rows, each the pixels its windows span (the padding's zx), per
    pixel per 4 channels the even lanes' word then the odd lanes' (SXTB16, SXTB16 ROR #8); returns the slot of
    the window's first row. Where the windows of consecutive output rows overlap (``RowLayout.ring``) the kh slots are
    a ring: input row iy in slot iy mod kh, each call widening only the rows the previous output row did not (the
    caller runs oy from 0 up), the kernel wrapping from the last slot to the first (``_block_rows``). Else the kh
    rows from slot 0, every call."""
    rd, odd = simd_helpers(em)
    symbol = em.sym(f"m4_rows_{name}")
    pair = em.sym("m4_pair")
    words = layout.row_bytes // 4
    em.scratch(pair, "uint32_t", kh * words)
    (sy, dy), (py, px) = (win.stride[0], win.dilation[0]), win.pad
    H, W = win.height, win.width
    pixels = layout.row_bytes // (2 * in_c)
    lo, hi = min(px, pixels), min(max(W + px, 0), pixels)  # the pixels inside the input: [lo, hi)
    zw = ((zx & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)
    cw = in_c // 4
    if layout.ring:
        head = [f"    const int32_t iy0 = oy * {sy} - {py};",
                f"    const int32_t s0 = (iy0 + {-(-py // kh) * kh}) % {kh};  /* the window's first slot */",
                f"    for (int32_t ky = oy ? {kh - sy} : 0; ky < {kh}; ++ky) {{",
                "        const int32_t iy = iy0 + ky;",
                f"        int32_t *d = (int32_t *){pair} + (s0 + ky < {kh} ? s0 + ky : s0 + ky - {kh}) * {words};"]
        tail = "    return s0;"
    else:
        head = [f"    int32_t *d = (int32_t *){pair};",
                f"    for (int32_t ky = 0; ky < {kh}; ++ky) {{",
                f"        const int32_t iy = oy * {sy} - {py} + ky * {dy};"]
        tail = "    return 0;"
    lines = [
        f"/* %{name}: its {kh} input rows of output row oy widened in place of im2col */",
        f'__attribute__((optimize("O2"))) static int32_t {symbol}(const int8_t *x, int32_t oy)', "{",
        *head,
        f"        if (iy < 0 || iy >= {H}) {{",
        f"            for (int32_t i = 0; i < {words}; ++i) d[i] = {zw};",
        f"            d += {words};",
        "            continue;",
        "        }",
        *([f"        for (int32_t i = 0; i < {2 * lo * cw}; ++i) d[i] = {zw};",
           f"        d += {2 * lo * cw};"] if lo else []),
        *([f"        const int8_t *s = x + (iy * {W} + {lo - px}) * {in_c};",
           *([f"        {row_widen_helper(em)}(s, d, {(hi - lo) * cw // 2});",
              f"        s += {(hi - lo) * cw // 2 * 8}; d += {(hi - lo) * cw // 2 * 4};"]
             if (hi - lo) * cw >= 2 else []),
           *([f"        {{ const int32_t v = {rd}(s); d[0] = __sxtb16(v); d[1] = {odd}(v); d += 2; }}"]
             if (hi - lo) * cw % 2 else [])] if hi > lo else []),
        *([f"        for (int32_t i = 0; i < {2 * (pixels - hi) * cw}; ++i) d[i] = {zw};",
           f"        d += {2 * (pixels - hi) * cw};"] if pixels > hi else []),
        "    }",
        tail,
        "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def im2col_widen_function(em, name: str, win, kh: int, kw: int, in_c: int, zx: int) -> str:
    """A layer's im2col (in_c a multiple of 4) straight into the pair buffer the matrix kernels read
    (``widen_helper``'s layout: per 4 inputs the two columns' even lanes, then their odd lanes, int16): the n (1
    or 2) columns of positions p..; with one, the second a copy (the kernels compute it twice, store it twice);
    the padding's taps zx in both lanes."""
    rd, odd = simd_helpers(em)
    symbol = em.sym(f"m4_im2colw_{name}")
    pair = em.sym("m4_pair")
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    H, W, OW = win.height, win.width, win.out_width
    cw, rw = in_c // 4, kw * in_c // 4  # words of a tap, of a window row
    zw = ((zx & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)  # zx in both int16 lanes

    def copy(src: str, words: int) -> list[str]:
        if words > 24:  # a loop (unrolled, the words' loads back to back: the code of a long row)
            return [f"for (int32_t i = 0; i < {words}; ++i, d += 4) {{",
                    f"    const int32_t v = {rd}({src} + 4 * i);",
                    f"    d[0] = __sxtb16(v); d[2] = {odd}(v);",
                    "}"]
        return [*(f"const int32_t v{i} = {rd}({src} + {4 * i});" for i in range(words)),
                *(f"d[{4 * i}] = __sxtb16(v{i}); d[{4 * i + 2}] = {odd}(v{i});" for i in range(words)),
                f"d += {4 * words};"]

    def fill(words: int) -> list[str]:
        if words > 24:
            return [f"for (int32_t i = 0; i < {words}; ++i, d += 4) {{ d[0] = {zw}; d[2] = {zw}; }}"]
        return [*(f"d[{4 * i}] = {zw}; d[{4 * i + 2}] = {zw};" for i in range(words)), f"d += {4 * words};"]

    lines = [
        f"/* %{name}: im2col of {kh}x{kw} windows of {in_c} channels, widened (m4_widen2's words) */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *x, int32_t p, int32_t n)', "{",
        "    for (int32_t k = 0; k < 2; ++k) {",
        "        const int32_t at = p + (k < n ? k : 0);",
        f"        const int32_t oy = at / {OW}, ox = at % {OW};",
        f"        const int32_t ix0 = ox * {sx} - {px};",
        f"        const int inside = ix0 >= 0 && ix0 + {(kw - 1) * dx} < {W};",
        f"        int32_t *d = (int32_t *){pair} + k;",
        f"        for (int32_t ky = 0; ky < {kh}; ++ky) {{",
        f"            const int32_t iy = oy * {sy} - {py} + ky * {dy};",
        f"            if (iy < 0 || iy >= {H}) {{",
        *("                " + line for line in fill(rw)),
        "                continue;",
        "            }",
        *(["            if (inside) {",
           f"                const int8_t *src = x + (iy * {W} + ix0) * {in_c};",
           *("                " + line for line in copy("src", rw)),
           "                continue;",
           "            }"] if dx == 1 else ["            (void)inside;"]),
        f"            for (int32_t kx = 0; kx < {kw}; ++kx) {{",
        f"                const int32_t ix = ix0 + kx * {dx};",
        f"                if (ix < 0 || ix >= {W}) {{",
        *("                    " + line for line in fill(cw)),
        "                } else {",
        f"                    const int8_t *src = x + (iy * {W} + ix) * {in_c};",
        *("                    " + line for line in copy("src", cw)),
        "                }",
        "            }",
        "        }",
        "    }",
        "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def depthwise_conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, b_name = node.inputs
    g = em.graph
    x = g.type(x_name)
    _, kh, kw, out_c = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if (not computed_input(em, node) or x.shape[0] != 1 or int(node.attrs["depth_multiplier"]) != 1
            or out_c % 4 or not shifts_ok(q)):
        return None
    win = window_of(g, node, (kh, kw))
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(kh * kw, out_c).T
    if not small_accumulators(bias, W, 255, q.shifts).all():  # x - zx: up to 255 in magnitude
        return None
    folded = bias - q.input_zero_point * W.astype(np.int64).sum(axis=1)  # a window wholly inside the input
    fold = fold_zero_point(accumulator_bound(bias, W, 255), q.multipliers, q.shifts, q.output_zero_point)
    params = channel_params(folded, q.multipliers, q.shifts, 1, "fold" if fold else "plain", None,
                            q.output_zero_point if fold else None)
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                               f"%{node.name}: per channel {', '.join(params.stored)} (m4_rq)")
    positions = win.out_height * win.out_width
    w16 = weight_layout(em, node, positions > 1)
    w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), depthwise_weights(W, w16), "int32_t",
                               f"%{node.name}: {kh}x{kw} weights of {out_c} channels"
                               f"{' widened to int16' if w16 else ''}, per 4 channels and tap "
                               f"{'lanes (0, 2), (1, 3)' if w16 else 'one word'}")
    rows: list[np.ndarray] = []
    offsets: dict = {}

    def bias_at(kx0: int | None, kx1: int = 0, ky0: int = 0, ky1: int = 0) -> int:
        """The offset in the layer's bias array of its biases with the zero point's terms of the taps ky0 <= ky <
        ky1, kx0 <= kx < kx1 folded in (for a position whose window crosses the border), or with kx0 None the
        raw biases (the edge function)."""
        key = None if kx0 is None else (kx0, kx1, ky0, ky1)
        if key not in offsets:
            taps = [] if kx0 is None else [ky * kw + kx for ky in range(ky0, ky1) for kx in range(kx0, kx1)]
            offsets[key] = out_c * len(rows)
            rows.append(bias - q.input_zero_point * W[:, taps].astype(np.int64).sum(axis=1))
        return offsets[key]

    function = depthwise_function(em, node.name, win, out_c, kh, kw, q, w16, params, bias_at)
    b_sym = "0"
    if rows:
        b_sym = em.add_const_array(em.sym(f"{node.name}_m4b"), np.concatenate(rows).astype(np.int32), "int32_t",
                                   f"%{node.name}: per channel biases - zx sum(w) over the taps inside the input "
                                   "of positions whose windows cross the border, per range of taps")
    return [f"{function}({em.var(x_name)}, {em.var(node.name)}, {w_sym}, {p_sym}, {b_sym});"]


def requant_call(scale: str, x: str, multiplier: int, shift: int) -> str:
    """m4_rq of x for one (multiplier, shift): literals the compiler folds."""
    right = max(-shift, 0)
    return (f"{scale}((int32_t)((uint32_t)({x}) << {max(shift, 0) + 1}), {multiplier}, {right}, "
            f"{(1 << (right - 1)) if right else 0}, {-1 if right else 0})")


def requant_bound(bound: int, multiplier: int, shift: int) -> int | None:
    """A bound of |MultiplyByQuantizedMultiplier(x)| for |x| <= bound, or None when the SMMULR form is not
    proven exact there."""
    left, right = max(shift, 0), max(-shift, 0)
    if bound << left >= SMALL_ACC:
        return None
    return ((bound << left) * multiplier >> 31 >> right) + 2
