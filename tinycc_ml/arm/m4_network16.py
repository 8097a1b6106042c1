"""Cortex-M4 / M33 kernels for TFLite's 16x8 network layers (int16 activations with zero point 0, int8 weights,
int64 biases): convolutions, depthwise convolutions, fully connected layers and ADD on the DSP extension, bit for
bit the shared C's (the op modules' 16x8 forms) and so tflite-micro's.

An int16 input word is already two SMLAD lanes, so the weights are widened to int16 at compile time (in flash,
twice the int8 bytes) and the inner loops multiply words by words: no unpacking at all.

Convolutions and fully connected layers are one matrix product per layer (``matrix_function``), its geometry
in literals: channels x columns of K int16 inputs (im2col of a window, an input position of a 1 x 1 stride-1
convolution, a row of a fully connected layer), K padded to a multiple of 4 with zero weights:

- "2x2": two columns by two channels, 4 inputs deep a step: the two columns interleaved once for all the
  layer's channels (``m4_ilv2``: per step c0's two words, c1's two, one LDM), per channel one LDRD of its
  four int16 weights, 8 SMLAD: 11 instructions for 16 multiply-accumulates (m4_network's ``step_2x2``, the
  int8 kernel's int16-weight step, whose operands these words are already);
- "1x4": a fully connected layer of one row (each weight read once): the row in place (LDR: arena tensors
  are only 2-byte aligned), four channels a step, their weights in two LDM: 12 instructions for 16.

Exactness. TFLite sums in int64 (the bias is int64) and requantises the int64 sum: MultiplyByQuantizedMultiplier
with the multiplier rounded to 16 bits (``red``, at most 0x7FFF) and one rounding shift t = 15 - shift, cut to
int32. Per layer at compile time:

- where every channel's |bias| + 32768 sum |w| < 2^31 (``proven_int32``) the whole sum fits an int32 for every
  int16 input: the bias is the SMLAD accumulator's start, and (t >= 17) the requantisation is one SMMLA:
  (acc red + 2^(t-1)) >> t = SMMLA(acc, red 2^e, 2^(s-1)) >> s with s = max(1, t - 32), e = 32 + s - t in
  [0, 16] (numerator and denominator scaled by 2^e; SMMLA's high word is the floor; red 2^e < 2^31), then SSAT
  to int16 and the activation's bounds;
- else (``chunked``) the sum is taken in int32 over chunks of at most ``CHUNK_STEPS`` steps, each chunk's partial
  sum proven to fit (4 CHUNK_STEPS 128 32768 < 2^31, whatever the weights), added into int64 accumulators that
  start at the bias, and requantised in int64 as TFLite writes it. This replaces a 64-bit SMLALD inner loop:
  the same exact sum at the int32 loop's speed, a 64-bit add per chunk.

An int32 bias (a file whose quantized_bias_type says INT32: convolutions and fully connected layers) keeps TFLite's
int32 arithmetic: the sum in int32 from the bias as above (proven for every int16 input, else the shared C), then
TFLite's int32 MultiplyByQuantizedMultiplier with its full multiplier (m4_network's ``m4_rq_wide``).

Depthwise convolutions (multiplier 1, int64 bias proven within int32 as above, else the shared C), one function
per layer: positions whose window lies inside the input two at a time, the taps unrolled, four channels
a group (two input words; the tap's int16 weights one LDRD; SMLABB / SMLATT, one channel per lane product),
then a group of two and one channel where C is not a multiple of 4; the other positions over the taps inside
the input (zero point 0: the padding's taps add nothing, so no bias correction). ADD: TFLite's three
rescalings, each one SMMLAR (m4_network's ``m4_rq``), proven exact from the int16 ranges at compile time.

The functions are compiled at -O2 whatever the build's flags, as m4_network's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tinycc_ml.arm.m4_add import rescaled_add
from tinycc_ml.arm.m4_network import (
    asm_block,
    im2col_function,
    inside_range,
    minmax_helpers,
    named_helper,
    rq_helper,
    saturated,
    split_steps,
    step_2x2,
)
from tinycc_ml.target import (
    Node,
    activation_range,
    add_quantisation,
    layer_quantisation,
    multiply_by_quantized_multiplier,
    window_of,
)

CHUNK_STEPS = 64  # steps of 4 inputs per int32 partial sum on the chunked path: 256 x 128 x 32768 = 2^30
INPUT_REACH = 32768  # |x| of an int16 input
INT32_LIMIT = 1 << 31


# ---------------------------------------------------------------- which layers, and their arithmetic


def tflite_16x8(em, node: Node) -> bool:
    """These kernels compute TFLite's 16x8 layers: int16 input and output; a layer's int8 weights and int64
    bias, or (convolutions, fully connected layers) an int32 bias whose int32 sums are proven for every int16 input
    (TFLite's int32 arithmetic, the ``narrow`` epilogue); ADD's two int16 operands."""
    g = em.graph
    out = node.type.dtype
    if not (out.is_quantised and out.bits == 16):
        return False
    types = [g.type(i).dtype for i in node.inputs]
    if node.op == "tensor_add":
        return all(t.is_quantised and t.bits == 16 for t in types)
    if not (len(types) == 3 and types[0].is_quantised and types[0].bits == 16 and types[1].bits == 8
            and out.zero_point == 0 and types[0].zero_point == 0):
        return False
    if types[2].bits == 64:
        return True
    # an int32 bias (conv and fully connected): TFLite's int32 sums, which must be proven here as the reader does
    if types[2].bits != 32 or node.op not in ("conv2d", "fully_connected") or em.graph.op(node.inputs[2]) != "const":
        return False
    W = np.asarray(em.graph.node(node.inputs[1]).attrs["value"], np.int64).reshape(g.type(node.inputs[1]).shape[0],
                                                                                    -1)
    return proven_int32(np.asarray(em.graph.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1), W)


def reduced_multipliers(mult: np.ndarray) -> np.ndarray:
    """TFLite's 16x8 multiplier: the Q31 multiplier rounded to 16 bits (at most 0x7FFF)."""
    m = np.asarray(mult, np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def accumulator_bounds(bias: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Per channel (rows of W), the largest |bias + sum w x| over int16 inputs."""
    return np.abs(bias.astype(np.int64)) + INPUT_REACH * np.abs(W.astype(np.int64)).sum(axis=1)


def proven_int32(bias: np.ndarray, W: np.ndarray) -> bool:
    return bool(np.all(accumulator_bounds(bias, W) < INT32_LIMIT))


def smmla_params(mult: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(M, s) per channel of the SMMLA requantisation (the module's docstring), or None where some channel's
    t = 15 - shift is below 17 or beyond 63."""
    red = reduced_multipliers(mult)
    t = 15 - np.asarray(shift, np.int64)
    if np.any(t < 17) or np.any(t > 63):
        return None
    s = np.maximum(1, t - 32)
    return red << (32 + s - t), s


def smmla_requantise(acc: np.ndarray, M: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The kernels' fast requantisation in numpy, instruction by instruction: SMMLA(acc, M, 2^(s-1)) >> s."""
    acc, M, s = (np.asarray(v, np.int64) for v in (acc, M, s))
    high = ((1 << (s - 1)) << 32) + acc * M >> 32
    return high >> s


def _layer_ok(q) -> bool:
    t = 15 - np.asarray(q.shifts, np.int64)
    return bool(np.all(q.multipliers >= 0) and np.all(t >= 1) and np.all(t <= 62))


def rq16_helper(em) -> str:
    """m4_rq16(acc, M, s): SMMLA(acc, M, 2^(s-1)) >> s, the proven layers' requantisation (the module's
    docstring)."""
    return named_helper(em, "m4_rq16", """\
static inline __attribute__((always_inline)) int32_t @m4_rq16(int32_t acc, int32_t m, int32_t s)
{
    int32_t v;
    __asm__("smmla %0, %1, %2, %3" : "=r"(v) : "r"(acc), "r"(m), "r"(1 << (s - 1)));
    return v >> s;
}
""")


def rq64_helper(em) -> str:
    """m4_rq64(sum, red, t): TFLite's requantisation of an int64 sum (the reduced multiplier given)."""
    return named_helper(em, "m4_rq64", """\
static inline __attribute__((always_inline)) int32_t @m4_rq64(int64_t sum, int32_t red, int32_t t)
{
    return (int32_t)(uint32_t)(uint64_t)((sum * red + ((int64_t)1 << (t - 1))) >> t);
}
""")


class Epilogue:
    """A layer's per-channel constants (one flash array: ``words`` per channel) and the C storing a requantised
    accumulator. mode "fast": [bias (int32), M] (+ s where the channels' differ, else a literal); "chunked": [bias
    low word, bias high word, red, t]; "narrow" (an int32 bias: TFLite's int32 sums and its int32
    MultiplyByQuantizedMultiplier, m4_network's m4_rq_wide): [bias, multiplier, left shift + 1, right shift]."""

    def __init__(self, em, node: Node, bias: np.ndarray, W: np.ndarray, q, group: int):
        out_c = W.shape[0]
        self.em, self.lo, self.hi = em, q.lo, q.hi
        padded = -(-out_c // group) * group
        params = smmla_params(q.multipliers, q.shifts)
        narrow = em.graph.type(node.inputs[2]).dtype.bits == 32  # tflite_16x8 proved its sums
        self.mode = "narrow" if narrow else "fast" if proven_int32(bias, W) and params is not None else "chunked"
        self.int32_sums = self.mode != "chunked"
        if self.mode == "narrow":
            shifts = np.asarray(q.shifts, np.int64)
            cols = [bias, np.asarray(q.multipliers, np.int64), np.maximum(shifts, 0) + 1, np.maximum(-shifts, 0)]
        elif self.mode == "fast":
            M, s = params
            self.s_literal = int(s[0]) if np.all(s == s[0]) else None
            cols = [bias, M] + ([] if self.s_literal is not None else [s])
        else:
            b = bias.astype(np.int64)
            cols = [b & 0xFFFFFFFF, b >> 32, reduced_multipliers(q.multipliers), 15 - q.shifts.astype(np.int64)]
        table = np.zeros((padded, len(cols)), np.int64)
        table[:out_c] = np.stack(cols, axis=1)
        if self.mode == "narrow":
            table[out_c:, 2] = 1
        elif self.mode == "fast":
            table[out_c:, 1] = 0
            if self.s_literal is None:
                table[out_c:, 2] = 1
        else:
            table[out_c:, 3] = 1
        self.words = len(cols)
        words = ((table + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
        self.sym = em.add_const_array(em.sym(f"{node.name}_m4q16"), words, "int32_t",
                                      f"%{node.name}: per channel " + ", ".join(
                                          ["bias", "M", "s"][:self.words] if self.mode == "fast"
                                          else ["bias", "multiplier", "left shift + 1", "right shift"]
                                          if self.mode == "narrow" else ["bias (low)", "bias (high)", "red", "t"]))

    def bias_init(self, q: str) -> str:
        """C of a channel's accumulator start from its words at ``q``."""
        if self.int32_sums:
            return f"{q}[0]"
        return f"(int64_t)(((uint64_t)(uint32_t){q}[1] << 32) | (uint32_t){q}[0])"

    def store(self, acc: str, q: str, dst: str) -> str:
        em = self.em
        minmax_helpers(em)
        if self.mode == "narrow":
            v = f"{rq_helper(em, True)}({acc}, {q}[1], {q}[2], {q}[3])"
        elif self.mode == "fast":
            s = str(self.s_literal) if self.s_literal is not None else f"{q}[2]"
            v = f"{rq16_helper(em)}({acc}, {q}[1], {s})"
        else:
            v = f"{rq64_helper(em)}({acc}, {q}[2], {q}[3])"
        return f"{dst} = (int16_t){saturated(v, self.lo, self.hi, 16)};".replace("@", em.prefix + "_")


# ---------------------------------------------------------------- the matrix product


def interleave_helper(em) -> str:
    """m4_ilv2(c0, c1, dst, kw4): two int16 columns of 4 kw4 inputs as the 2x2 steps read them: per 4 inputs
    c0's (x0, x1), c1's (x0, x1), c0's (x2, x3), c1's (x2, x3)."""
    rd = read16_helper(em)
    return named_helper(em, "m4_ilv2", f"""\
__attribute__((optimize("O2"), noinline)) static void @m4_ilv2(const int16_t *c0, const int16_t *c1, int32_t *dst,
                                                             int32_t kw4)
{{
    for (int32_t j = 0; j < kw4; ++j, c0 += 4, c1 += 4, dst += 4) {{
        dst[0] = {rd}(c0);
        dst[1] = {rd}(c1);
        dst[2] = {rd}(c0 + 2);
        dst[3] = {rd}(c1 + 2);
    }}
}}
""")


def read16_helper(em) -> str:
    """m4_rd16x2(p): two int16 lanes as a word (one LDR on the M4: the arena's int16 tensors are 2-byte
    aligned, LDR takes that, LDRD and LDM do not)."""
    return named_helper(em, "m4_rd16x2", """\
static inline __attribute__((always_inline)) int32_t @m4_rd16x2(const int16_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
""")


def matrix_weights(W: np.ndarray, kind: str) -> tuple[np.ndarray, int]:
    """(int32 words, kw4): W (channels x K, int8) widened to int16, K padded to 4 kw4 with zeros; "2x2": per pair
    of channels, per step of 4 inputs, the first channel's two words then the second's; "1x4": per group of four
    channels likewise the four channels' two words."""
    out_c, k = W.shape
    group = 2 if kind == "2x2" else 4
    kw4 = -(-k // 4)
    rows = np.zeros((-(-out_c // group) * group, 4 * kw4), np.int16)
    rows[:out_c, :k] = W
    arranged = rows.reshape(-1, group, kw4, 4).transpose(0, 2, 1, 3)  # groups, steps, channels, 4 inputs
    return np.ascontiguousarray(arranged).view("<i4").reshape(-1), kw4


def _step_1x4() -> str:
    """One step 4 inputs deep of one column (two LDR) by four channels (two words each, two LDM into w0..w3,
    registers fixed in ascending order)."""
    lines = ["ldr %[u0], [%[x]], #4", "ldr %[u1], [%[x]], #4"]
    for half in (0, 1):
        lines.append("ldm %[wp]!, {%[w0], %[w1], %[w2], %[w3]}")
        for k, (w0, w1) in enumerate((("w0", "w1"), ("w2", "w3"))):
            a = f"a{2 * half + k}"
            lines += [f"smlad %[{a}], %[{w0}], %[u0], %[{a}]", f"smlad %[{a}], %[{w1}], %[u1], %[{a}]"]
    return "\n".join(lines)


def _accumulate(asm: list[str], ep: Epilogue, accs: list[str], kw4: int, indent: str) -> list[str]:
    """The asm block's C around it: fast, the accumulators run through once (they start at the bias); chunked,
    per chunk of at most CHUNK_STEPS steps int32 sums from 0 added into int64 ones (s<acc>) that start at the
    bias. ``asm`` is a function of (iterations, single steps) giving the block's lines."""
    if ep.int32_sums:
        _, iters, rem = split_steps(kw4)
        return asm(iters, rem, kw4)
    lines = []
    done = 0
    while done < kw4:
        steps = min(CHUNK_STEPS, kw4 - done)
        _, iters, rem = split_steps(steps)
        lines += [f"{indent}{{", f"{indent}    " + " ".join(f"{a} = 0;" for a in accs)]
        lines += ["    " + line for line in asm(iters, rem, steps)]
        lines += [f"{indent}    " + " ".join(f"s{a} += {a};" for a in accs), f"{indent}}}"]
        done += steps
    return lines


def matrix_function(em, name: str, kind: str, W: np.ndarray, ep: Epilogue, stride: int) -> str:
    """A layer's matrix product as its own function: ``<sym>(cols, n_cols, out)``, out[p * out_c + o] for columns
    p (``stride`` int16 apart) and channels o (the kinds: the module's docstring)."""
    out_c = W.shape[0]
    words, kw4 = matrix_weights(W, kind)
    w_sym = em.add_const_array(em.sym(f"{name}_m4w16"), words, "int32_t",
                               f"%{name}: {out_c}x{W.shape[1]} int8 weights widened to int16, rows padded to "
                               f"steps of 4, groups of {2 if kind == '2x2' else 4} rows interleaved step by step")
    symbol = em.sym(f"m4_mm16_{name}")
    P, p_sym, fast = ep.words, ep.sym, ep.int32_sums
    lines = [f"/* %{name}: {out_c} channels x columns of {4 * kw4} int16 inputs, {kind} (int16 weights, "
             f"{'int32 sums proven' if fast else 'int32 chunks into int64'}) */",
             f'__attribute__((optimize("O2"))) static void {symbol}(const int16_t *cols, int32_t n_cols, '
             "int16_t *out)", "{"]
    if kind == "1x4":
        group = -(-out_c // 4) * 4
        accs = ["a0", "a1", "a2", "a3"]

        def asm(iters, rem, steps):
            ops = {k: "+r" for k in (*accs, "x", "wp", "n")}
            ops.update({k: "=&r" for k in ("u0", "u1", "w0", "w1", "w2", "w3")})
            return [f"                n = {iters};"] + asm_block([_step_1x4()] * split_steps(steps)[0], iters, rem, ops,
                                                              "                ")
        lines += [
            "    for (int32_t p = 0; p < n_cols; ++p) {",
            f"        const int16_t *c0 = cols + p * {stride};",
            f"        int16_t *o0 = out + p * {out_c};",
            f"        const int32_t *wp = {w_sym}, *q = {p_sym};",
            f"        for (int32_t o = 0; o < {group}; o += 4, q += {4 * P}) {{",
            "            const int16_t *x = c0;",
            "            int32_t n, u0, u1;",
            '            register int32_t w0 __asm__("r8"), w1 __asm__("r9"), w2 __asm__("r10"), '
            'w3 __asm__("r11");']
        if fast:
            lines.append(f"            int32_t a0 = q[0], a1 = q[{P}], a2 = q[{2 * P}], a3 = q[{3 * P}];")
        else:
            lines += ["            int32_t a0, a1, a2, a3;",
                      "            " + " ".join(f"int64_t s{a} = {ep.bias_init(f'(q + {k * P})')};"
                                                for k, a in enumerate(accs))]
        lines += _accumulate(lambda i, r, s: ["    " + line for line in asm(i, r, s)], ep, accs, kw4, "            ")
        lines.append("            (void)n;")
        for k, a in enumerate(accs):
            acc = a if fast else f"s{a}"
            lines += [f"            if (o + {k} < {out_c})",
                      "                " + ep.store(acc, f"(q + {k * P})", f"o0[o + {k}]")]
        lines += ["        }", "    }", "}", ""]
    else:
        pair = em.sym("m4_pair")
        em.scratch(pair, "uint32_t", 4 * kw4)
        accs = ["a00", "a01", "a10", "a11"]

        def asm(iters, rem, steps):
            ops = {k: "+r" for k in (*accs, "x", "wp", "n")}
            ops.update({k: "=&r" for k in ("u", "uo", "v", "vo", "w0", "w1")})
            return [f"            n = {iters};"] + asm_block([step_2x2(True)] * split_steps(steps)[0], iters, rem, ops,
                                                          "            ")
        lines += [
            "    for (int32_t p = 0; p < n_cols; p += 2) {",
            f"        const int16_t *c0 = cols + p * {stride};",
            "        const int32_t two = p + 1 < n_cols;  /* else a last column: computed twice, stored twice */",
            f"        {interleave_helper(em)}(c0, two ? c0 + {stride} : c0, (int32_t *){pair}, {kw4});",
            f"        int16_t *o0 = out + p * {out_c}, *o1 = two ? o0 + {out_c} : o0;",
            f"        const int32_t *wp = {w_sym}, *q = {p_sym};",
            f"        for (int32_t o = 0; o < {out_c}; o += 2, q += {2 * P}) {{",
            f"            const uint32_t *x = {pair};",
            "            int32_t n, w0, w1;",
            '            register int32_t u __asm__("r8"), v __asm__("r9"), uo __asm__("r10"), vo __asm__("r11");']
        if fast:
            lines.append(f"            int32_t a00 = q[0], a01 = q[0], a10 = q[{P}], a11 = q[{P}];")
        else:
            lines += ["            int32_t a00, a01, a10, a11;",
                      f"            int64_t sa00 = {ep.bias_init('q')}, sa01 = sa00;",
                      f"            int64_t sa10 = {ep.bias_init(f'(q + {P})')}, sa11 = sa10;"]
        lines += _accumulate(asm, ep, accs, kw4, "            ")
        lines.append("            (void)n;")
        pre = "" if fast else "s"
        lines += ["            " + ep.store(f"{pre}a00", "q", "o0[o]"),
                  "            " + ep.store(f"{pre}a01", "q", "o1[o]"),
                  f"            if (o + 1 < {out_c}) {{",
                  "                " + ep.store(f"{pre}a10", f"(q + {P})", "o0[o + 1]"),
                  "                " + ep.store(f"{pre}a11", f"(q + {P})", "o1[o + 1]"),
                  "            }", "        }", "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


# ---------------------------------------------------------------- the kernels


def _computed_input(em, node: Node) -> bool:
    return em.graph.op(node.inputs[0]) not in ("const", "sparse_const") and all(
        em.graph.op(i) == "const" for i in node.inputs[1:])


def _layer(em, node: Node, W: np.ndarray, group: int):
    """(bias, quantisation, Epilogue) of a layer, or None where its multipliers or shifts leave TFLite's
    ranges (the shared C then)."""
    out_c = W.shape[0]
    out = node.type.dtype
    lo, hi = activation_range(node.attrs.get("activation", "none"), out.qscales[0], out.zero_point, out.bits)
    q = dataclasses.replace(layer_quantisation(em.graph, node, out_c), lo=int(lo), hi=int(hi))  # int16's clamp
    if not _layer_ok(q):
        return None
    bias = np.asarray(em.graph.node(node.inputs[2]).attrs["value"], np.int64).reshape(-1)
    em.weight_layouts[node.name] = ("int16", "a 16x8 layer: int16 inputs are SMLAD lanes as they are, the weights "
                                             "widened to match whatever the build favours")
    return bias, q, Epilogue(em, node, bias, W, q, group)


def fully_connected(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    if not _computed_input(em, node):
        return None
    out_c, depth = g.type(w_name).shape
    rows = g.type(x_name).size // depth
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, depth)
    kind = "1x4" if rows == 1 else "2x2"
    layer = _layer(em, node, W, 4 if kind == "1x4" else 2)
    if layer is None:
        return None
    function = matrix_function(em, node.name, kind, W, layer[2], depth)
    xs, out = em.var(x_name), em.var(node.name)
    if depth % 4 == 0:  # rows read in place
        return [f"{function}({xs}, {rows}, {out});"]
    # a row whose steps would read past it: copied, zero padded, into a column buffer
    kp = -(-depth // 4) * 4
    col = em.sym("m4_col")
    em.scratch(col, "uint32_t", kp // 2)
    return ["{",
            f"    int16_t *col = (int16_t *){col};",
            f"    for (int32_t r = 0; r < {rows}; ++r) {{",
            f"        for (int32_t i = 0; i < {depth}; ++i) col[i] = {xs}[r * {depth} + i];",
            f"        for (int32_t i = {depth}; i < {kp}; ++i) col[i] = 0;",
            f"        {function}(col, 1, {out} + r * {out_c});",
            "    }",
            "}"]


def conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    x = g.type(x_name)
    out_c, kh, kw, in_c = g.type(w_name).shape
    if not _computed_input(em, node) or x.shape[0] != 1:
        return None
    win = window_of(g, node, (kh, kw))
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(out_c, kh * kw * in_c)
    layer = _layer(em, node, W, 2)
    if layer is None:
        return None
    positions = win.out_height * win.out_width
    xs, out = em.var(x_name), em.var(node.name)
    pointwise = (kh, kw) == (1, 1) and win.stride == (1, 1) and win.pad == (0, 0)
    kp = -(-kh * kw * in_c // 4) * 4
    if pointwise and in_c % 4 == 0:  # each position's inputs are already a column
        function = matrix_function(em, node.name, "2x2", W, layer[2], in_c)
        return [f"{function}({xs}, {positions}, {out});"]
    function = matrix_function(em, node.name, "2x2", W, layer[2], kp)
    # im2col on bytes (m4_network's: two bytes an input, zero point 0), two columns at a time
    col = em.sym("m4_col")
    em.scratch(col, "uint32_t", kp)  # two columns of kp int16: kp words
    fill = im2col_function(em, f"{node.name}_16", win, kh, kw, 2 * in_c, 2 * kp, 0)
    return ["{",
            f"    int16_t *col = (int16_t *){col};",
            f"    for (int32_t i = {kh * kw * in_c}; i < {2 * kp}; ++i) col[i] = 0;  /* rows padded to steps */",
            f"    for (int32_t p = 0; p < {positions}; p += 2) {{",
            f"        const int32_t n = p + 1 < {positions} ? 2 : 1;",
            f"        {fill}((const int8_t *){xs}, (int8_t *)col, p, n);",
            f"        {function}(col, n, {out} + p * {out_c});",
            "    }",
            "}"]


def depthwise_weights(W: np.ndarray) -> np.ndarray:
    """Depthwise weights (channels x taps, int8) widened to int16 as the depthwise function reads them: per
    channel group (fours, then a two, then a one: ``channel_groups``) per tap its channels' lanes, a one padded
    to a word."""
    c, t = W.shape
    parts = []
    for c0, width in channel_groups(c):
        lanes = np.zeros((t, max(width, 2)), np.int16)
        lanes[:, :width] = W[c0:c0 + width].T
        parts.append(lanes.reshape(-1))
    return np.concatenate(parts).view("<i4")


def channel_groups(channels: int) -> list[tuple[int, int]]:
    """(first channel, width) of the depthwise groups: fours, then a two and a one where left."""
    groups = [(c, 4) for c in range(0, channels - channels % 4, 4)]
    c = channels - channels % 4
    if channels % 4 >= 2:
        groups.append((c, 2))
        c += 2
    if channels % 2:
        groups.append((c, 1))
    return groups


def depthwise_conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, _ = node.inputs
    g = em.graph
    x = g.type(x_name)
    _, kh, kw, C = g.type(w_name).shape
    if not _computed_input(em, node) or x.shape[0] != 1 or int(node.attrs["depth_multiplier"]) != 1:
        return None
    W = np.asarray(g.node(w_name).attrs["value"]).reshape(kh * kw, C).T
    layer = _layer(em, node, W, 1)
    if layer is None or layer[2].mode != "fast":
        return None
    ep = layer[2]
    win = window_of(g, node, (kh, kw))
    w_sym = em.add_const_array(em.sym(f"{node.name}_m4w16"), depthwise_weights(W), "int32_t",
                               f"%{node.name}: {kh}x{kw} weights of {C} channels widened to int16, per channel "
                               "group and tap")
    function = depthwise_function(em, node.name, win, C, kh, kw, w_sym, ep)
    return [f"{function}({em.var(x_name)}, {em.var(node.name)});"]


def depthwise_function(em, name: str, win, C: int, kh: int, kw: int, w_sym: str, ep: Epilogue) -> str:
    """A layer's depthwise convolution (multiplier 1) as its own functions (the module's docstring)."""
    rd = read16_helper(em)
    (sy, sx), (dy, dx), (py, px) = win.stride, win.dilation, win.pad
    W, OW, T, P = win.width, win.out_width, kh * kw, ep.words
    symbol, edge = em.sym(f"m4_dw16_{name}"), em.sym(f"m4_dw16_{name}_edge")
    groups = channel_groups(C)

    def group_macs(width: int, acc: str, xp: str, wg: str) -> list[str]:
        """One tap of one group: the input lanes at xp, the weight words at wg."""
        if width == 1:
            return [f"{acc}0 = __smlabb({wg}[0], (int32_t)*({xp}), {acc}0);"]
        lines = []
        for k in range(width // 2):
            lines += [f"{{ const int32_t w = {wg}[{k}], u = {rd}({xp} + {2 * k});",
                      f"  {acc}{2 * k} = __smlabb(w, u, {acc}{2 * k}); "
                      f"{acc}{2 * k + 1} = __smlatt(w, u, {acc}{2 * k + 1}); }}"]
        return lines

    def group_code(c0: int, width: int, woff: int, positions: list[tuple[str, str, str]], taps) -> list[str]:
        """A group's sums and stores: ``positions`` (acc name, input pointer at the window's first tap,
        output pointer) sharing each tap's weights; ``taps``: (C offset expression from the window's first
        tap, tap index expression) pairs, or a loop's lines (the edge)."""
        words = max(width, 2) // 2
        lines = []
        for a, _, _ in positions:
            lines.append(" ".join(f"int32_t {a}{k} = {ep.bias_init(f'({ep.sym} + {(c0 + k) * P})')};"
                                  for k in range(width)))
        if isinstance(taps, list):
            for off, t in taps:
                for a, xp, _ in positions:
                    lines += group_macs(width, a, f"{xp} + {off} + {c0}", f"({w_sym} + {woff} + {words} * ({t}))")
        else:
            loop_head, off, t = taps
            lines += loop_head + ["{"]
            for a, xp, _ in positions:
                lines += ["    " + m for m in group_macs(width, a, f"{xp} + {off} + {c0}",
                                                          f"({w_sym} + {woff} + {words} * ({t}))")]
            lines.append("}")
        for a, _, o in positions:
            for k in range(width):
                lines.append(ep.store(f"{a}{k}", f"({ep.sym} + {(c0 + k) * P})", f"{o}[{c0 + k}]"))
        return lines

    def all_groups(positions, taps) -> list[str]:
        lines, woff = [], 0
        for c0, width in groups:
            lines += ["{", *("    " + line for line in group_code(c0, width, woff, positions, taps)), "}"]
            woff += T * (max(width, 2) // 2)
        return lines

    # the border: one position, the taps inside the input (a loop)
    loop = (["for (int32_t ky = ky0; ky < ky1; ++ky)", "for (int32_t kx = kx0; kx < kx1; ++kx)"],
            f"((iy0 + ky * {dy}) * {W} + ix0 + kx * {dx}) * {C}", f"ky * {kw} + kx")
    lines = [
        f"/* %{name}: 16x8 depthwise {kh}x{kw}, {C} channels: a position whose window crosses the border */",
        f'__attribute__((optimize("O2"), noinline)) static void {edge}(const int16_t *x, int16_t *out, int32_t oy, '
        "int32_t ox)", "{",
        f"    const int32_t iy0 = oy * {sy} - {py}, ix0 = ox * {sx} - {px};",
        f"    const int32_t ky0 = iy0 >= 0 ? 0 : (-iy0 + {dy - 1}) / {dy};",
        f"    const int32_t ky_end = {win.height} - iy0 <= 0 ? 0 : ({win.height} - iy0 + {dy - 1}) / {dy};",
        f"    const int32_t ky1 = ky_end < {kh} ? ky_end : {kh};",
        f"    const int32_t kx0 = ix0 >= 0 ? 0 : (-ix0 + {dx - 1}) / {dx};",
        f"    const int32_t kx_end = {W} - ix0 <= 0 ? 0 : ({W} - ix0 + {dx - 1}) / {dx};",
        f"    const int32_t kx1 = kx_end < {kw} ? kx_end : {kw};",
        f"    int16_t *o = out + (oy * {OW} + ox) * {C};",
        *("    " + line for line in all_groups([("a", "x", "o")], loop)),
        "}", ""]
    em.helpers[edge] = "\n".join(lines)

    taps = [(((ky * dy) * W + kx * dx) * C, str(ky * kw + kx)) for ky in range(kh) for kx in range(kw)]

    def inside(n: int) -> list[str]:
        positions = [("a", "xp", "o"), ("b", f"(xp + {sx * C})", f"(o + {C})")][:n]
        return [f"const int16_t *xp = x + (iy0 * {W} + ox * {sx} - {px}) * {C};",
                f"int16_t *o = out + (oy * {OW} + ox) * {C};",
                *all_groups(positions, taps)]

    (oy_lo, oy_hi), (ox_lo, ox_hi) = (inside_range(win.out_height, win.height, kh, sy, dy, py),
                                      inside_range(OW, W, kw, sx, dx, px))
    lines = [
        f"/* %{name}: 16x8 depthwise {kh}x{kw}, {C} channels (SMLABB / SMLATT, int16 weights) */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const int16_t *x, int16_t *out)', "{",
        f"    for (int32_t oy = 0; oy < {win.out_height}; ++oy) {{",
        f"        const int32_t iy0 = oy * {sy} - {py};",
        f"        if (oy < {oy_lo} || oy >= {oy_hi}) {{",
        f"            for (int32_t ox = 0; ox < {OW}; ++ox)",
        f"                {edge}(x, out, oy, ox);",
        "            continue;",
        "        }",
        f"        for (int32_t ox = 0; ox < {ox_lo}; ++ox)",
        f"            {edge}(x, out, oy, ox);",
        f"        int32_t ox = {ox_lo};",
        f"        for (; ox + 1 < {ox_hi}; ox += 2) {{",
        *("            " + line for line in inside(2)),
        "        }",
        f"        if (ox < {ox_hi}) {{",
        *("            " + line for line in inside(1)),
        "        }",
        f"        for (ox = {ox_hi}; ox < {OW}; ++ox)",
        f"            {edge}(x, out, oy, ox);",
        "        (void)iy0;",
        "    }", "}", ""]
    em.helpers[symbol] = "\n".join(lines)
    return symbol


def _rescaled_range(lo: int, hi: int, left: int, multiplier: int, shift: int) -> tuple[int, int] | None:
    """The range of MultiplyByQuantizedMultiplier(v 2^left) for v in [lo, hi] (monotonic: m >= 0), or None
    where m4_rq's operand v 2^(left + max(shift, 0) + 1) leaves int32 or the shift leaves its range."""
    if multiplier < 0 or shift > 30 or shift < -31:
        return None
    up = left + max(shift, 0) + 1
    if (lo << up) < -INT32_LIMIT or (hi << up) >= INT32_LIMIT:
        return None
    ends = multiply_by_quantized_multiplier(np.array([lo << left, hi << left]), multiplier, shift)
    return int(ends[0]), int(ends[1])


def tensor_add(em, node: Node) -> list[str] | None:
    """TFLite's int16 ADD element by element, each of its three rescalings on SMMLAR (m4_network's m4_rq),
    proven exact from the int16 ranges (else the shared C)."""
    g = em.graph
    if any(g.op(i) in ("const", "sparse_const") for i in node.inputs) or g.type(node.inputs[0]).shape != \
            g.type(node.inputs[1]).shape:
        return None
    q = add_quantisation(g, node)
    (ma, sa), (mb, sb), (mo, so) = q.requants
    za, zb, zo = q.zero_points
    ra = _rescaled_range(-32768 - za, 32767 - za, q.left_shift, ma, sa)
    rb = _rescaled_range(-32768 - zb, 32767 - zb, q.left_shift, mb, sb)
    if ra is None or rb is None or _rescaled_range(ra[0] + rb[0], ra[1] + rb[1], 0, mo, so) is None:
        return None
    return rescaled_add(em, node, q, 16, "m4_add16", "TFLite's int16 ADD")
