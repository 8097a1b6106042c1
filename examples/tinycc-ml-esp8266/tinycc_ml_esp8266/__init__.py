"""A tinycc-ml backend for the ESP8266 (Xtensa LX106, 80 MHz), written as an outside package against the public
API (``tinycc_ml.target``) alone.

The ESP8266 runs code from and reads constants out of its SPI flash through the irom0 window at 0x40200000,
which answers aligned 32-bit loads only: an 8- or 16-bit load from it faults. The backend says so with
``CTarget(word_flash=WordFlash(".irom.text"))``: the model's constants go to the ``.irom.text`` section, 4-byte
aligned and padded to whole words, and every read of one loads its aligned word and takes the element out.

Builds use Debian's xtensa-lx106-elf-gcc with picolibc (for ``<stdint.h>`` and libm); runs use
``qemu-system-xtensa -M lx60-nommu -cpu lx106``, which maps the lx106 core's memories at the ESP8266's
addresses. The measurement firmware is tinycc-ml's portable harness with this package's board file
(support/board_lx106.c: start-up, the ICOUNT instruction counter, simcall output and exit) and linker script
(support/esp8266.ld: code and constants in irom0, data and stack in the 80 KB of user data RAM).
"""

from __future__ import annotations

import os

from tinycc_ml.target import Chip, CTarget, HarnessSimulator, McuBackend, WordFlash, support_file

__all__ = ["ESP8266", "Esp8266Backend", "IROM_SECTION", "SIMULATOR"]

IROM_SECTION = ".irom.text"  # the linker script maps it into the irom0 flash window
# the irom0 window from 64 KB into the flash (where the NONOS SDK links its irom0 segment) to the window's end
FLASH_BASE, FLASH_SIZE = 0x40210000, 0xEC000
RAM_BASE, RAM_SIZE = 0x3FFE8000, 0x14000  # the user data RAM
# Debian's picolibc-xtensa-lx106-elf puts its specs file where that gcc does not look for it: named by path
PICOLIBC_SPECS = next((path for path in ("/usr/lib/xtensa-lx106-elf/picolibc.specs",
                                         "/usr/lib/picolibc/xtensa-lx106-elf/picolibc.specs") if os.path.isfile(path)),
                      "picolibc.specs")
# volatile loads (the word reads) without the memw gcc puts before each by default: flash is not a device
_ARCH = (f"--specs={PICOLIBC_SPECS}", "-mno-serialize-volatile")
LINKER_SCRIPT = support_file("esp8266.ld", package="tinycc_ml_esp8266")

ESP8266 = Chip(
    "ESP8266 (Xtensa LX106)", "lx106", FLASH_SIZE, RAM_SIZE, 80_000_000,
    cflags=(*_ARCH, "-Os", "-ffunction-sections", "-fdata-sections"),
    ldflags=(*_ARCH, "-nostartfiles", "-Wl,--gc-sections", "-T", LINKER_SCRIPT),
    code_estimate=4000, stack_estimate=256, flash_base=FLASH_BASE, ram_base=RAM_BASE)


def _qemu(elf: str) -> list[str]:
    return ["qemu-system-xtensa", "-M", "lx60-nommu", "-cpu", "lx106", "-display", "none", "-monitor", "none",
            "-serial", "none", "-semihosting", "-icount", "shift=0", "-kernel", elf]


SIMULATOR = HarnessSimulator(
    target="esp8266", unit="instructions", chip=ESP8266,
    compiler="xtensa-lx106-elf-gcc", size_tool="xtensa-lx106-elf-size", nm_tool="xtensa-lx106-elf-nm",
    board_sources=(support_file("board_lx106.c", package="tinycc_ml_esp8266"),), command=_qemu,
    tools=("qemu-system-xtensa",),
    install_hint="apt-get install -y --no-install-recommends gcc-xtensa-lx106 binutils-xtensa-lx106 "
                 "picolibc-xtensa-lx106-elf qemu-system-misc",
    batch_bytes=16 * 1024)  # the rows live in the 80 KB of data RAM with the arenas and the stack


class Esp8266Backend(McuBackend):
    name = "esp8266"
    description = ("ESP8266 (Xtensa LX106, 80 MHz): constants in the irom0 flash window, read as aligned words; "
                   "qemu-system-xtensa-runnable")
    chip = ESP8266
    simulator = "esp8266"
    # integer builds only: Debian's lx106 libgcc leaves the soft-float routines (__addsf3, __mulsf3, ...) to the
    # ESP8266's mask ROM, which the SDK links by address and QEMU does not have
    precisions = ("int16", "int8")

    def c_target(self, graph) -> CTarget:
        return CTarget("esp8266", word_flash=WordFlash(IROM_SECTION))
