"""``<prefix>_proba(x, out)`` in the generated C: the model's class probabilities from its scores,
by the rule the model defines (models/proba.py), in float arithmetic (``expf``; the function is
only linked when called, so integer-only firmware that never calls it stays integer-only).

The lines are added to the files a backend wrote, as the label table is (codegen/labels.py), so
every target gets them from this one place.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.models.proba import LIBSVM_MIN_PROB

_HEADER_TAIL = "#ifdef __cplusplus\n}\n#endif"


def _float_tables(prefix: str, tables: dict, word_flash=None) -> tuple[list[str], dict]:
    """(C lines, reader of each table by index expression) of float constant tables: in flash on the AVR
    (PROGMEM, read with pgm_read_float), through ``word_flash``'s helpers on targets that read flash only in
    aligned words (CTarget.word_flash), plain const elsewhere."""
    up = prefix.upper()
    if word_flash is not None:
        lines, attribute = [], word_flash.attribute
        readers = {name: (lambda index, name=name: word_flash.read(f"{prefix}_{name}", index, "float"))
                   for name in tables}
    else:
        lines = ["#if defined(__AVR__)", "#include <avr/pgmspace.h>",
                 f"#define {up}_PROBA_READ(v) pgm_read_float(&(v))", f"#define {up}_PROBA_FLASH PROGMEM", "#else",
                 f"#define {up}_PROBA_READ(v) (v)", f"#define {up}_PROBA_FLASH", "#endif"]
        attribute = f" {up}_PROBA_FLASH"
        readers = {name: (lambda index, name=name: f"{up}_PROBA_READ({prefix}_{name}[{index}])") for name in tables}
    for name, values in tables.items():
        flat = np.asarray(values, dtype=np.float32).ravel()
        text = ", ".join(f"{float(v)!r}f" for v in flat)
        lines.append(f"static const float {prefix}_{name}[{flat.size}]{attribute} = {{ {text} }};")
    return lines, readers


def _platt_coupled(prefix: str, n_scores: int, unit: str, constants: dict,
                   word_flash=None) -> tuple[list[str], list[str]]:
    """(tables before the function, its body after the scores) for libsvm's Platt scaling and pairwise
    coupling, in double as libsvm computes (float where double is float: avr-gcc)."""
    up, k = prefix.upper(), int(constants["n_classes"])
    tables, read = _float_tables(prefix, {"platt_a": constants["a"], "platt_b": constants["b"]}, word_flash)
    read_a, read_b = read["platt_a"]("i"), read["platt_b"]("i")
    pair = f"(i) * {k} - (i) * ((i) + 1) / 2 + (j) - (i) - 1"
    swapped = f"(j) * {k} - (j) * ((j) + 1) / 2 + (i) - (j) - 1"
    body = [
        f"    double r[{n_scores}], q_diag[{k}], qp[{k}], p[{k}], pqp, max_error, diff;",
        "    int j, t, iteration;",
        "    /* r: each pair's probability of its first class, libsvm's sigmoid_predict, clipped */",
        f"    for (i = 0; i < {n_scores}; i++) {{",
        f"        const double f = (double)scores[i]{unit} * {read_a} + {read_b};",
        "        const double v = f >= 0 ? exp(-f) / (1.0 + exp(-f)) : 1.0 / (1.0 + exp(f));",
        f"        r[i] = v < {LIBSVM_MIN_PROB!r} ? {LIBSVM_MIN_PROB!r} : v > 1.0 - {LIBSVM_MIN_PROB!r} ? "
        f"1.0 - {LIBSVM_MIN_PROB!r} : v;",
        "    }",
        f"#define {up}_R(i, j) ((i) < (j) ? r[{pair}] : 1.0 - r[{swapped}])",
        f"    for (t = 0; t < {k}; t++) {{",
        f"        p[t] = 1.0 / {k};",
        "        q_diag[t] = 0.0;",
        f"        for (j = 0; j < {k}; j++)",
        f"            if (j != t) q_diag[t] += {up}_R(j, t) * {up}_R(j, t);",
        "    }",
        f"    for (iteration = 0; iteration < {max(100, k)}; iteration++) {{",
        "        pqp = 0.0;",
        f"        for (t = 0; t < {k}; t++) {{",
        "            qp[t] = 0.0;",
        f"            for (j = 0; j < {k}; j++)",
        f"                qp[t] += (j == t ? q_diag[t] : -{up}_R(j, t) * {up}_R(t, j)) * p[j];",
        "            pqp += p[t] * qp[t];",
        "        }",
        "        max_error = 0.0;",
        f"        for (t = 0; t < {k}; t++) {{",
        "            const double error = qp[t] > pqp ? qp[t] - pqp : pqp - qp[t];",
        "            if (error > max_error) max_error = error;",
        "        }",
        f"        if (max_error < {0.005 / k!r}) break;",
        f"        for (t = 0; t < {k}; t++) {{",
        "            diff = (-qp[t] + pqp) / q_diag[t];",
        "            p[t] += diff;",
        "            pqp = (pqp + diff * (diff * q_diag[t] + 2 * qp[t])) / (1 + diff) / (1 + diff);",
        f"            for (j = 0; j < {k}; j++) {{",
        f"                qp[j] = (qp[j] + diff * (j == t ? q_diag[t] : -{up}_R(j, t) * {up}_R(t, j))) / (1 + diff);",
        "                p[j] /= 1 + diff;",
        "            }",
        "        }",
        "    }",
        f"#undef {up}_R",
        f"    for (t = 0; t < {k}; t++) out[t] = (float)p[t];",
    ]
    return tables, body


def _softmax_linear(prefix: str, n_proba: int, constants: dict, input_scale,
                    word_flash=None) -> tuple[list[str], list[str]]:
    """(tables, body) of softmax(W x + b) read from the input itself; an integer input's steps 2^-s folded
    into W (powers of two: exact)."""
    weights = np.asarray(constants["weights"], dtype=np.float64)
    if input_scale is not None:
        weights = weights * 2.0 ** -np.broadcast_to(np.asarray(input_scale, dtype=np.float64), weights.shape[1:])
    dim = weights.shape[1]
    tables, read = _float_tables(prefix, {"proba_w": weights, "proba_b": constants["bias"]}, word_flash)
    body = ["    int i, j;", "    float top = 0.0f, total = 0.0f;",
            f"    for (i = 0; i < {n_proba}; i++) {{",
            f"        float acc = {read['proba_b']('i')};",
            f"        for (j = 0; j < {dim}; j++) acc += {read['proba_w'](f'i * {dim} + j')} * (float)x[j];",
            "        out[i] = acc;",
            "        if (i == 0 || acc > top) top = acc;", "    }",
            f"    for (i = 0; i < {n_proba}; i++) {{",
            "        out[i] = expf(out[i] - top);", "        total += out[i];", "    }",
            f"    for (i = 0; i < {n_proba}; i++) out[i] /= total;"]
    return tables, body


def proba_lines(prefix: str, rule: str, n_scores: int, n_proba: int, input_ctype: str, score_ctype: str,
                score_scale: int | None, constants: dict | None = None,
                word_flash=None, input_scale=None) -> tuple[list[str], list[str]]:
    """(header lines, source lines) of ``<prefix>_proba`` (its tables through ``word_flash``'s helpers when the
    target reads flash only in aligned words)."""
    up = prefix.upper()
    unit = "" if score_scale is None else f" * {2.0 ** -score_scale!r}f"  # a power of two: exact
    signature = f"void {prefix}_proba(const {input_ctype} *x, float *out)"
    what = {"softmax": "the softmax of the scores", "logistic": "[1 - p, p], p the logistic of the score",
            "logistic_each": "each label's logistic of its score",
            "logistic_ovr": "each class's logistic of its score over their sum (one-vs-rest)",
            "normalise": "the scores' positive parts over their sum (uniform if none is > 0)",
            "modified_huber": "(clip(score, -1, 1) + 1) / 2, over their sum with several classes (uniform if it "
                              "is 0)",
            "one_hot": "1 for the class of the first highest score, 0 elsewhere",
            "probabilities": "the scores themselves",
            "platt_coupled": "libsvm's pairwise coupling of the pair decisions' Platt probabilities",
            "softmax_linear": "the softmax of a linear map of x (a head beside the scores)"}[rule]
    header = [f"/* Class probabilities of x: {what} ({up}_N_PROBA floats). Float arithmetic (expf). */",
              f"#define {up}_N_PROBA {n_proba}", f"{signature};", ""]
    body = [f"    {score_ctype} scores[{n_scores}];", "    int i;", f"    {prefix}_scores(x, scores);"]
    tables: list[str] = []
    if rule == "softmax_linear":
        tables, body = _softmax_linear(prefix, n_proba, constants, input_scale, word_flash)
    elif rule == "platt_coupled":
        tables, coupled = _platt_coupled(prefix, n_scores, unit, constants, word_flash)
        body = body[:2] + coupled[:2] + body[2:] + coupled[2:]
    elif rule == "probabilities":
        body += [f"    for (i = 0; i < {n_scores}; i++) out[i] = (float)scores[i]{unit};"]
    elif rule == "softmax":
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
    elif rule == "one_hot":
        body += ["    int best = 0;",
                 f"    for (i = 1; i < {n_scores}; i++)",
                 "        if (scores[i] > scores[best]) best = i;",
                 f"    for (i = 0; i < {n_scores}; i++) out[i] = i == best ? 1.0f : 0.0f;"]
    elif rule == "modified_huber" and n_scores == 1:
        body += ["    const float v = (float)scores[0]" + unit + ";", "    (void)i;",
                 "    out[1] = ((v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v) + 1.0f) / 2.0f;",
                 "    out[0] = 1.0f - out[1];"]
    elif rule == "modified_huber":
        body += ["    float total = 0.0f;",
                 f"    for (i = 0; i < {n_scores}; i++) {{",
                 f"        const float v = (float)scores[i]{unit};",
                 "        out[i] = ((v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v) + 1.0f) / 2.0f;",
                 "        total += out[i];", "    }",
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
    return header, ["", *tables, signature, "{", *body, "}", ""]


def add_proba(output: BuildOutput, rule: str, n_proba: int, score_scale: int | None,
              constants: dict | None = None) -> None:
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
                                           output.score_ctype, score_scale, constants, output.word_flash,
                                           output.input_scale)
    output.files[header_name] = header[:at] + "\n".join(head_lines) + "\n" + header[at:]
    include = f'#include "{prefix}.h"\n'
    if "#include <math.h>" not in source:
        source = source.replace(include, include + "#include <math.h>\n", 1)
    output.files[source_name] = source.rstrip("\n") + "\n" + "\n".join(source_lines)
