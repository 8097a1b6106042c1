"""The ATmega328P backend ("avr"): the shared MCU emitter (codegen/mcu.py) with constants in
flash read through pgm_read_*, and, in integer builds, the hand-tuned kernels of avr.kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tinycc_ml.avr import float_quantise, forest_asm
from tinycc_ml.avr.board import ATMEGA1284P_BOARD, AVR_BOARD, MEGA2560_BOARD
from tinycc_ml.avr.chips import (
    ARDUINO_CORE_FLASH,
    ARDUINO_CORE_RAM,
    ARDUINO_PROBA_PRINT_FLASH,
    ATMEGA328P,
    ATMEGA1284P,
    UNO_SKETCH_FLASH,
)
from tinycc_ml.avr.kernel_table import AVR_KERNELS
from tinycc_ml.avr.kernels import chain_offset_store
from tinycc_ml.avr.tree_walk import stream_walk_avr
from tinycc_ml.target import BuildOutput, Chip, CTarget, Fit, FitError, McuBackend, arduino_library

# uint16_t reads widen to int32_t: an AVR int is 16 bits, and indices compared with an int loop
# counter must not turn the comparison unsigned (-Wsign-compare)
PGM_READ = {"int16_t": "(int16_t)pgm_read_word", "uint16_t": "(int32_t)pgm_read_word",
            "int8_t": "(int8_t)pgm_read_byte", "uint8_t": "pgm_read_byte",
            "int32_t": "(int32_t)pgm_read_dword", "uint32_t": "pgm_read_dword", "float": "pgm_read_float",
            "int64_t": None}


@dataclass
class AvrTarget(CTarget):
    name: str = "avr"
    const_attribute: str = " PROGMEM"
    extra_includes: tuple[str, ...] = ("#include <avr/pgmspace.h>",)
    int16_arith: bool = True
    int24_type: str = "__int24"
    # a forest's straight-line assembly (avr.forest_asm) up to this many bytes (AvrBackend.c_target: the chip's
    # flash but FOREST_ASM_RESERVE)
    forest_asm_budget: int = 28 * 1024
    # avr-gcc 5.4 sizes a few branches of a long function a word short (a "brne .+2; rjmp" it counted as one
    # word), so an RJMP near its 4 KB reach fails to link: straight-line tree code kept to half that a function
    function_code_bytes: int = 2048

    def read_const(self, array: str, index: str, ctype: str) -> str:
        if ctype == "int64_t":  # avr-libc reads at most a dword from flash: two, low word first
            at = f"(const uint32_t *)&{array}[{index}]"
            return f"(int64_t)(((uint64_t)pgm_read_dword({at} + 1) << 32) | pgm_read_dword({at}))"
        return f"{PGM_READ[ctype]}(&{array}[{index}])"

    def offset_store(self, em, name: str) -> str | None:
        return chain_offset_store(em, name)

    def stream_walk(self, em, x_ctype: str) -> str | None:
        return stream_walk_avr(em) if x_ctype == "int16_t" else None

    def float_quantise(self, api, table, offset):
        return float_quantise.quantise_source(api, table, offset) if api.input_ctype == "int16_t" else None

    def forest_asm(self, em, name, layout, n_outputs, input_dim, acc_bytes, bounds, shift, saturation):
        if not forest_asm.applies(layout, n_outputs, input_dim, bounds, shift, saturation):
            return None
        lines, size, cycles = forest_asm.emit(layout, n_outputs, shift, acc_bytes, bounds, name, saturation)
        return forest_asm.source(lines, name), size, cycles


# flash a forest's assembly leaves the rest of a build (the harness or the application, the quantiser, predict): on
# the ATmega328P 28 of its 32 KB, on the ATmega1284P 124 of 128 KB
FOREST_ASM_RESERVE = 4 * 1024

# pgm_read_* take 16-bit (near) addresses: constants past the first 64 KB of flash would be read from
# the wrong place; avr-gcc refuses an object over 32,767 bytes (its ptrdiff_t is 16 bits)
NEAR_FLASH_BYTES = 65536
MAX_OBJECT_BYTES = 32767
# flash below the constants in an estimate: the vector table (the ATmega1284P's 35 vectors x 4 bytes), the
# harness's and the float input's tables; the measured build reads the constants' end from the ELF instead
BELOW_CONSTANTS_ESTIMATE = 1024


class AvrBackend(McuBackend):
    name = "avr"
    description = "ATmega328P (AVR): constants in flash, integer-only, hand-tuned MUL kernels; simavr-runnable"
    chip = ATMEGA328P
    simulator = "avr"
    board = AVR_BOARD
    network_ops = None  # TFLite networks: the shared C in PROGMEM, equal to tflite-micro's in simavr
    boards = {"uno": AVR_BOARD, "atmega1284p": ATMEGA1284P_BOARD, "mega2560": MEGA2560_BOARD}
    sketch_rows: int | None = None  # an Arduino sketch's stored example rows (for_layout("arduino")), else None

    def target_attributes(self):
        # wsqdist's kernel: a product shift by 12 costs 15 cycles a term, by 15 or 16 only 7 or 4
        return replace(super().target_attributes(), byte_shift_bits=3)

    def with_board(self, board: str | None) -> AvrBackend:
        """A board of another AVR chip of the same core (the ATmega1284P, the Mega's ATmega2560): its chip is the
        build's (its -mmcu, memory and simavr model), not a bound under the ATmega328P's."""
        chosen = self.boards.get(board) if board is not None else None
        if chosen is not None and chosen.chip is not self.chip:
            self.chip, self.board = chosen.chip, chosen
            return self
        return super().with_board(board)

    def for_layout(self, layout: str, example_rows: int = 0) -> AvrBackend:
        """An Arduino library's builds are held to what its sketch leaves them on an Uno: the bootloader's
        512 bytes, the Arduino core and the ``example_rows`` the sketch stores (in flash)."""
        if layout == "arduino":
            self.sketch_rows = example_rows
        return self

    def c_target(self, graph) -> CTarget:
        return AvrTarget(kernels=AVR_KERNELS, forest_asm_budget=max(self.chip.flash - FOREST_ASM_RESERVE, 0))

    def check_fit(self, output: BuildOutput) -> Fit:
        """The chip's fit, and constants the near pgm_read_* reach: each array at most 32,767 bytes, all of
        them below 64 KB of flash (measured builds: the link's end of .progmem, avr.simulator.build)."""
        if output.const_bytes <= self.chip.flash:  # beyond it the flash check says more
            symbol, size = max(output.const_arrays.items(), key=lambda kv: kv[1], default=("", 0))
            if size > MAX_OBJECT_BYTES:
                raise FitError(f"model {output.prefix} cannot be built for the {self.chip.name}: its constant "
                               f"{symbol} takes {size} bytes, over the {MAX_OBJECT_BYTES} bytes avr-gcc allows "
                               "one array", subject=f"model {output.prefix}")
            if output.const_bytes > NEAR_FLASH_BYTES - BELOW_CONSTANTS_ESTIMATE:
                raise FitError(f"model {output.prefix} cannot be built for the {self.chip.name}: its constants "
                               f"take {output.const_bytes} bytes and would end past the first {NEAR_FLASH_BYTES} "
                               "bytes of flash, beyond what pgm_read_* (near pointers) reach",
                               subject=f"model {output.prefix}")
        if self.sketch_rows is None:
            return super().check_fit(output)
        return self._check_sketch_fit(output)

    def _sketch_chip(self, input_dim: int, input_bytes: int, prints_proba: bool) -> tuple[Chip, int, int]:
        """(the chip an Arduino Uno sketch leaves the model, flash kept, RAM kept): the bootloader, the core,
        the sketch's stored rows and its probability print taken off."""
        chip = self.fit_chip
        row_bytes = self.sketch_rows * (input_dim * input_bytes + 1)
        flash_kept = ARDUINO_CORE_FLASH + row_bytes + (ARDUINO_PROBA_PRINT_FLASH if prints_proba else 0)
        ram_kept = ARDUINO_CORE_RAM
        name = (f"{chip.name} in an Arduino Uno sketch ({min(chip.flash, UNO_SKETCH_FLASH)} B of flash beside the "
                f"bootloader; ~{flash_kept} B of it and ~{ram_kept} B of RAM kept for the Arduino core, the sketch and "
                f"its {self.sketch_rows} stored rows)")
        return (replace(chip, name=name, flash=min(chip.flash, UNO_SKETCH_FLASH) - flash_kept, ram=chip.ram - ram_kept),
                flash_kept, ram_kept)

    def constants_chip(self, graph, precision: str) -> Chip:
        if self.sketch_rows is None:
            return super().constants_chip(graph, precision)
        # before any C: the rows as the build's input type, and the probability print counted (worst case)
        input_dim = sum(math.prod(graph.type(name).shape) for name in graph.inputs())
        return self._sketch_chip(input_dim, 4 if precision == "float" else 2, prints_proba=True)[0]

    def _check_sketch_fit(self, output: BuildOutput) -> Fit:
        """The build inside an Arduino Uno sketch: the harness's firmware held to the flash and RAM the
        bootloader, the core and the sketch's stored rows leave; 256-byte aligned kernel buffers counted with
        their worst padding (the sketch's link places them anywhere)."""
        prints_proba = f"{output.prefix.upper()}_N_PROBA" in output.files.get(f"{output.prefix}.h", "")
        sketch, flash_kept, ram_kept = self._sketch_chip(output.input_dim, 4 if output.input_ctype == "float" else 2,
                                                         prints_proba)
        if output.optional_ram_bytes:
            ram_kept += 255
            sketch = replace(sketch, ram=sketch.ram - 255)
        fit = super().check_fit(output, limits=sketch)
        return Fit(sketch.name, fit.flash_bytes + flash_kept, fit.ram_bytes + ram_kept, fit.stack_estimate,
                   fit.how + " + the Arduino core and sketch (estimated)")

    def arduino_library(self, result, examples) -> dict[str, str]:

        return arduino_library(result, examples)


class Atmega1284pBackend(AvrBackend):
    """Same AVR core with 128 KB flash / 16 KB RAM: for comparison builds (e.g. float) that do not fit
    the ATmega328P. Not registered by default; benchmarks register it with register_backend."""

    name = "avr-atmega1284p"
    chip = ATMEGA1284P
    simulator = "avr-atmega1284p"
    board = None  # comparison builds: no firmware project
    boards: dict = {}

