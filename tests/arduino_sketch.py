"""An Arduino library's example sketch built for the Uno with Debian's arduino-mk and the real Arduino core
(the tests' and benchmarks' one recipe)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ARDUINO_MK = Path("/usr/share/arduino/Arduino.mk")


def build_uno_sketch(libraries: Path, lib_name: str, folder: Path) -> tuple[int, int, Path]:
    """Build ``libraries/lib_name``'s example sketch in ``folder`` (created): (flash, static RAM, ELF)."""
    folder.mkdir(parents=True)
    demo = libraries / lib_name / "examples" / f"{lib_name}_demo" / f"{lib_name}_demo.ino"
    (folder / "sketch.ino").write_text(demo.read_text())
    (folder / "Makefile").write_text("\n".join([
        f"ARDUINO_DIR = {ARDUINO_MK.parent}", "BOARD_TAG = uno", f"ARDUINO_LIBS = {lib_name}",
        f"USER_LIB_PATH = {libraries}", "CPPFLAGS += -DDECIMAL_DIG=17", f"include {ARDUINO_MK}", ""]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(["make", "-s"], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"arduino-mk failed in {folder}:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    elf = next(folder.glob("build-*/*.elf"))
    size = subprocess.run(["avr-size", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = map(int, size.splitlines()[1].split()[:3])
    return text + data, data + bss, elf
