"""Cortex-M4 / M33 kernel for TFLite int8 convolutions of 3 input channels (an image's RGB first layer: ResNet-8's
3x3 3 -> 16, VWW's 3x3 stride 2 3 -> 8), in place of ``m4_network``'s im2col + matrix kernel; bit for bit its
arithmetic (and so tflite-micro's).

A window row of kw taps of 3 channels is L = 3 kw contiguous input bytes, not whole words, so the widened rows of
``m4_network.rows_function`` do not apply (a window starts at any byte). Here each input row the windows read is
widened once per output row into a scratch slot as one int16-pair word per byte position j: (b[j], b[j + 2]),
SXTB16 of the bytes j..j+3 (the padding's bytes zx, cancelled by the bias as in m4_network). A window row is then
the words at j0 + 0, 1, 4, 5, 8, ... (lanes b0 b2, b1 b3, b4 b6, b5 b7, b8 b10: 10 lanes for 9 taps, the tenth
weight zero), read in place at immediate offsets from one pointer for two output positions (the second
3 sx words further); a 3 x 3 window is 14 words, the ninth bytes of its first two rows merged into one word of a
merge slot rebuilt per output row. Each row is widened once (``m4_rgb_widen``: per 4 bytes one load, four SXTB16
and two PKHBT): at stride 1 into a ring of slots (with a copy kh slots on, so a window's rows are contiguous from
any slot), at larger strides the slots still in the window moved down (``m4_move_words``); rows wider than
SCRATCH_BYTES of slots go in segments of output columns (``segments``), each staged from its own first byte.

The product is m4_network's 2x4p block on pairs of channels (``paired_rows``' words: 256 c1 + c0 in each int16
half, SMLAD of the raw word and of its SXTB16): per half step the two positions' words and the two pairs' words
loaded back to back, 2 SXTB16, 8 SMLAD; the second position's accumulators seeded from the first's biases in the
first half; then the requantisation in the same asm (m4_network's epilogue: LSL, ADD, SMMLAR, ASR, SSAT, STRB),
the group's biases, weights and per-channel constants one stream read at immediate offsets from one pointer
(no pointer in memory but the destination's), the loop over groups in the asm on a loop word of the stream. Odd
output widths: the last pair overlaps the previous one (its first position computed twice, stored twice)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import (
    PAIRED_ACC,
    accumulator_bound,
    channel_params,
    computed_input,
    fold_zero_point,
    named_helper,
    paired_params,
    requantise_group,
    shifts_ok,
    small_accumulators,
)
from tinycc_ml.target import Node, layer_quantisation, window_of

MAX_OFFSET = 4095  # LDR's immediate offset
# the slots' bytes at most (ResNet-8's 32-pixel rows in one piece, as its matrix kernels' pair buffer already takes;
# wider rows in segments of output columns: VWW's 48 in two)
SCRATCH_BYTES = 3072
UNROLL_GROUPS = False  # two groups of 4 channels per loop iteration of the block asm (code x2)


def segments(OW: int, slot_words, slots: int) -> tuple[int, int, int]:
    """(segments, columns a segment, words a slot): the fewest segments of an even number of output columns (the
    last the rest, one column more rather than a segment of one) whose slots fit SCRATCH_BYTES, at least 2
    columns each; ``slot_words(width)`` a slot's words for a segment of that width."""
    n = 1
    while True:
        cw = -(-OW // n)
        cw += cw % 2
        count = -(-OW // cw)
        widest = cw
        if count > 1 and OW - (count - 1) * cw == 1:
            count, widest = count - 1, cw + 1
        rw = slot_words(widest)
        if 4 * slots * rw <= SCRATCH_BYTES or cw <= 2:
            return count, cw, rw
        n += 1


def window_words(L: int) -> list[int]:
    """The byte offsets j in a window row of L bytes whose words (b[j], b[j + 2]) cover it: per 4 bytes j and
    j + 1 (lanes j, j + 2 and j + 1, j + 3), none starting at or past L."""
    return [j for t in range(-(-L // 4)) for j in (4 * t, 4 * t + 1) if j < L]


def halves_of(kh: int, L: int, rw: int) -> list[tuple[int, int, int | None]]:
    """The half steps of a window: (byte offset from the position's first word, tap a, tap b or None) for the
    word (a, b) it reads. Per window row ky the words of ``window_words``, their taps ky L + j and ky L + j + 2 (None
    past the row); where a row ends in a word of one live tap (L = 1 mod 4) two rows' such words are one word of
    a merge slot (``merged``): rows 2i and 2i + 1's last bytes, the slots after the kh rows'."""
    rel = window_words(L)
    single = L % 4 == 1
    halves = []
    for ky in range(kh):
        for j in rel:
            if single and j == L - 1 and ky < 2 * (kh // 2):
                continue
            halves.append((4 * (ky * rw + j), ky * L + j, ky * L + j + 2 if j + 2 < L else None))
    if single:
        halves += [(4 * ((kh + i) * rw + L - 1), 2 * i * L + L - 1, (2 * i + 1) * L + L - 1) for i in range(kh // 2)]
    return halves


def merged(kh: int, L: int) -> int:
    """The merge slots (``halves_of``)."""
    return kh // 2 if L % 4 == 1 else 0


def rgb_weights(W: np.ndarray, halves) -> np.ndarray | None:
    """Per group of 4 channels (two pairs) and half step (``halves_of``: taps a, b) two words: pair (c0, c1)'s and
    pair (c2, c3)'s, bytes c0[a], c1[a] - [c0[a] < 0], c0[b], c1[b] - [c0[b] < 0] (zero where b is None): its SXTB16
    c0's two weights, its halves as int16 256 c1 + c0 (``m4_network.paired_rows``). None where some c1 - [c0 < 0]
    leaves int8. Shape (groups, halves, 2) int32."""
    out_c = W.shape[0]
    lanes = np.zeros((out_c, len(halves), 2), np.int16)
    for h, (_, a, b) in enumerate(halves):
        lanes[:, h, 0] = W[:, a]
        if b is not None:
            lanes[:, h, 1] = W[:, b]
    c0, c1 = lanes[0::2], lanes[1::2] - (lanes[0::2] < 0)
    if c1.min() < -128:
        return None
    # pairs, halves, lane, (c0, c1) -> bytes c0[a], c1[a], c0[b], c1[b]
    words = np.stack([c0, c1], axis=-1).astype(np.int8).reshape(out_c // 2, len(halves), 4).view("<i4")[..., 0]
    return words.reshape(out_c // 4, 2, len(halves)).transpose(0, 2, 1).astype(np.int32)


def widen_helper(em, copy: bool) -> str:
    """m4_rgb_widen(s, d, n) (with ``copy`` m4_rgb_widen2(s, d, d2, n), every word stored at d and d2): n chunks
    of 4 bytes of the word-aligned s (and the word after them) into 4 n words of d: per byte j the int16 pair
    (s[j], s[j + 2]): SXTB16 of the chunk's word, of it ROR 8, and for j + 2, j + 3 SXTB16 ROR 16 / ROR 24
    (bytes 2, 0 and 3, 1) with the next word's SXTB16 packed into the high half (PKHBT);
    the next chunk's first two words are those SXTB16, two chunks per iteration."""
    def chunk(a: str, b: str, e: str, o: str, e2: str, o2: str, k: int, loads: list[str]) -> str:
        return "\\n\\t".join([
            f"sxtb16 %[x], %[{a}], ror #16", f"sxtb16 %[y], %[{a}], ror #24", *loads,
            f"sxtb16 %[{e2}], %[{b}]", f"sxtb16 %[{o2}], %[{b}], ror #8", f"pkhbt %[x], %[x], %[{e2}], lsl #16",
            f"pkhbt %[y], %[y], %[{o2}], lsl #16", f"str %[{e}], [%[d], #{16 * k}]",
            f"str %[{o}], [%[d], #{16 * k + 4}]", f"str %[x], [%[d], #{16 * k + 8}]",
            f"str %[y], [%[d], #{16 * k + 12}]",
            *(f"str %[{r}], [%[d2], #{16 * k + 4 * i}]" for i, r in enumerate((e, o, "x", "y"))
              if copy)])
    ops = ('[s] "+&r"(s), [d] "+&r"(d), ' + ('[d2] "+&r"(d2), ' if copy else '') +
           '[a] "+&r"(a), [e] "+&r"(e), [o] "+&r"(o), [b] "=&r"(b), [e2] "=&r"(e2), '
           '[o2] "=&r"(o2), [x] "=&r"(x), [y] "=&r"(y) : : "memory"')
    # the second chunk's word loaded with the first's (a after its two SXTB16: a load after a load is pipelined)
    one = chunk("a", "b", "e", "o", "e2", "o2", 0, ["ldr %[b], [%[s], #4]"])
    two = (chunk("a", "b", "e", "o", "e2", "o2", 0, ["ldr %[b], [%[s], #4]", "ldr %[a], [%[s], #8]"]) + "\\n\\t" +
           chunk("b", "a", "e2", "o2", "e", "o", 1, []))
    name = "m4_rgb_widen2" if copy else "m4_rgb_widen"
    d2 = " int32_t *d2," if copy else ""
    step = "\\n\\tadd %[d2], %[d2], #32" if copy else ""
    return named_helper(em, name, f"""\
__attribute__((optimize("O2"), noinline)) static void @{name}(const int32_t *s, int32_t *d,{d2} int32_t n)
{{
    int32_t a = s[0], b, e, o, e2, o2, x, y;
    __asm__("sxtb16 %0, %2\\n\\tsxtb16 %1, %2, ror #8" : "=&r"(e), "=&r"(o) : "r"(a));
    for (; n >= 2; n -= 2)
        __asm__ volatile("{two}\\n\\tadd %[s], %[s], #8\\n\\tadd %[d], %[d], #32{step}" : {ops});
    if (n)
        __asm__ volatile("{one}" : {ops});
}}
""")


def move_helper(em) -> str:
    """m4_move_words(d, s, n4): 4 n4 words from s to d (d below s: the slots still in the window moved down), 8 at a
    time by LDM and STM (registers fixed in ascending order)."""
    regs = ("r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12")
    names = "abcefghi"
    decl = ", ".join(f'{n} __asm__("{r}")' for n, r in zip(names, regs))
    eight = ", ".join(f"%[{n}]" for n in names)
    four = ", ".join(f"%[{n}]" for n in names[:4])
    ops = ('[s] "+&r"(s), [d] "+&r"(d), ' + ", ".join(f'[{n}] "=&r"({n})' for n in names) + ' : : "memory"')
    return named_helper(em, "m4_move_words", f"""\
__attribute__((optimize("O2"), noinline)) static void @m4_move_words(int32_t *d, const int32_t *s, int32_t n4)
{{
    register int32_t {decl};
    for (int32_t n = n4 >> 1; n > 0; --n)
        __asm__ volatile("ldm %[s]!, {{{eight}}}\\n\\tstm %[d]!, {{{eight}}}" : {ops});
    if (n4 & 1)
        __asm__ volatile("ldm %[s]!, {{{four}}}\\n\\tstm %[d]!, {{{four}}}" : {ops});
}}
""")


def _pair_macs(w: str, accs: list[tuple[str, str]], seed: bool) -> list[str]:
    """Pair word w times the positions' words u, v: raw accumulators, SXTB16 w, even ones; ``seed``: v's start
    from u's (its biases, before u's first product)."""
    (ru, eu), (rv, ev) = accs
    if seed:
        return [f"smlad %[{rv}], %[{w}], %[v], %[{ru}]", f"smlad %[{ru}], %[{w}], %[u], %[{ru}]",
                f"sxtb16 %[{w}], %[{w}]",
                f"smlad %[{ev}], %[{w}], %[v], %[{eu}]", f"smlad %[{eu}], %[{w}], %[u], %[{eu}]"]
    return [f"smlad %[{ru}], %[{w}], %[u], %[{ru}]", f"smlad %[{rv}], %[{w}], %[v], %[{rv}]",
            f"sxtb16 %[{w}], %[{w}]",
            f"smlad %[{eu}], %[{w}], %[u], %[{eu}]", f"smlad %[{ev}], %[{w}], %[v], %[{ev}]"]


def group_bytes(H: int, F: int) -> int:
    """A group's stream: 4 biases, 2 words a half step, F fields a channel."""
    return 4 * (4 + 2 * H + 4 * F)


def group_asm(offsets: list[int], dv: int, params, q, fields: tuple[str, ...], out_c: int, at: int,
              k0: int, flag: int | None) -> list[str]:
    """One group of 4 channels by two positions, its stream at wp + ``at``: biases, ``offsets`` (bytes from x of each
    half step's word for the first position; the second's dv further), epilogue, stores at the destination d
    (memory) + ``k0``; ``flag``: the block's last group, the stream's loop word loaded into u (in the run of the
    destination's load)."""
    H, F = len(offsets), len(fields)
    lit, mode = params.literals, params.mode
    body = [f"ldr %[{r}], [%[wp], #{at + 4 * i}]" for i, r in enumerate(("e0u", "r0u", "e1u", "r1u"))]
    for h, o in enumerate(offsets):
        body += [f"ldr %[u], [%[x], #{o}]", f"ldr %[v], [%[x], #{o + dv}]", f"ldr %[w], [%[wp], #{at + 16 + 8 * h}]",
                 f"ldr %[w1], [%[wp], #{at + 20 + 8 * h}]"]
        for k, w in enumerate(("w", "w1")):
            body += _pair_macs(w, [(f"r{k}u", f"e{k}u"), (f"r{k}v", f"e{k}v")], h == 0)
    base = at + 16 + 8 * H
    body += requantise_group(lit, mode, q, lambda k, name: f"[%[wp], #{base + 4 * (k * F + fields.index(name))}]"
                             if name in fields else None)
    if flag is not None:
        body.append(f"ldr %[u], [%[wp], #{flag}]")
    body.append("ldr %[w], %[d]")
    for k in range(4):
        for c, off in (("u", k0 + k), ("v", out_c + k0 + k)):
            body.append(f"strb %[{'er'[k % 2]}{k // 2}{c}], [%[w], #{off}]")
    return body


def block_asm(offsets: list[int], dv: int, params, q, fields: tuple[str, ...], out_c: int, unroll: int) -> list[str]:
    """The asm of all of a position pair's groups: a loop over blocks of ``unroll`` groups (their streams one after
    another, then the block's loop word: 0 after the last block), d and wp advanced once a block, the loop's test
    on the loop word (no counter in memory)."""
    S = group_bytes(len(offsets), len(fields))
    body = ["1:"]
    for i in range(unroll):
        body += group_asm(offsets, dv, params, q, fields, out_c, i * S, 4 * i, unroll * S if i == unroll - 1 else None)
    return body + [f"add %[w], %[w], #{4 * unroll}", "str %[w], %[d]", f"add %[wp], %[wp], #{unroll * S + 4}",
                   "cmp %[u], #0", "bne 1b"]


def whole_row(stage: str, stage_bytes: int, row_bytes: int, lo: int, zx: int, zw: int) -> list[str]:
    """The staging of a whole row (one segment: its bounds literals): zx words over the left padding, the row's
    bytes from lo, zx bytes to the next word, zx words to the end."""
    e = min(row_bytes + lo, stage_bytes)
    e4 = min(-(-e // 4) * 4, stage_bytes)
    return [*(f"        ((int32_t *){stage})[{i}] = {zw};" for i in range(-(-lo // 4))),
            f"        __builtin_memcpy(s + {lo}, x + iy * {row_bytes} - b0 - {lo}, {e - lo});",
            *(f"        s[{i}] = {zx};" for i in range(e, e4)),
            *([f"        for (int32_t i = {e4 // 4}; i < {stage_bytes // 4}; ++i) ((int32_t *){stage})[i] = {zw};"]
              if e4 < stage_bytes else [])]


def conv2d(em, node: Node) -> list[str] | None:
    """The layer's call lines, or None (``m4_network.conv2d``'s kernels) unless: 3 input channels, dilation 1,
    output channels a multiple of 4, at least two output columns, the accumulators proven small and pairable,
    the epilogue's shifts and sign correction literals, the offsets within LDR's reach."""
    x_name, w_name, b_name = node.inputs
    g = em.graph
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    if in_c != 3 or out_c % 4 or not computed_input(em, node) or x.shape[0] != 1:
        return None
    q = layer_quantisation(g, node, out_c)
    if not shifts_ok(q):
        return None
    win = window_of(g, node, (kh, kw))
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    OH, OW, H, Wd = win.out_height, win.out_width, win.height, win.width
    if (dy, dx) != (1, 1) or OW < 2:
        return None
    L = kw * in_c
    rel = window_words(L)
    m = merged(kh, L)
    # stride 1: the rows in a ring of slots (row r in slot r % kh and a copy in r % kh + kh: a window's rows
    # contiguous from slot r0 % kh), the merge slots after a window's rows over copies no later window reads
    ring = sy == 1 and kh > 1

    def slot_words(width: int) -> int:
        """A slot: the words of byte positions j from a segment's first window's first byte to the last one a
        window of the segment reads, in chunks of 4."""
        return 4 * -(-(in_c * sx * (width - 1) + rel[-1] + 1) // 4)

    nseg, cw, rw = segments(OW, slot_words, (2 * kh - 1 + m) if ring else (kh + m))
    chunks = rw // 4
    j_end = rw
    halves = halves_of(kh, L, rw)
    offsets = [o for o, _, _ in halves]
    dv = 4 * in_c * sx
    if max(offsets) + dv > MAX_OFFSET:
        return None
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, kh * kw * in_c)
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    folded = bias - q.input_zero_point * W.astype(np.int64).sum(axis=1)
    bound = accumulator_bound(folded, W, 128)
    if not small_accumulators(folded, W, 128, q.shifts).all() or not np.all(bound[1::2] < PAIRED_ACC):
        return None
    words = rgb_weights(W, halves)
    if words is None:
        return None
    fold = fold_zero_point(bound, q.multipliers, q.shifts, q.output_zero_point)
    params = paired_params(channel_params(folded, q.multipliers, q.shifts, 4, "fold" if fold else "plain", None,
                                          q.output_zero_point if fold else None))
    if {"nm", "sl"} & set(params.stored):
        return None
    fields = params.stored[1:]
    per = params.words.reshape(out_c // 4, 4, params.per_channel)
    groups = out_c // 4
    S = group_bytes(len(offsets), len(fields))
    # one group a loop iteration: two (10 K cycles less on ResNet-8) took 1.1 K bytes of code it has no room for
    # under 1.1x its file
    unroll = 2 if UNROLL_GROUPS and groups % 2 == 0 and 2 * S + 4 <= MAX_OFFSET else 1
    if unroll * S + 4 > MAX_OFFSET:
        return None
    stream = np.concatenate([per[:, :, 0], words.reshape(groups, -1), per[:, :, 1:].reshape(groups, -1)], axis=1)
    blocks = groups // unroll
    loop_words = (np.arange(blocks) < blocks - 1).astype(np.int32)[:, None]  # 0: the last block
    stream = np.concatenate([stream.reshape(blocks, -1), loop_words], axis=1)
    em.weight_layouts[node.name] = ("int8", "3 input channels (arm.m4_conv_rgb): pairs of channels in words")
    s_sym = em.add_const_array(em.sym(f"{node.name}_m4s"), stream.reshape(-1), "int32_t",
                               f"%{node.name}: per 4 channels their biases, {len(offsets)} x 2 words of pairs of "
                               f"channels' weights (m4_conv_rgb), per channel {', '.join(fields)}")
    zx = q.input_zero_point
    zw = ((zx & 0xFF) * 0x01010101 + (1 << 31)) % (1 << 32) - (1 << 31)
    pair = em.sym("m4_pair")
    em.scratch(pair, "uint32_t", ((2 * kh - 1 + m) if ring else (kh + m)) * rw)
    stage = em.sym("m4_rgb_row")
    em.scratch(stage, "uint32_t", chunks + 1)
    widen = widen_helper(em, ring)
    symbol = em.sym(f"m4_rgb_{node.name}")
    row_bytes = Wd * in_c
    lo = in_c * px  # the staged row: zx, the input row's bytes at lo, zx
    accs = [f"{a}{k}{c}" for k in (0, 1) for a in "er" for c in "uv"]
    outs = {k: "=&r" for k in (*accs, "u", "v", "w", "w1")}
    outs.update({"wp": "+&r", "d": "+m"})
    body = block_asm(offsets, dv, params, q, fields, out_c, unroll)
    asm = ["            __asm__ volatile(", *(f'                "{line}\\n"' for line in body),
           "                : " + ", ".join(f'[{k}] "{c}"({k})' for k, c in outs.items()),
           '                : [x] "r"(x) : "cc", "memory");']
    stage_bytes = 4 * (chunks + 1)
    build = [
        f"/* %{node.name}: row iy from input byte b0 widened into slot d (m4_conv_rgb): zx outside the input */",
        f'__attribute__((optimize("O2"))) static void {symbol}_row(const int8_t *x, int32_t iy, int32_t b0, '
        f'int32_t *d{", int32_t *d2" if ring else ""})', "{",
        f"    int8_t *s = (int8_t *){stage};",
        f"    if (iy < 0 || iy >= {H}) {{",
        f"        for (int32_t i = 0; i < {chunks + 1}; ++i) ((int32_t *){stage})[i] = {zw};",
        "    } else {",
        *(whole_row(stage, stage_bytes, row_bytes, lo, zx, zw) if nseg == 1 else [
        "        const int32_t a = b0 < 0 ? -b0 : 0;  /* the staged bytes before the input's, and from e on after */",
        f"        int32_t e = {row_bytes} - b0 < {stage_bytes} ? {row_bytes} - b0 : {stage_bytes};",
        f"        for (int32_t i = 0; i < a; ++i) s[i] = {zx};",
        "        if (e > a)",
        f"            __builtin_memcpy(s + a, x + iy * {row_bytes} + b0 + a, (uint32_t)(e - a));",
        "        else",
        "            e = a;",
        f"        for (int32_t i = e; i < {stage_bytes}; ++i) s[i] = {zx};"]),
        "    }",
        f"    {widen}((const int32_t *){stage}, d, {'d2, ' if ring else ''}{chunks});",
        "}", ""]
    em.helpers[f"{symbol}_row"] = "\n".join(build)
    keep = kh - sy  # window rows the next output row still reads
    if ring:
        rows = [f"        for (; next < oy + {kh}; ++next) {{  /* padded row next: slot next % {kh}, a copy {kh} on */",
                f"            const int32_t k = next % {kh};",
                f"            {symbol}_row(xin, next - {py}, b0, (int32_t *){pair} + k * {rw}, "
                f"(int32_t *){pair} + (k < {kh - 1} ? k + {kh} : k) * {rw});",
                "        }",
                f"        uint32_t *base = {pair} + oy % {kh} * {rw};"]
    else:
        rows = ["        int32_t k = 0;",
                *(["        if (oy > 0) {  /* the rows still in the window moved down */",
                   f"            {move_helper(em)}((int32_t *){pair}, (const int32_t *){pair} + {sy * rw}, "
                   f"{keep * rw // 4});",
                   f"            k = {keep};",
                   "        }"] if keep > 0 else []),
                f"        for (; k < {kh}; ++k)",
                f"            {symbol}_row(xin, oy * {sy} - {py} + k, b0, (int32_t *){pair} + k * {rw});",
                f"        uint32_t *base = {pair};"]
    lines = [
        f"/* %{node.name}: {kh}x{kw} convolution of 3 channels, {out_c} out, stride {sy}x{sx} (m4_conv_rgb) */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int8_t *xin, int8_t *out)', "{",
        f"  for (int32_t sg = 0; sg < {nseg}; ++sg) {{  /* segments of {cw} output columns */",
        f"    const int32_t c0 = sg * {cw}, c1 = sg + 1 < {nseg} ? c0 + {cw} : {OW}, b0 = c0 * {in_c * sx} - {lo};",
        *(["    int32_t next = 0;"] if ring else []),
        f"    for (int32_t oy = 0; oy < {OH}; ++oy) {{",
        *rows,
        *(line for i in range(m) for line in (
            "        _Pragma(\"GCC unroll 8\")",
            f"        for (int32_t j = {L - 1}; j < {j_end}; j += {in_c * sx})  /* merged last bytes */",
            f"            base[{(kh + i) * rw} + j] = (base[{2 * i * rw} + j] & 0xFFFFu) | "
            f"(base[{(2 * i + 1) * rw} + j] << 16);")),
        "        const uint32_t *x = base;",
        f"        int8_t *dd = out + (oy * {OW} + c0) * {out_c};",
        "        for (int32_t left = c1 - c0; left > 0; left -= 2) {",
        *(["            if (left == 1) {  /* an odd width's last pair overlaps the one before */",
           f"                x -= {in_c * sx};",
           f"                dd -= {out_c};",
           "            }"] if OW % 2 else []),
        f"            const int32_t *wp = {s_sym};",
        "            int8_t *d = dd;",
        "            {",
        "                int32_t e0u, r0u, e1u, r1u, e0v, r0v, e1v, r1v, u, v, w, w1;",
        *asm,
        "            }",
        f"            x += {2 * in_c * sx};",
        f"            dd += {2 * out_c};",
        "        }",
        "    }",
        "  }",
        "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
