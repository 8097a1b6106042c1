"""Facts about the microcontrollers tinycc-ml targets, in one place: memory sizes, clock, the
cross-compiler flags of their builds, and the estimates the fit check uses without a toolchain.
Backends (fit check) and the simulators (firmware builds, memory maps) read them from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    name: str  # shown in messages and reports
    mcu: str  # the compiler's name for it (-mmcu= / -mcpu=)
    flash: int  # bytes
    ram: int  # bytes
    clock_hz: int
    cflags: tuple[str, ...]  # compiling model and harness for the measurement firmware
    ldflags: tuple[str, ...]
    code_estimate: int  # bytes of code assumed when no cross compiler can measure
    stack_estimate: int  # bytes of stack assumed for the model's own calls
    flash_base: int = 0
    ram_base: int = 0


_SECTIONS = ("-Os", "-ffunction-sections", "-fdata-sections")

ATMEGA328P = Chip("ATmega328P", "atmega328p", 32 * 1024, 2 * 1024, 16_000_000,
                  ("-mmcu=atmega328p", "-DF_CPU=16000000UL", *_SECTIONS),
                  ("-mmcu=atmega328p", "-Wl,--gc-sections"),
                  code_estimate=2500, stack_estimate=128)  # kernels push up to 22 bytes

# Same AVR core with 128 KB flash / 16 KB RAM: comparison builds (e.g. float) that do not fit the 328P.
ATMEGA1284P = Chip("ATmega1284P", "atmega1284p", 128 * 1024, 16 * 1024, 16_000_000,
                   ("-mmcu=atmega1284p", "-DF_CPU=16000000UL", *_SECTIONS),
                   ("-mmcu=atmega1284p", "-Wl,--gc-sections"),
                   code_estimate=2500, stack_estimate=64)

NRF51822 = Chip("nRF51822 (Cortex-M0)", "cortex-m0", 256 * 1024, 16 * 1024, 16_000_000,
                ("-mcpu=cortex-m0", "-mthumb", *_SECTIONS, "-fno-tree-loop-distribute-patterns"),
                ("-mcpu=cortex-m0", "-mthumb", "-nostartfiles", "-Wl,--gc-sections"),
                code_estimate=4000, stack_estimate=256, flash_base=0x0, ram_base=0x20000000)

# ARM MPS2 FPGA board with the AN386 image (QEMU -M mps2-an386): Cortex-M4 with the single-precision FPU,
# 4 MB code SSRAM at 0 (holds the firmware: its "flash"), 4 MB data SSRAM at 0x20000000, 25 MHz.
_M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard")
MPS2_AN386 = Chip("MPS2 AN386 (Cortex-M4F)", "cortex-m4", 4 * 1024 * 1024, 4 * 1024 * 1024, 25_000_000,
                  (*_M4, *_SECTIONS, "-fno-tree-loop-distribute-patterns"),
                  (*_M4, "-nostartfiles", "-Wl,--gc-sections"),
                  code_estimate=6000, stack_estimate=256, flash_base=0x0, ram_base=0x20000000)

# MPS2 with the AN505 image (QEMU -M mps2-an505): Cortex-M33 (Armv8-M Mainline, DSP extension, single-precision
# FPU), run in the secure state: 4 MB code SSRAM at its secure alias 0x10000000, 4 MB data SSRAM at 0x38000000,
# 20 MHz.
_M33 = ("-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard")
MPS2_AN505 = Chip("MPS2 AN505 (Cortex-M33)", "cortex-m33", 4 * 1024 * 1024, 4 * 1024 * 1024, 20_000_000,
                  (*_M33, *_SECTIONS, "-fno-tree-loop-distribute-patterns"),
                  (*_M33, "-nostartfiles", "-Wl,--gc-sections"),
                  code_estimate=6000, stack_estimate=256, flash_base=0x10000000, ram_base=0x38000000)
