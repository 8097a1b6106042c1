/* The five board functions of tinycc-ml's portable harness on QEMU's Xtensa lx106 core (the ESP8266's):
 * the debug option's ICOUNT register as the counter (one per instruction executed), output and exit through
 * the simcall semihosting interface, and the start-up code (the firmware is loaded by QEMU, so .data is
 * already in place; .bss is zeroed here). */
#include <stdint.h>

#define SYS_EXIT 1
#define SYS_WRITE 4

extern uint32_t __bss_start[], __bss_end[];
int main(void);

/* the reset entry: the stack at the end of the data RAM, .bss zeroed by C, then main and its exit code */
__asm__(".section .entry.text, \"ax\"\n"
        ".align 4\n"
        ".Lstack_top: .word __stack\n"
        ".Lstart_c: .word tcm_board_start\n"
        ".global _start\n"
        ".align 4\n"
        "_start:\n"
        "    l32r a1, .Lstack_top\n"
        "    l32r a0, .Lstart_c\n"
        "    callx0 a0\n"
        "1:  j 1b\n");

static long simcall(long op, long a, long b, long c)
{
    register long a2 __asm__("a2") = op;
    register long a3 __asm__("a3") = a;
    register long a4 __asm__("a4") = b;
    register long a5 __asm__("a5") = c;
    __asm__ __volatile__("simcall" : "+r"(a2), "+r"(a3) : "r"(a4), "r"(a5) : "memory");
    return a2;
}

void tcm_board_exit(int code);

void tcm_board_start(void)
{
    for (uint32_t *p = __bss_start; p < __bss_end; ++p)
        *p = 0;
    tcm_board_exit(main());
}

void tcm_board_init(void)
{
    /* ICOUNT counts while ICOUNTLEVEL is above the current interrupt level: out of reset PS holds level 15
     * with EXCM set, so PS is cleared first (no interrupt is enabled: INTENABLE is 0 out of reset) */
    __asm__ __volatile__("movi a8, 0\n"
                         "wsr.ps a8\n"
                         "rsync\n"
                         "wsr.icount a8\n"
                         "movi a8, 1\n"
                         "wsr.icountlevel a8\n"
                         "isync\n" ::: "a8", "memory");
}

uint32_t tcm_board_count(void)
{
    uint32_t v;
    __asm__ __volatile__("rsr.icount %0" : "=r"(v));
    return v;
}

void tcm_board_write(const char *s)
{
    long n = 0;
    while (s[n])
        ++n;
    simcall(SYS_WRITE, 1, (long)(uintptr_t)s, n);
}

void tcm_board_exit(int code)
{
    simcall(SYS_EXIT, code, 0, 0);
    for (;;) {
    }
}

uint32_t *tcm_board_stack_limit(void) { return __bss_end; }
