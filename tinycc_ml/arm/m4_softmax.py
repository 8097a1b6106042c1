"""Cortex-M4 / M33 kernel for TFLite's int8 SOFTMAX (output scale 1/256, zero point -128), bit for bit the shared
C's (codegen/c_network.py) and so tflite-micro's.

An int8 row's differences from its largest value d = x - max lie in [-255, 0], so gemmlowp's exp of the rescaled
difference, exp_on_negative_values(SRDHM(d 2^left, multiplier)) in Q0.31, takes at most 256 values per layer:
they are computed at compile time (``tflite_arith``'s exact steps) into one table of 256 words (0 where d <
diff_min, which TFLite leaves out of the sum and outputs as -128: both follow from the 0), shared by the layers
of one input scale and beta. Per row: the largest byte (SSUB8 / SEL on words, then the 4 lanes), the sum of
RoundingDivideByPOT(exp, 12) (for exp >= 0: (exp + 2^11) >> 12, unsigned), TFLite's GetReciprocal (the shared
C's helper, once a row), then per element SaturatingRoundingDoublingHighMul(scale, exp) as one UMLAL of
nonnegative words and RoundingDivideByPOT(h, bits + 23) as (h + 2^(e-1)) >> e, less 128, SSAT to int8.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_elementwise import select_helper
from tinycc_ml.arm.m4_network import simd_helpers
from tinycc_ml.target import (
    MAX_SOFTMAX_DEPTH,
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    Node,
    exp_on_negative_values,
    reciprocal,
    saturating_rounding_doubling_high_mul,
    softmax_parameters,
    wrap32,
)


def exp_table(multiplier: int, left_shift: int, diff_min: int) -> np.ndarray:
    """exp_on_negative_values of each rescaled difference d = -255..0 (index d + 255), Q0.31; 0 below diff_min."""
    d = np.arange(-255, 1, dtype=np.int64)
    exps = exp_on_negative_values(saturating_rounding_doubling_high_mul(wrap32(d << left_shift), multiplier))
    return np.where(d >= diff_min, exps, 0).astype(np.int64)


def softmax_claims(em, node: Node) -> bool:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    return (x.dtype.is_quantised and x.dtype.bits == 8 and node.type.dtype.bits == 8
            and x.shape[-1] <= MAX_SOFTMAX_DEPTH and em.graph.op(x_name) not in ("const", "sparse_const")
            and x_name not in em.inline_values)


def softmax(em, node: Node) -> list[str] | None:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    depth = x.shape[-1]
    multiplier, left_shift, diff_min = softmax_parameters(float(node.attrs["beta"]), x.dtype.qscales[0])
    table = exp_table(multiplier, left_shift, diff_min)
    assert table.min() >= 0 and table.max() < 2**31  # the unsigned forms below rely on it
    exps = em.add_const_array(em.sym(f"m4_softmax_exp_{multiplier}_{left_shift}"), table.astype(np.int32), "int32_t",
                              f"exp_on_negative_values of the rescaled differences -255..0 (multiplier {multiplier}, "
                              f"left shift {left_shift}, 0 below {diff_min})")
    recip = reciprocal(em)
    rd, _ = simd_helpers(em)
    smax = select_helper(em, "max")
    shift = SOFTMAX_ACCUMULATION_INTEGER_BITS
    symbol = em.sym(f"m4_softmax_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 SOFTMAX over rows of {depth} */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *in, int8_t *out)', "{",
        f"    const int32_t *e = {exps} + 255;  /* e[d] for d = x - largest in [-255, 0] */",
        f"    for (int32_t r = 0; r < {x.size // depth}; ++r, in += {depth}, out += {depth}) {{",
        "        int32_t largest = -128, i = 0;",
        "        int bits_over_unit;",
        "        uint32_t sum = 0;",
        f"        if ({depth} >= 8) {{",
        "            int32_t m = (int32_t)0x80808080u;",
        f"            for (; i + 4 <= {depth}; i += 4)",
        f"                m = {smax}(m, {rd}(in + i));",
        f"            m = {smax}(m, (int32_t)((uint32_t)m >> 16));",
        f"            m = {smax}(m, (int32_t)((uint32_t)m >> 8));",
        "            largest = (int8_t)m;",
        "        }",
        f"        for (; i < {depth}; ++i)",
        "            if (in[i] > largest) largest = in[i];",
        f"        for (i = 0; i < {depth}; ++i)",
        f"            sum += ((uint32_t)e[in[i] - largest] + {1 << (shift - 1)}u) >> {shift};",
        f"        const int32_t scale = {recip}((int32_t)sum, &bits_over_unit);",
        "        const int32_t right = bits_over_unit + 23;",
        "        const uint32_t nudge = (uint32_t)1 << (right - 1);",
        f"        for (i = 0; i < {depth}; ++i) {{",
        "            const uint64_t p = (uint64_t)(uint32_t)scale * (uint32_t)e[in[i] - largest] + (1u << 30);",
        "            const uint32_t h = (uint32_t)(p >> 31);",
        "            out[i] = (int8_t)__ssat((int32_t)((h + nudge) >> right) - 128, 8);",
        "        }",
        "    }", "}", ""])
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
