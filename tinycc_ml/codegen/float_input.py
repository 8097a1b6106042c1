"""Float input for integer builds, in <prefix>.h and <prefix>.c on every target:

    <IN_T> <prefix>_quantise_feature(int k, float v);     feature k as <prefix>_predict takes it
    void   <prefix>_quantise(const float *x, <IN_T> *x_int);
    int    <prefix>_predict_float(const float *x);         <prefix>_predict of the quantised x

x_int[k] = round(x[k] * 2^s[k]) with halves rounded up, saturated to [-2^(b-1) + 1, 2^(b-1) - 1] for a
b-bit input type, NaN (a missing value) giving -2^(b-1), a code no real value gets (trees send it to
their nodes' default sides; other models clamp it like any input): bit for
bit ``tinycc_ml.ir.fixed.quantise`` of the float32 value (tests/backends/test_float_input.py,
tests/backends/test_float_bits_quantiser.py).

Where every shift lies in INTEGER_SHIFTS (-100..100) the conversion uses integer operations on the float's
bits alone (``integer_quantiser``: exponent, the significand's top 16 bits, one variable shift, the
rounding, the saturation; about 60 ATmega328P cycles a feature where the soft-float form took 620; a target
may give <prefix>_quantise's loop in its own code, ``CTarget.float_quantise``: the AVR's assembly for int16
builds, about 40).
Beyond, it multiplies in float (``float_quantiser``): the C never adds 0.5 to a value below 0.5 in
magnitude (0.49999997f + 0.5f rounds to 1.0f in float32): there the answer is 0; elsewhere below the
saturation bound y + 0.5 is exact in float32, and the floor is taken by truncation with a correction for
negative values.

Host builds always define them. On microcontrollers they take float arguments (and beyond INTEGER_SHIFTS
do float arithmetic), so <prefix>.c defines them only
when ``<PREFIX>_WITH_FLOAT`` is defined or in Arduino builds (``ARDUINO`` is defined there, and the Arduino
link drops unused functions); streaming targets quantise one feature at a time into ``<prefix>_feed``.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.fixed import affine_thresholds


def offset_text(term: str, offset: int) -> str:
    """``term`` plus a whole ``offset`` as a reader writes it: ``q + 75``, ``q - 75``, or ``q`` alone (never
    ``q - -75``)."""
    if offset == 0:
        return term
    return f"{term} {'+' if offset > 0 else '-'} {abs(offset)}"

INPUT_BITS = {"int16_t": 16, "int8_t": 8}
# the integer quantiser's shifts: 142 - s fits a uint8, and a subnormal's |x| 2^s stays below 2^-26
INTEGER_SHIFTS = (-100, 100)
EXPONENT_OFFSET = 142  # 150 (a float's exponent bias + 23 significand bits) - 8 (the significand's low byte)
# opens the float-input functions in <prefix>.c: everything before it is integer-only
FLOAT_SECTION = "/* Float input: the only float code of an integer build (the inference above is integer-only). */"


def guard_macro(prefix: str) -> str:
    return f"{prefix.upper()}_WITH_FLOAT"


def header_lines(api) -> list[str]:
    """The declarations (integer builds), with what they compute and when they are compiled (on targets with a
    guard, declared under it too: a call without it fails at compile time, not at link time)."""
    P, up, x_t = api.sym, api.prefix.upper(), api.input_ctype
    when = ([] if api.float_guard is None else
            [f" * Float code: on this target {api.prefix}.c defines them only with -D{api.float_guard} (or in an",
             " * Arduino build, whose linker drops them when unused)."])
    if api.input_quantisation is not None:
        scale, zero = api.input_quantisation
        rule = [f" * x_int[k] = {offset_text(f'round(x[k] / {scale!r})', zero)} (the input tensor's scale and",
                " * zero point; halves to even), saturated to -128..127, NaN giving -128: bit for bit tinycc-ml's",
                " * quantisation of",
                f" * float32 input (found by comparing x[k] with {P('in_threshold')}, no float arithmetic)."]
    else:
        rule = [f" * x_int[k] = round(x[k] * 2^s[k]) (halves up; s = {up}_INPUT_SHIFTS), saturated to {x_t}'s range",
                " * without its lowest value, which a NaN (missing value) gets: bit for bit tinycc-ml's",
                " * quantisation of float32 input."]
    decls = [f"{x_t} {P('quantise_feature')}(int k, float v);",
             f"void {P('quantise')}(const float *x, {x_t} *x_int);",
             f"int {P('predict_float')}(const float *x);"]
    if api.float_guard is not None:
        decls = [f"#if defined({api.float_guard}) || defined(ARDUINO)", *decls, f"#endif /* {api.float_guard} */"]
    return ["/* Float input: feature k of a real-valued input as the integer code takes it,", *rule,
            f" * {P('quantise')} fills all",
            f" * {up}_INPUT_DIM features; {P('predict_float')}(x) is {P('predict')} of the quantised x.",
            *when, " */", *decls, ""]


def affine_quantiser(api, const_attribute: str, read_const) -> list[str]:
    """<prefix>_quantise_feature of an affine-quantised (TFLite) input: -128 plus the number of the 255
    thresholds (ir.fixed.affine_thresholds) at or below v, by bisection: comparisons only, so every target
    gives ir.fixed.quantise_affine's codes whatever its float arithmetic."""
    P, dim = api.sym, api.input_dim
    thresholds = affine_thresholds(*api.input_quantisation)
    items = [("__builtin_inff()" if np.isinf(t) else f"{float(t)!r}f") for t in thresholds.tolist()]
    rows = [", ".join(items[i:i + 6]) for i in range(0, len(items), 6)]
    table = P("in_threshold")
    return ["/* the least float whose code is -127 + i: x's code is -128 + the count of these <= x */",
            f"static const float {table}[{len(items)}]{const_attribute} = {{",
            *(f"    {row}," for row in rows), "};", "",
            f"int8_t {P('quantise_feature')}(int k, float v)", "{",
            f"    uint16_t lo = 0, hi = {len(items)};",
            f"    if (k < 0 || k >= {dim}) return 0;",
            "    while (lo < hi) { /* NaN compares false throughout: -128 */",
            "        const uint16_t mid = (uint16_t)((lo + hi) >> 1);",
            f"        if (v >= {read_const(table, 'mid', 'float')}) lo = (uint16_t)(mid + 1u);",
            "        else hi = mid;",
            "    }",
            "    return (int8_t)((int)lo - 128);",
            "}", "",
            f"void {P('quantise')}(const float *x, int8_t *x_int)", "{",
            f"    for (int k = 0; k < {dim}; ++k) x_int[k] = {P('quantise_feature')}(k, x[k]);",
            "}", ""]


def _factor(api, const_attribute: str, read_const) -> tuple[list[str], str]:
    """(table lines, C expression of 2^s[k]): one literal when every feature shares its shift."""
    shifts = np.asarray(api.input_shifts, dtype=np.int64)
    if np.all(shifts == shifts[0]):
        return [], f"{float(2.0 ** shifts[0])!r}f"
    items = [f"{float(2.0 ** s)!r}f" for s in shifts.tolist()]
    rows = [", ".join(items[i:i + 8]) for i in range(0, len(items), 8)]
    table = api.sym("in_factor")
    return ([f"static const float {table}[{api.input_dim}]{const_attribute} = {{",
             *(f"    {row}," for row in rows), "};"], read_const(table, "k", "float"))


def _exponent_offsets(api, const_attribute: str, read_const) -> tuple[list[str], str]:
    """(table lines, C expression of 142 - s[k]): one literal when every feature shares its shift."""
    offsets = EXPONENT_OFFSET - np.asarray(api.input_shifts, dtype=np.int64)
    if np.all(offsets == offsets[0]):
        return [], str(int(offsets[0]))
    items = [str(int(c)) for c in offsets.tolist()]
    items += ["0"] * (-len(items) % 4)  # whole 32-bit words: a target that reads flash only in words reads it too
    rows = [", ".join(items[i:i + 16]) for i in range(0, len(items), 16)]
    table = api.sym("in_exponent")
    return (["/* 142 - s[k]: x[k] 2^s[k] = h 2^-(this - e) for a float of biased exponent e and 16-bit */",
             "/* significand top h */",
             f"static const uint8_t {table}[{len(items)}]{const_attribute} = {{",
             *(f"    {row}," for row in rows), "};"], read_const(table, "k", "uint8_t"))


def integer_quantiser(api, const_attribute: str, read_const, target=None) -> list[str]:
    """<prefix>_quantise_feature from the float's bits alone (no float arithmetic): with e the biased
    exponent and h = the top 16 bits of the 24-bit significand, |x| 2^s = h 2^-j + (the low byte) 2^-(j+8),
    j = 142 - s - e. j > 16: |x| 2^s < 1/2, the answer 0; j <= 0: |x| 2^s >= 2^15, saturated (NaN: the
    missing code). Otherwise round half up of a positive value is (q >> 1) + (q & 1) with q = h >> (j - 1)
    (the low byte cannot carry into the result); of a negative value the magnitude rounds half down, which
    is the same with h - 1 in place of h when the low byte is 0 (only then can |x| 2^s sit on a half)."""
    P, x_t = api.sym, api.input_ctype
    top = 2 ** (INPUT_BITS[x_t] - 1)
    table, offset = _exponent_offsets(api, const_attribute, read_const)
    core = P("quantise_bits")
    offsets = EXPONENT_OFFSET - np.asarray(api.input_shifts, dtype=np.int64)
    shared = bool(np.all(offsets == offsets[0]))
    # the target's own loop (the AVR's in assembly), else the C loop
    loop = (None if target is None else
            target.float_quantise(api, None if shared else P("in_exponent"), int(offsets[0]) if shared else None))
    return [*table,
            "/* feature k's integer from the bits u of its float; offset: 142 - s[k] */",
            f"static inline __attribute__((always_inline)) {x_t} {core}(uint32_t u, uint8_t offset)", "{",
            "    const uint16_t h = (uint16_t)(u >> 16); /* sign, exponent, the significand's top 7 bits */",
            "    const uint8_t e = (uint8_t)((uint8_t)(h >> 8) << 1) | (uint8_t)((uint8_t)h >> 7);",
            "    const uint8_t shift = (uint8_t)(offset - e - 1); /* j - 1: below 16 exactly when 1 <= j <= 16 */",
            "    uint16_t q;",
            "    if (e == 0) return 0; /* zero or subnormal: |x| 2^s < 2^-26 */",
            "    if (shift >= 16) {",
            "        if (e < offset - 16) return 0; /* j > 16: |x| 2^s < 1/2 */",
            "        /* j <= 0: |x| 2^s >= 2^15, infinity or NaN */",
            f"        if (e == 255 && (u & 0x7FFFFFUL)) return -{top - 1} - 1; /* NaN: the missing-value code */",
            f"        return (h & 0x8000u) ? -{top - 1} : {top - 1};",
            "    }",
            "    q = (uint16_t)(u >> 8) | 0x8000u; /* the significand's top 16 bits */",
            "    if ((h & 0x8000u) && !(uint8_t)u) --q; /* negative: its magnitude's halves round down */",
            "    if (shift & 8) q >>= 8;",
            "    else if (q == 0xFFFFu) q = 0xFFFEu; /* (q + 1) / 2 = 32768 saturates to 32767, as 0xFFFE's does */",
            "    q >>= shift & 7;",
            "    q = (uint16_t)(q + 1u) >> 1;",
            *([f"    if (q > {top - 1}u) q = {top - 1}u;"] if top - 1 < 2 ** 15 - 1 else []),
            f"    return (h & 0x8000u) ? ({x_t})-(int16_t)q : ({x_t})q;",
            "}", "",
            f"{x_t} {P('quantise_feature')}(int k, float v)", "{",
            "    union { float f; uint32_t u; } bits;",
            f"    if (k < 0 || k >= {api.input_dim}) return 0;",
            "    bits.f = v;",
            f"    return {core}(bits.u, {offset});",
            "}", "",
            *(loop or [f"void {P('quantise')}(const float *x, {x_t} *x_int)", "{",
                       f"    for (int k = 0; k < {api.input_dim}; ++k) {{",
                       "        union { float f; uint32_t u; } bits;",
                       "        bits.f = x[k];",
                       f"        x_int[k] = {core}(bits.u, {offset});",
                       "    }", "}", ""])]


def float_quantiser(api, const_attribute: str, read_const) -> list[str]:
    """<prefix>_quantise_feature in float arithmetic (shifts beyond INTEGER_SHIFTS)."""
    P, x_t, dim = api.sym, api.input_ctype, api.input_dim
    top = 2 ** (INPUT_BITS[x_t] - 1)
    table, factor = _factor(api, const_attribute, read_const)
    return [*table,
            f"{x_t} {P('quantise_feature')}(int k, float v)", "{",
            "    float y;",
            f"    if (k < 0 || k >= {dim}) return 0;",
            f"    y = v * {factor}; /* exact: a power of two (or 0 / inf, which saturate alike) */",
            f"    if (y != y) return -{top - 1} - 1; /* NaN: the missing-value code, below every real value */",
            f"    if (y >= {top - 1.5!r}f) return {top - 1};",
            f"    if (y < {-top + 1.5!r}f) return -{top - 1};",
            "    if (y >= -0.5f && y < 0.5f) return 0; /* here y + 0.5f could round up to 1 */",
            "    {",
            "        const float r = y + 0.5f; /* exact for 0.5 <= |y| < 2^23 */",
            "        const int32_t t = (int32_t)r; /* toward zero: the floor is one less for negatives */",
            f"        return ({x_t})(t - ((float)t > r));",
            "    }", "}", "",
            f"void {P('quantise')}(const float *x, {x_t} *x_int)", "{",
            f"    for (int k = 0; k < {dim}; ++k) x_int[k] = {P('quantise_feature')}(k, x[k]);", "}", ""]


def source_lines(api, const_attribute: str, read_const, streaming: bool, target=None, shortcut=None) -> list[str]:
    """The definitions, after the entry points (``streaming``: predict_float feeds <prefix>_feed; ``target``:
    the CTarget, whose ``float_quantise`` may give <prefix>_quantise's loop; ``shortcut``: (static functions,
    body) of predict_float computing predict of the quantised row itself, CEmitter.predict_float_shortcut)."""
    P, x_t, dim = api.sym, api.input_ctype, api.input_dim
    if api.input_quantisation is not None:
        quantiser = affine_quantiser(api, const_attribute, read_const)
    else:
        shifts = np.asarray(api.input_shifts, dtype=np.int64)
        integer = bool(np.all((shifts >= INTEGER_SHIFTS[0]) & (shifts <= INTEGER_SHIFTS[1])))
        quantiser = (integer_quantiser(api, const_attribute, read_const, target) if integer
                     else float_quantiser(api, const_attribute, read_const))
    body = [FLOAT_SECTION, *quantiser, *(shortcut[0] if shortcut else []), f"int {P('predict_float')}(const float *x)",
            "{"]
    if shortcut:
        body += shortcut[1]
    elif streaming:
        body += [f"    {P('begin')}();",
                 f"    for (int k = 0; k < {dim}; ++k) {P('feed')}(k, {P('quantise_feature')}(k, x[k]));",
                 f"    return {P('end')}();"]
    else:
        body += [f"    static {x_t} x_int[{dim}];", f"    {P('quantise')}(x, x_int);",
                 f"    return {P('predict')}(x_int);"]
    body += ["}", ""]
    if api.float_guard is None:
        return body
    return [f"#if defined({api.float_guard}) || defined(ARDUINO)", *body, f"#endif /* {api.float_guard} */", ""]
