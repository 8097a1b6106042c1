/* Cortex-M0 start-up for the nRF51822: vector table, copy .data, zero .bss, call main. */
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
    0, 0, 0, 0, 0, 0, 0,
    fault_handler, /* SVCall */
    0, 0,
    fault_handler, /* PendSV */
    fault_handler, /* SysTick */
};
