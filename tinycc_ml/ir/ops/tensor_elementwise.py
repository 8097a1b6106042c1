"""Element-wise and per-row ops on tensors, as TFLite defines them: ADD (two tensors of one shape, each
with its own quantisation), SOFTMAX (along the last axis), RELU and RELU6 as operators of their own.

ADD's integer semantics (``reference_integer_ops::Add``; int16 the same with 15 bits): each input less its zero
point, shifted left 20 bits, rescaled by its multiplier (its scale over twice the larger input scale), summed, rescaled
to the output's scale, plus its zero point, clamped to the fused activation's range. SOFTMAX's:
``reference_ops::Softmax`` for int8 (gemmlowp's fixed-point exp and reciprocal; tflite_arith).

Fixed point (fx, the project's dialect): ADD rounds each operand right to the result's scale (no finer than either
operand's) and saturates their sum; RELU and RELU6 clamp the integers, their type kept; SOFTMAX has no fixed-point
form (a network's scores are its logits: export them without the softmax, the argmax is the same).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops import fixed_softmax
from tinycc_ml.ir.ops.arith import check32, rshift, rshift_bound, saturate
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.pow2_arith import check_shift, clamp_activation
from tinycc_ml.ir.ops.registry import BoundCall, FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    SOFTMAX_DIFF_INTEGER_BITS,
    activation_range,
    apply_activation,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
    softmax_int8,
)
from tinycc_ml.ir.ops.tflite_lut import softmax_int16
from tinycc_ml.ir.ops.windows import check_requantisation, element_lead, keeps_type, network_result, quantised_operand

ADD_LEFT_SHIFT = 20  # TFLite's int8 ADD: the inputs' headroom before rescaling
SOFTMAX_OUTPUT = (1 / 256, -128)  # TFLite's int8 softmax output: scale 1/256, zero point -128
MAX_INT16_SOFTMAX_DEPTH = 65536  # the int16 softmax's int32 sum of Q0.15 exps


def _infer_tensor_add(ts, attrs, declared):
    a, b = ts
    need(a.shape == b.shape, f"tensor_add adds tensors of one shape, got {a.shape} and {b.shape}")
    need(attrs.get("activation", "none") in ACTIVATIONS, f"unknown activation {attrs.get('activation')!r}")
    bits = a.dtype.bits if a.dtype.is_quantised else 8
    if a.dtype.is_quantised:
        need(bits in (8, 16), f"operands must be qi8 or qi16, got {a.dtype}")
        quantised_operand(a, "first operand", bits)
        quantised_operand(b, "second operand", bits)
    else:
        need(b.dtype.kind == a.dtype.kind and b.dtype.bits == a.dtype.bits, f"operands mix {a.dtype} and {b.dtype}")
    result = network_result(a, declared, a.shape, a.layout, bits)
    if a.dtype.is_fixed:
        for i, t in enumerate(ts):
            check_shift(t.dtype.scale - result.dtype.scale, f"operand {i + 1}")
    if a.dtype.is_quantised:
        twice_max = 2 * max(a.dtype.qscales[0], b.dtype.qscales[0])
        check_requantisation(twice_max / ((1 << add_left_shift(bits)) * result.dtype.qscales[0]), "sum")
    return result


def add_left_shift(bits: int) -> int:
    """TFLite's ADD headroom before rescaling: 20 bits for int8, 15 for int16."""
    return ADD_LEFT_SHIFT if bits == 8 else 15


def add_reals(scale_a: float, scale_b: float, scale_out: float, left_shift: int = ADD_LEFT_SHIFT) -> list[float]:
    """TFLite's ADD (and SUB) real multipliers, in double: each input's scale over twice the larger, and twice the
    larger over the output's scale shifted by the headroom."""
    twice_max = 2 * max(float(scale_a), float(scale_b))
    return [float(scale_a) / twice_max, float(scale_b) / twice_max, twice_max / ((1 << left_shift) * float(scale_out))]


def add_multipliers(scale_a: float, scale_b: float, scale_out: float,
                    left_shift: int = ADD_LEFT_SHIFT) -> list[tuple[int, int]]:
    """TFLite's ADD parameters: (multiplier, shift) of each input and of the sum."""
    return [quantize_multiplier(r) for r in add_reals(scale_a, scale_b, scale_out, left_shift)]


def add_shifts(call) -> list[int]:
    """The fixed-point ADD's right shift of each operand to the result's scale."""
    return [t.dtype.scale - call.type.dtype.scale for t in call.in_types]


def _fixed_tensor_add(call: FixedCall):
    if call.type.dtype.is_fixed:
        total = sum(rshift(v, k) for v, k in zip(call.ins, add_shifts(call)))
        return clamp_activation(saturate(total, call.type.dtype.bits), call.attrs.get("activation", "none"),
                                call.type.dtype)
    (ta, tb), out = call.in_types, call.type.dtype
    left_shift = add_left_shift(out.bits)
    (ma, sa), (mb, sb), (mo, so) = add_multipliers(ta.dtype.qscales[0], tb.dtype.qscales[0], out.qscales[0],
                                                   left_shift)
    a = multiply_by_quantized_multiplier((call.ins[0] - ta.dtype.zero_point) << left_shift, ma, sa)
    b = multiply_by_quantized_multiplier((call.ins[1] - tb.dtype.zero_point) << left_shift, mb, sb)
    total = multiply_by_quantized_multiplier(check32(a + b, call.where), mo, so) + out.zero_point
    lo, hi = activation_range(call.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    return np.clip(total, lo, hi)


def _bound_tensor_add(call: BoundCall) -> tuple[int, int]:
    """The sum of the two operands rounded to the result's scale."""
    return sum(rshift_bound(b, s - call.out_scale) for b, s in zip(call.bounds, call.scales)), call.out_scale


register_op(OpDef(
    "tensor_add", 2, _infer_tensor_add, lambda xs, a: apply_activation(xs[0] + xs[1], a.get("activation", "none")),
    {"activation": "str?"},
    "TFLite's ADD of two tensors of one shape and a fused activation; quantised: TFLite's int8 kernel (each "
    "input rescaled to a common scale, the sum rescaled to the output's)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: apply_activation(ins[0] + ins[1], attrs.get("activation",
                                                                                                  "none")),
    fixed=_fixed_tensor_add, acc_bound=_bound_tensor_add,
    alias=element_lead,
    unsupported={"interval": NO_RANGES}))


def _infer_softmax(ts, attrs, declared):
    (x,) = ts
    need(0 < float(attrs["beta"]) < float("inf"), f"beta must be positive and finite, got {attrs['beta']}")
    if x.dtype.is_fixed:  # the project's fixed point (ir/ops/fixed_softmax.py)
        result = network_result(x, declared, x.shape, x.layout)
        fixed_softmax.check(x, result, attrs)
        return result
    bits = x.dtype.bits if x.dtype.is_quantised else 8
    int16_out = (x.dtype.is_quantised and bits == 8 and declared is not None and declared.dtype.is_quantised
                 and declared.dtype.bits == 16)  # TFLite Micro's int8 -> int16 softmax
    result = network_result(x, declared, x.shape, x.layout, 16 if int16_out else bits)
    if x.dtype.is_quantised and bits == 16:  # TFLite's int16 softmax (Prepare's checks)
        quantised_operand(x, "input", 16, zero_point=False)
        # its input multiplier (scale x beta over 10/65535) as TFLite quantises it: a shift C can make
        check_requantisation(x.dtype.qscales[0] * float(attrs["beta"]) / (10.0 / 65535.0), "softmax input")
        need(result.dtype.zero_point == 0 and abs(result.dtype.qscales[0] - 1 / 32768) <= 0.001 / 32768,
             f"TFLite's int16 softmax gives scale 1/32768, zero point 0; the result declares {result.dtype}")
        need(x.shape[-1] <= MAX_INT16_SOFTMAX_DEPTH, f"an int16 softmax over {x.shape[-1]} values: TFLite's int32 "
                                                     f"sum of exps holds at most {MAX_INT16_SOFTMAX_DEPTH}")
    elif x.dtype.is_quantised:
        quantised_operand(x, "input", 8)
        # TFLite's PreprocessSoftmaxScaling takes beta x scale x 2^26 as a multiplier above 1 (it aborts otherwise)
        need(float(attrs["beta"]) * x.dtype.qscales[0] * (1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)) > 1.0,
             f"TFLite's int8 softmax needs beta x input scale x 2^{31 - SOFTMAX_DIFF_INTEGER_BITS} above 1; beta "
             f"{attrs['beta']} x scale {x.dtype.qscales[0]} is not")
        if int16_out:  # TFLite Micro's Prepare: scale 1/65536 (within 0.1%), zero point -32768
            need(result.dtype.zero_point == -32768 and abs(result.dtype.qscales[0] - 1 / 65536) <= 0.001 / 65536,
                 f"TFLite's int8 softmax with an int16 result gives scale 1/65536, zero point -32768; the result "
                 f"declares {result.dtype}")
        else:
            need((result.dtype.qscales[0], result.dtype.zero_point) == SOFTMAX_OUTPUT,
                 f"TFLite's int8 softmax gives scale 1/256, zero point -128; the result declares {result.dtype}")
    return result


def _fixed_softmax(call: FixedCall):
    x = call.in_types[0].dtype
    if x.is_fixed:
        return fixed_softmax.softmax(call.ins[0], x.scale, x.bits)
    if x.bits == 16:
        return softmax_int16(call.ins[0], float(call.attrs["beta"]), x.qscales[0])
    return softmax_int8(call.ins[0], float(call.attrs["beta"]), x.qscales[0], call.type.dtype.bits)


def _float_softmax(xs, attrs):
    z = float(attrs["beta"]) * (xs[0] - np.max(xs[0], axis=-1, keepdims=True))
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


register_op(OpDef(
    "softmax", 1, _infer_softmax, _float_softmax, {"beta": "float"},
    "TFLite's SOFTMAX along the last axis, exp(beta x) normalised; quantised: TFLite's int8 algorithm "
    "(gemmlowp fixed-point exp and reciprocal), the result at scale 1/256, zero point -128 (or int16: 1/65536, "
    "-32768); int16: its table "
    "algorithm (exp and 1 / (1 + x) by 513-entry tables), the result at scale 1/32768, zero point 0; fixed point: "
    "exps by an interpolated table, their int32 sum, rounded quotients (ir/ops/fixed_softmax.py)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _float_softmax(ins, attrs),
    fixed=_fixed_softmax,
    unsupported={"interval": NO_RANGES, "acc_bound": "its int8 form is TFLite's (no power-of-two scale choice)"}))


# ---------------------------------------------------------------- relu and relu6 (standalone)

def _infer_activation(name: str):
    def infer(ts, attrs, declared):
        (x,) = ts
        bits = x.dtype.bits if x.dtype.is_quantised else 8
        result = network_result(x, declared, x.shape, x.layout, bits)
        keeps_type(x, result, name)
        if x.dtype.is_quantised:
            need(bits in (8, 16), f"input must be qi8 or qi16, got {x.dtype}")
            quantised_operand(x, "input", bits, zero_point=bits == 8 or name == "relu6")
            if bits == 16 and name == "relu":
                need(result.dtype.zero_point == 0, f"TFLite's int16 relu needs zero points 0, got {result.dtype}")
            if name == "relu6":  # TFLite's int8 RELU6 clamps the input's integers: no requantisation
                need(result.dtype == x.dtype, f"TFLite's int8 relu6 keeps the input's quantisation {x.dtype}, "
                                              f"the result declares {result.dtype}")
            else:
                check_requantisation(relu_multiplier_real(x.dtype.qscales[0], result.dtype.qscales[0]), "relu")
        return result
    return infer


def relu_multiplier_real(input_scale: float, output_scale: float) -> float:
    """TFLite's RELU multiplier: the scales divided in float32 (CalculateReluOpData)."""
    with np.errstate(over="ignore"):  # inf for scales far apart: the type rule refuses it
        return float(np.float32(input_scale) / np.float32(output_scale))


def relu_parameters(in_dtype, out_dtype) -> tuple[int, int, int]:
    """(multiplier, shift, lowest output) of TFLite's int8 (int16) RELU."""
    multiplier, shift = quantize_multiplier(relu_multiplier_real(in_dtype.qscales[0], out_dtype.qscales[0]))
    return multiplier, shift, max(out_dtype.integer_range[0], out_dtype.zero_point)


def relu6_bounds(dtype) -> tuple[int, int]:
    """TFLite's int8 (int16) RELU6 clamp: the zero point, and 6 quantised (float32 division, rounded half away)."""
    lo, hi = dtype.integer_range
    with np.errstate(over="ignore"):
        steps = float(np.float32(6.0) / np.float32(dtype.qscales[0]))
    if not np.isfinite(steps):  # a denormal scale: 6 is beyond float32, so beyond the integers
        return dtype.zero_point, hi
    return dtype.zero_point, min(hi, max(lo, dtype.zero_point + round_half_away(steps)))


def _fixed_relu(call: FixedCall):
    if call.type.dtype.is_fixed:
        return clamp_activation(call.ins[0], "relu", call.type.dtype)
    x, out = call.in_types[0].dtype, call.type.dtype
    multiplier, shift, lowest = relu_parameters(x, out)
    scaled = multiply_by_quantized_multiplier(call.ins[0] - x.zero_point, multiplier, shift) + out.zero_point
    return np.clip(scaled, lowest, out.integer_range[1])


def _fixed_relu6(call: FixedCall):
    if call.type.dtype.is_fixed:
        return clamp_activation(call.ins[0], "relu6", call.type.dtype)
    lower, upper = relu6_bounds(call.in_types[0].dtype)
    return np.clip(call.ins[0], lower, upper)


for _name, _fixed in (("relu", _fixed_relu), ("relu6", _fixed_relu6)):
    register_op(OpDef(
        _name, 1, _infer_activation(_name), lambda xs, a, _n=_name: apply_activation(xs[0], _n), {},
        f"TFLite's {_name.upper()} as an operator of its own; quantised: TFLite's int8 kernel ("
        + ("the input less its zero point requantised to the output's scale, clamped from the output's zero point)"
           if _name == "relu" else "the input's integers clamped to its zero point and 6 quantised)"),
        evaluate_rows=lambda ins, batched, attrs, n, rank, _n=_name: apply_activation(ins[0], _n),
        fixed=_fixed, alias=element_lead,
        unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))
