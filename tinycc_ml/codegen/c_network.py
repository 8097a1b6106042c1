"""C for TFLite's network ops in their int8 semantics (``ir/ops/convolution.py``, ``pooling.py``,
``tensor_elementwise.py``, ``shape.py``), entries of ``C_CODE["fixed"]``.

The C computes what the interpreter computes, bit for bit: int8 tensors (NHWC, row-major) in the arena,
int32 sums of filter x (input - input zero point), the int32 bias, TFLite's requantisation
(MultiplyByQuantizedMultiplier: gemmlowp's SaturatingRoundingDoublingHighMul in int64, then
RoundingDivideByPOT) with the multipliers and shifts computed here from the types' scales exactly as
``tflite_arith`` computes them (per output channel: constant arrays named with the model's prefix), the
output zero point, the fused activation's clamp. Softmax is TFLite's integer algorithm (gemmlowp's
fixed-point exp and reciprocal), the functions of ``tflite_arith`` written out in C. The primitives are
``static inline`` functions emitted once per model (``em.helpers``). No heap; C99.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.codegen.emitter import C_CODE, CEmitter, ctype_of
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops import fixed_softmax
from tinycc_ml.ir.ops.c_primitives import (  # noqa: F401  (re-exported: the targets' kernels use them)
    accumulator,
    c_helper,
    clamp8,
    clamp_to,
    divide_pot,
    high_mul,
    multiply_pot,
    requant_params,
    requantise,
    requantised_store,
    softmax_helpers,
    wrap_add,
)
from tinycc_ml.ir.ops.pooling import mean_parameters
from tinycc_ml.ir.ops.shape import pad_fill
from tinycc_ml.ir.ops.tensor_elementwise import (
    add_left_shift,
    add_multipliers,
    relu6_bounds,
    relu_parameters,
)
from tinycc_ml.ir.ops.tflite_arith import (
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    activation_range,
    channel_multipliers,
    softmax_parameters,
    wrap32,
)
from tinycc_ml.ir.ops.tflite_lut import softmax_int16_parameters, softmax_tables
from tinycc_ml.ir.ops.windows import axis_geometry, channel_scales

MAX_SOFTMAX_DEPTH = 256  # the sum of exps keeps its headroom (RoundingDivideByPOT's exponent stays <= 31)


# ---------------------------------------------------------------- what a layer's kernel needs to know


@dataclass(frozen=True)
class LayerQuantisation:
    """A convolution's or fully connected layer's int8 arithmetic: acc = sum w (x - input_zero_point) + bias,
    out = clamp(requantise(acc, multiplier[o], shift[o]) + output_zero_point, lo, hi) per output channel o."""

    input_zero_point: int
    multipliers: np.ndarray  # int64, Q31, per output channel
    shifts: np.ndarray  # int64, left when positive
    output_zero_point: int
    lo: int  # the fused activation's clamp
    hi: int


def layer_quantisation(graph, node: Node, channels: int) -> LayerQuantisation:
    """The int8 arithmetic of a conv2d / depthwise_conv2d / fully_connected node with ``channels`` outputs."""
    x, w, out = graph.type(node.inputs[0]), graph.type(node.inputs[1]), node.type.dtype
    mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(w, channels), out.qscales[0])
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point)
    return LayerQuantisation(int(x.dtype.zero_point), mult, shift, int(out.zero_point), int(lo), int(hi))


@dataclass(frozen=True)
class Window:
    """A windowed op's geometry: input rows and columns, output rows and columns, stride, dilation and the
    padding above / left (TFLite's: taps outside the input are skipped)."""

    height: int
    width: int
    out_height: int
    out_width: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int]


@dataclass(frozen=True)
class AddQuantisation:
    """TFLite's int8 ADD: a' = requantise((a - za) 2^left_shift, ma, sa), b' likewise, out = clamp(requantise(
    a' + b', mo, so) + zo, lo, hi)."""

    zero_points: tuple[int, int, int]  # a, b, out
    requants: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]  # (multiplier, shift) of a, b, the sum
    left_shift: int
    lo: int
    hi: int


def add_quantisation(graph, node: Node) -> AddQuantisation:
    ta, tb, out = (graph.type(n).dtype for n in (*node.inputs, node.name))
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    left_shift = add_left_shift(out.bits)
    requants = tuple((int(m), int(s)) for m, s in add_multipliers(ta.qscales[0], tb.qscales[0], out.qscales[0],
                                                                   left_shift))
    return AddQuantisation((int(ta.zero_point), int(tb.zero_point), int(out.zero_point)), requants, left_shift,
                           int(lo), int(hi))


def window_of(graph, node: Node, window: tuple[int, int]) -> Window:
    x = graph.type(node.inputs[0])
    _, height, width, _ = x.shape
    _, oh, ow, _ = node.type.shape
    stride = tuple(int(s) for s in node.attrs.get("stride", [1, 1]))
    dilation = tuple(int(d) for d in node.attrs.get("dilation", [1, 1]))
    pads = tuple(axis_geometry(n, int(k), s, d, node.attrs, a)[1]
                 for a, (n, k, s, d) in enumerate(zip((height, width), window, stride, dilation)))
    return Window(height, width, oh, ow, stride, dilation, pads)


# ---------------------------------------------------------------- the ops

def window_geometry(em: CEmitter, node: Node, window: tuple[int, int]):
    """(H, W, OH, OW, stride, dilation, padding before) of a windowed op."""
    x = em.graph.type(node.inputs[0])
    _, height, width, _ = x.shape
    _, oh, ow, _ = node.type.shape
    stride = [int(s) for s in node.attrs.get("stride", [1, 1])]
    dilation = [int(d) for d in node.attrs.get("dilation", [1, 1])]
    pads = [axis_geometry(n, int(k), s, d, node.attrs, a)[1]
            for a, (n, k, s, d) in enumerate(zip((height, width), window, stride, dilation))]
    return height, width, oh, ow, stride, dilation, pads


def window_loops(em: CEmitter, node: Node, window, channels_out: int, body: list[str]) -> list[str]:
    """Loops over batch, output rows and columns, and ``body`` (indented) once per output position, with
    iy0, ix0 (the window's top-left input position) and ``pos`` (the output position's element offset)."""
    x = em.graph.type(node.inputs[0])
    height, width, oh, ow, stride, dilation, pads = window_geometry(em, node, window)
    return [
        "{",
        f"    for (int b = 0; b < {x.shape[0]}; ++b)",
        f"    for (int oy = 0; oy < {oh}; ++oy)",
        f"    for (int ox = 0; ox < {ow}; ++ox) {{",
        f"        const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
        f"        const long pos = ((long)(b * {oh} + oy) * {ow} + ox) * {channels_out};",
        "        (void)iy0; (void)ix0;",
        *("        " + line for line in body),
        "    }",
        "}",
    ]


def tap_loops(node: Node, window, height: int, width: int, dilation, inner: list[str]) -> list[str]:
    """Loops over the window's taps inside the input (iy, ix), ``inner`` once per tap."""
    return [f"for (int ky = 0; ky < {window[0]}; ++ky) {{",
            f"    const int iy = iy0 + ky * {dilation[0]};",
            f"    if (iy < 0 || iy >= {height}) continue;",
            f"    for (int kx = 0; kx < {window[1]}; ++kx) {{",
            f"        const int ix = ix0 + kx * {dilation[1]};",
            f"        if (ix < 0 || ix >= {width}) continue;",
            *("        " + line for line in inner),
            "    }",
            "}"]


def clipped_taps(window, height: int, width: int, dilation) -> list[str]:
    """The lines giving the window's taps at (iy0, ix0) that lie inside the input, ky0 <= ky < ky1 and
    kx0 <= kx < kx1: no test per tap (a window's origin is always above / left of the input's end)."""
    lines = []
    for axis, origin, size, k, d in (("ky", "iy0", height, window[0], dilation[0]),
                                     ("kx", "ix0", width, window[1], dilation[1])):
        first = f"-{origin}" if d == 1 else f"(-{origin} + {d - 1}) / {d}"
        end = f"{size} - {origin}" if d == 1 else f"({size} - {origin} + {d - 1}) / {d}"
        lines += [f"const int {axis}0 = {origin} < 0 ? {first} : 0;",
                  f"const int {axis}1 = {end} < {k} ? {end} : {k};"]
    return lines


def conv_runs(em: CEmitter, node: Node, element: str, mac) -> list[str]:
    """The sums of a conv2d's output channel ``o`` at one position (after ``clipped_taps``): per filter row
    inside the input, the window's taps and channels in one contiguous run of input and filter (an undilated
    row), or tap by tap. ``element``: the input's C type; ``mac(w, x)``: the statement adding w x."""
    x_name, w_name, _ = node.inputs
    out_c, kh, kw, in_c = em.graph.type(w_name).shape
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    row = [f"const {element} *xp = {em.var(x_name)} + ((long)(b * {height} + iy0 + ky * {dilation[0]}) * {width} + "
           f"ix0 + kx0 * {dilation[1]}) * {in_c};",
           f"const long wp = ((long)(o * {kh} + ky) * {kw} + kx0) * {in_c};"]
    if dilation[1] == 1:
        row += [f"for (int i = 0; i < (kx1 - kx0) * {in_c}; ++i)",
                f"    {mac(em.at(w_name, 'wp + i'), 'xp[i]')}"]
    else:
        row += ["for (int kx = 0; kx < kx1 - kx0; ++kx)",
                f"for (int c = 0; c < {in_c}; ++c)",
                f"    {mac(em.at(w_name, f'wp + kx * {in_c} + c'), f'xp[kx * {dilation[1] * in_c} + c]')}"]
    return ["for (int ky = ky0; ky < ky1; ++ky) {", *("    " + line for line in row), "}"]


def depthwise_runs(em: CEmitter, node: Node, mac) -> list[str]:
    """The sums of a depthwise convolution's output channel ``o`` (of input channel ``c``) at one position
    (after ``clipped_taps``), tap by tap inside the input."""
    x_name, w_name, _ = node.inputs
    _, kh, kw, out_c = em.graph.type(w_name).shape
    in_c = em.graph.type(x_name).shape[3]
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    xv = (f"{em.var(x_name)}[((long)(b * {height} + iy0 + ky * {dilation[0]}) * {width} + ix0 + kx * {dilation[1]})"
          f" * {in_c} + c]")
    return ["for (int ky = ky0; ky < ky1; ++ky)",
            "for (int kx = kx0; kx < kx1; ++kx)",
            f"    {mac(em.at(w_name, f'(ky * {kw} + kx) * {out_c} + o'), xv)}"]


def conv_layer(em: CEmitter, node: Node, acc_init: str, element: str, mac, store) -> list[str]:
    """A conv2d whose window is clipped to the input (``clipped_taps``, ``conv_runs``): per output channel o,
    ``acc_init`` (the sum's declaration), the window's ``mac(w, x)`` statements, the bias, and ``store()`` (the C
    value stored). The float and power-of-two dialects' layers; TFLite's keeps its own tap loops."""
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    out_c, kh, kw, _ = em.graph.type(w_name).shape
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    body = [*clipped_taps((kh, kw), height, width, dilation),
            f"for (int o = 0; o < {out_c}; ++o) {{",
            f"    {acc_init}",
            *("    " + line for line in conv_runs(em, node, element, mac)),
            f"    acc += {em.at(b_name, 'o')};",
            f"    {em.var(node.name)}[pos + o] = {store()};",
            "}"]
    return window_loops(em, node, (kh, kw), out_c, body)


def depthwise_layer(em: CEmitter, node: Node, acc_init: str, mac, store) -> list[str]:
    """A depthwise convolution as ``conv_layer`` (``depthwise_runs``)."""
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    _, kh, kw, out_c = em.graph.type(w_name).shape
    in_c, multiplier = em.graph.type(x_name).shape[3], int(node.attrs["depth_multiplier"])
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    body = [*clipped_taps((kh, kw), height, width, dilation),
            f"for (int c = 0; c < {in_c}; ++c)",
            f"for (int m = 0; m < {multiplier}; ++m) {{",
            f"    const int o = c * {multiplier} + m;",
            f"    {acc_init}",
            *("    " + line for line in depthwise_runs(em, node, mac)),
            f"    acc += {em.at(b_name, 'o')};",
            f"    {em.var(node.name)}[pos + o] = {store()};",
            "}"]
    return window_loops(em, node, (kh, kw), out_c, body)


def dense_layer(em: CEmitter, node: Node, acc_init: str, element: str, product, store) -> list[str]:
    """A fully connected layer as ``conv_layer``: per row r and output o, acc += ``product(w, x)``."""
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    out_c, depth = em.graph.type(w_name).shape
    rows = em.graph.type(x_name).size // depth
    return ["{",
            f"    for (int r = 0; r < {rows}; ++r)",
            f"    for (int o = 0; o < {out_c}; ++o) {{",
            f"        const {element} *xp = {em.var(x_name)} + (long)r * {depth};",
            f"        {acc_init}",
            f"        for (int i = 0; i < {depth}; ++i)",
            f"            acc += {product(em.at(w_name, f'(long)o * {depth} + i'), 'xp[i]')};",
            f"        acc += {em.at(b_name, 'o')};",
            f"        {em.var(node.name)}[(long)r * {out_c} + o] = {store()};",
            "    }",
            "}"]


def require_computed(em: CEmitter, node: Node, name: str) -> None:
    """The C reads ``name`` through its arena pointer (or x): a constant there is refused."""
    if em.graph.op(name) in ("const", "sparse_const"):
        raise CompileError(f"node %{node.name}: {node.op} of the constant %{name} (fold it first)")


def conv2d(em: CEmitter, node: Node) -> list[str]:
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    out_c, kh, kw, in_c = w.shape
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    mult, shift = requant_params(em, node, out_c, w)
    offset = -x.dtype.zero_point
    acc_type = accumulator(em, node)
    tap = [f"const {ctype_of(x.dtype)} *xp = {em.var(x_name)} + ((long)(b * {height} + iy) * {width} + ix) * {in_c};",
           f"const long wp = ((long)(o * {kh} + ky) * {kw} + kx) * {in_c};",
           f"for (int c = 0; c < {in_c}; ++c)",
           f"    acc += ({acc_type})((int32_t){em.at(w_name, 'wp + c')} * ((int32_t)xp[c] + {offset}));"]
    body = [f"for (int o = 0; o < {out_c}; ++o) {{",
            f"    {acc_type} acc = 0;",
            *("    " + line for line in tap_loops(node, (kh, kw), height, width, dilation, tap)),
            f"    acc += {em.at(b_name, 'o')};",
            f"    {em.var(node.name)}[pos + o] = {requantised_store(em, node, 'acc', mult, shift)};",
            "}"]
    return window_loops(em, node, (kh, kw), out_c, body)


def depthwise_conv2d(em: CEmitter, node: Node) -> list[str]:
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    _, kh, kw, out_c = w.shape
    in_c, multiplier = x.shape[3], int(node.attrs["depth_multiplier"])
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    mult, shift = requant_params(em, node, out_c, w)
    offset = -x.dtype.zero_point
    acc_type = accumulator(em, node)
    tap = [f"const int32_t xv = (int32_t){em.var(x_name)}[((long)(b * {height} + iy) * {width} + ix) * {in_c} + c]"
           f" + {offset};",
           f"acc += ({acc_type})((int32_t){em.at(w_name, f'(ky * {kw} + kx) * {out_c} + o')} * xv);"]
    body = [f"for (int c = 0; c < {in_c}; ++c)",
            f"for (int m = 0; m < {multiplier}; ++m) {{",
            f"    const int o = c * {multiplier} + m;",
            f"    {acc_type} acc = 0;",
            *("    " + line for line in tap_loops(node, (kh, kw), height, width, dilation, tap)),
            f"    acc += {em.at(b_name, 'o')};",
            f"    {em.var(node.name)}[pos + o] = {requantised_store(em, node, 'acc', mult, shift)};",
            "}"]
    return window_loops(em, node, (kh, kw), out_c, body)


def fully_connected(em: CEmitter, node: Node) -> list[str]:
    x_name, w_name, b_name = node.inputs
    require_computed(em, node, x_name)
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    out_c, depth = w.shape
    rows = x.size // depth
    mult, shift = requant_params(em, node, out_c, w)
    offset = -x.dtype.zero_point
    acc_type = accumulator(em, node)
    return ["{",
            f"    for (int r = 0; r < {rows}; ++r)",
            f"    for (int o = 0; o < {out_c}; ++o) {{",
            f"        const {ctype_of(x.dtype)} *xp = {em.var(x_name)} + (long)r * {depth};",
            f"        {acc_type} acc = 0;",
            f"        for (int i = 0; i < {depth}; ++i)",
            f"            acc += ({acc_type})((int32_t){em.at(w_name, f'(long)o * {depth} + i')} * "
            f"((int32_t)xp[i] + {offset}));",
            f"        acc += {em.at(b_name, 'o')};",
            f"        {em.var(node.name)}[(long)r * {out_c} + o] = {requantised_store(em, node, 'acc', mult, shift)};",
            "    }",
            "}"]


@dataclass(frozen=True)
class PoolWindow:
    """What the pooling ops' C shares: the window clipped to the input at (iy0, ix0) (``clip``: the lines
    giving the taps fy0..fy1, fx0..fx1 inside it), the element of tap (fy, fx) and channel c (``tap``), and
    the fused activation's clamp."""

    window: tuple[int, int]
    channels: int
    clip: list[str]
    tap: str
    lo: int | None  # TFLite's int8 clamp (None: a float or fixed-point pool, whose dialect clamps)
    hi: int | None


def pool_window(em: CEmitter, node: Node) -> PoolWindow:
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    window = tuple(int(k) for k in node.attrs["filter"])
    channels = em.graph.type(x_name).shape[3]
    height, width, *_ = window_geometry(em, node, window)
    out = node.type.dtype
    lo, hi = (activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
              if out.is_quantised else (None, None))
    clip = ["const int fy0 = iy0 < 0 ? -iy0 : 0, fx0 = ix0 < 0 ? -ix0 : 0;",
            f"const int fy1 = {height} - iy0 < {window[0]} ? {height} - iy0 : {window[0]};",
            f"const int fx1 = {width} - ix0 < {window[1]} ? {width} - ix0 : {window[1]};"]
    tap = f"{em.var(x_name)}[((long)(b * {height} + iy0 + fy) * {width} + ix0 + fx) * {channels} + c]"
    return PoolWindow(window, channels, clip, tap, lo, hi)


def average_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    # TFLite's window clipped to the input: the count is of the taps inside it
    body = [*pool.clip,
            "const int32_t count = (int32_t)((fy1 - fy0) * (fx1 - fx0));",
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            "    int32_t sum = 0, average;",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx)",
            f"        sum += {pool.tap};",
            "    average = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;",
            f"    {em.var(node.name)}[pos + c] = {clamp_to(em, node.type.dtype.bits)}(average, {pool.lo}, {pool.hi});",
            "}"]
    return window_loops(em, node, pool.window, pool.channels, body)


def tensor_add(em: CEmitter, node: Node) -> list[str]:
    a_name, b_name = node.inputs
    ta, tb, out = em.graph.type(a_name).dtype, em.graph.type(b_name).dtype, node.type.dtype
    left_shift = add_left_shift(out.bits)
    (ma, sa), (mb, sb), (mo, so) = add_multipliers(ta.qscales[0], tb.qscales[0], out.qscales[0], left_shift)
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    rq = requantise(em)
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const int32_t a = {rq}(((int32_t){em.at(a_name, 'i')} - {ta.zero_point}) * {1 << left_shift}, "
            f"{ma}, {sa});",
            f"    const int32_t b = {rq}(((int32_t){em.at(b_name, 'i')} - {tb.zero_point}) * {1 << left_shift}, "
            f"{mb}, {sb});",
            f"    {em.var(node.name)}[i] = {clamp_to(em, out.bits)}({rq}(a + b, {mo}, {so}) + {out.zero_point}, {lo}, "
            f"{hi});",
            "}"]


def softmax_int16(em: CEmitter, node: Node) -> list[str]:
    """TFLite's int16 softmax: exps by table (kept in the output row), their int32 sum, its reciprocal by table,
    each exp rescaled."""
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    depth = x.shape[-1]
    exp_table, reciprocal_table = softmax_tables()
    exp_lut = em.add_const_array(em.sym("softmax_exp_lut"), exp_table.astype(np.int16), "int16_t",
                                 "TFLite's int16 softmax: exp over [-10, 0], 513 samples (Q0.15)")
    recip_lut = em.add_const_array(em.sym("softmax_reciprocal_lut"), reciprocal_table.astype(np.int16), "int16_t",
                                   "TFLite's int16 softmax: 1 / (1 + x) over [0, 1], 513 samples (Q0.15)")
    look = lut_lookup(em)
    multiplier, shift = softmax_int16_parameters(float(node.attrs["beta"]), x.dtype.qscales[0])
    xs, out = em.var(x_name), em.var(node.name)
    return ["{",
            f"    for (long r = 0; r < {x.size // depth}; ++r) {{",
            f"        const int16_t *in = {xs} + r * {depth};",
            f"        int16_t *exps = {out} + r * {depth};",
            "        int32_t largest = in[0], sum = 0, shifted;",
            "        int16_t reciprocal;",
            "        int headroom = 0;",
            f"        for (int i = 1; i < {depth}; ++i)",
            "            if (in[i] > largest) largest = in[i];",
            f"        for (int i = 0; i < {depth}; ++i) {{",
            f"            int32_t v = {requantise(em)}((int32_t)in[i] - largest, {multiplier}, {shift}) + 32767;",
            "            v = v < -32768 ? -32768 : (v > 32767 ? 32767 : v);",
            f"            exps[i] = {look}((int16_t)v, {exp_lut});",
            "            sum += exps[i];",
            "        }",
            "        while (headroom < 31 && !((uint32_t)sum & (0x80000000u >> headroom)))",
            "            ++headroom;",
            "        shifted = (int32_t)((((int64_t)sum << (headroom - 1)) + (1 << 13)) >> 14)",
            "                  - ((int32_t)1 << 15) - ((int32_t)1 << 16);",
            "        shifted = shifted < -32768 ? -32768 : (shifted > 32767 ? 32767 : shifted);",
            f"        reciprocal = {look}((int16_t)shifted, {recip_lut});",
            f"        for (int i = 0; i < {depth}; ++i) {{",
            "            const int right = 31 - headroom;",
            "            const int32_t v = (int32_t)(((int64_t)exps[i] * reciprocal + ((int64_t)1 << (right - 1))) >> "
            "right);",
            "            exps[i] = (int16_t)(v < 0 ? 0 : (v > 32767 ? 32767 : v));",
            "        }",
            "    }",
            "}"]


def lut_lookup(em: CEmitter) -> str:
    """TFLite's LUTLookup of an int16 table (513 samples): the sample at the top 9 bits, interpolated by the low 7."""
    read = em.target.read_const
    return c_helper(em, "tfl_lut16", f"""\
static inline int16_t @tfl_lut16(int16_t value, const int16_t *lut)
{{
    const int index = 256 + (value >> 7);
    const int16_t base = {read('lut', 'index', 'int16_t')};
    const int32_t slope = (int32_t){read('lut', 'index + 1', 'int16_t')} - base;
    return (int16_t)(base + ((slope * (value & 0x7f) + 64) >> 7));
}}
""")


def softmax(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    x = em.graph.type(x_name)
    if x.dtype.is_fixed:  # the project's fixed point
        return fixed_softmax.c_softmax(em, node)
    if x.dtype.bits == 16:
        return softmax_int16(em, node)
    depth = x.shape[-1]
    bits = node.type.dtype.bits  # 8, or TFLite Micro's int16 result of an int8 softmax
    least, most = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if depth > MAX_SOFTMAX_DEPTH:
        raise CompileError(f"node %{node.name}: softmax over {depth} values; the C keeps the sum of exps' headroom "
                           f"for at most {MAX_SOFTMAX_DEPTH}")
    multiplier, left_shift, diff_min = softmax_parameters(float(node.attrs["beta"]), x.dtype.qscales[0])
    exp, recip = softmax_helpers(em)
    high, div, add = high_mul(em), divide_pot(em), wrap_add(em)
    xs, out = em.var(x_name), em.var(node.name)
    scaled = f"{high}((int32_t)((uint32_t)diff << {left_shift}), {multiplier})"
    return ["{",
            f"    for (long r = 0; r < {x.size // depth}; ++r) {{",
            f"        const int8_t *in = {xs} + r * {depth};",
            "        int32_t largest = in[0], sum = 0, scale;",
            "        int bits_over_unit;",
            f"        for (int i = 1; i < {depth}; ++i)",
            "            if (in[i] > largest) largest = in[i];",
            f"        for (int i = 0; i < {depth}; ++i) {{",
            "            const int32_t diff = (int32_t)in[i] - largest;",
            f"            if (diff >= {diff_min})",
            f"                sum = {add}(sum, {div}({exp}({scaled}), {SOFTMAX_ACCUMULATION_INTEGER_BITS}));",
            "        }",
            f"        scale = {recip}(sum, &bits_over_unit);",
            f"        for (int i = 0; i < {depth}; ++i) {{",
            "            const int32_t diff = (int32_t)in[i] - largest;",
            f"            if (diff >= {diff_min}) {{",
            f"                const int32_t v = {div}({high}(scale, {exp}({scaled})), bits_over_unit + {31 - bits}) + "
            f"({least});",
            f"                {out}[r * {depth} + i] = (int{bits}_t)(v < {least} ? {least} : "
            f"(v > {most} ? {most} : v));",
            "            } else {",
            f"                {out}[r * {depth} + i] = {least};",
            "            }",
            "        }",
            "    }",
            "}"]


def reshape(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    if em.graph.op(x_name) == "const":
        raise CompileError(f"node %{node.name}: a reshape of the constant %{x_name} (no op computes it)")
    return [f"/* free: names the elements of {em.var(node.name)} */"]


C_CODE["fixed"].update({
    "conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d, "fully_connected": fully_connected,
    "average_pool2d": average_pool2d, "tensor_add": tensor_add, "softmax": softmax, "reshape": reshape,
})


def max_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    # the window clipped to the input, as the average pool's: padding is never the largest
    body = [*pool.clip,
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            f"    int32_t largest = {node.type.dtype.integer_range[0]};",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx) {",
            f"        const int32_t v = {pool.tap};",
            "        if (v > largest) largest = v;",
            "    }",
            f"    {em.var(node.name)}[pos + c] = {clamp_to(em, node.type.dtype.bits)}(largest, {pool.lo}, {pool.hi});",
            "}"]
    return window_loops(em, node, pool.window, pool.channels, body)


def transpose(em: CEmitter, node: Node) -> list[str]:
    """A copy with the axes permuted: the output's elements in order, each read from its input offset."""
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    x = em.graph.type(x_name)
    perm = [int(p) for p in node.attrs["perm"]]
    in_strides = [int(np.prod(x.shape[k + 1:], dtype=np.int64)) for k in range(x.rank)]
    out_shape = node.type.shape
    lines = ["{", "    long i = 0;"]
    for depth in range(len(perm)):
        lines.append(f"    {'    ' * depth}for (long a{depth} = 0; a{depth} < {out_shape[depth]}; ++a{depth})")
    offset = " + ".join(f"a{depth} * {in_strides[axis]}" for depth, axis in enumerate(perm))
    lines += [f"    {'    ' * len(perm)}{em.var(node.name)}[i++] = {em.var(x_name)}[{offset}];", "}"]
    return lines


C_CODE["fixed"].update({"max_pool2d": max_pool2d, "transpose": transpose})


# ---------------------------------------------------------------- MEAN, PAD, RELU, RELU6, CONCATENATION (issue 35)

def mean(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    x = em.graph.type(x_name)
    batch, height, width, channels = x.shape
    count = height * width
    out = node.type.dtype
    multiplier, shift = mean_parameters(x.dtype.qscales[0], out.qscales[0], count)
    less_zero_points = int(wrap32(-x.dtype.zero_point * count))  # the sum less count zero points, wrapping as int32
    return ["{",
            f"    for (int b = 0; b < {batch}; ++b)",
            f"    for (int c = 0; c < {channels}; ++c) {{",
            "        int32_t sum = 0;",
            f"        for (long i = 0; i < {count}; ++i)",
            f"            sum += {em.var(x_name)}[((long)b * {count} + i) * {channels} + c];",
            f"        sum = {wrap_add(em)}(sum, (int32_t){less_zero_points});",
            f"        {em.var(node.name)}[b * {channels} + c] = {clamp_to(em, out.bits)}("
            f"{requantise(em)}(sum, {multiplier}, {shift}) + {out.zero_point}, {out.integer_range[0]}, "
            f"{out.integer_range[1]});",
            "    }",
            "}"]


def pad(em: CEmitter, node: Node) -> list[str]:
    """The padded tensor filled with the zero point, then each row of the input's last axis copied in."""
    dtype = em.graph.type(node.inputs[0]).dtype
    return padded_copy(em, node, f"({ctype_of(dtype)}){pad_fill(dtype, node.attrs)}")


def padded_copy(em: CEmitter, node: Node, fill: str) -> list[str]:
    """The padded tensor filled with ``fill`` (a C expression: real 0), then each row of the input's last axis
    copied in."""
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    x = em.graph.type(x_name)
    pads = [int(p) for p in node.attrs["pads"]]
    out_shape = node.type.shape
    rank = x.rank
    inner = x.shape[-1]
    rows = x.size // inner
    # the output offset of input row r: its coordinates on the leading axes, shifted by the padding before
    coords, offset = [], "0"
    for axis in range(rank - 1):
        stride = int(np.prod(x.shape[axis + 1:rank - 1], dtype=np.int64)) if axis < rank - 2 else 1
        coords.append(f"((r / {stride}) % {x.shape[axis]} + {pads[2 * axis]})")
    for axis, coord in enumerate(coords):
        offset = f"({offset}) * {out_shape[axis]} + {coord}"
    y = em.var(node.name)
    return ["{",
            f"    for (long i = 0; i < {node.type.size}; ++i)",
            f"        {y}[i] = {fill};",
            f"    for (long r = 0; r < {rows}; ++r) {{",
            f"        const long at = ((long){offset}) * {out_shape[-1]} + {pads[-2]};",
            f"        for (int i = 0; i < {inner}; ++i)",
            f"            {y}[at + i] = {em.var(x_name)}[r * {inner} + i];",
            "    }",
            "}"]


def relu(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    x, out = em.graph.type(x_name).dtype, node.type.dtype
    multiplier, shift, lowest = relu_parameters(x, out)
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {clamp_to(em, out.bits)}({requantise(em)}((int32_t){em.at(x_name, 'i')} - "
            f"{x.zero_point}, {multiplier}, {shift}) + {out.zero_point}, {lowest}, {out.integer_range[1]});"]


def relu6(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    dtype = em.graph.type(x_name).dtype
    lower, upper = relu6_bounds(dtype)
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {clamp_to(em, dtype.bits)}({em.at(x_name, 'i')}, {lower}, {upper});"]


C_CODE["fixed"].update({"mean": mean, "pad": pad, "relu": relu, "relu6": relu6})


def concatenation(em: CEmitter, node: Node) -> list[str]:
    """Per slice before the axis: the first operand's run of elements, then the second's."""
    a_name, b_name = node.inputs
    a, b = em.graph.type(a_name), em.graph.type(b_name)
    axis = int(node.attrs["axis"])
    outer = int(np.prod(a.shape[:axis], dtype=np.int64))
    a_run, b_run = a.size // outer, b.size // outer
    y = em.var(node.name)

    def element(name: str, offset: str) -> str:  # fx operands rounded to the result's scale (shape.py)
        shift = em.graph.type(name).dtype.scale - node.type.dtype.scale if node.type.dtype.is_fixed else 0
        value = em.at(name, offset)
        if not shift:
            return value
        return f"({ctype_of(node.type.dtype)})(((int32_t){value} + INT32_C({1 << (shift - 1)})) >> {shift})"

    return [f"for (long o = 0; o < {outer}; ++o) {{",
            f"    for (long i = 0; i < {a_run}; ++i)",
            f"        {y}[o * {a_run + b_run} + i] = {element(a_name, f'o * {a_run} + i')};",
            f"    for (long i = 0; i < {b_run}; ++i)",
            f"        {y}[o * {a_run + b_run} + {a_run} + i] = {element(b_name, f'o * {b_run} + i')};",
            "}"]


C_CODE["fixed"]["concatenation"] = concatenation
