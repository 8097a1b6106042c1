/* stdout on the ATmega328P's USART0 (TX on PD1: the Arduino Uno's USB serial port) at 115200 baud
 * (double speed, UBRR from F_CPU): tinycc_ml_add_firmware adds this file to AVR executables, and its
 * set-up runs before main (section .init8, after .data and .bss are ready), so printf works in main. */
#include <avr/io.h>
#include <stdio.h>

#ifndef TINYCC_ML_UART_BAUD
#define TINYCC_ML_UART_BAUD 115200UL
#endif

static int tinycc_ml_uart_putchar(char c, FILE *stream)
{
    (void)stream;
    loop_until_bit_is_set(UCSR0A, UDRE0);
    UDR0 = (uint8_t)c;
    return 0;
}

static FILE tinycc_ml_uart_stdout = FDEV_SETUP_STREAM(tinycc_ml_uart_putchar, NULL, _FDEV_SETUP_WRITE);

void tinycc_ml_uart_setup(void) __attribute__((naked, used, section(".init8")));

void tinycc_ml_uart_setup(void)
{
    const uint16_t divisor = (uint16_t)((F_CPU + 4UL * TINYCC_ML_UART_BAUD) / (8UL * TINYCC_ML_UART_BAUD) - 1UL);
    UBRR0H = (uint8_t)(divisor >> 8);
    UBRR0L = (uint8_t)divisor;
    UCSR0A = _BV(U2X0);
    UCSR0B = _BV(TXEN0);
    UCSR0C = _BV(UCSZ01) | _BV(UCSZ00); /* 8N1 */
    stdout = &tinycc_ml_uart_stdout;
}
