"""`compile --project`: standalone firmware projects built with their own Makefile (no tinycc-ml on the
path) and run with `make run` in simavr (ATmega328P) and QEMU -M microbit (nRF51822), mps2-an386
(Cortex-M4F) and mps2-an505 (Cortex-M33); the printed
classes equal the host build's on the same stored rows, the expected classes are the given labels."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tests.conftest import require_target, require_tools
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.protonn import init_protonn

SIMULATOR = {"avr": "simavr", "cortex-m0": "qemu-system-arm", "cortex-m4": "qemu-system-arm",
             "cortex-m33": "qemu-system-arm"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("project")
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp / "m.npz")
    np.savez(tmp / "cal.npz", X_train=X[:600], y_train=y[:600])
    np.savez(tmp / "test.npz", X_test=X[1200:1210], y_test=y[1200:1210])
    return tmp


def make(folder, *args, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the project needs no tinycc-ml
    env["EXTRA_CFLAGS"] = "-Werror"  # the project's own tests build warning-free; users' Makefiles do not say -Werror
    run = subprocess.run(["make", "-s", *args], cwd=folder, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return ANSI.sub("", run.stdout + run.stderr)  # simavr prints the UART on stderr


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4", "cortex-m33"])
@pytest.mark.parametrize("precision", ["int16", "float"])
def test_project_builds_and_prints_the_host_predictions(data, tmp_path, target, precision):
    require_target(target)
    require_tools("make", SIMULATOR[target])
    out = tmp_path / "fw"
    args = ["compile", data / "m.npz", "--target", target, "--examples", data / "test.npz", "--name", "digits",
            "--project", "-o", out]
    if precision != "float":
        args += ["--calibration", data / "cal.npz"]
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    test = np.load(data / "test.npz")
    rows, labels = test["X_test"][:8].astype(np.float32), test["y_test"][:8]
    if precision == "float":
        host = tinycc_ml.compile(data / "m.npz", name="digits").load()
        want = [host.predict(rows).tolist()]
    else:
        host = tinycc_ml.compile(data / "m.npz", name="digits", precision="int16",
                                 calibration=np.load(data / "cal.npz")["X_train"]).load()
        shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}",
                                                     (out / "digits.h").read_text()).group(1).split(",")])
        want = [host.run_raw(quantise(rows, shifts, 16))[1].tolist()]
    assert "-Werror" not in (out / "Makefile").read_text()  # users keep their own warning policy
    variants = [()] if precision == "float" else [(), ("FLOAT_INPUT=1",), ()]
    elf, stamps = out / "firmware.elf", []
    for variant in variants:  # a changed variable rebuilds (build.flags); an unchanged one does not
        make(out, *variant)
        stamps.append(elf.stat().st_mtime_ns)
        make(out, *variant)
        assert elf.stat().st_mtime_ns == stamps[-1], variant  # up to date now: not rebuilt
        text = make(out, "run", *variant)
        got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", text)
        assert [int(r) for r, *_ in got] == list(range(8)), text
        assert [int(p) for _, p, _, _ in got] in want, (variant, text)
        assert [int(e) for _, _, e, _ in got] == labels.tolist()
        correct = sum(int(p) == int(e) for _, p, e, _ in got)
        assert f"correct {correct}/8" in text
        # the predicted class's probability (ProtoNN's rule), printed to three decimals
        printed = [float(v) for v in re.findall(r"row \d+: [^\n]* us[^\n]*, p (\d\.\d{3})", text)]
        proba = host.predict_proba(rows)
        chosen = proba[np.arange(8), [int(p) for _, p, _, _ in got]]
        # the host build of the same precision computes the same probabilities: equal to the printed rounding
        assert len(printed) == 8 and np.max(np.abs(np.array(printed) - chosen)) <= 0.0006, (printed, chosen)
    assert len(set(stamps)) == len(stamps)  # each change of FLOAT_INPUT rebuilt firmware.elf


def test_project_refuses_the_host_target_and_clashing_names(data, tmp_path):
    for extra, word in ((["--target", "host"], "--project"), (["--target", "avr", "--name", "main"], "main")):
        run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--project",
                              "--calibration", str(data / "cal.npz"), *extra, "-o", str(tmp_path / "p")],
                             capture_output=True, text=True)
        errors = [ln for ln in run.stderr.splitlines() if ln.startswith("tinycc-ml: error:")]
        assert run.returncode == 2 and len(errors) == 1 and word in errors[0], run.stderr
        assert not (tmp_path / "p").exists()
    # a float build has no calibration rows to store: the examples must be given
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--project",
                          "--target", "avr", "-o", str(tmp_path / "p")], capture_output=True, text=True)
    assert run.returncode == 2 and "--examples" in run.stderr and not (tmp_path / "p").exists()
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--examples",
                          str(data / "test.npz"), "-o", str(tmp_path / "p")], capture_output=True, text=True)
    assert run.returncode == 2 and "--examples" in run.stderr and not (tmp_path / "p").exists()


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_project_prints_string_labels(data, tmp_path, target):
    """A model with string class labels: the demo prints them through digits_label (on the AVR from flash),
    and --examples takes the labels the model was trained on."""
    require_target(target)
    require_tools("make", SIMULATOR[target])
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    tinycc_ml.load_model(data / "m.npz").set_classes(names).save(tmp_path / "named.npz")
    test = np.load(data / "test.npz")
    np.savez(tmp_path / "test.npz", X_test=test["X_test"], y_test=names[test["y_test"]])
    out = tmp_path / "fw"
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(tmp_path / "named.npz"), "--target",
                          target, "--calibration", str(data / "cal.npz"), "--examples", str(tmp_path / "test.npz"),
                          "--name", "digits", "--project", "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = make(out, "run", "EXTRA_CFLAGS=-Werror")
    got = re.findall(r"predicted (\d+), expected (\d+), \d+ us \(label (\w+), expected label (\w+)\)", text)
    assert len(got) == 8, text
    for predicted, expected, label, expected_label in got:
        assert (label, expected_label) == (names[int(predicted)], names[int(expected)])
    assert [int(e) for _, e, _, _ in got] == test["y_test"][:8].tolist()


def test_stm32f405_board_project_runs_in_qemu_netduinoplus2(data, tmp_path):
    """--board stm32f405: the project for the real part (its flash at 0x08000000, USART1, SysTick) links, runs in
    QEMU's model of the STM32F405 and prints the host build's classes."""
    require_target("cortex-m4")
    require_tools("make", "qemu-system-arm")
    out = tmp_path / "fw"
    args = ["compile", data / "m.npz", "--target", "cortex-m4", "--board", "stm32f405", "--examples",
            data / "test.npz", "--calibration", data / "cal.npz", "--name", "digits", "--project", "-o", out]
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "STM32F405" in run.stdout and "0x08000000" in (out / "stm32f405.ld").read_text()
    test = np.load(data / "test.npz")
    rows, labels = test["X_test"][:8].astype(np.float32), test["y_test"][:8]
    host = tinycc_ml.compile(data / "m.npz", name="digits", precision="int16",
                             calibration=np.load(data / "cal.npz")["X_train"]).load()
    shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}",
                                                 (out / "digits.h").read_text()).group(1).split(",")])
    make(out)
    text = make(out, "run")
    got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", text)
    assert [int(p) for _, p, _, _ in got] == host.run_raw(quantise(rows, shifts, 16))[1].tolist(), text
    assert [int(e) for _, _, e, _ in got] == labels.tolist()
    symbols = subprocess.run(["arm-none-eabi-nm", str(out / "firmware.elf")], capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"^08000000 \w vectors$", symbols, re.M), symbols[:2000]


def test_nrf52840_board_project_links_for_the_part(data, tmp_path):
    """--board nrf52840: vector table at 0, RAM at 0x20000000, the FPU build; `make run` says how to flash it
    (no QEMU machine models the part) and fails."""
    require_target("cortex-m4")
    require_tools("make")
    out = tmp_path / "fw"
    tinycc_ml.compile(data / "m.npz", target="cortex-m4", board="nrf52840", precision="int16",
                      calibration=np.load(data / "cal.npz")["X_train"], layout="project",
                      examples=np.load(data / "test.npz")["X_test"], name="digits", out_dir=out)
    make(out)
    symbols = subprocess.run(["arm-none-eabi-nm", str(out / "firmware.elf")], capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"^00000000 \w vectors$", symbols, re.M)
    assert re.search(r"^20000\w{3} \w __data_start$", symbols, re.M)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(["make", "-s", "run"], cwd=out, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "nrfjprog" in run.stdout


def test_a_board_holds_builds_to_its_chip(data, capsys):
    """A model that fits the MPS2 image's 4 MB is refused for the STM32F405's 1 MB, naming the part; an unknown
    board, or a board for the host, is one line naming what there is."""
    from tinycc_ml.cli import main as cli_main
    from tinycc_ml.errors import DataError, FitError
    from tinycc_ml.models.linear import LinearModel

    wide = LinearModel(np.random.default_rng(0).normal(size=(10, 60_000)))  # 1.2 MB of int16 weights
    with pytest.raises(FitError, match="STM32F405"):
        tinycc_ml.compile(wide, target="cortex-m4", board="stm32f405", precision="float")
    with pytest.raises(DataError, match="board 'esp32' is not one of target cortex-m4's boards .*stm32f405"):
        tinycc_ml.compile(data / "m.npz", target="cortex-m4", board="esp32")
    with pytest.raises(DataError, match="target host has no boards"):
        tinycc_ml.compile(data / "m.npz", board="uno")
    assert cli_main(["compile", str(data / "m.npz"), "--target", "avr", "--board", "nano", "-o", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "board 'nano' is not one of target avr's boards (uno, atmega1284p, mega2560)" in err[0]
    assert cli_main(["targets"]) == 0
    assert "boards: mps2-an386, stm32f405, nrf52840" in capsys.readouterr().out


KWS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "mlperf-tiny", "kws_ref_model.tflite")


def test_tflite_project_stores_quantised_rows_and_compares_with_the_int8_network(tmp_path):
    """A byte-exact int8 KWS build on the STM32F405: real-valued example rows are stored quantised with the input
    tensor's scale and zero point (2.51 is 87, not 3), the expected classes are the int8 network's (the C's own
    reference: every row agrees), FLOAT_INPUT=1 links and quantises them on the chip to the same classes, and the
    time is the timer's real rate under QEMU (SysTick at 168 MHz, its 24-bit wraps counted), with the clock said."""
    require_target("cortex-m4")
    require_tools("make", "qemu-system-arm")
    model = tinycc_ml.load_model(KWS)
    x_type = model.graph.type(model.input_name).dtype
    scale, zero = x_type.qscales[0], x_type.zero_point
    rows = np.random.default_rng(3).normal(size=(8, model.input_dim)) * 10
    rows[0, 0] = 2.51
    np.savez(tmp_path / "rows.npz", X_test=rows)
    out = tmp_path / "fw"
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", KWS, "--target", "cortex-m4", "--board",
                          "stm32f405", "--project", "--examples", str(tmp_path / "rows.npz"), "-o", str(out)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr
    examples = (out / "examples.h").read_text()
    stored = examples[examples.index("#else"):]
    assert stored.split("{", 2)[2].split(",")[0].strip() == str(round(2.51 / scale) + zero) == "87"
    assert "int8 network" in examples.splitlines()[0]
    want = model.run_int8(model.quantise_input(rows.astype(np.float32)).reshape(8, *model.input_shape))
    want = np.argmax(want.reshape(8, -1), axis=1).tolist()
    header = (out / "kws_ref_model_input.h").read_text()
    assert "INPUT_SHIFTS" not in header and f"round(x[k] / {scale!r})" in header
    for variant in ((), ("FLOAT_INPUT=1",)):
        make(out, *variant)
        text = make(out, "run", *variant, timeout=300)
        got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", text)
        assert [int(p) for _, p, _, _ in got] == want and [int(e) for _, _, e, _ in got] == want, text
        assert "correct 8/8" in text
        assert "time: SysTick at 168 MHz" in text
        # about 3.7 M instructions at 32 ns each (-icount shift=5): beyond the 100 ms the 24-bit SysTick holds
        assert all(100_000 < int(us) < 160_000 for *_, us in got), text


@pytest.mark.parametrize("board, mcu", [("atmega1284p", "atmega1284p"), ("mega2560", "atmega2560")])
def test_avr_boards_of_other_chips_build_for_their_chip(data, tmp_path, board, mcu):
    """--board atmega1284p / mega2560 on target avr: the build is held to that chip (its 16 / 8 KB of RAM, not the
    ATmega328P's 2 KB), the project compiles for it (-mmcu) and, run in simavr's model of it, prints the host build's
    classes with the time from Timer1 (its overflows counted)."""
    require_target("avr")
    require_tools("make", "simavr")
    out = tmp_path / "fw"
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--target", "avr",
                          "--board", board, "--calibration", str(data / "cal.npz"), "--examples",
                          str(data / "test.npz"), "--name", "digits", "--project", "-o", str(out)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr
    assert f"fits the {mcu.replace('atmega', 'ATmega').replace('p', 'P')}" in run.stdout, run.stdout
    assert f"-mmcu={mcu}" in (out / "Makefile").read_text()
    rows = np.load(data / "test.npz")["X_test"][:8].astype(np.float32)
    host = tinycc_ml.compile(data / "m.npz", name="digits", precision="int16",
                             calibration=np.load(data / "cal.npz")["X_train"]).load()
    shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}",
                                                 (out / "digits.h").read_text()).group(1).split(",")])
    text = make(out, "run")
    got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", text)
    assert [int(p) for _, p, _, _ in got] == host.run_raw(quantise(rows, shifts, 16))[1].tolist(), text
    assert "time: Timer1 at 16 MHz / 64" in text
    # a model needing more than the ATmega328P's RAM fits the bigger chip's
    from tinycc_ml.models.linear import LinearModel

    wide = LinearModel(np.random.default_rng(0).normal(size=(600, 4)))  # 600 int16 scores: 1.2 KB + 2.4 KB
    with pytest.raises(tinycc_ml.errors.FitError):
        tinycc_ml.compile(wide, target="avr", precision="float")
    assert tinycc_ml.compile(wide, target="avr", board=board, precision="float").report["fit"]["chip"] == \
        mcu.replace("atmega", "ATmega").replace("p", "P")


def test_avr_board_time_counts_timer1_overflows(tmp_path):
    """The AVR boards' board.c: Timer1 wraps every 262 ms, its overflows are counted, so a 700 ms interval reads
    700,000 us (simavr, cycle exact), not its remainder after the wraps; board_print_clock says the timer."""
    require_target("avr")
    require_tools("simavr")
    from tests.conftest import simavr_uart_lines
    from tinycc_ml.avr.board import AVR_BOARD
    from tinycc_ml.buildsys.project import BOARD_H

    (tmp_path / "board.h").write_text(BOARD_H)
    (tmp_path / "board.c").write_text(AVR_BOARD.board_c)
    (tmp_path / "main.c").write_text("""#include <stdint.h>
#include <util/delay.h>
#include "board.h"
static void print_uint(uint32_t v)
{
    char text[11];
    char *p = text + sizeof text - 1;
    *p = 0;
    do {
        *--p = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    board_print(p);
}
int main(void)
{
    board_init();
    board_print_clock();
    const uint32_t start = board_time();
    _delay_ms(700);
    const uint32_t us = board_us_since(start);
    board_print("\\r\\nelapsed ");
    print_uint(us);
    board_print(" us\\r\\n");
    board_exit(0);
    return 0;
}
""")
    subprocess.run(["avr-gcc", "-mmcu=atmega328p", "-DF_CPU=16000000UL", "-Os", "-std=c99", "-Wall", "-Wextra",
                    "-Werror", str(tmp_path / "main.c"), str(tmp_path / "board.c"), "-o", str(tmp_path / "t.elf")],
                   check=True)
    lines = simavr_uart_lines(tmp_path / "t.elf", lambda lines: any("elapsed" in line for line in lines))
    text = "".join(lines)
    assert "Timer1 at 16 MHz / 64" in text, text
    board_us = int(re.search(r"elapsed (\d+) us", text).group(1))  # the board's own timer in simavr: simulated
    assert 699_000 <= board_us <= 701_000, text
