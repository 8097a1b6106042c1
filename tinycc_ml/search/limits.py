"""What a chosen model must meet, and how a measurement is judged against it.

Limits cover the model's own share of the chip, as the target's real build measures it:

- flash: the model's functions and constants (``nm`` sizes of its symbols in the linked measurement
  firmware; host: its constants). libgcc helpers it shares with the rest of a firmware (a few hundred
  bytes of multiply routines at most) and the harness are not counted.
- RAM: the model's static RAM (intermediates, tables copied to RAM) plus the peak stack of one
  predict call, measured in the simulator (host: static RAM only, no stack is measured). The caller's
  input array (D values) is not counted: the streaming entry points need none.
- latency: the slowest of the simulated rows. AVR cycles are exact (simavr), so ms = cycles / clock.
  Cortex-M0 runs count instructions exactly (QEMU / unicorn); ms assumes
  ``M0_CYCLES_PER_INSTRUCTION`` cycles per instruction (single-cycle multiplier, zero-wait-state
  flash at 16 MHz as on the nRF51; loads take 2 cycles and taken branches 3, so the kernels' mix
  averages below 1.5).

Every build must also fit the whole chip with the measurement harness (``Backend.check_fit``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinycc_ml.chips import memory_limits
from tinycc_ml.errors import DataError
from tinycc_ml.runtime.simulate import SIMULATORS

M0_CYCLES_PER_INSTRUCTION = 1.5
LIMIT_NAMES = ("flash", "ram", "latency")


def _positive(value, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise DataError(f"{what} is {value!r}; expected a positive number")
    return float(value)


@dataclass(frozen=True)
class Limits:
    target: str
    chip: str | None  # None: the host
    max_flash: int | None
    max_ram: int | None
    max_ms: float | None
    clock_hz: float | None  # None: no clock (host)
    count_unit: str | None  # "cycles" (AVR), "instructions" (Cortex-M0), None (host: not counted)

    @classmethod
    def make(cls, target: str, backend, max_flash=None, max_ram=None, max_ms=None, clock_hz=None) -> Limits:
        chip = getattr(backend, "chip", None)
        simulator = getattr(backend, "simulator", None)
        max_flash, max_ram = memory_limits(chip, max_flash, max_ram, target)
        max_ms = _positive(max_ms, "max_ms")
        clock_hz = _positive(clock_hz, "clock_hz")
        unit = None
        if chip is not None and simulator is not None:
            unit = SIMULATORS.load(simulator).unit
        if unit is None and (max_ms is not None or clock_hz is not None):
            raise DataError(f"target {target} has no simulator that counts cycles or instructions, so max_ms and "
                            "clock_hz cannot be checked; use --target avr or cortex-m0")
        return cls(target, chip.name if chip is not None else None, max_flash, max_ram, max_ms,
                   (clock_hz or float(chip.clock_hz)) if chip is not None and unit else None, unit)

    def ms(self, count: int | None) -> float | None:
        """Milliseconds of ``count`` cycles or instructions at the clock."""
        if count is None or self.clock_hz is None:
            return None
        cycles = count * (M0_CYCLES_PER_INSTRUCTION if self.count_unit == "instructions" else 1.0)
        return 1000.0 * cycles / self.clock_hz

    def failed(self, flash: int | None, ram: int | None, count: int | None) -> list[str]:
        """The limits a measurement breaks ("flash", "ram", "latency")."""
        out = []
        if self.max_flash is not None and (flash is None or flash > self.max_flash):
            out.append("flash")
        if self.max_ram is not None and (ram is None or ram > self.max_ram):
            out.append("ram")
        ms = self.ms(count)
        if self.max_ms is not None and (ms is None or ms > self.max_ms):
            out.append("latency")
        return out

    def describe(self) -> str:
        parts = []
        if self.max_flash is not None:
            parts.append(f"flash <= {self.max_flash:,} B")
        if self.max_ram is not None:
            parts.append(f"RAM <= {self.max_ram:,} B")
        if self.max_ms is not None:
            parts.append(f"latency <= {self.max_ms:g} ms at {self.clock_hz / 1e6:g} MHz")
        where = self.chip or self.target
        return f"{where}: " + (", ".join(parts) if parts else "fits the chip")

    def as_json(self) -> dict:
        return {"max_flash": self.max_flash, "max_ram": self.max_ram, "max_ms": self.max_ms, "clock_hz": self.clock_hz,
                "count_unit": self.count_unit,
                "cycles_per_instruction": M0_CYCLES_PER_INSTRUCTION if self.count_unit == "instructions" else None,
                "flash_counts": "the model's own code and constants (its symbols in the linked firmware)",
                "ram_counts": "the model's static RAM plus the peak stack of a predict call (not the input array)"}
