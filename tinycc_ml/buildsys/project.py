"""`compile --project DIR`: a standalone firmware project around a microcontroller build.

The chip's part (board file, startup, linker script, tools, make run) is a ``Board`` its backend gives
(``McuBackend.board``); the rest is shared. The built-in boards live in their target packages (``tinycc_ml.avr.board``,
``tinycc_ml.arm.boards``).

    DIR/Makefile            make (firmware.elf, firmware.hex), make run (simulator), make clean
    DIR/main.c              runs <name>_predict on the stored inputs; prints, over the UART, each
                            row's predicted and expected class and the time the call took
    DIR/examples.h          the stored inputs (in flash) and the class each should get
    DIR/board.c, board.h    UART, timer and end of run for the chip
    DIR/<name>.h, <name>.c  the model, as the target wrote it (+ <name>_input.h for integer builds)
    cortex-m0 only: startup.c (vector table, .data/.bss set-up), nrf51.ld (linker script)
    DIR/README.txt          how to build, run, flash

Chips: ATmega328P at 16 MHz (Arduino Uno; USART0 at 115200 baud, Timer1 for the time; `make run`
uses the simavr program), nRF51822 (BBC micro:bit; UART on P0.24 at 115200 baud, TIMER0 at 1 MHz;
`make run` uses qemu-system-arm -M microbit with -icount shift=6, 64 ns per instruction: the printed
times are what a 16 MHz chip would take at one cycle per instruction; it ends through semihosting, which on a real chip
without a debugger stops in the fault handler after the last line). Building needs only the
cross compiler and make, not tinycc-ml. ``make FLOAT_INPUT=1`` stores the inputs as float and
quantises them on the device with ``<name>_quantise_feature`` (integer builds; it defines
``<NAME>_WITH_FLOAT``); the compile command is a dependency (``build.flags``), so changing a variable
rebuilds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from tinycc_ml.buildsys.examples import EXPECTED_FROM, Examples, c_table, input_helper, label_printer_lines
from tinycc_ml.chips import Chip
from tinycc_ml.errors import CompileError
from tinycc_ml.version import __version__

WARNINGS = "-std=c99 -Wall -Wextra"  # the tests add -Werror (EXTRA_CFLAGS): generated code builds clean with it


@dataclass(frozen=True)
class Board:
    """A chip's part of a firmware project: what differs between chips, the rest being shared.

    title: the board as users know it; chip: flags for the Makefile; tools: the make variables of the
    cross tools (CC, OBJCOPY, SIZE, the simulator...); needs: the README's "Needs:" text; board_c: the C of
    board.h's six functions: ``void board_init(void)``, ``void board_print(const char *text)`` (the UART),
    ``void board_print_clock(void)`` (prints what the timer counts, at what rate), ``uint32_t board_time(void)``
    (a free-running timer that does not wrap within a run: a cycle counter, or a timer's overflows counted),
    ``uint32_t board_us_since(uint32_t start)`` (microseconds since board_time() gave start, at the rate the timer
    really runs), ``void board_exit(int code)`` (flush the UART and stop);
    files: other files by name (startup, linker script);
    linker_script: one of them, passed with -T (or ""); sources: C files besides main.c, board.c and the
    model; size: the recipe line that prints sizes; run: `make run`'s recipe; rules: extra make rules with
    their .PHONY names; flash_hint: the README's flashing line; flash_reads: how examples.h reads tables kept
    in flash (C type -> read function; empty: plain reads), flash_include its header."""

    title: str
    chip: Chip
    tools: tuple[str, ...]
    needs: str
    board_c: str
    run: tuple[str, ...]
    flash_hint: str
    size: str = "\t$(SIZE) $@"
    files: dict[str, str] = field(default_factory=dict)
    linker_script: str = ""
    sources: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    phony: tuple[str, ...] = ()
    flash_reads: dict[str, str] = field(default_factory=dict)
    flash_include: str = ""
    make_intro: tuple[str, ...] = ()  # the Makefile's comment lines after its title


def _examples_header(name: str, board: Board, ex: Examples) -> str:
    up, ctype = name.upper(), ex.input_ctype
    avr = bool(board.flash_reads)
    attr = " PROGMEM" if avr else ""
    n = len(ex.expected)
    source = EXPECTED_FROM[ex.expected_from]
    lines = [f"/* {n} stored inputs for {name} and the class each should get ({source}). */",
             "#ifndef EXAMPLES_H", "#define EXAMPLES_H", "", "#include <stdint.h>"]
    if board.flash_include:
        lines.append(board.flash_include)
    lines += ["", f"#define EXAMPLES_COUNT {n}", ""]
    integer = ctype != "float"
    if integer:
        lines += [f"#if {up}_DEMO_FLOAT_INPUT", *c_table("example_inputs", "float", ex.rows, attr), "#else",
                  *c_table("example_inputs", ctype, ex.stored, attr), "#endif"]
    else:
        lines += c_table("example_inputs", "float", ex.rows, attr)
    expected = ", ".join(str(int(v)) for v in ex.expected)
    lines += [f"static const uint8_t example_expected[{n}]{attr} = {{ {expected} }};", ""]
    if avr:
        rd = board.flash_reads
        lines += [f"#define EXAMPLE_FLOAT(r, k) {rd['float']}(&example_inputs[r][k])",
                  f"#define EXAMPLE_STORED(r, k) {rd[ctype]}(&example_inputs[r][k])",
                  f"#define EXAMPLE_EXPECTED(r) {rd['uint8_t']}(&example_expected[r])"]
    else:
        lines += ["#define EXAMPLE_FLOAT(r, k) (example_inputs[r][k])",
                  "#define EXAMPLE_STORED(r, k) (example_inputs[r][k])",
                  "#define EXAMPLE_EXPECTED(r) (example_expected[r])"]
    return "\n".join(lines + ["", "#endif /* EXAMPLES_H */", ""])


def _main_c(name: str, ex: Examples) -> str:
    up, ctype = name.upper(), ex.input_ctype
    integer = ctype != "float"
    read = ([f"#if {up}_DEMO_FLOAT_INPUT",
             f"            x[k] = {name}_quantise_feature(k, EXAMPLE_FLOAT(r, k));",
             "#else", "            x[k] = EXAMPLE_STORED(r, k);", "#endif"] if integer
            else ["            x[k] = EXAMPLE_STORED(r, k);"])
    return "\n".join([
        f"/* {name}: run the model on the stored inputs and print, for each, the predicted and expected",
        f" * class and how long {name}_predict() took. Generated by tinycc-ml {__version__}. */",
        "#include <stdint.h>",
        "",
        f"#ifndef {up}_DEMO_FLOAT_INPUT",
        f"#define {up}_DEMO_FLOAT_INPUT 0",
        "#endif",
        "",
        '#include "board.h"',
        '#include "examples.h"',
        f'#include "{name}.h"',
        "#ifdef __AVR__ /* text stays in flash */",
        "#include <avr/pgmspace.h>",
        "static void print_flash(const char *text)",
        "{",
        "    char c[2] = {0, 0};",
        "    while ((c[0] = (char)pgm_read_byte(text++)) != 0)",
        "        board_print(c);",
        "}",
        "#define PRINT(text) print_flash(PSTR(text))",
        "#else",
        "#define PRINT(text) board_print(text)",
        "#endif",
        "",
        f"static {ctype} x[{up}_INPUT_DIM];",
        "",
        "static void print_uint(uint32_t v)",
        "{",
        "    char text[11];",
        "    char *p = text + sizeof text - 1;",
        "    *p = 0;",
        "    do {",
        "        *--p = (char)('0' + v % 10u);",
        "        v /= 10u;",
        "    } while (v);",
        "    board_print(p);",
        "}",
        "",
        *label_printer_lines(name, [
            "#ifdef __AVR__ /* the labels stay in flash */",
            "    print_flash(label);",
            "#else",
            "    board_print(label);",
            "#endif"], [
            '    if (label < 0) PRINT("-");',
            "    print_uint(label < 0 ? 0u - (uint32_t)label : (uint32_t)label);"]),
        "",
        f"#if defined({up}_N_PROBA) && !defined({up}_DEMO_PROBA)",
        f"#define {up}_DEMO_PROBA 1 /* print the predicted class's probability (links expf; 0: leave it out) */",
        "#endif",
        f"#if defined({up}_N_PROBA) && {up}_DEMO_PROBA",
        "static void print_probability(float p) /* as 0.ddd, without printf */",
        "{",
        "    const uint32_t thousandths = (uint32_t)(p * 1000.0f + 0.5f);",
        "    print_uint(thousandths / 1000u);",
        '    PRINT(".");',
        "    print_uint(thousandths / 100u % 10u);",
        "    print_uint(thousandths / 10u % 10u);",
        "    print_uint(thousandths % 10u);",
        "}",
        "#endif",
        "",
        "int main(void)",
        "{",
        "    board_init();",
        f'    PRINT("{name}: ");',
        "    print_uint(EXAMPLES_COUNT);",
        '    PRINT(" stored inputs; time: ");',
        "    board_print_clock();",
        '    PRINT("\\r\\n");',
        "    uint32_t correct = 0;",
        "    for (uint8_t r = 0; r < EXAMPLES_COUNT; ++r) {",
        f"        for (int k = 0; k < {up}_INPUT_DIM; ++k) {{",
        *read,
        "        }",
        "        const uint32_t start = board_time();",
        f"        const int predicted = {name}_predict(x);",
        "        const uint32_t us = board_us_since(start);",
        "        const int expected = EXAMPLE_EXPECTED(r);",
        "        correct += predicted == expected;",
        '        PRINT("row ");',
        "        print_uint(r);",
        '        PRINT(": predicted ");',
        "        print_uint((uint32_t)predicted);",
        '        PRINT(", expected ");',
        "        print_uint((uint32_t)expected);",
        '        PRINT(", ");',
        "        print_uint(us);",
        '        PRINT(" us");',
        f"#ifdef {up}_DEMO_LABELS",
        '        PRINT(" (label ");',
        "        print_label(predicted);",
        '        PRINT(", expected label ");',
        "        print_label(expected);",
        '        PRINT(")");',
        "#endif",
        f"#if defined({up}_N_PROBA) && {up}_DEMO_PROBA",
        "        {",
        f"            float p[{up}_N_PROBA];",
        f"            {name}_proba(x, p);",
        '            PRINT(", p ");',
        f"            print_probability(predicted >= 0 && predicted < {up}_N_PROBA ? p[predicted] : 0.0f);",
        "        }",
        "#endif",
        '        PRINT("\\r\\n");',
        "    }",
        '    PRINT("correct ");',
        "    print_uint(correct);",
        '    PRINT("/");',
        "    print_uint(EXAMPLES_COUNT);",
        '    PRINT("\\r\\n");',
        "    board_exit(0);",
        "    return 0;",
        "}",
        "",
    ])


BOARD_H = """\
/* The little the demo needs from the chip: a UART to print on, a timer, a way to end the run. */
#ifndef BOARD_H
#define BOARD_H

#include <stdint.h>

void board_init(void);
void board_print(const char *text);
void board_print_clock(void);                 /* prints what board_time() counts and at what rate */
uint32_t board_time(void);                    /* a free-running timer that does not wrap within a run */
uint32_t board_us_since(uint32_t start);      /* microseconds since board_time() gave start */
void board_exit(int code);                    /* flush the UART and stop */

#endif /* BOARD_H */
"""

def cmake_support_file(name: str) -> str:
    """A file shipped beside TinyccML.cmake: a board's start-up and linker script that CMake cross builds and
    firmware projects share."""
    return resources.files("tinycc_ml.buildsys").joinpath("cmake", name).read_text()


def _makefile(name: str, board: Board, float_input: bool = True) -> str:
    """``float_input``: whether the build has <name>_quantise_feature (float builds and every integer build with
    a known input quantisation); without it ``make FLOAT_INPUT=1`` stops with the reason."""
    chip, up = board.chip, name.upper()
    ld = f" -T {board.linker_script}" if board.linker_script else ""
    return "\n".join([
        f"# {name} demo firmware for the {board.title}, generated by tinycc-ml {__version__}.",
        *board.make_intro, *board.tools,
        "FLOAT_INPUT ?= 0",
        *([] if float_input else [
            "ifeq ($(FLOAT_INPUT),1)",
            f"$(error FLOAT_INPUT=1: {name} has no {name}_quantise_feature (its input is quantised per channel); "
            "store the inputs quantised)",
            "endif"]),
        "# more compiler flags, e.g. make EXTRA_CFLAGS=-g",
        "EXTRA_CFLAGS ?=",
        f"CFLAGS = {' '.join(chip.cflags)} {WARNINGS} $(EXTRA_CFLAGS)",
        f"DEFINES = -D{up}_DEMO_FLOAT_INPUT=$(FLOAT_INPUT) $(if $(filter 1,$(FLOAT_INPUT)),-D{up}_WITH_FLOAT)",
        f"LDFLAGS = {' '.join(chip.ldflags)}{ld}",
        f"SOURCES = {' '.join([*board.sources, 'main.c', 'board.c', name + '.c'])}",
        f"LINKER_SCRIPT ={' ' + board.linker_script if board.linker_script else ''}",
        "",
        ".PHONY: all run clean FORCE" + "".join(" " + p for p in board.phony),
        "all: firmware.elf firmware.hex",
        "",
        "# the compile command as a file, rewritten only when it changes: `make FLOAT_INPUT=1` after `make`",
        "# (or any other change of a variable) rebuilds",
        "BUILD_COMMAND = $(CC) $(CFLAGS) $(DEFINES) $(LDFLAGS)",
        "build.flags: FORCE",
        "\t@echo '$(BUILD_COMMAND)' | cmp -s - $@ || echo '$(BUILD_COMMAND)' > $@",
        "",
        "firmware.elf: $(SOURCES) $(wildcard *.h) $(LINKER_SCRIPT) Makefile build.flags",
        "\t$(CC) $(CFLAGS) $(DEFINES) $(LDFLAGS) $(SOURCES) -o $@ -lm",
        board.size,
        "",
        "firmware.hex: firmware.elf",
        "\t$(OBJCOPY) -O ihex -R .eeprom $< $@",
        "",
        "run: firmware.elf", *board.run, "",
        *board.rules,
        "clean:",
        "\trm -f firmware.elf firmware.hex build.flags",
        ""])


def _readme(name: str, board: Board, ex: Examples, float_input: bool = True) -> str:
    return "\n".join([
        f"{name}: demo firmware for the {board.title}, generated by tinycc-ml {__version__}.",
        "",
        f"It runs {name}_predict() on {len(ex.expected)} stored inputs and prints over the UART (115200 baud),",
        "for each, the predicted class, the expected class and the time of the call in microseconds.",
        "",
        f"Needs: {board.needs}. tinycc-ml is not needed to build it.",
        "",
        "    make              build firmware.elf and firmware.hex",
        "    make run          run it in the simulator and print the results",
        *(["    make FLOAT_INPUT=1   store the inputs as float and quantise them on the chip with",
           f"                      {name}_quantise_feature() of {name}.h (integer builds; rebuilds when changed)"]
          if float_input else []),
        f"    {board.flash_hint}",
        "",
    ])


def firmware_project(result, examples: Examples, board: Board) -> dict[str, str]:
    """Files (relative paths) of a standalone firmware project for a ``CompileResult`` on ``board``."""
    name = result.prefix
    own = {"main", "board", "examples", *(f.rsplit(".", 1)[0] for f in board.files)}
    if name in own:
        raise CompileError(f"--name {name} clashes with a file of the firmware project; choose another name")
    out = result.output
    float_input = out.input_ctype == "float" or out.input_scale is not None or out.c_quantises_affine
    files = {
        "Makefile": _makefile(name, board, float_input),
        "README.txt": _readme(name, board, examples, float_input),
        "main.c": _main_c(name, examples),
        "examples.h": _examples_header(name, board, examples),
        "board.h": BOARD_H,
        "board.c": board.board_c,
        f"{name}.h": result.files[f"{name}.h"],
        f"{name}.c": result.files[f"{name}.c"],
    }
    files.update(board.files)
    helper = input_helper(result)
    if helper:
        files[f"{name}_input.h"] = helper
    return files
