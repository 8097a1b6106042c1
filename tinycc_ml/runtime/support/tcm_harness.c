/* tinycc-ml portable measurement harness: the row loop and the line protocol every simulator parses
 * (tinycc_ml.target.parse_harness_output). A target supplies a board file with five functions:
 *   void tcm_board_init(void);              clocks, counter, output
 *   uint32_t tcm_board_count(void);         a free-running counter: instructions or cycles
 *   void tcm_board_write(const char *s);    write a NUL-terminated string (semihosting, UART, ...)
 *   void tcm_board_exit(int code);          end the run
 *   uint32_t *tcm_board_stack_limit(void);  lowest address the stack can reach (painted to measure it)
 * and links the rows as `const uint8_t tcm_inputs[]`, `const uint32_t tcm_n_inputs` (input_image_source).
 * Configured by -D as BuildSpec.harness_defines(): TCM_HEADER, TCM_PREFIX, TCM_IN_T, TCM_SCORE_T, TCM_D,
 * TCM_NS, TCM_TASK (1: also <prefix>_predict_value, 2: also <prefix>_predict_labels; stack counted, not time).
 * Output, one line each, hex of little-endian bytes:
 *   C<calib u32>                 counter difference of two back-to-back reads
 *   R<pred i32><count u32><stack u32><scores><task bytes>   per row; count is raw (minus calib by the parser)
 *   E                            end of the rows */
#include <stdint.h>
#include "tcm_harness_common.h"
#define TCM_PAINT 0xC5A5C5A5u
#define TCM_STACK_MARGIN 16 /* words left unpainted below main's frame */

void tcm_board_init(void);
uint32_t tcm_board_count(void);
void tcm_board_write(const char *s);
void tcm_board_exit(int code);
uint32_t *tcm_board_stack_limit(void);
extern const uint8_t tcm_inputs[];
extern const uint32_t tcm_n_inputs;

static TCM_IN_T tcm_x[TCM_D];
static TCM_SCORE_T tcm_s[TCM_NS];
#if TCM_TASK == 2
static uint8_t tcm_labels[TCM_NS];
#endif
static char tcm_line[64 + 2 * (12 + sizeof tcm_s + TCM_TASK_BYTES)];

/* Called through volatile pointers so the compiler cannot inline the model into the timed region. */
static int (*volatile tcm_predict)(const TCM_IN_T *) = TCM_PREDICT;
static void (*volatile tcm_scores)(const TCM_IN_T *, TCM_SCORE_T *) = TCM_SCORES;
#if TCM_TASK == 1
static TCM_SCORE_T (*volatile tcm_value)(const TCM_IN_T *) = TCM_VALUE;
#elif TCM_TASK == 2
static void (*volatile tcm_task_labels)(const TCM_IN_T *, uint8_t *) = TCM_LABELS;
#endif

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

static void tcm_paint(volatile uint32_t *top)
{
    for (volatile uint32_t *q = tcm_board_stack_limit(); q < top; q++)
        *q = TCM_PAINT;
}

static uint32_t tcm_stack_used(volatile uint32_t *top)
{
    volatile uint32_t *q = tcm_board_stack_limit();
    while (q < top && *q == TCM_PAINT)
        q++;
    return (uint32_t)(top - q) * 4u;
}

int main(void)
{
    volatile uint32_t frame_marker = 0;
    volatile uint32_t *top = (volatile uint32_t *)((uintptr_t)&frame_marker - 4u * TCM_STACK_MARGIN);
    tcm_board_init();
    uint32_t a = tcm_board_count();
    uint32_t b = tcm_board_count();
    uint32_t calib = b - a;
    char *p = tcm_line;
    *p++ = 'C';
    p = tcm_hex(p, &calib, 4);
    *p++ = '\n';
    *p = 0;
    tcm_board_write(tcm_line);
    for (uint32_t k = 0; k < tcm_n_inputs; k++) {
        const uint8_t *src = tcm_inputs + k * sizeof tcm_x;
        uint8_t *dst = (uint8_t *)tcm_x;
        for (uint32_t i = 0; i < sizeof tcm_x; i++)
            dst[i] = src[i];
        tcm_paint(top);
        TCM_BARRIER();
        uint32_t t0 = tcm_board_count();
        int32_t pred = tcm_predict(tcm_x);
        uint32_t t1 = tcm_board_count();
        TCM_BARRIER();
        uint32_t stack = tcm_stack_used(top), used;
        uint32_t count = t1 - t0;
        tcm_paint(top);
        TCM_BARRIER();
        tcm_scores(tcm_x, tcm_s);
        TCM_BARRIER();
        used = tcm_stack_used(top);
        stack = used > stack ? used : stack;
#if TCM_TASK != 0
        tcm_paint(top);
        TCM_BARRIER();
#if TCM_TASK == 1
        TCM_SCORE_T value = tcm_value(tcm_x);
#else
        tcm_task_labels(tcm_x, tcm_labels);
#endif
        TCM_BARRIER();
        used = tcm_stack_used(top);
        stack = used > stack ? used : stack;
#endif
        p = tcm_line;
        *p++ = 'R';
        p = tcm_hex(p, &pred, 4);
        p = tcm_hex(p, &count, 4);
        p = tcm_hex(p, &stack, 4);
        p = tcm_hex(p, tcm_s, sizeof tcm_s);
#if TCM_TASK == 1
        p = tcm_hex(p, &value, sizeof value);
#elif TCM_TASK == 2
        p = tcm_hex(p, tcm_labels, sizeof tcm_labels);
#endif
        *p++ = '\n';
        *p = 0;
        tcm_board_write(tcm_line);
    }
    tcm_board_write("E\n");
    tcm_board_exit(0);
    return 0;
}
