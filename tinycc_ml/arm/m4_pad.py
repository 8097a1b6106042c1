"""Cortex-M4 / M33 kernel for TFLite's int8 PAD / PADV2 (tinycc_ml/ir/ops/shape.py's pad), byte for byte the shared
C's (codegen/c_network.py) and so tflite-micro's.

One function per layer (``m4_pad_<layer>``), the output written once, in order: below the last padded axis the
input's rows are contiguous in both tensors, so the layer is a sequence of fills and copies of literal lengths
in loops over the padded axes (the shared C fills the whole output, then copies each row of the last axis in).
A copy or fill moves 16 bytes per LDM / STM pair where both pointers are word aligned (checked at run time:
the arena's offsets are not promised to be), else unaligned words (LDR / STR), then bytes.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.target import Node, pad_fill


def copy_helpers(em) -> tuple[str, str]:
    """(m4_copy, m4_fill): n bytes copied or set, 16 at a time by LDM / STM where aligned."""
    copy, fill = em.sym("m4_copy"), em.sym("m4_fill")
    if copy not in em.helpers:
        em.helpers[copy] = "\n".join([
            f"static inline __attribute__((always_inline)) void {copy}(int8_t *o, const int8_t *s, int32_t n)", "{",
            "    if (((uint32_t)o | (uint32_t)s) % 4 == 0)",
            "        for (; n >= 16; n -= 16)",
            '            __asm__ volatile("ldmia %1!, {r4-r7}\\n\\tstmia %0!, {r4-r7}" : "+r"(o), "+r"(s) : : '
            '"r4", "r5", "r6", "r7", "memory");',
            "    for (; n >= 4; n -= 4, o += 4, s += 4) {",
            "        int32_t v;",
            "        __builtin_memcpy(&v, s, 4);",
            "        __builtin_memcpy(o, &v, 4);",
            "    }",
            "    for (; n > 0; --n) *o++ = *s++;", "}", ""])
        em.helpers[fill] = "\n".join([
            f"static inline __attribute__((always_inline)) void {fill}(int8_t *o, int32_t word, int32_t n)", "{",
            "    if ((uint32_t)o % 4 == 0) {",
            '        register int32_t a __asm__("r4") = word, b __asm__("r5") = word, c __asm__("r6") = word, '
            'd __asm__("r7") = word;',
            "        for (; n >= 16; n -= 16)",
            '            __asm__ volatile("stmia %0!, {%1, %2, %3, %4}" : "+r"(o) : "r"(a), "r"(b), "r"(c), "r"(d) : '
            '"memory");',
            "    }",
            "    for (; n >= 4; n -= 4, o += 4) __builtin_memcpy(o, &word, 4);",
            "    for (; n > 0; --n) *o++ = (int8_t)word;", "}", ""])
    return copy, fill


def pad_claims(em, node: Node) -> bool:
    (x,) = node.inputs
    t = em.graph.type(x)
    return (t.dtype.is_quantised and t.dtype.bits == 8 and em.graph.op(x) not in ("const", "sparse_const")
            and x not in em.inline_values)


def pad(em, node: Node) -> list[str] | None:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    shape, out = list(x.shape), list(node.type.shape)
    pads = [int(p) for p in node.attrs["pads"]]
    before, after = pads[0::2], pads[1::2]
    value = int(pad_fill(x.dtype, node.attrs))
    word = ((value & 0xFF) * 0x01010101 + (1 << 31)) % (1 << 32) - (1 << 31)
    copy, fill = copy_helpers(em)
    padded = [a for a in range(len(shape)) if before[a] or after[a]]
    last = padded[-1] if padded else -1
    inner = int(np.prod(shape[last + 1:], dtype=np.int64))  # contiguous in both tensors below the last padded axis

    def fills(n: int) -> list[str]:
        return [f"{fill}(o, {word}, {n}); o += {n};"] if n else []

    def block(axis: int, indent: str) -> list[str]:
        """The output's sub-block of ``axis`` (its input coordinate the loops' above), written in order."""
        if axis > last:
            return [f"{indent}{copy}(o, s, {inner}); o += {inner}; s += {inner};"]
        below = int(np.prod(out[axis + 1:], dtype=np.int64))
        if axis == last:  # pre fill, the input's rows, post fill: each contiguous
            n = shape[axis] * inner
            return [f"{indent}{line}" for line in (*fills(before[axis] * below),
                                                  f"{copy}(o, s, {n}); o += {n}; s += {n};",
                                                  *fills(after[axis] * below))]
        return [*(f"{indent}{line}" for line in fills(before[axis] * below)),
                f"{indent}for (int32_t i{axis} = 0; i{axis} < {shape[axis]}; ++i{axis}) {{",
                *block(axis + 1, indent + "    "), f"{indent}}}",
                *(f"{indent}{line}" for line in fills(after[axis] * below))]

    symbol = em.sym(f"m4_pad_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 PAD {'x'.join(map(str, shape))} -> {'x'.join(map(str, out))}, fill {value} */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *s, int8_t *o)', "{",
        *block(0, "    "), "}", ""])
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
