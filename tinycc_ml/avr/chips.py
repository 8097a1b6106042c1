"""The AVR chips: the ATmega328P (Arduino Uno), the ATmega1284P and the ATmega2560 (Arduino Mega 2560)."""

from __future__ import annotations

from tinycc_ml.target import Chip

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

# The Arduino Mega 2560's chip: 256 KB flash (the constants still within the first 64 KB, which pgm_read_* reach),
# 8 KB RAM; a 3-byte program counter (return addresses take 3 bytes of stack)
ATMEGA2560 = Chip("ATmega2560", "atmega2560", 256 * 1024, 8 * 1024, 16_000_000,
                  ("-mmcu=atmega2560", "-DF_CPU=16000000UL", *_SECTIONS),
                  ("-mmcu=atmega2560", "-Wl,--gc-sections"),
                  code_estimate=2500, stack_estimate=160)

# An Arduino Uno sketch: Optiboot keeps the top 512 bytes of flash; the Arduino core (Serial, Print,
# micros, init) and the demo sketch's code take more flash and RAM than the firmware harness the fit check
# builds (measured with Debian's arduino-mk and Arduino core 1.8.19: tests/glue/test_arduino_library.py
# holds these to real sketch builds). The sketch's stored example rows are counted apart.
UNO_SKETCH_FLASH = 32 * 1024 - 512
ARDUINO_CORE_FLASH = 4096
ARDUINO_CORE_RAM = 256
ARDUINO_PROBA_PRINT_FLASH = 512  # the sketch prints the predicted class's probability (float code)
