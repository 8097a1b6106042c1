"""``<prefix>_quantise`` of int16 builds in AVR assembly: float_input.integer_quantiser's computation on each
float's bits (the same result bit for bit, see its doc), without the C's 16/32-bit promotions. Per feature: the
four bytes (LD X+), 142 - s[k] (LPM Z+ from the offsets table, or an immediate), the biased exponent e,
j - 1 = 142 - s - e - 1; the significand's top 16 bits q (less one for a negative value whose low byte is 0),
shifted right by j - 1 (by 8 in one move, then a bit at a time) and rounded up at its last bit, negated for a
negative value. Zeros, subnormals and values below a half step take an early 0; beyond the range, the saturation
bounds or (NaN) the missing code. About 40 cycles a feature where the C loop takes about 60."""

from __future__ import annotations


def quantise_lines(name: str, offset: int | None) -> list[str]:
    """The asm lines of ``void name(const float *x, int16_t *x_int, const uint8_t *offsets, uint16_t n)``:
    ``offsets`` (flash) the 142 - s[k] of each feature, or ``offset`` their one value (``offsets`` unused)."""
    # registers: X the floats, Y the outputs, Z the offsets; r18-r21 a float's bytes, r22 j - 1, r23 e,
    # r24:r25 the count; the result in r19:r20 (r18 the multiply's low byte)
    read = [f"ldi r22, {offset}"] if offset is not None else ["lpm r22, Z+"]
    return [
        f".section .text.{name},\"ax\",@progbits", f".type {name}, @function", f"{name}:",
        "push r28", "push r29", "movw r26, r24", "movw r28, r22", "movw r30, r20", "movw r24, r18",
        "sbiw r24, 0", "brne 1f", "rjmp 9f",
        "1:",
        "ld r18, X+", "ld r19, X+", "ld r20, X+", "ld r21, X+", *read,
        "mov r23, r20", "lsl r23", "mov r23, r21", "rol r23",  # e = b3 << 1 | b2 >> 7; zero flag: e == 0
        "breq 5f",
        "sub r22, r23", "subi r22, 1",  # j - 1, wrapping: in [0, 15] exactly when 1 <= j <= 16
        "cpi r22, 16", "brsh 6f",
        "ori r20, 0x80",  # q = r20:r19, the significand's top 16 bits
        "tst r21", "brpl 2f", "cpse r18, __zero_reg__", "rjmp 2f",
        "subi r19, 1", "sbci r20, 0",  # negative: its magnitude's halves round down
        "2:",
        "sbrc r22, 3", "rjmp 3f",
        "andi r22, 7", "breq 4f",
        "10:", "lsr r20", "ror r19", "dec r22", "brne 10b",  # q >> (j - 1)
        "11:", "subi r19, 0xFF", "sbci r20, 0xFF", "lsr r20", "ror r19",  # (q + 1) >> 1: rounded up
        "tst r21", "brpl 7f", "neg r20", "neg r19", "sbc r20, __zero_reg__",
        "7:",
        "st Y+, r19", "st Y+, r20", "sbiw r24, 1", "brne 1b", "rjmp 9f",
        "5:",  # zero or subnormal
        "st Y+, __zero_reg__", "st Y+, __zero_reg__", "sbiw r24, 1", "brne 1b", "rjmp 9f",
        "6:",
        "add r22, r23", "subi r22, 0xFF", "subi r22, 16",  # 142 - s - 16
        "cp r23, r22", "brlo 5b",  # j > 16: |x| 2^s < 1/2
        "cpi r23, 0xFF", "brne 8f", "andi r20, 0x7F", "or r20, r19", "or r20, r18", "breq 8f",
        "ldi r19, 0", "ldi r20, 0x80", "rjmp 7b",  # NaN: the missing code
        "8:",
        "ldi r19, 0xFF", "ldi r20, 0x7F", "tst r21", "brpl 7b", "ldi r19, 0x01", "ldi r20, 0x80", "rjmp 7b",
        "3:", "mov r19, r20", "clr r20", "andi r22, 7", "brne 10b", "rjmp 11b",  # q >> 8
        # no shift: (q + 1) >> 1 of q = 0xFFFF would be 32768; 0xFFFE's is the saturated 32767
        "4:", "cpi r19, 0xFF", "brne 11b", "cpi r20, 0xFF", "brne 11b", "ldi r19, 0xFE", "rjmp 11b",
        "9:",
        "pop r29", "pop r28", "ret",
        f".size {name}, .-{name}"]


def quantise_source(api, table: str | None, offset: int | None) -> list[str]:
    """<prefix>_quantise calling the asm (``table``: the offsets' symbol, or None with ``offset``), whose symbol
    is local to the object (the model's exported symbols are its API's)."""
    P = api.sym
    core = P("quantise_asm")
    body = "\n".join('    "' + line.replace('"', '\\"') + '\\n"' for line in quantise_lines(core, offset))
    return [f"void {core}(const float *x, int16_t *x_int, const uint8_t *offsets, uint16_t n);",
            "/* the quantiser's loop in AVR assembly (tinycc_ml/avr/float_quantise.py) */",
            f"__asm__(\n{body}\n    \".text\\n\");",
            f"void {P('quantise')}(const float *x, int16_t *x_int)", "{",
            f"    {core}(x, x_int, {table if table else '0'}, {api.input_dim});", "}", ""]
