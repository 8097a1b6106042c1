"""SignalRfft: the real FFT of int16 frames (zero-padded to fft_length), as int16 complex bins 0..fft_length/2
interleaved (re, im): TFLite Micro's int16 RFFT, which is kissfft's fixed-point real FFT (FIXED_POINT 16).

The arithmetic, restated here from kissfft's conventions: the frame's samples taken in pairs are a complex
sequence of n = fft_length / 2 points, transformed by decimation in time over radix-4 stages (a radix-2 stage
last when n is not a power of 4). Before every butterfly each operand is divided by the radix as
``(v * (32767 / radix) + 2^14) >> 15``; a product of complex values rounds each part's int32 sum the same way;
every stored part wraps to int16. Twiddles are ``floor(0.5 + 32767 cos(-2 pi k / n))`` (and sin). The real
spectrum comes from the complex one by kissfft's split: both halves divided by 2, their sum and difference, the
difference times the super twiddles ``exp(-i pi ((k + 1) / n + 1/2))``, halved (an arithmetic shift).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import I16, INTEGER_ONLY, declared_result, need_type, with_rows, wrap

TENSOR_INT16 = 7  # TFLite's TensorType of the option "T"
MAX_FFT = 1 << 14


@lru_cache(maxsize=8)
def plan(n: int) -> tuple[tuple[tuple[int, int], ...], np.ndarray, np.ndarray, np.ndarray]:
    """The complex FFT of n points (a power of two): its stages (radix p, span m) from the first, the input index
    each output slot starts from, the twiddles (n, 2) and the real split's super twiddles (n // 2, 2)."""
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

    leaves(0, 0, 1, 0)

    def cexp(phase: float) -> list[int]:
        return [math.floor(0.5 + 32767 * math.cos(phase)), math.floor(0.5 + 32767 * math.sin(phase))]

    pi = math.pi
    twiddles = np.array([cexp(-2 * pi * i / n) for i in range(n)], np.int64)
    supers = np.array([cexp(-pi * ((i + 1) / n + 0.5)) for i in range(n // 2)], np.int64)
    return tuple(stages), order, twiddles, supers


def _round(v) -> np.ndarray:
    """kissfft's sround of an int32 product sum: (v + 2^14) >> 15, stored in int16."""
    return wrap(wrap(v + (1 << 14), 32) >> 15, 16)


def _divide(v, radix: int) -> np.ndarray:
    return _round(v * (32767 // radix))


def _cmul(ar, ai, br, bi):
    return _round(wrap(ar * br - ai * bi, 32)), _round(wrap(ar * bi + ai * br, 32))


def rfft(x, fft_length: int) -> np.ndarray:
    """Rows of int16 frames (rows, ..., L) -> (rows, ..., fft_length + 2) int16."""
    x = np.asarray(x, np.int64)
    lead, length = x.shape[:-1], x.shape[-1]
    frames = np.zeros((int(np.prod(lead, dtype=np.int64)), fft_length), np.int64)
    frames[:, :length] = x.reshape(-1, length)
    n = fft_length // 2
    stages, order, tw, supers = plan(n)
    re, im = frames[:, 0::2][:, order], frames[:, 1::2][:, order]
    stride_of = [math.prod(p for p, _ in stages[:s]) for s in range(len(stages))]
    for s in reversed(range(len(stages))):
        p, m = stages[s]
        fstride = stride_of[s]
        re, im = re.reshape(len(re), fstride, p, m), im.reshape(len(im), fstride, p, m)
        k = np.arange(m)
        a = [(_divide(re[:, :, q], p), _divide(im[:, :, q], p)) for q in range(p)]
        if p == 2:
            t = _cmul(*a[1], tw[k * fstride, 0], tw[k * fstride, 1])
            out = [(wrap(a[0][0] + t[0], 16), wrap(a[0][1] + t[1], 16)),
                   (wrap(a[0][0] - t[0], 16), wrap(a[0][1] - t[1], 16))]
        else:
            s0 = _cmul(*a[1], tw[k * fstride, 0], tw[k * fstride, 1])
            s1 = _cmul(*a[2], tw[2 * k * fstride, 0], tw[2 * k * fstride, 1])
            s2 = _cmul(*a[3], tw[3 * k * fstride, 0], tw[3 * k * fstride, 1])
            s5 = (wrap(a[0][0] - s1[0], 16), wrap(a[0][1] - s1[1], 16))
            f0 = (wrap(a[0][0] + s1[0], 16), wrap(a[0][1] + s1[1], 16))
            s3 = (wrap(s0[0] + s2[0], 16), wrap(s0[1] + s2[1], 16))
            s4 = (wrap(s0[0] - s2[0], 16), wrap(s0[1] - s2[1], 16))
            out = [(wrap(f0[0] + s3[0], 16), wrap(f0[1] + s3[1], 16)),
                   (wrap(s5[0] + s4[1], 16), wrap(s5[1] - s4[0], 16)),
                   (wrap(f0[0] - s3[0], 16), wrap(f0[1] - s3[1], 16)),
                   (wrap(s5[0] - s4[1], 16), wrap(s5[1] + s4[0], 16))]
        re = np.stack([o[0] for o in out], axis=2).reshape(len(re), -1)
        im = np.stack([o[1] for o in out], axis=2).reshape(len(im), -1)
    out_re, out_im = np.zeros((len(re), n + 1), np.int64), np.zeros((len(re), n + 1), np.int64)
    dc_r, dc_i = _divide(re[:, 0], 2), _divide(im[:, 0], 2)
    out_re[:, 0], out_re[:, n] = wrap(dc_r + dc_i, 16), wrap(dc_r - dc_i, 16)
    k = np.arange(1, n // 2 + 1)
    pk = (_divide(re[:, k], 2), _divide(im[:, k], 2))
    pnk = (_divide(re[:, n - k], 2), _divide(wrap(-im[:, n - k], 16), 2))
    f1 = (wrap(pk[0] + pnk[0], 16), wrap(pk[1] + pnk[1], 16))
    f2 = (wrap(pk[0] - pnk[0], 16), wrap(pk[1] - pnk[1], 16))
    t = _cmul(*f2, supers[k - 1, 0], supers[k - 1, 1])
    out_re[:, k], out_im[:, k] = wrap((f1[0] + t[0]) >> 1, 16), wrap((f1[1] + t[1]) >> 1, 16)
    out_re[:, n - k], out_im[:, n - k] = wrap((f1[0] - t[0]) >> 1, 16), wrap((t[1] - f1[1]) >> 1, 16)
    spectrum = np.stack([out_re, out_im], axis=-1).reshape(len(re), 2 * (n + 1))
    return spectrum.reshape(*lead, 2 * (n + 1))


def _infer(ts, attrs, declared):
    (x,) = ts
    need_type(x, I16, "the frames")
    size = int(attrs["fft_length"])
    need(4 <= size <= MAX_FFT and size & (size - 1) == 0, f"fft_length {size} is not a power of two in [4, {MAX_FFT}]")
    need(x.rank >= 1 and x.shape[-1] <= size, f"frames of {x.shape[-1] if x.rank else 0} samples for fft_length {size}")
    return declared_result(declared, (*x.shape[:-1], size + 2), I16, x.layout)


def _fixed(call):
    return rfft(with_rows(call.ins, call.in_types)[0], int(call.attrs["fft_length"]))


def c_rfft(em, size: int) -> str:
    """The int16 real FFT of ``size`` points as a C function of the model (its tables in constant memory)."""
    n = size // 2
    stages, order, tw, supers = plan(n)
    rd = em.target.read_const
    order_t = em.add_const_array(em.sym(f"sig_rfft{size}_order"), order, "int16_t" if n <= 32768 else "int32_t",
                                 f"the {n}-point complex FFT's input index of each slot")
    tw_t = em.add_const_array(em.sym(f"sig_rfft{size}_twiddles"), tw, "int16_t", "twiddles (cos, sin) x 32767")
    sup_t = em.add_const_array(em.sym(f"sig_rfft{size}_supers"), supers, "int16_t",
                               "the real split's twiddles (cos, sin) x 32767")
    work = em.sym(f"sig_rfft{size}_work")
    em.static_ram[work] = 4 * n
    c_helper(em, "sig_fft_prims", """\
/* kissfft's fixed-point steps: an int32 sum rounded to int16; a part divided by the radix; int16 wrap-around */
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
    P = em.prefix + "_"
    rnd, div, add, sub = (f"{P}sig_{f}" for f in ("round", "div", "add", "sub"))

    def twiddle(index: str) -> tuple[str, str]:
        return rd(tw_t, f"2 * ({index})", "int16_t"), rd(tw_t, f"2 * ({index}) + 1", "int16_t")

    def cmul(out: str, ar: str, ai: str, index: str) -> list[str]:
        br, bi = twiddle(index)
        return [f"            const int16_t {out}r = {rnd}((int32_t){ar} * {br} - (int32_t){ai} * {bi});",
                f"            const int16_t {out}i = {rnd}((int32_t){ar} * {bi} + (int32_t){ai} * {br});"]

    body = [f"    static int16_t w[{2 * n}]; /* {work}: the complex FFT's slots (re, im) */",
            "    long k;",
            f"    for (k = 0; k < {n}; ++k) {{",
            f"        const long j = 2 * (long){rd(order_t, 'k', 'int16_t' if n <= 32768 else 'int32_t')};",
            "        w[2 * k] = j < length ? x[j] : 0;",
            "        w[2 * k + 1] = j + 1 < length ? x[j + 1] : 0;", "    }"]
    for s in reversed(range(len(stages))):
        p, m = stages[s]
        fstride = math.prod(q for q, _ in stages[:s])
        d = 32767 // p
        body += [f"    /* radix-{p} butterflies: {fstride} block(s) of {p} x {m} */",
                 f"    for (long b = 0; b < {fstride}; ++b) {{", f"        for (k = 0; k < {m}; ++k) {{",
                 f"            int16_t *f = w + 2 * (b * {p * m} + k);"]
        for q in range(p):
            body.append(f"            const int16_t a{q}r = {div}(f[{2 * q * m}], {d}), "
                        f"a{q}i = {div}(f[{2 * q * m + 1}], {d});")
        if p == 2:
            body += cmul("t", "a1r", "a1i", f"k * {fstride}")
            body += [f"            f[0] = {add}(a0r, tr);", f"            f[1] = {add}(a0i, ti);",
                     f"            f[{2 * m}] = {sub}(a0r, tr);", f"            f[{2 * m + 1}] = {sub}(a0i, ti);"]
        else:
            body += cmul("s0", "a1r", "a1i", f"k * {fstride}") + cmul("s1", "a2r", "a2i", f"2 * k * {fstride}") \
                + cmul("s2", "a3r", "a3i", f"3 * k * {fstride}")
            body += [f"            const int16_t s5r = {sub}(a0r, s1r), s5i = {sub}(a0i, s1i);",
                     f"            const int16_t f0r = {add}(a0r, s1r), f0i = {add}(a0i, s1i);",
                     f"            const int16_t s3r = {add}(s0r, s2r), s3i = {add}(s0i, s2i);",
                     f"            const int16_t s4r = {sub}(s0r, s2r), s4i = {sub}(s0i, s2i);",
                     f"            f[0] = {add}(f0r, s3r);", f"            f[1] = {add}(f0i, s3i);",
                     f"            f[{2 * m}] = {add}(s5r, s4i);", f"            f[{2 * m + 1}] = {sub}(s5i, s4r);",
                     f"            f[{4 * m}] = {sub}(f0r, s3r);", f"            f[{4 * m + 1}] = {sub}(f0i, s3i);",
                     f"            f[{6 * m}] = {sub}(s5r, s4i);", f"            f[{6 * m + 1}] = {add}(s5i, s4r);"]
        body += ["        }", "    }"]
    sr, si = rd(sup_t, "2 * (k - 1)", "int16_t"), rd(sup_t, "2 * (k - 1) + 1", "int16_t")
    body += ["    /* the real spectrum from the complex one (kissfft's split) */", "    {",
             f"        const int16_t dr = {div}(w[0], 16383), di = {div}(w[1], 16383);",
             f"        out[0] = {add}(dr, di);", "        out[1] = 0;",
             f"        out[{2 * n}] = {sub}(dr, di);", f"        out[{2 * n + 1}] = 0;", "    }",
             f"    for (k = 1; k <= {n // 2}; ++k) {{",
             f"        const int16_t pr = {div}(w[2 * k], 16383), pi = {div}(w[2 * k + 1], 16383);",
             f"        const int16_t nr = {div}(w[2 * ({n} - k)], 16383);",
             f"        const int16_t ni = {div}((int16_t)(uint16_t)(0u - (uint16_t)w[2 * ({n} - k) + 1]), 16383);",
             f"        const int16_t f1r = {add}(pr, nr), f1i = {add}(pi, ni);",
             f"        const int16_t f2r = {sub}(pr, nr), f2i = {sub}(pi, ni);",
             f"        const int16_t tr = {rnd}((int32_t)f2r * {sr} - (int32_t)f2i * {si});",
             f"        const int16_t ti = {rnd}((int32_t)f2r * {si} + (int32_t)f2i * {sr});",
             "        out[2 * k] = (int16_t)(((int32_t)f1r + tr) >> 1);",
             "        out[2 * k + 1] = (int16_t)(((int32_t)f1i + ti) >> 1);",
             f"        out[2 * ({n} - k)] = (int16_t)(((int32_t)f1r - tr) >> 1);",
             f"        out[2 * ({n} - k) + 1] = (int16_t)(((int32_t)ti - f1i) >> 1);", "    }"]
    name = f"sig_rfft{size}"
    return c_helper(em, name, "\n".join([
        f"/* the int16 real FFT of {size} points (kissfft's fixed point): x ({size} samples at most, zero-padded),",
        f" * out {n + 1} bins (re, im) */",
        f"static void @{name}(const int16_t *x, long length, int16_t *out)", "{", *body, "}", ""]))


def _c(em, node) -> list[str]:
    (x,) = node.inputs
    size = int(node.attrs["fft_length"])
    length = em.graph.type(x).shape[-1]
    frames = em.graph.type(x).size // length
    fn = c_rfft(em, size)
    return [f"for (long r = 0; r < {frames}; ++r)",
            f"    {fn}({em.var(x)} + r * {length}, {length}, {em.var(node.name)} + r * {size + 2});"]


register_op(OpDef(
    "signal_rfft", 1, _infer, lambda xs, attrs: rfft(np.asarray(xs[0])[None], int(attrs["fft_length"]))[0]
    .astype(np.float64), {"fft_length": "int"},
    "TFLite Micro's SignalRfft of int16 frames: kissfft's fixed-point real FFT, int16 bins (re, im)",
    fixed=_fixed, c={"fixed": _c}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalRfft")
def lower(low, options, ins, outs) -> None:
    kind = custom_int(options, "T", "SignalRfft", 0, 255)
    need(kind == TENSOR_INT16, f"SignalRfft: the {dict(((0, 'float32'), (2, 'int32'))).get(kind, kind)} RFFT is not "
         "supported yet (the int16 one is)")
    size = custom_int(options, "fft_length", "SignalRfft", 4, MAX_FFT)
    low.add("signal_rfft", [low.value(ins[0])], {"fft_length": size}, low.tensors[outs[0]])
