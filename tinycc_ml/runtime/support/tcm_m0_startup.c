/* tinycc-ml Cortex-M startup (nRF51 / Cortex-M0, MPS2 / Cortex-M4F, M33): vector table, .data/.bss set-up,
 * the FPU switched on (hard-float builds), semihosting exit. */
#include <stdint.h>

#ifndef TCM_TIMER_IRQ
#define TCM_TIMER_IRQ 8
#endif

extern uint32_t __stack_top, __data_load, __data_start, __data_end, __bss_start, __bss_end;
int main(void);
void tcm_reset(void);
void tcm_exit(int code);

/* ARM semihosting call: bkpt 0xAB with r0 = operation, r1 = argument */
int tcm_semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ __volatile__("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void tcm_exit(int code)
{
    /* SYS_EXIT_EXTENDED with ADP_Stopped_ApplicationExit passes the code to QEMU's exit status */
    uint32_t block[2] = {0x20026u, (uint32_t)code};
    tcm_semihost(0x20, block);
    for (;;) {
    }
}

static void tcm_fault(void)
{
    static const char msg[] = "TCM-FAULT\n";
    tcm_semihost(0x04, msg);
    tcm_exit(3);
}

void tcm_reset(void)
{
#if defined(__ARM_FP)
    /* CPACR: full access to CP10 and CP11 (the FPU) before any floating-point instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ __volatile__("dsb\n\tisb" ::: "memory");
#endif
    uint32_t *src = &__data_load, *dst = &__data_start;
    while (dst < &__data_end)
        *dst++ = *src++;
    for (dst = &__bss_start; dst < &__bss_end; dst++)
        *dst = 0;
    tcm_exit(main());
}

/* the harness overrides this to stop a hung call (its timer's watchdog interrupt) */
void tcm_irq_timer0(void) __attribute__((weak, alias("tcm_fault")));

__attribute__((section(".tcm_vectors"), used))
static void (*const tcm_vectors[16 + 32])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top,
    tcm_reset,
    tcm_fault, /* NMI */
    tcm_fault, /* HardFault */
    0, 0, 0, 0, 0, 0, 0,
    tcm_fault, /* SVCall */
    0, 0,
    tcm_fault, /* PendSV */
    tcm_fault, /* SysTick */
    [16 + TCM_TIMER_IRQ] = tcm_irq_timer0, /* nRF51 TIMER0, MPS2 CMSDK TIMER0 */
};
