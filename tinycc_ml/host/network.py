"""Host kernels for TFLite's int8 convolutions and fully connected layers (the host backend's own; the chips keep
the shared C of ``codegen/c_network.py``), every output byte equal to the shared C's and so to tflite-micro's.

- ``conv2d`` and ``fully_connected``: a matrix product over blocks of GEMM_ROWS output positions (tiles of
  GEMM_VECTORS x 8 channels). Each block's input windows are gathered as bytes x + 128 (a tap outside the input:
  the zero point + 128, TFLite skipping it adds the same nothing), the filter pre-arranged at compile time per 8
  output channels and 4 columns (one int32 lane per channel), the bias less (128 + input zero point) times each
  channel's weights: with AVX-VNNI one ``vpdpbusd`` adds 4 products for 8 channels, with AVX2 two ``vpmaddwd`` of
  the even and odd bytes widened; elsewhere the same sums in plain C.
- ``depthwise_conv2d`` (depth multiplier 1): per output position, 4 taps per int32 lane (their bytes interleaved
  per channel), the channels innermost, 16 at a time; the same bias and filter forms.
- ``average_pool2d``: the channels innermost (each tap's row of channels added into the sums).
- the requantisation (TFLite's MultiplyByQuantizedMultiplier, output zero point, fused activation's clamp) of 8
  channels at a time with AVX2: gemmlowp's SaturatingRoundingDoublingHighMul is floor((x m + 2^30) / 2^31) (its
  nudge 1 - 2^30 for negative products and division toward zero give the same value; it never saturates as the
  multiplier m is positive), then RoundingDivideByPOT with per-lane shifts; elsewhere the shared scalar helpers.

Every sum is the shared C's int32 sum (integer sums: the order changes nothing; each lane's 4 products of a byte
0..255 and an int8 fit easily; layers whose sums could leave int32 keep the shared C).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import (
    CEmitter,
    Node,
    c_helper,
    clamp8,
    layer_quantisation,
    pool_window,
    requantise,
    window_geometry,
    window_loops,
)

GEMM_ROWS = 2  # output positions per block
GEMM_VECTORS = 4  # vectors of 8 channels per tile: GEMM_ROWS x GEMM_VECTORS int32 sums in AVX2's 16 registers
VEC = 8  # int32 lanes per AVX2 vector


def _int8_layer(em: CEmitter, node: Node) -> bool:
    """An int8 x int8 layer with an int32 bias, int8 out, positive multipliers: what these kernels compute."""
    g = em.graph
    if em.target.word_flash is not None or len(node.inputs) != 3:
        return False
    x, w, b = (g.type(n) for n in node.inputs)
    out = node.type.dtype
    if g.op(node.inputs[0]) in ("const", "sparse_const") or any(g.op(n) != "const" for n in node.inputs[1:]):
        return False
    for dtype, bits in ((x.dtype, 8), (w.dtype, 8), (out, 8), (b.dtype, 32)):
        if dtype.is_float or dtype.is_fixed or dtype.bits != bits:
            return False
    if not (x.dtype.is_quantised and out.is_quantised):
        return False
    channels = w.shape[0] if node.op != "depthwise_conv2d" else w.shape[3]
    return bool(np.all(layer_quantisation(g, node, channels).multipliers > 0))


def simd_prelude(em: CEmitter) -> None:
    em.helpers.setdefault(em.sym("host_simd"), "#if defined(__AVX2__)\n#include <immintrin.h>\n#endif\n")


def requant_row(em: CEmitter) -> str:
    """``<prefix>_host_requant(acc, n, count, t, left, zo, lo, hi, out)``: the int8 outputs of ``count`` channels
    from their int32 sums (``n``: count rounded up to 8, the tables' length; ``t``: the layer's tables, 5 x n int32:
    multiplier, left shift, right shift, 2^right - 1, (2^right - 1) >> 1; ``left``: whether any left shift is not
    0)."""
    simd_prelude(em)
    rq, clamp = requantise(em), clamp8(em)
    return c_helper(em, "host_requant", f"""\
#if defined(__AVX2__)
/* 8 channels' requantised sums (before the output zero point) */
static inline __m256i @host_rq8(const int32_t *acc, const int32_t *t, int n, int j, int left)
{{
    const __m256i half = _mm256_set1_epi64x((long long)1 << 30);
    const __m256i m = _mm256_loadu_si256((const __m256i *)(t + j));
    const __m256i r = _mm256_loadu_si256((const __m256i *)(t + 2 * n + j));
    const __m256i mask = _mm256_loadu_si256((const __m256i *)(t + 3 * n + j));
    const __m256i sums = _mm256_loadu_si256((const __m256i *)(acc + j));
    const __m256i x = left ? _mm256_sllv_epi32(sums, _mm256_loadu_si256((const __m256i *)(t + n + j))) : sums;
    /* SaturatingRoundingDoublingHighMul(x, m) (m > 0: never saturating) = floor((x m + 2^30) / 2^31): the 64-bit
       products of even and odd lanes, bits 31 to 62 (the quotient fits 32 bits) */
    const __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(x, m), half);
    const __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32)), half);
    const __m256i y = _mm256_blend_epi32(_mm256_srli_epi64(pe, 31), _mm256_slli_epi64(po, 1), 0xAA);
    /* RoundingDivideByPOT(y, r) */
    const __m256i threshold = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(t + 4 * n + j)),
                                               _mm256_srli_epi32(y, 31));
    const __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(y, mask), threshold);
    return _mm256_sub_epi32(_mm256_srav_epi32(y, r), up);
}}
#endif

static void @host_requant(const int32_t *acc, int n, int count, const int32_t *t, int left, int32_t zo, int32_t lo,
                          int32_t hi, int8_t *out)
{{
#if defined(__AVX2__)
    const __m256i vzo = _mm256_set1_epi16((short)zo);
    const __m128i vlo = _mm_set1_epi8((char)lo), vhi = _mm_set1_epi8((char)hi);
    for (int j = 0; j < n; j += 16) {{
        /* 16 channels (the last 8 twice when n is not a multiple of 16): int16 with saturation, plus the zero
           point (saturating), int8 with saturation, clamped: the clamp of the exact value (lo, hi are int8) */
        const __m256i v0 = @host_rq8(acc, t, n, j, left), v1 = j + 8 < n ? @host_rq8(acc, t, n, j + 8, left) : v0;
        const __m256i h = _mm256_adds_epi16(_mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8), vzo);
        const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(h, h), 0xD8);
        const __m128i c = _mm_min_epi8(_mm_max_epi8(_mm256_castsi256_si128(b), vlo), vhi);
        if (j + 16 <= count) {{
            _mm_storeu_si128((__m128i *)(out + j), c);
        }} else {{
            int8_t bytes[16];
            _mm_storeu_si128((__m128i *)bytes, c);
            __builtin_memcpy(out + j, bytes, (unsigned)(count - j) & 15u); /* count - j < 16 here */
        }}
    }}
#else
    (void)left;
    for (int j = 0; j < count; ++j)
        out[j] = {clamp}({rq}(acc[j], t[j], t[n + j] - t[2 * n + j]) + zo, lo, hi);
#endif
}}
""")


def gemm(em: CEmitter) -> str:
    """``<prefix>_host_gemm(a, quads, w, vectors, bias, acc)``: GEMM_ROWS rows of uint8 a (4 quads values each)
    times the pre-arranged int8 filter ([vectors][quads][8][4]), plus the bias, into acc (GEMM_ROWS x 8 vectors
    int32). AVX-VNNI: vpdpbusd (4 products per lane, summed exactly); AVX2: the same sums as two vpmaddwd of the
    even and odd bytes widened; elsewhere plain C."""
    simd_prelude(em)
    rows = GEMM_ROWS
    sums = [f"s{r}{v}" for r in range(rows) for v in range(2)]

    def tile(n_vec: int) -> list[str]:
        acc = [f"s{r}{h}" for r in range(rows) for h in range(n_vec)]
        lines = [f"        __m256i {', '.join(f'{s} = _mm256_setzero_si256()' for s in acc)};",
                 "        const int8_t *w0 = w + (long)v * quads * 32;",
                 "        for (int k = 0; k < quads; ++k) {"]
        for h in range(n_vec):
            lines += [f"            const __m256i f{h} = _mm256_loadu_si256((const __m256i *)(w0 + {h} * 32L * quads "
                      f"+ 32 * k));",
                      "#if !defined(__AVXVNNI__)",
                      f"            const __m256i fe{h} = _mm256_srai_epi16(_mm256_slli_epi16(f{h}, 8), 8), "
                      f"fo{h} = _mm256_srai_epi16(f{h}, 8);",
                      "#endif"]
        for r in range(rows):
            lines += [f"            {{ int32_t xr; __builtin_memcpy(&xr, a + {r} * 4L * quads + 4 * k, 4);",
                      "              const __m256i x = _mm256_set1_epi32(xr);",
                      "#if defined(__AVXVNNI__)",
                      *(f"              s{r}{h} = _mm256_dpbusd_avx_epi32(s{r}{h}, x, f{h});" for h in range(n_vec)),
                      "#else",
                      "              const __m256i xe = _mm256_and_si256(x, _mm256_set1_epi16(0xFF)), "
                      "xo = _mm256_srli_epi16(x, 8);",
                      *(f"              s{r}{h} = _mm256_add_epi32(s{r}{h}, _mm256_add_epi32("
                        f"_mm256_madd_epi16(xe, fe{h}), _mm256_madd_epi16(xo, fo{h})));" for h in range(n_vec)),
                      "#endif",
                      "            }"]
        lines += ["        }",
                  *(f"        _mm256_storeu_si256((__m256i *)(acc + {r} * 8L * vectors + 8L * (v + {h})), "
                    f"_mm256_add_epi32(s{r}{h}, _mm256_loadu_si256((const __m256i *)(bias + 8L * (v + {h})))));"
                    for r in range(rows) for h in range(n_vec))]
        return lines

    del sums
    body = "\n".join([
        "#if defined(__AVX2__)",
        "    int v = 0;",
        f"    for (; v + {GEMM_VECTORS} <= vectors; v += {GEMM_VECTORS}) {{", *tile(GEMM_VECTORS), "    }",
        "    for (; v < vectors; ++v) {", *tile(1), "    }",
        "#else",
        f"    for (int r = 0; r < {rows}; ++r)",
        "    for (int v = 0; v < vectors; ++v) {",
        "        int32_t s[8];",
        "        for (int j = 0; j < 8; ++j) s[j] = bias[8 * v + j];",
        "        for (int k = 0; k < quads; ++k) {",
        "            const int8_t *f = w + ((long)v * quads + k) * 32;",
        "            const uint8_t *x = a + (long)r * 4 * quads + 4 * k;",
        "            for (int j = 0; j < 8; ++j)",
        "                s[j] += f[4 * j] * x[0] + f[4 * j + 1] * x[1] + f[4 * j + 2] * x[2] + f[4 * j + 3] * x[3];",
        "        }",
        "        for (int j = 0; j < 8; ++j) acc[(long)r * 8 * vectors + 8 * v + j] = s[j];",
        "    }",
        "#endif",
    ])
    return c_helper(em, "host_gemm", f"""\
static void @host_gemm(const uint8_t *a, int quads, const int8_t *w, int vectors, const int32_t *bias, int32_t *acc)
{{
{body}
}}
""")


def _requant_tables(em: CEmitter, node: Node, channels: int, wide: int) -> tuple[str, int, int, int, int]:
    """The layer's requantisation table (5 x ``wide`` int32: multipliers, left shifts, right shifts, their masks
    and half masks; padded), whether any left shift is not 0, output zero point and clamp."""
    q = layer_quantisation(em.graph, node, channels)
    shifts = np.asarray(q.shifts, np.int64)
    table = np.zeros((5, wide), np.int64)
    table[0, :channels] = q.multipliers
    table[1, :channels] = np.maximum(shifts, 0)
    table[2, :channels] = np.maximum(-shifts, 0)
    table[3] = (np.int64(1) << table[2]) - 1
    table[4] = table[3] >> 1
    sym = em.add_const_array(em.sym(f"{node.name}_host_requant"), table.astype(np.int64).astype(np.uint32)
                             .view(np.int32), "int32_t",
                             f"%{node.name}: per output channel: multiplier (Q31), left shift, right shift, "
                             "2^right - 1, its half (host kernel)")
    return sym, int(bool(np.any(shifts > 0))), q.output_zero_point, q.lo, q.hi


def _shifted_bias(g, node: Node, W: np.ndarray, zx: int, wide: int) -> np.ndarray | None:
    """The layer's bias (``wide`` entries) for sums over x + 128: less (128 + zx) times each channel's weights
    (``W``: channels x taps); None where a sum could leave int32 (the shared C's then: checked before the layer
    emits any array, so none is left unused)."""
    bias = np.zeros(wide, np.int64)
    bias[:len(W)] = np.asarray(g.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1) - (128 + zx) * W.sum(axis=1)
    if np.abs(bias).max() >= 1 << 31 or (np.abs(W).sum(axis=1).max() * 255 + np.abs(bias).max()) >= 1 << 31:
        return None
    return bias


def _bias_array(em: CEmitter, node: Node, bias: np.ndarray) -> str:
    return em.add_const_array(em.sym(f"{node.name}_host_bias"), bias.astype(np.int32), "int32_t",
                              f"%{node.name}: the bias less (128 + input zero point) x the channel's weights "
                              "(host kernel)")


def _gemm_layer(em: CEmitter, node: Node, W: np.ndarray, positions: int, fill: list[str]) -> list[str] | None:
    """out[p][o] = requantised(sum_k W[o][k] (x_p[k] - zx) + bias[o]) for p < positions, GEMM_ROWS positions at a
    time; ``fill``: the lines writing row ``ar`` (K uint8 values x + 128; a tap outside the input: zx + 128) of
    position ``p``. The sums are of W (x + 128): the bias is less (128 + zx) times each channel's weights."""
    g = em.graph
    channels, depth = W.shape
    zx = int(g.type(node.inputs[0]).dtype.zero_point)
    wide, quads = -(-channels // VEC) * VEC, -(-depth // 4)
    padded = np.zeros((wide, 4 * quads), dtype=np.int64)
    padded[:channels, :depth] = W
    table = padded.reshape(wide // VEC, VEC, quads, 4).transpose(0, 2, 1, 3)
    bias = _shifted_bias(g, node, W, zx, wide)
    if bias is None:
        return None
    w_sym = em.add_const_array(em.sym(f"{node.name}_host_filter"), table.astype(np.int8), "int8_t",
                               f"%{node.name}: the filter per 8 output channels and 4 columns (host kernel)")
    b_sym = _bias_array(em, node, bias)
    t_sym, left, zo, lo, hi = _requant_tables(em, node, channels, wide)
    rq, mm = requant_row(em), gemm(em)
    y, R = em.var(node.name), GEMM_ROWS
    return ["{",
            f"    for (long p0 = 0; p0 < {positions}; p0 += {R}) {{",
            f"        uint8_t a[{R * 4 * quads}];",
            f"        int32_t acc[{R * wide}];",
            f"        for (int i = 0; i < {R}; ++i) {{",
            f"            uint8_t *ar = a + i * {4 * quads};",
            "            const long p = p0 + i;",
            f"            if (p >= {positions}) {{",
            f"                for (int k = 0; k < {4 * quads}; ++k) ar[k] = 0;",
            "                continue;",
            "            }",
            *("            " + line for line in fill),
            *([f"            for (int k = {depth}; k < {4 * quads}; ++k) ar[k] = 0;"] if depth % 4 else []),
            "        }",
            f"        {mm}(a, {quads}, {w_sym}, {wide // VEC}, {b_sym}, acc);",
            f"        for (int i = 0; i < {R} && p0 + i < {positions}; ++i)",
            f"            {rq}(acc + i * {wide}, {wide}, {channels}, {t_sym}, {left}, {zo}, {lo}, {hi}, "
            f"{y} + (p0 + i) * {channels});",
            "    }",
            "}"]


def conv2d_host(em: CEmitter, node: Node) -> list[str] | None:
    if not _int8_layer(em, node):
        return None
    g = em.graph
    x_name, w_name, _ = node.inputs
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    height, width, oh, ow, stride, dilation, pads = window_geometry(em, node, (kh, kw))
    zx = int(x.dtype.zero_point)
    W = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(out_c, kh * kw * in_c)
    xs = em.var(x_name)
    if kh == kw == 1 and tuple(stride) == (1, 1) and tuple(pads) == (0, 0):  # a position's input row as it is
        fill = [f"const int8_t *src = {xs} + p * {in_c};",
                f"for (int k = 0; k < {in_c}; ++k) ar[k] = (uint8_t)(src[k] + 128);"]
    else:
        run = kw * in_c  # a filter row's taps and channels: contiguous in the input when undilated across
        fill = [f"const int b = (int)(p / {oh * ow}), oy = (int)(p / {ow} % {oh}), ox = (int)(p % {ow});",
                f"const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
                f"for (int ky = 0; ky < {kh}; ++ky) {{",
                f"    const int iy = iy0 + ky * {dilation[0]};",
                f"    uint8_t *row = ar + ky * {run};",
                f"    if (iy < 0 || iy >= {height}) {{",
                f"        for (int i = 0; i < {run}; ++i) row[i] = {zx + 128};",
                "        continue;",
                "    }",
                *([f"    if (ix0 >= 0 && ix0 + {kw - 1} < {width}) {{ /* the whole filter row inside the input */",
                   f"        const int8_t *src = {xs} + ((long)(b * {height} + iy) * {width} + ix0) * {in_c};",
                   f"        for (int i = 0; i < {run}; ++i) row[i] = (uint8_t)(src[i] + 128);",
                   "        continue;",
                   "    }"] if dilation[1] == 1 else []),
                f"    for (int kx = 0; kx < {kw}; ++kx) {{",
                f"        const int ix = ix0 + kx * {dilation[1]};",
                f"        uint8_t *dst = row + kx * {in_c};",
                f"        if (ix < 0 || ix >= {width}) {{",
                f"            for (int c = 0; c < {in_c}; ++c) dst[c] = {zx + 128};",
                "        } else {",
                f"            const int8_t *src = {xs} + ((long)(b * {height} + iy) * {width} + ix) * {in_c};",
                f"            for (int c = 0; c < {in_c}; ++c) dst[c] = (uint8_t)(src[c] + 128);",
                "        }",
                "    }",
                "}"]
    return _gemm_layer(em, node, W, x.shape[0] * oh * ow, fill)


def fully_connected_host(em: CEmitter, node: Node) -> list[str] | None:
    if not _int8_layer(em, node):
        return None
    g = em.graph
    x_name, w_name, _ = node.inputs
    x = g.type(x_name)
    out_c, depth = g.type(w_name).shape
    W = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(out_c, depth)
    fill = [f"const int8_t *src = {em.var(x_name)} + p * {depth};",
            f"for (int k = 0; k < {depth}; ++k) ar[k] = (uint8_t)(src[k] + 128);"]
    return _gemm_layer(em, node, W, x.size // depth, fill)


def dot4(em: CEmitter) -> str:
    """``<prefix>_host_dot4(s, x, f)``: s plus, per int32 lane, the 4 products of x's unsigned bytes by f's signed
    bytes (AVX-VNNI's vpdpbusd; AVX2: two vpmaddwd of the even and odd bytes widened)."""
    simd_prelude(em)
    return c_helper(em, "host_dot4", """\
#if defined(__AVX2__)
static inline __m256i @host_dot4(__m256i s, __m256i x, __m256i f)
{
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(s, x, f);
#else
    const __m256i xe = _mm256_and_si256(x, _mm256_set1_epi16(0xFF)), xo = _mm256_srli_epi16(x, 8);
    const __m256i fe = _mm256_srai_epi16(_mm256_slli_epi16(f, 8), 8), fo = _mm256_srai_epi16(f, 8);
    return _mm256_add_epi32(s, _mm256_add_epi32(_mm256_madd_epi16(xe, fe), _mm256_madd_epi16(xo, fo)));
#endif
}
#endif
""")


def depthwise_sums(em: CEmitter) -> str:
    """``<prefix>_host_depthwise(taps, groups, channels, w, bias, acc)``: one output position's int32 sums of a
    depthwise convolution: ``taps`` (4 x groups pointers to int8 input rows, a row of zero points for taps outside
    the input), the filter [groups][channels rounded up to 8][4] int8 applied to x + 128, plus the bias (less
    (128 + zx) times the channel's weights). AVX2: 8 channels at a time, the 4 taps' bytes interleaved per
    channel (channels a multiple of 8); elsewhere plain C."""
    dot = dot4(em)
    return c_helper(em, "host_depthwise", f"""\
static void @host_depthwise(const int8_t *const *taps, int groups, int channels, const int8_t *w,
                            const int32_t *bias, int32_t *acc)
{{
    const int wide = (channels + 7) / 8 * 8;
#if defined(__AVX2__)
    if (channels % 8 == 0) {{
        const __m256i flip = _mm256_set1_epi8((char)0x80);
        int c = 0;
        for (; c + 16 <= channels; c += 16) {{ /* 16 channels: 16 bytes of each tap, two vectors of sums */
            __m256i s0 = _mm256_loadu_si256((const __m256i *)(bias + c));
            __m256i s1 = _mm256_loadu_si256((const __m256i *)(bias + c + 8));
            for (int g = 0; g < groups; ++g) {{
                const int8_t *const *t = taps + 4 * g;
                const __m128i t0 = _mm_loadu_si128((const __m128i *)(t[0] + c));
                const __m128i t1 = _mm_loadu_si128((const __m128i *)(t[1] + c));
                const __m128i t2 = _mm_loadu_si128((const __m128i *)(t[2] + c));
                const __m128i t3 = _mm_loadu_si128((const __m128i *)(t[3] + c));
                const __m128i a01 = _mm_unpacklo_epi8(t0, t1), a23 = _mm_unpacklo_epi8(t2, t3);
                const __m128i b01 = _mm_unpackhi_epi8(t0, t1), b23 = _mm_unpackhi_epi8(t2, t3);
                const __m256i q0 = _mm256_set_m128i(_mm_unpackhi_epi16(a01, a23), _mm_unpacklo_epi16(a01, a23));
                const __m256i q1 = _mm256_set_m128i(_mm_unpackhi_epi16(b01, b23), _mm_unpacklo_epi16(b01, b23));
                const int8_t *f = w + ((long)g * wide + c) * 4;
                s0 = {dot}(s0, _mm256_xor_si256(q0, flip), _mm256_loadu_si256((const __m256i *)f));
                s1 = {dot}(s1, _mm256_xor_si256(q1, flip), _mm256_loadu_si256((const __m256i *)(f + 32)));
            }}
            _mm256_storeu_si256((__m256i *)(acc + c), s0);
            _mm256_storeu_si256((__m256i *)(acc + c + 8), s1);
        }}
        for (; c < channels; c += 8) {{
            __m256i s = _mm256_loadu_si256((const __m256i *)(bias + c));
            for (int g = 0; g < groups; ++g) {{
                const int8_t *const *t = taps + 4 * g;
                const __m128i a01 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(t[0] + c)),
                                                      _mm_loadl_epi64((const __m128i *)(t[1] + c)));
                const __m128i a23 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(t[2] + c)),
                                                      _mm_loadl_epi64((const __m128i *)(t[3] + c)));
                const __m256i q = _mm256_set_m128i(_mm_unpackhi_epi16(a01, a23), _mm_unpacklo_epi16(a01, a23));
                s = {dot}(s, _mm256_xor_si256(q, flip),
                          _mm256_loadu_si256((const __m256i *)(w + ((long)g * wide + c) * 4)));
            }}
            _mm256_storeu_si256((__m256i *)(acc + c), s);
        }}
        return;
    }}
#endif
    for (int c = 0; c < channels; ++c) {{
        int32_t sum = bias[c];
        for (int g = 0; g < groups; ++g)
            for (int j = 0; j < 4; ++j)
                sum += (int32_t)w[((long)g * wide + c) * 4 + j] * ((int32_t)taps[4 * g + j][c] + 128);
        acc[c] = sum;
    }}
}}
""")


def depthwise_conv2d_host(em: CEmitter, node: Node) -> list[str] | None:
    if not _int8_layer(em, node) or int(node.attrs["depth_multiplier"]) != 1:
        return None
    g = em.graph
    x_name, w_name, _ = node.inputs
    x = g.type(x_name)
    _, kh, kw, channels = g.type(w_name).shape
    height, width, oh, ow, stride, dilation, pads = window_geometry(em, node, (kh, kw))
    zx = int(x.dtype.zero_point)
    wide, groups = -(-channels // VEC) * VEC, -(-(kh * kw) // 4)
    W = np.zeros((4 * groups, wide), np.int64)
    W[:kh * kw, :channels] = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(kh * kw, channels)
    table = W.reshape(groups, 4, wide).transpose(0, 2, 1)  # [group][channel][tap in the group]
    bias = _shifted_bias(g, node, W[:, :channels].T, zx, wide)
    if bias is None:
        return None
    w_sym = em.add_const_array(em.sym(f"{node.name}_host_filter"), table.astype(np.int8), "int8_t",
                               f"%{node.name}: the filter per 4 taps and channel (host kernel)")
    b_sym = _bias_array(em, node, bias)
    fill = em.add_const_array(em.sym(f"{node.name}_host_outside"), np.full(wide, zx, np.int8), "int8_t",
                              f"%{node.name}: the input's zero point, read for taps outside the input (host kernel)")
    t_sym, left, zo, lo, hi = _requant_tables(em, node, channels, wide)
    rq, sums = requant_row(em), depthwise_sums(em)
    xs, y = em.var(x_name), em.var(node.name)
    return ["{",
            f"    for (int b = 0; b < {x.shape[0]}; ++b)",
            f"    for (int oy = 0; oy < {oh}; ++oy)",
            f"    for (int ox = 0; ox < {ow}; ++ox) {{",
            f"        const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
            f"        const int8_t *taps[{4 * groups}];",
            f"        int32_t acc[{wide}];",
            f"        for (int t = 0; t < {4 * groups}; ++t) {{",
            f"            const int iy = iy0 + t / {kw} * {dilation[0]}, ix = ix0 + t % {kw} * {dilation[1]};",
            f"            taps[t] = t < {kh * kw} && iy >= 0 && iy < {height} && ix >= 0 && ix < {width}",
            f"                ? {xs} + ((long)(b * {height} + iy) * {width} + ix) * {channels} : {fill};",
            "        }",
            f"        {sums}(taps, {groups}, {channels}, {w_sym}, {b_sym}, acc);",
            f"        {rq}(acc, {wide}, {channels}, {t_sym}, {left}, {zo}, {lo}, {hi}, "
            f"{y} + ((long)(b * {oh} + oy) * {ow} + ox) * {channels});",
            "    }",
            "}"]


def average_pool2d_host(em: CEmitter, node: Node) -> list[str] | None:
    """TFLite's int8 average pool (the window clipped to the input, the count of the taps inside it) with the
    channels innermost: each tap's contiguous row of channels added into the sums."""
    x = em.graph.type(node.inputs[0])
    if em.target.word_flash is not None or x.dtype.is_float or x.dtype.is_fixed or x.dtype.bits != 8 \
            or node.type.dtype.bits != 8 or not node.type.dtype.is_quantised:
        return None
    pool = pool_window(em, node)
    height, width, *_ = window_geometry(em, node, pool.window)
    channels, xs = pool.channels, em.var(node.inputs[0])
    body = [*pool.clip,
            "{",
            "    const int32_t count = (int32_t)((fy1 - fy0) * (fx1 - fx0));",
            f"    int32_t sums[{channels}];",
            f"    for (int c = 0; c < {channels}; ++c) sums[c] = 0;",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx) {",
            f"        const int8_t *src = {xs} + ((long)(b * {height} + iy0 + fy) * {width} + ix0 + fx) * {channels};",
            f"        for (int c = 0; c < {channels}; ++c) sums[c] += src[c];",
            "    }",
            f"    for (int c = 0; c < {channels}; ++c) {{",
            "        const int32_t sum = sums[c];",
            "        const int32_t average = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;",
            f"        {em.var(node.name)}[pos + c] = {clamp8(em)}(average, {pool.lo}, {pool.hi});",
            "    }",
            "}"]
    return window_loops(em, node, pool.window, channels, body)
