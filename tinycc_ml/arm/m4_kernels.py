"""Cortex-M4 kernels: dense mat-vecs and distances on the DSP extension's dual 16-bit multiply-accumulate.

matvec (int16 or int8 weights, int16 x, product shift 0): Thumb-2 asm, up to 5 rows per pass over x
(int8: 4). SMLAD a, w, x, a adds w.lo x.lo + w.hi x.hi to a, so the weights are stored in flash in
words of two int16 (columns 2p, 2p + 1 of one row), per block of rows word-interleaved: pair p of
row 0, of row 1, ... of the block's last row, then pair p + 1. One LDR of x (a pair, post-increment;
x needs only 2-byte alignment: Thumb-2 LDR allows unaligned addresses) and one LDM of the block's
words serve 2 x rows MACs:
    ldr lr, [r1], #4 ; ldm r0!, {r8-r12} ; smlad r3, r8, lr, r3 ; ... (5 rows: 7 instructions, 10 MACs)
int8 weights: words of four int8 stored as (w0, w2, w1, w3), so that SXTB16 w = (w0, w1) and
SXTB16 w, ROR #8 = (w2, w3) line up with the x pairs (x0, x1), (x2, x3): per row and 4 columns one
word, 2 SXTB16, 2 SMLAD. A last odd column (int16) or 1-3 columns (int8) are zero-padded weights
with x read by halfwords (LDRH: the upper half is 0), never past the end of x.

sqdist (shift 0): ||x - M_j||^2 = |x|^2 + |M_j|^2 - 2 M_j.x with M_j.x on the same kernel (M^T as the
matrix), |M_j|^2 in a flash table, |x|^2 in C. Prototypes of 8 significant bits (M = M8 2^k, what int8
builds keep) are stored as int8: M_j.x = (M8_j.x) 2^k.
All exact: int32 sums that wrap (SMLAD's result is the low 32 bits; it only sets the Q flag), and the
results are proven to fit in int32 (tinycc_ml.ir.fixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.arm.m0_fused import folded
from tinycc_ml.target import (
    Block,
    BlockedLayout,
    Node,
    clip_ok,
    node_output_shift,
    run_chain,
    shift_c,
    split8,
    storage_clip_bounds,
    store,
)

MAX_ROWS = {16: 5, 8: 4}  # rows per pass: accumulators + weight words + x + pointers fill r0-r12, lr
GROUP = {16: 2, 8: 4}  # columns per stored word
# an int8 matrix up to this size (as int16) is stored widened: the int16 kernel, without an SXTB16 per weight
# word, takes a third fewer instructions; the flash of an int16 build (the M4's boards have 256 KB and more)
WIDEN_INT8_BYTES = 16 * 1024


def row_blocks(rows: int, size: int) -> list[tuple[int, int]]:
    """(first row, rows) of each pass: as few passes as possible, sizes as equal as possible."""
    n = -(-rows // size)
    sizes = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    starts = np.cumsum([0] + sizes[:-1])
    return [(int(s), z) for s, z in zip(starts, sizes)]


BYTE_ORDER = (0, 2, 1, 3)  # int8: column t of a group of 4 is stored at byte BYTE_ORDER[t] of the word


def m4_image(A: np.ndarray, wbits: int) -> tuple[np.ndarray, list[int]]:
    """The flash image as uint32 words (see the module docstring) and the first word of each block."""
    rows, cols = A.shape
    g = GROUP[wbits]
    groups = -(-cols // g)
    parts, starts, pos = [], [], 0
    for r, n in row_blocks(rows, MAX_ROWS[wbits]):
        blk = np.zeros((n, groups * g), np.int64)
        blk[:, :cols] = A[r:r + n]
        blk = blk.reshape(n, groups, g)
        if wbits == 8:
            blk = blk[:, :, np.argsort(BYTE_ORDER)]
        words = blk.transpose(1, 0, 2).reshape(-1).astype("<i2" if wbits == 16 else "i1").view("<u4")
        starts.append(pos)
        parts.append(words)
        pos += len(words)
    return np.concatenate(parts), starts


@dataclass(frozen=True)
class GroupedLayout(BlockedLayout):
    """arm.m4_kernels's image read back element by element: Block.stride_col is the elements of one group of
    ``group`` columns of the block (group x rows), stride_row the group."""

    group: int = 2

    def element(self, read, block: Block) -> str:
        g = self.group
        within = "(i & 1)" if g == 2 else "(((i & 1) << 1) | ((i >> 1) & 1))"  # BYTE_ORDER
        index = f"{block.base} + (i / {g}) * {block.stride_col} + q * {block.stride_row} + {within}"
        return self.decode(read(self.symbol, index, self.stored_ctype))


@dataclass(frozen=True)
class StoreSpec:
    """How a kernel stores its rows as int16 (with ``out`` and ``constants`` pointers as its 3rd, 4th arguments):

    folded: out = sat((constants[q] + sum) >> shift), constants int32 (folded_epilogue's E with n = 0: bias and
        rounding in the sums), sat SSAT to int16 or with ``relu`` USAT to [0, 32767];
    else: the head's own rounding and saturation, v = SSAT16((sum + 2^(shift-1)) >> shift), then ``steps``:
        ("bias", 0) v += constants[q] (int16); ("round", k) v = (v + 2^(k-1)) >> k; ("ssat", n) v = SSAT16(v 2^n);
        ("usat", n) v = USAT15(v 2^n) (a relu)."""

    shift: int
    folded: bool
    relu: bool = False
    steps: tuple[tuple[str, int], ...] = ()

    @property
    def tag(self) -> str:
        return f"e{self.shift}" + ("f" if self.folded else "h") + ("r" if self.relu else "") + \
            "".join(f"{kind[0]}{k}" for kind, k in self.steps)

    def emulate(self, h: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, bool]:
        """The stored values of heads ``h`` (int64) and whether every step stayed within int32 (the asm's)."""
        v, safe = h.astype(np.int64), True
        for kind, k in self.steps:
            if kind == "bias":
                v = v + bias
            elif kind == "round":
                v = (v + (1 << (k - 1))) >> k
            else:
                wide = v << k
                safe &= bool(np.all(np.abs(wide) < 2**31))
                v = np.clip(wide, -32768 if kind == "ssat" else 0, 32767)
        return v, safe

    def asm(self, acc: str) -> list[str]:
        """The store of one row (in ``acc``; r8: the constants, r9 free, r2: the output)."""
        out = [f"add {acc}, {acc}, #{1 << (self.shift - 1)}", f"ssat {acc}, #16, {acc}, asr #{self.shift}"]
        steps, i = self.steps, 0
        while i < len(steps):
            kind, k = steps[i]
            i += 1
            if kind == "bias":
                out += ["ldrsh r9, [r8], #2", f"add {acc}, {acc}, r9"]
            elif kind == "round" and steps[i:i + 1] == (("ssat", 0),):  # one SSAT shifts and saturates
                out += [f"add {acc}, {acc}, #{1 << (k - 1)}", f"ssat {acc}, #16, {acc}, asr #{k}"]
                i += 1
            elif kind == "round":
                out += [f"add {acc}, {acc}, #{1 << (k - 1)}", f"asr {acc}, {acc}, #{k}"]
            else:
                shifted = f", lsl #{k}" if k else ""
                out.append(f"ssat {acc}, #16, {acc}{shifted}" if kind == "ssat" else f"usat {acc}, #15, {acc}{shifted}")
        return out + [f"strh {acc}, [r2], #2"]


def mac_asm(name: str, rows: int, wbits: int, cols: int, epilogue: StoreSpec | None = None) -> str:
    """void name(const uint32_t *w, const int16_t *x, uint32_t *acc): acc[q] = sum_k w[q][k] x[k] (mod 2^32)
    for the ``rows`` rows of one block of the image. With ``epilogue``: void name(const uint32_t *w, const
    int16_t *x, int16_t *out, const void *constants), the rows stored as StoreSpec says."""
    g = GROUP[wbits]
    acc = [f"r{3 + q}" for q in range(rows)]
    wr0 = 3 + MAX_ROWS[wbits]  # first weight register: r8 (int16), r7 (int8)
    wr = [f"r{wr0 + q}" for q in range(rows)]
    b = [f".pushsection .text.{name},\\\"ax\\\",%progbits", ".syntax unified", ".thumb", ".balign 2",
         ".thumb_func", f".type {name}, %function", f"{name}:", "push {r4-r11, lr}", "push {r2}"]
    if epilogue is not None and epilogue.folded:  # the rows' constants start the sums (r3: the first sum)
        b += [f"ldm r3, {{{acc[0]}-{acc[-1]}}}" if rows > 1 else f"ldr {acc[0]}, [r3]"]
    else:
        if epilogue is not None:
            b += ["push {r3}"]
        b += [f"movs {a}, #0" for a in acc]

    def load_w() -> list[str]:
        return [f"ldm r0!, {{{wr[0]}-{wr[-1]}}}"] if rows > 1 else [f"ldr {wr[0]}, [r0], #4"]

    def group(part: int) -> list[str]:
        """One group of columns; ``part``: how many of its columns exist (the last group may be partial)."""
        if wbits == 16:
            out = ["ldr lr, [r1], #4" if part == 2 else "ldrh lr, [r1]", *load_w()]
            return out + [f"smlad {a}, {w}, lr, {a}" for a, w in zip(acc, wr)]
        x0 = "ldr r11, [r1], #4" if part >= 2 else "ldrh r11, [r1]"
        out = [x0] + (["ldr r12, [r1], #4" if part == 4 else "ldrh r12, [r1]"] if part > 2 else []) + load_w()
        for a, w in zip(acc, wr):
            out += [f"sxtb16 lr, {w}", f"smlad {a}, lr, r11, {a}"]
            if part > 2:
                out += [f"sxtb16 lr, {w}, ror #8", f"smlad {a}, lr, r12, {a}"]
        return out

    full, part = divmod(cols, g)
    unroll = 4 if wbits == 16 else 2
    for _ in range(full % unroll):  # leftover groups first, then whole iterations
        b += group(g)
    if full >= unroll:
        end = 2 * g * (full // unroll) * unroll
        b += [f"add r2, r1, #{end}" if end < 4096 else f"ldr r2, ={end}"] + ([] if end < 4096 else ["add r2, r1"])
        b += ["1:", *[line for _ in range(unroll) for line in group(g)], "cmp r1, r2", "bne 1b"]
    if part:
        b += group(part)
    if epilogue is None:
        b += ["pop {r2}", f"stm r2, {{{acc[0]}-{acc[-1]}}}" if rows > 1 else f"str {acc[0]}, [r2]"]
    elif epilogue.folded:
        shift = epilogue.shift
        b += ["pop {r2}"]
        for a in acc:
            b += [f"usat {a}, #15, {a}, asr #{shift}" if epilogue.relu else f"ssat {a}, #16, {a}, asr #{shift}",
                  f"strh {a}, [r2], #2"]
    else:
        b += ["pop {r8}", "pop {r2}"]  # the constants, the output
        for a in acc:
            b += epilogue.asm(a)
    b += ["pop {r4-r11, pc}", ".ltorg", f".size {name}, .-{name}", ".popsection"]
    text = "".join(f'    "{line}\\n"\n' for line in b)
    # not .global: local to the object file (the C call resolves within it)
    if epilogue is None:
        return f"void {name}(const uint32_t *w, const int16_t *x, uint32_t *acc);\n__asm__(\n{text});\n"
    return (f"void {name}(const uint32_t *w, const int16_t *x, int16_t *out, const void *constants);\n"
            f"__asm__(\n{text});\n")


# ---------------------------------------------------------------- graph side

def _dense_ok(em, a_name: str, x_name: str) -> bool:
    g = em.graph
    return (g.op(a_name) == "const" and g.op(x_name) not in ("const", "sparse_const")
            and g.type(x_name).dtype.bits == 16 and g.type(x_name).rank == 1 and g.type(a_name).shape[1] > 0)


def matvec_ok(em, node: Node) -> bool:
    a_name, x_name = node.inputs
    return (node.op == "matvec" and _dense_ok(em, a_name, x_name) and int(node.attrs.get("shift", 0)) == 0
            and em.graph.type(a_name).dtype.bits in (8, 16))


def sqdist_ok(em, node: Node) -> bool:
    if node.op != "sqdist" or int(node.attrs.get("shift", 0)) != 0:
        return False
    x_name, m_name = node.inputs
    return _dense_ok(em, m_name, x_name) and em.graph.type(m_name).dtype.bits in (8, 16)


def _mac_calls(em, A: np.ndarray, wbits: int, label: str, x: str, acc: str, layout_key: str,
               decode=None, epilogue=None) -> list[str]:
    """The kernel calls leaving acc = A x (mod 2^32); streaming's feed() reads ``layout_key`` back from the
    image (``decode``: stored element -> the constant's element; default: A itself). With ``epilogue``
    ((StoreSpec, its constants' symbol or None)) the kernels store int16 rows into ``acc`` instead."""
    rows, cols = A.shape
    image, starts = m4_image(A, wbits)
    g = GROUP[wbits]
    sym = em.add_const_array(em.sym(f"{label}_m4"), image.view("<i4"), "int32_t",
                             f"%{label}: {rows}x{cols}, per block of <= {MAX_ROWS[wbits]} rows: words of {g} "
                             f"int{wbits} columns of one row, the block's rows interleaved")
    ctype = f"int{wbits}_t"
    blocks = row_blocks(rows, MAX_ROWS[wbits])
    em.kernel_layout[layout_key] = GroupedLayout(
        f"((const {ctype} *){sym})", ctype,
        tuple(Block(r, n, s * g, g * n, g) for (r, n), s in zip(blocks, starts)),
        *(() if decode is None else (decode,)), group=g)
    out = []
    spec, constants = (None, None) if epilogue is None else epilogue
    for (r, n), s in zip(blocks, starts):
        name = em.sym(f"mac{n}w{wbits}_{cols}" + ("" if spec is None else spec.tag))
        if name not in em.helpers:
            em.helpers[name] = mac_asm(name, n, wbits, cols, spec)
        tail = "" if spec is None else f", {constants} + {r}" if constants else ", 0"
        out.append(f"{name}((const uint32_t *){sym} + {s}, {x}, {acc} + {r}{tail});")
    return out


def _chain_steps(g, node: Node, chain: list[str]) -> tuple[tuple[tuple[str, int], ...], str | None] | None:
    """The StoreSpec steps of a fused chain of an add of a constant and a relu (each at any output scale), and the
    added constant's node; None for other chains."""
    steps, const, scale = [], None, node.type.dtype.scale
    for m in chain:
        step = g.node(m)
        if step.type.dtype.kind != "fx" or step.type.dtype.bits != 16:
            return None
        d = step.type.dtype.scale - scale
        others = [i for i in step.inputs if i != (chain[chain.index(m) - 1] if chain.index(m) else node.name)]
        if (step.op == "add" and const is None and len(others) == 1 and g.op(others[0]) == "const"
                and g.type(others[0]).dtype.scale == scale and g.type(others[0]).shape == node.type.shape):
            const = others[0]
            # |v + bias| < 2^16: rounded down by 2 bits or more it fits int16 without a saturation
            steps += [("bias", 0)] + ([("round", -d)] + ([("ssat", 0)] if d == -1 else []) if d < 0 else [("ssat", d)])
        elif (step.op == "clip" and not np.ndim(step.attrs["lo"]) and float(step.attrs["lo"]) == 0.0
              and not np.ndim(step.attrs["hi"]) and float(step.attrs["hi"]) >= 32767 * 2.0 ** -scale and d >= 0):
            steps.append(("usat", d))
        else:
            return None
        scale = step.type.dtype.scale
    return tuple(steps), const


def _output_add(em, node: Node) -> bool:
    """Whether the scores are ``node`` plus a constant, its only user, and ``node`` runs where the add does:
    not the mat-vec of the input (streaming's feed() runs that one; the add runs in the tail)."""
    g = em.graph
    users = g.users(node.name)
    x = node.inputs[1]
    feeds = g.op(x) == "input" or (g.op(x) == "clip" and g.op(g.node(x).inputs[0]) == "input")
    return (len(users) == 1 and users[0] == em.scores_node and g.op(users[0]) == "add" and not feeds
            and not any(n == node.name for _, n in g.outputs) and not g.analyses.fused.get(users[0]))


def kernel_store(em, node: Node) -> tuple[StoreSpec, str | None, str] | None:
    """How the kernel stores the mat-vec ``node`` itself (StoreSpec, its constants' array, the int16 vector
    it writes), exactly as the C store would: the folded epilogue where proven (n = 0), else the head's
    rounding and saturation and its fused chain's add and relu as steps, held to the chain's own integer
    semantics on every int16 head value of every row; None where they differ or the chain has other steps."""
    g = em.graph
    ep = folded(em, node)
    if ep is not None and ep.n == 0:
        em.stored_heads.add(ep.head)
        scores = ep.last == em.scores_node  # then the head's own slot is never written
        bias = em.add_const_array(em.sym(f"{node.name}_bias_m4"), ep.bias.astype(np.int32), "int32_t",
                                  f"%{node.name}: each row's folded bias and rounding (added before the shift)")
        return StoreSpec(ep.shift, True, ep.relu), bias, em.var(ep.last if scores else node.name)
    shift = node_output_shift(g, node.name)
    if not 1 <= shift <= 31 or node.type.dtype.bits != 16 or node.type.dtype.kind != "fx":
        return None
    chain = list(g.analyses.fused.get(node.name, []))
    kernel_stored = None
    if not chain and _output_add(em, node):  # the scores' bias, its only user: stored by the kernel
        chain = kernel_stored = [em.scores_node]
    found = _chain_steps(g, node, chain)
    if found is None:
        return None
    steps, const = found
    spec = StoreSpec(shift, False, steps=steps)
    rows = node.type.shape[0]
    values = (np.zeros(rows, np.int64) if const is None else
              np.broadcast_to(np.asarray(g.node(const).attrs["value"]).astype(np.int64), (rows,)))
    h = np.arange(-32768, 32768, dtype=np.int64)[:, None]
    for r in range(0, rows, 16):  # 16 rows x 65,536 head values at a time
        want = run_chain(g, node.name, chain, h, r, 16)
        got, safe = spec.emulate(h, values[None, r:r + 16])
        if not safe or not np.array_equal(want, np.broadcast_to(got, want.shape)):
            return None
    if kernel_stored:
        em.kernel_stored.add(em.scores_node)
    elif chain:
        em.stored_heads.add(node.name)
    bias = None if const is None else em.add_const_array(
        em.sym(f"{node.name}_add_m4"), values.astype(np.int16), "int16_t",
        f"%{node.name}: the constant its fused add adds to each row (int16)")
    last = chain[-1] if chain else node.name
    # the chain's last value shares the head's slot, unless it is the scores
    return spec, bias, em.var(last if last == em.scores_node else node.name)


def kernel_matvec(em, node: Node) -> list[str] | None:
    if not matvec_ok(em, node):
        return None
    a_name, x_name = node.inputs
    g = em.graph
    A = g.node(a_name).attrs["value"].astype(np.int64)
    rows = A.shape[0]
    wbits = g.type(a_name).dtype.bits
    if wbits == 8 and A.size * 2 <= WIDEN_INT8_BYTES:  # int16 words: no SXTB16 per weight word
        wbits = 16
    kept = kernel_store(em, node)
    if kept is not None:  # the rows stored by the kernel (its rounding, saturation and fused add)
        spec, constants, out = kept
        calls = _mac_calls(em, A, wbits, a_name, em.var(x_name), out, a_name, epilogue=(spec, constants))
        unused = [f"    (void){em.var(node.name)};"] if out != em.var(node.name) else []
        return ["{", *("    " + c for c in calls), *unused, "}"]
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", rows)
    out_shift = node_output_shift(g, node.name)
    calls = _mac_calls(em, A, wbits, a_name, em.var(x_name), acc, a_name)
    return ["{", *("    " + c for c in calls), f"    for (int r = 0; r < {rows}; ++r)",
            "        " + store(em, node, "r", shift_c(em, f"(int32_t){acc}[r]", out_shift)), "}"]


def kernel_sqdist(em, node: Node) -> list[str] | None:
    if not sqdist_ok(em, node):
        return None
    x_name, m_name = node.inputs
    g = em.graph
    M = g.node(m_name).attrs["value"].astype(np.int64)
    k, m = M.shape
    acc = em.sym("acc")
    em.scratch(acc, "uint32_t", m)
    norms = em.add_const_array(em.sym(f"{m_name}_sq_m4"), ((M * M).sum(axis=0) % (1 << 32)).astype("<u4").view("<i4"),
                               "int32_t", f"%{m_name}: squared norm of each prototype (mod 2^32)")
    x = em.var(x_name)
    out_shift = node_output_shift(g, node.name)
    m8 = split8(M) if g.type(m_name).dtype.bits == 16 else None
    if m8 is not None:  # 8 significant bits (int8 builds): M = M8 2^k, stored in 8 bits, M.x = (M8.x) 2^k
        k8 = m8[1]
        calls = _mac_calls(em, m8[0].T.copy(), 8, f"{m_name}_i8", x, acc, m_name,
                           decode=lambda e: f"(int16_t)({e} * {1 << k8})")
        mx = f"({acc}[j] << {k8 + 1})"
    else:
        calls = _mac_calls(em, M.T.copy(), g.type(m_name).dtype.bits, m_name, x, acc, m_name)
        mx = f"2u * {acc}[j]"
    d = f"(int32_t)(xx + (uint32_t){em.target.read_const(norms, 'j', 'int32_t')} - {mx})"
    return ["{", "    uint32_t xx = 0;",
            f"    for (int k = 0; k < {k}; ++k) xx += (uint32_t)((int32_t){x}[k] * {x}[k]);",
            *("    " + c for c in calls), f"    for (int j = 0; j < {m}; ++j)",
            "        " + store(em, node, "j", shift_c(em, d, out_shift)), "}"]



def kernel_clip(em, node: Node) -> list[str] | None:
    """A clamp of an int16 vector to one pair of bounds as a kernel function, two elements per word: USAT16 #15
    for a relu ([0, 32767]), else SSUB16 + SEL twice (SSUB16 sets each halfword's GE flags where v - bound >= 0,
    SEL picks by them): the same values as the shared C's compares; four elements per loop step."""
    if not clip_ok(em, node) or em.graph.analyses.fused.get(node.name):
        return None
    (a,) = node.inputs
    lo, hi = storage_clip_bounds(node.attrs["lo"], node.attrs["hi"], em.graph.type(a).dtype)
    if np.ndim(lo) or np.ndim(hi):
        return None
    lo, hi = int(lo), int(hi)
    n = node.type.size
    relu = (lo, hi) == (0, 32767)
    name = em.sym(f"clip{n}_" + ("relu" if relu else f"{lo & 0xFFFF:04x}_{hi & 0xFFFF:04x}"))
    if name not in em.helpers:
        if relu:
            asm = '__asm__("usat16 %[v], #15, %[v]" : [v] "+r"(v));'
        else:
            pair = lambda b: f"0x{(b & 0xFFFF) * 0x10001:08x}u"  # noqa: E731
            asm = ('__asm__("ssub16 %[t], %[v], %[hi]\\n\\tsel %[v], %[hi], %[v]\\n\\t'
                   'ssub16 %[t], %[v], %[lo]\\n\\tsel %[v], %[v], %[lo]" : [v] "+r"(v), [t] "=&r"(t) : '
                   f'[lo] "r"({pair(lo)}), [hi] "r"({pair(hi)}));')
        word = ["    {", "        uint32_t v, t;", "        __builtin_memcpy(&v, src, 4);", f"        {asm}",
                "        (void)t;", "        __builtin_memcpy(dst, &v, 4);", "        src += 2;", "        dst += 2;",
                "    }"]
        body = [f"static __attribute__((noinline)) void {name}(const int16_t *src, int16_t *dst)", "{",
                f"    for (int i = 0; i < {n // 4}; ++i) {{", *("    " + w for w in word * 2), "    }",
                *(word if n % 4 >= 2 else [])]
        if n % 2:
            body += ["    {", "        const int32_t v = *src;  /* int32: no always-false compare at int16's ends */",
                     f"        *dst = (int16_t)(v < {lo} ? {lo} : (v > {hi} ? {hi} : v));", "    }"]
        em.helpers[name] = "\n".join(body + ["}", ""])
    return [f"{name}({em.var(a)}, {em.var(node.name)});"]
