"""Cortex-M4 / M33 kernels for TFLite's int8 MUL, MAXIMUM and MINIMUM, broadcast as the shared C broadcasts them
(tinycc_ml/ir/ops/network/mul.py, maximum_minimum.py), bit for bit the shared C's and so tflite-micro's.

Broadcasting: the output's axes are merged where both operands step through them contiguously (or both stay),
leaving a few outer loops (literal extents and strides) around an inner row where each operand either walks
(stride 1) or stays (stride 0: one value for the whole row). A layer is one function with its geometry in
literals (``m4_mul_<layer>``, ``m4_max_<layer>``, ``m4_min_<layer>``).

MUL, 4 elements a step: each operand's word split by SXTB16 (bytes 0, 2 and 1, 3), its zero point taken off
both int16 lanes in one SSUB16, one operand's lanes doubled in SADD16 (the requantisation's first shift);
SMULBB / SMULTT give the doubled products a2 = 2 (a - za)(b - zb) (|a2| <= 2 255^2: the requantisation's SMMLAR
form is exact, ``m4_network``'s module docstring), then per element ADD (the rounding nudge and the sign's
correction), SMMLAR, SSAT #8 with the right shift ASR folded in (the output zero point in the nudge where it
fits: ``fold_zero_point``), STRB. A row whose other operand stays multiplies by it in SMULBB / SMULTB.

MAXIMUM / MINIMUM (one quantisation for operands and result: the stored bytes compare as the reals), 4 bytes a
step: SSUB8 sets the GE flag of each byte lane where a >= b, SEL picks each lane's larger (smaller) byte.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import fold_zero_point, requant_bound, simd_helpers, tflite_int8
from tinycc_ml.target import Node, activation_range, quantize_multiplier
from tinycc_ml.target import mul_multiplier as multiplier

PRODUCT_BOUND = 255 * 255  # |(a - za)(b - zb)| for int8 values and zero points
MAX_DOUBLING = 7  # (b - zb) 2^k stays an int16 lane for k <= 7


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Each output axis' element step in an operand of ``shape`` (aligned to the output's last axes)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    steps, step = [], 1
    for extent in reversed(shape):
        steps.append(step if extent > 1 else 0)
        step *= extent
    return steps[::-1]


def broadcast_loops(a_shape, b_shape, out_shape) -> list[tuple[int, int, int]]:
    """The output's axes as (extent, a's step, b's step), axes of extent 1 dropped and neighbours merged where
    both operands step through them as one axis; the last is the inner row."""
    out = tuple(out_shape) or (1,)
    axes = [(e, sa, sb) for e, sa, sb in zip(out, _strides(a_shape, out), _strides(b_shape, out)) if e > 1]
    merged: list[tuple[int, int, int]] = []
    for e, sa, sb in axes:
        if merged:
            pe, pa, pb = merged[-1]
            if pa == sa * e and pb == sb * e:  # the outer axis continues the inner one in both operands
                merged[-1] = (pe * e, sa, sb)
                continue
        merged.append((e, sa, sb))
    return merged or [(1, 1, 1)]


def operands_ok(em, node: Node) -> bool:
    g = em.graph
    return all(g.op(i) != "sparse_const" and i not in em.inline_values and i != em.read_clamp for i in node.inputs)


def _pointer(em, name: str) -> str:
    return em.const_array(name) if em.graph.op(name) == "const" else em.var(name)


def _layer_function(em, node: Node, kind: str, rows) -> list[str] | None:
    """The layer's function: outer loops over the merged axes, ``rows(inner)`` the C of one inner row reading
    ``pa`` and ``pb`` and writing ``po`` (inner: (n, a's step, b's step)); None where the inner row has both
    operands staying (no such row kernel)."""
    g = em.graph
    a, b = node.inputs
    loops = broadcast_loops(g.type(a).shape, g.type(b).shape, node.type.shape)
    n, sa, sb = loops[-1]
    if sa == 0 and sb == 0:
        return None
    symbol = em.sym(f"m4_{kind}_{node.name}")
    lines = [f"/* %{node.name}: TFLite's int8 {kind.upper()}, {' x '.join(str(e) for e, _, _ in loops)} */",
             f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *a, const int8_t *b, '
             "int8_t *out)", "{"]
    indent = "    "
    terms_a, terms_b = [], []
    for depth, (e, da, db) in enumerate(loops[:-1]):
        lines.append(f"{indent}for (int32_t d{depth} = 0; d{depth} < {e}; ++d{depth})")
        indent += "    "
        terms_a += [f"d{depth} * {da}"] if da else []
        terms_b += [f"d{depth} * {db}"] if db else []
    at_a, at_b = " + ".join(terms_a) or "0", " + ".join(terms_b) or "0"
    lines += [f"{indent}{{",
              f"{indent}    const int8_t *pa = a + {at_a}, *pb = b + {at_b};",
              f"{indent}    int8_t *po = out;",
              *(f"{indent}    {line}" for line in rows(loops[-1])),
              f"{indent}    out += {n};" if len(loops) > 1 else f"{indent}    (void)out;",
              f"{indent}}}", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({_pointer(em, a)}, {_pointer(em, b)}, {em.var(node.name)});"]


# ---------------------------------------------------------------- MUL

def _mul_plan(em, node: Node) -> dict | None:
    """The layer's requantisation constants, or None where the SMMLAR form is not proven exact."""
    ta, tb = (em.graph.type(i).dtype for i in node.inputs)
    out = node.type.dtype
    m, s = quantize_multiplier(multiplier(ta, tb, out))
    m, s = int(m), int(s)
    left, right = max(s, 0), max(-s, 0)
    if m < 0 or left + 1 > MAX_DOUBLING or right > 31 or requant_bound(PRODUCT_BOUND, m, s) is None:
        return None
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    zo = int(out.zero_point)
    fold = fold_zero_point(np.array([PRODUCT_BOUND]), np.array([m]), np.array([s]), zo)
    return {"m": m, "k": left + 1, "r": right, "zo": zo, "lo": int(lo), "hi": int(hi), "fold": fold,
            "za": int(ta.zero_point), "zb": int(tb.zero_point)}


def mul_claims(em, node: Node) -> bool:
    return tflite_int8(em, node) and operands_ok(em, node) and _mul_plan(em, node) is not None


def _requant_helper(em, node: Node, plan: dict) -> str:
    """The layer's per-element requantisation of a doubled-and-shifted product a2 (= p 2^k): the int8 result."""
    symbol = em.sym(f"m4_mul_{node.name}_rq")
    m, r, zo = plan["m"], plan["r"], plan["zo"]
    if plan["fold"]:  # r > 0: the correction always applies, the zero point inside the nudge
        nudge = (1 << (r - 1)) + zo * (1 << r)
        body = ["    int32_t t;",
                '    __asm__("add %0, %1, %2, asr #31\\n\\tsmmlar %0, %2, %3, %0\\n\\t'
                f'ssat %0, #8, %0, asr #{r}" : "=&r"(t) : "r"({nudge}), "r"(a2), "r"({m}));']
    elif r == 0:  # no rounding shift: the high product rounded is SaturatingRoundingDoublingHighMul
        body = ["    int32_t t;",
                f'    __asm__("smmlar %0, %1, %2, %3\\n\\tssat %0, #8, %0" : "=r"(t) : "r"(a2), "r"({m}), '
                f'"r"({zo}));']
    else:
        body = ["    int32_t t;",
                '    __asm__("add %0, %1, %2, asr #31\\n\\tsmmlar %0, %2, %3, %0" : "=&r"(t) : '
                f'"r"({1 << (r - 1)}), "r"(a2), "r"({m}));',
                f"    t = __ssat((t >> {r}) + {zo}, 8);"]
    if plan["lo"] > -128:
        body.append(f"    t = t < {plan['lo']} ? {plan['lo']} : t;")
    if plan["hi"] < 127:
        body.append(f"    t = t > {plan['hi']} ? {plan['hi']} : t;")
    em.helpers[symbol] = "\n".join([
        f"static inline __attribute__((always_inline)) int32_t {symbol}(int32_t a2)", "{", *body,
        "    return t;", "}", ""])
    return symbol


def _splat16(v: int) -> int:
    """A signed 16-bit value in both halves of an int32."""
    return ((v & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)


def _lane_products(em) -> None:
    """m4_smulbb, m4_smultt, m4_smultb: products of int16 lanes (bottom, top), the forms GCC compiles to SMULxy
    (arm_acle.h's own __smulbb arrived in GCC 13)."""
    for name, x, y in (("smulbb", "(int16_t)a", "(int16_t)b"), ("smultt", "(a >> 16)", "(b >> 16)"),
                       ("smultb", "(a >> 16)", "(int16_t)b")):
        symbol = em.sym(f"m4_{name}")
        em.helpers.setdefault(symbol, f"static inline __attribute__((always_inline)) int32_t {symbol}(int32_t a, "
                                      f"int32_t b) {{ return (int32_t){x} * (int32_t){y}; }}\n")


def tensor_mul(em, node: Node) -> list[str] | None:
    plan = _mul_plan(em, node)
    if plan is None or not operands_ok(em, node):
        return None
    rd, odd = simd_helpers(em)
    _lane_products(em)
    rq = _requant_helper(em, node, plan)
    k = plan["k"]

    def shifted(p: str) -> str:  # the a-lanes were doubled once: the rest of 2^k on the product
        return p if k == 1 else f"(int32_t)((uint32_t){p} << {k - 1})"

    def rows(inner) -> list[str]:
        n, sa, sb = inner
        za, zb, pa, pb = plan["za"], plan["zb"], "pa", "pb"
        if sa == 0:  # the walking operand first
            za, zb, pa, pb = zb, za, pb, pa
        lines = ["int32_t i = 0;"]
        if sa and sb:
            product = f"2 * ((int32_t){pa}[i] - {za}) * ((int32_t){pb}[i] - {zb})"
            lines += [f"for (; i + 4 <= {n}; i += 4) {{",
                      f"    const int32_t wa = {rd}({pa} + i), wb = {rd}({pb} + i);",
                      f"    const int32_t ae0 = __ssub16(__sxtb16(wa), {_splat16(za)}), "
                      f"ao0 = __ssub16({odd}(wa), {_splat16(za)});",
                      "    const int32_t ae = __sadd16(ae0, ae0), ao = __sadd16(ao0, ao0);",
                      f"    const int32_t be = __ssub16(__sxtb16(wb), {_splat16(zb)}), "
                      f"bo = __ssub16({odd}(wb), {_splat16(zb)});",
                      f"    po[i] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smulbb(ae, be)')});",
                      f"    po[i + 1] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smulbb(ao, bo)')});",
                      f"    po[i + 2] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smultt(ae, be)')});",
                      f"    po[i + 3] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smultt(ao, bo)')});",
                      "}",
                      f"for (; i < {n}; ++i)",
                      f"    po[i] = (int8_t){rq}({shifted(product)});"]
            return lines
        # the other operand stays: (b - zb) in both lanes
        lines = [f"const int32_t bb = (int32_t)(((uint32_t)((int32_t){pb}[0] - {zb}) & 0xFFFFu) * 0x10001u);", *lines,
                 f"for (; i + 4 <= {n}; i += 4) {{",
                 f"    const int32_t wa = {rd}({pa} + i);",
                 f"    const int32_t ae0 = __ssub16(__sxtb16(wa), {_splat16(za)}), "
                 f"ao0 = __ssub16({odd}(wa), {_splat16(za)});",
                 "    const int32_t ae = __sadd16(ae0, ae0), ao = __sadd16(ao0, ao0);",
                 f"    po[i] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smulbb(ae, bb)')});",
                 f"    po[i + 1] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smulbb(ao, bb)')});",
                 f"    po[i + 2] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smultb(ae, bb)')});",
                 f"    po[i + 3] = (int8_t){rq}({shifted(f'{em.prefix}_m4_smultb(ao, bb)')});",
                 "}",
                 f"for (; i < {n}; ++i)",
                 f"    po[i] = (int8_t){rq}({shifted(f'2 * ((int32_t){pa}[i] - {za}) * ((int32_t){pb}[0] - {zb})')});"]
        return lines

    return _layer_function(em, node, "mul", rows)


# ---------------------------------------------------------------- MAXIMUM, MINIMUM

def minmax_claims(em, node: Node) -> bool:
    return tflite_int8(em, node) and operands_ok(em, node)


def select_helper(em, kind: str) -> str:
    """m4_sel_max / m4_sel_min: the larger (smaller) byte of each lane of two words (SSUB8, then SEL)."""
    symbol = em.sym(f"m4_sel_{kind}")
    first, second = ("%1, %2", "%1, %2") if kind == "max" else ("%1, %2", "%2, %1")
    if symbol not in em.helpers:
        em.helpers[symbol] = "\n".join([
            f"static inline __attribute__((always_inline)) int32_t {symbol}(int32_t a, int32_t b)", "{",
            "    int32_t r;",
            f'    __asm__("ssub8 %0, {first}\\n\\tsel %0, {second}" : "=&r"(r) : "r"(a), "r"(b) : "cc");',
            "    return r;", "}", ""])
    return symbol


def _minmax(kind: str):
    def emit(em, node: Node) -> list[str] | None:
        if not operands_ok(em, node):
            return None
        rd, _ = simd_helpers(em)
        sel = select_helper(em, kind)
        pick = "(x < y) ? y : x" if kind == "max" else "(y < x) ? y : x"

        def rows(inner) -> list[str]:
            n, sa, sb = inner
            pa, pb = ("pa", "pb") if sa else ("pb", "pa")  # the walking operand first (both ops are symmetric)
            other = f"{rd}({pb} + i)" if sa and sb else "bw"
            lines = [] if sa and sb else [f"const int32_t bw = (int32_t)((uint32_t)(uint8_t){pb}[0] * 0x01010101u);"]
            y = f"{pb}[i]" if sa and sb else f"{pb}[0]"
            return [*lines, "int32_t i = 0;",
                    f"for (; i + 4 <= {n}; i += 4) {{",
                    f"    const int32_t r = {sel}({rd}({pa} + i), {other});",
                    "    __builtin_memcpy(po + i, &r, 4);",
                    "}",
                    f"for (; i < {n}; ++i) {{",
                    f"    const int8_t x = {pa}[i], y = {y};",
                    f"    po[i] = {pick};",
                    "}"]

        return _layer_function(em, node, kind, rows)
    emit.__name__ = f"tensor_{'maximum' if kind == 'max' else 'minimum'}"
    return emit


tensor_maximum = _minmax("max")
tensor_minimum = _minmax("min")


def mul_fx16_claims(em, node: Node) -> bool:
    """The project's 16-bit fixed-point MUL (a front end's window, a feature's scales): operands of the result's
    size (no broadcast but leading 1s) read as stored, no activation."""
    out = node.type
    types = [em.graph.type(name) for name in node.inputs]
    return (str(out.dtype).startswith("fx16.") and all(str(t.dtype).startswith("fx16.") for t in types)
            and all(t.size == out.size for t in types) and out.size >= 2
            and node.attrs.get("activation", "none") == "none"
            and all(_array_of(em, name) is not None for name in node.inputs))


def _array_of(em, name: str) -> str | None:
    """The array an operand's elements are read from as stored (``x[i]``), or None (read through a function)."""
    element = em.at(name, "i")
    base = element[:-3]
    return base if element.endswith("[i]") and base.replace("_", "").isalnum() else None


def tensor_mul_fx16(em, node: Node) -> list[str]:
    """Two lanes a step: SMLABB / SMLATT with the rounding addend, SSAT to 16 bits after the shift, PKHBT; the
    product's rounding shift k = sa + sb - so as the shared C's (a b + 2^(k-1)) >> k, saturated."""
    a_name, b_name = node.inputs
    k = sum(em.graph.type(name).dtype.scale for name in node.inputs) - node.type.dtype.scale
    n = node.type.size
    rounding = 1 << (k - 1) if k else 0

    a, b = _array_of(em, a_name), _array_of(em, b_name)

    def element(i: str) -> str:
        product = f"(int32_t){a}[{i}] * (int32_t){b}[{i}] + {rounding}"
        return f"{em.var(node.name)}[{i}] = (int16_t)__ssat(({product}) >> {k}, 16);"

    lines = ["{", "    typedef uint32_t __attribute__((aligned(2), may_alias)) word_t;",
             f"    const word_t *a = (const word_t *)(const void *){a};",
             f"    const word_t *b = (const word_t *)(const void *){b};",
             f"    word_t *y = (word_t *)(void *){em.var(node.name)};",
             f"    for (long i = 0; i < {n // 2}; ++i) {{",
             f"        const int32_t lo = __ssat(__smlabb((int32_t)a[i], (int32_t)b[i], {rounding}) >> {k}, 16);",
             f"        const int32_t hi = __ssat(__smlatt((int32_t)a[i], (int32_t)b[i], {rounding}) >> {k}, 16);",
             "        y[i] = ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);", "    }"]
    if n % 2:
        lines.append(f"    {element(str(n - 1))}")
    return lines + ["}"]
