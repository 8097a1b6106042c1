"""C primitives of TFLite's integer arithmetic (gemmlowp's and TFLite's, ``tflite_arith`` written out in C), for
the portable C of the network ops: each a ``static inline`` function emitted once per model. They are written
against the C emitter's interface (``em.sym``, ``em.helpers``, ``em.prefix``) without importing it, so that an
op's module can hold its C beside its semantics."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.tflite_arith import (
    EXP_BARREL,
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    SOFTMAX_DIFF_INTEGER_BITS,
    activation_range,
    channel_multipliers,
)
from tinycc_ml.ir.ops.windows import channel_scales


def c_helper(em, name: str, text: str) -> str:
    """A ``static inline`` function emitted once per model (``em.helpers``); ``@`` in ``text`` is the prefix."""
    symbol = em.sym(name)
    if symbol not in em.helpers:
        em.helpers[symbol] = text.replace("@", em.prefix + "_")
    return symbol


def wrap_add(em) -> str:
    """int32 addition wrapping as gemmlowp's raw additions (two's complement)."""
    return c_helper(em, "tfl_add", """\
static inline int32_t @tfl_add(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}
""")


def high_mul(em) -> str:
    """gemmlowp's SaturatingRoundingDoublingHighMul (the product in int64)."""
    return c_helper(em, "tfl_high_mul", """\
static inline int32_t @tfl_high_mul(int32_t a, int32_t b)
{
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30);
    if (a == b && a == INT32_MIN)
        return INT32_MAX;
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}
""")


def divide_pot(em) -> str:
    """gemmlowp's RoundingDivideByPOT (0 <= exponent <= 31): halves away from zero."""
    return c_helper(em, "tfl_divide_pot", """\
static inline int32_t @tfl_divide_pot(int32_t x, int exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}
""")


def requantise(em) -> str:
    """TFLite's MultiplyByQuantizedMultiplier: x * multiplier * 2^(shift - 31), rounded twice."""
    high, div = high_mul(em), divide_pot(em)
    return c_helper(em, "tfl_requantise", f"""\
static inline int32_t @tfl_requantise(int32_t x, int32_t multiplier, int shift)
{{
    const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    return {div}({high}((int32_t)((uint32_t)x << left), multiplier), right);
}}
""")


def requantise64(em) -> str:
    """TFLite's MultiplyByQuantizedMultiplier of an int64 sum (16x8 layers): the multiplier rounded to 16 bits,
    one rounding shift, the result cut to int32 as TFLite's conversion does."""
    return c_helper(em, "tfl_requantise64", """\
static inline int32_t @tfl_requantise64(int64_t x, int32_t multiplier, int shift)
{
    const int64_t reduced = multiplier < 0x7FFF0000L ? ((int64_t)multiplier + ((int64_t)1 << 15)) >> 16 : 0x7FFF;
    const int total = 15 - shift;
    return (int32_t)(uint32_t)(uint64_t)((x * reduced + ((int64_t)1 << (total - 1))) >> total);
}
""")


def clamp_to(em, bits: int) -> str:
    """The fused activation's clamp of a requantised value to the output's int8 (``bits`` 8) or int16 range."""
    return clamp8(em) if bits == 8 else clamp16(em)


def clamp16(em) -> str:
    """The fused activation's clamp of a requantised value to the output's int16 range."""
    return c_helper(em, "tfl_clamp16", """\
static inline int16_t @tfl_clamp16(int32_t v, int32_t lo, int32_t hi)
{
    return (int16_t)(v < lo ? lo : (v > hi ? hi : v));
}
""")


def clamp8(em) -> str:
    """The fused activation's clamp of a requantised value to the output's int8 range."""
    return c_helper(em, "tfl_clamp", """\
static inline int8_t @tfl_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}
""")


def multiply_pot(em) -> str:
    """gemmlowp's SaturatingRoundingMultiplyByPOT (a saturating left shift, or RoundingDivideByPOT)."""
    div = divide_pot(em)
    return c_helper(em, "tfl_multiply_pot", f"""\
static inline int32_t @tfl_multiply_pot(int32_t x, int exponent)
{{
    int32_t threshold;
    if (exponent <= 0)
        return {div}(x, -exponent);
    threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold)
        return INT32_MAX;
    if (x < -threshold)
        return INT32_MIN;
    return (int32_t)((uint32_t)x << exponent);
}}
""")


def one_over_one_plus(em) -> str:
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out)."""
    add, high, mpot = wrap_add(em), high_mul(em), multiply_pot(em)
    return c_helper(em, "tfl_one_over_one_plus", f"""\
static int32_t @tfl_one_over_one_plus(int32_t a)
{{
    /* 1 / (1 + a) for a in [0, 1), Q0.31 in and out: Newton-Raphson, three steps */
    const int64_t total = (int64_t)a + INT32_MAX;
    const int32_t half_denominator = (int32_t)((total + (total >= 0 ? 1 : -1)) / 2);
    int32_t x = {add}(1515870810, {high}(half_denominator, -1010580540));
    int i;
    for (i = 0; i < 3; ++i) {{
        const int32_t one_minus = {add}((int32_t)1 << 29, (int32_t)(0u - (uint32_t){high}(half_denominator, x)));
        x = {add}(x, {mpot}({high}(x, one_minus), 2));
    }}
    return {mpot}(x, 1);
}}
""")


def softmax_helpers(em) -> tuple[str, str]:
    """gemmlowp's exp_on_negative_values (Q5.26 in, Q0.31 out) and TFLite's GetReciprocal: their symbols."""
    return exp_negative(em), reciprocal(em)


def exp_negative(em) -> str:
    """gemmlowp's exp_on_negative_values, Q5.26 in, Q0.31 out."""
    add, high, div, mpot = wrap_add(em), high_mul(em), divide_pot(em), multiply_pot(em)
    quarter = c_helper(em, "tfl_exp_quarter", f"""\
static int32_t @tfl_exp_quarter(int32_t a)
{{
    /* exp(a) for a in [-1/4, 0), Q0.31: a Taylor expansion around -1/8 */
    const int32_t constant_term = 1895147668, one_third = 715827883;
    const int32_t x = {add}(a, (int32_t)1 << 28);
    const int32_t x2 = {high}(x, x), x3 = {high}(x2, x), x4 = {high}(x2, x2);
    const int32_t x4_over_4 = {div}(x4, 2);
    const int32_t poly = {div}({add}({high}({add}(x4_over_4, x3), one_third), x2), 1);
    return {add}(constant_term, {high}(constant_term, {add}(x, poly)));
}}
""")
    integer_bits = SOFTMAX_DIFF_INTEGER_BITS
    fractional = 31 - integer_bits
    barrel = "\n".join(f"    if (remainder & ((int32_t)1 << {fractional + e}))\n        result = {high}(result, {m});"
                       for e, m in EXP_BARREL if integer_bits > e)
    exp = c_helper(em, "tfl_exp_negative", f"""\
static int32_t @tfl_exp_negative(int32_t a)
{{
    /* exp(a) for a <= 0 in Q{integer_bits}.{fractional}, Q0.31 out */
    const int32_t one_quarter = (int32_t)1 << {fractional - 2};
    const int32_t a_mod_quarter_minus_one_quarter = {add}(a & (one_quarter - 1), -one_quarter);
    const int32_t remainder = {add}(a_mod_quarter_minus_one_quarter, (int32_t)(0u - (uint32_t)a));
    int32_t result = {quarter}({mpot}(a_mod_quarter_minus_one_quarter, {integer_bits}));
{barrel}
    return a == 0 ? INT32_MAX : result;
}}
""")
    return exp


def reciprocal(em) -> str:
    """TFLite's GetReciprocal of a Q12 sum."""
    one_over = one_over_one_plus(em)
    return c_helper(em, "tfl_reciprocal", f"""\
static int32_t @tfl_reciprocal(int32_t x, int *bits_over_unit)
{{
    /* TFLite's GetReciprocal: 1 / x of x (> 0) scaled into [1, 2), and how many bits x has above one */
    uint32_t u = (uint32_t)x;
    int headroom_plus_one = 0;
    while (headroom_plus_one < 31 && !(u & 0x80000000u)) {{
        u <<= 1;
        ++headroom_plus_one;
    }}
    *bits_over_unit = {SOFTMAX_ACCUMULATION_INTEGER_BITS} - headroom_plus_one;
    return {one_over}((int32_t)(u - 0x80000000u));
}}
""")


def float_activation(em, activation: str) -> str | None:
    """TFLite's ActivationFunctionWithMinMax on a float (std::max then std::min: a NaN passes through), as a
    helper's symbol; None for no activation."""
    if activation == "none":
        return None
    top = "\n    v = v > 6.0f ? 6.0f : v;" if activation == "relu6" else ""
    return c_helper(em, f"tfl_{activation}_f", f"""\
static inline float @tfl_{activation}_f(float v)
{{
    v = v < 0.0f ? 0.0f : v;{top}
    return v;
}}
""")


# ---------------------------------------------------------------- a layer's requantisation (conv-like ops' C)

def requant_params(em, node, channels: int, filter_type) -> tuple[str, str]:
    """The C expressions of output channel ``o``'s multiplier and shift: literals when every channel shares
    them, else two constant arrays."""
    x = em.graph.type(node.inputs[0])
    mult, shift = channel_multipliers(x.dtype.qscales[0], channel_scales(filter_type, channels),
                                      node.type.dtype.qscales[0])
    if len(set(mult.tolist())) == 1 and len(set(shift.tolist())) == 1:
        return str(int(mult[0])), str(int(shift[0]))
    m = em.add_const_array(em.sym(f"{node.name}_multiplier"), mult.astype(np.int32), "int32_t",
                           f"%{node.name}: each output channel's requantisation multiplier (Q31)")
    s = em.add_const_array(em.sym(f"{node.name}_shift"), shift.astype(np.int8), "int8_t",
                           f"%{node.name}: each output channel's requantisation shift (left when positive)")
    rd = em.target.read_const
    return rd(m, "o", "int32_t"), f"(int){rd(s, 'o', 'int8_t')}"


def requantised_store(em, node, acc: str, mult: str, shift: str, wide: bool | None = None) -> str:
    """The requantised, offset and clamped ``acc`` of a layer (input, filter, bias) as C (an int64 acc: a 16x8
    layer's; ``wide`` None: as ``wide_accumulator`` says)."""
    out = node.type.dtype
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    rq = requantise64(em) if (wide_accumulator(em, node) if wide is None else wide) else requantise(em)
    return f"{clamp_to(em, out.bits)}({rq}({acc}, {mult}, {shift}) + {out.zero_point}, {lo}, {hi})"


def wide_accumulator(em, node) -> bool:
    """Whether a layer sums in int64: a 16x8 layer with an int64 bias (else int32, TFLite's AccumScalar)."""
    return em.graph.type(node.inputs[2]).dtype.bits == 64


def accumulator(em, node) -> str:
    return "int64_t" if wide_accumulator(em, node) else "int32_t"
