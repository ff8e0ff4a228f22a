/* verdict.h — the outcome of one proposal or evaluation step. */
#ifndef KEVO_VERDICT_H
#define KEVO_VERDICT_H

typedef enum {
    KV_VERDICT_NONE = 0, /* not evaluated yet */
    KV_VERDICT_OK,       /* correct at every size; timed */
    KV_VERDICT_MISMATCH, /* ran, wrong output */
    KV_VERDICT_COMPILE_ERROR,
    KV_VERDICT_RUNTIME_ERROR,  /* a CUDA/NCCL error, non-zero return from kevo_run */
    KV_VERDICT_HANG,           /* missed its deadline */
    KV_VERDICT_CRASH,          /* a worker died (signal, exit) */
    KV_VERDICT_NVLS_REFUSED,   /* uses NVLink multicast where it is not allowed */
    KV_VERDICT_DUPLICATE,      /* same normalised source or SASS as an existing program */
    KV_VERDICT_PROPOSAL_ERROR, /* the mutator produced nothing usable */
    KV_VERDICT_REFUSED,        /* reaches driver entry points or loads code at run time, or
                                  called a forbidden driver function (NVLink multicast) */
    KV_VERDICT_IMPLAUSIBLE,    /* a time below the problem's floor (problem.h, kv_roofline):
                                  the candidate's, or the reference's (a wrong cost model) */
    KV_VERDICT_COUNT
} kv_verdict;

/* "ok", "mismatch", ...; "unknown" for out-of-range values. */
const char *kv_verdict_name(kv_verdict v);

/* Parses a verdict name; returns 0, or -1 if the name is not a verdict. */
int kv_verdict_parse(const char *name, kv_verdict *out);

#endif
