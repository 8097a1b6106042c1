"""Arm kernels for the project's network layers (fx16 and fx8 conv2d and fully_connected: ir/ops/pow2_arith.py):
two output channels at a time, each input element loaded once for both. On the Cortex-M4/M33 a word at a time
into both channels' sums by SMLAD (two 16 x 16 products and their sum in one instruction): int16 pairs as they
lie, int8 quadruples as two pairs sign-extended by SXTB16 (the even bytes, then the odd ones rotated down); on
the Cortex-M0 an element at a time (MULS).

Bit for bit the shared C's (codegen/c_network_pow2.py): the same int32 sums in another order, which the layer's
overflow proof bounds whatever the order (every partial sum is within sum |w| |x| + |bias| <= 2^30), the same
rounding shift, saturation and activation clamp.
"""

from __future__ import annotations

from tinycc_ml.target import Node, clipped_taps, layer_store, require_computed, window_geometry, window_loops


def fx_layer(em, node: Node) -> bool:
    """A layer of the project's fixed point reading a computed input and constant weights."""
    g = em.graph
    return node.type.dtype.is_fixed and \
        g.op(node.inputs[0]) not in ("const", "sparse_const") and g.op(node.inputs[1]) == "const"


def named_helper(em, name: str, text: str) -> str:
    symbol = em.sym(name)
    if symbol not in em.helpers:
        em.helpers[symbol] = text.replace("@", em.prefix + "_")
    return symbol


def dot_pair(em) -> str:
    """@m4_dot16x2(x, w0, w1, n, &s0, &s1): s0 += w0 . x and s1 += w1 . x over n int16, a word at a time."""
    return named_helper(em, "m4_dot16x2", """\
static inline __attribute__((always_inline)) int32_t @m4_rd16x2(const int16_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline __attribute__((always_inline)) int32_t @m4_smlad(int32_t a, int32_t b, int32_t acc)
{
    int32_t r;
    __asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}

static inline __attribute__((always_inline)) void @m4_dot16x2(const int16_t *x, const int16_t *w0,
                                                              const int16_t *w1, int32_t n, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1, i = 0;
    for (; i + 1 < n; i += 2) {
        const int32_t xv = @m4_rd16x2(x + i);
        a0 = @m4_smlad(@m4_rd16x2(w0 + i), xv, a0);
        a1 = @m4_smlad(@m4_rd16x2(w1 + i), xv, a1);
    }
    if (i < n) {
        a0 += (int32_t)w0[i] * x[i];
        a1 += (int32_t)w1[i] * x[i];
    }
    *s0 = a0;
    *s1 = a1;
}
""")


def dot_pair8(em) -> str:
    """@m4_dot8x2(x, w0, w1, n, &s0, &s1): s0 += w0 . x and s1 += w1 . x over n int8, a word at a time."""
    dot_pair(em)  # its SMLAD helper
    return named_helper(em, "m4_dot8x2", """\
static inline __attribute__((always_inline)) int32_t @m4_rd8x4(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline __attribute__((always_inline)) int32_t @m4_sxtb16(int32_t v, int odd)
{
    int32_t r;
    if (odd)
        __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    else
        __asm__("sxtb16 %0, %1" : "=r"(r) : "r"(v));
    return r;
}

static inline __attribute__((always_inline)) void @m4_dot8x2(const int8_t *x, const int8_t *w0,
                                                             const int8_t *w1, int32_t n, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1, i = 0;
    for (; i + 3 < n; i += 4) {
        const int32_t xv = @m4_rd8x4(x + i), v0 = @m4_rd8x4(w0 + i), v1 = @m4_rd8x4(w1 + i);
        const int32_t xe = @m4_sxtb16(xv, 0), xo = @m4_sxtb16(xv, 1);
        a0 = @m4_smlad(@m4_sxtb16(v0, 0), xe, a0);
        a0 = @m4_smlad(@m4_sxtb16(v0, 1), xo, a0);
        a1 = @m4_smlad(@m4_sxtb16(v1, 0), xe, a1);
        a1 = @m4_smlad(@m4_sxtb16(v1, 1), xo, a1);
    }
    for (; i < n; ++i) {
        a0 += (int32_t)w0[i] * x[i];
        a1 += (int32_t)w1[i] * x[i];
    }
    *s0 = a0;
    *s1 = a1;
}
""")


def dot_pair_m0(em, bits: int) -> str:
    """@m0_dot<bits>x2(x, w0, w1, n, &s0, &s1): s0 += w0 . x and s1 += w1 . x, an element at a time."""
    return named_helper(em, f"m0_dot{bits}x2", f"""\
static inline __attribute__((always_inline)) void @m0_dot{bits}x2(const int{bits}_t *x, const int{bits}_t *w0,
                                                              const int{bits}_t *w1, int32_t n, int32_t *s0,
                                                              int32_t *s1)
{{
    int32_t a0 = *s0, a1 = *s1;
    const int{bits}_t *end = x + n;
    while (x < end) {{
        const int32_t v = *x++;
        a0 += (int32_t)*w0++ * v;
        a1 += (int32_t)*w1++ * v;
    }}
    *s0 = a0;
    *s1 = a1;
}}
""")


def dot_pair_m4(em, bits: int) -> str:
    return dot_pair(em) if bits == 16 else dot_pair8(em)


def _channel_pairs(em, node: Node, rows: list[str], weights_of, run: str, x_at: str, dot_of) -> list[str]:
    """Channels o, o + 1 together (the last alone, paired with itself, when they are odd): for each of ``rows``
    (lines opening the row loop), dot_pair over ``run`` elements from ``x_at`` and channel c's weights from
    ``weights_of(c)`` (the C expression of their offset)."""
    out_c = node.type.shape[-1]
    b_name = node.inputs[2]
    dot = dot_of(em, node.type.dtype.bits)
    store = layer_store(em, node)
    w = em.const_array(node.inputs[1])
    return [f"for (int o = 0; o < {out_c}; o += 2) {{",
            f"    const int o1 = o + 1 < {out_c} ? o + 1 : o;",
            "    int32_t s0 = 0, s1 = 0;",
            *("    " + line for line in rows),
            f"        {dot}({x_at}, {w} + {weights_of('o')}, {w} + {weights_of('o1')}, {run}, &s0, &s1);",
            "    }" if rows else "",
            "    {",
            f"        int32_t acc = s0 + {em.at(b_name, 'o')};",
            f"        {em.var(node.name)}[pos + o] = {store};",
            f"        acc = s1 + {em.at(b_name, 'o1')};",
            f"        {em.var(node.name)}[pos + o1] = {store};",
            "    }",
            "}"]


def _conv2d(em, node: Node, dot_of) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    out_c, kh, kw, in_c = em.graph.type(w_name).shape
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    if dilation[1] != 1:
        return None
    require_computed(em, node, x_name)
    row = ["for (int ky = ky0; ky < ky1; ++ky) {",
           f"    const int{node.type.dtype.bits}_t *xp = {em.var(x_name)} + "
           f"((long)(b * {height} + iy0 + ky * {dilation[0]}) * {width} + "
           "ix0 + kx0) * " + str(in_c) + ";"]
    body = [*clipped_taps((kh, kw), height, width, dilation),
            *_channel_pairs(em, node, row, lambda c: f"((long)({c} * {kh} + ky) * {kw} + kx0) * {in_c}",
                            f"(kx1 - kx0) * {in_c}", "xp", dot_of)]
    return window_loops(em, node, (kh, kw), out_c, body)


def _fully_connected(em, node: Node, dot_of) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    out_c, depth = em.graph.type(w_name).shape
    rows = em.graph.type(x_name).size // depth
    require_computed(em, node, x_name)
    body = _channel_pairs(em, node, [], lambda c: f"(long){c} * {depth}", str(depth),
                          f"{em.var(x_name)} + (long)r * {depth}", dot_of)
    return ["{",
            f"    for (int r = 0; r < {rows}; ++r) {{",
            f"        const long pos = (long)r * {out_c};",
            *("        " + line for line in body if line),
            "    }",
            "}"]


def conv2d_m4(em, node: Node) -> list[str] | None:
    return _conv2d(em, node, dot_pair_m4)


def fully_connected_m4(em, node: Node) -> list[str] | None:
    return _fully_connected(em, node, dot_pair_m4)


def conv2d_m0(em, node: Node) -> list[str] | None:
    return _conv2d(em, node, dot_pair_m0)


def fully_connected_m0(em, node: Node) -> list[str] | None:
    return _fully_connected(em, node, dot_pair_m0)
