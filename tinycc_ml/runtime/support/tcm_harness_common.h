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
