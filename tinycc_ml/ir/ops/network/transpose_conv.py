"""TRANSPOSE_CONV: the gradient of a strided convolution, each input position spreading its channels' products over
a window of the (larger) output: upsampling in U-Nets and decoders.

TFLite Micro scatters: for each input position (row, column, channel in order) and each filter tap, output
[y * stride - pad + ky][x * stride - pad + kx][oc] += input x filter[oc][ky][kx][ic]; then the bias and (int8)
TFLite's per-channel requantisation, the output's zero point and the activation's clamp. The padding is
ComputePaddingHeightWidth's from the output's size (a forward convolution from the output to the input). Here each
output element gathers the same products, taken in the scatter's order (input row, column, channel ascending), so
float32 sums round as TFLite Micro's do and int8 sums are the same integers; no int32 scratch tensor of the output's
size is needed. Filters OHWI, per-channel int8 (axis 0); int32 bias.

16x8 (int16 activations): TFLite Micro's int16 kernel: no zero points (it adds none: a file with one is refused),
int64 sums whatever the bias's width (an int16 bias is widened, an int64 one read as it is), TFLite's 64-bit
requantisation (a multiplier rounded to 16 bits), clamped to int16.

The project's fixed point (fx8 / fx16, ``pow2_arith``): the same gathered sums in int32 (input at 2^sx, filter at
2^sw, the bias fx32 at 2^(sx + sw)), shifted to the result's scale with rounding, saturated, the activation a clamp.
Overflow proof (``acc_bound``): an output position's products all come from taps of one stride phase (ky = oy + pad
- iy * stride: ky mod stride is fixed by oy), each tap at most once, so per output channel the largest, over the
phases, of the sum of that phase's |w| times the input's largest |int|, plus |bias|, bounds every sum.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import float_activation, requant_params, requantised_store
from tinycc_ml.ir.ops.convolution import NO_RANGES, layer_output_shift
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.pow2_arith import activation_bounds, check_fixed_layer, check_shift, layer_result, layer_shift
from tinycc_ml.ir.ops.registry import BoundCall, FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    activation_range,
    apply_activation,
    channel_multipliers,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_64,
)
from tinycc_ml.ir.ops.windows import channel_scales, check_channel_requantisation, network_result, quantised_operand

TRANSPOSE_CONV_OPTIONS = 49  # schema.fbs' BuiltinOptions: TransposeConvOptions


def _geometry(attrs, x_shape, w_shape):
    """(input rows, columns, filter rows, columns, output rows, columns, strides, pads)."""
    (sh, sw), (ph, pw) = (int(v) for v in attrs["stride"]), (int(v) for v in attrs["pad"])
    oh, ow = (int(v) for v in attrs["out_size"])
    return x_shape[1], x_shape[2], w_shape[1], w_shape[2], oh, ow, sh, sw, ph, pw


def _infer(ts, attrs, declared):
    x, w, b = ts
    need(x.rank == 4 and w.rank == 4 and b.rank == 1, f"transpose_conv2d takes NHWC, OHWI and a bias vector, got "
                                                       f"{x.shape}, {w.shape}, {b.shape}")
    need(x.shape[0] == 1, f"a batch of {x.shape[0]}: one is supported")
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    need(w.shape[3] == x.shape[3], f"the filter takes {w.shape[3]} channels, the input has {x.shape[3]}")
    need(b.shape[0] == w.shape[0], f"a bias of {b.shape[0]} for {w.shape[0]} output channels")
    need(all(int(s) >= 1 for s in attrs["stride"]) and all(int(p) >= 0 for p in attrs["pad"]),
         f"stride {attrs['stride']}, pad {attrs['pad']}")
    oh, ow = (int(v) for v in attrs["out_size"])
    result = network_result(x, declared, (1, oh, ow, w.shape[0]), "NHWC",
                            x.dtype.bits if x.dtype.is_quantised else 8)
    if x.dtype.is_fixed:
        check_fixed_layer(x, w, b)
        check_shift(layer_shift(x, w, result), "output")
    elif x.dtype.is_quantised:
        wide = x.dtype.bits == 16
        quantised_operand(x, "input", x.dtype.bits, zero_point=not wide)  # TFLite's int16 kernel adds none
        quantised_operand(result, "result", x.dtype.bits, zero_point=not wide)
        quantised_operand(w, "filter", 8, axis=0, zero_point=False)
        need(b.dtype.is_quantised and b.dtype.bits in ((16, 64) if wide else (32,)),
             f"bias must be {'qi16 or qi64' if wide else 'qi32'}, got {b.dtype}")
        quantised_operand(b, "bias", b.dtype.bits, axis=0, zero_point=False)
        check_channel_requantisation(x, w, result, w.shape[0])
    return result


def _sums(x: np.ndarray, w: np.ndarray, attrs) -> np.ndarray:
    """The scatter's sums, (rows, H, W, C) -> (rows, OH, OW, O), in x's dtype (float32: channel by channel in
    TFLite Micro's order; int64: exact in any order)."""
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw = _geometry(attrs, x.shape, w.shape)
    out = np.zeros((x.shape[0], oh, ow, w.shape[0]), dtype=x.dtype)
    wt = w.astype(x.dtype)
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                oy = iy * sh - ph + ky
                for kx in range(kw):
                    ox = ix * sw - pw + kx
                    if not (0 <= oy < oh and 0 <= ox < ow):
                        continue
                    if x.dtype == np.float32:
                        for ic in range(x.shape[3]):
                            out[:, oy, ox, :] += x[:, iy, ix, ic][:, None] * wt[None, :, ky, kx, ic]
                    else:
                        out[:, oy, ox, :] += x[:, iy, ix, :] @ wt[:, ky, kx, :].T
    return out


def _real(x: np.ndarray, w, b, attrs) -> np.ndarray:
    """Float: rows of (1, H, W, C) -> rows of (1, OH, OW, O)."""
    total = _sums(x.reshape(-1, *x.shape[-3:]).astype(np.float32), np.asarray(w, np.float32), attrs)
    total = apply_activation(total + np.asarray(b, np.float32), attrs.get("activation", "none"))
    return total.reshape(*x.shape[:-3], *total.shape[1:])


def _fixed(call: FixedCall):
    x_t, w_t, _ = call.in_types
    if call.type.dtype.is_fixed:
        x = np.asarray(call.ins[0], np.int64).reshape(-1, *x_t.shape[1:])
        acc = _sums(x, np.asarray(call.ins[1], np.int64), call.attrs) + np.asarray(call.ins[2], np.int64)
        return layer_result(acc, call).reshape(-1, 1, *acc.shape[1:])
    out = call.type.dtype
    x = call.ins[0].reshape(-1, *x_t.shape[1:]) - x_t.dtype.zero_point
    acc = _sums(x.astype(np.int64), call.ins[1], call.attrs) + np.asarray(call.ins[2], np.int64)
    mult, shift = channel_multipliers(x_t.dtype.qscales[0], channel_scales(w_t, w_t.shape[0]), out.qscales[0])
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    requantised = multiply_by_quantized_multiplier_64 if x_t.dtype.bits == 16 else multiply_by_quantized_multiplier
    y = np.clip(requantised(acc, mult, shift) + out.zero_point, lo, hi)
    return y.reshape(-1, 1, *y.shape[1:])


def _loops(em, node, init: str, term: str, store) -> list[str]:
    """The gather: each output element's products in the scatter's order, then ``store(o)``."""
    x_name, w_name, b_name = node.inputs
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw = _geometry(node.attrs, x.shape, w.shape)
    channels, depth = w.shape[0], x.shape[3]
    xv = em.at(x_name, f"((long)iy * {wd} + ix) * {depth} + ic")
    wv = em.at(w_name, f"(((long)o * {kh} + ky) * {kw} + kx) * {depth} + ic")
    return ["{",
            f"    for (int oy = 0; oy < {oh}; ++oy) {{",
            f"        const int ty = oy + {ph} - {kh - 1}, iy0 = ty <= 0 ? 0 : (ty + {sh - 1}) / {sh};",
            f"        const int iy1 = (oy + {ph}) / {sh} < {h - 1} ? (oy + {ph}) / {sh} : {h - 1};",
            f"        for (int ox = 0; ox < {ow}; ++ox) {{",
            f"            const int tx = ox + {pw} - {kw - 1}, ix0 = tx <= 0 ? 0 : (tx + {sw - 1}) / {sw};",
            f"            const int ix1 = (ox + {pw}) / {sw} < {wd - 1} ? (ox + {pw}) / {sw} : {wd - 1};",
            f"            for (int o = 0; o < {channels}; ++o) {{",
            f"                {init}",
            "                for (int iy = iy0; iy <= iy1; ++iy) {",
            f"                    const int ky = oy + {ph} - iy * {sh};",
            "                    for (int ix = ix0; ix <= ix1; ++ix) {",
            f"                        const int kx = ox + {pw} - ix * {sw};",
            f"                        for (int ic = 0; ic < {depth}; ++ic)",
            f"                            {term.format(x=xv, w=wv)}",
            "                    }",
            "                }",
            f"                {em.var(node.name)}[((long)oy * {ow} + ox) * {channels} + o] = "
            f"{store(em.at(b_name, 'o'))};",
            "            }",
            "        }",
            "    }",
            "}"]


def _acc_bound(call: BoundCall) -> tuple[int, int]:
    """The largest |acc| (bias included) over the output, at the input's plus the filter's scale: per channel the
    heaviest stride phase's sum of |w| times the input's largest |int|, plus |bias|."""
    w = np.abs(np.asarray(call.consts[1], np.int64))
    (sh, sw) = (int(v) for v in call.attrs["stride"])
    phases = [w[:, py::sh, px::sw, :].reshape(w.shape[0], -1).sum(axis=1) for py in range(sh) for px in range(sw)]
    heaviest = np.max(np.stack(phases), axis=0) if phases else np.zeros(w.shape[0], np.int64)
    bias = np.abs(np.asarray(call.consts[2], np.int64))
    return int(np.max(heaviest * int(call.bounds[0]) + bias, initial=0)), call.scales[0] + call.scales[1]


def _c_pow2(em, node) -> list[str]:
    x, w = em.graph.type(node.inputs[0]), em.graph.type(node.inputs[1])
    bits = node.type.dtype.bits
    shift = layer_shift(x, w, node.type)
    lo, hi = activation_bounds(node.attrs.get("activation", "none"), node.type.dtype)

    def store(bias: str) -> str:
        total = f"(acc + (int32_t){bias})"
        shifted = f"((int32_t)({total} + INT32_C({1 << (shift - 1)})) >> {shift})" if shift else total
        return (f"(int{bits}_t)({shifted} < {lo} ? {lo} : ({shifted} > {hi} ? {hi} : {shifted}))")

    return _loops(em, node, "int32_t acc = 0;", "acc += (int32_t){x} * (int32_t){w};", store)


def _c_fixed(em, node) -> list[str]:
    x_name, w_name, _ = node.inputs
    x, w = em.graph.type(x_name), em.graph.type(w_name)
    if x.dtype.is_fixed:
        return _c_pow2(em, node)
    mult, shift = requant_params(em, node, w.shape[0], w)
    wide = x.dtype.bits == 16
    acc = "int64_t" if wide else "int32_t"
    return _loops(em, node, f"{acc} acc = 0;",
                  f"acc += ({acc})(((int32_t){{x}} - {x.dtype.zero_point}) * (int32_t){{w}});",
                  lambda bias: requantised_store(em, node, f"acc + ({acc}){bias}", mult, shift, wide))


def _c_float(em, node) -> list[str]:
    activation = float_activation(em, node.attrs.get("activation", "none"))
    return _loops(em, node, "float acc = 0.0f;", "acc += {x} * {w};",
                  lambda bias: f"{activation}(acc + {bias})" if activation else f"acc + {bias}")


register_op(OpDef(
    "transpose_conv2d", 3, _infer, lambda xs, a: _real(np.asarray(xs[0]), xs[1], xs[2], a),
    {"stride": "ints", "pad": "ints", "out_size": "ints", "activation": "str?"},
    "TFLite's TRANSPOSE_CONV: each input position's products spread over a stride-spaced window of the output (NHWC, "
    "OHWI filter, bias); quantised: TFLite Micro's int8 kernel (int32 sums, per-channel requantisation); fixed "
    "point: int32 sums shifted to the result's scale",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _real(ins[0], ins[1], ins[2], attrs) if batched[0] and not any(
        batched[1:]) else None,
    fixed=_fixed, c={"fixed": _c_fixed, "float": _c_float}, acc_bound=_acc_bound, output_shift=layer_output_shift,
    unsupported={"interval": NO_RANGES}))


def _padding(size: int, stride: int, kernel: int, same: bool) -> int:
    """ComputePaddingHeightWidth's padding on one axis, from the transposed convolution's output size."""
    out = (size + stride - 1) // stride if same else (size - kernel + stride) // stride
    return max(0, (out - 1) * stride + kernel - size) // 2


@tflite_builtin("TRANSPOSE_CONV", 67, options=TRANSPOSE_CONV_OPTIONS, options_required=True, inputs=(3, 4))
def lower_tflite(low, options, ins, outs) -> None:
    out = low.tensors[outs[0]]
    if low.tensors[ins[0]].data is not None:
        shape = low.ints(ins[0], "TRANSPOSE_CONV", "output_shape").ravel().tolist()
        need(shape == list(out.shape), f"TRANSPOSE_CONV: output_shape {shape}, the output declares {list(out.shape)}")
    else:  # a computed or input output_shape: TFLite Micro never reads it (the output tensor's shape is the shape)
        shape = list(out.shape)
    w, x = low.tensors[ins[1]], low.tensors[ins[2]]
    need(len(w.shape) == 4 and len(x.shape) == 4 and len(shape) == 4,
         f"TRANSPOSE_CONV: filter {list(w.shape)}, input {list(x.shape)}, output {shape}: 4 dimensions each")
    padding = options.scalar(0, "b", 0, "padding")
    need(padding in (0, 1), f"TRANSPOSE_CONV: padding {padding}")
    stride = [options.scalar(2, "i", 0, "stride_h"), options.scalar(1, "i", 0, "stride_w")]
    need(min(stride) >= 1, f"TRANSPOSE_CONV: stride {stride} (an absent stride is the schema's 0)")
    wide = low.check_bias_type(options, 4, "TRANSPOSE_CONV", ins[2]) == 64
    pad = [_padding(shape[1], stride[0], w.shape[1], padding == 0), _padding(shape[2], stride[1], w.shape[2],
                                                                             padding == 0)]
    attrs = {"stride": stride, "pad": pad, "out_size": shape[1:3], "activation": low.activation(options, 3,
                                                                                               "TRANSPOSE_CONV")}
    bias = ins[3] if len(ins) > 3 else -1
    real = x.type_name == "float32"
    if x.type_name == "int16":  # TFLite Micro's int16 kernel reads an int16 bias widened, any other as int64
        need(bias < 0 or low.tensors[bias].type_name in ("int16", "int64"),
             f"TRANSPOSE_CONV: a 16x8 layer's bias is int16 or int64 (TFLite Micro reads it as int64), not "
             f"{low.tensors[bias].type_name if bias >= 0 else None}")
        wide = True
    low.add("transpose_conv2d", [low.value(ins[2]), low.value(ins[1], "OHWI", 0),
                                 low.bias(bias, w.shape[0], low.name_of(out), real, bits=64 if wide else 32)],
            attrs, out)
    if w.data is not None and not real:
        low.check_accumulator(ins[2], bias, w.data.reshape(w.shape[0], -1), out, 64 if wide else 32)
