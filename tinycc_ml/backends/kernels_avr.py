"""Hand-tuned ATmega328P kernels, emitted through CTarget.fixed_kernel.

matvec (dense int16 or int8 weights in flash, int16 vector in RAM, product shift 0):
    offset-binary operands, w' = w + a (a = 2^15, or 2^7 for int8) stored in flash and
    x' = x + 2^15, so every partial product is an unsigned MUL. Then
        sum(w x) = sum(w' x') - 2^15 sum(w) - a sum(x')      (mod 2^32)
    The per-row constant -2^15 sum(w) is kept in flash and preloads the accumulators with the
    per-input term. Up to 5 rows share each load of x (20 accumulator registers, r2..r21),
    weights are laid out block by block, column-major inside a block, for LPM Z+; two columns
    per loop iteration. ~27.5 cycles/MAC for int16 weights, ~15.5 for int8. When the input
    clamp feeds only this kernel it stores x' and sum(x') itself (fused_clip).
sqdist (prototypes in flash, point in RAM, any product shift h <= 7):
    rshift(M - x, h) = Mh - xh - [Ml < xl] with M + 2^(h-1) = Mh 2^h + Ml and x = xh 2^h + xl
    (0 <= Ml, xl < 2^h): 16-bit operands and no shift in the loop; |d| <= 2^15 is proven by
    choose_scales, so |d|^2 is three unsigned MULs. 4 prototypes share each load of x.
clip, scale, exp_lut: the same expressions as c_fixed in 16-bit C, and int32 rounding shifts
    by 8 or more through byte moves (rshift_avr).
All are exact: the int32 sums are those of tinycc_ml.ir.fixed (which proves they fit), and
wrapping uint32 arithmetic gives the same bits.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.backends.c_emitter import CEmitter
from tinycc_ml.backends.c_fixed import rshift_c, store
from tinycc_ml.ir.fixed import clip_bounds
from tinycc_ml.ir.graph import Node

BLOCK = 5  # rows per pass over x: 5 x 4 accumulator bytes = r2..r21
SQD_BLOCK = 4  # prototypes per pass over the point


def _words(lines: list[str]) -> str:
    return "".join(f'    "{line}\\n"\n' for line in lines)


def _prologue(name: str, saved: list[str]) -> list[str]:
    return ([f".section .text.{name},\\\"ax\\\",@progbits", f".global {name}", f".type {name}, @function", f"{name}:"]
            + [f"push {r}" for r in saved])


def mac_asm(name: str, rows: int, wbits: int, x_offset: bool = False) -> str:
    """void name(const void *w /*flash*/, const int16_t *x, uint32_t *acc, uint16_t n): acc[0..rows) +=
    w'.x' over n columns; w' laid out column-major (rows values per column). Up to 5 rows: the
    accumulators take r2..r21, and one weight register suffices (lo byte's products before hi)."""
    acc = [f"r{r}" for r in range(2, 2 + 4 * rows)]
    saved = [r for r in acc if int(r[1:]) < 18] + ["r28", "r29"]
    body = _prologue(name, saved)
    # T keeps n's parity: r18 becomes an accumulator for 5 rows
    body += ["movw r30, r24", "movw r26, r22", "movw r24, r18", "movw r28, r20", "bst r18, 0"]
    body += [f"ldd {r}, Y+{i}" for i, r in enumerate(acc)]
    # two columns per iteration; odd n enters at the second copy
    body += ["push r28", "push r29", "clr r28", "adiw r24, 1", "lsr r25", "ror r24", "brtc 1f", "rjmp 4f"]
    column = _mac_column(rows, wbits, acc, x_offset)
    body += ["1:"] + column + ["4:"] + column
    # the body is longer than BRNE's reach
    body += ["sbiw r24, 1", "breq 2f", "rjmp 1b", "2:", "pop r29", "pop r28"]
    body += [f"std Y+{i}, {r}" for i, r in enumerate(acc)]
    body += ["clr r1"] + [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return f"void {name}(const void *w, const int16_t *x, uint32_t *acc, uint16_t n);\n__asm__(\n{_words(body)});\n"


def _mac_column(rows: int, wbits: int, acc: list[str], x_offset: bool) -> list[str]:
    body = ["ld r22, X+", "ld r23, X+"] + ([] if x_offset else ["subi r23, 0x80"])
    for q in range(rows):
        a0, a1, a2, a3 = acc[4 * q:4 * q + 4]
        body += ["lpm r29, Z+",
                 "mul r29, r22", f"add {a0}, r0", f"adc {a1}, r1", f"adc {a2}, r28", f"adc {a3}, r28",
                 "mul r29, r23", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28"]
        if wbits == 16:
            body += ["lpm r29, Z+",
                     "mul r29, r22", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28",
                     "mul r29, r23", f"add {a2}, r0", f"adc {a3}, r1"]
    return body


def sqd_asm(name: str, protos: int) -> str:
    """void name(const void *m /*flash: per k, per prototype: Mh lo, Mh hi, Ml*/, const uint8_t *xs
    /*per k: xh lo, xh hi, xl*/, uint32_t *acc, uint16_t n): acc[q] = sum over k of (Mh - xh - [Ml < xl])^2
    for up to 4 prototypes sharing each load of x."""
    acc = [f"r{r}" for r in range(2, 2 + 4 * protos)]
    saved = acc + ["r28", "r29"]
    body = _prologue(name, saved)
    body += ["movw r30, r24", "movw r26, r22", "movw r28, r20", "movw r24, r18", "push r28", "push r29"]
    body += [f"clr {r}" for r in acc] + ["clr r28", "1:", "ld r18, X+", "ld r19, X+", "ld r21, X+"]
    for q in range(protos):
        a0, a1, a2, a3 = acc[4 * q:4 * q + 4]
        body += ["lpm r22, Z+", "lpm r23, Z+", "lpm r20, Z+",
                 "cp r20, r21", "sbc r22, r18", "sbc r23, r19",
                 "sbrs r23, 7", "rjmp 3f", "com r23", "neg r22", "sbci r23, 0xff",
                 "3:", "mul r22, r22", f"add {a0}, r0", f"adc {a1}, r1", f"adc {a2}, r28", f"adc {a3}, r28",
                 "mul r23, r23", f"add {a2}, r0", f"adc {a3}, r1",
                 "mul r22, r23", f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28",
                 f"add {a1}, r0", f"adc {a2}, r1", f"adc {a3}, r28"]
    body += ["sbiw r24, 1", "breq 2f", "rjmp 1b", "2:", "pop r29", "pop r28"]
    body += [f"std Y+{i}, {r}" for i, r in enumerate(acc)]
    body += ["clr r1"] + [f"pop {r}" for r in reversed(saved)] + ["ret", ".text"]
    return (f"void {name}(const void *m, const uint8_t *xs, uint32_t *acc, uint16_t n);\n"
            f"__asm__(\n{_words(body)});\n")


def rshift_avr(em: CEmitter, expr: str, k: int) -> str:
    """rshift_c, cheaper on AVR: avr-gcc shifts an int32 one bit per 4-instruction loop iteration
    (91 cycles for >> 13). Shifts of 8 or more move whole bytes first; 13 to 15 join the high
    half shifted left and the low half shifted right."""
    if k < 8:
        return rshift_c(expr, k)
    name = em.sym(f"rs{k}")
    if name not in em.helpers:
        head = f"static inline int32_t {name}(int32_t v)\n{{\n    v += INT32_C({1 << (k - 1)});\n"
        if 13 <= k <= 15:  # v >> k = (v >> 16) * 2^(16-k) + (low 16 bits >> k), the parts do not overlap
            body = ("    int32_t hi = v >> 16;\n    __asm__(\"\" : \"+r\"(hi)); /* keep gcc from re-forming v >> k */\n"
                    f"    return (int32_t)((uint32_t)hi << {16 - k}) | (int32_t)((uint16_t)v >> {k});\n}}\n")
        else:
            whole = 8 * (k // 8)
            body = (f"    v >>= {whole};\n    __asm__(\"\" : \"+r\"(v)); /* keep the byte move apart */\n"
                    f"    return v >> {k - whole};\n}}\n")
        em.helpers[name] = head + body
    return f"{name}({expr})"


def clip_ok(em: CEmitter, node: Node) -> bool:
    (a,) = node.inputs
    dtype = em.graph.type(a).dtype
    return (em.graph.op(a) not in ("const", "sparse_const") and dtype.bits == 16 and node.type.dtype.bits == 16
            and dtype.scale == node.type.dtype.scale and node.type.rank == 1)


def fused_clip(em: CEmitter, name: str) -> bool:
    """A clip whose only use is a kernel mat-vec stores x + 2^15 and sums it for that kernel."""
    g = em.graph
    if g.op(name) != "clip" or any(name == n for _, n in g.outputs) or not clip_ok(em, g.node(name)):
        return False
    users = g.users(name)
    return (len(users) == 1 and g.op(users[0]) == "matvec" and g.node(users[0]).inputs[1] == name
            and matvec_ok(em, g.node(users[0])))


def blocks(rows: int, size: int = BLOCK) -> list[tuple[int, int]]:
    """(first row, rows) of each pass: blocks of ``size``, then the remainder."""
    return [(r, min(size, rows - r)) for r in range(0, rows, size)]


def offset_weights(A: np.ndarray, wbits: int) -> np.ndarray:
    """w' = w + 2^(wbits-1) as unsigned, laid out block by block, column-major inside a block."""
    off = (A.astype(np.int64) + (1 << (wbits - 1))).astype(np.uint16 if wbits == 16 else np.uint8)
    return np.concatenate([off[r:r + n].T.reshape(-1) for r, n in blocks(A.shape[0])])


def matvec_ok(em: CEmitter, node: Node) -> bool:
    a_name, x_name = node.inputs
    g = em.graph
    return (g.op(a_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and int(node.attrs.get("shift", 0)) == 0 and g.type(a_name).dtype.bits in (8, 16)
            and g.type(x_name).dtype.bits == 16 and g.type(a_name).shape[1] < 65536)


def kernel_matvec(em: CEmitter, node: Node) -> list[str]:
    a_name, x_name = node.inputs
    g = em.graph
    A = g.node(a_name).attrs["value"].astype(np.int64)
    wbits = g.type(a_name).dtype.bits
    out_shift = g.type(a_name).dtype.scale + g.type(x_name).dtype.scale - node.type.dtype.scale
    acc = em.sym("acc")
    return ["{", *mac_lines(em, A, wbits, a_name, x_name, acc, layout_key=a_name),
            f"    for (uint8_t r = 0; r < {A.shape[0]}; ++r)",
            "        " + store(em, node, "r", rshift_avr(em, f"(int32_t){acc}[r]", out_shift)),
            "}"]


def mac_lines(em: CEmitter, A: np.ndarray, wbits: int, label: str, x_name: str, acc: str, layout_key: str,
              fuse: bool = True) -> list[str]:
    """Lines leaving acc[r] = sum_k A[r][k] x[k] (mod 2^32) for the int matrix A, kept in flash."""
    rows, cols = A.shape
    wtype = "uint16_t" if wbits == 16 else "uint8_t"
    sym = em.add_const_array(em.sym(f"{label}_off"), offset_weights(A, wbits), wtype,
                             f"%{label}: {rows}x{cols} + {1 << (wbits - 1)}, 5-row blocks, column-major in a block")
    decode = (lambda e: f"(int16_t)({e} ^ 0x8000u)") if wbits == 16 else (lambda e: f"(int8_t)({e} ^ 0x80u)")
    em.kernel_layout[layout_key] = (sym, wtype, decode, [(r, n, r * cols, n, 1) for r, n in blocks(rows)])
    k_row = (-(A.sum(axis=1) << 15)) % (1 << 32)
    ksym = em.add_const_array(em.sym(f"{label}_k"), k_row.astype(np.uint32).view(np.int32), "int32_t",
                              f"%{label}: -2^15 * row sums (offset-binary correction)")
    em.scratch(acc, "uint32_t", rows)
    pre = fuse and fused_clip(em, x_name)  # x already holds x + 2^15, and its sum is in <prefix>_sx
    suffix = "o" if pre else ""
    for _, n in blocks(rows):
        name = em.sym(f"mac{n}w{wbits}{suffix}")
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, pre)
    x = em.var(x_name)
    if pre:
        lines = [f"    uint32_t sx = {em.sym('sx')}[0];"]
    else:
        lines = ["    uint32_t sx = 0;",
                 f"    for (uint16_t k = 0; k < {cols}; ++k) sx += (uint16_t)((uint16_t){x}[k] ^ 0x8000u);"]
    lines += [f"    sx <<= {15 if wbits == 16 else 7};",
              f"    for (uint8_t r = 0; r < {rows}; ++r) {acc}[r] = (uint32_t)pgm_read_dword(&{ksym}[r]) - sx;"]
    for r, n in blocks(rows):
        lines.append(f"    {em.sym(f'mac{n}w{wbits}{suffix}')}({sym} + {r * cols}, (const int16_t *){x}, {acc} + {r}, "
                     f"{cols});")
    return lines


def sqdist_dot_ok(em: CEmitter, node: Node) -> bool:
    """Distances as |M_j|^2 + |x|^2 - 2 M_j.x on the mat-vec kernel: exact when the differences are
    not shifted (then choose_scales proved k (|M| + |x|)^2 <= 2^30, so every partial sum fits)."""
    x_name, m_name = node.inputs
    g = em.graph
    return (int(node.attrs.get("shift", 0)) == 0 and g.op(m_name) == "const" and g.type(m_name).dtype.bits == 16
            and g.op(x_name) not in ("const", "sparse_const") and g.type(x_name).dtype.bits == 16
            and g.type(m_name).shape[0] < 65536 and g.type(m_name).shape[1] < 256)


def kernel_sqdist_dot(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    k, m = M.shape
    norms = em.add_const_array(em.sym(f"{m_name}_sq"), (M * M).sum(axis=0).astype(np.int32), "int32_t",
                               f"%{m_name}: squared norm of each prototype")
    acc, x = em.sym("acc"), em.var(x_name)
    out_shift = 2 * g.type(x_name).dtype.scale - node.type.dtype.scale
    return ["{", *mac_lines(em, M.T.copy(), 16, f"{m_name}_t", x_name, acc, layout_key=f"{m_name}:dot", fuse=False),
            "    uint32_t xx = 0;",
            f"    for (uint16_t k = 0; k < {k}; ++k) xx += (uint32_t)((int32_t){x}[k] * {x}[k]);",
            f"    for (uint8_t j = 0; j < {m}; ++j) {{",
            f"        const uint32_t d = (uint32_t)pgm_read_dword(&{norms}[j]) + xx - ({acc}[j] << 1);",
            "        " + store(em, node, "j", rshift_avr(em, "(int32_t)d", out_shift)),
            "    }",
            "}"]


def sqdist_ok(em: CEmitter, node: Node) -> bool:
    x_name, m_name = node.inputs
    g = em.graph
    return (g.op(m_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and g.type(m_name).dtype.bits == 16 and g.type(x_name).dtype.bits == 16
            and int(node.attrs.get("shift", 0)) <= 7 and g.type(m_name).shape[0] < 65536 // 3)


def split_prototypes(M: np.ndarray, h: int) -> np.ndarray:
    """(k, m) prototypes -> bytes for sqd_asm: per block of SQD_BLOCK prototypes, per dimension k,
    per prototype: Mh lo, Mh hi, Ml."""
    Mp = M.astype(np.int64) + ((1 << (h - 1)) if h else 0)
    mh, ml = Mp >> h, Mp & ((1 << h) - 1)
    out = np.empty(Mp.shape + (3,), np.uint8)
    u = mh & 0xFFFF
    out[..., 0], out[..., 1], out[..., 2] = u & 0xFF, u >> 8, ml
    return np.concatenate([out[:, j:j + n].reshape(-1) for j, n in blocks(M.shape[1], SQD_BLOCK)])


def split_index(k: int, m: int, i: str, j: str) -> str:
    """C offset of (Mh lo of) prototype j, dimension i, in the split_prototypes layout."""
    full, rem = (m // SQD_BLOCK) * SQD_BLOCK, m % SQD_BLOCK
    inner = f"3 * ({k * SQD_BLOCK} * ({j} / {SQD_BLOCK}) + ({i}) * {SQD_BLOCK} + {j} % {SQD_BLOCK})"
    if not rem:
        return inner
    tail = f"3 * ({k * full} + ({i}) * {rem} + {j} - {full})"
    return f"({j} < {full} ? {inner} : {tail})"


def kernel_sqdist(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"]
    k, m = M.shape
    h = int(node.attrs.get("shift", 0))
    sym = em.add_const_array(em.sym(f"{m_name}_split"), split_prototypes(M, h), "uint8_t",
                             f"%{m_name}: per prototype, per dim: (M + 2^(h-1)) >> {h} (int16), low {h} bits")
    em.kernel_layout[m_name] = "split"
    xs, acc = em.sym("xs"), em.sym("acc")
    em.scratch(xs, "uint8_t", 3 * k)
    em.scratch(acc, "uint32_t", m)
    x = em.var(x_name)
    out_shift = 2 * (g.type(x_name).dtype.scale - h) - node.type.dtype.scale
    lines = ["{",
             f"    for (uint16_t k = 0; k < {k}; ++k) {{",
             f"        const int16_t xh = (int16_t)({x}[k] >> {h});",
             f"        {xs}[3 * k] = (uint8_t)xh;",
             f"        {xs}[3 * k + 1] = (uint8_t)((uint16_t)xh >> 8);",
             f"        {xs}[3 * k + 2] = (uint8_t)({x}[k] & {(1 << h) - 1});",
             "    }"]
    for j, n in blocks(m, SQD_BLOCK):
        name = em.sym(f"sqd{n}")
        if name not in em.helpers:
            em.helpers[name] = sqd_asm(name, n)
        lines.append(f"    {name}({sym} + {3 * k * j}, {xs}, {acc} + {j}, {k});")
    return lines + [f"    for (uint16_t j = 0; j < {m}; ++j)",
                    "        " + store(em, node, "j", rshift_avr(em, f"(int32_t){acc}[j]", out_shift)),
                    "}"]


def _bits(em: CEmitter, name: str) -> int:
    return em.graph.type(name).dtype.bits


def kernel_clip(em: CEmitter, node: Node, fuse: bool = True) -> list[str] | None:
    """16-bit compares in place of c_fixed's int32 ones (the same expression, so the same result);
    per-feature bounds interleaved (lo, hi) in flash and walked by one pointer."""
    if not clip_ok(em, node):
        return None
    (a,) = node.inputs
    dtype = em.graph.type(a).dtype
    lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], dtype)
    n, x, out = node.type.size, em.var(a), em.var(node.name)
    lines = ["{"]
    if np.ndim(lo) == 0:
        bounds = [f"const int16_t lo = {int(lo)}, hi = {int(hi)};"]
    else:
        sym = em.add_const_array(em.sym(f"{node.name}_bounds"), np.stack([lo, hi], axis=1), "int16_t",
                                 f"%{node.name}: (lower, upper) bound of each element")
        em.kernel_layout[node.name] = sym
        lines.append(f"    const int16_t *b = {sym};")
        rd = em.target.read_const
        bounds = [f"const int16_t lo = {rd('b', '0', 'int16_t')}, hi = {rd('b', '1', 'int16_t')};", "b += 2;"]
    fused = fuse and fused_clip(em, node.name)
    if fused:
        em.scratch(em.sym("sx"), "uint32_t", 1)
        lines.append("    uint32_t sx = 0;")
    lines += [f"    for (uint16_t i = 0; i < {n}; ++i) {{", f"        const int16_t v = {x}[i];",
              *("        " + line for line in bounds),
              "        const int16_t c = v < lo ? lo : (v > hi ? hi : v);"]
    if fused:
        lines += ["        const uint16_t u = (uint16_t)c ^ 0x8000u;", f"        {out}[i] = (int16_t)u;",
                  "        sx += u;", "    }", f"    {em.sym('sx')}[0] = sx;"]
    else:
        lines += [f"        {out}[i] = c;", "    }"]
    return lines + ["}"]


def kernel_scale(em: CEmitter, node: Node) -> list[str] | None:
    (a,) = node.inputs
    fq = int(node.attrs["factor_q"])
    if _bits(em, a) != 16 or not -32768 <= fq <= 32767 or node.type.rank != 1:
        return None
    k = em.graph.type(a).dtype.scale + node.attrs["factor_scale"] - node.type.dtype.scale
    prod = f"(int32_t){em.at(a, 'i')} * (int16_t){fq}"  # 16 x 16 -> 32: __mulhisi3, not __mulsi3
    return [f"for (uint16_t i = 0; i < {node.type.size}; ++i) " + store(em, node, "i", rshift_avr(em, prod, k))]


def kernel_exp_lut(em: CEmitter, node: Node) -> list[str] | None:
    (a,) = node.inputs
    at = node.attrs
    lo_q, hi_q, drop = int(at["lo_q"]), int(at["hi_q"]), int(at["drop_bits"])
    rnd = (1 << (drop - 1)) if drop else 0
    if _bits(em, a) != 16 or node.type.rank != 1 or not -32768 <= lo_q <= hi_q <= 32767 \
            or hi_q - lo_q + rnd > 65535:
        return None
    t_hi = em.add_const_array(em.sym(f"{node.name}_exp_hi"), at["table_hi"], "int16_t",
                              f"%{node.name}: e^x table over high bits, scale 2^-{at['hi_scale']}")
    t_lo = em.add_const_array(em.sym(f"{node.name}_exp_lo"), at["table_lo"], "int16_t",
                              f"%{node.name}: e^x table over low bits, scale 2^-{at['lo_scale']}")
    k, mask = at["low_bits"], (1 << at["low_bits"]) - 1
    rd = em.target.read_const
    shift = at["hi_scale"] + at["lo_scale"] - node.type.dtype.scale
    prod = f"(int32_t){rd(t_hi, f't >> {k}', 'int16_t')} * {rd(t_lo, f't & {mask}', 'int16_t')}"
    return [f"for (uint16_t i = 0; i < {node.type.size}; ++i) {{",
            f"    int16_t v = {em.at(a, 'i')};",
            *([f"    if (v < {lo_q}) v = {lo_q};"] if lo_q > -32768 else []),  # an edge bound cannot bind (and
            *([f"    if (v > {hi_q}) v = {hi_q};"] if hi_q < 32767 else []),  # would trip -Wtype-limits)
            # v - lo_q is in [0, hi_q - lo_q]: exact as uint16 even where the int16 difference wraps
            f"    const uint16_t t = (uint16_t)((uint16_t)((uint16_t)v - (uint16_t){lo_q}) + {rnd}u) >> {drop};",
            "    " + store(em, node, "i", rshift_avr(em, prod, shift)),
            "}"]


def avr_fixed_kernel(em: CEmitter, node: Node) -> list[str] | None:
    if node.op == "matvec" and matvec_ok(em, node):
        return kernel_matvec(em, node)
    if node.op == "sqdist" and sqdist_dot_ok(em, node):
        return kernel_sqdist_dot(em, node)
    if node.op == "sqdist" and sqdist_ok(em, node):
        return kernel_sqdist(em, node)
    if node.op == "clip":
        return kernel_clip(em, node)
    if node.op == "scale":
        return kernel_scale(em, node)
    if node.op == "exp_lut":
        return kernel_exp_lut(em, node)
    return None
