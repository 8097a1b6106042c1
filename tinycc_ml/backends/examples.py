"""Example inputs stored in generated sketches and firmware projects, and the float-input helper.

``example_rows`` picks a few real rows, stores them in the model's input type (quantised with the
build's input shifts for integer builds) and records the class each should get: the label given
with the rows, else the float model's prediction. ``input_helper`` is ``<prefix>_input.h``, a
header-only helper for integer builds that quantises float input on the device
(``<prefix>_quantise_input(const float *x, IN_T *x_int)``); float code is compiled only where it is
included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.errors import DataError

MAX_EXAMPLES = 8
INPUT_BITS = {"int16_t": 16, "int8_t": 8}


@dataclass
class Examples:
    rows: np.ndarray  # (n, D) the inputs in real units, as float32 values (what a float sketch stores)
    stored: np.ndarray  # (n, D) the same in the model's input type (ints for integer builds)
    expected: np.ndarray  # (n,) the class index each row should get
    expected_from: str  # "labels" (given with the rows) or "model" (the float model's prediction)
    input_ctype: str
    shifts: np.ndarray | None  # integer builds: x_int[k] = round(x[k] * 2^shifts[k])


def example_rows(result, model, rows, labels=None, limit: int = MAX_EXAMPLES) -> Examples:
    """Up to ``limit`` rows for ``result`` (a CompileResult); ``labels`` are class indices or None."""
    from tinycc_ml.ir.fixed import quantise

    out = result.output
    if rows is None:
        raise DataError("examples need input rows: give --examples FILE (or --calibration FILE)")
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != out.input_dim or len(rows) == 0:
        raise DataError(f"example rows: shape {rows.shape}, expected (rows, {out.input_dim})")
    if rows.dtype.kind not in "biuf":
        raise DataError(f"example rows: dtype {rows.dtype} is not bool, integer or real float")
    with np.errstate(over="ignore", invalid="ignore"):
        rows = rows[:limit].astype(np.float32).astype(np.float64)
    if not np.all(np.isfinite(rows)):
        row, col = (int(i) for i in np.argwhere(~np.isfinite(rows))[0])
        raise DataError(f"example rows: row {row}, feature {col} is NaN, infinite or beyond float32 "
                        "(examples are written into the firmware as float literals)")
    if labels is not None and np.ndim(labels) != 1:
        raise DataError(f"example labels: shape {np.shape(labels)}; examples take one class label per row "
                        "(give the rows without labels to check against the model's own predictions)")
    if labels is not None:
        expected, source = class_indices(model, np.asarray(labels)[: len(rows)], out.n_scores), "labels"
    else:  # predict_index: the class index even when the model carries its own labels
        predict_index = getattr(model, "predict_index", model.predict)
        expected, source = np.asarray(predict_index(rows), dtype=np.int64), "model"
    shifts = None
    if out.input_ctype in INPUT_BITS:
        shifts = np.broadcast_to(np.asarray(out.input_scale if out.input_scale is not None else 0),
                                 (out.input_dim,)).astype(np.int64)
        stored = quantise(rows, shifts, INPUT_BITS[out.input_ctype]).astype(np.int64)
    else:
        stored = rows.astype(np.float32)
    return Examples(rows, stored, expected, source, out.input_ctype, shifts)


def class_indices(model, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """Class indices 0..L-1 for ``labels``: through the model's class labels when it has them,
    else the labels must be the indices themselves."""
    classes = getattr(model, "classes", None)
    if classes is not None:
        index = {value: i for i, value in enumerate(np.asarray(classes).tolist())}
        unknown = [v for v in labels.tolist() if v not in index]
        if unknown:
            raise DataError(f"example labels: {unknown[:3]} are not among the model's classes "
                            f"{np.asarray(classes).tolist()[:8]}")
        return np.asarray([index[v] for v in labels.tolist()], dtype=np.int64)
    if labels.dtype.kind not in "iub" and not (labels.dtype.kind == "f" and np.all(np.mod(labels, 1) == 0)):
        raise DataError(f"example labels: {labels[:4].tolist()}... are not class indices")
    labels = labels.astype(np.int64)
    if labels.min() < 0 or labels.max() >= n_classes:
        raise DataError(f"example labels: {int(labels.min())}..{int(labels.max())} outside the model's "
                        f"classes 0..{n_classes - 1}")
    return labels


def label_table_lines(name: str) -> list[str]:
    """``label_of[]`` from the header's label table when it has one (``<NAME>_LABEL_NAMES`` strings or
    ``<NAME>_LABELS`` integers), and ``<NAME>_DEMO_LABELS`` defined to say so."""
    up = name.upper()
    return [f"#if defined({up}_LABEL_NAMES)",
            f"static const char *const label_of[] = {up}_LABEL_NAMES;",
            f"#define {up}_DEMO_LABELS 1",
            f"#elif defined({up}_LABELS)",
            f"static const long label_of[] = {up}_LABELS;",
            f"#define {up}_DEMO_LABELS 1",
            "#endif"]


def c_values(values, ctype: str) -> list[str]:
    if ctype == "float":
        return [f"{float(v)!r}f" for v in np.asarray(values, dtype=np.float32).tolist()]
    return [str(int(v)) for v in values]


def c_table(name: str, ctype: str, rows, attribute: str = "", per_line: int = 12) -> list[str]:
    """``static const ctype name[n][d] attribute = {...};`` as lines."""
    rows = np.asarray(rows)
    lines = [f"static const {ctype} {name}[{rows.shape[0]}][{rows.shape[1]}]{attribute} = {{"]
    for row in rows:
        values = c_values(row, ctype)
        chunks = [", ".join(values[i:i + per_line]) for i in range(0, len(values), per_line)]
        lines.append("    {" + ",\n     ".join(chunks) + "},")
    return lines + ["};"]


def input_helper(result) -> str | None:
    """``<prefix>_input.h`` for an integer build (None for float builds)."""
    out, p = result.output, result.prefix
    if out.input_ctype not in INPUT_BITS:
        return None
    up, ctype, bits = p.upper(), out.input_ctype, INPUT_BITS[out.input_ctype]
    top = 2 ** (bits - 1)
    return "\n".join([
        f"/* {p}_input.h: float input to the {ctype} input of {p}_predict(), on the device.",
        f" * Generated by tinycc-ml with {p}.h; header-only, so float code is compiled only where this",
        " * file is included. x_int[k] = round(x[k] * 2^s[k]) saturated to the input type, s[k] from",
        f" * {up}_INPUT_SHIFTS: bit for bit what tinycc-ml's Python quantisation gives for float32 x. */",
        f"#ifndef {up}_INPUT_H",
        f"#define {up}_INPUT_H",
        "",
        "#include <stdint.h>",
        f'#include "{p}.h"',
        "",
        "#ifdef __AVR__",
        "#include <avr/pgmspace.h>",
        f"static const int8_t {p}_input_shifts[{up}_INPUT_DIM] PROGMEM = {up}_INPUT_SHIFTS;",
        f"#define {up}_INPUT_SHIFT(k) ((int8_t)pgm_read_byte(&{p}_input_shifts[k]))",
        "#else",
        f"static const int8_t {p}_input_shifts[{up}_INPUT_DIM] = {up}_INPUT_SHIFTS;",
        f"#define {up}_INPUT_SHIFT(k) ({p}_input_shifts[k])",
        "#endif",
        "",
        f"/* Feature k of a real-valued input as {p}_predict() takes it. */",
        f"static inline {ctype} {p}_quantise_feature(int k, float x)",
        "{",
        f"    const int s = {up}_INPUT_SHIFT(k);",
        "    float factor = 1.0f; /* 2^s by doubling: exact for every int8 s, no shift by >= 32 */",
        "    for (int i = 0; i < s; ++i) factor *= 2.0f;",
        "    for (int i = 0; i > s; --i) factor *= 0.5f;",
        "    const float v = x * factor + 0.5f;",
        "    if (v != v) return 0; /* NaN: no value to round; never cast to an integer */",
        f"    if (v >= {top - 1}.0f) return {top - 1};",
        f"    if (v <= -{top}.0f) return -{top};",
        "    const int32_t t = (int32_t)v; /* truncates toward zero; the floor is one less for negatives */",
        f"    return ({ctype})(t - ((float)t > v));",
        "}",
        "",
        f"/* A whole input vector: x_int[k] = {p}_quantise_feature(k, x[k]). */",
        f"static inline void {p}_quantise_input(const float *x, {ctype} *x_int)",
        "{",
        f"    for (int k = 0; k < {up}_INPUT_DIM; ++k)",
        f"        x_int[k] = {p}_quantise_feature(k, x[k]);",
        "}",
        "",
        f"#endif /* {up}_INPUT_H */",
        "",
    ])
