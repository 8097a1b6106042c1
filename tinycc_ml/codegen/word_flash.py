"""Constants in flash that may only be read as aligned 32-bit words (``CTarget.word_flash``).

Some chips map their flash into the address space for instruction fetch and word loads only: the ESP8266's
irom0 window (0x40200000) faults on an 8- or 16-bit load. On such a target every constant array is declared
with the target's section attribute and ``aligned(4)``, padded to whole words, and every element is read
through one helper per C type that loads the aligned word holding it, shifts the element down and narrows it
(a cast: sign-extended for int8, int16), reinterprets it (float) or joins two words (64-bit labels). The helpers
are ``static inline`` and carry the model's prefix; the word load is ``volatile`` so the compiler cannot narrow
it back into a byte or half-word load of the same address.
"""

from __future__ import annotations

from dataclasses import dataclass

# element C type -> bytes; the types a constant array of the generated C may have
ELEMENT_BYTES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
                 "float": 4, "int64_t": 8, "uint64_t": 8}
# the helper's name suffix per element type
HELPER_SUFFIX = {"int8_t": "i8", "uint8_t": "u8", "int16_t": "i16", "uint16_t": "u16", "int32_t": "i32",
                 "uint32_t": "u32", "float": "f32", "int64_t": "i64", "uint64_t": "u64"}


@dataclass(frozen=True)
class WordFlash:
    """Constants live in flash read only as aligned 32-bit words.

    section: the section the constants go to (``".irom.text"`` on the ESP8266, where the linker script maps
    it into the flash window), or None to leave them where the compiler puts constants (a host test target).
    prefix: the model's prefix, which the helpers' names carry (the emitter fills it in; see ``for_prefix``).
    """

    section: str | None = None
    prefix: str = ""

    def for_prefix(self, prefix: str) -> WordFlash:
        return WordFlash(self.section, prefix)

    @property
    def attribute(self) -> str:
        """What follows a constant array's declarator: the section and the word alignment."""
        section = f'section("{self.section}"), ' if self.section else ""
        return f" __attribute__(({section}aligned(4)))"

    def helper(self, ctype: str) -> str:
        return f"{self.prefix}_flash_{HELPER_SUFFIX[ctype]}"

    def read(self, array: str, index: str, ctype: str) -> str:
        """The C expression reading element ``index`` of the constant array ``array`` of ``ctype``."""
        if ctype not in HELPER_SUFFIX:
            raise ValueError(f"no word read of a constant array of {ctype}")
        return f"{self.helper(ctype)}(&{array}[{index}])"

    @staticmethod
    def padded_length(n: int, ctype: str) -> int:
        """Elements of an array of ``n`` ``ctype`` padded to whole words (at least one word)."""
        per_word = max(1, 4 // ELEMENT_BYTES[ctype])
        return max(per_word, -(-n // per_word) * per_word)

    def helpers_source(self) -> str:
        """The word-read helpers' C (static inline: those a model does not use cost nothing)."""
        p = f"{self.prefix}_flash"
        return f"""\
/* Constants are in flash that may only be read as aligned 32-bit words: every read loads the word holding the
 * element (volatile, so it is never narrowed back to a byte or half-word load), shifts the element down and
 * narrows it (to a signed type: two's complement wrap-around, as gcc and clang define it, which sign-extends). */
static inline uint32_t {p}_word(const void *address)
{{
    const uintptr_t a = (uintptr_t)address;
    return *(const volatile uint32_t *)(a & ~(uintptr_t)3) >> (8u * (unsigned)(a & 3u));
}}
static inline uint8_t {p}_u8(const uint8_t *p) {{ return (uint8_t){p}_word(p); }}
static inline int8_t {p}_i8(const int8_t *p) {{ return (int8_t){p}_word(p); }}
static inline uint16_t {p}_u16(const uint16_t *p) {{ return (uint16_t){p}_word(p); }}
static inline int16_t {p}_i16(const int16_t *p) {{ return (int16_t){p}_word(p); }}
static inline uint32_t {p}_u32(const uint32_t *p) {{ return {p}_word(p); }}
static inline int32_t {p}_i32(const int32_t *p) {{ return (int32_t){p}_word(p); }}
static inline float {p}_f32(const float *p)
{{
    union {{ uint32_t word; float value; }} v;
    v.word = {p}_word(p);
    return v.value;
}}
static inline uint64_t {p}_u64(const uint64_t *p)
{{
    return (uint64_t){p}_word(p) | (uint64_t){p}_word((const uint32_t *)(const void *)p + 1) << 32;
}}
static inline int64_t {p}_i64(const int64_t *p) {{ return (int64_t){p}_u64((const uint64_t *)(const void *)p); }}
"""
