"""C for the front-end ops (``ir/ops/front_end/``: abs, sqrt, log, power_spectrum, log_mel_power) and the
fixed-point zero-crossing count: entries of ``C_CODE["fixed"]`` and ``C_CODE["float"]``, each the arithmetic its op
module defines."""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen.c_fixed import shift_c, store
from tinycc_ml.codegen.emitter import C_CODE, CEmitter
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.front_end.log import LN2_Q, TABLE_SCALE, log_table
from tinycc_ml.ir.ops.front_end.log_mel_power import frame_exponent, log_floor_q, quantised_weights
from tinycc_ml.ir.ops.front_end.sqrt import even_exponent
from tinycc_ml.ir.ops.signal.common import I16
from tinycc_ml.ir.ops.signal.kissfft import c_real_fft


def _scale(em: CEmitter, name: str) -> int:
    return em.graph.type(name).dtype.scale


def _each(node: Node, lines: list[str]) -> list[str]:
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{", *[f"    {line}" for line in lines], "}"]


def _float_each(function: str):
    """``function`` with {} where the element goes."""
    def code(em: CEmitter, node: Node) -> list[str]:
        (x,) = node.inputs
        value = function.format(em.at(x, "i"))
        return [f"for (long i = 0; i < {node.type.size}; ++i) {em.var(node.name)}[i] = {value};"]
    return code


def abs_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    value = shift_c(em, "(v < 0 ? -v : v)", _scale(em, x) - node.type.dtype.scale, 2**15)
    return _each(node, [f"const int32_t v = {em.at(x, 'i')};", store(em, node, "i", value)])


def isqrt_helper(em: CEmitter) -> str:
    """floor(sqrt(v)) of a uint32_t, bit by bit."""
    return c_helper(em, "isqrt32", """\
static uint32_t @isqrt32(uint32_t v)
{
    uint32_t root = 0, bit = UINT32_C(1) << 30;
    while (bit > v) bit >>= 2;
    while (bit) {
        if (v >= root + bit) {
            v -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return root;
}
""")


def sqrt_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    factor, e = even_exponent(_scale(em, x), node.type.dtype.scale)
    q = f"(uint32_t)v * {factor}u" if factor > 1 else "(uint32_t)v"
    limit = ((1 << 30) - 1) >> e if e >= 0 else None  # q 2^e at or above 2^30 saturates (its root is 2^15 or more)
    if limit == 0:  # every q >= 1 saturates; 0 stays 0 (no square root to take: the helper is not emitted)
        root = "(q ? UINT32_C(65536) : 0u)"
    elif limit is not None:
        root = f"q > UINT32_C({limit}) ? UINT32_C(65536) : {isqrt_helper(em)}((q << {e}) * 4u)"
    else:
        root = f"{isqrt_helper(em)}(q * 4u) >> {-e // 2}"
    return _each(node, [f"const int32_t v = {em.at(x, 'i')};",
                        f"const uint32_t q = v > 0 ? {q} : 0u;",
                        f"const uint32_t r = {root};",
                        store(em, node, "i", "(int32_t)((r + 1u) >> 1)")])


def log_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    table = em.add_const_array(em.sym("log_table"), log_table(), "int16_t",
                               f"ln(1 + i / 64) at scale 2^{TABLE_SCALE}, i = 0..64")
    rd = em.target.read_const
    helper = c_helper(em, f"log_q{TABLE_SCALE}", f"""\
/* ln(max(q, 1) 2^-14) at scale 2^{TABLE_SCALE}: q = m 2^k, m in [2^14, 2^15), a table of 65 points, linear between */
static int32_t @log_q{TABLE_SCALE}(int32_t q)
{{
    int32_t k = 0, lo, hi, f;
    if (q < 1) q = 1;
    while (q < 16384) {{
        q *= 2;
        --k;
    }}
    f = (q - 16384) & 255;
    lo = {rd(table, '(q - 16384) >> 8', 'int16_t')};
    hi = {rd(table, '((q - 16384) >> 8) + 1', 'int16_t')};
    return lo + (((hi - lo) * f + 128) >> 8) + k * INT32_C({LN2_Q});
}}
""")
    total = f"{helper}({em.at(x, 'i')}) + INT32_C({(14 - _scale(em, x)) * LN2_Q})"
    return _each(node, [store(em, node, "i", shift_c(em, f"({total})", TABLE_SCALE - node.type.dtype.scale))])


def power_spectrum_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    frames, length = em.graph.type(x).shape
    size = int(node.attrs["fft_length"])
    bins = size // 2 + 1
    fft = c_real_fft(em, I16, size)
    buffer = em.sym(f"power_frame_{length}_{size}")
    em.static_ram[buffer] = 2 * length + 2 * (size + 2)
    base = 2 * _scale(em, x) - node.type.dtype.scale - 2 * (size.bit_length() - 1)

    def power(indent: str, shifted: str) -> list[str]:
        """One bin: re^2 + im^2 in 32 bits (wrapping at 2^31 only for two -32768s: the same bits unsigned), shifted,
        saturated to 32767."""
        return [f"{indent}const int32_t re = spectrum[2 * k], im = spectrum[2 * k + 1];",
                f"{indent}const uint32_t e = (uint32_t)(re * re) + (uint32_t)(im * im);",
                f"{indent}const uint32_t y = {shifted};",
                f"{indent}{store(em, node, f'f * {bins} + k', '(int32_t)(y > 32767u ? 32767u : y)')}"]

    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static int16_t frame[{length}], spectrum[{size + 2}]; /* {buffer} */",
            *_frame_block_shift(em, x, length),
            f"    {fft}(frame, {length}, spectrum);",
            f"    const int r = 2 * b + ({base}); /* the shift of every bin's power: one case per frame */",
            "    if (r > 0 && r <= 31) {",
            "        const uint32_t half = UINT32_C(1) << (r - 1);",
            f"        for (long k = 0; k < {bins}; ++k) {{",
            *power("            ", "(e + half) >> r"), "        }",
            "    } else {",
            f"        for (long k = 0; k < {bins}; ++k) {{",
            *power("            ", "r <= 0 ? (-r >= 15 ? (e ? 32767u : 0u) : (e > (UINT32_C(32767) >> -r) ? 32767u : "
                   "e << -r)) : (r == 32 && e >= UINT32_C(2147483648) ? 1u : 0u)"), "        }",
            "    }",
            "}"]


def _frame_block_shift(em: CEmitter, x: str, length: int) -> list[str]:
    """The frame's block exponent b (power_spectrum's) and ``frame`` = the frame shifted left by b."""
    return ["    int32_t m = 0;",
            "    int b = 0;",
            f"    for (long i = 0; i < {length}; ++i) {{",
            f"        const int32_t v = {em.at(x, f'f * {length} + i')};",
            "        if ((v < 0 ? -v : v) > m) m = v < 0 ? -v : v;",
            "    }",
            "    if (m) while ((m << b) < 16384) ++b; /* the block exponent: the largest sample fills int16 */",
            f"    for (long i = 0; i < {length}; ++i) frame[i] = (int16_t)({em.at(x, f'f * {length} + i')} * "
            "(INT32_C(1) << b));"]


def _mel_bands(em: CEmitter, weights: np.ndarray, ctype: str, what: str) -> tuple[str, str, str]:
    """The filter bank as its bands: per mel its first bin and its count of bins (first to last non-zero weight),
    the weights of the bands one after another. (first, count, weights) array symbols."""
    firsts, counts, flat = [], [], []
    for row in weights:
        nonzero = np.flatnonzero(row)
        first = int(nonzero[0]) if nonzero.size else 0
        count = int(nonzero[-1]) - first + 1 if nonzero.size else 0
        firsts.append(first)
        counts.append(count)
        flat.extend(row[first:first + count])
    first_t = em.add_const_array(em.sym("mel_first"), np.array(firsts), "uint16_t", "each mel band's first bin")
    count_t = em.add_const_array(em.sym("mel_count"), np.array(counts), "uint16_t", "each mel band's bins")
    weight_t = em.add_const_array(em.sym(f"mel_{what}"), np.array(flat), ctype, f"the bands' {what}")
    return first_t, count_t, weight_t


def log_mel_base(em: CEmitter, node: Node) -> int:
    """E of a frame with block exponent 0 (each step of b adds 2): the frame's mel values are acc 2^-E."""
    (x,) = node.inputs
    return frame_exponent(0, _scale(em, x), quantised_weights(node.attrs["weights"])[1], int(node.attrs["fft_length"]))


def log_mel_loop(em: CEmitter, node: Node, energy: str) -> list[str]:
    """log_mel_power's mel sums, logs and floor for frame ``f``, whose exponent E is in ``exponent``: lines at four
    spaces' indent. ``energy``: the C of one bin's re^2 + im^2 (uint32_t, at most 2^31), ``{k}`` its index."""
    wq, s_w = quantised_weights(node.attrs["weights"])
    mels = wq.shape[0]
    rd = em.target.read_const
    first_t, count_t, weight_t = _mel_bands(em, wq, "uint16_t", f"weights_q{s_w}")
    table = em.add_const_array(em.sym("log_table"), log_table(), "int16_t",
                               f"ln(1 + i / 64) at scale 2^{TABLE_SCALE}, i = 0..64")
    helper = c_helper(em, f"log_sum_q{TABLE_SCALE}", f"""\
/* ln(acc 2^-exponent) at scale 2^{TABLE_SCALE}, acc > 0: acc = m 2^k, m its top 15 bits (truncated) in [2^14, 2^15), a
   table of 65 points, linear between */
static int32_t @log_sum_q{TABLE_SCALE}(uint64_t acc, int32_t exponent)
{{
    int32_t k = 0, lo, hi, f, i;
    uint32_t m;
    while (acc >> 32) {{
        acc >>= 8;
        k += 8;
    }}
    m = (uint32_t)acc;
    while (m >= 32768u) {{
        m >>= 1;
        ++k;
    }}
    while (m < 16384u) {{
        m <<= 1;
        --k;
    }}
    i = (int32_t)((m - 16384u) >> 8);
    f = (int32_t)((m - 16384u) & 255u);
    lo = {rd(table, 'i', 'int16_t')};
    hi = {rd(table, 'i + 1', 'int16_t')};
    return lo + (((hi - lo) * f + 128) >> 8) + (k + 14 - exponent) * INT32_C({LN2_Q});
}}
""")
    floor_q = log_floor_q(float(node.attrs["floor"]))
    value = shift_c(em, "y", TABLE_SCALE - node.type.dtype.scale)
    return ["    long pos = 0;",
            f"    for (long j = 0; j < {mels}; ++j) {{",
            f"        const long first = (long){rd(first_t, 'j', 'uint16_t')};",
            f"        const long count = (long){rd(count_t, 'j', 'uint16_t')};",
            "        uint64_t acc = 0;",
            "        int32_t y;",
            "        for (long t = 0; t < count; ++t) {",
            f"            const uint32_t e = {energy.format(k='first + t')};",
            f"            acc += (uint64_t)e * (uint32_t){rd(weight_t, 'pos + t', 'uint16_t')};",
            "        }",
            "        pos += count;",
            f"        y = acc ? {helper}(acc, exponent) : INT32_C({floor_q});",
            f"        if (y < INT32_C({floor_q})) y = INT32_C({floor_q}); /* the floor, ln(floor) at scale 2^15 */",
            f"        {store(em, node, f'f * {mels} + j', value)}",
            "    }"]


def log_mel_power_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    frames, length = em.graph.type(x).shape
    size = int(node.attrs["fft_length"])
    fft = c_real_fft(em, I16, size)
    buffer = em.sym(f"power_frame_{length}_{size}")
    em.static_ram[buffer] = 2 * length + 2 * (size + 2)
    re, im = "(int32_t)spectrum[2 * ({k})]", "(int32_t)spectrum[2 * ({k}) + 1]"  # int32: AVR's int is 16-bit
    energy = f"(uint32_t)({re} * {re}) + (uint32_t)({im} * {im})"
    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static int16_t frame[{length}], spectrum[{size + 2}]; /* {buffer} */",
            *_frame_block_shift(em, x, length),
            f"    {fft}(frame, {length}, spectrum);",
            f"    const int32_t exponent = 2 * b + ({log_mel_base(em, node)}); /* the frame's mel values: acc 2^-E */",
            *log_mel_loop(em, node, energy),
            "}"]


def log_mel_power_float(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    frames, length = em.graph.type(x).shape
    size = int(node.attrs["fft_length"])
    weights = np.asarray(node.attrs["weights"], dtype=np.float32)
    mels = weights.shape[0]
    fft = c_real_fft(em, em.graph.type(x).dtype, size)
    buffer = em.sym(f"power_spectrum_{size}")
    em.static_ram[buffer] = 4 * (size + 2)
    rd = em.target.read_const
    first_t, count_t, weight_t = _mel_bands(em, weights, "float", "weights")
    out = em.var(node.name)
    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static float spectrum[{size + 2}]; /* {buffer} */",
            "    long pos = 0;",
            f"    {fft}({em.var(x)} + f * {length}, {length}, spectrum);",
            f"    for (long j = 0; j < {mels}; ++j) {{",
            f"        const long first = (long){rd(first_t, 'j', 'uint16_t')};",
            f"        const long count = (long){rd(count_t, 'j', 'uint16_t')};",
            "        float acc = 0.0f;",
            "        for (long t = 0; t < count; ++t) {",
            "            const float re = spectrum[2 * (first + t)], im = spectrum[2 * (first + t) + 1];",
            f"            acc += (re * re + im * im) * {rd(weight_t, 'pos + t', 'float')};",
            "        }",
            "        pos += count;",
            f"        {out}[f * {mels} + j] = logf(fmaxf(acc, {float(node.attrs['floor'])!r}f));",
            "    }",
            "}"]


def power_spectrum_float(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    frames, length = em.graph.type(x).shape
    size = int(node.attrs["fft_length"])
    bins = size // 2 + 1
    fft = c_real_fft(em, em.graph.type(x).dtype, size)
    buffer = em.sym(f"power_spectrum_{size}")
    em.static_ram[buffer] = 4 * (size + 2)
    out = em.var(node.name)
    return [f"for (long f = 0; f < {frames}; ++f) {{",
            f"    static float spectrum[{size + 2}]; /* {buffer} */",
            f"    {fft}({em.var(x)} + f * {length}, {length}, spectrum);",
            f"    for (long k = 0; k < {bins}; ++k) {{",
            "        const float re = spectrum[2 * k], im = spectrum[2 * k + 1];",
            f"        {out}[f * {bins} + k] = re * re + im * im;",
            "    }",
            "}"]


def zero_crossings_fixed(em: CEmitter, node: Node) -> list[str]:
    (x,) = node.inputs
    samples, axes = em.graph.type(x).shape
    value = shift_c(em, "count", -node.type.dtype.scale, samples)
    return [f"for (long a = 0; a < {axes}; ++a) {{",
            "    int32_t count = 0;",
            f"    int above = {em.at(x, 'a')} >= 0;",
            f"    for (long i = 1; i < {samples}; ++i) {{",
            f"        const int now = {em.at(x, f'i * {axes} + a')} >= 0;",
            "        count += now != above;",
            "        above = now;",
            "    }",
            f"    {store(em, node, 'a', value)}",
            "}"]


C_CODE["fixed"].update({"abs": abs_fixed, "sqrt": sqrt_fixed, "log": log_fixed, "power_spectrum": power_spectrum_fixed,
                        "zero_crossings": zero_crossings_fixed, "log_mel_power": log_mel_power_fixed})
C_CODE["float"].update({"abs": _float_each("fabsf({})"), "sqrt": _float_each("sqrtf(fmaxf({}, 0.0f))"),
                        "log": _float_each("logf({})"),
                        "power_spectrum": power_spectrum_float, "log_mel_power": log_mel_power_float})
