"""An Arduino / PlatformIO library folder around an AVR build, so the model installs like any library
(Sketch > Include Library > Add .ZIP Library, a copy into ~/Arduino/libraries, or PlatformIO's
``lib_deps``/``lib/``):

    <name>/library.properties                        Arduino library metadata
    <name>/library.json                              PlatformIO library manifest
    <name>/src/<name>.h, <name>/src/<name>.c         the files the avr target wrote
    <name>/src/<name>_input.h                        integer builds: the old name of <name>_quantise
    <name>/examples/<name>_demo/<name>_demo.ino      classifies stored inputs, prints predicted and
                                                     expected labels and the time of <name>_predict

The example stores a few real inputs (in flash) with the label each should get. By default they are
stored already quantised; with ``<NAME>_DEMO_FLOAT_INPUT`` set to 1 (edit the sketch's first
``#define``, or add ``-D<NAME>_DEMO_FLOAT_INPUT=1`` to PlatformIO's build_flags) they are stored as
float and quantised on the device with ``<name>_quantise_feature`` of ``<name>.h`` (``<name>.c`` defines it
in Arduino builds, where ``ARDUINO`` is defined). Labels are printed through ``<name>_label``, whose table
stays in flash.
"""

from __future__ import annotations

import json
import re

from tinycc_ml.buildsys.examples import EXPECTED_FROM, Examples, c_table, input_helper, label_printer_lines
from tinycc_ml.version import PROJECT_URL, __version__

PGM_READ = {"int16_t": "(int16_t)pgm_read_word", "int8_t": "(int8_t)pgm_read_byte", "float": "pgm_read_float"}


def _sketch(name: str, examples: Examples) -> str:
    up, ctype = name.upper(), examples.input_ctype
    switch = f"{up}_DEMO_FLOAT_INPUT"
    n = len(examples.expected)
    integer = ctype != "float"
    lines = [
        f"// {name}: classify {n} stored inputs with the model compiled by tinycc-ml {__version__};",
        f"// prints the predicted and expected class of each and the time {name}_predict() took.",
        f"// Expected classes: {EXPECTED_FROM[examples.expected_from]}.",
    ]
    if integer:
        lines += [
            f"// {switch} 1: store the inputs as float and quantise them on the device with",
            f"// {name}_quantise_feature() of {name}.h (adds float code); 0: store them quantised.",
            f"#ifndef {switch}",
            f"#define {switch} 0",
            "#endif",
        ]
    lines += [f"#include <{name}.h>", "#include <avr/pgmspace.h>", ""]
    if integer:
        lines += [f"#if {switch}", *c_table("inputs", "float", examples.rows, " PROGMEM"), "#else",
                  *c_table("inputs", ctype, examples.stored, " PROGMEM"), "#endif"]
    else:
        lines += c_table("inputs", "float", examples.rows, " PROGMEM")
    expected = ", ".join(str(int(v)) for v in examples.expected)
    lines += [f"static const uint8_t expected[{n}] PROGMEM = {{ {expected} }};",
              *label_printer_lines(name, ["    Serial.print((const __FlashStringHelper *)label); /* in flash */"],
                                   ["    Serial.print(label);"]), "",
              f"static {ctype} x[{up}_INPUT_DIM];", "",
              "void setup() {",
              "    Serial.begin(115200);",
              f"    for (uint8_t r = 0; r < {n}; ++r) {{",
              f"        for (int k = 0; k < {up}_INPUT_DIM; ++k) {{"]
    if integer:
        lines += [f"#if {switch}",
                  f"            x[k] = {name}_quantise_feature(k, pgm_read_float(&inputs[r][k]));",
                  "#else",
                  f"            x[k] = {PGM_READ[ctype]}(&inputs[r][k]);",
                  "#endif"]
    else:
        lines += ["            x[k] = pgm_read_float(&inputs[r][k]);"]
    lines += [
        "        }",
        "        const unsigned long start = micros();",
        f"        const int predicted = {name}_predict(x);",
        "        const unsigned long took = micros() - start;",
        '        Serial.print(F("row "));',
        "        Serial.print(r);",
        '        Serial.print(F(": predicted "));',
        "        Serial.print(predicted);",
        '        Serial.print(F(", expected "));',
        "        Serial.print(pgm_read_byte(&expected[r]));",
        '        Serial.print(F(", "));',
        "        Serial.print(took);",
        '        Serial.print(F(" us"));',
        f"#ifdef {up}_DEMO_LABELS",
        '        Serial.print(F(" (label "));',
        "        print_label(predicted);",
        '        Serial.print(F(", expected label "));',
        "        print_label(pgm_read_byte(&expected[r]));",
        '        Serial.print(F(")"));',
        "#endif",
        f"#ifdef {up}_N_PROBA  /* the predicted class's probability */",
        "        {",
        f"            float p[{up}_N_PROBA];",
        f"            {name}_proba(x, p);",
        '            Serial.print(F(", p "));',
        f"            const float chosen = predicted >= 0 && predicted < {up}_N_PROBA ? p[predicted] : 0.0f;",
        "            const unsigned long thousandths = (unsigned long)(chosen * 1000.0f + 0.5f);",
        "            Serial.print(thousandths / 1000UL);",
        '            Serial.print(F("."));',
        "            Serial.print(thousandths / 100UL % 10UL);",
        "            Serial.print(thousandths / 10UL % 10UL);",
        "            Serial.print(thousandths % 10UL);",
        "        }",
        "#endif",
        "        Serial.println();",
        "    }",
        "}",
        "",
        "void loop() {}",
        "",
    ]
    return "\n".join(lines)


def library_name(prefix: str) -> str:
    """The Arduino library name for ``prefix``: the specification wants a letter or digit first, and names
    starting with "Arduino" are reserved for Arduino's own libraries."""
    if not re.match(r"[A-Za-z0-9]", prefix) or prefix.lower().startswith("arduino"):
        return "model" + ("" if prefix.startswith("_") else "_") + prefix
    return prefix


def what_it_does(result) -> str:
    """One sentence saying what the compiled model does, for library.properties and library.json."""
    out = result.output
    family = result.report.get("model", "model").split(" (", 1)[0]
    kind = (out.task or {}).get("kind", "classification")
    how = f"a {family} model in {result.precision} C for the ATmega328P, generated by tinycc-ml"
    if kind == "regression":
        return f"Predicts a value from {out.input_dim} input features with {how}."
    if kind == "multilabel":
        return f"Chooses labels among {out.n_scores} for {out.input_dim} input features with {how}."
    classes = [str(c) for c in (result.classes if result.classes is not None else range(out.n_scores))]
    shown = ", ".join(classes[:4]) + (", ..." if len(classes) > 4 else "")
    text = f"Classifies {out.input_dim} input features into {len(classes)} classes ({shown}) with {how}."
    return " ".join(text.split())  # one line, whatever the labels hold


def arduino_library(result, examples: Examples) -> dict[str, str]:
    """Files (relative paths) of a library folder for an AVR ``CompileResult`` (AvrBackend.arduino_library)."""
    name = result.prefix
    header, source = result.files[f"{name}.h"], result.files[f"{name}.c"]
    helper = input_helper(result)
    headers = [f"{name}.h"] + ([f"{name}_input.h"] if helper else [])
    sentence = what_it_does(result)
    ctype = result.output.input_ctype
    paragraph = (f"Call {name}_predict(x) on {ctype} features" +
                 (f", or {name}_predict_float(x) on float ones" if ctype != "float" else "") +
                 f". Constants stay in flash, no heap. Example sketch: {name}_demo.")
    properties = "\n".join([
        f"name={library_name(name)}",
        f"version={__version__}",
        "author=tinycc-ml",
        "maintainer=tinycc-ml",
        f"sentence={sentence}",
        f"paragraph={paragraph}",
        "category=Data Processing",
        f"url={PROJECT_URL}",
        "architectures=avr",
        f"includes={name}.h",
        "",
    ])
    manifest = {
        "name": library_name(name),
        "version": __version__,
        "description": sentence,
        "homepage": PROJECT_URL,
        "keywords": ["tinycc-ml", "machine-learning", "classifier"],
        "authors": [{"name": "tinycc-ml", "maintainer": True}],
        "frameworks": ["arduino"],
        "platforms": ["atmelavr"],
        "headers": headers,
        "build": {"srcDir": "src", "includeDir": "src"},
        "examples": [{"name": f"{name}_demo", "base": f"examples/{name}_demo", "files": [f"{name}_demo.ino"]}],
    }
    files = {
        f"{name}/library.properties": properties,
        f"{name}/library.json": json.dumps(manifest, indent=2) + "\n",
        f"{name}/src/{name}.h": header,
        f"{name}/src/{name}.c": source,
        f"{name}/examples/{name}_demo/{name}_demo.ino": _sketch(name, examples),
    }
    if helper:
        files[f"{name}/src/{name}_input.h"] = helper
    return files
