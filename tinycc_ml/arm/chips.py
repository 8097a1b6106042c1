"""The Arm chips: the nRF51822 (Cortex-M0), and the MPS2 boards' Cortex-M4F and Cortex-M33 as QEMU runs them."""

from __future__ import annotations

from tinycc_ml.target import Chip

_SECTIONS = ("-Os", "-ffunction-sections", "-fdata-sections")

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

# Real Cortex-M4F parts for firmware projects (``--board``); builds for them are the cortex-m4 target's, held to
# their memory. STM32F405 (QEMU -M netduinoplus2): 1 MB flash at 0x08000000 (aliased at 0), 128 KB SRAM at
# 0x20000000 (its 64 KB CCM RAM left to the user), 16 MHz: the HSI clock the reset leaves it on.
STM32F405 = Chip("STM32F405 (Cortex-M4F)", "cortex-m4", 1024 * 1024, 128 * 1024, 16_000_000,
                 MPS2_AN386.cflags, MPS2_AN386.ldflags, code_estimate=6000, stack_estimate=256,
                 flash_base=0x08000000, ram_base=0x20000000)
# nRF52840 (nRF52840 DK, Arduino Nano 33 BLE, Adafruit Feather nRF52840): 1 MB flash at 0, 256 KB RAM at
# 0x20000000, 64 MHz; no QEMU machine models it.
NRF52840 = Chip("nRF52840 (Cortex-M4F)", "cortex-m4", 1024 * 1024, 256 * 1024, 64_000_000,
                MPS2_AN386.cflags, MPS2_AN386.ldflags, code_estimate=6000, stack_estimate=256,
                flash_base=0x0, ram_base=0x20000000)
