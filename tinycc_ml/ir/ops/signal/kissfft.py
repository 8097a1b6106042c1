"""kissfft 1.3.0 as TFLite Micro builds it (``signal/src/kiss_fft_wrappers``: FIXED_POINT 16, FIXED_POINT 32 and
float), the arithmetic its real FFTs share: SignalRfft (``kiss_fftr``) and SignalIrfft (``kiss_fftri``). Not an op:
the numpy semantics and the C the two op modules call.

Restated from kissfft's conventions: a complex FFT of n points (a power of two) by decimation in time over radix-4
stages (a radix-2 stage last when n is not a power of 4), the input taken in the order the recursion reads it.
Fixed point (SAMP_MAX = 2^(bits-1) - 1, FRACBITS = bits - 1): before every butterfly each operand is divided by the
radix as ``sround(v * (SAMP_MAX / radix))``; a product of complex values rounds each part's sum of products
(``SAMPPROD``: int32 for 16 bits, wrapping; int64 for 32 bits) as ``(v + 2^(FRACBITS-1)) >> FRACBITS``; every
stored part wraps to its width (two's complement, as the C compilers do). Twiddles are ``floor(0.5 + SAMP_MAX
cos(phase))`` (and sin) in double, phase ``-2 pi k / n`` (negated for the inverse); float: ``(float) cos(phase)``,
no division, each operation rounded to float32 (C without contraction). The real transforms wrap the complex one
in kissfft's split with the super twiddles ``exp(-i pi ((k + 1) / n + 1/2))`` (phase negated for the inverse).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.signal.common import I16, I32, wrap
from tinycc_ml.ir.types import F32

MAX_FFT = 1 << 14
SCALAR_TYPES = (I16, I32, F32)
TENSOR_TYPES = {7: I16, 2: I32, 0: F32}  # TFLite's TensorType numbers of the option "T"


@lru_cache(maxsize=16)
def plan(n: int) -> tuple[tuple[tuple[int, int], ...], np.ndarray]:
    """The complex FFT of n points (a power of two): its stages (radix p, span m) from the first, and the input index
    each output slot starts from (kf_work's recursion)."""
    stages, rest = [], n
    while rest > 1:
        p = 4 if rest % 4 == 0 else 2
        rest //= p
        stages.append((p, rest))
    order = np.zeros(n, np.int64)

    def leaves(out: int, start: int, stride: int, depth: int) -> None:
        p, m = stages[depth]
        for q in range(p):
            if m == 1:
                order[out + q] = start + q * stride
            else:
                leaves(out + q * m, start + q * stride, stride * p, depth + 1)

    if n > 1:
        leaves(0, 0, 1, 0)
    return tuple(stages), order


class FixedArith:
    """kissfft's FIXED_POINT arithmetic of ``bits`` (16 or 32) on int64 numpy arrays."""

    def __init__(self, bits: int):
        self.bits, self.frac, self.one = bits, bits - 1, (1 << (bits - 1)) - 1
        self.product_bits = 32 if bits == 16 else 64  # SAMPPROD

    def array(self, v) -> np.ndarray:
        return np.asarray(v, np.int64)

    def round(self, v) -> np.ndarray:
        """sround of a SAMPPROD value: (v + 2^(FRACBITS-1)) >> FRACBITS, stored in the scalar."""
        v = wrap(v, self.product_bits) if self.product_bits == 32 else v
        total = wrap(v + (1 << (self.frac - 1)), 32) if self.product_bits == 32 else v + (1 << (self.frac - 1))
        return wrap(total >> self.frac, self.bits)

    def div(self, v, radix: int) -> np.ndarray:
        return self.round(v * (self.one // radix))

    def mul(self, ar, ai, br, bi):
        return self.round(ar * br - ai * bi), self.round(ar * bi + ai * br)

    def add(self, a, b):
        return wrap(a + b, self.bits)

    def sub(self, a, b):
        return wrap(a - b, self.bits)

    def neg(self, a):
        return wrap(-a, self.bits)

    def half(self, total):
        """HALF_OF of a sum or difference of two parts: int16 parts add as int (no wrap before the shift); int32
        parts wrap first."""
        return wrap(total >> 1, 16) if self.bits == 16 else wrap(total, 32) >> 1

    def cexp(self, phase: float) -> tuple[int, int]:
        return math.floor(0.5 + self.one * math.cos(phase)), math.floor(0.5 + self.one * math.sin(phase))


class FloatArith:
    """kissfft's float arithmetic: float32, every operation rounded once."""

    bits = 32

    def array(self, v) -> np.ndarray:
        return np.asarray(v, np.float32)

    def div(self, v, radix: int):
        return v

    def mul(self, ar, ai, br, bi):
        return ar * br - ai * bi, ar * bi + ai * br

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def neg(self, a):
        return -a

    def half(self, total):
        return total * np.float32(0.5)

    def cexp(self, phase: float) -> tuple[float, float]:
        return np.float32(math.cos(phase)), np.float32(math.sin(phase))


def arith_for(dtype):
    return FloatArith() if dtype == F32 else FixedArith(dtype.bits)


@lru_cache(maxsize=16)
def _tables(dtype_text: str, n: int, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """The twiddles (n, 2) and the real split's super twiddles (n // 2, 2), as kiss_fft(r)_alloc computes them."""
    arith = arith_for(F32 if dtype_text == "f32" else (I32 if dtype_text == "i32" else I16))
    sign = -1.0 if inverse else 1.0
    pi = math.pi
    kind = np.float32 if dtype_text == "f32" else np.int64
    twiddles = np.array([arith.cexp(sign * (-2 * pi * i / n)) for i in range(n)], kind).reshape(n, 2)
    supers = np.array([arith.cexp(sign * (-pi * ((i + 1) / n + 0.5))) for i in range(n // 2)], kind)
    return twiddles, supers.reshape(n // 2, 2)


def tables(dtype, n: int, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    return _tables(str(dtype), n, inverse)


def complex_fft(re, im, dtype, inverse: bool):
    """kiss_fft of rows of n complex values (re, im: (rows, n)), forward or inverse."""
    arith = arith_for(dtype)
    rows, n = re.shape
    stages, order = plan(n)
    tw, _ = tables(dtype, n, inverse)
    twr, twi = arith.array(tw[:, 0]), arith.array(tw[:, 1])
    re, im = arith.array(re)[:, order], arith.array(im)[:, order]
    stride_of = [math.prod(p for p, _ in stages[:s]) for s in range(len(stages))]
    for s in reversed(range(len(stages))):
        p, m = stages[s]
        fstride = stride_of[s]
        re, im = re.reshape(rows, fstride, p, m), im.reshape(rows, fstride, p, m)
        k = np.arange(m)
        a = [(arith.div(re[:, :, q], p), arith.div(im[:, :, q], p)) for q in range(p)]
        if p == 2:
            t = arith.mul(*a[1], twr[k * fstride], twi[k * fstride])
            out = [(arith.add(a[0][0], t[0]), arith.add(a[0][1], t[1])),
                   (arith.sub(a[0][0], t[0]), arith.sub(a[0][1], t[1]))]
        else:
            s0 = arith.mul(*a[1], twr[k * fstride], twi[k * fstride])
            s1 = arith.mul(*a[2], twr[2 * k * fstride], twi[2 * k * fstride])
            s2 = arith.mul(*a[3], twr[3 * k * fstride], twi[3 * k * fstride])
            s5 = (arith.sub(a[0][0], s1[0]), arith.sub(a[0][1], s1[1]))
            f0 = (arith.add(a[0][0], s1[0]), arith.add(a[0][1], s1[1]))
            s3 = (arith.add(s0[0], s2[0]), arith.add(s0[1], s2[1]))
            s4 = (arith.sub(s0[0], s2[0]), arith.sub(s0[1], s2[1]))
            if inverse:
                one = (arith.sub(s5[0], s4[1]), arith.add(s5[1], s4[0]))
                three = (arith.add(s5[0], s4[1]), arith.sub(s5[1], s4[0]))
            else:
                one = (arith.add(s5[0], s4[1]), arith.sub(s5[1], s4[0]))
                three = (arith.sub(s5[0], s4[1]), arith.add(s5[1], s4[0]))
            out = [(arith.add(f0[0], s3[0]), arith.add(f0[1], s3[1])), one,
                   (arith.sub(f0[0], s3[0]), arith.sub(f0[1], s3[1])), three]
        re = np.stack([o[0] for o in out], axis=2).reshape(rows, -1)
        im = np.stack([o[1] for o in out], axis=2).reshape(rows, -1)
    return re, im


def real_fft(frames, dtype, fft_length: int) -> np.ndarray:
    """kiss_fftr of rows of fft_length real values -> (rows, fft_length + 2): bins 0..n interleaved (re, im)."""
    arith = arith_for(dtype)
    frames = arith.array(frames)
    n = fft_length // 2
    _, supers = tables(dtype, n, False)
    re, im = complex_fft(frames[:, 0::2], frames[:, 1::2], dtype, False)
    out_re, out_im = np.zeros((len(re), n + 1), re.dtype), np.zeros((len(re), n + 1), re.dtype)
    dc_r, dc_i = arith.div(re[:, 0], 2), arith.div(im[:, 0], 2)
    out_re[:, 0], out_re[:, n] = arith.add(dc_r, dc_i), arith.sub(dc_r, dc_i)
    k = np.arange(1, n // 2 + 1)
    pk = (arith.div(re[:, k], 2), arith.div(im[:, k], 2))
    pnk = (arith.div(re[:, n - k], 2), arith.div(arith.neg(im[:, n - k]), 2))
    f1 = (arith.add(pk[0], pnk[0]), arith.add(pk[1], pnk[1]))
    f2 = (arith.sub(pk[0], pnk[0]), arith.sub(pk[1], pnk[1]))
    t = arith.mul(*f2, arith.array(supers[k - 1, 0]), arith.array(supers[k - 1, 1]))
    out_re[:, k], out_im[:, k] = arith.half(f1[0] + t[0]), arith.half(f1[1] + t[1])
    # k = n / 2 writes one slot twice: the second write stands, as in kissfft's loop
    out_re[:, n - k], out_im[:, n - k] = arith.half(f1[0] - t[0]), arith.half(t[1] - f1[1])
    return np.stack([out_re, out_im], axis=-1).reshape(len(re), 2 * (n + 1))


def inverse_real_fft(spectra, dtype, fft_length: int) -> np.ndarray:
    """kiss_fftri of rows of bins 0..n interleaved (re, im) -> (rows, fft_length) real values (float: divided by
    fft_length, as SignalIrfft's float kernel does)."""
    arith = arith_for(dtype)
    spectra = arith.array(spectra)
    n = fft_length // 2
    _, supers = tables(dtype, n, True)
    fr, fi = spectra[:, 0::2], spectra[:, 1::2]
    buf_re, buf_im = np.zeros((len(fr), n), fr.dtype), np.zeros((len(fr), n), fr.dtype)
    buf_re[:, 0] = arith.div(arith.add(fr[:, 0], fr[:, n]), 2)
    buf_im[:, 0] = arith.div(arith.sub(fr[:, 0], fr[:, n]), 2)
    k = np.arange(1, n // 2 + 1)
    fk = (arith.div(fr[:, k], 2), arith.div(fi[:, k], 2))
    fnkc = (arith.div(fr[:, n - k], 2), arith.div(arith.neg(fi[:, n - k]), 2))
    fek = (arith.add(fk[0], fnkc[0]), arith.add(fk[1], fnkc[1]))
    tmp = (arith.sub(fk[0], fnkc[0]), arith.sub(fk[1], fnkc[1]))
    fok = arith.mul(*tmp, arith.array(supers[k - 1, 0]), arith.array(supers[k - 1, 1]))
    buf_re[:, k], buf_im[:, k] = arith.add(fek[0], fok[0]), arith.add(fek[1], fok[1])
    buf_re[:, n - k], buf_im[:, n - k] = arith.sub(fek[0], fok[0]), arith.neg(arith.sub(fek[1], fok[1]))
    re, im = complex_fft(buf_re, buf_im, dtype, True)
    out = np.stack([re, im], axis=-1).reshape(len(re), 2 * n)
    return out / np.float32(fft_length) if isinstance(arith, FloatArith) else out


# ---------------------------------------------------------------- C

CTYPES = {"i16": "int16_t", "i32": "int32_t", "f32": "float"}


class CArith:
    """The C expressions of one scalar type's arithmetic (helpers emitted once per model)."""

    def __init__(self, em, dtype):
        self.dtype, self.ctype = dtype, CTYPES[str(dtype)]
        P = em.prefix + "_"
        if dtype == I16:
            c_helper(em, "sig_fft_prims", """\
/* kissfft's 16-bit fixed point: an int32 sum rounded to int16; a part divided by the radix; int16 wrap-around */
static inline int16_t @sig_round(int32_t v)
{
    return (int16_t)(uint16_t)(uint32_t)(((int32_t)((uint32_t)v + 16384u)) >> 15);
}

static inline int16_t @sig_div(int16_t v, int32_t divider)
{
    return @sig_round((int32_t)v * divider);
}

static inline int16_t @sig_add(int16_t a, int16_t b)
{
    return (int16_t)(uint16_t)((uint16_t)a + (uint16_t)b);
}

static inline int16_t @sig_sub(int16_t a, int16_t b)
{
    return (int16_t)(uint16_t)((uint16_t)a - (uint16_t)b);
}
""")
            self.names = {f: f"{P}sig_{f}" for f in ("round", "div", "add", "sub")}
        elif dtype == I32:
            c_helper(em, "sig_fft32_prims", """\
/* kissfft's 32-bit fixed point: an int64 sum rounded to int32; a part divided by the radix; int32 wrap-around */
static inline int32_t @sig32_round(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)((v + INT64_C(1073741824)) >> 31);
}

static inline int32_t @sig32_div(int32_t v, int64_t divider)
{
    return @sig32_round((int64_t)v * divider);
}

static inline int32_t @sig32_add(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

static inline int32_t @sig32_sub(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b);
}
""")
            self.names = {f: f"{P}sig32_{f}" for f in ("round", "div", "add", "sub")}

    def div(self, v: str, radix: int) -> str:
        if self.dtype == F32:
            return v
        return f"{self.names['div']}({v}, {((1 << (self.dtype.bits - 1)) - 1) // radix})"

    def mul(self, ar: str, ai: str, br: str, bi: str) -> tuple[str, str]:
        if self.dtype == F32:
            return f"{ar} * {br} - {ai} * {bi}", f"{ar} * {bi} + {ai} * {br}"
        wide = "int32_t" if self.dtype == I16 else "int64_t"
        rnd = self.names["round"]
        return (f"{rnd}(({wide}){ar} * {br} - ({wide}){ai} * {bi})",
                f"{rnd}(({wide}){ar} * {bi} + ({wide}){ai} * {br})")

    def add(self, a: str, b: str) -> str:
        return f"{a} + {b}" if self.dtype == F32 else f"{self.names['add']}({a}, {b})"

    def sub(self, a: str, b: str) -> str:
        return f"{a} - {b}" if self.dtype == F32 else f"{self.names['sub']}({a}, {b})"

    def neg(self, a: str) -> str:
        if self.dtype == F32:
            return f"-{a}"
        if self.dtype == I16:
            return f"(int16_t)(uint16_t)(0u - (uint16_t){a})"
        return f"(int32_t)(0u - (uint32_t){a})"

    def half(self, a: str, b: str, op: str) -> str:
        """HALF_OF(a op b)."""
        if self.dtype == F32:
            return f"({a} {op} {b}) * 0.5f"
        if self.dtype == I16:
            return f"(int16_t)(((int32_t){a} {op} {b}) >> 1)"
        return f"((int32_t)((uint32_t){a} {op} (uint32_t){b})) >> 1"


def c_complex_fft(em, dtype, n: int, inverse: bool) -> str:
    """``void fn(const T *in, long length, T *out)``: kiss_fft of n complex values read from ``in`` as 2n scalars
    (those at ``length`` and beyond read as 0) into ``out`` (2n scalars)."""
    suffix = f"{'i' if inverse else ''}{str(dtype)}_{n}"
    name = f"sig_cfft_{suffix}"
    if em.sym(name) in em.helpers:
        return em.sym(name)
    ar = CArith(em, dtype)
    T = ar.ctype
    stages, order = plan(n)
    tw, _ = tables(dtype, n, inverse)
    rd = em.target.read_const
    index_type = "int16_t" if n <= 32768 else "int32_t"
    order_t = em.add_const_array(em.sym(f"sig_fft{n}_order"), order, index_type,
                                 f"the {n}-point complex FFT's input index of each slot")
    tw_t = em.add_const_array(em.sym(f"sig_twiddles_{suffix}"), tw, T,
                              f"the {n}-point {'inverse ' if inverse else ''}FFT's twiddles (cos, sin)")

    def twiddle(index: str) -> tuple[str, str]:
        return rd(tw_t, f"2 * ({index})", T), rd(tw_t, f"2 * ({index}) + 1", T)

    def cmul(out: str, re: str, im: str, index: str) -> list[str]:
        r, i = ar.mul(re, im, *twiddle(index))
        return [f"            const {T} {out}r = {r};", f"            const {T} {out}i = {i};"]

    body = ["    long k;", f"    for (k = 0; k < {n}; ++k) {{",
            f"        const long j = 2 * (long){rd(order_t, 'k', index_type)};",
            "        out[2 * k] = j < length ? in[j] : 0;",
            "        out[2 * k + 1] = j + 1 < length ? in[j + 1] : 0;", "    }"]
    for s in reversed(range(len(stages))):
        p, m = stages[s]
        fstride = math.prod(q for q, _ in stages[:s])
        body += [f"    /* radix-{p} butterflies: {fstride} block(s) of {p} x {m} */",
                 f"    for (long b = 0; b < {fstride}; ++b) {{", f"        for (k = 0; k < {m}; ++k) {{",
                 f"            {T} *f = out + 2 * (b * {p * m} + k);"]
        for q in range(p):
            body.append(f"            const {T} a{q}r = {ar.div(f'f[{2 * q * m}]', p)}, "
                        f"a{q}i = {ar.div(f'f[{2 * q * m + 1}]', p)};")
        if p == 2:
            body += cmul("t", "a1r", "a1i", f"k * {fstride}")
            body += [f"            f[0] = {ar.add('a0r', 'tr')};", f"            f[1] = {ar.add('a0i', 'ti')};",
                     f"            f[{2 * m}] = {ar.sub('a0r', 'tr')};",
                     f"            f[{2 * m + 1}] = {ar.sub('a0i', 'ti')};"]
        else:
            body += cmul("s0", "a1r", "a1i", f"k * {fstride}") + cmul("s1", "a2r", "a2i", f"2 * k * {fstride}") \
                + cmul("s2", "a3r", "a3i", f"3 * k * {fstride}")
            one_r, one_i = (ar.sub("s5r", "s4i"), ar.add("s5i", "s4r")) if inverse else \
                (ar.add("s5r", "s4i"), ar.sub("s5i", "s4r"))
            three_r, three_i = (ar.add("s5r", "s4i"), ar.sub("s5i", "s4r")) if inverse else \
                (ar.sub("s5r", "s4i"), ar.add("s5i", "s4r"))
            body += [f"            const {T} s5r = {ar.sub('a0r', 's1r')}, s5i = {ar.sub('a0i', 's1i')};",
                     f"            const {T} f0r = {ar.add('a0r', 's1r')}, f0i = {ar.add('a0i', 's1i')};",
                     f"            const {T} s3r = {ar.add('s0r', 's2r')}, s3i = {ar.add('s0i', 's2i')};",
                     f"            const {T} s4r = {ar.sub('s0r', 's2r')}, s4i = {ar.sub('s0i', 's2i')};",
                     f"            f[0] = {ar.add('f0r', 's3r')};", f"            f[1] = {ar.add('f0i', 's3i')};",
                     f"            f[{2 * m}] = {one_r};", f"            f[{2 * m + 1}] = {one_i};",
                     f"            f[{4 * m}] = {ar.sub('f0r', 's3r')};",
                     f"            f[{4 * m + 1}] = {ar.sub('f0i', 's3i')};",
                     f"            f[{6 * m}] = {three_r};", f"            f[{6 * m + 1}] = {three_i};"]
        body += ["        }", "    }"]
    return c_helper(em, name, "\n".join([
        f"/* kiss_fft of {n} complex {T} values ({'inverse' if inverse else 'forward'}): in read as {2 * n} scalars, "
        "0 from length on */",
        f"static void @{name}(const {T} *in, long length, {T} *out)", "{", *body, "}", ""]))


def c_real_fft(em, dtype, fft_length: int) -> str:
    """``void fn(const T *x, long length, T *out)``: kiss_fftr of x zero-padded to fft_length; out n + 1 bins."""
    kernel = em.target.real_fft(em, dtype, fft_length)
    if kernel is not None:
        return kernel
    name = f"sig_rfft_{dtype}_{fft_length}"
    if em.sym(name) in em.helpers:
        return em.sym(name)
    n = fft_length // 2
    cfft = c_complex_fft(em, dtype, n, False)
    ar = CArith(em, dtype)
    T = ar.ctype
    _, supers = tables(dtype, n, False)
    rd = em.target.read_const
    sup_t = em.add_const_array(em.sym(f"sig_supers_{dtype}_{n}"), supers, T,
                               "the real split's twiddles (cos, sin)")
    work = em.sym(f"sig_rfft_work_{dtype}_{fft_length}")
    em.static_ram[work] = 2 * n * (2 if dtype == I16 else 4)
    sr, si = rd(sup_t, "2 * (k - 1)", T), rd(sup_t, "2 * (k - 1) + 1", T)
    tr, ti = ar.mul("f2r", "f2i", sr, si)
    body = [f"    static {T} w[{2 * n}]; /* {work}: the complex FFT's slots (re, im) */", "    long k;",
            f"    {cfft}(x, length, w);", "    {",
            f"        const {T} dr = {ar.div('w[0]', 2)}, di = {ar.div('w[1]', 2)};",
            f"        out[0] = {ar.add('dr', 'di')};", "        out[1] = 0;",
            f"        out[{2 * n}] = {ar.sub('dr', 'di')};", f"        out[{2 * n + 1}] = 0;", "    }",
            f"    for (k = 1; k <= {n // 2}; ++k) {{",
            f"        const {T} pr = {ar.div('w[2 * k]', 2)}, pi = {ar.div('w[2 * k + 1]', 2)};",
            f"        const {T} nr = {ar.div(f'w[2 * ({n} - k)]', 2)};",
            f"        const {T} ni = {ar.div(ar.neg(f'w[2 * ({n} - k) + 1]'), 2)};",
            f"        const {T} f1r = {ar.add('pr', 'nr')}, f1i = {ar.add('pi', 'ni')};",
            f"        const {T} f2r = {ar.sub('pr', 'nr')}, f2i = {ar.sub('pi', 'ni')};",
            f"        const {T} tr = {tr};", f"        const {T} ti = {ti};",
            f"        out[2 * k] = {ar.half('f1r', 'tr', '+')};",
            f"        out[2 * k + 1] = {ar.half('f1i', 'ti', '+')};",
            f"        out[2 * ({n} - k)] = {ar.half('f1r', 'tr', '-')};",
            f"        out[2 * ({n} - k) + 1] = {ar.half('ti', 'f1i', '-')};", "    }"]
    return c_helper(em, name, "\n".join([
        f"/* kiss_fftr of {fft_length} {T} samples: x ({fft_length} at most, zero-padded), out {n + 1} bins "
        "(re, im) */",
        f"static void @{name}(const {T} *x, long length, {T} *out)", "{", *body, "}", ""]))


def c_inverse_real_fft(em, dtype, fft_length: int) -> str:
    """``void fn(const T *spectrum, T *out)``: kiss_fftri of n + 1 bins into fft_length samples (float: divided by
    fft_length)."""
    name = f"sig_irfft_{dtype}_{fft_length}"
    if em.sym(name) in em.helpers:
        return em.sym(name)
    n = fft_length // 2
    cfft = c_complex_fft(em, dtype, n, True)
    ar = CArith(em, dtype)
    T = ar.ctype
    _, supers = tables(dtype, n, True)
    rd = em.target.read_const
    sup_t = em.add_const_array(em.sym(f"sig_isupers_{dtype}_{n}"), supers, T,
                               "the inverse real split's twiddles (cos, sin)")
    work = em.sym(f"sig_irfft_work_{dtype}_{fft_length}")
    em.static_ram[work] = 2 * n * (2 if dtype == I16 else 4)
    sr, si = rd(sup_t, "2 * (k - 1)", T), rd(sup_t, "2 * (k - 1) + 1", T)
    okr, oki = ar.mul("tr", "ti", sr, si)
    body = [f"    static {T} w[{2 * n}]; /* {work}: the complex FFT's input (re, im) */", "    long k;",
            f"    w[0] = {ar.div(ar.add('f[0]', f'f[{2 * n}]'), 2)};",
            f"    w[1] = {ar.div(ar.sub('f[0]', f'f[{2 * n}]'), 2)};",
            f"    for (k = 1; k <= {n // 2}; ++k) {{",
            f"        const {T} kr = {ar.div('f[2 * k]', 2)}, ki = {ar.div('f[2 * k + 1]', 2)};",
            f"        const {T} cr = {ar.div(f'f[2 * ({n} - k)]', 2)};",
            f"        const {T} ci = {ar.div(ar.neg(f'f[2 * ({n} - k) + 1]'), 2)};",
            f"        const {T} er = {ar.add('kr', 'cr')}, ei = {ar.add('ki', 'ci')};",
            f"        const {T} tr = {ar.sub('kr', 'cr')}, ti = {ar.sub('ki', 'ci')};",
            f"        const {T} okr = {okr};", f"        const {T} oki = {oki};",
            f"        w[2 * k] = {ar.add('er', 'okr')};", f"        w[2 * k + 1] = {ar.add('ei', 'oki')};",
            f"        w[2 * ({n} - k)] = {ar.sub('er', 'okr')};",
            f"        w[2 * ({n} - k) + 1] = {ar.neg('(' + ar.sub('ei', 'oki') + ')')};", "    }",
            f"    {cfft}(w, {2 * n}, out);"]
    if dtype == F32:
        body += [f"    for (k = 0; k < {2 * n}; ++k)", f"        out[k] /= {float(fft_length)!r}f;"]
    return c_helper(em, name, "\n".join([
        f"/* kiss_fftri of {n + 1} {T} bins (re, im) into {fft_length} samples"
        f"{' divided by ' + str(fft_length) if dtype == F32 else ''} */",
        f"static void @{name}(const {T} *f, {T} *out)", "{", *body, "}", ""]))
