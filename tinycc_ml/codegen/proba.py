"""``<prefix>_proba(x, out)`` in the generated C: the model's class probabilities from its scores,
by the rule the model defines (models/proba.py), in float arithmetic (``expf``; the function is
only linked when called, so integer-only firmware that never calls it stays integer-only).

The lines are added to the files a backend wrote, as the label table is (codegen/labels.py), so
every target gets them from this one place.
"""

from __future__ import annotations

from tinycc_ml.codegen.backend import BuildOutput

_HEADER_TAIL = "#ifdef __cplusplus\n}\n#endif"


def proba_lines(prefix: str, rule: str, n_scores: int, n_proba: int, input_ctype: str, score_ctype: str,
                score_scale: int | None) -> tuple[list[str], list[str]]:
    """(header lines, source lines) of ``<prefix>_proba``."""
    up = prefix.upper()
    unit = "" if score_scale is None else f" * {2.0 ** -score_scale!r}f"  # a power of two: exact
    signature = f"void {prefix}_proba(const {input_ctype} *x, float *out)"
    what = {"softmax": "the softmax of the scores", "logistic": "[1 - p, p], p the logistic of the score",
            "logistic_each": "each label's logistic of its score",
            "logistic_ovr": "each class's logistic of its score over their sum (one-vs-rest)",
            "normalise": "the scores' positive parts over their sum (uniform if none is > 0)"}[rule]
    header = [f"/* Class probabilities of x: {what} ({up}_N_PROBA floats). Float arithmetic (expf). */",
              f"#define {up}_N_PROBA {n_proba}", f"{signature};", ""]
    body = [f"    {score_ctype} scores[{n_scores}];", "    int i;", f"    {prefix}_scores(x, scores);"]
    if rule == "softmax":
        body += ["    float top = (float)scores[0]" + unit + ", total = 0.0f;",
                 f"    for (i = 1; i < {n_scores}; i++)",
                 f"        if ((float)scores[i]{unit} > top) top = (float)scores[i]{unit};",
                 f"    for (i = 0; i < {n_scores}; i++) {{",
                 f"        out[i] = expf((float)scores[i]{unit} - top);",
                 "        total += out[i];", "    }",
                 f"    for (i = 0; i < {n_scores}; i++) out[i] /= total;"]
    elif rule == "normalise":
        body += ["    float total = 0.0f;",
                 f"    for (i = 0; i < {n_scores}; i++) {{",
                 f"        const float v = (float)scores[i]{unit};",
                 "        out[i] = v > 0.0f ? v : 0.0f;", "        total += out[i];", "    }",
                 f"    for (i = 0; i < {n_scores}; i++) out[i] = total > 0.0f ? out[i] / total : {1.0 / n_scores!r}f;"]
    elif rule == "logistic_ovr":
        body += ["    float total = 0.0f;",
                 f"    for (i = 0; i < {n_scores}; i++) {{",
                 f"        out[i] = 1.0f / (1.0f + expf(-(float)scores[i]{unit}));",
                 "        total += out[i];", "    }",
                 f"    for (i = 0; i < {n_scores}; i++) out[i] = total > 0.0f ? out[i] / total : {1.0 / n_scores!r}f;"]
    elif rule == "logistic":
        body += ["    (void)i;", f"    out[1] = 1.0f / (1.0f + expf(-(float)scores[0]{unit}));",
                 "    out[0] = 1.0f - out[1];"]
    else:
        body += [f"    for (i = 0; i < {n_scores}; i++) out[i] = 1.0f / (1.0f + expf(-(float)scores[i]{unit}));"]
    return header, ["", signature, "{", *body, "}", ""]


def add_proba(output: BuildOutput, rule: str, n_proba: int, score_scale: int | None) -> None:
    """Add ``<prefix>_proba`` to a backend's ``<prefix>.h`` and ``<prefix>.c`` (a backend that writes
    neither is left as it is)."""
    prefix = output.prefix
    header_name, source_name = f"{prefix}.h", f"{prefix}.c"
    if header_name not in output.files or source_name not in output.files:
        return
    header, source = output.files[header_name], output.files[source_name]
    at = header.rfind(_HEADER_TAIL)
    if at < 0:
        at = header.rfind("#endif")
    head_lines, source_lines = proba_lines(prefix, rule, output.n_scores, n_proba, output.input_ctype,
                                           output.score_ctype, score_scale)
    output.files[header_name] = header[:at] + "\n".join(head_lines) + "\n" + header[at:]
    include = f'#include "{prefix}.h"\n'
    if "#include <math.h>" not in source:
        source = source.replace(include, include + "#include <math.h>\n", 1)
    output.files[source_name] = source.rstrip("\n") + "\n" + "\n".join(source_lines)
