"""TinyccML.cmake with the real CMake: a host executable built against tinycc_ml_add_model, run; a
second build does nothing; a changed calibration, model or option reruns the compile step; static
libraries for AVR and Cortex-M0 through the shipped toolchain files; bad arguments fail at configure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tests.conftest import require_target, require_tools, simavr_uart_lines
from tinycc_ml import cli
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.protonn import init_protonn

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
GENERATORS = ["Unix Makefiles", "Ninja"]

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.20)
project(demo C)
list(APPEND CMAKE_MODULE_PATH "{cmake_dir}")
include(TinyccML)
tinycc_ml_add_model(digits MODEL model.npz CALIBRATION cal.npz {extra})
add_executable(app main.c)
target_link_libraries(app PRIVATE digits)
"""

# reads one quantised row from stdin, prints the class
MAIN_C = """#include <stdio.h>
#include "digits.h"
int main(void)
{
    int16_t x[DIGITS_INPUT_DIM];
    for (int i = 0; i < DIGITS_INPUT_DIM; ++i) {
        int v;
        if (scanf("%d", &v) != 1) return 1;
        x[i] = (int16_t)v;
    }
    printf("%d\\n", digits_predict(x));
    return 0;
}
"""


def cmake_dir() -> str:
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "cmake-dir"], env=ENV, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    folder = run.stdout.strip()
    assert (Path(folder) / "TinyccML.cmake").is_file()
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    require_tools("cmake", "make")
    tmp = tmp_path_factory.mktemp("cmake-data")
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp / "model.npz")
    init_protonn(X[:600], y[:600], projection_dim=6, prototypes_per_class=2, random_state=1).save(tmp / "model2.npz")
    np.savez(tmp / "cal.npz", X_train=X[:600])
    np.savez(tmp / "cal2.npz", X_train=X[:300] * 1.5)
    return tmp, X[600:620]


def project(tmp: Path, data_dir: Path, extra: str = "") -> Path:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    for name in ("model.npz", "cal.npz"):
        shutil.copy(data_dir / name, src / name)
    (src / "CMakeLists.txt").write_text(CMAKELISTS.format(cmake_dir=cmake_dir(), extra=extra))
    (src / "main.c").write_text(MAIN_C)
    return src


def configure(src: Path, build: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["cmake", "-S", str(src), "-B", str(build), *args,
                           f"-DTINYCC_ML_COMMAND={sys.executable};-m;tinycc_ml"],
                          env=ENV, capture_output=True, text=True)


def build(build_dir: Path) -> str:
    run = subprocess.run(["cmake", "--build", str(build_dir), "--verbose"], env=ENV, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def step_ran(log: str) -> bool:
    return "-m tinycc_ml -q compile" in log


def predicted(build_dir: Path, rows: np.ndarray) -> list[int]:
    header = (build_dir / "tinycc_ml" / "digits" / "digits.h").read_text()
    import re

    shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}", header).group(1).split(",")])
    out = []
    for row in quantise(rows, shifts, 16):
        run = subprocess.run([str(build_dir / "app")], input=" ".join(map(str, row.astype(int))),
                             capture_output=True, text=True)
        assert run.returncode == 0
        out.append(int(run.stdout))
    return out


@pytest.mark.parametrize("generator", GENERATORS)
def test_host_executable_rebuilds_only_when_inputs_change(data, tmp_path, generator):
    require_target("host")
    require_tools("ninja" if generator == "Ninja" else "make")
    data_dir, rows = data
    src, bdir = project(tmp_path, data_dir), tmp_path / "build"
    run = configure(src, bdir, "-G", generator)
    assert run.returncode == 0, run.stderr
    log = build(bdir)
    assert step_ran(log)
    expected = tinycc_ml.compile(src / "model.npz", name="digits", precision="int16",
                                 calibration=np.load(src / "cal.npz")["X_train"]).load().predict(rows)
    assert predicted(bdir, rows) == expected.tolist()

    stamp = bdir / "tinycc_ml" / "digits" / "digits.json"
    manifest = json.loads(stamp.read_text())
    assert manifest["precision"] == "int16" and manifest["target"] == "host"
    source_mtime, stamp_mtime = (bdir / "tinycc_ml/digits/digits.c").stat().st_mtime, stamp.stat().st_mtime
    log = build(bdir)  # nothing changed: nothing runs
    assert not step_ran(log) and stamp.stat().st_mtime == stamp_mtime
    assert (bdir / "tinycc_ml/digits/digits.c").stat().st_mtime == source_mtime

    def newer_than_stamp(path):
        # a real edit: now, after the stamp (a time stamp in the future would still be newer than the
        # outputs of a step that finishes within it, and the step would rightly run again)
        while time.time() <= stamp.stat().st_mtime + 0.01:
            time.sleep(0.05)
        os.utime(path, None)

    shutil.copy(data_dir / "cal2.npz", src / "cal.npz")  # new calibration: new scales
    newer_than_stamp(src / "cal.npz")
    assert step_ran(build(bdir))
    assert not step_ran(build(bdir))

    shutil.copy(data_dir / "model2.npz", src / "model.npz")  # a new model
    newer_than_stamp(src / "model.npz")
    assert step_ran(build(bdir))
    expected = tinycc_ml.compile(src / "model.npz", name="digits", precision="int16",
                                 calibration=np.load(src / "cal.npz")["X_train"]).load().predict(rows)
    assert predicted(bdir, rows) == expected.tolist()
    assert not step_ran(build(bdir))

    # an option changes: reconfigure with int8, the step reruns and the library follows
    (src / "CMakeLists.txt").write_text(CMAKELISTS.format(cmake_dir=cmake_dir(), extra="PRECISION int8"))
    assert step_ran(build(bdir))
    assert "Precision: int8." in (bdir / "tinycc_ml/digits/digits.h").read_text()
    assert not step_ran(build(bdir))


@pytest.mark.parametrize("target, nm", [("avr", "avr-nm"), ("cortex-m0", "arm-none-eabi-nm"),
                                       ("cortex-m4", "arm-none-eabi-nm")])
def test_cross_static_library_with_the_shipped_toolchain_file(data, tmp_path, target, nm):
    require_target(target)
    data_dir, _ = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    shutil.copy(data_dir / "cal.npz", src / "cal.npz")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(cross C)\n"
        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
        f"tinycc_ml_add_model(kws MODEL model.npz TARGET {target} CALIBRATION cal.npz PRECISION int8)\n")
    run = configure(src, tmp_path / "b", f"-DCMAKE_TOOLCHAIN_FILE={cmake_dir()}/tinycc-ml-{target}.cmake")
    assert run.returncode == 0, run.stdout + run.stderr
    build(tmp_path / "b")
    symbols = subprocess.run([nm, str(tmp_path / "b" / "libkws.a")], capture_output=True, text=True).stdout
    assert " T kws_predict" in symbols
    assert f"for target {target}" in (tmp_path / "b/tinycc_ml/kws/kws.h").read_text()
    assert not step_ran(build(tmp_path / "b"))


@pytest.mark.parametrize("call, words", [
    ("tinycc_ml_add_model(m MODEL model.npz PRECISON int16)", ["unknown argument", "PRECISON"]),
    ("tinycc_ml_add_model(m MODEL nowhere.npz)", ["MODEL", "nowhere.npz", "does not exist"]),
    ("tinycc_ml_add_model(m MODEL model.npz CALIBRATION gone.npz)", ["CALIBRATION", "gone.npz"]),
    ("tinycc_ml_add_model(m)", ["MODEL <path> is required"]),
])
def test_bad_arguments_fail_at_configure_time(data, tmp_path, call, words):
    data_dir, _ = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(bad C)\n"
                                        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
                                        f"{call}\n")
    run = configure(src, tmp_path / "b")
    assert run.returncode != 0
    text = " ".join(run.stderr.split())
    for word in words:
        assert word in text, run.stderr


def test_cmake_dir_command(capsys):
    assert cli.main(["cmake-dir"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert {"TinyccML.cmake", "tinycc-ml-avr.cmake", "tinycc-ml-cortex-m0.cmake"} <= {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("call, folder, words", [
    ("tinycc_ml_add_model(m MODEL model.npz NAME static)", "b", ["NAME static", "C keyword"]),
    ("tinycc_ml_add_model(m MODEL model.npz NAME stdint)", "b", ["NAME stdint", "<stdint.h>"]),
    ("tinycc_ml_add_model(Math MODEL model.npz)", "b", ["NAME Math", "<math.h>"]),
    ('tinycc_ml_add_model(m MODEL "a\\;b.npz")', "b", ["b.npz", "a path with ';'"]),
    ("tinycc_ml_add_model(m MODEL model.npz)", "b#1", ["b#1", "'#'"]),
])
def test_names_and_paths_fail_at_configure_time(data, tmp_path, call, folder, words):
    """Issue 25 item 13: a keyword or standard header's name, '#' in the binary folder and ';' in a path
    failed only when the build ran, or with CMake's own errors; the module now says so at configure time."""
    data_dir, _ = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    shutil.copy(data_dir / "model.npz", src / "a;b.npz")
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(bad C)\n"
                                        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
                                        f"{call}\n")
    run = configure(src, tmp_path / folder)
    assert run.returncode != 0
    text = " ".join(run.stderr.split())
    for word in ["tinycc_ml_add_model", *words]:
        assert word in text, run.stderr


def test_cmake_name_lists_match_the_compiler():
    from tinycc_ml.codegen.emitter import C_KEYWORDS, SYSTEM_HEADERS

    text = (Path(cmake_dir()) / "TinyccML.cmake").read_text()
    for variable, names in (("_c_keywords", C_KEYWORDS), ("_system_headers", SYSTEM_HEADERS)):
        listed = text.split(f"set({variable} ")[1].split(")")[0].split()
        assert set(listed) == set(names), variable


FIRMWARE_MAIN = """#include <stdint.h>
#include "kws.h"
static const int16_t row[KWS_INPUT_DIM] = {{ {row} }};
int main(void)
{{
    /* the class as the exit code: SYS_EXIT_EXTENDED (0x20) through ARM semihosting */
    uint32_t block[2] = {{0x20026u, (uint32_t)kws_predict(row)}};
    register uint32_t r0 __asm__("r0") = 0x20;
    register uint32_t *r1 __asm__("r1") = block;
    __asm__ __volatile__("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {{
    }}
}}
"""


def test_cortex_m0_firmware_gets_startup_and_linker_script_from_the_module(data, tmp_path):
    """tinycc_ml_add_firmware with the shipped toolchain file links a Cortex-M0 executable (no "cannot find
    entry symbol _start"): run in QEMU's micro:bit, it exits with the class the host build predicts."""
    require_target("cortex-m0")
    require_tools("ninja", "qemu-system-arm")
    data_dir, rows = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    shutil.copy(data_dir / "cal.npz", src / "cal.npz")
    host = tinycc_ml.compile(src / "model.npz", name="kws", precision="int16",
                             calibration=np.load(src / "cal.npz")["X_train"])
    row = quantise(rows[3:4], host.output.input_scale, 16)[0]
    (src / "main.c").write_text(FIRMWARE_MAIN.format(row=", ".join(str(int(v)) for v in row)))
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(fw C)\n"
        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
        "tinycc_ml_add_model(kws MODEL model.npz TARGET cortex-m0 CALIBRATION cal.npz)\n"
        "tinycc_ml_add_firmware(fw main.c)\ntarget_link_libraries(fw PRIVATE kws)\n")
    run = configure(src, tmp_path / "b", "-G", "Ninja",
                    f"-DCMAKE_TOOLCHAIN_FILE={cmake_dir()}/tinycc-ml-cortex-m0.cmake")
    assert run.returncode == 0, run.stdout + run.stderr
    build(tmp_path / "b")
    elf = tmp_path / "b" / "fw"
    header = subprocess.run(["arm-none-eabi-readelf", "-h", "-s", str(elf)], capture_output=True, text=True).stdout
    entry = re.search(r"Entry point address:\s+0x([0-9a-f]+)", header).group(1)
    handler = re.search(r"([0-9a-f]{8})\s+\d+\s+FUNC\s+GLOBAL\s+\w+\s+\d+\s+reset_handler", header).group(1)
    assert int(entry, 16) == int(handler, 16)
    qemu = subprocess.run(["qemu-system-arm", "-M", "microbit", "-display", "none", "-monitor", "none", "-serial",
                           "none", "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                          capture_output=True, text=True, timeout=60)
    assert qemu.returncode == int(host.load().predict_index(rows[3:4])[0]), qemu.stderr


@pytest.mark.parametrize("target, toolchain", [("avr", "tinycc-ml-avr.cmake"),
                                               ("cortex-m0", "tinycc-ml-cortex-m0.cmake")])
def test_a_host_compiler_with_a_chip_target_is_refused_at_configure_time(data, tmp_path, target, toolchain):
    data_dir, _ = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(host C)\n"
                                        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
                                        f"tinycc_ml_add_model(m MODEL model.npz TARGET {target})\n")
    run = configure(src, tmp_path / "b")
    assert run.returncode != 0
    text = " ".join(run.stderr.split())
    for word in (f"TARGET {target} needs its cross compiler", toolchain, "-DCMAKE_TOOLCHAIN_FILE="):
        assert word in text, run.stderr
    assert not (tmp_path / "b" / "tinycc_ml" / "m" / "m.c").exists()  # refused before anything was compiled


AVR_FIRMWARE_MAIN = """#include <stdint.h>
#include <stdio.h>
#include "kws.h"
static const int16_t rows[3][KWS_INPUT_DIM] = {{ {rows} }};
int main(void)
{{
    for (int r = 0; r < 3; ++r)
        printf("row %d: class %d\\n", r, kws_predict(rows[r]));
    printf("done\\n");
    for (;;) {{
    }}
}}
"""


def test_avr_firmware_prints_on_the_uart_with_nothing_but_printf(data, tmp_path):
    """tinycc_ml_add_firmware with the AVR toolchain file adds the UART set-up (avr_uart.c, run before main):
    the user's main only calls printf, and in simavr the ATmega328P prints the host build's classes."""
    require_target("avr")
    require_tools("ninja", "simavr")
    data_dir, rows = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    shutil.copy(data_dir / "cal.npz", src / "cal.npz")
    host = tinycc_ml.compile(src / "model.npz", name="kws", precision="int16",
                             calibration=np.load(src / "cal.npz")["X_train"])
    q = quantise(rows[:3], host.output.input_scale, 16)
    (src / "main.c").write_text(AVR_FIRMWARE_MAIN.format(
        rows=", ".join("{" + ", ".join(str(int(v)) for v in row) + "}" for row in q)))
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(fw C)\n"
        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
        "tinycc_ml_add_model(kws MODEL model.npz TARGET avr CALIBRATION cal.npz)\n"
        "tinycc_ml_add_firmware(fw main.c)\ntarget_link_libraries(fw PRIVATE kws)\n")
    run = configure(src, tmp_path / "b", "-G", "Ninja", f"-DCMAKE_TOOLCHAIN_FILE={cmake_dir()}/tinycc-ml-avr.cmake")
    assert run.returncode == 0, run.stdout + run.stderr
    build(tmp_path / "b")
    lines = simavr_uart_lines(tmp_path / "b" / "fw", lambda lines: any("done" in line for line in lines))
    got = [int(c) for c in re.findall(r"row \d: class (\d+)", "".join(lines))]
    assert got == host.load().run_raw(q)[1].tolist(), lines


M0_PRINTF_MAIN = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "kws.h"
static const int16_t rows[3][KWS_INPUT_DIM] = {{ {rows} }};
int main(void)
{{
    for (int r = 0; r < 3; ++r)
        printf("row %d: class %d\\n", r, kws_predict(rows[r]));
    printf("done\\n");
    exit(0);
}}
"""


def test_cortex_m0_firmware_prints_on_the_uart_with_nothing_but_printf(data, tmp_path):
    """tinycc_ml_add_firmware with the Cortex-M0 toolchain file adds the UART and newlib's system calls
    (nrf51_uart.c: _write, _sbrk, _exit...) as the AVR's adds its UART: a main that only calls printf and exit
    links (no undefined _write or _sbrk) and in QEMU's micro:bit prints the host build's classes."""
    require_target("cortex-m0")
    require_tools("ninja", "qemu-system-arm")
    data_dir, rows = data
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(data_dir / "model.npz", src / "model.npz")
    shutil.copy(data_dir / "cal.npz", src / "cal.npz")
    host = tinycc_ml.compile(src / "model.npz", name="kws", precision="int16",
                             calibration=np.load(src / "cal.npz")["X_train"])
    q = quantise(rows[:3], host.output.input_scale, 16)
    (src / "main.c").write_text(M0_PRINTF_MAIN.format(
        rows=", ".join("{" + ", ".join(str(int(v)) for v in row) + "}" for row in q)))
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(fw C)\n"
        f'list(APPEND CMAKE_MODULE_PATH "{cmake_dir()}")\ninclude(TinyccML)\n'
        "tinycc_ml_add_model(kws MODEL model.npz TARGET cortex-m0 CALIBRATION cal.npz)\n"
        "tinycc_ml_add_firmware(fw main.c)\ntarget_compile_options(fw PRIVATE -Wall -Wextra -Werror)\n"
        "target_link_libraries(fw PRIVATE kws)\n")
    run = configure(src, tmp_path / "b", "-G", "Ninja",
                    f"-DCMAKE_TOOLCHAIN_FILE={cmake_dir()}/tinycc-ml-cortex-m0.cmake")
    assert run.returncode == 0, run.stdout + run.stderr
    build(tmp_path / "b")
    qemu = subprocess.run(["qemu-system-arm", "-M", "microbit", "-display", "none", "-monitor", "none", "-serial",
                           "stdio", "-semihosting-config", "enable=on,target=native", "-kernel",
                           str(tmp_path / "b" / "fw")], capture_output=True, text=True, timeout=60)
    assert qemu.returncode == 0, qemu.stdout + qemu.stderr
    got = [int(c) for c in re.findall(r"row \d: class (\d+)", qemu.stdout)]
    assert got == host.load().run_raw(q)[1].tolist() and "done" in qemu.stdout, qemu.stdout
