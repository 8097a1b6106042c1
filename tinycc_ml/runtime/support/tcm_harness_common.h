/* What every tinycc-ml measurement harness shares: the model's header (TCM_HEADER), its entry points by
 * TCM_PREFIX, the task entry point (TCM_TASK: 1 value, 2 labels) and the bytes it adds to a result line. */
#ifndef TCM_HARNESS_COMMON_H
#define TCM_HARNESS_COMMON_H

#include TCM_HEADER

#define TCM_CAT_(a, b) a##b
#define TCM_CAT(a, b) TCM_CAT_(a, b)
#define TCM_PREDICT TCM_CAT(TCM_PREFIX, _predict)
#define TCM_SCORES TCM_CAT(TCM_PREFIX, _scores)
#define TCM_VALUE TCM_CAT(TCM_PREFIX, _predict_value)
#define TCM_LABELS TCM_CAT(TCM_PREFIX, _predict_labels)
#define TCM_BARRIER() __asm__ __volatile__("" ::: "memory")
#ifdef TCM_STATEFUL
/* A model with state (a stream's front end): every call is the next frame, so each row is one step, giving the
 * class and the scores; the scores entry point hands back that step's scores rather than stepping again. */
static TCM_SCORE_T tcm_step_scores[TCM_NS];
static int tcm_step_predict(const TCM_IN_T *x)
{
    return TCM_CAT(TCM_PREFIX, _step)(x, tcm_step_scores);
}
static void tcm_step_copy(const TCM_IN_T *x, TCM_SCORE_T *s)
{
    (void)x;
    for (unsigned i = 0; i < TCM_NS; i++)
        s[i] = tcm_step_scores[i];
}
#undef TCM_PREDICT
#undef TCM_SCORES
#define TCM_PREDICT tcm_step_predict
#define TCM_SCORES tcm_step_copy
#endif
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

#endif
