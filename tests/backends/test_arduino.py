"""`--arduino`: an Arduino library folder whose sources are the avr build and whose example sketch
compiles for the ATmega328P (against a minimal stand-in for the Arduino core's Serial/micros)."""

import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.protonn import init_protonn

ARDUINO_STUB = """#pragma once
#include <stdint.h>
struct SerialStub { void begin(long) {} void print(const char *) {} void print(int) {} void print(long) {}
                    void print(unsigned long) {} void println(const char *) {} };
static SerialStub Serial;
unsigned long micros(void);
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arduino")
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp / "m.npz")
    np.savez(tmp / "cal.npz", X=X[:600])
    return tmp, X[:600]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True)


def test_library_folder_builds_for_the_uno(files):
    require_target("avr")
    tmp, X = files
    out = tmp / "libs"
    proc = cli("compile", tmp / "m.npz", "--target", "avr", "--precision", "int16", "--calibration",
               tmp / "cal.npz", "--name", "digits", "--arduino", "-o", out)
    assert proc.returncode == 0, proc.stderr
    lib = out / "digits"
    props = dict(line.split("=", 1) for line in (lib / "library.properties").read_text().splitlines() if line)
    assert props["name"] == "digits" and props["architectures"] == "avr" and props["includes"] == "digits.h"
    sketch = (lib / "examples" / "digits_demo" / "digits_demo.ino").read_text()
    assert "digits_feed(" in sketch  # streamed straight from flash
    # the stored sample is the first calibration row, quantised with the header's shifts
    shifts = [int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}", (lib / "src" / "digits.h").read_text())
              .group(1).split(",")]
    stored = [int(v) for v in re.search(r"PROGMEM = \{([^}]*)\}", sketch).group(1).split(",")]
    assert stored == quantise(X[:1], np.array(shifts), 16)[0].tolist()
    (tmp / "Arduino.h").write_text(ARDUINO_STUB)
    subprocess.run(["avr-gcc", "-mmcu=atmega328p", "-Os", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c",
                    str(lib / "src" / "digits.c"), "-o", str(tmp / "digits.o")], check=True)
    subprocess.run(["avr-g++", "-mmcu=atmega328p", "-Os", "-Wall", "-Wextra", "-Werror", "-x", "c++", "-include",
                    str(tmp / "Arduino.h"), "-I", str(lib / "src"), "-c",
                    str(lib / "examples" / "digits_demo" / "digits_demo.ino"), "-o", str(tmp / "demo.o")],
                   check=True)


def test_arduino_needs_the_avr_target(files):
    tmp, _ = files
    proc = cli("compile", tmp / "m.npz", "--target", "host", "--arduino", "-o", tmp / "nope")
    assert proc.returncode == 2 and "avr" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp / "nope").exists()
