"""Host kernels for TFLite's int8 convolutions and fully connected layers (the host backend's own; the chips keep
the shared C of ``codegen/c_network.py``), every output byte equal to the shared C's and so to tflite-micro's.

- ``conv2d`` and ``fully_connected``: a matrix product over blocks of GEMM_ROWS output positions. Each block's
  input windows are gathered into int16 rows of (x - input zero point) (zero at taps outside the input: TFLite
  skips them, which adds the same zero), then multiplied by the filter, pre-arranged at compile time as int16
  pairs of columns for 8 output channels at a time ((o, k), (o, k + 1) adjacent): with AVX2 one ``vpmaddwd`` (or
  AVX-VNNI's ``vpdpwssd``) adds two columns' products for 8 channels; elsewhere the same sums in plain C.
- ``depthwise_conv2d`` (depth multiplier 1): per output position, the taps inside the input with the channels
  innermost (contiguous input and filter rows: loops GCC vectorises).
- the requantisation (TFLite's MultiplyByQuantizedMultiplier, output zero point, fused activation's clamp) of 8
  channels at a time with AVX2: gemmlowp's SaturatingRoundingDoublingHighMul written as
  sign(x) * floor((|x| m + 2^30 - [x < 0]) / 2^31) (the multiplier m is positive; the same value as the
  int64 form's division rounding toward zero), then RoundingDivideByPOT with per-lane shifts; elsewhere the
  shared scalar helpers.

Every sum is the shared C's int32 sum (integer sums: the order changes nothing; |products| < 2^16, pairs < 2^17).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen.c_network import layer_quantisation, window_geometry
from tinycc_ml.codegen.emitter import CEmitter
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.c_primitives import c_helper, clamp8, requantise

GEMM_ROWS = 4  # output positions per block (4 x 2 vectors of 8 channels: 8 int32 sums in AVX2's registers)
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
    """``<prefix>_host_requant(acc, n, count, mult, left, right, zo, lo, hi, out)``: the int8 outputs of ``count``
    channels from their int32 sums (``n``: count rounded up to 8, the arrays' length)."""
    simd_prelude(em)
    rq, clamp = requantise(em), clamp8(em)
    return c_helper(em, "host_requant", f"""\
static void @host_requant(const int32_t *acc, int n, int count, const int32_t *mult, const int32_t *left,
                          const int32_t *right, int32_t zo, int32_t lo, int32_t hi, int8_t *out)
{{
#if defined(__AVX2__)
    const __m256i half = _mm256_set1_epi64x((long long)1 << 30), low = _mm256_set1_epi64x(0xFFFFFFFFLL);
    const __m256i one = _mm256_set1_epi32(1), vzo = _mm256_set1_epi32(zo);
    const __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
    for (int j = 0; j < n; j += 8) {{
        const __m256i m = _mm256_loadu_si256((const __m256i *)(mult + j));
        const __m256i r = _mm256_loadu_si256((const __m256i *)(right + j));
        const __m256i x = _mm256_sllv_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)),
                                            _mm256_loadu_si256((const __m256i *)(left + j)));
        const __m256i ax = _mm256_abs_epi32(x), neg = _mm256_srli_epi32(x, 31);
        /* |x| m + 2^30 - [x < 0] in 64 bits, even and odd lanes; the quotient by 2^31 fits 32 bits */
        const __m256i pe = _mm256_add_epi64(_mm256_mul_epu32(ax, m),
                                            _mm256_sub_epi64(half, _mm256_and_si256(neg, low)));
        const __m256i po = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(ax, 32), _mm256_srli_epi64(m, 32)),
                                            _mm256_sub_epi64(half, _mm256_srli_epi64(neg, 32)));
        const __m256i q = _mm256_blend_epi32(_mm256_srli_epi64(pe, 31), _mm256_slli_epi64(_mm256_srli_epi64(po, 31), 32),
                                             0xAA);
        const __m256i y = _mm256_sign_epi32(q, x);
        /* RoundingDivideByPOT(y, r) */
        const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, r), one);
        const __m256i threshold = _mm256_add_epi32(_mm256_srli_epi32(mask, 1), _mm256_srli_epi32(y, 31));
        const __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(y, mask), threshold);
        __m256i v = _mm256_sub_epi32(_mm256_add_epi32(_mm256_srav_epi32(y, r), vzo), up);
        __m128i bytes;
        int32_t four[2];
        v = _mm256_min_epi32(_mm256_max_epi32(v, vlo), vhi);
        v = _mm256_packs_epi32(v, v);
        bytes = _mm256_castsi256_si128(_mm256_packs_epi16(v, v));
        four[0] = _mm_cvtsi128_si32(bytes);
        four[1] = _mm_cvtsi128_si32(_mm256_extracti128_si256(_mm256_packs_epi16(v, v), 1));
        if (j + 8 <= count) {{
            __builtin_memcpy(out + j, four, 8);
        }} else {{
            for (int e = 0; e < count - j; ++e)
                out[j + e] = ((const int8_t *)four)[e];
        }}
    }}
#else
    (void)n;
    for (int j = 0; j < count; ++j)
        out[j] = {clamp}({rq}(acc[j], mult[j], left[j] - right[j]) + zo, lo, hi);
#endif
}}
""")


def gemm(em: CEmitter) -> str:
    """``<prefix>_host_gemm(a, pairs, w, vectors, bias, acc)``: GEMM_ROWS rows of int16 a (2 pairs values each)
    times the pre-arranged filter ([vectors][pairs][8][2] int16), plus the bias, into acc (GEMM_ROWS x 8 vectors
    int32)."""
    simd_prelude(em)
    rows = GEMM_ROWS
    sums = [f"s{r}{v}" for r in range(rows) for v in range(2)]

    def madd(acc: str, x: str, w: str) -> str:
        return (f"{acc} = MADD({acc}, {x}, {w});")

    tile2 = [
        f"        __m256i {', '.join(f'{s} = _mm256_setzero_si256()' for s in sums)};",
        "        const int16_t *w0 = w + (long)v * pairs * 16, *w1 = w0 + (long)pairs * 16;",
        "        for (int k = 0; k < pairs; ++k) {",
        "            const __m256i f0 = _mm256_loadu_si256((const __m256i *)(w0 + 16 * k));",
        "            const __m256i f1 = _mm256_loadu_si256((const __m256i *)(w1 + 16 * k));",
        *(line for r in range(rows) for line in (
            f"            {{ int32_t xr; __builtin_memcpy(&xr, a + (long){r} * 2 * pairs + 2 * k, 4);",
            f"              const __m256i x{r} = _mm256_set1_epi32(xr);",
            f"              {madd(f's{r}0', f'x{r}', 'f0')} {madd(f's{r}1', f'x{r}', 'f1')} }}")),
        "        }",
        "        {",
        "            const __m256i b0 = _mm256_loadu_si256((const __m256i *)(bias + 8 * v));",
        "            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(bias + 8 * v + 8));",
        *(f"            _mm256_storeu_si256((__m256i *)(acc + (long){r} * 8 * vectors + 8 * v + {8 * h}), "
          f"_mm256_add_epi32(s{r}{h}, b{h}));" for r in range(rows) for h in range(2)),
        "        }",
    ]
    tile1 = [
        f"        __m256i {', '.join(f's{r}0 = _mm256_setzero_si256()' for r in range(rows))};",
        "        const int16_t *w0 = w + (long)v * pairs * 16;",
        "        for (int k = 0; k < pairs; ++k) {",
        "            const __m256i f0 = _mm256_loadu_si256((const __m256i *)(w0 + 16 * k));",
        *(line for r in range(rows) for line in (
            f"            {{ int32_t xr; __builtin_memcpy(&xr, a + (long){r} * 2 * pairs + 2 * k, 4);",
            f"              {madd(f's{r}0', '_mm256_set1_epi32(xr)', 'f0')} }}")),
        "        }",
        "        {",
        "            const __m256i b0 = _mm256_loadu_si256((const __m256i *)(bias + 8 * v));",
        *(f"            _mm256_storeu_si256((__m256i *)(acc + (long){r} * 8 * vectors + 8 * v), "
          f"_mm256_add_epi32(s{r}0, b0));" for r in range(rows)),
        "        }",
    ]
    body = "\n".join([
        "#if defined(__AVX2__)",
        "#if defined(__AVXVNNI__)",
        "#define MADD(s, x, w) _mm256_dpwssd_avx_epi32((s), (x), (w))",
        "#else",
        "#define MADD(s, x, w) _mm256_add_epi32((s), _mm256_madd_epi16((x), (w)))",
        "#endif",
        "    int v = 0;",
        "    for (; v + 2 <= vectors; v += 2) {", *tile2, "    }",
        "    for (; v < vectors; ++v) {", *tile1, "    }",
        "#undef MADD",
        "#else",
        f"    for (int r = 0; r < {rows}; ++r)",
        "    for (int v = 0; v < vectors; ++v) {",
        "        int32_t s[8];",
        "        for (int j = 0; j < 8; ++j) s[j] = bias[8 * v + j];",
        "        for (int k = 0; k < pairs; ++k) {",
        "            const int16_t *f = w + ((long)v * pairs + k) * 16;",
        "            const int32_t x0 = a[(long)r * 2 * pairs + 2 * k], x1 = a[(long)r * 2 * pairs + 2 * k + 1];",
        "            for (int j = 0; j < 8; ++j) s[j] += f[2 * j] * x0 + f[2 * j + 1] * x1;",
        "        }",
        "        for (int j = 0; j < 8; ++j) acc[(long)r * 8 * vectors + 8 * v + j] = s[j];",
        "    }",
        "#endif",
    ])
    return c_helper(em, "host_gemm", f"""\
static void @host_gemm(const int16_t *a, int pairs, const int16_t *w, int vectors, const int32_t *bias, int32_t *acc)
{{
{body}
}}
""")


def _requant_tables(em: CEmitter, node: Node, channels: int, wide: int) -> tuple[str, str, str, int, int, int]:
    """The layer's multipliers, left and right shifts (int32, padded to ``wide``), output zero point and clamp."""
    q = layer_quantisation(em.graph, node, channels)
    pad = lambda a: np.concatenate([np.asarray(a, np.int64), np.zeros(wide - channels, np.int64)])  # noqa: E731
    shifts = np.asarray(q.shifts, np.int64)
    mult = em.add_const_array(em.sym(f"{node.name}_host_mult"), pad(q.multipliers).astype(np.int32), "int32_t",
                              f"%{node.name}: each output channel's requantisation multiplier (Q31; host kernel)")
    left = em.add_const_array(em.sym(f"{node.name}_host_left"), pad(np.maximum(shifts, 0)).astype(np.int32), "int32_t",
                              f"%{node.name}: each output channel's left shift (host kernel)")
    right = em.add_const_array(em.sym(f"{node.name}_host_right"), pad(np.maximum(-shifts, 0)).astype(np.int32),
                               "int32_t", f"%{node.name}: each output channel's right shift (host kernel)")
    return mult, left, right, q.output_zero_point, q.lo, q.hi


def _gemm_layer(em: CEmitter, node: Node, W: np.ndarray, positions: int, fill: list[str]) -> list[str]:
    """out[p][o] = requantised(sum_k W[o][k] a_p[k] + bias[o]) for p < positions, GEMM_ROWS positions at a time;
    ``fill``: the lines writing row ``ar`` (K int16 values) of position ``p``."""
    g = em.graph
    channels, depth = W.shape
    wide, pairs = -(-channels // VEC) * VEC, -(-depth // 2)
    table = np.zeros((wide // VEC, pairs, VEC, 2), dtype=np.int64)
    padded = np.zeros((wide, 2 * pairs), dtype=np.int64)
    padded[:channels, :depth] = W
    table[...] = padded.reshape(wide // VEC, VEC, pairs, 2).transpose(0, 2, 1, 3)
    w_sym = em.add_const_array(em.sym(f"{node.name}_host_filter"), table.astype(np.int16), "int16_t",
                               f"%{node.name}: the filter per 8 output channels and pair of columns (host kernel)")
    bias = np.zeros(wide, np.int64)
    bias[:channels] = np.asarray(g.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1)
    b_sym = em.add_const_array(em.sym(f"{node.name}_host_bias"), bias.astype(np.int32), "int32_t",
                               f"%{node.name}: the bias, padded (host kernel)")
    mult, left, right, zo, lo, hi = _requant_tables(em, node, channels, wide)
    rq, mm = requant_row(em), gemm(em)
    y, R = em.var(node.name), GEMM_ROWS
    return ["{",
            f"    for (long p0 = 0; p0 < {positions}; p0 += {R}) {{",
            f"        int16_t a[{R * 2 * pairs}];",
            f"        int32_t acc[{R * wide}];",
            f"        for (int i = 0; i < {R}; ++i) {{",
            f"            int16_t *ar = a + i * {2 * pairs};",
            "            const long p = p0 + i;",
            f"            if (p >= {positions}) {{",
            f"                for (int k = 0; k < {2 * pairs}; ++k) ar[k] = 0;",
            "                continue;",
            "            }",
            *("            " + line for line in fill),
            *([f"            ar[{depth}] = 0;"] if depth % 2 else []),
            "        }",
            f"        {mm}(a, {pairs}, {w_sym}, {wide // VEC}, {b_sym}, acc);",
            f"        for (int i = 0; i < {R} && p0 + i < {positions}; ++i)",
            f"            {rq}(acc + i * {wide}, {wide}, {channels}, {mult}, {left}, {right}, {zo}, {lo}, {hi}, "
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
                f"for (int k = 0; k < {in_c}; ++k) ar[k] = (int16_t)(src[k] - ({zx}));"]
    else:
        fill = [f"const int b = (int)(p / {oh * ow}), oy = (int)(p / {ow} % {oh}), ox = (int)(p % {ow});",
                f"const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
                f"for (int ky = 0; ky < {kh}; ++ky)",
                f"for (int kx = 0; kx < {kw}; ++kx) {{",
                f"    const int iy = iy0 + ky * {dilation[0]}, ix = ix0 + kx * {dilation[1]};",
                f"    int16_t *dst = ar + (ky * {kw} + kx) * {in_c};",
                f"    if (iy < 0 || iy >= {height} || ix < 0 || ix >= {width}) {{",
                f"        for (int c = 0; c < {in_c}; ++c) dst[c] = 0;",
                "    } else {",
                f"        const int8_t *src = {xs} + ((long)(b * {height} + iy) * {width} + ix) * {in_c};",
                f"        for (int c = 0; c < {in_c}; ++c) dst[c] = (int16_t)(src[c] - ({zx}));",
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
    zx = int(x.dtype.zero_point)
    W = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(out_c, depth)
    fill = [f"const int8_t *src = {em.var(x_name)} + p * {depth};",
            f"for (int k = 0; k < {depth}; ++k) ar[k] = (int16_t)(src[k] - ({zx}));"]
    return _gemm_layer(em, node, W, x.size // depth, fill)


def depthwise_conv2d_host(em: CEmitter, node: Node) -> list[str] | None:
    if not _int8_layer(em, node) or int(node.attrs["depth_multiplier"]) != 1:
        return None
    g = em.graph
    x_name, w_name, b_name = node.inputs
    x = g.type(x_name)
    _, kh, kw, channels = g.type(w_name).shape
    height, width, oh, ow, stride, dilation, pads = window_geometry(em, node, (kh, kw))
    zx = int(x.dtype.zero_point)
    wide = -(-channels // VEC) * VEC
    W = np.zeros((kh * kw, wide), np.int64)
    W[:, :channels] = np.asarray(g.node(w_name).attrs["value"], np.int64).reshape(kh * kw, channels)
    w_sym = em.add_const_array(em.sym(f"{node.name}_host_filter"), W.astype(np.int16), "int16_t",
                               f"%{node.name}: the filter per tap, channels padded (host kernel)")
    bias = np.zeros(wide, np.int64)
    bias[:channels] = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    b_sym = em.add_const_array(em.sym(f"{node.name}_host_bias"), bias.astype(np.int32), "int32_t",
                               f"%{node.name}: the bias, padded (host kernel)")
    mult, left, right, zo, lo, hi = _requant_tables(em, node, channels, wide)
    rq = requant_row(em)
    xs, y = em.var(x_name), em.var(node.name)
    return ["{",
            f"    for (int b = 0; b < {x.shape[0]}; ++b)",
            f"    for (int oy = 0; oy < {oh}; ++oy)",
            f"    for (int ox = 0; ox < {ow}; ++ox) {{",
            f"        const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
            f"        int32_t acc[{wide}];",
            f"        for (int c = 0; c < {wide}; ++c) acc[c] = {b_sym}[c];",
            f"        for (int ky = 0; ky < {kh}; ++ky) {{",
            f"            const int iy = iy0 + ky * {dilation[0]};",
            f"            if (iy < 0 || iy >= {height}) continue;",
            f"            for (int kx = 0; kx < {kw}; ++kx) {{",
            f"                const int ix = ix0 + kx * {dilation[1]};",
            f"                if (ix < 0 || ix >= {width}) continue;",
            "                {",
            f"                const int8_t *src = {xs} + ((long)(b * {height} + iy) * {width} + ix) * {channels};",
            f"                const int16_t *f = {w_sym} + (ky * {kw} + kx) * {wide};",
            f"                for (int c = 0; c < {channels}; ++c)",
            f"                    acc[c] += (int32_t)f[c] * ((int32_t)src[c] - ({zx}));",
            "                }",
            "            }",
            "        }",
            f"        {rq}(acc, {wide}, {channels}, {mult}, {left}, {right}, {zo}, {lo}, {hi}, "
            f"{y} + ((long)(b * {oh} + oy) * {ow} + ox) * {channels});",
            "    }",
            "}"]
