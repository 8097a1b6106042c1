"""Cortex-M4 / M33 depthwise 3x3 convolutions (strides 1 or 2, dilation 1, depth multiplier 1) on planar int16
copies of the input, one channel at a time, bit for bit ``m4_network``'s depthwise kernel (and so tflite-micro's).

Per channel a widening pass copies its plane (a strip of rows of it where the whole plane is larger than
``PLANE_BYTES``) into the matrix kernels' scratch (``m4_pair``) as int16, padded with the input zero point zx (so
every position, border or not, takes the bias with zx sum(w) folded in: a tap in the padding adds w zx, which the
fold takes back, as TFLite skips it). Along a plane row two neighbours sit in one word, and each window row's three
taps as two int16 weight pairs, (w0, w1) and (w1, w2), pair two taps per SMLAD: four outputs along a row from three
input words per window row, SMLAD, SMLAD, SMLAD, SMLAD and the fourth taps SMLABT / SMLATB, 24 multiplies for 36
multiply-accumulates (a 2-output block for a row's remainder, at stride 1 for two rows at once: each weight pair
loaded once for both, ``_pair_block_asm``). The plane's rows run along the output's longer axis (``orientation``:
the input transposed where the columns are fewer, as KWS's 25 x 5). At stride 2 along a plane row output i's window
row is word i, (p0, p1), and the low half of word i + 1, p2: SMLAD with (w0, w1) and SMLABT with (w1, w2), the same
24 multiplies for 4 outputs from five words per window row (VWW's strided layers); across rows the window rows are
plane rows 2i.. 2i + 2. The widening is asm: a row's LDRSBs back to back, then PKHBT and STR per word (STRH of the
element alone where the other half is a padding column: only a padding row ever writes one, with zx). Each output's
requantisation is ``m4_network``'s (LSL, ADD, SMMLAR, ASR, SSAT, STRB) in the same asm block, the channel's
constants from a per-channel block on the stack; where every channel shares the left shift (sl) and the weights
times 2^sl stay int16, the weights and the bias carry it (the accumulator is acc 2^sl: no LSL). With one strip the
plane's padding rows keep the first fill (no refill per channel).

The order differs from the raster order the in-place rule (``ir.ops.windows.window_lead``) assumes: a layer
whose output slot meets its input's takes this kernel only where every write lands on its own channel (the
slots' distance a multiple of the channels) and no strip's widening reads an element an earlier strip's writes
reached (``in_place_safe``), else ``m4_network``'s kernel.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import (
    accumulator_bound,
    channel_params,
    computed_input,
    fold_zero_point,
    shared_function,
    shifts_ok,
    small_accumulators,
    weight_layout,
)
from tinycc_ml.target import Node, layer_quantisation, window_of

PLANE_BYTES = 1024  # the scratch's bytes a strip may take (VWW's matrix kernels' pair buffer: no more RAM)
# a block's modelled cycles by the stride along the plane's rows (the orientation's and the layer's choice): at
# stride 2 a block of n outputs reads n + 1 words per window row (a 4-block 14 registers)
BLOCK_CYCLES = {1: {4: 74, 2: 42, 1: 31}, 2: {4: 80, 2: 45, 1: 31}}
# m4_network's depthwise kernel, modelled cycles per 3x3 output: 3.3 to 3.6 per MAC at stride 1, 3.6 to 4.1 at
# stride 2 (VWW's four strided layers, m4_layer_profile)
OLD_OUTPUT_CYCLES = {1: 30, 2: 34}
PAIR_BLOCK_CYCLES = 70  # a remainder of 2 outputs for two rows (``_pair_block_asm``)


def orientation(oh: int, ow: int, strides: tuple[int, int] = (1, 1)) -> bool:
    """Whether the plane is the input transposed (its rows the input's columns): the cheaper of the two in blocks
    of 4 and 2 outputs along a plane row (``strides``: the layer's, along its height and width)."""
    def cost(rows: int, cols: int, sc: int) -> int:
        n4, rem = divmod(cols, 4)
        bc = BLOCK_CYCLES[sc]
        return rows * (n4 * bc[4] + (bc[rem] if rem in (1, 2) else bc[4] if rem else 0) + 12)
    return cost(ow, oh, strides[0]) < cost(oh, ow, strides[1])


WIDEN_LOADS = 8  # a plane row's elements widened per asm block (8 LDRSB into 8 registers)
UNROLLED_BLOCKS = 6  # a row's blocks in sequence up to this many (no loop), else a loop


def planar_cycles(rows: int, cols: int, plane_rows: int, words: int, sc: int = 1, pairs: bool = False) -> int:
    """A channel's modelled cycles on this kernel (``rows`` x ``cols`` outputs, ``plane_rows`` rows widened of
    ``words`` words each, stride ``sc`` along a plane row; ``pairs``: a remainder of 2 two rows at a time): its
    set-up, the widening (about 4.25 cycles a word), the rows of blocks."""
    n4, tail = blocks(cols)
    bc = BLOCK_CYCLES[sc]
    tails = PAIR_BLOCK_CYCLES // 2 if pairs else sum(bc[n] for _, n, _ in tail)
    return 40 + plane_rows * (10 + 17 * words // 4) + rows * (10 + n4 * bc[4] + tails)


def blocks(cols: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(4-blocks, tail): a plane row's outputs as n4 blocks of 4, then (start, outputs computed, stored)."""
    n4, rem = divmod(cols, 4)
    tail = [] if not rem else [(4 * n4, rem, rem)] if rem <= 2 else [(4 * n4, 4, rem)]
    return n4, tail


def in_place_safe(delta: int, channels: int, plane_rows, strips: list[tuple[int, int]]) -> bool:
    """Whether writing the output ``delta`` bytes from the input (their slots overlap) is safe in this kernel's
    order: per channel, per strip (first output row, rows) its plane rows widened, then its outputs written;
    ``plane_rows(r0, n)``: the input positions (raster indices) of the plane rows output rows r0.. r0 + n - 1
    read and those outputs' positions (two arrays). Each write must land on its own channel, and never on an
    input position a later strip of the channel widens."""
    if delta % channels:
        return False
    shift = delta // channels
    written = np.empty(0, np.int64)
    for r0, n in strips:
        reads, outs = plane_rows(r0, n)
        if np.intersect1d(written, reads).size:
            return False
        written = np.union1d(written, outs + shift)
    return True


def _block_asm(n: int, store: int, ro: int, out_col: int, sl: str, r: str, zp: int | None, lo: int,
               hi: int, sc: int = 1) -> list[str]:
    """One block of n (4, 2 or 1) outputs along a plane row (``p``: its first window's word, plane rows ``ro``
    bytes apart; ``k``: the channel's block: six weight pairs, bias, m, nu, sl, r), storing the first ``store``
    at ``o`` (``out_col`` bytes apart). ``sl``/``r``: an immediate or a register of the channel's block;
    ``zp``: the output zero point added after the shift (None: in the nudge). ``sc``: the stride along the
    plane row (2: output i's window row is word i, the pair (w0, w1), and the low half of word i + 1, w2)."""
    acc = [f"%[a{i}]" for i in range(n)]
    lines = []
    for row in range(3):
        if sc == 2:  # words 0.. n, all loads back to back
            lines += [f"ldr %[u{i}], [%[p], #{row * ro + 4 * i}]" for i in range(n + 1)]
            lines += [f"ldr %[wa], [%[k], #{8 * row}]", f"ldr %[wb], [%[k], #{8 * row + 4}]"]
            if row == 0:
                lines.insert(0, f"ldr {acc[n - 1]}, [%[k], #24]")
            lines += [f"smlad {a}, %[u{i}], %[wa], {acc[n - 1] if row == 0 else a}" for i, a in enumerate(acc)]
            lines += [f"smlabt {a}, %[u{i + 1}], %[wb], {a}" for i, a in enumerate(acc)]
            continue
        words = 3 if n == 4 else 2
        lines += [f"ldr %[u{i}], [%[p], #{row * ro + 4 * i}]" for i in range(words)]
        lines += [f"ldr %[wa], [%[k], #{8 * row}]", f"ldr %[wb], [%[k], #{8 * row + 4}]"]
        if row == 0:  # the bias into the last accumulator, the first SMLADs' addend (its loads back to back)
            lines.insert(0, f"ldr {acc[n - 1]}, [%[k], #24]")
        firsts = ["%[u0]", "%[u1]", "%[u1]", "%[u2]"][:n]
        pairs = ["%[wa]", "%[wb]", "%[wa]", "%[wb]"][:n]
        lines += [f"smlad {a}, {u}, {w}, {acc[n - 1] if row == 0 else a}" for a, u, w in zip(acc, firsts, pairs)]
        # the fourth tap of each output: p2 w2, p1 w0 (p4 w2, p3 w0)
        cross = [("smlabt", "%[u1]", "%[wb]"), ("smlatb", "%[u0]", "%[wa]"), ("smlabt", "%[u2]", "%[wb]"),
                 ("smlatb", "%[u1]", "%[wa]")][:n]
        lines += [f"{op} {a}, {u}, {w}, {a}" for a, (op, u, w) in zip(acc, cross)]
    return lines + _requantised(acc[:store], [i * out_col for i in range(store)], sl, r, zp, lo, hi)


def _pair_block_asm(ro: int, out_col: int, out_row: int, sl: str, r: str, zp: int | None, lo: int,
                    hi: int) -> list[str]:
    """A row remainder of 2 outputs (stride 1) for two output rows at once (``p``: the first row's first window
    word): outputs (0, 0), (0, 1), (1, 0), (1, 1) in a0.. a3, each weight row's pairs loaded once for both output
    rows (6 loads and 8 multiplies a window row: about 70 cycles for 4 outputs against 2 x 42 in 2-blocks)."""
    acc = [f"%[a{i}]" for i in range(4)]
    lines = ["ldr %[a3], [%[k], #24]"]  # the bias, the first SMLADs' addend
    for row in range(3):
        lines += [f"ldr %[u{i}], [%[p], #{(row + i // 2) * ro + 4 * (i % 2)}]" for i in range(4)]
        lines += [f"ldr %[wa], [%[k], #{8 * row}]", f"ldr %[wb], [%[k], #{8 * row + 4}]"]
        for a0, a1, x0, x1 in ((acc[0], acc[1], "%[u0]", "%[u1]"), (acc[2], acc[3], "%[u2]", "%[u3]")):
            lines += [f"smlad {a0}, {x0}, %[wa], {acc[3] if row == 0 else a0}",
                      f"smlad {a1}, {x1}, %[wb], {acc[3] if row == 0 else a1}"]
        lines += [f"smlabt {acc[0]}, %[u1], %[wb], {acc[0]}", f"smlatb {acc[1]}, %[u0], %[wa], {acc[1]}",
                  f"smlabt {acc[2]}, %[u3], %[wb], {acc[2]}", f"smlatb {acc[3]}, %[u2], %[wa], {acc[3]}"]
    return lines + _requantised(acc, [0, out_col, out_row, out_row + out_col], sl, r, zp, lo, hi)


def _requantised(acc: list[str], offsets: list[int], sl: str, r: str, zp: int | None, lo: int,
                 hi: int) -> list[str]:
    """The requantisation of a block's accumulators ``acc``, each stored at ``o`` + its offset."""
    lines = ["ldr %[u0], [%[k], #28]", "ldr %[u1], [%[k], #32]"]  # m, nu
    if sl.startswith("%"):
        lines.append("ldr %[wa], [%[k], #36]")
    if r.startswith("%"):
        lines.append("ldr %[wb], [%[k], #40]")
    for a, offset in zip(acc, offsets):
        lines += [f"lsl {a}, {a}, {sl}"] if sl else []  # none where the weights and bias carry 2^sl
        lines += [f"add %[u2], %[u1], {a}, asr #31", f"smmlar {a}, {a}, %[u0], %[u2]"]
        if zp is None and not r.startswith("%"):
            lines.append(f"ssat {a}, #8, {a}, asr {r}")
        else:
            lines.append(f"asr {a}, {a}, {r}")
            if zp:
                lines.append(f"add {a}, {a}, #{zp}")
            lines.append(f"ssat {a}, #8, {a}")
        if lo > -128:
            lines += [f"cmp {a}, #{lo}", "it lt", f"movlt {a}, #{lo}"]
        if hi < 127:
            lines += [f"cmp {a}, #{hi}", "it gt", f"movgt {a}, #{hi}"]
        lines.append(f"strb {a}, [%[o], #{offset}]")
    return lines


def _asm(lines: list[str], n: int, indent: str) -> list[str]:
    us = [f"u{i}" for i in range(5) if i < 3 or any(f"%[u{i}]" in line for line in lines)]  # u3, u4: stride 2
    outs = ", ".join([*(f'[a{i}] "=&r"(a{i})' for i in range(n)), *(f'[{u}] "=&r"({u})' for u in us),
                      '[wa] "=&r"(wa)', '[wb] "=&r"(wb)'])
    return [f"{indent}__asm__ volatile(", *(f'{indent}    "{line}\\n"' for line in lines), f"{indent}    : {outs}",
            f'{indent}    : [p] "r"(p), [o] "r"(o), [k] "r"(k) : "cc", "memory");']


def depthwise_conv2d(em, node: Node) -> list[str] | None:
    """The planar kernel for a 3x3 depthwise layer of strides 1 or 2 where it applies and the cost model favours
    it, else None (``m4_network``'s)."""
    x_name, w_name, b_name = node.inputs
    g = em.graph
    x = g.type(x_name)
    _, kh, kw, C = g.type(w_name).shape
    if (kh, kw) != (3, 3) or not computed_input(em, node) or x.shape[0] != 1 or int(
            node.attrs["depth_multiplier"]) != 1:
        return None
    q = layer_quantisation(g, node, C)
    win = window_of(g, node, (3, 3))
    if any(s not in (1, 2) for s in win.stride) or win.dilation != (1, 1) or not shifts_ok(q) or \
            np.any(q.shifts >= 0):
        return None  # a right shift on every channel: the sign's correction always applies
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(9, C).T.astype(np.int64)
    if not small_accumulators(bias, W, 255, q.shifts).all():
        return None
    folded = bias - q.input_zero_point * W.sum(axis=1)
    fold = fold_zero_point(accumulator_bound(bias, W, 255), q.multipliers, q.shifts, q.output_zero_point)
    params = channel_params(folded, q.multipliers, q.shifts, 1, "fold" if fold else "plain", None,
                            q.output_zero_point if fold else None)
    H, Wd, OH, OW = win.height, win.width, win.out_height, win.out_width
    (py, px) = win.pad
    transposed = orientation(OH, OW, win.stride)
    if transposed:
        PR, PC, pad_r, pad_c, in_row, in_col = Wd, H, px, py, C, Wd * C
        ORn, OCn, out_row, out_col = OW, OH, C, OW * C
        sc, sr = win.stride
    else:
        PR, PC, pad_r, pad_c, in_row, in_col = H, Wd, py, px, Wd * C, C
        ORn, OCn, out_row, out_col = OH, OW, OW * C, C
        sr, sc = win.stride
    if 3 * out_col > 4095:
        return None
    n4, tail = blocks(OCn)
    # the halfwords a plane row needs: a block of n outputs at t reads words t/2.. t/2 + 2 (n = 4; else + 1) at
    # stride 1, words t.. t + n at stride 2
    ncol = max([4 * n4 + 2] + [t + (6 if n == 4 else 4) for t, n, _ in tail]) if sc == 1 else \
        max([8 * n4 + 2] + [2 * (t + n) + 2 for t, n, _ in tail])
    RW = ncol + ncol % 2  # halfwords per plane row: rows stay word aligned
    row_bytes = 2 * RW
    if 2 * row_bytes + 16 > 4095:
        return None

    def span(n: int) -> int:
        """The plane rows n output rows read."""
        return sr * (n - 1) + 3

    S = ORn if span(ORn) * row_bytes <= PLANE_BYTES else max(1, (PLANE_BYTES // row_bytes - 3) // sr + 1)
    strips = [(r0, min(S, ORn - r0)) for r0 in range(0, ORn, S)]
    # a row remainder of 2 two output rows at a time (VWW's 6 x 6 planes)
    row_pairs = (sr, sc) == (1, 1) and [n for _, n, _ in tail] == [2] and out_row + out_col <= 4095 and \
        3 * row_bytes + 4 <= 4095
    old = OLD_OUTPUT_CYCLES[max(sr, sc)] * ORn * OCn
    if planar_cycles(ORn, OCn, sum(span(n) for _, n in strips), RW // 2, sc, row_pairs) >= old:
        return None  # small planes: the set-up and the widening outweigh the blocks (VWW's 3 x 3 x 256)

    def plane_rows(r0: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Input positions (raster) of the plane rows output rows r0.. r0 + n - 1 read, and their positions."""
        rows = np.arange(sr * r0, sr * r0 + span(n)) - pad_r
        rows = rows[(rows >= 0) & (rows < PR)]
        cols = np.arange(PC)
        a, b = np.meshgrid(rows, cols, indexing="ij")
        reads = (b * Wd + a if transposed else a * Wd + b).reshape(-1)
        orows = np.arange(r0, min(r0 + n, ORn))
        a, b = np.meshgrid(orows, np.arange(OCn), indexing="ij")
        outs = (b * OW + a if transposed else a * OW + b).reshape(-1)
        return reads, outs

    plan = g.analyses.memory_plan
    sx, so = plan.get(x_name), plan.get(node.name)
    if sx is not None and so is not None and sx.arena == so.arena and \
            sx.offset < so.offset + so.length and so.offset < sx.offset + sx.length:
        if not in_place_safe(so.offset - sx.offset, C, plane_rows, strips):
            return None

    # the weights: per channel 9 int8 taps, plane row by plane row; or where the build favours speed the six
    # int16 pairs the blocks read, (w0, w1) and (w1, w2) per plane row, widened in flash
    taps = W.reshape(C, 3, 3)
    if transposed:
        taps = taps.transpose(0, 2, 1)
    # a left shift every channel shares carried by the int16 weights and the bias (the accumulator is then
    # acc 2^sl, below 2^31 as small_accumulators proved): no LSL per output
    scale = params.literals.get("sl", 0) if np.abs(W).max(initial=0) << params.literals.get("sl", 0) < 1 << 15 \
        else 0
    if scale:
        words = params.words.astype(np.int64).reshape(-1, params.per_channel)
        words[:, 0] <<= scale
        params = type(params)(params.mode, words.astype(np.int32).reshape(-1), params.stored, params.literals)
    w16 = weight_layout(em, node, OH * OW > 1)
    if w16:
        pairs = (np.stack([taps[:, :, :2], taps[:, :, 1:]], axis=2) << scale).astype(np.int16)  # C, row, pair, lanes
        w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), np.ascontiguousarray(pairs).view("<i4").reshape(-1),
                                   "int32_t", f"%{node.name}: 3x3 weights of {C} channels widened to int16, per "
                                   "channel and plane row the pairs (w0, w1), (w1, w2)")
    else:
        w_sym = em.add_const_array(em.sym(f"{node.name}_m4w"), taps.reshape(-1).astype(np.int8), "int8_t",
                                   f"%{node.name}: 3x3 weights of {C} channels, per channel along the plane's rows")
    p_sym = em.add_const_array(em.sym(f"{node.name}_m4q"), params.words, "int32_t",
                               f"%{node.name}: per channel {', '.join(params.stored)} (m4_rq)")
    P = params.per_channel
    pair = em.sym("m4_pair")
    em.scratch(pair, "uint32_t", span(S) * RW // 2)
    zx = q.input_zero_point
    zx2 = ((zx & 0xFFFF) * 0x10001 + (1 << 31)) % (1 << 32) - (1 << 31)
    pk = em.sym("m4_pkhbt")
    if pk not in em.helpers:
        em.helpers[pk] = (f"static inline __attribute__((always_inline)) int32_t {pk}(int32_t lo, int32_t hi)\n"
                          "{\n    int32_t r;\n    __asm__(\"pkhbt %0, %1, %2, lsl #16\" : \"=r\"(r) : \"r\"(lo), "
                          "\"r\"(hi));\n    return r;\n}\n")

    def field(name: str) -> str:
        return str(params.literals[name]) if name in params.literals else f"cq[{params.stored.index(name)}]"

    sl = "" if scale else f"#{params.literals['sl']}" if "sl" in params.literals else "%[wa]"
    m = f" * {1 << scale}" if scale else ""
    r = f"#{params.literals['r']}" if "r" in params.literals else "%[wb]"
    zp = None if fold else q.output_zero_point

    # a plane row's widening: words of two columns, each half an input element or zx
    words = []
    for w in range(RW // 2):
        halves = []
        for j in (2 * w, 2 * w + 1):
            i = j - pad_c
            halves.append(f"s[{i * in_col}]" if 0 <= i < PC and j < ncol else None)
        if any(halves):
            words.append((w, halves))
    # in asm, up to WIDEN_LOADS elements at a time: their LDRSBs back to back (pipelined), then per word of two
    # elements PKHBT and STR, a word with a padding half only the element's STRH (a padding column holds zx from
    # the fill: only a padding row writes it, with zx). GCC interleaved them, a load after each store: about 5.5
    # cycles a word, here 4.25. Offsets past LDRSB's 4095: in C
    widen = []
    if (PC - 1) * in_col <= 4095:
        batches: list[list[tuple[int, list]]] = [[]]
        for w, hv in words:
            if sum(map(bool, hv)) + sum(bool(v) for _, b in batches[-1] for v in b) > WIDEN_LOADS:
                batches.append([])
            batches[-1].append((w, hv))
        for batch in filter(None, batches):
            loads = [(w, h, v) for w, hv in batch for h, v in enumerate(hv) if v]
            reg = {(w, h): f"%[v{i}]" for i, (w, h, _) in enumerate(loads)}
            asm = [f"ldrsb {reg[w, h]}, [%[s], #{int(v[2:-1])}]" for w, h, v in loads]
            asm += [f"pkhbt {reg[w, 0]}, {reg[w, 0]}, {reg[w, 1]}, lsl #16" for w, hv in batch if all(hv)]
            asm += [f"str {reg[w, 0]}, [%[d], #{4 * w}]" if all(hv) else
                    f"strh {reg[w, int(not hv[0])]}, [%[d], #{4 * w + 2 * int(not hv[0])}]" for w, hv in batch]
            outs = ", ".join(f'[v{i}] "=&r"(v{i})' for i in range(len(loads)))
            widen += ["{", f"    int32_t {', '.join(f'v{i}' for i in range(len(loads)))};", "    __asm__ volatile(",
                      *(f'        "{line}\\n"' for line in asm), f"        : {outs}",
                      '        : [s] "r"(s), [d] "r"(d) : "memory");', "}"]
    else:
        for start in range(0, len(words), 8):  # the loads of 8 words back to back, then their stores
            batch = words[start:start + 8]
            widen += [f"const int32_t v{w}{h} = {v if v else zx};" for w, hv in batch for h, v in enumerate(hv)]
            widen += [f"d[{w}] = {pk}(v{w}0, v{w}1);" for w, _ in batch]

    body4 = _block_asm(4, 4, row_bytes, out_col, sl, r, zp, q.lo, q.hi, sc)
    tails = []
    for t, n, store in tail:
        tails += ["        {", f"            const int16_t *p = row + {sc * t};",
                  f"            int8_t *o = orow + {t * out_col};",
                  *_asm(_block_asm(n, store, row_bytes, out_col, sl, r, zp, q.lo, q.hi, sc), n, "            "),
                  "        }"]
    pair_tail = []
    if row_pairs:  # rows i, i + 1: their blocks of 4, then the remainders together (an odd last row: tails)
        (t, _, _), = tail
        pair_tail = ["{", f"    const int16_t *p = row + {t};", f"    int8_t *o = orow + {t * out_col};",
                     *_asm(_pair_block_asm(row_bytes, out_col, out_row, sl, r, zp, q.lo, q.hi), 4, "    "), "}"]
    extra = [f"u{i}" for i in (3, 4) if any(f"%[u{i}]" in line for line in body4 + pair_tail)]  # stride 2's, pairs'
    row_blocks = [*(["const int16_t *p = row;", "int8_t *o = orow;",
                     f"for (int32_t b = 0; b < {n4}; ++b, p += {4 * sc}, o += {4 * out_col}) {{",
                     *_asm(body4, 4, "    "), "}"] if n4 > UNROLLED_BLOCKS else []),
                  *(line for b in range(n4 if n4 <= UNROLLED_BLOCKS else 0) for line in (
                      "{", f"    const int16_t *p = row + {4 * sc * b};", f"    int8_t *o = orow + {4 * b * out_col};",
                      *_asm(body4, 4, "    "), "}"))]
    rows_loop = [f"for (int32_t i = 0; i < ns; i += {2 if row_pairs else 1}) {{",
                 f"    const int16_t *row = (const int16_t *)pw + i * {sr * RW};",
                 f"    int8_t *orow = out + (r0 + i) * {out_row} + c;",
                 *("    " + line for line in row_blocks)]
    if row_pairs:
        rows_loop += ["    if (i + 1 < ns) {", "        {",
                      f"            const int16_t *row = (const int16_t *)pw + (i + 1) * {sr * RW};",
                      f"            int8_t *orow = out + (r0 + i + 1) * {out_row} + c;",
                      *("            " + line for line in row_blocks), "        }",
                      *("        " + line for line in pair_tail), "        continue;", "    }"]
    rows_loop += [*(line[4:] for line in tails), "}"]
    wtype = "int32_t" if w16 else "int8_t"
    lines = [
        f"/* depthwise 3x3{f' stride {sr}x{sc}' if (sr, sc) != (1, 1) else ''}, {C} channels, planar: per channel "
        f"its {'transposed ' if transposed else ''}plane as int16 ({S} of {ORn} output rows at a time), 4 outputs "
        "per block */",
        f'__attribute__((optimize("O2"))) static void @SYM@(const int8_t *x, int8_t *out, const {wtype} *wgt, '
        "const int32_t *prm)", "{",
        f"    int32_t *pw = (int32_t *){pair};",
        "    int32_t k[11];",
        f"    int32_t a0, a1, a2, a3, u0, u1, u2, {''.join(u + ', ' for u in extra)}wa, wb;",
        f"    for (int32_t i = 0; i < {span(S) * RW // 2}; ++i) pw[i] = {zx2};",
        f"    for (int32_t c = 0; c < {C}; ++c) {{",
        f"        const {wtype} *wc = wgt + {6 if w16 else 9} * c;",
        f"        const int32_t *cq = prm + {P} * c;",
        *(["        for (int32_t i = 0; i < 6; ++i) k[i] = wc[i];"] if w16 else
          (f"        k[{2 * rr}] = {pk}(wc[{3 * rr}]{m}, wc[{3 * rr + 1}]{m}); "
           f"k[{2 * rr + 1}] = {pk}(wc[{3 * rr + 1}]{m}, wc[{3 * rr + 2}]{m});" for rr in range(3))),
        f"        k[6] = cq[0]; k[7] = {field('m')}; k[8] = {field('nu')};",
        f"        k[9] = {field('sl')}; k[10] = {field('r')};",
        f"        for (int32_t r0 = 0; r0 < {ORn}; r0 += {S}) {{",
        f"            const int32_t ns = {ORn} - r0 < {S} ? {ORn} - r0 : {S};",
        f"            for (int32_t i = 0; i < {sr} * (ns - 1) + 3; ++i) {{",
        f"                const int32_t ir = {sr} * r0 + i - {pad_r};",
        f"                int32_t *d = pw + i * {RW // 2};",
        f"                if (ir < 0 || ir >= {PR}) {{",
        # one strip: its padding rows are never written but by the fill above (no refill per channel)
        *([f"                    for (int32_t w = 0; w < {RW // 2}; ++w) d[w] = {zx2};"] if len(strips) > 1 else []),
        "                    continue;",
        "                }",
        f"                const int8_t *s = x + ir * {in_row} + c;",
        *("                " + line for line in widen),
        "            }",
        *(f"            {line}" for line in rows_loop),
        "        }",
        "    }",
        f"    (void)a0; (void)a1; (void)a2; (void)a3; (void)u0; (void)u1; (void)u2; "
        f"{''.join(f'(void){u}; ' for u in extra)}"
        "(void)wa; (void)wb;",
        "}", ""]
    symbol = shared_function(em, f"m4_dw_{node.name}", [("", "\n".join(lines))])
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)}, {w_sym}, {p_sym});"]
