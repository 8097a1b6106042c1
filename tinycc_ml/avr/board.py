"""The Arduino Uno (ATmega328P) as a firmware project's board: USART0, Timer1, avrdude."""

from __future__ import annotations

from tinycc_ml.avr.chips import ATMEGA328P
from tinycc_ml.target import Board

AVR_BOARD_C = """\
/* ATmega328P at 16 MHz: USART0 at 115200 baud (U2X, 2.1 % off, as the Arduino core does), Timer1
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

# the end of a run on an ARM board: QEMU (-semihosting-config enable=on) stops with the code
AVR_BOARD = Board(
    title="ATmega328P (Arduino Uno)", chip=ATMEGA328P,
    tools=("CC = avr-gcc", "OBJCOPY = avr-objcopy", "SIZE = avr-size", "SIMAVR = simavr",
           f"MCU = {ATMEGA328P.mcu}", "PORT ?= /dev/ttyACM0"),
    needs="avr-gcc, avr-libc and make (Debian: gcc-avr avr-libc make); simavr to run it simulated",
    board_c=AVR_BOARD_C,
    run=(f"\t$(SIMAVR) -m $(MCU) -f {ATMEGA328P.clock_hz} firmware.elf",),
    rules=("flash: firmware.hex", "\tavrdude -p m328p -c arduino -P $(PORT) -b 115200 -U flash:w:firmware.hex:i", ""),
    phony=("flash",),
    size="\t$(SIZE) -C --mcu=$(MCU) $@",
    flash_hint="make flash PORT=/dev/ttyACM0   upload with avrdude",
    flash_reads={"int16_t": "(int16_t)pgm_read_word", "int8_t": "(int8_t)pgm_read_byte", "float": "pgm_read_float",
                 "uint8_t": "pgm_read_byte"},
    flash_include="#include <avr/pgmspace.h>",
    make_intro=("# make: firmware.elf and firmware.hex; make run: simulate with simavr; make flash PORT=/dev/ttyACM0.",
                "# make FLOAT_INPUT=1: store float inputs and quantise them on the chip."),
)
