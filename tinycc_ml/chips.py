"""What a microcontroller is to tinycc-ml: memory sizes, clock, the cross-compiler flags of its builds, and
the estimates the fit check uses without a toolchain. Each target package defines its own chips
(``tinycc_ml.avr.chips``, ``tinycc_ml.arm.chips``; a plug-in its own)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from tinycc_ml.errors import DataError


@dataclass(frozen=True)
class Chip:
    """A microcontroller as the fit check, the measurement firmware and the firmware projects see it.

    name: shown in messages and reports. mcu: the compiler's name for it (``-mmcu=`` / ``-mcpu=``).
    flash, ram: bytes the model's build may use (the fit check refuses a build that needs more).
    clock_hz: turns cycles into time in reports. cflags / ldflags: how the measurement firmware (model and
    harness) is compiled and linked. code_estimate / stack_estimate: bytes of code and of stack assumed for
    the model's own functions when no cross compiler can measure (an estimate never below the truth for the
    built-in chips). flash_base / ram_base: where flash and RAM start in the address map (the simulators and
    linker scripts use them; 0 where the chip's tools do not need them).
    """

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


def memory_limits(chip: Chip | None, max_flash, max_ram, target: str) -> tuple[int | None, int | None]:
    """The user's flash and RAM limits, checked: positive whole numbers of bytes, each at most ``chip``'s
    (None: no chip to compare with, the host); None stays None (no limit)."""
    checked = []
    for what, value, most, kind in (("max_flash", max_flash, chip and chip.flash, "flash"),
                                    ("max_ram", max_ram, chip and chip.ram, "RAM")):
        if value is not None:
            if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
                    or value <= 0 or value != int(value)):
                raise DataError(f"{what} is {value!r}, but {what} must be a positive number of bytes, a whole number")
            if most is not None and value > most:
                raise DataError(f"{what} {int(value)} is more than the {chip.name}'s {most} bytes of {kind} (target "
                                f"{target}); choose a target whose chip has as much")
            value = int(value)
        checked.append(value)
    return checked[0], checked[1]

