"""Cortex-M4 / M33 kernel for TFLite's int8 AVERAGE_POOL_2D (tinycc_ml/ir/ops/pooling.py's average_pool2d) where
every window lies inside the input, bit for bit the shared C's (codegen/c_network.py) and so tflite-micro's.

One function per layer (``m4_avgpool_<layer>``), its geometry in literals, output position by output position
as the shared C goes, 4 channels a step: a tap's 4 channels one word, SXTAB16 and SXTAB16 ROR #8 add its bytes
to two words of int16 lane sums (channels 0, 2 and 1, 3), exact while the window has at most 255 taps (|sum|
<= 128 x 255 < 2^15); then per channel the shared C's rounding division by the (constant) tap count and the
activation's clamp. The 4 channels are stored after every tap of theirs was read, so the in-place rule
(``pooling.pool_lead``) holds as for the shared C. KWS's 25 x 5 global pool: about 3 cycles a tap for 4
channels against about 10 a tap and channel in the shared C.
"""

from __future__ import annotations

from tinycc_ml.arm.m4_network import simd_helpers
from tinycc_ml.arm.m4_pool import max_pool_claims
from tinycc_ml.target import Node, activation_range, window_of

MAX_TAPS = 255  # int16 lane sums of int8 taps stay exact


# the same claim as the max pool's: a TFLite int8 pool of a computed input
avg_pool_claims = max_pool_claims


def average_pool2d(em, node: Node) -> list[str] | None:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    kh, kw = (int(k) for k in node.attrs["filter"])
    if len(x.shape) != 4 or x.shape[0] != 1 or x.shape[3] % 4 or kh * kw > MAX_TAPS:
        return None
    win = window_of(em.graph, node, (kh, kw))
    _, H, W, C = x.shape
    (sy, sx), (py, px) = win.stride, win.pad
    OH, OW = win.out_height, win.out_width
    if (py, px) != (0, 0) or (OH - 1) * sy + kh > H or (OW - 1) * sx + kw > W:
        return None  # a window across the border: its count varies (the shared C)
    out = node.type.dtype
    if x.dtype.qscales[0] != out.qscales[0] or x.dtype.zero_point != out.zero_point:
        return None
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    rd, _ = simd_helpers(em)
    count = kh * kw

    def tap(r: str, indent: str) -> list[str]:
        return [f"{indent}{{", f"{indent}    const int32_t v = {rd}({r});",
                f'{indent}    __asm__("sxtab16 %0, %0, %2\\n\\tsxtab16 %1, %1, %2, ror #8"',
                f'{indent}            : "+r"(e), "+r"(o) : "r"(v));',
                f"{indent}}}"]

    # a window of whole input rows is one run of taps C bytes apart (unrolled by a divisor of its length up to 5)
    rows, run = (1, count) if kw == W else (kh, kw)
    u = max(d for d in range(1, 6) if run % d == 0)
    taps = [f"            for (int32_t fy = 0; fy < {rows}; ++fy) {{",
            f"                const int8_t *r = p + fy * {W * C} + c;",
            f"                for (int32_t fx = 0; fx < {run}; fx += {u}, r += {u * C}) {{",
            *(line for i in range(u) for line in tap(f"r + {i * C}", "                    ")),
            "                }",
            "            }"]
    symbol = em.sym(f"m4_avgpool_{node.name}")
    lines = [
        f"/* %{node.name}: TFLite's int8 AVERAGE_POOL_2D {kh}x{kw} over {H}x{W}x{C}, every window inside */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, int8_t *out)', "{",
        f"    for (int32_t oy = 0; oy < {OH}; ++oy)",
        f"    for (int32_t ox = 0; ox < {OW}; ++ox, out += {C}) {{",
        f"        const int8_t *p = x + (oy * {sy * W} + ox * {sx}) * {C};",
        f"        for (int32_t c = 0; c < {C}; c += 4) {{",
        "            int32_t e = 0, o = 0;",
        *taps,
        "            const int32_t s[4] = {(int16_t)e, (int16_t)o, e >> 16, o >> 16};",
        "            for (int32_t k = 0; k < 4; ++k) {",
        "                const int32_t sum = s[k];",
        f"                int32_t average = sum > 0 ? (sum + {count // 2}) / {count} : (sum - {count // 2}) / {count};",
        f"                average = average < {lo} ? {lo} : average > {hi} ? {hi} : average;",
        "                out[c + k] = (int8_t)average;",
        "            }",
        "        }",
        "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
