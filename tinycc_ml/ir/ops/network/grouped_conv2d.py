"""GROUPED_CONV2D: a convolution whose input and output channels split into ``groups`` groups, output group g
filtering input group g alone (PyTorch's ``Conv1d/Conv2d(groups=g)``, ONNX's ``Conv`` with ``group``; TFLite's
CONV_2D has none: TFLite Micro refuses a filter shallower than its input).

NHWC input (C channels), OHWI filter (O, KH, KW, C / groups), a bias per output channel; output channel o reads
input channels [g C / groups, (g + 1) C / groups) with g = o // (O / groups). Stride, dilation, padding and the
fused activation are conv2d's. Each group is a conv2d, so every dialect's arithmetic is conv2d's, channel by
channel: float; TFLite's int8 (sums of filter x (input - zero point) plus the int32 bias, per-channel
requantisation, as TFLite's CONV_2D kernel would compute each group); the project's power-of-two fixed point (an
int32 sum per output channel, its overflow proof conv2d's: sum |w| max |x| + |bias| per channel). Its C is one
loop over output channels reading its group's run of input channels at each tap (no target kernel claims it: the
shared C everywhere).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import CompileError
from tinycc_ml.ir.ops.c_primitives import requant_params, requantised_store
from tinycc_ml.ir.ops.convolution import (
    NO_RANGES,
    WINDOW_ATTRS,
    check_fixed_shift,
    check_operands,
    conv2d_sums,
    exact_sums,
    layer_bound,
    layer_output_shift,
    offset_input,
    requantise_channels,
    rows_only_first,
)
from tinycc_ml.ir.ops.pow2_arith import activation_bounds, layer_result, layer_shift
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import apply_activation
from tinycc_ml.ir.ops.windows import (
    axis_geometry,
    check_channel_requantisation,
    check_window_attrs,
    network_result,
    window_shape,
)


def _infer(ts, attrs, declared):
    need(len(ts) == 3, "grouped_conv2d takes input, filter and bias")
    check_operands(ts, 0, "OHWI")
    x, w, _ = ts
    check_window_attrs(attrs)
    groups = int(attrs["groups"])
    need(groups >= 1, f"groups {groups}: at least 1")
    need(x.shape[3] % groups == 0 and w.shape[0] % groups == 0,
         f"groups {groups} must divide the input's {x.shape[3]} and the output's {w.shape[0]} channels")
    need(w.shape[3] * groups == x.shape[3],
         f"filter {w.shape} reads {w.shape[3]} channels per group; the input's {x.shape[3]} in {groups} groups "
         f"are {x.shape[3] // groups} each")
    oh, ow = window_shape(x, w.shape[1:3], attrs)
    result = network_result(x, declared, (x.shape[0], oh, ow, w.shape[0]), "NHWC")
    check_channel_requantisation(x, w, result, w.shape[0])
    check_fixed_shift(x, w, result)
    return result


def grouped_sums(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """x (..., N, H, W, C) by filters (O, KH, KW, C / groups): each group's conv2d sums, channels concatenated."""
    groups = int(attrs["groups"])
    depth, per_group = w.shape[3], w.shape[0] // groups
    return np.concatenate([conv2d_sums(x[..., g * depth:(g + 1) * depth], w[g * per_group:(g + 1) * per_group],
                                       attrs) for g in range(groups)], axis=-1)


def _evaluate(xs, attrs):
    return apply_activation(grouped_sums(xs[0], xs[1], attrs) + xs[2], attrs.get("activation", "none"))


def _fixed(call: FixedCall):
    if call.type.dtype.is_fixed:
        return layer_result(exact_sums(grouped_sums(call.ins[0], call.ins[1], call.attrs)) + call.ins[2], call)
    w = call.ins[1].astype(np.float64) - call.in_types[1].dtype.zero_point
    acc = exact_sums(grouped_sums(offset_input(call), w, call.attrs)) + call.ins[2]
    return requantise_channels(acc, call, 0)


# ---------------------------------------------------------------- C (one form, three dialects)


def _c_layer(em, node, acc_init: str, element: str, mac, store) -> list[str]:
    """The layer's loops: per output position, per output channel o of group g, ``acc_init``, the window's taps
    inside the input (each a run of the group's input channels: ``mac(w, x)``), the bias, ``store()``."""
    x_name, w_name, b_name = node.inputs
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    if em.graph.op(x_name) in ("const", "sparse_const"):
        raise CompileError(f"node %{node.name}: grouped_conv2d of the constant %{x_name} (fold it first)")
    batch, height, width, in_c = x.shape
    out_c, kh, kw, depth = w.shape
    per_group = out_c // int(node.attrs["groups"])
    _, oh, ow, _ = node.type.shape
    stride = [int(s) for s in node.attrs.get("stride", [1, 1])]
    dilation = [int(d) for d in node.attrs.get("dilation", [1, 1])]
    pads = [axis_geometry(n, k, s, d, node.attrs, a)[1]
            for a, (n, k, s, d) in enumerate(zip((height, width), (kh, kw), stride, dilation))]
    xs, y = em.var(x_name), em.var(node.name)
    return [
        "{",
        f"    for (int b = 0; b < {batch}; ++b)",
        f"    for (int oy = 0; oy < {oh}; ++oy)",
        f"    for (int ox = 0; ox < {ow}; ++ox) {{",
        f"        const int iy0 = oy * {stride[0]} - {pads[0]}, ix0 = ox * {stride[1]} - {pads[1]};",
        f"        const long pos = ((long)(b * {oh} + oy) * {ow} + ox) * {out_c};",
        f"        for (int o = 0; o < {out_c}; ++o) {{",
        f"            const int first = (o / {per_group}) * {depth};",
        f"            {acc_init}",
        f"            for (int ky = 0; ky < {kh}; ++ky) {{",
        f"                const int iy = iy0 + ky * {dilation[0]};",
        f"                if (iy < 0 || iy >= {height}) continue;",
        f"                for (int kx = 0; kx < {kw}; ++kx) {{",
        f"                    const int ix = ix0 + kx * {dilation[1]};",
        f"                    const {element} *xp;",
        "                    long wp;",
        f"                    if (ix < 0 || ix >= {width}) continue;",
        f"                    xp = {xs} + ((long)(b * {height} + iy) * {width} + ix) * {in_c} + first;",
        f"                    wp = ((long)(o * {kh} + ky) * {kw} + kx) * {depth};",
        f"                    for (int c = 0; c < {depth}; ++c)",
        f"                        {mac(em.at(w_name, 'wp + c'), 'xp[c]')}",
        "                }",
        "            }",
        f"            acc += {em.at(b_name, 'o')};",
        f"            {y}[pos + o] = {store()};",
        "        }",
        "    }",
        "}"]


def _c_float(em, node) -> list[str]:
    activation = node.attrs.get("activation", "none")
    stored = {"relu": "acc < 0.0f ? 0.0f : acc",
              "relu6": "acc < 0.0f ? 0.0f : (acc > 6.0f ? 6.0f : acc)"}.get(activation, "acc")
    return _c_layer(em, node, "float acc = 0.0f;", "float", lambda w, x: f"acc += {w} * {x};", lambda: stored)


def _c_pow2(em, node) -> list[str]:
    x, w = em.graph.type(node.inputs[0]), em.graph.type(node.inputs[1])
    bits = node.type.dtype.bits
    product = "int16_t" if x.dtype.bits == 8 else "int32_t"  # exact: int8 products in int16, int16 in int32
    shift = layer_shift(x, w, node.type)
    shifted = f"((acc + INT32_C({1 << (shift - 1)})) >> {shift})" if shift else "acc"
    lo, hi = activation_bounds(node.attrs.get("activation", "none"), node.type.dtype)
    store = f"(int{bits}_t)({shifted} < {lo} ? {lo} : ({shifted} > {hi} ? {hi} : {shifted}))"
    return _c_layer(em, node, "int32_t acc = 0;", f"int{x.dtype.bits}_t",
                    lambda wv, xv: f"acc += ({product})(({product}){wv} * ({product}){xv});", lambda: store)


def _c_tflite(em, node) -> list[str]:
    x, w = em.graph.type(node.inputs[0]), em.graph.type(node.inputs[1])
    store = requantised_store(em, node, "acc", *requant_params(em, node, w.shape[0], w))
    offset = -x.dtype.zero_point
    return _c_layer(em, node, "int32_t acc = 0;", "int8_t",
                    lambda wv, xv: f"acc += (int32_t){wv} * ((int32_t){xv} + {offset});", lambda: store)


def _c_fixed(em, node) -> list[str]:
    return _c_pow2(em, node) if node.type.dtype.is_fixed else _c_tflite(em, node)


register_op(OpDef(
    "grouped_conv2d", 3, _infer, _evaluate, {**WINDOW_ATTRS, "groups": "int"},
    "a grouped convolution (PyTorch's groups): NHWC input, OHWI filter of C / groups channels, output group g "
    "filtering input group g; conv2d's window attributes and activation; integer forms conv2d's, per group",
    evaluate_rows=rows_only_first(_evaluate), fixed=_fixed,
    acc_bound=lambda call: layer_bound(call, call.consts[1].reshape(call.consts[1].shape[0], -1)),
    output_shift=layer_output_shift, c={"fixed": _c_fixed, "float": _c_float},
    unsupported={"interval": NO_RANGES}))
