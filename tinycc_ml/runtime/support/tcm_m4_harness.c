/* tinycc-ml measurement harness for the MPS2 boards with a CMSDK APB timer: Cortex-M4 (AN386, QEMU
 * -M mps2-an386) and Cortex-M33 (AN505, -M mps2-an505; -DTCM_TIMER_BASE=0x50000000 -DTCM_TIMER_IRQ=3,
 * the secure alias of the IoTKit's TIMER0), run under -icount shift=10: the timer and the timing
 * stubs; the rest is tcm_arm_harness.h (configuration, output lines).
 * Instructions are counted with TIMER0, a 32-bit down counter at the system clock (25 MHz on the
 * AN386, 20 MHz on the AN505): under -icount shift=10 one instruction is 1024 ns = 25.6 (20.48) ticks
 * (QEMU models no DWT cycle counter; at shift=0 the timer would tick once per 40 (50) instructions).
 * The calls go through a fixed asm stub (read the timer; blx fn; read it again), so ticks per
 * instruction minus the back-to-back calibration minus 1 (the BLX) is exactly the callee's
 * instructions through its return. The timer's interrupt (reaching 0 from TCM_MAX_TICKS) is the
 * watchdog. */
#include <stdint.h>

#ifndef TCM_TIMER_BASE
#define TCM_TIMER_BASE 0x40000000
#endif
#ifndef TCM_TIMER_IRQ
#define TCM_TIMER_IRQ 8
#endif
#define TCM_STR_(x) #x
#define TCM_STR(x) TCM_STR_(x)
#define TIMER0_CTRL (*(volatile uint32_t *)(TCM_TIMER_BASE + 0u))
#define TIMER0_VALUE (*(volatile uint32_t *)(TCM_TIMER_BASE + 4u))
#define TIMER0_RELOAD (*(volatile uint32_t *)(TCM_TIMER_BASE + 8u))
#define NVIC_ISER (*(volatile uint32_t *)0xE000E100u)
#ifndef TCM_MAX_TICKS
#define TCM_MAX_TICKS 0xFFFFFFFFu
#endif

volatile uint32_t tcm_takes[2]; /* the stub's two timer reads */

#define TCM_TIMER_SETUP()                                      \
    do {                                                       \
        TIMER0_RELOAD = TCM_MAX_TICKS;                         \
        TIMER0_VALUE = TCM_MAX_TICKS;                          \
        NVIC_ISER = 1u << TCM_TIMER_IRQ;                       \
        TIMER0_CTRL = 9;     /* enable, interrupt at zero */   \
    } while (0)
#define TCM_TIMER_RESTART() (TIMER0_VALUE = TCM_MAX_TICKS)
/* negated: the harness protocol's times count up */
#define TCM_CAPTURES(t0, t1) ((t0) = 0u - tcm_takes[0], (t1) = 0u - tcm_takes[1])

/* tcm_timed_p/_s(x, s, fn): read TIMER0, blx fn(x, s), read it again; tcm_timed_null: both reads. */
__asm__(
    "    .section .text.tcm_timed,\"ax\",%progbits\n"
    "    .syntax unified\n"
    "    .thumb\n"
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
    "    ldr r4, =" TCM_STR(TCM_TIMER_BASE) " + 4\n"
    "    ldr r6, =tcm_takes\n"
    "    ldr r5, [r4]\n"
    "    str r5, [r6]\n"
    "    blx r2\n"
    "    ldr r5, [r4]\n"
    "    str r5, [r6, #4]\n"
    "    pop {r4, r5, r6, pc}\n"
    "    .thumb_func\n"
    "tcm_timed_null:\n"
    "    push {r4, r5, r6, lr}\n"
    "    ldr r4, =" TCM_STR(TCM_TIMER_BASE) " + 4\n"
    "    ldr r6, =tcm_takes\n"
    "    ldr r5, [r4]\n"
    "    str r5, [r6]\n"
    "    ldr r5, [r4]\n"
    "    str r5, [r6, #4]\n"
    "    pop {r4, r5, r6, pc}\n"
    "    .ltorg\n"
    "    .text\n");

#include "tcm_arm_harness.h"
