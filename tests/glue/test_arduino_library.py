"""`--arduino` libraries against the Arduino library specification (1.5 format, rev. 2.2: library.properties'
fields, as Arduino's own lint schema reads them; the checks below are written from the specification), and
the example sketch built with Debian's arduino-mk and the real Arduino core: its map file shows no byte of
the model or the sketch in RAM-initialised data (.data, where the AVR link puts .rodata), and run in simavr
it prints over the UART the classes and labels the host build predicts."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

import tinycc_ml
from tests.arduino_sketch import ARDUINO_MK, build_uno_sketch
from tests.conftest import require_target, require_tools, simavr_uart_lines, toolchains_required
from tinycc_ml.errors import FitError
from tinycc_ml.testing import random_inputs, random_model

REQUIRED = ("name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url", "architectures")
CATEGORIES = {"Display", "Communication", "Signal Input/Output", "Sensors", "Device Control", "Timing",
              "Data Storage", "Data Processing", "Other"}
NAME = re.compile(r"([A-Za-z][A-Za-z0-9 _.\-]*|[0-9][A-Za-z0-9 _.\-]*[A-Za-z][A-Za-z0-9 _.\-]*)")
NUMBER = r"(0|[1-9][0-9]*)"
IDENT = r"[0-9A-Za-z-]+"
RELAXED_SEMVER = re.compile(rf"{NUMBER}(\.{NUMBER})?(\.{NUMBER})?(-{IDENT}(\.{IDENT})*)?(\+{IDENT}(\.{IDENT})*)?")
ARCHITECTURES = {"*", "avr", "megaavr", "sam", "samd", "mbed", "esp32", "esp8266", "stm32", "nrf52"}


def spec_problems(text: bytes, src: Path) -> list[str]:
    """What breaks the specification's rules for library.properties (empty: nothing)."""
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return ["not UTF-8"]
    fields, problems = {}, []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "=" not in line:
            problems.append(f"line {line!r} is not key=value")
            continue
        key, value = line.split("=", 1)
        if key in fields:
            problems.append(f"{key} given twice")
        fields[key.strip()] = value.strip()
    for key in REQUIRED:
        if not fields.get(key):
            problems.append(f"{key} missing or empty")
    name = fields.get("name", "")
    if name and (not NAME.fullmatch(name) or len(name) > 63 or name.lower().startswith("arduino")):
        problems.append(f"name {name!r}: letters, digits, space _ . - only, a letter or digit first, at most 63, "
                        "not starting with Arduino")
    if fields.get("version") and not RELAXED_SEMVER.fullmatch(fields["version"]):
        problems.append(f"version {fields['version']!r} is not semver")
    if fields.get("maintainer", "").lower().startswith("arduino"):
        problems.append("maintainer starts with Arduino")
    if fields.get("category") and fields["category"] not in CATEGORIES:
        problems.append(f"category {fields['category']!r} is not one of the specification's")
    url = urlparse(fields.get("url", ""))
    if fields.get("url") and (url.scheme not in ("http", "https") or not url.netloc):
        problems.append(f"url {fields['url']!r} is not an absolute http(s) URL")
    if fields.get("architectures"):
        archs = [a.strip() for a in fields["architectures"].split(",")]
        if not all(archs) or not set(archs) <= ARCHITECTURES:
            problems.append(f"architectures {fields['architectures']!r}")
    for include in filter(None, (i.strip() for i in fields.get("includes", "").split(","))):
        if not (src / include).is_file():
            problems.append(f"includes names {include}, which src/ does not hold")
    sentence, paragraph = fields.get("sentence", ""), fields.get("paragraph", "")
    if sentence and paragraph.startswith(sentence):  # the paragraph is shown after the sentence
        problems.append("paragraph repeats the sentence")
    return problems


def test_the_checks_catch_what_the_specification_forbids(tmp_path):
    good = (b"name=kws\nversion=0.1.0\nauthor=a\nmaintainer=m\nsentence=Classifies.\nparagraph=More.\n"
            b"category=Data Processing\nurl=https://example.org/kws\narchitectures=avr\n")
    assert spec_problems(good, tmp_path) == []
    for bad, word in ((good.replace(b"url=https://example.org/kws", b"url="), "url"),
                      (good.replace(b"name=kws", b"name=_kws"), "name"),
                      (good.replace(b"name=kws", b"name=ArduinoKws"), "name"),
                      (good.replace(b"version=0.1.0", b"version=v1"), "version"),
                      (good.replace(b"Data Processing", b"Machine Learning"), "category"),
                      (good.replace(b"url=https://example.org/kws", b"url=example.org"), "url"),
                      (good.replace(b"paragraph=More.", b"paragraph=Classifies. More."), "paragraph"),
                      (good + b"includes=kws.h\n", "includes"), (b"\xff" + good, "UTF-8")):
        assert any(word in p for p in spec_problems(bad, tmp_path)), bad


@pytest.mark.parametrize("name, classes", [("kws", None), ("_kws", ["yes", "no", "up"]), ("arduino_kws", None)])
def test_library_properties_follow_the_specification(tmp_path, name, classes):
    rng = np.random.default_rng(11)
    model = random_model("linear", rng)
    if classes is not None:
        model.set_classes(classes[:model.n_classes] + [f"c{i}" for i in range(len(classes), model.n_classes)])
    result = tinycc_ml.compile(model, target="avr", precision="int16", calibration=random_inputs(model, rng, 32),
                               layout="arduino", name=name, out_dir=tmp_path)
    text = (tmp_path / name / "library.properties").read_bytes()
    assert spec_problems(text, tmp_path / name / "src") == []
    props = dict(line.split("=", 1) for line in text.decode().splitlines() if line)
    sentence = props["sentence"]
    assert sentence.startswith(f"Classifies {model.input_dim} input features into {model.n_classes} classes")
    assert "linear" in sentence and "(W(" not in sentence  # says what the model does, not its array shapes
    for label in model.classes.tolist()[:4]:
        assert str(label) in sentence
    assert props["includes"] == f"{name}.h" and result.prefix == name


def require_arduino_mk() -> None:
    require_tools("make", "simavr")
    if not ARDUINO_MK.is_file():
        reason = f"{ARDUINO_MK} not found; apt-get install arduino-mk"
        if toolchains_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def data_section_bytes(map_text: str) -> dict[str, int]:
    """Bytes each object puts in the .data output section (its .data and, on the AVR, .rodata)."""
    section = re.search(r"^\.data\s.*?(?=^\.\w)", map_text, re.S | re.M).group(0)
    sizes: dict[str, int] = {}
    for size, obj in re.findall(r"^ \.(?:data|rodata)\S*\s+(?:\n\s+)?0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\S+)$", section,
                                re.M):
        sizes[obj] = sizes.get(obj, 0) + int(size, 16)
    return sizes


def test_arduino_mk_builds_the_sketch_with_every_table_in_flash(tmp_path):
    """Debian's arduino-mk and Arduino core (with -DDECIMAL_DIG=17 for Debian's core bug; LTO off so the map
    file names each object), a model with string labels: no byte of the model or the sketch in .data."""
    require_target("avr")
    require_arduino_mk()
    from sklearn.datasets import load_digits

    from tinycc_ml.models.protonn import init_protonn

    X, y = load_digits(return_X_y=True)
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    model = init_protonn(X[:400], y[:400], projection_dim=8, prototypes_per_class=1).set_classes(names)
    rows, labels = X[1000:1006], names[y[1000:1006]]  # the labels the model was trained on
    result = tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:400], layout="arduino",
                               examples=rows, example_labels=labels, name="digits", out_dir=tmp_path / "libs")
    sketch = tmp_path / "sketch"
    sketch.mkdir()
    (sketch / "sketch.ino").write_text((tmp_path / "libs/digits/examples/digits_demo/digits_demo.ino").read_text())
    (sketch / "Makefile").write_text("\n".join([
        f"ARDUINO_DIR = {ARDUINO_MK.parent}", "BOARD_TAG = uno", "ARDUINO_LIBS = digits",
        f"USER_LIB_PATH = {tmp_path / 'libs'}", "CPPFLAGS += -DDECIMAL_DIG=17",
        "CFLAGS_STD = -std=gnu11", "CXXFLAGS_STD = -std=gnu++11 -fno-threadsafe-statics",  # Arduino.mk's, no -flto
        "LDFLAGS += -Wl,-Map,firmware.map", f"include {ARDUINO_MK}", ""]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(["make", "-s"], cwd=sketch, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    sizes = data_section_bytes((sketch / "firmware.map").read_text())
    assert sizes, "no .data input sections found in the map file"
    assert not any("ltrans" in obj for obj in sizes), sizes  # each object named
    ours = {obj: n for obj, n in sizes.items() if "digits" in obj or "sketch" in obj}
    assert not any(ours.values()), ours
    assert any("core" in obj for obj in sizes), sizes  # the core's own data (Serial's tables) is listed
    # it runs: the real core's Serial on the simulated USART, until the sixth row is printed
    elf = next(sketch.glob("build-*/*.elf"))
    lines = simavr_uart_lines(elf, lambda lines: len([ln for ln in lines if "row " in ln]) >= len(rows))
    got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), \d+ us \(label (\w+), expected label (\w+)\)",
                     "".join(lines))
    host = tinycc_ml.compile(model, precision="int16", calibration=X[:400]).load()
    assert [int(p) for _, p, *_ in got] == host.predict_index(rows).tolist(), lines
    assert [lab for *_, lab, _ in got] == host.predict(rows).tolist()
    assert [exp for *_, exp in got] == labels.tolist()
    assert result.report["fit"]["chip"].startswith("ATmega328P")


@pytest.mark.parametrize("family", ["protonn", "bonsai", "nearest", "knn", "linear", "trees", "mlp"])
def test_avr_model_objects_put_nothing_in_ram_data(family, tmp_path):
    """Every family's AVR build (labels, kernels' tables, the float input compiled in): no .data or
    .rodata section in the object (the AVR link copies both into RAM)."""
    require_target("avr")
    rng = np.random.default_rng(3)
    model = random_model(family, rng)
    if family == "linear":
        model.set_classes([f"class {i}" for i in range(model.n_classes)])  # string labels too
    tinycc_ml.compile(model, target="avr", precision="int16", calibration=random_inputs(model, rng, 32), name="m",
                      out_dir=tmp_path)
    obj = tmp_path / "m.o"
    subprocess.run(["avr-gcc", "-mmcu=atmega328p", "-Os", "-std=c99", "-ffunction-sections", "-fdata-sections",
                    "-DM_WITH_FLOAT", "-c", str(tmp_path / "m.c"), "-o", str(obj)], check=True)
    sections = subprocess.run(["avr-objdump", "-h", str(obj)], capture_output=True, text=True, check=True).stdout
    found = re.findall(r"^\s*\d+\s+(\.\S+)\s+([0-9a-f]+)", sections, re.M)
    assert any(name.startswith(".progmem") for name, _ in found)  # the constants are there, in flash
    in_ram = [(name, int(size, 16)) for name, size in found
              if name.startswith((".data", ".rodata")) and int(size, 16)]
    assert in_ram == [], in_ram


def _build_sketch(tmp_path: Path, lib_name: str) -> tuple[int, int, Path]:
    return build_uno_sketch(tmp_path / "libs", lib_name, tmp_path / f"sketch-{lib_name}")


@pytest.mark.parametrize("kind", ["probabilities", "aligned buffers"])
def test_arduino_fit_check_holds_the_real_uno_sketch(kind, tmp_path):
    """The fit an --arduino build reports is the sketch's, not the harness firmware's: never below what the
    real sketch (Arduino core, stored rows, the probability print; kernel buffers aligned to 256 bytes
    wherever the link puts them) takes, and not far above it."""
    require_target("avr")
    require_arduino_mk()
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from tinycc_ml.models.protonn import init_protonn

    X, y = load_digits(return_X_y=True)
    if kind == "probabilities":
        model = LogisticRegression(max_iter=500).fit(X[:600], y[:600])
    else:
        model = init_protonn(X[:400], y[:400], projection_dim=8, prototypes_per_class=20)
    result = tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:400], layout="arduino",
                               examples=X[1000:1008], example_labels=y[1000:1008], name="m", out_dir=tmp_path / "libs")
    fit = result.report["fit"]
    assert "Arduino Uno sketch" in fit["chip"] and "bootloader" in fit["chip"]
    flash, ram, _ = _build_sketch(tmp_path, "m")
    assert flash <= fit["flash_bytes"] <= flash + 1536, (flash, fit)
    assert ram <= fit["ram_bytes"] <= ram + 512, (ram, fit)
    assert fit["flash_bytes"] <= 32256 and fit["ram_bytes"] + fit["stack_estimate"] <= 2048


def test_a_model_the_harness_fits_but_an_uno_sketch_does_not_is_refused():
    """An MLP whose firmware fits the ATmega328P's 32 KB, but not beside the Uno's bootloader and the
    Arduino core: --arduino refuses it, naming the sketch's limits."""
    require_target("avr")
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged: its size is what matters
        model = MLPClassifier((170,), max_iter=20, random_state=0).fit(X[:500], y[:500])
    alone = tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:200])
    assert 32256 - 4096 < alone.report["fit"]["flash_bytes"] <= 32768
    with pytest.raises(FitError, match="Arduino Uno sketch .*bootloader"):
        tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:200], layout="arduino",
                          examples=X[1000:1002])


def test_the_advice_for_a_forest_too_big_for_an_uno_builds_and_runs_as_a_sketch(tmp_path):
    """A default RandomForest is refused for an Uno sketch with the forests that fit the sketch (not the bare
    chip); each one the message names, trained and compiled, builds with arduino-mk and the Arduino core
    within the Uno's 32,256 bytes beside the bootloader, and one runs in simavr printing the host's classes."""
    require_target("avr")
    require_arduino_mk()
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier

    X, y = load_digits(return_X_y=True)
    rows = X[1500:1508]
    big = RandomForestClassifier(random_state=0).fit(X[:1400], y[:1400])
    with pytest.raises(FitError, match="Arduino Uno sketch") as info:
        tinycc_ml.compile(big, target="avr", precision="int16", calibration=X[:400], layout="arduino", examples=rows,
                          out_dir=tmp_path / "big")
    advice = re.findall(r"(\d+) trees of at most (\d+) leaves \(max_leaf_nodes=\d+, or max_depth=(\d+)\)",
                        str(info.value))
    assert len(advice) == 2, info.value
    assert not (tmp_path / "big").exists()  # nothing written for a refused model
    for i, (trees, leaves, depth) in enumerate(advice):  # the first by its leaves, the second by its depth
        size = {"max_leaf_nodes": int(leaves)} if i == 0 else {"max_depth": int(depth)}
        model = RandomForestClassifier(n_estimators=int(trees), random_state=0, **size).fit(X[:1400], y[:1400])
        name = f"forest{i}"
        result = tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:400], layout="arduino",
                                   examples=rows, example_labels=y[1500:1508], name=name, out_dir=tmp_path / "libs")
        flash, ram, elf = _build_sketch(tmp_path, name)
        assert flash <= result.report["fit"]["flash_bytes"] <= 32256, (flash, result.report["fit"])
        assert ram + result.report["fit"]["stack_estimate"] <= 2048
    # the last one runs on the simulated Uno: the real core's Serial prints what the host build predicts
    lines = simavr_uart_lines(elf, lambda lines: len([ln for ln in lines if "row " in ln]) >= len(rows))
    got = [int(p) for p in re.findall(r"row \d+: predicted (\d+)", "".join(lines))]
    host = tinycc_ml.compile(model, precision="int16", calibration=X[:400]).load()
    assert got == host.predict_index(rows).tolist(), lines
