"""The project's int16 (fx16) forms of ``hard_swish``, ``hard_sigmoid``, ``silu``, ``gelu`` (both forms) and ``elu``:
the input fx16 at its power-of-two scale s, the output fx16 at a scale of its own (so, from calibration: most of
these functions are unbounded above), integer arithmetic only, the same steps in the interpreter and in the
portable C.

hard_swish, exactly: x * clip(x + 3, 0, 6) / 6 is q * c / (6 * 2^2s) with c = clip(q + 3 * 2^s, 0, 6 * 2^s), so
the output integer floor(q * c * 2^(so - 2s) / 6 + 1/2) is computed exactly (an arithmetic shift, then a floor
division by 6, halves up): every output is the correctly rounded function, within half an output step
(HARD_SWISH_ERROR_STEPS) of it, saturation aside. hard_sigmoid, clip(alpha x + beta, 0, 1): alpha an int16 at
2^A, beta an int32 at 2^(s + A) (A as large as 15 bits of alpha and an int32 sum allow), the sum alpha_q q +
beta_q clamped to [0, 2^(s + A)] and rounded once: within half an output step + |x| |alpha - alpha_q 2^-A| +
|beta - beta_q 2^-(s + A)|.

silu and gelu as x * g(x) with a gate g from 0 to 1 (silu: sigmoid(x); gelu "none": Phi(x), the normal cdf; gelu
"tanh": (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2), each g(-t) = 1 - g(t): a table of g(t) for t = |x| in
[0, 2^range_log2] (``GATES``: 2^steps_log2 steps, g in 0.16, uint16, each entry moved by half the chord's error at
its curvature) read with linear interpolation (t in steps of 2^-15 of a table step: exact for every input scale up
to 20), g = 1 at and beyond the table's end; g rounded to steps of 2^-15 (g15, 0..32768), the product q * g15 an
int32 (|q * g15| <= 2^30) rounded once into the output (halves up) and saturated. elu: x where x > 0 (rounded into
the output), else -alpha * h(|x|) with h(t) = 1 - exp(-t) read from such a table (h = 1 beyond it), alpha
quantised to int16 at its largest scale A <= 15 (alpha = 1: exact), the product alpha_q * h15 rounded once.

The error bound: |y - f(x)| <= half an output step + |x| * E (silu, gelu) or + |alpha| * E + |alpha - alpha_q
2^-A| (elu), saturation aside, where E = ``GATES[...].error`` bounds the gate's error (silu 1.5, gelu 1.25 in both
forms, elu 2.75 steps of 2^-15). Both are proven exhaustively (tests/ops/test_fixed16_activations.py): E over every
one of the 65,536 inputs at every input scale from 0 to 20 (``gate_error``), the whole bound over every input at
every input scale from 0 to 15 and output scales around it; hard_swish equal to the correctly rounded function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tinycc_ml.ir.ops.registry import need

FRACTION_BITS = 15  # a table position in steps of 2^-15 of a table step
HARD_SWISH_ERROR_STEPS = 0.5  # correctly rounded
SHIFT_RANGE = (-16, 31)  # the product's rounding shift into the output (a negative one: a saturated left shift)


def _sigmoid(t):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(t, dtype=np.float64)))


_erf = np.vectorize(math.erf, otypes=[np.float64])


@dataclass(frozen=True)
class Gate:
    """g(t) for t >= 0 tabulated over [0, 2^range_log2] in 2^steps_log2 steps; ``symmetric``: g(-t) = 1 - g(t)."""

    function: object
    range_log2: int
    steps_log2: int
    error_steps: float
    symmetric: bool = True

    @property
    def error(self) -> float:
        return self.error_steps * 2.0**-15

    @property
    def table(self) -> np.ndarray:
        step = 2.0 ** (self.range_log2 - self.steps_log2)
        t = np.arange((1 << self.steps_log2) + 1) * step
        # each entry moved by half the interpolation's error at its curvature (-step^2 g''(t) / 16): the chords'
        # error then spans about +-step^2 |g''| / 16 instead of 0..step^2 |g''| / 8
        e = step / 64
        below = 1.0 - self.function(np.abs(t - e)) if self.symmetric else self.function(t - e)
        below = np.where(t - e >= 0, self.function(np.abs(t - e)), below)  # g(-t) = 1 - g(t) where symmetric
        curvature = (self.function(t + e) - 2.0 * self.function(t) + below) / e**2
        values = self.function(t) - step**2 * curvature / 16.0
        return np.clip(np.floor(values * 65536.0 + 0.5), 0, 65535).astype(np.int64)


# error_steps: the stated bound of each gate's error in steps of 2^-15, proven by gate_error over every position
# an int16 input reaches at input scales 0..20 (measured: silu 1.44, gelu 1.19 (erf) and 1.17 (tanh), elu 2.55)
GATES = {
    "silu": Gate(_sigmoid, 4, 8, 1.5),
    "gelu": Gate(lambda t: 0.5 * (1.0 + _erf(np.asarray(t) / math.sqrt(2.0))), 3, 8, 1.25),
    "gelu_tanh": Gate(lambda t: 0.5 * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * np.asarray(t)**3))),
                      3, 8, 1.25),
    "elu": Gate(lambda t: -np.expm1(-np.asarray(t, dtype=np.float64)), 4, 9, 2.75, symmetric=False),
}
FIXED16_OPS = ("hard_swish", "hard_sigmoid", "silu", "gelu", "elu")


def gate_name(op: str, attrs: dict) -> str:
    return "gelu_tanh" if op == "gelu" and attrs.get("approximate") == "tanh" else op


def alpha_parameters(alpha: float) -> tuple[int, int]:
    """(alpha_q, A): alpha as an int16 at its largest scale A <= 15."""
    alpha = float(alpha)
    scale = 15
    while scale > -16 and abs(math.floor(alpha * 2.0**scale + 0.5)) > 32767:
        scale -= 1
    return int(math.floor(alpha * 2.0**scale + 0.5)), scale


def hard_sigmoid_parameters(attrs: dict, s_in: int) -> tuple[int, int, int]:
    """(alpha_q, beta_q, A): alpha as an int16 at the largest scale A that keeps it within 15 bits, the sum's scale
    s + A within 29 bits and beta at 2^(s + A) within 2^30 (|alpha_q q + beta_q| < 2^31: an int32)."""
    alpha, beta = float(attrs["alpha"]), float(attrs["beta"])
    scale = 29 - s_in
    while scale > -40 and (abs(math.floor(alpha * 2.0**scale + 0.5)) > 32767
                           or abs(math.floor(beta * 2.0 ** (s_in + scale) + 0.5)) >= 2**30):
        scale -= 1
    need(s_in + scale >= 0, f"an fx16 hard_sigmoid of alpha {alpha:g}, beta {beta:g} at input scale {s_in}: its "
         "sum would be coarser than steps of 1")
    return int(math.floor(alpha * 2.0**scale + 0.5)), int(math.floor(beta * 2.0 ** (s_in + scale) + 0.5)), scale


def shifts(op: str, attrs: dict, s_in: int, s_out: int) -> tuple[int, ...]:
    """The kernel's rounding shifts, checked: hard_swish (k,) with k = 2 s - so; silu and gelu (s + 15 - so,);
    elu (s - so, A + 15 - so)."""
    if op == "hard_swish":
        need(s_in >= 0, f"an fx16 hard_swish needs an input scale >= 0 (steps of at most 1), got {s_in}")
        k = 2 * s_in - s_out
        need(-16 <= k <= 47, f"an fx16 hard_swish's output scale {s_out} must be within [{2 * s_in - 47}, "
             f"{2 * s_in + 16}] at input scale {s_in}")
        return (k,)
    if op == "elu":
        _, a = alpha_parameters(attrs["alpha"])
        found = (s_in - s_out, a + 15 - s_out)
    elif op == "hard_sigmoid":
        _, _, a = hard_sigmoid_parameters(attrs, s_in)
        found = (s_in + a - s_out,)
    else:
        found = (s_in + 15 - s_out,)
    for d in found:
        need(SHIFT_RANGE[0] <= d <= SHIFT_RANGE[1], f"an fx16 {op}'s output scale {s_out} is too far from its "
             f"input's {s_in}: a rounding shift of {d} (from {SHIFT_RANGE[0]} to {SHIFT_RANGE[1]})")
    return found


def output_scale_range(op: str, attrs: dict, s_in: int) -> tuple[int, int]:
    """The output scales the kernel takes at input scale ``s_in`` (lo > hi: none)."""
    lo_d, hi_d = SHIFT_RANGE
    if op == "hard_swish":
        return (2 * s_in - 47, 2 * s_in + 16) if s_in >= 0 else (1, 0)
    if op == "elu":
        _, a = alpha_parameters(attrs["alpha"])
        return max(s_in - hi_d, a + 15 - hi_d), min(s_in - lo_d, a + 15 - lo_d)
    if op == "hard_sigmoid":
        _, _, a = hard_sigmoid_parameters(attrs, s_in)
        return s_in + a - hi_d, s_in + a - lo_d
    return s_in + 15 - hi_d, s_in + 15 - lo_d


def _round_shift(p, d: int) -> np.ndarray:
    """p * 2^-d rounded (halves up), saturated to int16."""
    p = np.asarray(p, dtype=np.int64)
    r = (p + (1 << (d - 1))) >> d if d > 0 else p << -d
    return np.clip(r, -32768, 32767)


def gate15(q, s_in: int, gate: Gate) -> np.ndarray:
    """g(x) (symmetric gates; else h(|x|)) of x = q 2^-s in steps of 2^-15 (0..32768)."""
    q = np.asarray(q, dtype=np.int64)
    m = np.abs(q)
    limit = 1 << (s_in + gate.range_log2) if s_in + gate.range_log2 >= 0 else 1
    sh = gate.steps_log2 - gate.range_log2 + FRACTION_BITS - s_in
    pos = m << sh if sh >= 0 else (m + (1 << (-sh - 1))) >> -sh
    n = 1 << gate.steps_log2
    index = np.minimum(pos >> FRACTION_BITS, n - 1)
    low = pos & ((1 << FRACTION_BITS) - 1)
    table = gate.table
    a, b = table[index], table[index + 1]
    g = np.where(m >= limit, 1 << 31, (a << FRACTION_BITS) + low * (b - a))  # steps of 2^-31
    if gate.symmetric:
        g = np.where(q < 0, (1 << 31) - g, g)
    return (g + (1 << 15)) >> 16


def fixed16(op: str, q, attrs: dict, s_in: int, s_out: int) -> np.ndarray:
    """The fx16 output integers of ``op`` of the fx16 input integers ``q``."""
    q = np.asarray(q, dtype=np.int64)
    found = shifts(op, attrs, s_in, s_out)
    if op == "hard_swish":
        (k,) = found
        c = np.clip(q + 3 * (1 << s_in), 0, 6 * (1 << s_in))
        a = ((q * c) >> k if k >= 0 else (q * c) << -k) + 3
        return np.clip(a // 6, -32768, 32767)  # floor division: halves up
    if op == "hard_sigmoid":
        alpha_q, beta_q, a = hard_sigmoid_parameters(attrs, s_in)
        return _round_shift(np.clip(alpha_q * q + beta_q, 0, 1 << (s_in + a)), found[0])
    gate = GATES[gate_name(op, attrs)]
    g15 = gate15(q, s_in, gate)
    if op == "elu":
        alpha_q, _ = alpha_parameters(attrs["alpha"])
        return np.where(q > 0, _round_shift(q, found[0]), _round_shift(-alpha_q * g15, found[1]))
    return _round_shift(q * g15, found[0])


def gate_error(gate: Gate, scales=range(0, 21), q=None) -> float:
    """The largest |g15 2^-15 - g(x)| over every int16 input (or the integers ``q``) at every input scale in
    ``scales``."""
    q = np.arange(-(2**15), 2**15, dtype=np.int64) if q is None else np.asarray(q, dtype=np.int64)
    worst = 0.0
    for s in scales:
        x = q * 2.0**-s
        truth = np.where(x >= 0, gate.function(np.abs(x)), 1.0 - gate.function(np.abs(x))) if gate.symmetric \
            else gate.function(np.abs(x))
        worst = max(worst, float(np.max(np.abs(gate15(q, s, gate) * 2.0**-15 - truth))))
    return worst


# ---------------------------------------------------------------- C


def _c_round_shift(p: str, d: int) -> list[str]:
    """C statements setting int32 ``r`` to ``p`` * 2^-d rounded (halves up) and saturated to int16."""
    if d > 0:
        return [f"int32_t r = ({p} + (INT32_C(1) << {d - 1})) >> {d};",
                "r = r > INT32_C(32767) ? INT32_C(32767) : (r < INT32_C(-32768) ? INT32_C(-32768) : r);"]
    if d == 0:
        return [f"int32_t r = {p};",
                "r = r > INT32_C(32767) ? INT32_C(32767) : (r < INT32_C(-32768) ? INT32_C(-32768) : r);"]
    e = -d
    return [f"const int32_t p = {p};",
            f"const int32_t r = p > (INT32_C(32767) >> {e}) ? INT32_C(32767) : (p < -(INT32_C(32768) >> {e}) ? "
            f"INT32_C(-32768) : p * (INT32_C(1) << {e}));"]


def c_gate(gate: Gate, s_in: int, read) -> list[str]:
    """C statements setting uint32 ``g15`` from int32 ``q`` (see gate15); ``read(index)`` reads the table."""
    limit = 1 << (s_in + gate.range_log2) if s_in + gate.range_log2 >= 0 else 1
    sh = gate.steps_log2 - gate.range_log2 + FRACTION_BITS - s_in
    if limit == 1:  # only 0 reaches the table
        position = "m"
    else:
        position = f"m << {sh}" if sh >= 0 else f"(m + UINT32_C({1 << (-sh - 1)})) >> {-sh}"
    lines = ["const uint32_t m = (uint32_t)(q < 0 ? -q : q);",
             "uint32_t g;",
             f"if (m >= UINT32_C({limit})) g = UINT32_C(1) << 31;",
             "else {",
             f"    const uint32_t pos = {position};",
             f"    const uint32_t h = pos >> {FRACTION_BITS};",
             f"    const uint32_t a = {read('h')}, b = {read('h + 1u')};",
             f"    g = (a << {FRACTION_BITS}) + (pos & UINT32_C({(1 << FRACTION_BITS) - 1})) * (b - a);",
             "}"]
    if gate.symmetric:
        lines.append("if (q < 0) g = (UINT32_C(1) << 31) - g;")
    return lines + ["const int32_t g15 = (int32_t)((g + UINT32_C(32768)) >> 16);"]


def c_block(em, op: str, attrs: dict, x: str, out: str, s_in: int, s_out: int) -> list[str]:
    """A C block setting the int16 ``out`` to the fx16 ``op`` of the int16 expression ``x`` (all arithmetic in
    32 bits, int is 16 bits on the AVR; hard_swish's product in 64 where 32 cannot hold it)."""
    found = shifts(op, attrs, s_in, s_out)
    body = [f"const int32_t q = (int32_t){x};"]
    if op == "hard_swish":
        (k,) = found
        wide = 6 * (1 << (s_in + 15 + max(0, -k))) >= 2**31 or k > 30
        ctype, c = ("int64_t", "INT64_C") if wide else ("int32_t", "INT32_C")
        three, six = 3 * (1 << s_in), 6 * (1 << s_in)
        body += [f"const int32_t t = q + INT32_C({three});",
                 f"const {ctype} c = t < 0 ? 0 : (t > INT32_C({six}) ? {c}({six}) : ({ctype})t);",
                 (f"{ctype} a = (({ctype})q * c >> {k}) + 3;" if k >= 0 else
                  f"{ctype} a = ({ctype})q * c * {c}({1 << -k}) + 3;"),
                 f"a = a > {c}(196608) ? {c}(196608) : (a < {c}(-196614) ? {c}(-196614) : a);",
                 "const int32_t v = (int32_t)a;",
                 "const int32_t r = v >= 0 ? v / 6 : -((INT32_C(5) - v) / 6);"]
        body.append("const int32_t y = r > INT32_C(32767) ? INT32_C(32767) "
                    ": (r < INT32_C(-32768) ? INT32_C(-32768) : r);")
        return ["{"] + [f"    {line}" for line in body] + [f"    {out} = (int16_t)y;", "}"]
    if op == "hard_sigmoid":
        alpha_q, beta_q, a = hard_sigmoid_parameters(attrs, s_in)
        top = f"INT32_C({1 << (s_in + a)})"
        body += [f"int32_t acc = INT32_C({alpha_q}) * q + INT32_C({beta_q});",
                 f"acc = acc < 0 ? 0 : (acc > {top} ? {top} : acc);"]
        body += _c_round_shift("acc", found[0]) + ["const int32_t y = r;"]
        return ["{"] + [f"    {line}" for line in body] + [f"    {out} = (int16_t)y;", "}"]
    gate = GATES[gate_name(op, attrs)]
    symbol = em.add_const_array(em.sym(f"fx16_{gate_name(op, attrs)}_table"), gate.table.astype(np.uint16),
                                "uint16_t", f"the fx16 {gate_name(op, attrs)} gate's table in 0.16, "
                                f"{1 << gate.steps_log2} steps over [0, {1 << gate.range_log2}]")
    body += c_gate(gate, s_in, lambda index: f"(uint32_t){em.target.read_const(symbol, index, 'uint16_t')}")
    if op == "elu":
        alpha_q, _ = alpha_parameters(attrs["alpha"])
        body += ["int32_t y;", "if (q > 0) {"]
        body += [f"    {line}" for line in _c_round_shift("q", found[0])] + ["    y = r;", "} else {"]
        body += [f"    {line}" for line in _c_round_shift(f"-(INT32_C({alpha_q}) * g15)", found[1])]
        body += ["    y = r;", "}"]
    else:
        body += _c_round_shift("q * g15", found[0]) + ["const int32_t y = r;"]
    return ["{"] + [f"    {line}" for line in body] + [f"    {out} = (int16_t)y;", "}"]
