/* tinycc-ml Cortex-M0 measurement harness, run under QEMU -M microbit -icount shift=10.
 * Configured by -D: TCM_HEADER ("path"), TCM_PREFIX, TCM_IN_T, TCM_SCORE_T, TCM_D, TCM_NS, and
 * TCM_TASK (1: also <prefix>_predict_value, 2: also <prefix>_predict_labels; its stack counts, not its time).
 * Inputs come from tcm_inputs.c (generated, in flash). Instructions are counted with the nRF51
 * TIMER0 at 16 MHz: under -icount shift=10 one instruction is 1024 ns = 16.384 ticks.
 * The calls go through a fixed asm stub (capture 0; blx fn; capture 1), so ticks/16.384 minus the
 * back-to-back calibration minus 1 (the BLX) is exactly the callee's instructions through its return.
 * Stack use: the free stack is painted before each call and scanned after it. Results are
 * printed as hex lines through semihosting SYS_WRITE0. */
#include <stdint.h>
#include TCM_HEADER

#define TCM_CAT_(a, b) a##b
#define TCM_CAT(a, b) TCM_CAT_(a, b)
#define TCM_PREDICT TCM_CAT(TCM_PREFIX, _predict)
#define TCM_SCORES TCM_CAT(TCM_PREFIX, _scores)
#define TCM_VALUE TCM_CAT(TCM_PREFIX, _predict_value)
#define TCM_LABELS TCM_CAT(TCM_PREFIX, _predict_labels)
#define TCM_BARRIER() __asm__ __volatile__("" ::: "memory")
#ifndef TCM_TASK
#define TCM_TASK 0
#endif
#if TCM_TASK == 1
#define TCM_TASK_BYTES sizeof(TCM_SCORE_T)
#elif TCM_TASK == 2
#define TCM_TASK_BYTES TCM_NS
#else
#define TCM_TASK_BYTES 0
#endif

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
#define TCM_PAINT 0xC5A5C5A5u
#ifndef TCM_MAX_TICKS
#define TCM_MAX_TICKS 0xFFFFFFFFu
#endif

extern const uint8_t tcm_inputs[];
extern const uint32_t tcm_n_inputs;
extern uint32_t __bss_end;
int tcm_semihost(int op, const void *arg);
void tcm_exit(int code);
void tcm_irq_timer0(void);

static TCM_IN_T tcm_x[TCM_D];
static TCM_SCORE_T tcm_s[TCM_NS];
#if TCM_TASK == 2
static uint8_t tcm_labels[TCM_NS];
#endif
static char tcm_line[64 + 2 * (8 + sizeof tcm_s + TCM_TASK_BYTES)];

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
int32_t tcm_timed_p(const TCM_IN_T *x, TCM_SCORE_T *s, int (*fn)(const TCM_IN_T *));
void tcm_timed_s(const TCM_IN_T *x, TCM_SCORE_T *s, void (*fn)(const TCM_IN_T *, TCM_SCORE_T *));
void tcm_timed_null(void);
/* the task's entry point through the same stub (same stack accounting; r0 comes back untouched) */
TCM_SCORE_T tcm_task_v(const TCM_IN_T *x, void *unused, TCM_SCORE_T (*fn)(const TCM_IN_T *));
void tcm_task_l(const TCM_IN_T *x, uint8_t *out, void (*fn)(const TCM_IN_T *, uint8_t *));

static char *tcm_hex(char *p, const void *v, uint32_t n)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *b = (const uint8_t *)v;
    for (uint32_t i = 0; i < n; i++) {
        *p++ = digits[b[i] >> 4];
        *p++ = digits[b[i] & 15];
    }
    return p;
}

/* Always inlined so that painting/scanning happen in main's frame, below which the call goes. */
static inline __attribute__((always_inline)) uint32_t *tcm_sp(void)
{
    uint32_t *sp;
    __asm__ __volatile__("mov %0, sp" : "=r"(sp));
    return sp;
}

#define TCM_PAINT_STACK(sp)                                    \
    do {                                                       \
        for (uint32_t *q_ = &__bss_end; q_ < (sp); q_++)       \
            *(volatile uint32_t *)q_ = TCM_PAINT;              \
    } while (0)

#define TCM_STACK_USED(sp, out)                                \
    do {                                                       \
        uint32_t *q_ = &__bss_end;                             \
        while (q_ < (sp) && *(volatile uint32_t *)q_ == TCM_PAINT) \
            q_++;                                              \
        (out) = (uint32_t)((sp) - q_) * 4u;                    \
    } while (0)

/* Watchdog: TIMER0 is cleared before each measured call; reaching CC[2] means a hang. */
void tcm_irq_timer0(void)
{
    static const char msg[] = "TCM-HANG\n";
    tcm_semihost(0x04, msg);
    tcm_exit(4);
}

int main(void)
{
    TIMER0_MODE = 0;
    TIMER0_BITMODE = 3;
    TIMER0_PRESCALER = 0;
    TIMER0_CLEAR = 1;
    TIMER0_CC2 = TCM_MAX_TICKS;
    TIMER0_INTENSET = 1u << 18; /* COMPARE[2] */
    NVIC_ISER = 1u << 8;        /* TIMER0 IRQ */
    TIMER0_START = 1;
    tcm_timed_null();
    uint32_t c0 = TIMER0_CC0, c1 = TIMER0_CC1;
    char *p = tcm_line;
    *p++ = 'C';
    p = tcm_hex(p, &c0, 4);
    p = tcm_hex(p, &c1, 4);
    *p++ = '\n';
    *p = 0;
    tcm_semihost(0x04, tcm_line);

    for (uint32_t k = 0; k < tcm_n_inputs; k++) {
        const uint8_t *src = tcm_inputs + k * sizeof tcm_x;
        uint8_t *dst = (uint8_t *)tcm_x;
        for (uint32_t i = 0; i < sizeof tcm_x; i++)
            dst[i] = src[i];
        uint32_t *sp = tcm_sp();
        uint32_t stack_p, stack_s;
        TCM_PAINT_STACK(sp);
        TCM_BARRIER();
        TIMER0_CLEAR = 1;
        int32_t pred = tcm_timed_p(tcm_x, tcm_s, TCM_PREDICT);
        uint32_t t0 = TIMER0_CC0, t1 = TIMER0_CC1;
        TCM_BARRIER();
        TCM_STACK_USED(sp, stack_p);
        TCM_PAINT_STACK(sp);
        TCM_BARRIER();
        TIMER0_CLEAR = 1;
        tcm_timed_s(tcm_x, tcm_s, TCM_SCORES);
        TCM_BARRIER();
        TCM_STACK_USED(sp, stack_s);
        if (stack_s > stack_p)
            stack_p = stack_s;
#if TCM_TASK != 0
        TCM_PAINT_STACK(sp);
        TCM_BARRIER();
        TIMER0_CLEAR = 1;
#if TCM_TASK == 1
        TCM_SCORE_T value = tcm_task_v(tcm_x, 0, TCM_VALUE);
#else
        tcm_task_l(tcm_x, tcm_labels, TCM_LABELS);
#endif
        TCM_BARRIER();
        TCM_STACK_USED(sp, stack_s);
        if (stack_s > stack_p)
            stack_p = stack_s;
#endif
        p = tcm_line;
        *p++ = 'R';
        p = tcm_hex(p, &pred, 4);
        p = tcm_hex(p, &t0, 4);
        p = tcm_hex(p, &t1, 4);
        p = tcm_hex(p, &stack_p, 4);
        p = tcm_hex(p, tcm_s, sizeof tcm_s);
#if TCM_TASK == 1
        p = tcm_hex(p, &value, sizeof value);
#elif TCM_TASK == 2
        p = tcm_hex(p, tcm_labels, sizeof tcm_labels);
#endif
        *p++ = '\n';
        *p = 0;
        tcm_semihost(0x04, tcm_line);
    }
    return 0;
}
