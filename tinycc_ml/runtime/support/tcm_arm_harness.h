/* tinycc-ml Cortex-M measurement harness: the part shared by the boards (tcm_m0_harness.c,
 * tcm_m4_harness.c), included by a board file after it has defined
 *   TCM_TIMER_SETUP()       start a free-running 32-bit timer and its watchdog interrupt (tcm_irq_timer0)
 *   TCM_TIMER_RESTART()     restart the watchdog before a measured call
 *   TCM_CAPTURES(t0, t1)    the two timer values the stub took around the call (uint32_t lvalues)
 * and, in asm, the stubs tcm_timed_p / tcm_timed_s / tcm_task_v / tcm_task_l (take the timer, blx r2,
 * take it again) and tcm_timed_null (both takes back to back: the calibration).
 * Configured by -D: TCM_HEADER ("path"), TCM_PREFIX, TCM_IN_T, TCM_SCORE_T, TCM_D, TCM_NS, and
 * TCM_TASK (1: also <prefix>_predict_value, 2: also <prefix>_predict_labels; its stack counts, not its time).
 * Inputs come from the generated input image (tcm_inputs, tcm_n_inputs in flash).
 * Output lines through semihosting SYS_WRITE0, hex of little-endian words:
 *   C<t0><t1>                                 the calibration
 *   R<pred><t0><t1><stack><scores>[<task>]    one per input row
 *   TCM-HANG / TCM-FAULT                      the watchdog fired / a fault handler ran
 * Stack use: the free stack (from __bss_end up to main's frame) is painted before each call and
 * scanned after it. */
#include <stdint.h>
#include "tcm_harness_common.h"
#define TCM_PAINT 0xC5A5C5A5u

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

/* Watchdog: the timer is restarted before each measured call; its interrupt means a hang. */
void tcm_irq_timer0(void)
{
    static const char msg[] = "TCM-HANG\n";
    tcm_semihost(0x04, msg);
    tcm_exit(4);
}

int main(void)
{
    TCM_TIMER_SETUP();
    tcm_timed_null();
    uint32_t c0, c1;
    TCM_CAPTURES(c0, c1);
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
        TCM_TIMER_RESTART();
        int32_t pred = tcm_timed_p(tcm_x, tcm_s, TCM_PREDICT);
        uint32_t t0, t1;
        TCM_CAPTURES(t0, t1);
        TCM_BARRIER();
        TCM_STACK_USED(sp, stack_p);
        TCM_PAINT_STACK(sp);
        TCM_BARRIER();
        TCM_TIMER_RESTART();
        tcm_timed_s(tcm_x, tcm_s, TCM_SCORES);
        TCM_BARRIER();
        TCM_STACK_USED(sp, stack_s);
        if (stack_s > stack_p)
            stack_p = stack_s;
#if TCM_TASK != 0
        TCM_PAINT_STACK(sp);
        TCM_BARRIER();
        TCM_TIMER_RESTART();
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
