"""The board texts of a standalone Cortex-M4F firmware project (`compile --project`) for the MPS2 AN386,
the board QEMU emulates as ``-M mps2-an386``: board.c (the board.h interface of backends/project.py),
startup.c, the linker script mps2_an386.ld and the Makefile's flags and `make run` command.

UART: CMSDK APB UART0 (0x40004000; QEMU's first serial port) at 115200 baud from the 25 MHz clock.
Time: CMSDK APB TIMER0 (0x40000000), a 32-bit down counter at 25 MHz, read as microseconds. `make run`
uses -icount shift=5 (32 ns per instruction): the printed times are what a 31.25 MHz core would take at
one instruction per cycle. The run ends with an ARM semihosting exit (QEMU stops with the code; a real
board without a debugger takes the fault handler, which waits forever). The startup switches the FPU
on before main (hard-float code).
"""

from __future__ import annotations

from tinycc_ml.chips import MPS2_AN386

CHIP = MPS2_AN386
LINKER_SCRIPT_NAME = "mps2_an386.ld"
CFLAGS = MPS2_AN386.cflags
LDFLAGS = (*MPS2_AN386.ldflags, "-T", LINKER_SCRIPT_NAME)
SOURCES = ("startup.c", "board.c")  # besides main.c and the model
QEMU_RUN = ("qemu-system-arm -M mps2-an386 -display none -monitor none -serial stdio -icount shift=5 "
            "-semihosting-config enable=on,target=native -kernel firmware.elf")

BOARD_C = """\
/* MPS2 AN386 (Cortex-M4F; QEMU -M mps2-an386): CMSDK UART0 at 115200 baud, CMSDK TIMER0 at 25 MHz
 * (a 32-bit down counter) for the time. The run ends with an ARM semihosting exit: QEMU
 * (-semihosting-config enable=on) stops with the code; a real board without a debugger takes the
 * fault handler, which waits forever. */
#include <stdint.h>

#include "board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define UART0_DATA REG(0x40004000u)
#define UART0_STATE REG(0x40004004u)
#define UART0_CTRL REG(0x40004008u)
#define UART0_BAUDDIV REG(0x40004010u)
#define TIMER0_CTRL REG(0x40000000u)
#define TIMER0_VALUE REG(0x40000004u)
#define TIMER0_RELOAD REG(0x40000008u)
#define CLOCK_MHZ 25u

void board_init(void)
{
    UART0_BAUDDIV = 217u; /* 25 MHz / 115200 */
    UART0_CTRL = 1u;      /* transmitter on */
    TIMER0_RELOAD = 0xFFFFFFFFu;
    TIMER0_VALUE = 0xFFFFFFFFu;
    TIMER0_CTRL = 1u;     /* running, no interrupt */
}

void board_print(const char *text)
{
    while (*text) {
        while (UART0_STATE & 1u) { /* transmit buffer full */
        }
        UART0_DATA = (uint8_t)*text++;
    }
}

uint32_t board_time(void) { return 0u - TIMER0_VALUE; /* counts up */ }

uint32_t board_us_since(uint32_t start) { return (board_time() - start) / CLOCK_MHZ; }

void board_exit(int code)
{
    /* SYS_EXIT_EXTENDED (0x20) with ADP_Stopped_ApplicationExit passes the code on */
    uint32_t block[2] = {0x20026u, (uint32_t)code};
    register uint32_t r0 __asm__("r0") = 0x20;
    register uint32_t *r1 __asm__("r1") = block;
    __asm__ __volatile__("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {
    }
}
"""

STARTUP_C = """\
/* Cortex-M4F start-up for the MPS2 AN386: vector table, FPU on, copy .data, zero .bss, call main. */
#include <stdint.h>

extern uint32_t __stack_top, __data_load, __data_start, __data_end, __bss_start, __bss_end;
int main(void);
void reset_handler(void);

static void fault_handler(void)
{
    for (;;) {
    }
}

void reset_handler(void)
{
    /* CPACR: full access to CP10 and CP11 (the FPU) before any floating-point instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ __volatile__("dsb\\n\\tisb" ::: "memory");
    uint32_t *src = &__data_load, *dst = &__data_start;
    while (dst < &__data_end)
        *dst++ = *src++;
    for (dst = &__bss_start; dst < &__bss_end; dst++)
        *dst = 0;
    main();
    fault_handler();
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top,
    reset_handler,
    fault_handler, /* NMI */
    fault_handler, /* HardFault */
    fault_handler, /* MemManage */
    fault_handler, /* BusFault */
    fault_handler, /* UsageFault */
    0, 0, 0, 0,
    fault_handler, /* SVCall */
    fault_handler, /* DebugMonitor */
    0,
    fault_handler, /* PendSV */
    fault_handler, /* SysTick */
};
"""

LINKER_SCRIPT = """\
/* MPS2 AN386 (QEMU -M mps2-an386): 4 MB code SSRAM at 0 (the firmware), 4 MB data SSRAM at 0x20000000. */
MEMORY
{
    FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M
    RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 4M
}
ENTRY(reset_handler)
__stack_top = ORIGIN(RAM) + LENGTH(RAM);

SECTIONS
{
    .text :
    {
        KEEP(*(.vectors))
        *(.text*)
        *(.rodata*)
        . = ALIGN(4);
    } > FLASH
    .ARM.exidx : { *(.ARM.exidx*) } > FLASH
    __data_load = LOADADDR(.data);
    .data : ALIGN(4)
    {
        __data_start = .;
        *(.data*)
        . = ALIGN(4);
        __data_end = .;
    } > RAM AT > FLASH
    .bss (NOLOAD) : ALIGN(4)
    {
        __bss_start = .;
        *(.bss*)
        *(COMMON)
        . = ALIGN(4);
        __bss_end = .;
    } > RAM
}
"""


def project_files() -> dict[str, str]:
    """The board's files of a firmware project, by name (main.c, examples.h, board.h and the model come
    from backends/project.py)."""
    return {"board.c": BOARD_C, "startup.c": STARTUP_C, LINKER_SCRIPT_NAME: LINKER_SCRIPT}
