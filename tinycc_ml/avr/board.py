"""The AVR firmware-project boards: the Arduino Uno (ATmega328P), an ATmega1284P board and the Arduino Mega 2560
(ATmega2560); the same board.c (USART0, Timer1), their chip's -mmcu, simavr model and avrdude line."""

from __future__ import annotations

from tinycc_ml.avr.chips import ATMEGA328P, ATMEGA1284P, ATMEGA2560
from tinycc_ml.target import Board, Chip

AVR_BOARD_C = """\
/* @CHIP@ at 16 MHz: USART0 at 115200 baud (U2X, 2.1 % off, as the Arduino core does), Timer1
 * with prescaler 64 (4 us per tick), its overflows counted by an interrupt: 32-bit times (4.7 hours). */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/pgmspace.h>

#include "board.h"

static volatile uint16_t timer1_wraps;

ISR(TIMER1_OVF_vect) { ++timer1_wraps; }

void board_init(void)
{
    UBRR0H = 0;
    UBRR0L = 16;
    UCSR0A = _BV(U2X0);
    UCSR0B = _BV(TXEN0);
    UCSR0C = _BV(UCSZ01) | _BV(UCSZ00);
    TCCR1A = 0;
    TCCR1B = _BV(CS11) | _BV(CS10);
    TIMSK1 = _BV(TOIE1);
    sei();
}

void board_print(const char *text)
{
    while (*text) {
        while (!(UCSR0A & _BV(UDRE0))) {
        }
        UDR0 = *text++;
    }
}

void board_print_clock(void)
{
    const char *text = PSTR("Timer1 at 16 MHz / 64 (4 us a tick), overflows counted");
    char c[2] = {0, 0};
    while ((c[0] = (char)pgm_read_byte(text++)) != 0)
        board_print(c);
}

uint32_t board_time(void)
{
    const uint8_t sreg = SREG;
    cli();
    const uint16_t ticks = TCNT1;
    uint16_t wraps = timer1_wraps;
    if ((TIFR1 & _BV(TOV1)) && ticks < 0x8000u) /* wrapped, its interrupt not taken yet */
        ++wraps;
    SREG = sreg;
    return ((uint32_t)wraps << 16) | ticks;
}

uint32_t board_us_since(uint32_t start) { return (board_time() - start) * 4u; }

void board_exit(int code)
{
    (void)code;
    while (!(UCSR0A & _BV(TXC0))) {
    }
    /* sleeping with interrupts off halts the chip (and ends a simavr run) */
    __asm__ __volatile__("cli\\n\\tsleep" ::: "memory");
    for (;;) {
    }
}
"""


def avr_board(title: str, chip: Chip, programmer: str, flash_hint: str) -> Board:
    """A firmware-project Board for an AVR chip at 16 MHz (USART0 and Timer1: every chip here has them)."""
    return Board(
        title=title, chip=chip,
        tools=("CC = avr-gcc", "OBJCOPY = avr-objcopy", "SIZE = avr-size", "SIMAVR = simavr",
               f"MCU = {chip.mcu}", "PORT ?= /dev/ttyACM0"),
        needs="avr-gcc, avr-libc and make (Debian: gcc-avr avr-libc make); simavr to run it simulated",
        board_c=AVR_BOARD_C.replace("@CHIP@", chip.name),
        run=(f"\t$(SIMAVR) -m $(MCU) -f {chip.clock_hz} firmware.elf",),
        rules=("flash: firmware.hex", f"\tavrdude {programmer} -P $(PORT) -U flash:w:firmware.hex:i", ""),
        phony=("flash",),
        size="\t$(SIZE) -C --mcu=$(MCU) $@",
        flash_hint=flash_hint,
        flash_reads={"int16_t": "(int16_t)pgm_read_word", "int8_t": "(int8_t)pgm_read_byte",
                     "float": "pgm_read_float", "uint8_t": "pgm_read_byte"},
        flash_include="#include <avr/pgmspace.h>",
        make_intro=("# make: firmware.elf and firmware.hex; make run: simulate with simavr; "
                    "make flash PORT=/dev/ttyACM0.",
                    "# make FLOAT_INPUT=1: store float inputs and quantise them on the chip."),
    )


AVR_BOARD = avr_board("ATmega328P (Arduino Uno)", ATMEGA328P, "-p m328p -c arduino -b 115200",
                      "make flash PORT=/dev/ttyACM0   upload with avrdude")
# MightyCore's Optiboot at 115200 baud, as its ATmega1284P boards ship
ATMEGA1284P_BOARD = avr_board("ATmega1284P (MightyCore boards)", ATMEGA1284P, "-p m1284p -c arduino -b 115200",
                              "make flash PORT=/dev/ttyUSB0   upload with avrdude (an Optiboot/MightyCore "
                              "bootloader; else a programmer: avrdude -c usbasp -p m1284p)")
MEGA2560_BOARD = avr_board("ATmega2560 (Arduino Mega 2560)", ATMEGA2560, "-p m2560 -c wiring -b 115200 -D",
                           "make flash PORT=/dev/ttyACM0   upload with avrdude (the Mega's stk500v2 bootloader)")
