"""Class labels in the generated C: a label table in the header and ``<prefix>_predict_label``.

``<prefix>_predict`` returns a class index 0..L-1; the label table maps it to the user's label.
Integer labels: ``<NAME>_LABELS`` (an initialiser list) and ``int32_t`` (``int64_t`` when a label
needs it) ``<prefix>_predict_label(x)``. String labels: ``<NAME>_LABEL_NAMES`` and
``const char *<prefix>_predict_label(x)``; ``<prefix>_label(i)`` maps a class index. The table is in
flash on AVR (``PROGMEM``, where a plain const array, or a ``switch`` GCC turns into one, would be copied
into RAM), read with ``memcpy_P`` / ``pgm_read_word``: the strings of string labels are in flash too, so
on AVR ``<prefix>_label`` returns a flash address.

The lines are added to the files a backend wrote, so every target gets them from this one place.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen.backend import BuildOutput

_HEADER_TAIL = "#ifdef __cplusplus\n}\n#endif"
INT32_RANGE = (-(2**31), 2**31 - 1)


def c_string(text: str) -> str:
    """A C string literal for ``text`` (UTF-8; bytes outside printable ASCII as octal escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 32 <= byte < 127 and char != "?":  # '?' escaped: no trigraphs
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _int_literal(value: int, ctype: str) -> str:
    if ctype == "int32_t":
        return "(-2147483647 - 1)" if value == INT32_RANGE[0] else str(value)
    return "(-INT64_C(9223372036854775807) - 1)" if value == -(2**63) else f"INT64_C({value})"


def label_lines(prefix: str, classes: np.ndarray, input_ctype: str,
                word_flash=None, no_answer: bool = False) -> tuple[list[str], list[str]]:
    """(header lines, source lines) declaring and defining the label table and functions. The table is
    in flash on AVR (``PROGMEM``, read with ``memcpy_P`` / ``pgm_read_word``; string labels too), a plain
    ``static const`` array elsewhere (flash on ARM, .rodata on the host). With ``word_flash`` (the target's
    ``WordFlash``: flash read only in aligned words) a numeric table goes to its section and is read through
    its helpers; string labels stay where the compiler puts strings, as the caller reads them byte by byte.
    ``no_answer``: ``<prefix>_predict`` may return -1 (a float build's row beyond its input bound); then
    ``<prefix>_predict_label`` returns ``<NAME>_NO_LABEL``, a value no class has (NULL for string labels)."""
    up = prefix.upper()
    values = classes.tolist()
    n = len(values)
    strings = classes.dtype.kind == "U"
    if strings:
        ret, literals, table = "const char *", [c_string(v) for v in values], f"{up}_LABEL_NAMES"
    else:
        fits = all(INT32_RANGE[0] <= v <= INT32_RANGE[1] for v in values)
        ctype = "int32_t" if fits else "int64_t"
        ret, literals, table = f"{ctype} ", [_int_literal(v, ctype) for v in values], f"{up}_LABELS"
    flash_note = ([" * On AVR the string is in flash: print it with Serial.print((const __FlashStringHelper *)s) or",
                   " * printf_P(PSTR(\"%S\"), s), copy it with strcpy_P."] if strings else [])
    header = [
        f"/* Class labels by class index: {prefix}_predict_label(x) is {table}[{prefix}_predict(x)]. */",
        f"#define {up}_N_CLASSES {n}",
        f"#define {table} {{ {', '.join(literals)} }}",
        "",
        f"/* The label of class index i (0..{up}_N_CLASSES-1; others give the last): a constant table, in flash",
        " * on AVR too.",
        *flash_note, " */",
        f"{ret}{prefix}_label(int i);",
        "",
        f"/* The class label of x: {prefix}_label({prefix}_predict(x)). */",
        f"{ret}{prefix}_predict_label(const {input_ctype} *x);",
        "",
    ]
    flash, tab = f"{up}_LABEL_FLASH", f"{prefix}_label_table"
    source = ["", "#ifdef __AVR__", "#include <avr/pgmspace.h>", f"#define {flash} PROGMEM", "#else",
              f"#define {flash}", "#endif"]
    if strings:
        source += [f"static const char {prefix}_label_{i}[] {flash} = {lit};" for i, lit in enumerate(literals)]
        source += [f"static const char *const {tab}[{n}] {flash} = {{",
                   *(f"    {prefix}_label_{i}," for i in range(n)), "};", "",
                   f"const char *{prefix}_label(int i)", "{", f"    if (i < 0 || i >= {n}) i = {n - 1};",
                   "#ifdef __AVR__", f"    return (const char *)pgm_read_word(&{tab}[i]);", "#else",
                   f"    return {tab}[i];", "#endif", "}", ""]
    elif word_flash is not None:
        padded = word_flash.padded_length(n, ctype)
        literals += ["0"] * (padded - n)
        source += [f"static const {ctype} {tab}[{padded}]{word_flash.attribute} = {{",
                   *(f"    {', '.join(literals[i:i + 8])}," for i in range(0, padded, 8)), "};", "",
                   f"{ctype} {prefix}_label(int i)", "{", f"    if (i < 0 || i >= {n}) i = {n - 1};",
                   f"    return {word_flash.read(tab, 'i', ctype)};", "}", ""]
    else:
        source += [f"static const {ctype} {tab}[{n}] {flash} = {{",
                   *(f"    {', '.join(literals[i:i + 8])}," for i in range(0, n, 8)), "};", "",
                   f"{ctype} {prefix}_label(int i)", "{", f"    {ctype} v;", f"    if (i < 0 || i >= {n}) i = {n - 1};",
                   "#ifdef __AVR__", f"    memcpy_P(&v, &{tab}[i], sizeof v);", "#else", f"    v = {tab}[i];",
                   "#endif", "    return v;", "}", ""]
    if not no_answer:
        source += [f"{ret}{prefix}_predict_label(const {input_ctype} *x)", "{",
                   f"    return {prefix}_label({prefix}_predict(x));", "}", ""]
        return header, source
    if strings:
        none = "((const char *)0)"
    else:
        lowest = INT32_RANGE[0] if ctype == "int32_t" else -(2**63)
        none = _int_literal(next(v for v in range(lowest, lowest + n + 1) if v not in set(values)), ctype)
    at = header.index(f"{ret}{prefix}_predict_label(const {input_ctype} *x);")
    header[at - 1:at] = [f"/* The class label of x: {prefix}_label({prefix}_predict(x)); {up}_NO_LABEL (no class",
                         f" * has it) for a row {prefix}_predict answers -1 for. */", f"#define {up}_NO_LABEL {none}"]
    source += [f"{ret}{prefix}_predict_label(const {input_ctype} *x)", "{", f"    const int i = {prefix}_predict(x);",
               f"    return i < 0 ? {up}_NO_LABEL : {prefix}_label(i);", "}", ""]
    return header, source


def add_labels(output: BuildOutput, classes: np.ndarray) -> None:
    """Add the label table and ``<prefix>_predict_label`` to a backend's ``<prefix>.h`` and
    ``<prefix>.c`` (a backend that writes neither is left as it is)."""
    if not built_c(output):
        return  # a plug-in backend writing other files: nothing to add to
    add_to_c(output, *label_lines(output.prefix, classes, output.input_ctype, output.word_flash,
                                  no_answer=output.input_bound is not None))


def built_c(output: BuildOutput) -> bool:
    """Whether the backend wrote ``<prefix>.h`` and ``<prefix>.c`` (a plug-in backend may write other files)."""
    return f"{output.prefix}.h" in output.files and f"{output.prefix}.c" in output.files


def add_to_c(output: BuildOutput, head_lines: list[str], source_lines: list[str], gap: str = "\n") -> None:
    """Declarations added to ``<prefix>.h`` (inside its C++ guard) and definitions to the end of ``<prefix>.c``."""
    header_name, source_name = f"{output.prefix}.h", f"{output.prefix}.c"
    header, source = output.files[header_name], output.files[source_name]
    at = header.rfind(_HEADER_TAIL)
    if at < 0:  # a header without the C++ guard: add before the include guard's end
        at = header.rfind("#endif")
    output.files[header_name] = header[:at] + "\n".join(head_lines) + "\n" + header[at:]
    output.files[source_name] = source.rstrip("\n") + gap + "\n".join(source_lines)
