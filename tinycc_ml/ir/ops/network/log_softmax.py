"""LOG_SOFTMAX along the last axis: float32 and TFLite Micro's int8 kernel.

Float: x - max - log(sum exp(x - max)) (ONNX's LogSoftmax, nn.LogSoftmax, TFLite's reference). int8 (TFLite's
LogSoftmaxQuantized): the output is fixed at scale 16/256, zero point 127; each difference from the row's maximum
scaled to Q5.26 (PreprocessLogSoftmaxScalingExp's multiplier), exp by gemmlowp's exp_on_negative_values rescaled
to Q12 and summed (differences below diff_min left out), log of the sum in Q5.26 (TFLite's
log_x_for_x_greater_than_or_equal_to_1), then each difference above max(diff_min - 1, the log's reverse scaling)
gives (diff - log) rounded to Q4 + 127, saturated; the rest -128. The project's own fixed point has no form (no
proven error bound for a log of a sum): refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import (
    c_helper,
    divide_pot,
    exp_negative,
    high_mul,
    multiply_pot,
    one_over_one_plus,
    requantise,
    wrap_add,
)
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import last_axis_rows
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    INT32_MIN,
    LOG_2,
    LOG_ALPHAS,
    ONE_QUARTER,
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    SOFTMAX_DIFF_INTEGER_BITS,
    SQRT_HALF,
    SQRT_SQRT_HALF,
    exp_on_negative_values,
    log_x_for_x_greater_than_or_equal_to_1,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    softmax_parameters,
    wrap32,
)
from tinycc_ml.ir.ops.windows import network_result

OUTPUT_SCALE, OUTPUT_ZERO_POINT = 16 / 256, 127  # TFLite's Prepare requires them
OUTPUT_INTEGER_BITS = 4
FIXED_REFUSAL = ("log_softmax has no form in the project's fixed point (no proven error bound for a log of a sum of "
                 "exps): compile the network at float or TFLite's int8; export the logits: the argmax is the same")


def parameters(input_scale: float) -> tuple[int, int, int, int, int]:
    """(input multiplier, its left shift, diff_min, reverse scaling divisor, its shift) as Prepare computes them."""
    multiplier, left_shift, diff_min = softmax_parameters(1.0, input_scale)
    divisor, divisor_shift = quantize_multiplier((1 << (31 - left_shift)) / float(multiplier))
    return multiplier, left_shift, diff_min, divisor, divisor_shift


def _infer(ts, attrs, declared):
    x = ts[0]
    need(not x.dtype.is_fixed, FIXED_REFUSAL)
    if x.dtype.is_quantised:
        need(x.dtype.bits == 8, f"TFLite Micro's LOG_SOFTMAX takes float32 and int8, got {x.dtype}")
        need(declared is not None and declared.dtype.is_quantised
             and np.float32(declared.dtype.qscales[0]) == np.float32(OUTPUT_SCALE)
             and declared.dtype.zero_point == OUTPUT_ZERO_POINT,
             f"an int8 LOG_SOFTMAX's output must have scale 16/256 and zero point 127 (TFLite's Prepare), got "
             f"{declared}")
    else:
        need(x.dtype.is_float, f"log_softmax takes float32 or int8, got {x.dtype}")
    return network_result(x, declared, x.shape, x.layout)


def _evaluate(xs, attrs):
    z = xs[0] - np.max(xs[0], axis=-1, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def _fixed(call):
    x = call.in_types[0].dtype
    multiplier, left_shift, diff_min, divisor, divisor_shift = parameters(float(x.qscales[0]))
    q = np.asarray(call.ins[0], dtype=np.int64)
    diff = q - q.max(axis=-1, keepdims=True)
    scaled = multiply_by_quantized_multiplier(diff, multiplier, left_shift)
    terms = rounding_divide_by_pot(exp_on_negative_values(scaled), SOFTMAX_ACCUMULATION_INTEGER_BITS)
    total = wrap32(np.sum(np.where(diff >= diff_min, terms, 0), axis=-1, keepdims=True))
    log_sum = log_x_for_x_greater_than_or_equal_to_1(total, SOFTMAX_ACCUMULATION_INTEGER_BITS,
                                                     SOFTMAX_DIFF_INTEGER_BITS)
    adjusted = np.maximum(diff_min - 1, multiply_by_quantized_multiplier(wrap32(log_sum + INT32_MIN), divisor,
                                                                         divisor_shift))
    shift = 31 - SOFTMAX_DIFF_INTEGER_BITS - OUTPUT_INTEGER_BITS
    out = np.clip(rounding_divide_by_pot(wrap32(scaled - log_sum), shift) + 127, -128, 127)
    return np.where(diff > adjusted, out, -128)


def _c_float(em, node) -> list[str]:
    return last_axis_rows(em, node, "float", ["float largest = in[0], sum = 0.0f;",
                            "for (int i = 1; i < {depth}; ++i)",
                            "    if (in[i] > largest) largest = in[i];",
                            "for (int i = 0; i < {depth}; ++i)",
                            "    sum += expf(in[i] - largest);",
                            "sum = logf(sum);",
                            "for (int i = 0; i < {depth}; ++i)",
                            "    out[i] = in[i] - largest - sum;"])


def _c_log(em) -> str:
    """log_x_for_x_greater_than_or_equal_to_1<5>(Q12) in C, as the Python above."""
    add, high, div, mpot = wrap_add(em), high_mul(em), divide_pot(em), multiply_pot(em)
    alpha_n, alpha_d, alpha_i, alpha_f = LOG_ALPHAS
    accum = SOFTMAX_DIFF_INTEGER_BITS + 1
    clz = c_helper(em, "tfl_clz", """\
static int @tfl_clz(uint32_t u)
{
    int n = 0;
    while (n < 32 && !(u & 0x80000000u)) {
        u <<= 1;
        ++n;
    }
    return n;
}
""")
    saturate = c_helper(em, "tfl_saturating_add", """\
static int32_t @tfl_saturating_add(int32_t a, int32_t b)
{
    const int64_t sum = (int64_t)a + b;
    return (int32_t)(sum > INT32_MAX ? INT32_MAX : (sum < INT32_MIN ? INT32_MIN : sum));
}
""")
    one_over = one_over_one_plus(em)
    return c_helper(em, "tfl_log_q12", f"""\
static int32_t @tfl_log_q12(int32_t z_a)
{{
    /* log(x) for x >= 1: Q{SOFTMAX_ACCUMULATION_INTEGER_BITS} in, Q{SOFTMAX_DIFF_INTEGER_BITS} out */
    const int32_t shifted_quarter = {div}({ONE_QUARTER}, {accum});
    const int headroom_a = {clz}((uint32_t)z_a);
    const int32_t r_a = {mpot}({high}({mpot}(z_a, headroom_a - 1), {SQRT_HALF}), 1);
    const int32_t pow_a = {saturate}({mpot}({SOFTMAX_ACCUMULATION_INTEGER_BITS} - headroom_a, {31 - accum}),
                                     shifted_quarter);
    const int headroom_b = {clz}((uint32_t){high}(z_a, {SQRT_HALF})) - 1;
    const int32_t r_b = {mpot}(z_a, headroom_b);
    const int32_t pow_b = {saturate}({mpot}({SOFTMAX_ACCUMULATION_INTEGER_BITS} - headroom_b, {31 - accum}),
                                     -shifted_quarter);
    const int32_t r = r_a < r_b ? r_a : r_b, z_pow = pow_a > pow_b ? pow_a : pow_b;
    const int64_t half = (int64_t)r + {SQRT_SQRT_HALF};
    const int32_t p = (int32_t)((half + (half >= 0 ? 1 : -1)) / 2);
    const int32_t q = {add}({add}(r, -{SQRT_SQRT_HALF}), {add}(r, -{SQRT_SQRT_HALF}));
    const int32_t common_sq = {high}(q, q);
    const int32_t num = {add}({high}(q, r), {high}({high}(q, common_sq), {alpha_n}));
    const int32_t denominator_minus_one = {add}({high}(p, {add}({add}({alpha_i}, q), {high}({alpha_d}, common_sq))),
                                                {high}({alpha_f}, q));
    const int32_t reciprocal = {one_over}(denominator_minus_one);
    const int32_t total = {add}({high}(z_pow, {LOG_2}), {high}({div}(num, {accum}), reciprocal));
    return {mpot}(total, {accum - SOFTMAX_DIFF_INTEGER_BITS});
}}
""")


def _c_int8(em, node) -> list[str]:
    exp = exp_negative(em)
    log, req, div = _c_log(em), requantise(em), divide_pot(em)
    multiplier, left_shift, diff_min, divisor, divisor_shift = parameters(float(em.graph.type(
        node.inputs[0]).dtype.qscales[0]))
    shift = 31 - SOFTMAX_DIFF_INTEGER_BITS - OUTPUT_INTEGER_BITS
    return last_axis_rows(em, node, "int8_t", [
        "int32_t largest = in[0], total = 0, log_sum, adjusted;",
        "for (int i = 1; i < {depth}; ++i)",
        "    if (in[i] > largest) largest = in[i];",
        "for (int i = 0; i < {depth}; ++i) {{",
        "    const int32_t diff = in[i] - largest;",
        f"    if (diff >= {diff_min})",
        f"        total = (int32_t)((uint32_t)total + (uint32_t){div}({exp}({req}(diff, {multiplier}, {left_shift})), "
        f"{SOFTMAX_ACCUMULATION_INTEGER_BITS}));",
        "}}",
        f"log_sum = {log}(total);",
        f"adjusted = {req}((int32_t)((uint32_t)log_sum + 0x80000000u), {divisor}, {divisor_shift});",
        f"if (adjusted < {diff_min - 1}) adjusted = {diff_min - 1};",
        "for (int i = 0; i < {depth}; ++i) {{",
        "    const int32_t diff = in[i] - largest;",
        "    int32_t v = -128;",
        "    if (diff > adjusted) {{",
        f"        v = {div}((int32_t)((uint32_t){req}(diff, {multiplier}, {left_shift}) - (uint32_t)log_sum), {shift})"
        " + 127;",
        "        v = v > 127 ? 127 : (v < -128 ? -128 : v);",
        "    }}",
        "    out[i] = (int8_t)v;",
        "}}"])


register_op(OpDef(
    "log_softmax", 1, _infer, _evaluate, {},
    "TFLite's LOG_SOFTMAX along the last axis: float32 (x - max - log(sum exp(x - max))) and TFLite Micro's int8 "
    "kernel (output scale 16/256, zero point 127)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _evaluate(ins, attrs),
    fixed=_fixed, c={"float": _c_float, "fixed": _c_int8},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("LOG_SOFTMAX", 50)
def lower_tflite(low, options, ins, outs) -> None:
    x = low.tensors[ins[0]]
    need(x.type_name in ("float32", "int8"), f"LOG_SOFTMAX: {x.type_name} tensors (TFLite Micro's kernel takes "
                                             "float32 and int8)")
    low.add("log_softmax", [low.value(ins[0])], {}, low.tensors[outs[0]])
