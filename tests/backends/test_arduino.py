"""`--arduino`: an Arduino/PlatformIO library folder whose example sketch, built with avr-gcc against a
minimal stand-in for the Arduino core (Serial on the GPIOR0 console, micros from Timer1), runs in
simavr and prints, for each stored row, the class the host build predicts and the expected label;
with the float-input switch the device quantises float rows itself and prints the same."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.protonn import init_protonn

ARDUINO_STUB = r"""#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <avr/io.h>
static inline void stub_put(const char *s) { while (*s) GPIOR0 = *s++; }
#include <avr/pgmspace.h>
class __FlashStringHelper;
#define F(s) (reinterpret_cast<const __FlashStringHelper *>(PSTR(s)))
struct SerialStub {
    void begin(long) {}
    void print(const char *s) { stub_put(s); }
    void print(const __FlashStringHelper *s) {
        const char *p = reinterpret_cast<const char *>(s);
        for (char c; (c = (char)pgm_read_byte(p++)) != 0;) GPIOR0 = c;
    }
    void println() { stub_put("\r\n"); }
    void print(long v) { char b[12]; ltoa(v, b, 10); stub_put(b); }
    void print(int v) { print((long)v); }
    void print(unsigned long v) { char b[12]; ultoa(v, b, 10); stub_put(b); }
    void println(const char *s) { stub_put(s); stub_put("\r\n"); }
};
static SerialStub Serial __attribute__((unused));
static inline unsigned long micros(void) { return (unsigned long)TCNT1 * 4UL; } /* prescaler 64 */
"""

STUB_MAIN = r"""#include "Arduino.h"
void setup();
int main() {
    TCCR1B = _BV(CS11) | _BV(CS10);
    setup();
    __asm__ __volatile__("cli\n\tsleep");
    for (;;) {}
}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arduino")
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp / "m.npz")
    np.savez(tmp / "cal.npz", X_train=X[:600], y_train=y[:600])
    np.savez(tmp / "test.npz", X_test=X[1000:1006], y_test=y[1000:1006])
    return tmp, X


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True)


def run_sketch(tmp, lib, name, defines=()):
    """Build the example with avr-gcc/avr-g++ and the stub core; run it under libsimavr; its console text."""
    from tinycc_ml.avr import simulator as sim_avr

    (tmp / "Arduino.h").write_text(ARDUINO_STUB)
    (tmp / "stub_main.cpp").write_text(STUB_MAIN)
    flags = ["-mmcu=atmega328p", "-DF_CPU=16000000UL", "-DARDUINO=10819", "-Os", "-Wall", "-Wextra", "-Werror",
             *defines]
    objs = []
    for src, lang in ((lib / "src" / f"{name}.c", "c"), (lib / "examples" / f"{name}_demo" / f"{name}_demo.ino", "c++"),
                      (tmp / "stub_main.cpp", "c++")):
        obj = tmp / (src.stem + ".o")
        compiler = "avr-gcc" if lang == "c" else "avr-g++"
        extra = ["-std=c99"] if lang == "c" else ["-x", "c++", "-include", str(tmp / "Arduino.h")]
        subprocess.run([compiler, *flags, *extra, "-I", str(lib / "src"), "-I", str(tmp), "-c", str(src), "-o",
                        str(obj)], check=True)
        objs.append(str(obj))
    elf, binf = tmp / "demo.elf", tmp / "demo.bin"
    subprocess.run(["avr-g++", "-mmcu=atmega328p", "-Wl,--gc-sections", *objs, "-o", str(elf), "-lm"], check=True)
    subprocess.run(["avr-objcopy", "-O", "binary", "-R", ".eeprom", str(elf), str(binf)], check=True)
    (tmp / "empty.bin").write_bytes(b"")
    run = subprocess.run([sim_avr.runner_path(), str(binf), str(tmp / "empty.bin"), str(tmp / "console.txt"),
                          "400000000", "400000000"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return (tmp / "console.txt").read_text()


def test_library_example_runs_in_simavr_and_prints_correct_labels(files):
    require_target("avr")
    tmp, X = files
    out = tmp / "libs"
    proc = cli("compile", tmp / "m.npz", "--target", "avr", "--calibration", tmp / "cal.npz", "--examples",
               tmp / "test.npz", "--name", "digits", "--arduino", "-o", out)
    assert proc.returncode == 0, proc.stderr
    lib = out / "digits"
    props = dict(line.split("=", 1) for line in (lib / "library.properties").read_text().splitlines() if line)
    assert props["name"] == "digits" and props["architectures"] == "avr" and props["includes"] == "digits.h"
    manifest = json.loads((lib / "library.json").read_text())
    assert manifest["name"] == "digits" and manifest["platforms"] == ["atmelavr"]
    assert manifest["frameworks"] == ["arduino"] and manifest["build"]["srcDir"] == "src"
    assert {"digits.h", "digits_input.h"} <= set(manifest["headers"])
    sketch = (lib / "examples" / "digits_demo" / "digits_demo.ino").read_text()
    assert "digits_predict(x)" in sketch and "digits_feed" not in sketch  # times predict, not streaming

    data = np.load(tmp / "test.npz")
    rows, labels = data["X_test"].astype(np.float32), data["y_test"]
    host = tinycc_ml.compile(tmp / "m.npz", name="digits", precision="int16",
                             calibration=np.load(tmp / "cal.npz")["X_train"]).load()
    shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}",
                                                 (lib / "src" / "digits.h").read_text()).group(1).split(",")])
    want = host.run_raw(quantise(rows, shifts, 16))[1]
    for defines in ((), ("-DDIGITS_DEMO_FLOAT_INPUT=1",)):
        console = run_sketch(tmp, lib, "digits", defines)
        got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", console)
        assert [int(r) for r, *_ in got] == list(range(len(rows))), console
        assert [int(p) for _, p, _, _ in got] == want.tolist(), (defines, console)
        assert [int(e) for _, _, e, _ in got] == labels.tolist()
        assert all(1000 < int(us) < 100_000 for *_, us in got)  # simulated: predict takes 1-100 ms at 16 MHz
        # the predicted class's probability, three decimals: what the same build computes on the host
        printed = np.array([float(v) for v in re.findall(r" us[^\n]*, p (\d\.\d{3})", console)])
        chosen = host.predict_proba(rows)[np.arange(len(rows)), want]
        assert len(printed) == len(rows) and np.max(np.abs(printed - chosen)) <= 0.0006, (printed, chosen)

    # a model trained on labels 10..19: --examples takes those labels (the file's y), the sketch prints them
    # through digits_label (its table in flash) beside the class indices
    model = tinycc_ml.load_model(tmp / "m.npz").set_classes(np.arange(10, 20))
    model.save(tmp / "m10.npz")
    np.savez(tmp / "test10.npz", X_test=rows, y_test=labels + 10)
    out10 = tmp / "libs10"
    proc = cli("compile", tmp / "m10.npz", "--target", "avr", "--calibration", tmp / "cal.npz", "--examples",
               tmp / "test10.npz", "--name", "digits", "--arduino", "-o", out10)
    assert proc.returncode == 0, proc.stderr
    console = run_sketch(tmp, out10 / "digits", "digits")
    got = re.findall(r"predicted (\d+), expected (\d+), \d+ us \(label (\d+), expected label (\d+)\)", console)
    assert len(got) == len(rows), console
    assert [int(e) for _, e, _, _ in got] == labels.tolist()  # indices of the labels given
    assert all(int(lp) == 10 + int(p) and int(le) == 10 + int(e) for p, e, lp, le in got)


def test_example_rows_default_to_calibration_rows_with_model_predictions(files):
    tmp, X = files
    np.save(tmp / "cal.npy", X[:600])
    out = tmp / "libs2"
    proc = cli("compile", tmp / "m.npz", "--target", "avr", "--calibration", tmp / "cal.npy", "--name", "d2",
               "--arduino", "-o", out)
    assert proc.returncode == 0, proc.stderr
    sketch = (out / "d2" / "examples" / "d2_demo" / "d2_demo.ino").read_text()
    assert "what the float model predicts" in sketch
    model = tinycc_ml.load_model(tmp / "m.npz")
    want = model.predict(X[:8].astype(np.float32).astype(np.float64))
    stored = re.search(r"expected\[8\] PROGMEM = \{ ([^}]*) \}", sketch).group(1)
    assert [int(v) for v in stored.split(",")] == want.tolist()


def test_arduino_needs_the_avr_target(files):
    tmp, _ = files
    proc = cli("compile", tmp / "m.npz", "--target", "host", "--arduino", "-o", tmp / "nope")
    assert proc.returncode == 2 and "avr" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp / "nope").exists()


def test_example_labels_as_a_label_matrix_are_one_error_line(files):
    """A multilabel data file (a 0/1 y matrix) is fine for `report`; examples need one label per row."""
    tmp, X = files
    np.savez(tmp / "ml.npz", X=X[:20], y=np.eye(4, dtype=np.int64)[np.arange(20) % 4])
    np.save(tmp / "cal2.npy", X[:600])
    proc = cli("compile", tmp / "m.npz", "--target", "avr", "--calibration", tmp / "cal2.npy", "--examples",
               tmp / "ml.npz", "--arduino", "-o", tmp / "libs3")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("tinycc-ml: error:")]
    assert len(errors) == 1 and "example labels: shape (20, 4)" in errors[0]
