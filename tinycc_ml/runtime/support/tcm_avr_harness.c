/* tinycc-ml AVR measurement harness, run by avr_runner under libsimavr.
 * Configured by -D: TCM_HEADER ("path"), TCM_PREFIX, TCM_IN_T, TCM_SCORE_T, TCM_D, TCM_NS, and
 * TCM_TASK (1: also <prefix>_predict_value, 2: also <prefix>_predict_labels; bracket 5/6, not timed).
 * Inputs stream in through GPIOR2 (32 KB flash cannot hold a test set), results go out through
 * GPIOR0, GPIOR1 writes bracket the measured calls (odd code opens, even code closes).
 * The calls go through a fixed asm stub, so the runner's cycle count minus the back-to-back
 * calibration bracket minus 3 (ICALL) is exactly the callee's cycles, from entry through RET. */
#include <stdint.h>
#include <avr/io.h>
#include "tcm_harness_common.h"

static TCM_IN_T tcm_x[TCM_D];
static TCM_SCORE_T tcm_s[TCM_NS];
#if TCM_TASK == 2
static uint8_t tcm_labels[TCM_NS];
#endif

static void tcm_put(const void *p, uint16_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    while (n--)
        GPIOR0 = *b++;
}

/* tcm_timed_p/_s(x, s, fn): stamp 3, icall fn(x, s), stamp 4; r18 and Z are call-clobbered. */
__asm__(
    "    .section .text.tcm_timed,\"ax\",@progbits\n"
    "    .global tcm_timed_p\n"
    "    .global tcm_timed_s\n"
    "tcm_timed_p:\n"
    "tcm_timed_s:\n"
    "    movw r30, r20\n"
    "    ldi r18, 3\n"
    "    out 0x2a, r18\n"
    "    icall\n"
    "    ldi r18, 4\n"
    "    out 0x2a, r18\n"
    "    ret\n"
    /* the task's entry point: bracket 5/6 (stack only); the callee's r22-r25 return is kept */
    "    .global tcm_task_v\n"
    "    .global tcm_task_l\n"
    "tcm_task_v:\n"
    "tcm_task_l:\n"
    "    movw r30, r20\n"
    "    ldi r18, 5\n"
    "    out 0x2a, r18\n"
    "    icall\n"
    "    ldi r18, 6\n"
    "    out 0x2a, r18\n"
    "    ret\n"
    "    .text\n");
int16_t tcm_timed_p(const TCM_IN_T *x, TCM_SCORE_T *s, int (*fn)(const TCM_IN_T *));
void tcm_timed_s(const TCM_IN_T *x, TCM_SCORE_T *s, void (*fn)(const TCM_IN_T *, TCM_SCORE_T *));
TCM_SCORE_T tcm_task_v(const TCM_IN_T *x, void *unused, TCM_SCORE_T (*fn)(const TCM_IN_T *));
void tcm_task_l(const TCM_IN_T *x, uint8_t *out, void (*fn)(const TCM_IN_T *, uint8_t *));

int main(void)
{
    /* calibration bracket, same shape as the stub without the call: out; ldi; out */
    __asm__ __volatile__("ldi r18, 1\n\tout 0x2a, r18\n\tldi r18, 2\n\tout 0x2a, r18" ::: "r18");
    while (GPIOR2) {
        uint8_t *b = (uint8_t *)tcm_x;
        for (uint16_t i = 0; i < sizeof tcm_x; i++)
            b[i] = GPIOR2;
        TCM_BARRIER();
        int16_t pred = tcm_timed_p(tcm_x, tcm_s, TCM_PREDICT);
        TCM_BARRIER();
        tcm_timed_s(tcm_x, tcm_s, TCM_SCORES);
        TCM_BARRIER();
        tcm_put(&pred, sizeof pred);
        tcm_put(tcm_s, sizeof tcm_s);
#if TCM_TASK == 1
        TCM_SCORE_T value = tcm_task_v(tcm_x, 0, TCM_VALUE);
        TCM_BARRIER();
        tcm_put(&value, sizeof value);
#elif TCM_TASK == 2
        tcm_task_l(tcm_x, tcm_labels, TCM_LABELS);
        TCM_BARRIER();
        tcm_put(tcm_labels, sizeof tcm_labels);
#endif
    }
    /* sleeping with interrupts off ends the simulation cleanly */
    __asm__ __volatile__("cli\n\tsleep" ::: "memory");
    for (;;) {
    }
}
