"""softmax in the project's fixed point (fx8 / fx16 input q at 2^-s, beta 1, along the last axis): the result at
2^-15 (fx16) or 2^-7 (fx8), integer arithmetic only, the same steps in the interpreter and in the portable C.

Per row of n values: the largest m; each d = m - q (0..65535, an int32); e = exp(-d 2^-s) in steps of 2^-15 as
32768 - h15(d), h(t) = 1 - exp(-t) read by ir/ops/fixed16_activations.py's interpolated table (``EXP``, elu's:
512 steps over [0, 16], 1 beyond); their int32 sum S (n < 2^16: S < 2^31); each output floor((e 2^so + floor(S /
2)) / S) (the quotient rounded, halves up), at most the width's largest integer (the C computes each exp twice,
for the sum and for the quotient: no scratch row).

Error bound, proven: each e is within eps = EXP.error (2.75 steps of 2^-15) of exp(-d 2^-s) (``gate_error`` over
every d from 0 to 65,535 at every input scale from 0 to 20: tests/ops/test_fixed_softmax.py); the row's largest has
d = 0, so S >= 1 - eps, and with p = exp(-d 2^-s) / sum exp(...) (the softmax of the input's values),
|e / S - p| = |delta_i sum E - E_i Delta| / (S sum E) <= eps (1 + n p) / (1 - eps); the rounding and the
saturation at the top add at most one output step: |y 2^-so - p| <= 2^-so + eps (1 + n p) / (1 - eps)
(``error_bound``).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.fixed16_activations import GATES, c_gate, gate15
from tinycc_ml.ir.ops.registry import need

EXP = GATES["elu"]  # h(t) = 1 - exp(-t)
MAX_DEPTH = (1 << 16) - 1  # the int32 sum of n exps at most 2^15 each, and S / 2 added to a 2^30 product


def output_scale(bits: int) -> int:
    return 15 if bits == 16 else 7


def check(x, result, attrs) -> None:
    """The fixed-point form's rules: beta 1, fx8 or fx16, the result at the width's output scale."""
    need(float(attrs["beta"]) == 1.0, f"a fixed-point softmax takes beta 1 (ONNX's), not {attrs['beta']}")
    need(x.dtype.bits in (8, 16), f"a fixed-point softmax takes fx8 or fx16, got {x.dtype}")
    scale = output_scale(x.dtype.bits)
    need(result.dtype.bits == x.dtype.bits and result.dtype.scale == scale,
         f"a fixed-point softmax of {x.dtype} writes fx{x.dtype.bits} at scale {scale}, not {result.dtype}")
    need(x.shape[-1] <= MAX_DEPTH, f"a fixed-point softmax over {x.shape[-1]} values: its int32 sum holds at most "
                                   f"{MAX_DEPTH}")


def exps(d, s_in: int) -> np.ndarray:
    """exp(-d 2^-s) in steps of 2^-15 (0..32768) of d >= 0."""
    return 32768 - gate15(d, s_in, EXP)


def softmax(q, s_in: int, bits: int) -> np.ndarray:
    q = np.asarray(q, dtype=np.int64)
    e = exps(np.max(q, axis=-1, keepdims=True) - q, s_in)
    total = np.sum(e, axis=-1, keepdims=True)
    y = ((e << output_scale(bits)) + (total >> 1)) // total
    return np.minimum(y, (1 << (bits - 1)) - 1)


def error_bound(p: np.ndarray, n: int, bits: int) -> np.ndarray:
    eps = EXP.error
    return 2.0 ** -output_scale(bits) + eps * (1 + n * np.asarray(p)) / (1 - eps)


def c_softmax(em, node) -> list[str]:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    bits, depth, s_in = x.dtype.bits, x.shape[-1], x.dtype.scale
    symbol = em.add_const_array(em.sym("fx16_elu_table"), EXP.table.astype(np.uint16), "uint16_t",
                                f"the fx16 elu gate's table in 0.16, {1 << EXP.steps_log2} steps over "
                                f"[0, {1 << EXP.range_log2}]")
    gate = c_gate(EXP, s_in, lambda index: f"(uint32_t){em.target.read_const(symbol, index, 'uint16_t')}")

    def exp_block(target: str) -> list[str]:
        return (["{", "    const int32_t q = largest - (int32_t)in[i];"] + [f"    {line}" for line in gate]
                + [f"    {target}", "}"])

    top = (1 << (bits - 1)) - 1
    body = [f"const int{bits}_t *in = {em.var(x_name)} + r * {depth};",
            "int32_t largest = in[0], sum = 0;",
            f"for (int i = 1; i < {depth}; ++i)",
            "    if (in[i] > largest) largest = in[i];",
            f"for (int i = 0; i < {depth}; ++i)"]
    body += [f"    {line}" for line in exp_block("sum += INT32_C(32768) - g15;")]
    body += [f"for (int i = 0; i < {depth}; ++i)"]
    body += [f"    {line}" for line in exp_block(
        f"const int32_t y = (((INT32_C(32768) - g15) << {output_scale(bits)}) + (sum >> 1)) / sum; "
        f"{em.var(node.name)}[r * {depth} + i] = (int{bits}_t)(y > {top} ? {top} : y);")]
    return ["{", f"    for (long r = 0; r < {x.size // depth}; ++r) {{"] + [f"        {line}" for line in body] + \
        ["    }", "}"]
