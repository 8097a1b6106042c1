"""Cortex-M4 / M33 kernels for TFLite's int8 network layers: convolutions, depthwise convolutions and fully
connected layers on the DSP extension (SXTB16 widens two int8 lanes to int16, SMLAD multiplies two pairs and
adds both products, SMLABB / SMLATT one lane each), each with TFLite's requantisation, output zero point and
activation clamp in its epilogue; bit for bit the shared C's (codegen/c_network.py) and so tflite-micro's.

Convolutions and fully connected layers are one matrix product (``mm8``): output channels x columns, a column
the K = kh kw C_in int8 inputs of one output position (im2col), or the input itself where a column is already
contiguous (a 1 x 1 stride-1 convolution, a fully connected layer). The weights are rearranged at compile
time: rows padded to a multiple of 4 bytes (zero weights) and the rows of each pair of output channels
interleaved word by word, so one pointer walks both; the input zero point is folded into the bias,
bias' = bias - zx sum(w), so the inner loop multiplies the raw int8 inputs (taps in the padding are filled
with zx in the column: their terms cancel, as TFLite skips them). Inner step, two columns by two channels,
4 inputs deep: 2 LDR of inputs, 2 of weights, 8 SXTB16, 8 SMLAD for 16 multiply-accumulates. SXTB16 pairs
bytes 0, 2 and bytes 1, 3 of a word; inputs and weights are both split so, so the products line up with no
reordering.

Depthwise convolutions (depth multiplier 1, channels a multiple of 4) walk 4 channels at a time over the
window's taps inside the input (the range computed per output position: no test per tap), x - zx in two
SSUB16, four SMLABB / SMLATT (one channel per lane product).

The kernels' functions are compiled at -O2 whatever the build's flags (``optimize`` attribute): at -Os GCC
spills the inner loops' accumulators, about twice the instructions.

Requantisation, exact where the accumulator is proven small (|acc| 2^left < 2^30 from the weights, the bias
and the int8 range: checked per layer at compile time, else the shared C): gemmlowp's
SaturatingRoundingDoublingHighMul(a, m) is (a m + 2^30) >> 31 for every a when m > 0 (both of its rounding
cases agree on this form; its one saturating case needs m = INT32_MIN), which is SMMULR(2a, m) =
(2a m + 2^31) >> 32; RoundingDivideByPOT(h, r) is (h + 2^(r-1) - [h < 0]) >> r for r > 0 (no overflow:
|h| < 2^30).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import Node, add_quantisation, layer_quantisation, window_of

MAX_RIGHT_SHIFT = 31  # RoundingDivideByPOT's exponent range; beyond it the shared C (and TFLite) assert


def _helper(em, name: str, text: str) -> str:
    symbol = em.sym(name)
    if symbol not in em.helpers:
        em.helpers[symbol] = text.replace("@", em.prefix + "_")
    return symbol


def requant_helper(em) -> str:
    return _helper(em, "m4_requant", """\
static inline __attribute__((always_inline)) int8_t @m4_requant(int32_t acc, const int32_t *q, int32_t zp,
                                                                int32_t lo, int32_t hi)
{
    /* q: the channel's multiplier, left shift + 1, right shift, 2^(right - 1), -1 when right > 0 (see
     * channel_params): TFLite's MultiplyByQuantizedMultiplier, its high product on SMMULR */
    int32_t high, v;
    __asm__("smmulr %0, %1, %2" : "=r"(high) : "r"((int32_t)((uint32_t)acc << q[1])), "r"(q[0]));
    v = ((high + q[3] + ((high >> 31) & q[4])) >> q[2]) + zp;
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}
""")


def wide_requant_helper(em) -> str:
    return _helper(em, "m4_requant_wide", """\
static inline __attribute__((always_inline)) int8_t @m4_requant_wide(int32_t acc, const int32_t *q, int32_t zp,
                                                                     int32_t lo, int32_t hi)
{
    /* m4_requant for any accumulator: the high product in int64, RoundingDivideByPOT as TFLite writes it */
    const int32_t x = (int32_t)((uint32_t)acc << (q[1] - 1));
    const int32_t high = (int32_t)(((int64_t)x * q[0] + ((int64_t)1 << 30)) >> 31);
    const uint32_t mask = (1u << q[2]) - 1u;
    const int32_t remainder = (int32_t)((uint32_t)high & mask);
    const int32_t threshold = (int32_t)(mask >> 1) + (high < 0 ? 1 : 0);
    const int32_t v = (high >> q[2]) + (remainder > threshold ? 1 : 0) + zp;
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}
""")


def any_requant_helper(em) -> str:
    fast, wide = requant_helper(em), wide_requant_helper(em)
    return _helper(em, "m4_requant_any", f"""\
static inline __attribute__((always_inline)) int8_t @m4_requant_any(int32_t acc, const int32_t *q, int32_t zp,
                                                                    int32_t lo, int32_t hi)
{{
    /* q[5]: the channel's accumulator is not proven small (a bias near 2^30: a channel TFLite's converter
     * left constant) */
    return q[5] ? {wide}(acc, q, zp, lo, hi) : {fast}(acc, q, zp, lo, hi);
}}
""")


def simd_helpers(em) -> tuple[str, str]:
    """(rd32, sxtb16_ror8): an unaligned word read (one LDR on the M4) and SXTB16 of bytes 1 and 3."""
    rd = _helper(em, "m4_rd32", """\
static inline __attribute__((always_inline)) int32_t @m4_rd32(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
""")
    odd = _helper(em, "m4_sxtb16_ror8", """\
static inline __attribute__((always_inline)) int32_t @m4_sxtb16_ror8(int32_t v)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
""")
    return rd, odd


def mm8_helper(em, wide: bool = False) -> str:
    """m4_mm8, or with ``wide`` m4_mm8_wide: its epilogue for layers where some channel's accumulator is not
    proven small (those channels' flag, the others on SMMULR)."""
    requant, (rd, odd) = any_requant_helper(em) if wide else requant_helper(em), simd_helpers(em)
    name = "m4_mm8_wide" if wide else "m4_mm8"
    return _helper(em, name, f"""\
/* out[p * out_stride + o] for columns p < n_cols and channels o < out_c: a column is kw4 words of int8
 * inputs (col_stride bytes apart); w: per pair of channels, their rows' words interleaved; params: per
 * channel (an even count) bias - zx sum(w), multiplier, shift */
__attribute__((optimize("O2"))) static void @{name}(const int8_t *cols, int32_t n_cols, int32_t col_stride,
                                                     const int32_t *w, int32_t kw4,
                    const int32_t *params, int32_t out_c, int8_t *out, int32_t out_stride, int32_t zp, int32_t lo,
                    int32_t hi)
{{
    int32_t p = 0;
    for (; p + 1 < n_cols; p += 2) {{
        const int8_t *c0 = cols + p * col_stride, *c1 = c0 + col_stride;
        int8_t *o0 = out + p * out_stride, *o1 = o0 + out_stride;
        const int32_t *wp = w;
        for (int32_t o = 0; o < out_c; o += 2) {{
            const int32_t *q = params + {PARAMS} * o;
            int32_t a00 = q[0], a01 = q[0], a10 = q[{PARAMS}], a11 = q[{PARAMS}];
            const int8_t *x0 = c0, *x1 = c1;
            for (int32_t j = 0; j < kw4; ++j) {{
                const int32_t u = {rd}(x0), v = {rd}(x1);
                const int32_t ue = __sxtb16(u), uo = {odd}(u), ve = __sxtb16(v), vo = {odd}(v);
                const int32_t wa = wp[0], wb = wp[1];
                const int32_t wae = __sxtb16(wa), wao = {odd}(wa);
                const int32_t wbe = __sxtb16(wb), wbo = {odd}(wb);
                x0 += 4;
                x1 += 4;
                wp += 2;
                a00 = __smlad(wae, ue, a00);
                a00 = __smlad(wao, uo, a00);
                a01 = __smlad(wae, ve, a01);
                a01 = __smlad(wao, vo, a01);
                a10 = __smlad(wbe, ue, a10);
                a10 = __smlad(wbo, uo, a10);
                a11 = __smlad(wbe, ve, a11);
                a11 = __smlad(wbo, vo, a11);
            }}
            o0[o] = {requant}(a00, q + 1, zp, lo, hi);
            o1[o] = {requant}(a01, q + 1, zp, lo, hi);
            if (o + 1 < out_c) {{
                o0[o + 1] = {requant}(a10, q + {PARAMS} + 1, zp, lo, hi);
                o1[o + 1] = {requant}(a11, q + {PARAMS} + 1, zp, lo, hi);
            }}
        }}
    }}
    if (p < n_cols) {{  /* a last odd column (a fully connected layer's only one): two channels at a time */
        const int8_t *c0 = cols + p * col_stride;
        int8_t *o0 = out + p * out_stride;
        const int32_t *wp = w;
        for (int32_t o = 0; o < out_c; o += 2) {{
            const int32_t *q = params + {PARAMS} * o;
            int32_t a0 = q[0], a1 = q[{PARAMS}];
            const int8_t *x0 = c0;
            for (int32_t j = 0; j < kw4; ++j) {{
                const int32_t u = {rd}(x0);
                const int32_t ue = __sxtb16(u), uo = {odd}(u);
                const int32_t wa = wp[0], wb = wp[1];
                x0 += 4;
                wp += 2;
                a0 = __smlad(__sxtb16(wa), ue, a0);
                a0 = __smlad({odd}(wa), uo, a0);
                a1 = __smlad(__sxtb16(wb), ue, a1);
                a1 = __smlad({odd}(wb), uo, a1);
            }}
            o0[o] = {requant}(a0, q + 1, zp, lo, hi);
            if (o + 1 < out_c)
                o0[o + 1] = {requant}(a1, q + {PARAMS} + 1, zp, lo, hi);
        }}
    }}
}}
""")


def depthwise_function(em, name: str, win, channels: int, kh: int, kw: int, q, w_sym: str, p_sym: str) -> str:
    """A layer's depthwise convolution (multiplier 1) as its own function, its geometry in literals: 4 channels
    at a time over the window's taps inside the input (their range per output position), the taps of a window
    wholly inside unrolled."""
    requant, (rd, odd) = requant_helper(em), simd_helpers(em)
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    zx2 = ((q.input_zero_point & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)

    def tap(ky: str, kx: str) -> list[str]:
        at = f"((iy0 + {ky} * {dy}) * {win.width} + ix0 + {kx} * {dx}) * {channels} + c"
        return [f"const int32_t u = {rd}(x + {at});",
                f"const int32_t v = {rd}(w + ({ky} * {kw} + {kx}) * {channels} + c);",
                f"const int32_t ue = __ssub16(__sxtb16(u), {zx2}), uo = __ssub16({odd}(u), {zx2});",
                f"const int32_t ve = __sxtb16(v), vo = {odd}(v);",
                "a0 = __smlabb(ve, ue, a0);", "a2 = __smlatt(ve, ue, a2);",
                "a1 = __smlabb(vo, uo, a1);", "a3 = __smlatt(vo, uo, a3);"]

    symbol = em.sym(f"m4_dw_{name}")
    lines = [
        f"/* %{name}: depthwise {kh}x{kw}, {channels} channels, 4 at a time (SMLABB / SMLATT on x - zx) */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *x, int8_t *out)', "{",
        f"    const int8_t *w = {w_sym};",
        f"    for (int32_t oy = 0; oy < {win.out_height}; ++oy) {{",
        f"        const int32_t iy0 = oy * {sy} - {py};",
        f"        const int32_t ky0 = iy0 >= 0 ? 0 : (-iy0 + {dy - 1}) / {dy};",
        f"        const int32_t ky_end = {win.height} - iy0 <= 0 ? 0 : ({win.height} - iy0 + {dy - 1}) / {dy};",
        f"        const int32_t ky1 = ky_end < {kh} ? ky_end : {kh};",
        f"        for (int32_t ox = 0; ox < {win.out_width}; ++ox) {{",
        f"            const int32_t ix0 = ox * {sx} - {px};",
        f"            const int32_t kx0 = ix0 >= 0 ? 0 : (-ix0 + {dx - 1}) / {dx};",
        f"            const int32_t kx_end = {win.width} - ix0 <= 0 ? 0 : ({win.width} - ix0 + {dx - 1}) / {dx};",
        f"            const int32_t kx1 = kx_end < {kw} ? kx_end : {kw};",
        f"            const int inside = ky0 == 0 && ky1 == {kh} && kx0 == 0 && kx1 == {kw};",
        f"            int8_t *o = out + (oy * {win.out_width} + ox) * {channels};",
        f"            for (int32_t c = 0; c < {channels}; c += 4) {{",
        f"                const int32_t *q = {p_sym} + {PARAMS} * c;",
        f"                int32_t a0 = q[0], a1 = q[{PARAMS}], a2 = q[{2 * PARAMS}], a3 = q[{3 * PARAMS}];",
        "                if (inside) {",
        f"                    _Pragma(\"GCC unroll {kh}\") for (int32_t ky = 0; ky < {kh}; ++ky)",
        f"                    _Pragma(\"GCC unroll {kw}\") for (int32_t kx = 0; kx < {kw}; ++kx) {{",
        *("                        " + line for line in tap("ky", "kx")),
        "                    }",
        "                } else {",
        "                    for (int32_t ky = ky0; ky < ky1; ++ky)",
        "                    for (int32_t kx = kx0; kx < kx1; ++kx) {",
        *("                        " + line for line in tap("ky", "kx")),
        "                    }",
        "                }",
        f"                o[c] = {requant}(a0, q + 1, {q.output_zero_point}, {q.lo}, {q.hi});",
        f"                o[c + 1] = {requant}(a1, q + {PARAMS + 1}, {q.output_zero_point}, {q.lo}, {q.hi});",
        f"                o[c + 2] = {requant}(a2, q + {2 * PARAMS + 1}, {q.output_zero_point}, {q.lo}, {q.hi});",
        f"                o[c + 3] = {requant}(a3, q + {3 * PARAMS + 1}, {q.output_zero_point}, {q.lo}, {q.hi});",
        "            }", "        }", "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


# ---------------------------------------------------------------- compile-time arrangement


def paired_rows(W: np.ndarray) -> tuple[np.ndarray, int]:
    """int8 rows (out_c x K) as the words mm8 reads: K padded to a multiple of 4 with zeros, the channel count
    to an even one with a zero row, each pair's rows interleaved word by word. Returns (int32 words, K / 4)."""
    out_c, k = W.shape
    kp = -(-k // 4) * 4
    rows = np.zeros((out_c + out_c % 2, kp), np.int8)
    rows[:out_c, :k] = W
    words = rows.view("<i4").reshape(-1, 2, kp // 4).transpose(0, 2, 1).reshape(-1)
    return words, kp // 4


# int32 words per channel: bias, multiplier, left shift + 1, right shift, 2^(right-1), -[right > 0], and 1 when
# its accumulator is not proven small (m4_requant_any)
PARAMS = 7
SMALL_ACC = 1 << 30  # |acc| 2^left below this: the SMMULR form is exact


def channel_params(bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, pad_even: bool,
                   wide: np.ndarray | None = None) -> np.ndarray:
    """Per channel the PARAMS words m4_requant reads; an even channel count when ``pad_even`` (zeros);
    ``wide``: the channels whose accumulators are not proven small."""
    n = len(bias) + (len(bias) % 2 if pad_even else 0)
    params = np.zeros((n, PARAMS), np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    params[:len(bias), 0] = bias
    params[:len(bias), 1] = mult
    params[:len(bias), 2] = left + 1
    params[:len(bias), 3] = right
    params[:len(bias), 4] = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0)
    params[:len(bias), 5] = np.where(right > 0, -1, 0)
    params[:len(bias), 6] = 0 if wide is None else wide
    params[:, 0] = (params[:, 0] + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 arithmetic wraps
    return params.astype(np.int32).reshape(-1)


def small_accumulators(bias: np.ndarray, W: np.ndarray, x_reach: int, shift: np.ndarray) -> np.ndarray:
    """Per channel whether |acc| 2^left stays below SMALL_ACC: |bias| + x_reach sum |w| bounds |acc|
    (x_reach: the largest |input| the sum multiplies)."""
    bound = np.abs(bias.astype(np.int64)) + x_reach * np.abs(W.astype(np.int64)).sum(axis=1)
    return bound * (1 << np.maximum(shift, 0).astype(np.int64)) < SMALL_ACC


def _shifts_ok(q) -> bool:
    return bool(np.all(q.shifts >= -MAX_RIGHT_SHIFT) and np.all(q.shifts <= 30) and np.all(q.multipliers >= 0))


def _computed_input(em, node: Node) -> bool:
    return em.graph.op(node.inputs[0]) not in ("const", "sparse_const") and all(
        em.graph.op(i) == "const" for i in node.inputs[1:])


def _matrix_constants(em, node: Node, W: np.ndarray, q) -> tuple[str, str, int, bool]:
    """The flash arrays of a layer's rearranged weights and channel parameters (bias' = bias - zx sum(w)):
    (weights symbol, params symbol, K / 4, whether an accumulator may be too large for the SMMULR epilogue)."""
    bias = np.asarray(em.graph.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1)
    folded = bias - q.input_zero_point * W.astype(np.int64).sum(axis=1)
    small = small_accumulators(folded, W, 128, q.shifts)
    words, kw4 = paired_rows(W)
    w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), words, "int32_t",
                               f"%{node.name}: {W.shape[0]}x{W.shape[1]} int8 weights, rows padded to words, "
                               "pairs of rows interleaved")
    params = channel_params(folded, q.multipliers, q.shifts, True, ~small)
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params, "int32_t",
                               f"%{node.name}: per channel bias - zx sum(w), multiplier, shift (m4_requant)")
    return w_sym, p_sym, kw4, not small.all()


def _mm_call(em, q, cols: str, n_cols, col_stride, w_sym, kw4, p_sym, out_c, out: str, wide: bool) -> str:
    return (f"{mm8_helper(em, wide)}({cols}, {n_cols}, {col_stride}, {w_sym}, {kw4}, {p_sym}, {out_c}, {out}, {out_c}, "
            f"{q.output_zero_point}, {q.lo}, {q.hi});")


# ---------------------------------------------------------------- the kernels


def fully_connected(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    out_c, depth = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if not _computed_input(em, node) or depth % 4 or not _shifts_ok(q):
        return None
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, depth)
    w_sym, p_sym, kw4, wide = _matrix_constants(em, node, W, q)
    rows = g.type(x_name).size // depth
    return [_mm_call(em, q, em.var(x_name), rows, depth, w_sym, kw4, p_sym, out_c, em.var(node.name), wide)]


def conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if not _computed_input(em, node) or x.shape[0] != 1 or not _shifts_ok(q):
        return None
    win = window_of(g, node, (kh, kw))
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, kh * kw * in_c)
    w_sym, p_sym, kw4, wide = _matrix_constants(em, node, W, q)
    positions = win.out_height * win.out_width
    xs, out = em.var(x_name), em.var(node.name)
    pointwise = (kh, kw) == (1, 1) and win.stride == (1, 1) and win.pad == (0, 0)
    if pointwise and in_c % 4 == 0:  # each position's inputs are already a column
        return [_mm_call(em, q, xs, positions, in_c, w_sym, kw4, p_sym, out_c, out, wide)]
    # im2col: two columns at a time in a static buffer, the padding's taps holding zx
    kp = 4 * kw4
    col = em.sym("m4_col")
    em.scratch(col, "uint32_t", 2 * kw4)  # words: the columns stay aligned
    zx = q.input_zero_point
    copy = ([f"for (int32_t c = 0; c < {in_c}; c += 4) {{ const int32_t v = {simd_helpers(em)[0]}(src + c); "
             "__builtin_memcpy(dst + c, &v, 4); }"] if in_c % 4 == 0 else
            [f"for (int32_t c = 0; c < {in_c}; ++c) dst[c] = src[c];"])
    return ["{",
            f"    int8_t *col = (int8_t *){col};",
            f"    for (int32_t i = {kh * kw * in_c}; i < {2 * kp}; ++i) col[i] = 0;  /* rows padded to words */",
            f"    for (int32_t p = 0; p < {positions}; p += 2) {{",
            f"        const int32_t n = p + 1 < {positions} ? 2 : 1;",
            "        for (int32_t k = 0; k < n; ++k) {",
            f"            const int32_t oy = (p + k) / {win.out_width}, ox = (p + k) % {win.out_width};",
            f"            int8_t *dst = col + k * {kp};",
            f"            for (int32_t ky = 0; ky < {kh}; ++ky) {{",
            f"                const int32_t iy = oy * {win.stride[0]} - {win.pad[0]} + ky * {win.dilation[0]};",
            f"                for (int32_t kx = 0; kx < {kw}; ++kx, dst += {in_c}) {{",
            f"                    const int32_t ix = ox * {win.stride[1]} - {win.pad[1]} + kx * {win.dilation[1]};",
            f"                    if (iy < 0 || iy >= {win.height} || ix < 0 || ix >= {win.width}) {{",
            f"                        for (int32_t c = 0; c < {in_c}; ++c) dst[c] = {zx};",
            "                        continue;",
            "                    }",
            "                    {",
            f"                        const int8_t *src = {xs} + (iy * {win.width} + ix) * {in_c};",
            *("                        " + line for line in copy),
            "                    }",
            "                }",
            "            }",
            "        }",
            "        " + _mm_call(em, q, "col", "n", kp, w_sym, kw4, p_sym, out_c, f"{out} + p * {out_c}", wide),
            "    }",
            "}"]


def depthwise_conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, b_name = node.inputs
    g = em.graph
    x = g.type(x_name)
    _, kh, kw, out_c = g.type(w_name).shape
    q = layer_quantisation(g, node, out_c)
    if (not _computed_input(em, node) or x.shape[0] != 1 or int(node.attrs["depth_multiplier"]) != 1
            or out_c % 4 or not _shifts_ok(q)):
        return None
    win = window_of(g, node, (kh, kw))
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(kh * kw, out_c).T
    if not small_accumulators(bias, W, 255, q.shifts).all():  # x - zx: up to 255 in magnitude
        return None
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), channel_params(bias, q.multipliers, q.shifts, False),
                               "int32_t", f"%{node.name}: per channel bias, multiplier, shift (m4_requant)")
    function = depthwise_function(em, node.name, win, out_c, kh, kw, q, em.const_array(w_name), p_sym)
    return [f"{function}({em.var(x_name)}, {em.var(node.name)});"]


def _requant_literals(multiplier: int, shift: int) -> str:
    """m4_scale's arguments after x for one (multiplier, shift): literals the compiler folds."""
    right = max(-shift, 0)
    return f"{multiplier}, {max(shift, 0) + 1}, {right}, {(1 << (right - 1)) if right else 0}, {-1 if right else 0}"


def _requant_bound(bound: int, multiplier: int, shift: int) -> int | None:
    """A bound of |MultiplyByQuantizedMultiplier(x)| for |x| <= bound, or None when the SMMULR form is not
    proven exact there."""
    left, right = max(shift, 0), max(-shift, 0)
    if bound << left >= SMALL_ACC:
        return None
    return ((bound << left) * multiplier >> 31 >> right) + 2


def scale_helper(em) -> str:
    return _helper(em, "m4_scale", """\
static inline __attribute__((always_inline)) int32_t @m4_scale(int32_t acc, int32_t m, int32_t sl, int32_t r,
                                                               int32_t nudge, int32_t negmask)
{
    /* m4_requant's MultiplyByQuantizedMultiplier alone (the same proven-small accumulators) */
    int32_t high;
    __asm__("smmulr %0, %1, %2" : "=r"(high) : "r"((int32_t)((uint32_t)acc << sl)), "r"(m));
    return (high + nudge + ((high >> 31) & negmask)) >> r;
}
""")


def tensor_add(em, node: Node) -> list[str] | None:
    """TFLite's ADD element by element, each of its three rescalings on SMMULR (proven exact from the int8
    ranges, else the shared C)."""
    g = em.graph
    if any(g.op(i) in ("const", "sparse_const") for i in node.inputs) or g.type(node.inputs[0]).shape != \
            g.type(node.inputs[1]).shape:
        return None
    q = add_quantisation(g, node)
    (ma, sa), (mb, sb), (mo, so) = q.requants
    bound_a = _requant_bound(255 << q.left_shift, ma, sa)
    bound_b = _requant_bound(255 << q.left_shift, mb, sb)
    if bound_a is None or bound_b is None or _requant_bound(bound_a + bound_b, mo, so) is None:
        return None
    scale = scale_helper(em)
    za, zb, zo = q.zero_points
    a, b = (em.var(n) for n in node.inputs)
    symbol = em.sym(f"m4_add_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 ADD */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *a, const int8_t *b, int8_t *out)', "{",
        f"    for (int32_t i = 0; i < {node.type.size}; ++i) {{",
        f"        const int32_t ra = {scale}(((int32_t)a[i] - {za}) * {1 << q.left_shift}, "
        f"{_requant_literals(ma, sa)});",
        f"        const int32_t rb = {scale}(((int32_t)b[i] - {zb}) * {1 << q.left_shift}, "
        f"{_requant_literals(mb, sb)});",
        f"        const int32_t v = {scale}(ra + rb, {_requant_literals(mo, so)}) + {zo};",
        f"        out[i] = (int8_t)(v < {q.lo} ? {q.lo} : (v > {q.hi} ? {q.hi} : v));",
        "    }", "}", ""])
    return [f"{symbol}({a}, {b}, {em.var(node.name)});"]
