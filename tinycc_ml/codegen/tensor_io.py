"""A network of several inputs or outputs in C: ``<prefix>_invoke``, one pointer per input and output tensor in the
file's order, named after them, beside ``<prefix>_scores`` (one input vector, one score vector). It copies each
input into the input vector, runs the network and copies each output out of the score vector; the header gives each
tensor's size (``<PREFIX>_<TENSOR>_SIZE``) and its place in the vectors."""

from __future__ import annotations

import re

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.codegen.labels import add_to_c, built_c

# names a parameter cannot take: C's keywords and the function's own locals
RESERVED = {"i", "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
            "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
            "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile",
            "while"}


def _identifier(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name).strip("_").lower() or "tensor"
    if base[0].isdigit():
        base = f"t_{base}"
    unique, k = base, 1
    while unique in taken:
        k += 1
        unique = f"{base}_{k}"
    taken.add(unique)
    return unique


def tensor_io_lines(prefix: str, inputs, outputs, input_ctype: str, score_ctype: str,
                    input_ctypes: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(header lines, source lines) of ``<prefix>_invoke``: ``inputs`` and ``outputs`` are (name, offset, size);
    ``input_ctypes`` each input's own C type where they differ (integers of several widths in a wider vector)."""
    taken: set[str] = set(RESERVED)
    ins = [(_identifier(name, taken), offset, size) for name, offset, size in inputs]
    own = input_ctypes or [input_ctype] * len(ins)
    outs = [(_identifier(name, taken), offset, size) for name, offset, size in outputs]
    up = prefix.upper()
    total_in, total_out = sum(s for *_, s in ins), sum(s for *_, s in outs)
    params = ([f"const {ctype} *{name}" for (name, _, _), ctype in zip(ins, own)]
              + [f"{score_ctype} *{name}" for name, _, _ in outs])
    signature = f"void {prefix}_invoke({', '.join(params)})"
    header = [f"/* The network's tensors one by one, in the file's order: {len(ins)} inputs and {len(outs)} outputs.",
              f" * {prefix}_invoke copies each input into the input vector ({prefix}_scores' x), runs the network and",
              " * copies each output out of the score vector. Sizes in elements: */"]
    header += [f"#define {up}_{name.upper()}_SIZE {size}  /* x[{offset}..{offset + size}) */"
               for name, offset, size in ins]
    header += [f"#define {up}_{name.upper()}_SIZE {size}  /* scores[{offset}..{offset + size}) */"
               for name, offset, size in outs]
    header += [f"{signature};", ""]
    source = [f"static {input_ctype} {prefix}_io_x[{total_in}];",
              f"static {score_ctype} {prefix}_io_scores[{total_out}];", "", signature, "{", "    long i;"]
    source += [f"    for (i = 0; i < {size}; ++i) {prefix}_io_x[{offset} + i] = {name}[i];"
               for name, offset, size in ins]
    source += [f"    {prefix}_scores({prefix}_io_x, {prefix}_io_scores);"]
    source += [f"    for (i = 0; i < {size}; ++i) {name}[i] = {prefix}_io_scores[{offset} + i];"
               for name, offset, size in outs]
    return header, source + ["}", ""]


def add_tensor_io(output: BuildOutput, inputs, outputs, input_ctypes: list[str] | None = None) -> None:
    """Add ``<prefix>_invoke`` to a backend's ``<prefix>.h`` and ``<prefix>.c`` (a backend writing neither, or a
    build whose scores entry point is not there, is left as it is)."""
    if not built_c(output) or f"void {output.prefix}_scores(" not in output.files[f"{output.prefix}.h"]:
        return
    add_to_c(output, *tensor_io_lines(output.prefix, inputs, outputs, output.input_ctype, output.score_ctype,
                                      input_ctypes),
             gap="\n\n")
