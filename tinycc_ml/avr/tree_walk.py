"""The trees' node stream (codegen/trees.py's NodeStream) walked in AVR assembly: LPM Z+ through the stream,
the feature's byte offset added to x in X, a missing value's wrap (x - 1) where the node sends it right, the
signed compare with the threshold, then either the left child (the next word) or the right child's offset
from the stream's start. About 31 cycles a level going left, 37 going right (the shared C's loop: about 45)."""

from __future__ import annotations

from tinycc_ml.target import CEmitter

WALK = [
    "1:",
    "lpm %A[w], Z+", "lpm %B[w], Z+",  # the node's first word: the feature's byte offset and flags, or a leaf
    "sbrc %B[w], 7", "rjmp 3f",  # bit 15: a leaf
    "movw r26, %[x]", "add r26, %A[w]", "mov %[t0], %B[w]", "andi %[t0], 0x3f", "adc r27, %[t0]",
    "ld %[v0], X+", "ld %[v1], X",
    "sbrs %B[w], 6", "rjmp 2f",  # bit 14: a missing value goes right, so the node compares x - 1 (wrapping)
    "subi %[v0], 1", "sbc %[v1], __zero_reg__",
    "2:",
    "lpm %[t0], Z+", "lpm %[t1], Z+",  # the threshold
    "cp %[t0], %[v0]", "cpc %[t1], %[v1]", "brlt 4f",  # threshold < x: the right child
    "adiw r30, 2", "rjmp 1b",  # the left child follows the node
    "4:",
    "lpm %[t0], Z+", "lpm %[t1], Z", "movw r30, %[base]", "add r30, %[t0]", "adc r31, %[t1]", "rjmp 1b",
    "3:",
]


def stream_walk_avr(em: CEmitter) -> str:
    """Name of ``uint16_t f(const int16_t *p, const int16_t *x, const int16_t *base)``: from the node at p (in
    flash) of the stream starting at base, the leaf's word (int16 inputs)."""
    name = em.sym("stream_walk")
    if name not in em.helpers:
        asm = "\\n\\t".join(WALK)
        em.helpers[name] = (
            f"static uint16_t {name}(const int16_t *p, const int16_t *x, const int16_t *base)\n{{\n"
            "    uint16_t w;\n    uint8_t t0, t1, v0, v1;\n"
            f"    __asm__ volatile(\"{asm}\"\n"
            "        : [w] \"=&r\"(w), [t0] \"=&d\"(t0), [t1] \"=&r\"(t1), [v0] \"=&d\"(v0), [v1] \"=&r\"(v1), "
            "\"+&z\"(p)\n"
            "        : [x] \"r\"(x), [base] \"r\"(base)\n"
            "        : \"r26\", \"r27\", \"memory\");\n"
            "    return w;\n}\n")
    return name
