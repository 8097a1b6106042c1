"""Class labels in the generated C: a label table in the header and ``<prefix>_predict_label``.

``<prefix>_predict`` returns a class index 0..L-1; the label table maps it to the user's label.
Integer labels: ``<NAME>_LABELS`` (an initialiser list) and ``int32_t`` (``int64_t`` when a label
needs it) ``<prefix>_predict_label(x)``. String labels: ``<NAME>_LABEL_NAMES`` and
``const char *<prefix>_predict_label(x)``. The function maps through a ``switch`` rather than a
table so that no RAM is spent on AVR, where a plain const array would be copied into RAM.

The lines are added to the files a backend wrote, so every target gets them from this one place.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.backends.base import BuildOutput

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


def label_lines(prefix: str, classes: np.ndarray, input_ctype: str) -> tuple[list[str], list[str]]:
    """(header lines, source lines) declaring and defining the label table and function."""
    up = prefix.upper()
    values = classes.tolist()
    if classes.dtype.kind == "U":
        ret, literals, table = "const char *", [c_string(v) for v in values], f"{up}_LABEL_NAMES"
    else:
        fits = all(INT32_RANGE[0] <= v <= INT32_RANGE[1] for v in values)
        ctype = "int32_t" if fits else "int64_t"
        ret, literals, table = f"{ctype} ", [_int_literal(v, ctype) for v in values], f"{up}_LABELS"
    signature = f"{ret}{prefix}_predict_label(const {input_ctype} *x)"
    header = [
        f"/* Class labels by class index: {prefix}_predict_label(x) is {table}[{prefix}_predict(x)]. */",
        f"#define {up}_N_CLASSES {len(values)}",
        f"#define {table} {{ {', '.join(literals)} }}",
        "",
        f"/* The class label of x: the label of the class index {prefix}_predict(x) returns. */",
        f"{signature};",
        "",
    ]
    cases = [f"    case {i}: return {lit};" for i, lit in enumerate(literals[:-1])]
    source = [
        "",
        signature,
        "{",
        f"    switch ({prefix}_predict(x)) {{",
        *cases,
        f"    default: return {literals[-1]};",
        "    }",
        "}",
        "",
    ]
    return header, source


def add_labels(output: BuildOutput, classes: np.ndarray) -> None:
    """Add the label table and ``<prefix>_predict_label`` to a backend's ``<prefix>.h`` and
    ``<prefix>.c`` (a backend that writes neither is left as it is)."""
    prefix = output.prefix
    header_name, source_name = f"{prefix}.h", f"{prefix}.c"
    if header_name not in output.files or source_name not in output.files:
        return  # a plug-in backend writing other files: nothing to add to
    header, source = output.files[header_name], output.files[source_name]
    at = header.rfind(_HEADER_TAIL)
    if at < 0:  # a header without the C++ guard: add before the include guard's end
        at = header.rfind("#endif")
    head_lines, source_lines = label_lines(prefix, classes, output.input_ctype)
    output.files[header_name] = header[:at] + "\n".join(head_lines) + "\n" + header[at:]
    output.files[source_name] = source.rstrip("\n") + "\n" + "\n".join(source_lines)
