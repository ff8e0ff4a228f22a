/* stage.h — the stages of one program's evaluation. The evaluator's queue
 * takes a stage with each task (it picks the protocol); the archive records
 * it with each attempt (kv_stage_name, archive.h). */
#ifndef KEVO_STAGE_H
#define KEVO_STAGE_H

typedef enum {
    KV_STAGE_PROPOSAL = 0, /* a mutator produced (or failed to produce) a candidate */
    KV_STAGE_SCREEN,       /* short screening measurement */
    KV_STAGE_FULL,         /* full protocol */
    KV_STAGE_REMEASURE,    /* confirmation of a new elite */
    KV_STAGE_SEED,         /* evaluation of a pattern-library seed */
    KV_STAGE_COUNT
} kv_stage;

#endif
