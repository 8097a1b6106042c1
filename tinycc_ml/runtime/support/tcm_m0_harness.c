/* tinycc-ml Cortex-M0 measurement harness (nRF51822), run under QEMU -M microbit -icount shift=10:
 * the nRF51 TIMER0 and the timing stubs; the rest is tcm_arm_harness.h (configuration, output lines).
 * Instructions are counted with TIMER0 at 16 MHz: under -icount shift=10 one instruction is
 * 1024 ns = 16.384 ticks. The calls go through a fixed asm stub (capture 0; blx fn; capture 1), so
 * ticks/16.384 minus the back-to-back calibration minus 1 (the BLX) is exactly the callee's
 * instructions through its return. */
#include <stdint.h>

#define TIMER0_START (*(volatile uint32_t *)0x40008000u)
#define TIMER0_CLEAR (*(volatile uint32_t *)0x4000800Cu)
#define TIMER0_CAPTURE0 (*(volatile uint32_t *)0x40008040u)
#define TIMER0_MODE (*(volatile uint32_t *)0x40008504u)
#define TIMER0_BITMODE (*(volatile uint32_t *)0x40008508u)
#define TIMER0_PRESCALER (*(volatile uint32_t *)0x40008510u)
#define TIMER0_CC0 (*(volatile uint32_t *)0x40008540u)
#define TIMER0_CC1 (*(volatile uint32_t *)0x40008544u)
#define TIMER0_INTENSET (*(volatile uint32_t *)0x40008304u)
#define TIMER0_CC2 (*(volatile uint32_t *)0x40008548u)
#define NVIC_ISER (*(volatile uint32_t *)0xE000E100u)
#ifndef TCM_MAX_TICKS
#define TCM_MAX_TICKS 0xFFFFFFFFu
#endif

#define TCM_TIMER_SETUP()                                      \
    do {                                                       \
        TIMER0_MODE = 0;                                       \
        TIMER0_BITMODE = 3;                                    \
        TIMER0_PRESCALER = 0;                                  \
        TIMER0_CLEAR = 1;                                      \
        TIMER0_CC2 = TCM_MAX_TICKS;                            \
        TIMER0_INTENSET = 1u << 18; /* COMPARE[2] */           \
        NVIC_ISER = 1u << 8;        /* TIMER0 IRQ */           \
        TIMER0_START = 1;                                      \
    } while (0)
#define TCM_TIMER_RESTART() (TIMER0_CLEAR = 1)
#define TCM_CAPTURES(t0, t1) ((t0) = TIMER0_CC0, (t1) = TIMER0_CC1)

/* tcm_timed_p/_s(x, s, fn): TIMER0 capture 0, blx fn(x, s), capture 1; tcm_timed_null: both captures. */
__asm__(
    "    .section .text.tcm_timed,\"ax\",%progbits\n"
    "    .global tcm_timed_p\n"
    "    .global tcm_timed_s\n"
    "    .global tcm_timed_null\n"
    "    .global tcm_task_v\n"
    "    .global tcm_task_l\n"
    "    .thumb_func\n"
    "tcm_timed_p:\n"
    "    .thumb_func\n"
    "tcm_timed_s:\n"
    "    .thumb_func\n"
    "tcm_task_v:\n"
    "    .thumb_func\n"
    "tcm_task_l:\n"
    "    push {r4, r5, r6, lr}\n"
    "    ldr r4, =0x40008040\n"
    "    movs r5, #1\n"
    "    str r5, [r4, #0]\n"
    "    blx r2\n"
    "    str r5, [r4, #4]\n"
    "    pop {r4, r5, r6, pc}\n"
    "    .thumb_func\n"
    "tcm_timed_null:\n"
    "    push {r4, r5, r6, lr}\n"
    "    ldr r4, =0x40008040\n"
    "    movs r5, #1\n"
    "    str r5, [r4, #0]\n"
    "    str r5, [r4, #4]\n"
    "    pop {r4, r5, r6, pc}\n"
    "    .ltorg\n"
    "    .text\n");

#include "tcm_arm_harness.h"
