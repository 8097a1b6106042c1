/* The five board functions of tinycc-ml's portable harness on qemu-system-riscv32 -M virt:
 * minstret as the counter (exact under -icount shift=0), output and exit through RISC-V semihosting. */
#include <stdint.h>

#define SYS_WRITE0 0x04
#define SYS_EXIT 0x18
#define ADP_STOPPED_APPLICATION_EXIT 0x20026
#define ADP_STOPPED_RUNTIME_ERROR 0x20023

extern uint32_t __bss_end[];

static long semihost(long op, const void *arg)
{
    register long a0 __asm__("a0") = op;
    register const void *a1 __asm__("a1") = arg;
    /* the semihosting sequence: three uncompressed instructions, none across a page boundary */
    __asm__ __volatile__(".option push\n.option norvc\n.balign 16\n"
                         "slli zero, zero, 0x1f\nebreak\nsrai zero, zero, 7\n.option pop\n"
                         : "+r"(a0)
                         : "r"(a1)
                         : "memory");
    return a0;
}

void tcm_board_init(void) {}

uint32_t tcm_board_count(void)
{
    uint32_t v;
    __asm__ __volatile__(".option push\n.option arch, +zicsr\ncsrr %0, minstret\n.option pop\n" : "=r"(v));
    return v;
}

void tcm_board_write(const char *s) { semihost(SYS_WRITE0, s); }

void tcm_board_exit(int code)
{
    semihost(SYS_EXIT, (const void *)(uintptr_t)(code == 0 ? ADP_STOPPED_APPLICATION_EXIT : ADP_STOPPED_RUNTIME_ERROR));
    for (;;) {
    }
}

uint32_t *tcm_board_stack_limit(void)
{
    return (uint32_t *)(((uintptr_t)__bss_end + 3u) & ~(uintptr_t)3u);
}
