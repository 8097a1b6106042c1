"""Cortex-M4 / M33 kernel for TFLite's int8 pointwise convolutions of 8, 16 or 32 input channels (VWW's 8 -> 16 layer
at 48 x 48, 16 -> 32 and 32 -> 32 at 24 x 24): two output positions at a time, 8 of their inputs each widened to int16
once into eight registers (SXTB16 and SXTB16 ROR #8 of each input word) and kept there for all the layer's output
channels, each channel's weights read once for both positions.

The matrix kernels (m4_network's 2x4p blocks) spend most of such a layer outside its few multiply-accumulates (8 to 32
per output): the columns widened by a call per pair, the channel words' and destinations' pointers kept in memory, a
requantisation per output of LSL (or SUB and ASR), ADD, SMMLAR, ASR, SSAT and STRB. Here one naked asm function per
layer, every channel unrolled with its constants in literals (registers: inputs r4-r11, accumulators r0/r1, two
temporaries r2/r3, the layer's words (in RAM) r12, the output lr; the input pointer, the end and the words' address
in the stack frame), per pair of positions one pass per 8 inputs over every channel:

- per channel and pass, at literal offsets from r12, its weights for the pass's 8 inputs as int16 in the inputs'
  lanes (x0, x2 then x1, x3 per input word) and times 2^(left + 1) (|w| 2^(left+1) <= 2^15: left <= 7, checked), in
  the first pass after its bias (times 2^(left + 1) too, the input zero point folded in: (bias - zx sum(w))
  2^(left+1)), in the last before its multiplier: single loads back to back (pipelined), 8 SMLAD
  (in the first pass the second position's first takes the bias as its addend: no copy); between passes the two
  partial sums in the stack frame (8 bytes a channel; a later pass starts from them);
- per output (the last pass) the accumulator is already shifted (SMMLAR's doubling and TFLite's left shift in the
  weights), so m4_network's requantisation (module docstring there: SRDHM as one SMMLAR, RoundingDivideByPOT's sign
  correction as its addend) is ASR #31 (the correction -[a < 0]), SMMLAR, ADD of the rounding nudge and the output
  zero point times 2^r (an immediate), SSAT with ASR #r (r a literal per channel), the activation's bounds where
  narrower than int8, STRB at a literal offset: 5 instructions (where r = 0: SMMULR, the zero point's ADD, SSAT);
- per pass and pair of positions 4 input loads and 8 SXTB16 (about 17 cycles).

VWW's 8 -> 16 layer: about 28.5 modelled cycles per channel and pair of positions (16 multiply-accumulates), against
43.6 for the 2x4p blocks and their widening calls. Exact where every accumulator is proven small (|acc| 2^left < 2^30
from the weights, the bias and the int8 inputs: ``small_accumulators``) and the nudge's sum fits int32; otherwise
(and for other shapes) the layer goes on to m4_network's kernels. The code is unrolled (about 70 bytes a channel and
pass): taken where out_c x passes <= 128 (VWW's 32 -> 64 layer would take 17 KB of code for 14 K cycles). An odd
position count's last position runs as a pair of itself in scratch copies.

The weights stay int8 in flash (the default build's rule), beside three words a channel (bias', multiplier, left + 1):
``m4_pwn_widen`` writes the words the kernel reads (widened, prescaled, pass by pass) into the matrix kernels' scratch
(``m4_pair``, no kernel of theirs running meanwhile: 4 (4 passes + 2) bytes a channel, 2,304 B for VWW's 32 -> 32
layer, RAM only where that is more than the scratch's other uses) at each call, about 11 cycles a word
(11 K cycles for VWW's three layers, against about 150 K that SXTB16 of int8 weights per channel and pass would cost
in the kernel).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import accumulator_bound, computed_input, named_helper, shifts_ok, small_accumulators
from tinycc_ml.target import Node, layer_quantisation, window_of

IN_CHANNELS = 8  # a pass's inputs of two positions as int16 lanes fill eight registers
PASSES = (1, 2, 4)  # 8, 16 or 32 input channels
MAX_OUT = 64  # the partial sums' stack frame (8 bytes a channel) and the literal offsets (a pass's words < 4 KB)
MAX_CHANNEL_PASSES = 128  # out_c x passes: the unrolled code (about 70 bytes a channel and pass) under about 9 KB


def modified_immediate(value: int) -> bool:
    """Whether a value is a Thumb-2 modified immediate of the shifted-byte form (8 significant bits anywhere)."""
    value &= 0xFFFFFFFF
    low = (value & -value).bit_length() - 1
    return value < 256 or value >> low < 256


def _add(reg: str, value: int) -> list[str]:
    """``reg += value`` in one instruction (ADD or SUB of an immediate), or none for 0; None where not encodable."""
    if value == 0:
        return []
    if value > 0 and (modified_immediate(value) or value < 4096):
        return [f"add {reg}, {reg}, #{value}"]
    if value < 0 and (modified_immediate(-value) or -value < 4096):
        return [f"sub {reg}, {reg}, #{-value}"]
    return None


def _clamp(reg: str, lo: int, hi: int) -> list[str]:
    """The activation's bounds where narrower than int8 (after SSAT): CMP and an IT block each."""
    lines = []
    for bound, cond, narrower in ((lo, "lt", lo > -128), (hi, "gt", hi < 127)):
        if not narrower:
            continue
        if bound >= 0:
            lines += [f"cmp {reg}, #{bound}", f"it {cond}", f"mov{cond} {reg}, #{bound}"]
        else:
            lines += [f"cmn {reg}, #{-bound}", f"it {cond}", f"mvn{cond} {reg}, #{-bound - 1}"]
    return lines


def _requant(reg: str, right: int, addend: int, q) -> list[str] | None:
    """One output's requantisation (the accumulator in ``reg`` already times 2^(left + 1), the multiplier in r2),
    clamp; None where the addend is no immediate."""
    add = _add(reg, addend)
    if add is None:
        return None
    if right:
        lines = [f"asr r3, {reg}, #31", f"smmlar {reg}, {reg}, r2, r3", *add, f"ssat {reg}, #8, {reg}, asr #{right}"]
    else:
        lines = [f"smmulr {reg}, {reg}, r2", *add, f"ssat {reg}, #8, {reg}"]
    return lines + _clamp(reg, q.lo, q.hi)


def channel_words(folded: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Per channel its three words in flash: bias' 2^(left+1) (the input zero point folded in), the multiplier,
    left + 1."""
    sl = np.maximum(shift, 0).astype(np.int64) + 1
    words = np.stack([folded.astype(np.int64) << sl, mult.astype(np.int64), sl], axis=1)
    return ((words + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32).reshape(-1)


def widen_helper(em) -> str:
    """m4_pwn_widen(w, cq, out_c, in_c, dst): a layer's words as its kernel reads them, into the RAM scratch, from
    its int8 weights and channel words in flash: pass by pass (8 inputs), per channel its bias' (the first pass),
    its 8 weights times 2^(left+1) as int16 lanes (x0, x2), (x1, x3) of each input word, its multiplier (the
    last pass)."""
    return named_helper(em, "m4_pwn_widen", """\
__attribute__((optimize("O2"), noinline)) static void @m4_pwn_widen(const int8_t *w, const int32_t *cq, int32_t out_c,
                                                                  int32_t in_c, int32_t *dst)
{
    for (int32_t j = 0; j < in_c; j += 8)
        for (int32_t c = 0; c < out_c; ++c) {
            const int8_t *wc = w + c * in_c + j;
            const int32_t s = 1 << cq[3 * c + 2];
            if (j == 0)
                *dst++ = cq[3 * c];
            for (int32_t k = 0; k < 8; k += 4) {
                *dst++ = (int32_t)((uint32_t)(uint16_t)(wc[k] * s) | (uint32_t)(uint16_t)(wc[k + 2] * s) << 16);
                *dst++ = (int32_t)((uint32_t)(uint16_t)(wc[k + 1] * s) | (uint32_t)(uint16_t)(wc[k + 3] * s) << 16);
            }
            if (j + 8 == in_c)
                *dst++ = cq[3 * c + 1];
        }
}
""")


FRAME = 12  # the stack frame's words before the partial sums: input pointer, end, the layer's words


def kernel_body(in_c: int, out_c: int, q, shift: np.ndarray) -> list[str] | None:
    """The naked function's instructions (arguments r0 inputs, r1 outputs, r2 the layer's words, r3 pairs >= 1):
    per pair of positions a pass per 8 inputs over every channel, the partial sums in the stack frame between
    passes (``in_c`` > 8), the last pass requantising and storing."""
    passes = in_c // IN_CHANNELS
    partial = 8 * out_c if passes > 1 else 0
    frame = -(-(FRAME + partial) // 8) * 8
    body = ["push {r4-r11, lr}", f"sub sp, sp, #{frame}", "str r2, [sp, #8]", "mov r12, r2", "mov lr, r1",
            f"movw r2, #{2 * out_c}", "mla r3, r3, r2, r1", "str r0, [sp]", "str r3, [sp, #4]", "1:"]
    pass_bytes = 0  # the previous pass's words
    for j in range(passes):
        first, last = j == 0, j == passes - 1
        # the two positions' pass inputs (unaligned LDR), widened in place; the pass's words
        body += ["ldr r2, [sp]", f"ldr r4, [r2, #{8 * j}]", f"ldr r6, [r2, #{8 * j + 4}]",
                 f"ldr r8, [r2, #{in_c + 8 * j}]", f"ldr r10, [r2, #{in_c + 8 * j + 4}]"]
        if last:
            body += [f"add r2, r2, #{2 * in_c}", "str r2, [sp]"]
        for raw in (4, 6, 8, 10):
            body += [f"sxtb16 r{raw + 1}, r{raw}, ror #8", f"sxtb16 r{raw}, r{raw}"]
        if passes > 1:  # one pass: r12 stays at the layer's words
            body.append("ldr r12, [sp, #8]" if first else f"add r12, r12, #{pass_bytes}")
        per = 4 + first + last  # words per channel in this pass
        for c in range(out_c):
            at = 4 * per * c
            w = at + 4 * first
            if first:
                body += [f"ldr r0, [r12, #{at}]", f"ldr r2, [r12, #{w}]", f"ldr r3, [r12, #{w + 4}]",
                         "smlad r1, r2, r8, r0"]
            else:
                body += [f"ldr r0, [sp, #{FRAME + 8 * c}]", f"ldr r1, [sp, #{FRAME + 8 * c + 4}]",
                         f"ldr r2, [r12, #{w}]", f"ldr r3, [r12, #{w + 4}]", "smlad r1, r2, r8, r1"]
            body += ["smlad r0, r2, r4, r0", "smlad r1, r3, r9, r1", "smlad r0, r3, r5, r0",
                     f"ldr r2, [r12, #{w + 8}]", f"ldr r3, [r12, #{w + 12}]",
                     "smlad r1, r2, r10, r1", "smlad r0, r2, r6, r0", "smlad r1, r3, r11, r1", "smlad r0, r3, r7, r0"]
            if not last:
                body += [f"str r0, [sp, #{FRAME + 8 * c}]", f"str r1, [sp, #{FRAME + 8 * c + 4}]"]
                continue
            body.append(f"ldr r2, [r12, #{w + 16}]")
            right = max(-int(shift[c]), 0)
            addend = ((1 << (right - 1)) if right else 0) + (q.output_zero_point << right)
            for reg, offset in (("r0", c), ("r1", out_c + c)):
                lines = _requant(reg, right, addend, q)
                if lines is None:
                    return None
                body += [*lines, f"strb {reg}, [lr, #{offset}]"]
        pass_bytes = 4 * per * out_c
    return body + [f"add lr, lr, #{2 * out_c}", "ldr r2, [sp, #4]", "cmp lr, r2", "bne 1b",
                   f"add sp, sp, #{frame}", "pop {r4-r11, pc}"]


def _nudges_fit(bound: np.ndarray, mult: np.ndarray, shift: np.ndarray, zp: int) -> bool:
    """Whether h - [a < 0] + 2^(r-1) + zp 2^r stays in int32 for every channel (|h| from the accumulators' bounds)
    and the right shifts are SSAT's (at most 31)."""
    left = np.maximum(shift, 0).astype(np.int64)
    right = np.maximum(-shift, 0).astype(np.int64)
    high = ((bound.astype(np.int64) << left) * mult.astype(np.int64) >> 31) + 1
    nudge = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0) + abs(zp) * (1 << right)
    return bool(np.all(right <= 31) and np.all(high + 1 + nudge < (1 << 31)))


def conv2d(em, node: Node) -> list[str] | None:
    """The layer as this kernel's call, or None (m4_network's kernels then)."""
    x_name, w_name, b_name = node.inputs
    g = em.graph
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    passes = in_c // IN_CHANNELS
    if (kh, kw) != (1, 1) or in_c % IN_CHANNELS or passes not in PASSES or out_c > MAX_OUT:
        return None
    if out_c * passes > MAX_CHANNEL_PASSES:
        return None
    if x.shape[0] != 1:
        return None
    if not computed_input(em, node):
        return None
    win = window_of(g, node, (kh, kw))
    if win.stride != (1, 1) or win.pad != (0, 0):
        return None
    q = layer_quantisation(g, node, out_c)
    if not shifts_ok(q) or np.any(q.shifts > 7):  # the weights times 2^(left+1) within int16
        return None
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, in_c)
    bias = np.asarray(g.node(b_name).attrs["value"], np.int64).reshape(-1)
    folded = bias - q.input_zero_point * W.astype(np.int64).sum(axis=1)
    if not small_accumulators(folded, W, 128, q.shifts).all():
        return None
    if not _nudges_fit(accumulator_bound(folded, W, 128), q.multipliers, q.shifts, q.output_zero_point):
        return None
    body = kernel_body(in_c, out_c, q, q.shifts)
    if body is None:
        return None
    weights = em.add_const_array(em.sym(f"{node.name}_m4w8"), W.reshape(-1), "int8_t",
                                 f"%{node.name}: {out_c}x{in_c} int8 weights (m4_pointwise_narrow)")
    cq = em.add_const_array(em.sym(f"{node.name}_m4pq"), channel_words(folded, q.multipliers, q.shifts), "int32_t",
                            f"%{node.name}: per channel bias' 2^(left+1), multiplier, left + 1 (m4_pointwise_narrow)")
    n_words = out_c * (4 * passes + 2)
    # the matrix kernels' scratch (no kernel of theirs runs meanwhile): RAM only where these words are the larger
    em.scratch(em.sym("m4_pair"), "uint32_t", n_words)
    words = f"(int32_t *){em.sym('m4_pair')}"
    em.weight_layouts[node.name] = ("int8", f"pointwise, {in_c} input channels (m4_pointwise_narrow): int8 in "
                                            f"flash, widened and prescaled into RAM ({4 * n_words} bytes) per call")
    symbol = em.sym(f"m4_pwn_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: 1x1 convolution, {in_c} -> {out_c} channels, two positions at a time "
        "(m4_pointwise_narrow) */",
        f"__attribute__((naked, noinline)) static void {symbol}(__attribute__((unused)) const int8_t *x, "
        "__attribute__((unused)) int8_t *out, __attribute__((unused)) const int32_t *w, "
        "__attribute__((unused)) int32_t pairs)  /* r0-r3 */",
        "{",
        "    __asm__ volatile(",
        *(f'        "{line}\\n"' for line in body),
        "    );",
        "}", ""])
    positions = win.out_height * win.out_width
    xs, out = em.var(x_name), em.var(node.name)
    lines = [f"{widen_helper(em)}({weights}, {cq}, {out_c}, {in_c}, {words});"]
    if positions > 1:
        lines.append(f"{symbol}({xs}, {out}, {words}, {positions // 2});")
    if positions % 2:  # the last position as a pair of itself, in scratch copies
        xbuf, obuf = em.sym("m4_pwn_x"), em.sym("m4_pwn_o")
        em.scratch(xbuf, "uint32_t", in_c // 2)
        em.scratch(obuf, "uint32_t", -(-2 * out_c // 4))
        last = (positions - 1) * in_c
        lines += ["{",
                  f"    int8_t *xb = (int8_t *){xbuf}, *ob = (int8_t *){obuf};",
                  f"    for (int32_t i = 0; i < {in_c}; ++i) xb[i] = xb[i + {in_c}] = {xs}[{last} + i];",
                  f"    {symbol}(xb, ob, {words}, 1);",
                  f"    for (int32_t i = 0; i < {out_c}; ++i) {out}[{(positions - 1) * out_c} + i] = ob[i];",
                  "}"]
    return lines
