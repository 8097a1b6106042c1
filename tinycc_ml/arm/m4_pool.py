"""Cortex-M4 / M33 kernel for TFLite's int8 MAX_POOL_2D (tinycc_ml/ir/ops/pooling.py's max_pool2d), bit for bit
the shared C's (codegen/c_network.py) and so tflite-micro's.

One function per layer (``m4_maxpool_<layer>``), its geometry in literals, output position by output position as
the shared C goes (so the in-place rule ``pooling.pool_lead`` holds: each output word is stored after every tap
it needs was read), 4 channels a step: a tap's 4 channels one word, SSUB8 (the GE flag of each byte lane where
the running maximum is at least the tap) and SEL keep each lane's larger byte, 2 instructions a tap for 4
channels; the activation's clamp is two more SSUB8 / SEL pairs against the bounds in every lane, where they
are narrower than int8. Positions whose window lies inside the input take the taps unrolled at literal
offsets (channels beyond a multiple of 4 too, a byte at a time); the others the taps inside the input (the
range computed per position, as the shared C does), channels beyond a multiple of 4 a byte at a time.
"""

from __future__ import annotations

from tinycc_ml.arm.m4_elementwise import select_helper
from tinycc_ml.arm.m4_network import simd_helpers, tflite_int8
from tinycc_ml.target import Node, activation_range, window_of


def _splat8(v: int) -> str:
    return f"(int32_t){(v & 0xFF) * 0x01010101}u"


def max_pool_claims(em, node: Node) -> bool:
    (x,) = node.inputs
    return tflite_int8(em, node) and em.graph.op(x) not in ("const", "sparse_const") and x not in em.inline_values


def max_pool2d(em, node: Node) -> list[str] | None:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    kh, kw = (int(k) for k in node.attrs["filter"])
    win = window_of(em.graph, node, (kh, kw))
    batch, H, W, C = x.shape
    (sy, sx), (py, px) = win.stride, win.pad
    out = node.type.dtype
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    rd, _ = simd_helpers(em)
    smax, smin = select_helper(em, "max"), select_helper(em, "min")

    def clamp_word(v: str) -> list[str]:
        lines = [f"{v} = {smax}({v}, {_splat8(lo)});"] if lo > -128 else []
        return lines + ([f"{v} = {smin}({v}, {_splat8(hi)});"] if hi < 127 else [])

    def clamp_byte(v: str) -> list[str]:
        lines = [f"if ({v} < {lo}) {v} = {lo};"] if lo > -128 else []
        return lines + ([f"if ({v} > {hi}) {v} = {hi};"] if hi < 127 else [])

    inside_taps = [(fy * W + fx) * C for fy in range(kh) for fx in range(kw)]
    unrolled = [f"        int32_t m = {rd}(p + c);"]
    unrolled += [f"        m = {smax}(m, {rd}(p + {off} + c));" for off in inside_taps[1:]]
    symbol = em.sym(f"m4_maxpool_{node.name}")
    lines = [
        f"/* %{node.name}: TFLite's int8 MAX_POOL_2D {kh}x{kw} over {H}x{W}x{C} */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, int8_t *out)', "{",
        f"    for (int32_t b = 0; b < {batch}; ++b)",
        f"    for (int32_t oy = 0; oy < {win.out_height}; ++oy)",
        f"    for (int32_t ox = 0; ox < {win.out_width}; ++ox, out += {C}) {{",
        f"        const int32_t iy0 = oy * {sy} - {py}, ix0 = ox * {sx} - {px};",
        "        const int32_t fy0 = iy0 < 0 ? -iy0 : 0, fx0 = ix0 < 0 ? -ix0 : 0;",
        f"        const int32_t fy1 = {H} - iy0 < {kh} ? {H} - iy0 : {kh};",
        f"        const int32_t fx1 = {W} - ix0 < {kw} ? {W} - ix0 : {kw};",
        f"        const int8_t *p = x + ((b * {H} + iy0) * {W} + ix0) * {C};",
        "        int32_t c = 0;",
        f"        if (fy0 == 0 && fx0 == 0 && fy1 == {kh} && fx1 == {kw}) {{",
        f"            for (; c + 4 <= {C}; c += 4) {{",
        *("    " + line for line in unrolled),
        *("            " + line for line in clamp_word("m")),
        "                __builtin_memcpy(out + c, &m, 4);",
        "            }",
        f"            for (; c < {C}; ++c) {{",
        "                int32_t m = p[c], v;",
        *(f"                v = p[{off} + c]; m = v > m ? v : m;" for off in inside_taps[1:]),
        *("                " + line for line in clamp_byte("m")),
        "                out[c] = (int8_t)m;",
        "            }",
        "        } else {",
        f"            for (; c + 4 <= {C}; c += 4) {{",
        "                int32_t m = (int32_t)0x80808080u;",
        "                for (int32_t fy = fy0; fy < fy1; ++fy)",
        "                for (int32_t fx = fx0; fx < fx1; ++fx)",
        f"                    m = {smax}(m, {rd}(p + (fy * {W} + fx) * {C} + c));",
        *("                " + line for line in clamp_word("m")),
        "                __builtin_memcpy(out + c, &m, 4);",
        "            }",
        "        }",
        f"        for (; c < {C}; ++c) {{",
        "            int32_t m = -128;",
        "            for (int32_t fy = fy0; fy < fy1; ++fy)",
        "            for (int32_t fx = fx0; fx < fx1; ++fx) {",
        f"                const int32_t v = p[(fy * {W} + fx) * {C} + c];",
        "                if (v > m) m = v;",
        "            }",
        *("            " + line for line in clamp_byte("m")),
        "            out[c] = (int8_t)m;",
        "        }",
        "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
