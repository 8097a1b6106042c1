"""The ATmega328P backend ("avr"): the shared MCU emitter (codegen/mcu.py) with constants in
flash read through pgm_read_*, and, in integer builds, the hand-tuned kernels of avr.kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinycc_ml.avr.board import AVR_BOARD
from tinycc_ml.avr.chips import ATMEGA328P, ATMEGA1284P
from tinycc_ml.avr.kernel_table import AVR_KERNELS
from tinycc_ml.avr.kernels import chain_offset_store
from tinycc_ml.target import CTarget, McuBackend, arduino_library

# uint16_t reads widen to int32_t: an AVR int is 16 bits, and indices compared with an int loop
# counter must not turn the comparison unsigned (-Wsign-compare)
PGM_READ = {"int16_t": "(int16_t)pgm_read_word", "uint16_t": "(int32_t)pgm_read_word",
            "int8_t": "(int8_t)pgm_read_byte", "uint8_t": "pgm_read_byte",
            "int32_t": "(int32_t)pgm_read_dword", "uint32_t": "pgm_read_dword", "float": "pgm_read_float"}


@dataclass
class AvrTarget(CTarget):
    name: str = "avr"
    const_attribute: str = " PROGMEM"
    extra_includes: tuple[str, ...] = ("#include <avr/pgmspace.h>",)
    int16_arith: bool = True

    def read_const(self, array: str, index: str, ctype: str) -> str:
        return f"{PGM_READ[ctype]}(&{array}[{index}])"

    def offset_store(self, em, name: str) -> str | None:
        return chain_offset_store(em, name)


class AvrBackend(McuBackend):
    name = "avr"
    description = "ATmega328P (AVR): constants in flash, integer-only, hand-tuned MUL kernels; simavr-runnable"
    chip = ATMEGA328P
    simulator = "avr"
    board = AVR_BOARD

    def c_target(self, graph) -> CTarget:
        return AvrTarget(kernels=AVR_KERNELS)

    def arduino_library(self, result, examples) -> dict[str, str]:

        return arduino_library(result, examples)


class Atmega1284pBackend(AvrBackend):
    """Same AVR core with 128 KB flash / 16 KB RAM: for comparison builds (e.g. float) that do not fit
    the ATmega328P. Not registered by default; benchmarks register it with register_backend."""

    name = "avr-atmega1284p"
    chip = ATMEGA1284P
    simulator = "avr-atmega1284p"
    board = None  # comparison builds: no firmware project

