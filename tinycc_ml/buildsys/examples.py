"""Example inputs stored in generated sketches and firmware projects, and the float-input helper.

``example_rows`` picks a few real rows, stores them in the model's input type (quantised with the
build's input shifts for integer builds, with the input tensor's scale and zero point for TFLite-style
int8 builds) and records the class each should get: the label given with the rows, else the model's
prediction (the float model's; a TFLite-style int8 build's int8 network, which the C equals bit for bit).
``input_helper`` is ``<prefix>_input.h``, which
names ``<prefix>_quantise`` (declared in ``<prefix>.h``) as earlier versions did.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinycc_ml.errors import DataError
from tinycc_ml.ir.fixed import quantise, quantise_affine

MAX_EXAMPLES = 8
# what an example's expected class is, by Examples.expected_from (the demos' comments say it)
EXPECTED_FROM = {"labels": "the labels given with them", "model": "what the float model predicts",
                 "int8 model": "what the int8 network predicts, in TFLite's arithmetic, which the C gives bit for bit"}
INPUT_BITS = {"int16_t": 16, "int8_t": 8}


@dataclass
class Examples:
    rows: np.ndarray  # (n, D) the inputs in real units, as float32 values (what a float sketch stores)
    stored: np.ndarray  # (n, D) the same in the model's input type (ints for integer builds)
    expected: np.ndarray  # (n,) the class index each row should get
    # "labels" (given with the rows), "model" (the float model's prediction) or "int8 model" (a TFLite-style
    # int8 build's reference: the int8 network's interpreter on the quantised rows)
    expected_from: str
    input_ctype: str
    shifts: np.ndarray | None  # integer builds: x_int[k] = round(x[k] * 2^shifts[k])
    # TFLite-style int8 builds: the input's (scale, zero point), x_int = ir.fixed.quantise_affine(x, ...)
    input_quantisation: tuple[float, int] | None = None


def example_rows(result, model, rows, labels=None, limit: int = MAX_EXAMPLES) -> Examples:
    """Up to ``limit`` rows for ``result`` (a CompileResult); ``labels`` are class indices or None."""
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
    affine = out.input_quantisation
    if labels is not None:
        expected, source = class_indices(model, np.asarray(labels)[: len(rows)], out.n_scores), "labels"
    else:  # predict_index: the class index even when the model carries its own labels
        # a TFLite-style build's model is its int8 network: its predict quantises the rows as below and runs
        # the int8 interpreter, whose classes the C gives bit for bit
        predict_index = getattr(model, "predict_index", model.predict)
        expected = np.asarray(predict_index(rows), dtype=np.int64)
        source = "model" if affine is None else f"int{INPUT_BITS[out.input_ctype]} model"
    shifts = None
    if affine is not None:  # real rows quantised with the input tensor's scale and zero point
        stored = quantise_affine(rows, *affine, INPUT_BITS[out.input_ctype])
    elif out.input_ctype in INPUT_BITS:
        shifts = np.broadcast_to(np.asarray(out.input_scale if out.input_scale is not None else 0),
                                 (out.input_dim,)).astype(np.int64)
        stored = quantise(rows, shifts, INPUT_BITS[out.input_ctype]).astype(np.int64)
    else:
        stored = rows.astype(np.float32)
    return Examples(rows, stored, expected, source, out.input_ctype, shifts, affine)


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


def label_printer_lines(name: str, string_print: list[str], integer_print: list[str]) -> list[str]:
    """``print_label(index)`` through ``<name>_label`` (its table stays in flash) when the header has a label
    table (``<NAME>_LABEL_NAMES`` strings or ``<NAME>_LABELS`` integers), and ``<NAME>_DEMO_LABELS`` defined
    to say so. ``string_print`` / ``integer_print``: the body's lines for each kind (``label`` is the value)."""
    up = name.upper()
    return [f"#if defined({up}_LABEL_NAMES)", f"#define {up}_DEMO_LABELS 1", "static void print_label(int index)",
            "{", f"    const char *label = {name}_label(index);", *string_print, "}",
            f"#elif defined({up}_LABELS)", f"#define {up}_DEMO_LABELS 1", "static void print_label(int index)", "{",
            f"    const long label = (long){name}_label(index);", *integer_print, "}", "#endif"]


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
    """``<prefix>_input.h`` for an integer build (None for float builds): kept for sketches that include it;
    the quantisation itself is ``<prefix>_quantise`` / ``<prefix>_quantise_feature`` of ``<prefix>.h``
    (codegen/float_input.py), compiled in Arduino builds and with ``-D<PREFIX>_WITH_FLOAT``."""
    out, p = result.output, result.prefix
    if out.input_ctype not in INPUT_BITS or (out.input_quantisation is not None and not out.c_quantises_affine):
        return None  # an int16 (16x8) network's input has no C quantise
    up = p.upper()
    if out.input_quantisation is not None:
        scale, zero = out.input_quantisation
        rule = [f" * {p}_quantise(x, x_int) and {p}_quantise_feature(k, v): x_int[k] = round(x[k] / {scale!r})",
                f" * + {zero} (the input tensor's scale and zero point), saturated to -128..127, NaN giving -128;"]
    else:
        rule = [f" * {p}_quantise(x, x_int) and {p}_quantise_feature(k, v): x_int[k] = round(x[k] * 2^s[k]),",
                " * saturated,",
                f" * NaN giving the lowest value (missing), s[k] from {up}_INPUT_SHIFTS;"]
    return "\n".join([
        f"/* {p}_input.h: float input to {p}_predict(), generated by tinycc-ml with {p}.h. {p}.h declares",
        *rule,
        f" * {p}.c defines them in Arduino builds and with -D{up}_WITH_FLOAT. This header keeps the name earlier",
        f" * versions gave {p}_quantise. */",
        f"#ifndef {up}_INPUT_H",
        f"#define {up}_INPUT_H",
        "",
        f'#include "{p}.h"',
        "",
        f"#define {p}_quantise_input {p}_quantise",
        "",
        f"#endif /* {up}_INPUT_H */",
        "",
    ])
