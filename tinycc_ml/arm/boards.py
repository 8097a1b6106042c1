"""The firmware-project boards (`compile --project`, ``Board``) of the Arm targets: the nRF51822 (BBC
micro:bit, M0_BOARD; its start-up and linker script are the CMake module's), and of the Cortex-M4F and Cortex-M33
targets the MPS2 AN386 / AN505, the boards QEMU emulates as ``-M mps2-an386`` / ``-M mps2-an505``:
board.c (the five functions of project.py's board.h), startup.c, the linker script (mps2_an386.ld,
mps2_an505.ld) and `make run` (M4_BOARD, M33_BOARD).

UART: CMSDK APB UART0 (AN386 0x40004000, AN505 0x50200000 (its secure alias); QEMU's first serial port)
at 115200 baud. Time: the DWT cycle counter at the core clock (25 / 20 MHz), or where it does not count (QEMU
models none) CMSDK APB TIMER0 (0x40000000 / 0x50000000), a 32-bit down counter at the same clock, read as
microseconds; the demo prints which. `make run` uses -icount shift=5 (32 ns per instruction): the
printed times are what a 31.25 MHz core would take at one instruction per cycle. The run ends with an
ARM semihosting exit (QEMU stops with the code; a real board without a debugger takes the fault
handler, which waits forever). The startup switches the FPU on before main (hard-float code). The
AN505 runs in the secure state (QEMU starts it there).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinycc_ml.arm.chips import MPS2_AN386, MPS2_AN505, NRF51822, NRF52840, STM32F405
from tinycc_ml.target import Board, Chip, cmake_support_file

SEMIHOSTING_EXIT_C = """\
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


# the DWT cycle counter of the Cortex-M3/M4/M33: 32 bits at the core clock; QEMU models none (it reads 0), so a
# board checks that it counts and otherwise keeps a timer of its own
DWT_C = """\
#define DEMCR REG(0xE000EDFCu)
#define DWT_CTRL REG(0xE0001000u)
#define DWT_CYCCNT REG(0xE0001004u)

static int cycle_counter; /* 1: the DWT cycle counter counts (the chip's; QEMU's reads 0) */

static void cycle_counter_start(void)
{
    DEMCR |= 1u << 24; /* TRCENA: the DWT on */
    DWT_CYCCNT = 0u;
    DWT_CTRL |= 1u;    /* CYCCNTENA */
    __asm__ __volatile__("nop\\n\\tnop\\n\\tnop\\n\\tnop" ::: "memory");
    cycle_counter = DWT_CYCCNT != 0u;
}
"""

M0_BOARD_C = """\
/* nRF51822 (BBC micro:bit): UART TX on P0.24 at 115200 baud, TIMER0 at 1 MHz. The run ends with an
 * ARM semihosting exit: QEMU (-semihosting-config enable=on) stops with the code; a real chip
 * without a debugger takes the fault handler, which waits forever. */
#include <stdint.h>

#include "board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define UART_STARTTX REG(0x40002008u)
#define UART_TXDRDY REG(0x4000211Cu)
#define UART_ENABLE REG(0x40002500u)
#define UART_PSELTXD REG(0x4000250Cu)
#define UART_TXD REG(0x4000251Cu)
#define UART_BAUDRATE REG(0x40002524u)
#define TIMER0_START REG(0x40008000u)
#define TIMER0_CAPTURE0 REG(0x40008040u)
#define TIMER0_MODE REG(0x40008504u)
#define TIMER0_BITMODE REG(0x40008508u)
#define TIMER0_PRESCALER REG(0x40008510u)
#define TIMER0_CC0 REG(0x40008540u)

void board_init(void)
{
    UART_PSELTXD = 24;
    UART_BAUDRATE = 0x01D7E000u; /* 115200 */
    UART_ENABLE = 4;
    UART_STARTTX = 1;
    TIMER0_MODE = 0;
    TIMER0_BITMODE = 3;   /* 32 bits */
    TIMER0_PRESCALER = 4; /* 16 MHz / 2^4 */
    TIMER0_START = 1;
}

void board_print(const char *text)
{
    while (*text) {
        UART_TXDRDY = 0;
        UART_TXD = (uint8_t)*text++;
        while (!UART_TXDRDY) {
        }
    }
}

void board_print_clock(void) { board_print("TIMER0 at 1 MHz (16 MHz / 16), 32 bits"); }

uint32_t board_time(void)
{
    TIMER0_CAPTURE0 = 1;
    return TIMER0_CC0;
}

uint32_t board_us_since(uint32_t start) { return board_time() - start; }

""" + SEMIHOSTING_EXIT_C




# Cortex-M0 start-up for the nRF51822 (vector table, .data copied, .bss zeroed, main) and its linker script;
# the sections part (from ENTRY on) is what every ARM board of the firmware projects links with
M0_STARTUP_C = cmake_support_file("nrf51_startup.c")
M0_LINKER_SCRIPT = cmake_support_file("nrf51.ld")
ARM_LINKER_SECTIONS = M0_LINKER_SCRIPT[M0_LINKER_SCRIPT.index("ENTRY("):]


M0_BOARD = Board(
    title="nRF51822 (BBC micro:bit)", chip=NRF51822,
    tools=("CC = arm-none-eabi-gcc", "OBJCOPY = arm-none-eabi-objcopy", "SIZE = arm-none-eabi-size",
           "QEMU = qemu-system-arm"),
    needs="arm-none-eabi-gcc with newlib and make (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi make); "
          "qemu-system-arm to run it simulated",
    board_c=M0_BOARD_C,
    run=("\t$(QEMU) -M microbit -display none -monitor none -serial stdio -icount shift=6 "
         "-semihosting-config enable=on,target=native -kernel firmware.elf",),
    files={"startup.c": M0_STARTUP_C, "nrf51.ld": M0_LINKER_SCRIPT},
    linker_script="nrf51.ld", sources=("startup.c",),
    flash_hint="copy firmware.hex to the MICROBIT drive to flash a micro:bit",
    make_intro=("# make: firmware.elf and firmware.hex (copy the .hex to the MICROBIT drive); make run: QEMU.",
                "# make FLOAT_INPUT=1: store float inputs and quantise them on the chip."),
)


@dataclass(frozen=True)
class Mps2:
    """What differs between the MPS2 images."""

    chip: Chip
    machine: str  # qemu-system-arm -M
    uart: int  # CMSDK UART0 base (the secure alias on the AN505)
    timer: int  # CMSDK TIMER0 base
    linker_script: str  # its file name in the project


AN386 = Mps2(MPS2_AN386, "mps2-an386", 0x40004000, 0x40000000, "mps2_an386.ld")
AN505 = Mps2(MPS2_AN505, "mps2-an505", 0x50200000, 0x50000000, "mps2_an505.ld")

BOARD_C = """\
/* @NAME@ (QEMU -M @MACHINE@): CMSDK UART0 at 115200 baud. Time: the DWT cycle counter at the @MHZ@ MHz
 * core clock, or where it does not count (QEMU models none) CMSDK TIMER0, a 32-bit down counter at the same
 * clock. The run ends with an ARM semihosting exit: QEMU (-semihosting-config enable=on) stops with the code;
 * a real board without a debugger takes the fault handler, which waits forever. */
#include <stdint.h>

#include "board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define UART0_DATA REG(@UART0@u)
#define UART0_STATE REG(@UART4@u)
#define UART0_CTRL REG(@UART8@u)
#define UART0_BAUDDIV REG(@UART16@u)
#define TIMER0_CTRL REG(@TIMER0@u)
#define TIMER0_VALUE REG(@TIMER4@u)
#define TIMER0_RELOAD REG(@TIMER8@u)
#define CLOCK_MHZ @MHZ@u
""" + DWT_C + """
void board_init(void)
{
    UART0_BAUDDIV = @BAUDDIV@u; /* @MHZ@ MHz / 115200 */
    UART0_CTRL = 1u;      /* transmitter on */
    TIMER0_RELOAD = 0xFFFFFFFFu;
    TIMER0_VALUE = 0xFFFFFFFFu;
    TIMER0_CTRL = 1u;     /* running, no interrupt */
    cycle_counter_start();
}

void board_print(const char *text)
{
    while (*text) {
        while (UART0_STATE & 1u) { /* transmit buffer full */
        }
        UART0_DATA = (uint8_t)*text++;
    }
}

void board_print_clock(void)
{
    board_print(cycle_counter ? "DWT cycle counter at @MHZ@ MHz"
                              : "CMSDK TIMER0 at @MHZ@ MHz (no DWT cycle counter, as in QEMU)");
}

uint32_t board_time(void) { return cycle_counter ? DWT_CYCCNT : 0u - TIMER0_VALUE; /* counts up */ }

uint32_t board_us_since(uint32_t start) { return (board_time() - start) / CLOCK_MHZ; }

""" + SEMIHOSTING_EXIT_C

STARTUP_C = """\
/* Cortex-M4F / M33 start-up for the MPS2 boards: vector table, FPU on, copy .data, zero .bss, call main. */
#include <stdint.h>

extern uint32_t __stack_top, __data_load, __data_start, __data_end, __bss_start, __bss_end;
int main(void);
void reset_handler(void);

static void fault_handler(void)
{
    for (;;) {
    }
}

/* a board.c that counts SysTick's wraps defines it; elsewhere SysTick never interrupts */
void systick_handler(void) __attribute__((weak, alias("fault_handler")));

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
    systick_handler,
};
"""

LINKER_SCRIPT = """\
/* @NAME@ (QEMU -M @MACHINE@): 4 MB code SSRAM at @FLASH@ (the firmware), 4 MB data SSRAM at @RAM@. */
MEMORY
{
    FLASH (rx) : ORIGIN = @FLASH@, LENGTH = 4M
    RAM (rwx)  : ORIGIN = @RAM@, LENGTH = 4M
}
""" + ARM_LINKER_SECTIONS


def _fill(text: str, board: Mps2) -> str:
    chip = board.chip
    values = {"NAME": chip.name, "MACHINE": board.machine, "MHZ": str(chip.clock_hz // 1_000_000),
              "BAUDDIV": str(round(chip.clock_hz / 115200)), "FLASH": f"{chip.flash_base:#010x}",
              "RAM": f"{chip.ram_base:#010x}"}
    values.update({f"UART{k}": f"{board.uart + k:#010x}" for k in (0, 4, 8, 16)})
    values.update({f"TIMER{k}": f"{board.timer + k:#010x}" for k in (0, 4, 8)})
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


def board(mps2: Mps2) -> Board:
    """The firmware-project Board of one MPS2 image."""
    machine = mps2.machine
    return Board(
        title=f"{mps2.chip.name}, QEMU -M {machine}", chip=mps2.chip,
        tools=("CC = arm-none-eabi-gcc", "OBJCOPY = arm-none-eabi-objcopy", "SIZE = arm-none-eabi-size",
               "QEMU = qemu-system-arm"),
        needs="arm-none-eabi-gcc with newlib and make (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi make); "
              "qemu-system-arm to run it simulated",
        board_c=_fill(BOARD_C, mps2),
        run=(f"\t$(QEMU) -M {machine} -display none -monitor none -serial stdio -icount shift=5 "
             "-semihosting-config enable=on,target=native -kernel firmware.elf",),
        files={"startup.c": STARTUP_C, mps2.linker_script: _fill(LINKER_SCRIPT, mps2)},
        linker_script=mps2.linker_script, sources=("startup.c",),
        flash_hint="on a real MPS2 board, copy firmware.hex's image to its SD card (images.txt); on another "
                   "Cortex-M part, use its own board.c, startup and linker script",
        make_intro=(f"# make: firmware.elf and firmware.hex; make run: QEMU -M {machine} (32 ns per instruction).",
                    "# make FLOAT_INPUT=1: store float inputs and quantise them on the chip."),
    )


M4_BOARD = board(AN386)
M33_BOARD = board(AN505)


# ---------------------------------------------------------------- real Cortex-M4F parts (--board)

STM32F405_BOARD_C = """\
/* STM32F405 (Netduino Plus 2, STM32F4 boards; QEMU -M netduinoplus2): USART1 TX on PA9 (AF7) at 115200
 * baud from the 16 MHz HSI clock the reset leaves the chip on (no PLL set up: the model runs at 16 MHz).
 * Time: the DWT cycle counter at 16 MHz. QEMU models no DWT (it reads 0) and runs SysTick at 168 MHz
 * whatever the RCC says: there SysTick at 168 MHz, its 24-bit wraps counted by its interrupt. The run ends
 * with an ARM semihosting exit: QEMU (-semihosting-config enable=on) stops with the code; a real board
 * without a debugger takes the fault handler, which waits forever. */
#include <stdint.h>

#include "board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_AHB1ENR REG(0x40023830u)
#define RCC_APB2ENR REG(0x40023844u)
#define GPIOA_MODER REG(0x40020000u)
#define GPIOA_AFRH REG(0x40020024u)
#define USART1_SR REG(0x40011000u)
#define USART1_DR REG(0x40011004u)
#define USART1_BRR REG(0x40011008u)
#define USART1_CR1 REG(0x4001100Cu)
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define CLOCK_MHZ 16u        /* HSI: the core clock after reset */
#define QEMU_SYSTICK_MHZ 168u /* QEMU's netduinoplus2 SysTick, at the part's top clock */
""" + DWT_C + """
static volatile uint32_t systick_wraps;

void systick_handler(void) { ++systick_wraps; }

void board_init(void)
{
    RCC_AHB1ENR |= 1u;      /* GPIOA clock */
    RCC_APB2ENR |= 1u << 4; /* USART1 clock */
    GPIOA_MODER = (GPIOA_MODER & ~(3u << 18)) | (2u << 18); /* PA9: alternate function */
    GPIOA_AFRH = (GPIOA_AFRH & ~(0xFu << 4)) | (7u << 4);   /* AF7: USART1_TX */
    USART1_BRR = 139u;                   /* 16 MHz / 115200 */
    USART1_CR1 = (1u << 13) | (1u << 3); /* enabled, transmitter on */
    cycle_counter_start();
    if (!cycle_counter) {
        SYST_RVR = 0xFFFFFFu;
        SYST_CVR = 0u;
        SYST_CSR = 7u; /* running on the core clock, its interrupt counting the wraps */
    }
}

void board_print(const char *text)
{
    while (*text) {
        while (!(USART1_SR & (1u << 7))) { /* transmit register not empty */
        }
        USART1_DR = (uint8_t)*text++;
    }
    while (!(USART1_SR & (1u << 6))) { /* until the last byte has left */
    }
}

void board_print_clock(void)
{
    board_print(cycle_counter ? "DWT cycle counter at 16 MHz (HSI)"
                              : "SysTick at 168 MHz, wraps counted (no DWT cycle counter: QEMU's netduinoplus2)");
}

uint32_t board_time(void)
{
    uint32_t wraps, value;
    if (cycle_counter)
        return DWT_CYCCNT;
    do { /* again when the interrupt counted a wrap in between */
        wraps = systick_wraps;
        value = SYST_CVR;
    } while (wraps != systick_wraps);
    return (wraps << 24) | (0xFFFFFFu - value); /* counts up */
}

uint32_t board_us_since(uint32_t start)
{
    return (board_time() - start) / (cycle_counter ? CLOCK_MHZ : QEMU_SYSTICK_MHZ);
}

""" + SEMIHOSTING_EXIT_C

# the nRF52's UART and TIMER0 keep the nRF51's registers; the nRF52840 DK's serial port is on P0.06
NRF52840_BOARD_C = M0_BOARD_C.replace("/* nRF51822 (BBC micro:bit): UART TX on P0.24",
                                      "/* nRF52840 (nRF52840 DK: its USB serial port): UART TX on P0.06").replace(
    "UART_PSELTXD = 24;", "UART_PSELTXD = 6;")


def _memory_script(title: str, chip: Chip) -> str:
    return (f"/* {title}: {chip.flash // 1024} KB of flash at {chip.flash_base:#010x}, {chip.ram // 1024} KB of RAM "
            f"at {chip.ram_base:#010x}. */\nMEMORY\n{{\n"
            f"    FLASH (rx) : ORIGIN = {chip.flash_base:#010x}, LENGTH = {chip.flash // 1024}K\n"
            f"    RAM (rwx)  : ORIGIN = {chip.ram_base:#010x}, LENGTH = {chip.ram // 1024}K\n}}\n"
            + ARM_LINKER_SECTIONS)


def part_board(title: str, chip: Chip, board_c: str, script: str, run: tuple[str, ...], flash_hint: str,
               intro: str) -> Board:
    """The firmware-project Board of a real Cortex-M4F part: the MPS2 start-up (vector table, FPU on, .data,
    .bss), its own linker script and board.c."""
    return Board(
        title=title, chip=chip,
        tools=("CC = arm-none-eabi-gcc", "OBJCOPY = arm-none-eabi-objcopy", "SIZE = arm-none-eabi-size",
               "QEMU = qemu-system-arm"),
        needs="arm-none-eabi-gcc with newlib and make (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi make)",
        board_c=board_c, run=run, files={"startup.c": STARTUP_C, script: _memory_script(title, chip)},
        linker_script=script, sources=("startup.c",), flash_hint=flash_hint,
        make_intro=(intro, "# make FLOAT_INPUT=1: store float inputs and quantise them on the chip."),
    )


STM32F405_BOARD = part_board(
    "STM32F405 (Cortex-M4F), QEMU -M netduinoplus2", STM32F405, STM32F405_BOARD_C, "stm32f405.ld",
    ("\t$(QEMU) -M netduinoplus2 -display none -monitor none -serial stdio -icount shift=5 "
     "-semihosting-config enable=on,target=native -kernel firmware.elf",),
    "flash firmware.hex at 0x08000000 (st-flash write firmware.bin 0x08000000, or STM32CubeProgrammer); "
    "USART1 TX is PA9",
    "# make: firmware.elf, firmware.hex; make run: QEMU -M netduinoplus2 (32 ns per instruction).")

NRF52840_BOARD = part_board(
    "nRF52840 (Cortex-M4F)", NRF52840, NRF52840_BOARD_C, "nrf52840.ld",
    ("\t@echo 'no QEMU machine models the nRF52840: flash firmware.hex (nrfjprog --program firmware.hex "
     "--chiperase --reset) and read its UART (P0.06, 115200 baud)'; exit 2",),
    "flash firmware.hex with nrfjprog or the DK's J-Link drive; it is linked at 0 (no SoftDevice or bootloader: "
    "for one, move FLASH's ORIGIN in nrf52840.ld past it)",
    "# make: firmware.elf, firmware.hex for the nRF52840 (no simulator: make run says how to flash it).")
