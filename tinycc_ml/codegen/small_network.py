"""TFLite int8 network layers for microcontrollers without SIMD (the ATmega328P, the Cortex-M0): convolution,
depthwise convolution and fully connected layers as kernels of their targets (``CTarget.kernels``), equal
bit for bit to the shared C (``c_network``) and so to tflite-micro.

What makes them faster than the shared C on these chips:

- the input zero point folded into the bias (bias' = bias - zx sum(w), a constant): the inner loop multiplies
  two int8 (one MULS on the AVR, a 16-bit product) instead of an int32 by an int32 (a library call there);
- a window's taps copied once per output position into a small static column (im2col, the taps in the padding
  holding zx, which the folded bias cancels), so every output channel runs one straight dot product;
- TFLite's requantisation with the 64-bit product's words taken apart by 32-bit operations (the shared C's
  64-bit shifts and divisions are library loops on both chips).

A layer is taken only where the folded sums provably stay in int32 (else the shared C runs it), batch 1.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from tinycc_ml.codegen.c_network import clamp8, layer_quantisation, window_of
from tinycc_ml.codegen.emitter import CEmitter
from tinycc_ml.codegen.kernels import Kernel
from tinycc_ml.ir.graph import Node

MAX_COLUMN_BYTES = 512  # im2col's static column: small beside the AVR's 2 KB (a layer with more: shared C)
INT32_LIMIT = (1 << 31) - 1
Product = Callable[[CEmitter], str] | None


def requantise_words(em: CEmitter) -> str:
    """TFLite's MultiplyByQuantizedMultiplier (the shared C's ``tfl_requantise``: the same integers) with
    SaturatingRoundingDoublingHighMul's nudge and division by 2^31 (toward zero) done on the 64-bit product's
    two 32-bit words, and RoundingDivideByPOT's mask in 32 bits: 64-bit shifts, compares and divisions are
    library loops on both chips."""
    symbol = em.sym("small_requantise")
    if symbol not in em.helpers:
        em.helpers[symbol] = _REQUANTISE.replace("@", em.prefix + "_")
    return symbol


_REQUANTISE = """\
static inline int32_t @small_requantise(int32_t x, int32_t multiplier, int shift)
{
    const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    const int32_t a = (int32_t)((uint32_t)x << left);
    const int64_t product = (int64_t)a * multiplier;
    uint32_t words[2], nudged;
    int32_t high, mask, remainder, threshold;
    /* the product's two words (both chips are little-endian): no 64-bit shift or compare */
    __builtin_memcpy(words, &product, sizeof words);
    /* + 2^30 where the product >= 0, else 1 - 2^30; the division by 2^31 rounds toward zero */
    if ((int32_t)words[1] >= 0) {
        nudged = words[0] + 0x40000000u;
        words[1] += nudged < words[0];
    } else {
        nudged = words[0] + 0xc0000001u;
        words[1] += (uint32_t)(nudged < words[0]) + 0xffffffffu;  /* uint32_t: an AVR int is 16 bits */
    }
    high = (int32_t)((words[1] << 1) | (nudged >> 31));
    if ((int32_t)words[1] < 0 && (nudged & 0x7fffffffu) != 0)
        high += 1;
    mask = (int32_t)(((uint32_t)1 << right) - 1u);
    remainder = high & mask;
    threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    return (high >> right) + (remainder > threshold ? 1 : 0);
}
"""


def _folded_bias(em: CEmitter, node: Node, W: np.ndarray, zx: int) -> np.ndarray | None:
    """bias - zx sum(w) per output channel (W: one row of taps per channel), or None where a sum of either
    form could leave int32 (then the shared C runs the layer: its sums are TFLite's)."""
    bias = np.asarray(em.graph.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1)
    folded = bias - zx * W.sum(axis=1)
    reach = np.abs(W).sum(axis=1)
    if np.any(np.abs(bias) + 255 * reach > INT32_LIMIT) or np.any(np.abs(folded) + 128 * reach > INT32_LIMIT):
        return None
    return folded


def _layer_ok(em: CEmitter, node: Node) -> bool:
    g = em.graph
    x = g.type(node.inputs[0])
    w = g.type(node.inputs[1])
    return (x.shape[0] == 1 and g.op(node.inputs[0]) not in ("const", "sparse_const")
            and all(g.op(i) == "const" for i in node.inputs[1:])
            and (x.dtype.kind, x.dtype.bits, w.dtype.kind, w.dtype.bits) == ("qi", 8, "qi", 8))


def _epilogue(em: CEmitter, node: Node, channels: int, bias: np.ndarray) -> tuple[str, str, str, str] | None:
    """C expressions of channel ``o``'s folded bias, multiplier and shift, and the store's clamp call's tail;
    None where a multiplier is negative or a shift outside [-31, 31] (the shared C's ranges)."""
    q = layer_quantisation(em.graph, node, channels)
    if np.any(q.multipliers < 0) or np.any(q.shifts < -31) or np.any(q.shifts > 31):
        return None
    rd = em.target.read_const
    b = em.add_const_array(em.sym(f"{node.name}_bias_folded"), bias.astype(np.int32), "int32_t",
                           f"%{node.name}: each output channel's bias less the input zero point x its weights' sum")
    if len(set(q.multipliers.tolist())) == 1 and len(set(q.shifts.tolist())) == 1:
        mult, shift = str(int(q.multipliers[0])), str(int(q.shifts[0]))
    else:
        m = em.add_const_array(em.sym(f"{node.name}_multiplier"), q.multipliers.astype(np.int32), "int32_t",
                               f"%{node.name}: each output channel's requantisation multiplier (Q31)")
        s = em.add_const_array(em.sym(f"{node.name}_shift"), q.shifts.astype(np.int8), "int8_t",
                               f"%{node.name}: each output channel's requantisation shift (left when positive)")
        mult, shift = rd(m, "o", "int32_t"), f"(int){rd(s, 'o', 'int8_t')}"
    store = f"{q.output_zero_point}, {q.lo}, {q.hi})"
    return rd(b, "o", "int32_t"), mult, shift, store


def _dot(em: CEmitter, w_name: str, start: str, step: str, count: int, x: str, x_step: str,
         product: Product, dot: Product = None) -> list[str]:
    """acc += the int8 products of ``count`` weights (from element ``start``, ``step`` apart) and x[i * x_step]."""
    if dot is not None and step == x_step == "1" and count <= 255:
        return [f"acc = {dot(em)}(acc, {em.const_array(w_name)} + {start}, {x}, {count});"]
    w = em.at(w_name, f"w0 + i * {step}" if step != "1" else "w0 + i")
    xi = f"{x}[i * {x_step}]" if x_step != "1" else f"{x}[i]"
    term = f"{product(em)}({w}, {xi})" if product else f"(int16_t)((int16_t){w} * (int16_t){xi})"
    # int offsets: an AVR constant array is under 32 KB (the backend refuses more), an int is 16 bits there
    return [f"const int w0 = {start};",
            f"for (int i = 0; i < {count}; ++i)",
            f"    acc += {term};"]


def _im2col(em: CEmitter, node: Node, x_name: str, window: tuple[int, int], in_c: int,
            zx: int) -> tuple[str, list[str]]:
    """A static column of the window's taps at (iy0, ix0) (taps x channels; zx in the padding) and the lines
    filling it."""
    win = window_of(em.graph, node, window)
    kh, kw = window
    col = em.sym("small_col")
    em.scratch(col, "int8_t", kh * kw * in_c)
    xs = em.var(x_name)
    return col, [f"for (int ky = 0; ky < {kh}; ++ky)",
                 f"for (int kx = 0; kx < {kw}; ++kx) {{",
                 f"    const int iy = iy0 + ky * {win.dilation[0]}, ix = ix0 + kx * {win.dilation[1]};",
                 f"    int8_t *to = {col} + (ky * {kw} + kx) * {in_c};",
                 f"    if (iy < 0 || iy >= {win.height} || ix < 0 || ix >= {win.width}) {{",
                 f"        for (int c = 0; c < {in_c}; ++c) to[c] = {zx};",
                 "    } else {",
                 f"        const int8_t *from = {xs} + ((long)iy * {win.width} + ix) * {in_c};",
                 f"        for (int c = 0; c < {in_c}; ++c) to[c] = from[c];",
                 "    }",
                 "}"]


def _positions(em: CEmitter, node: Node, window: tuple[int, int], body: list[str]) -> list[str]:
    win = window_of(em.graph, node, window)
    return ["{",
            f"    for (int oy = 0; oy < {win.out_height}; ++oy)",
            f"    for (int ox = 0; ox < {win.out_width}; ++ox) {{",
            f"        const int iy0 = oy * {win.stride[0]} - {win.pad[0]}, ix0 = ox * {win.stride[1]} - {win.pad[1]};",
            f"        int8_t *out = {em.var(node.name)} + ((long)oy * {win.out_width} + ox) * "
            f"{node.type.shape[-1]};",
            *("        " + line for line in body),
            "    }",
            "}"]


def _plan(em: CEmitter, node: Node, W: np.ndarray, channels: int) -> tuple[int, str, str, str, str] | None:
    """(input zero point, folded bias, multiplier, shift, store tail) of a layer whose rows of taps are W, or
    None where the kernels do not take it (see _folded_bias, _epilogue)."""
    zx = int(em.graph.type(node.inputs[0]).dtype.zero_point)
    bias = _folded_bias(em, node, W, zx)
    epilogue = None if bias is None else _epilogue(em, node, channels, bias)
    return None if epilogue is None else (zx, *epilogue)


def _windowed(em: CEmitter, node: Node, window: tuple[int, int], in_c: int, W: np.ndarray,
              channel_sum) -> list[str] | None:
    """A windowed layer (W: one row of taps per output channel): per output position the im2col column, then per
    output channel o the lines ``channel_sum(column)`` gives (acc += its products) and the store."""
    if window[0] * window[1] * in_c > MAX_COLUMN_BYTES:
        return None
    plan = _plan(em, node, W, W.shape[0])
    if plan is None:
        return None
    zx, b, mult, shift, store = plan
    col, fill = _im2col(em, node, node.inputs[0], window, in_c, zx)
    before, products = channel_sum(col)
    body = [*fill,
            f"for (int o = 0; o < {W.shape[0]}; ++o) {{",
            *("    " + line for line in before),
            f"    int32_t acc = {b};",
            *("    " + line for line in products),
            f"    out[o] = {clamp8(em)}({requantise_words(em)}(acc, {mult}, {shift}) + {store};",
            "}"]
    return _positions(em, node, window, body)


def conv2d(em: CEmitter, node: Node, product: Product = None, dot: Product = None) -> list[str] | None:
    if not _layer_ok(em, node):
        return None
    w_name = node.inputs[1]
    out_c, kh, kw, in_c = em.graph.type(w_name).shape
    taps = kh * kw * in_c
    W = np.asarray(em.graph.node(w_name).attrs["value"], np.int64).reshape(out_c, taps)
    return _windowed(em, node, (kh, kw), in_c, W,
                     lambda col: ([], _dot(em, w_name, f"o * {taps}", "1", taps, col, "1", product, dot)))


def depthwise_conv2d(em: CEmitter, node: Node, product: Product = None, dot: Product = None) -> list[str] | None:
    if not _layer_ok(em, node):
        return None
    x_name, w_name, _ = node.inputs
    _, kh, kw, out_c = em.graph.type(w_name).shape
    in_c, multiplier = em.graph.type(x_name).shape[3], int(node.attrs["depth_multiplier"])
    W = np.asarray(em.graph.node(w_name).attrs["value"], np.int64).reshape(kh * kw, out_c).T
    return _windowed(em, node, (kh, kw), in_c, W,
                     lambda col: ([f"const int8_t *xc = {col} + o / {multiplier};"],
                                  _dot(em, w_name, "o", str(out_c), kh * kw, "xc", str(in_c), product)))


def fully_connected(em: CEmitter, node: Node, product: Product = None, dot: Product = None) -> list[str] | None:
    if not _layer_ok(em, node):
        return None
    x_name, w_name, _ = node.inputs
    out_c, depth = em.graph.type(w_name).shape
    rows = em.graph.type(x_name).size // depth
    W = np.asarray(em.graph.node(w_name).attrs["value"], np.int64).reshape(out_c, depth)
    plan = _plan(em, node, W, out_c)
    if plan is None:
        return None
    _, b, mult, shift, store = plan
    xs, out = em.var(x_name), em.var(node.name)
    return ["{",
            f"    for (int r = 0; r < {rows}; ++r)",
            f"    for (int o = 0; o < {out_c}; ++o) {{",
            f"        const int8_t *xr = {xs} + (long)r * {depth};",
            f"        int32_t acc = {b};",
            *("        " + line for line in _dot(em, w_name, f"o * {depth}", "1", depth, "xr", "1", product, dot)),
            f"        {out}[(long)r * {out_c} + o] = {clamp8(em)}({requantise_words(em)}(acc, {mult}, {shift}) + "
            f"{store};",
            "    }",
            "}"]


def small_network_kernels(product: Product = None, dot: Product = None) -> tuple[Kernel, ...]:
    """The layers' kernels for a target's CTarget.kernels (each declines what it cannot take: the shared C runs
    it). ``product(em)``: the symbol of a C function ``int16_t f(int8_t, int8_t)`` the target multiplies with
    (the AVR's MULS), None for C's multiply; ``dot(em)``: of ``int32_t f(int32_t acc, const int8_t *w, const
    int8_t *x, uint8_t n)``, acc plus n products of consecutive weights (constants) and inputs, or None."""
    kinds = {"product": product, "dot": dot}
    return (Kernel("conv2d", partial(conv2d, **kinds), name="small-conv2d"),
            Kernel("depthwise_conv2d", partial(depthwise_conv2d, **kinds), name="small-depthwise"),
            Kernel("fully_connected", partial(fully_connected, **kinds), name="small-fully-connected"))
