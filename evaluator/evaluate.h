/* evaluate.h — one candidate, start to finish: compile (cached), refuse NVLS
 * where it is not allowed and runtime lookups unless allowed, drop SASS seen
 * before, run the job on a worker group, classify from the evidence, and
 * compute speedups and roofline fractions. The evaluator's queue (evalq.h,
 * evalq.c) runs these stages (pipeline.h) for everyone: kv_evaluate and
 * kv_baseline submit one task to a queue of one group and wait for it, for
 * kevo eval, kevo baseline and kevo seed; the search drives a queue of every
 * group from its poll() loop. */
#ifndef KEVO_EVALUATOR_EVALUATE_H
#define KEVO_EVALUATOR_EVALUATE_H

#include <limits.h>

#include "evaluator/checks/classify.h"
#include "evaluator/compile/compile.h"
#include "evaluator/group/group.h"
#include "protocol/job.h"
#include "common/cell.h"
#include "problem/problem.h"

/* How a size is timed (docs/evaluator.md, "Timing"): replays of captured
 * calls, as a CUDA-graph user runs them, or calls one by one from the host. */
typedef enum { KV_TIMING_GRAPH = 0, KV_TIMING_CALL = 1 } kv_timing_mode;
extern const char *const kv_timing_names[]; /* "graph", "call", NULL */
/* The mode named s: 0 and *out, or -1. */
int kv_timing_parse(const char *s, kv_timing_mode *out);

typedef struct {
    char worker_path[PATH_MAX];
    char log_dir[PATH_MAX];
    kv_compile_opts compile;
    int world;
    int n_devices;                       /* 0: devices 0 .. world-1 */
    int devices[KV_GROUP_MAX_WORLD];
    int trials, warmup, iters;
    double warmup_ms;                    /* a side's warm-up also ends after this long */
    kv_timing_mode timing;               /* kv_eval_defaults: KV_TIMING_GRAPH */
    double job_timeout_s;
    double start_timeout_s;
    int recycle_every;                   /* restart the workers after this many jobs (0: never) */
    int allow_nvls;                      /* the run's permission; the machine must allow it too */
    int allow_runtime_lookups;           /* run candidates that look up driver entry points, load
                                            code or start processes (evaluator/checks/runtime_lookups.h) */
    int sass_dedup;                      /* a candidate whose SASS equals an earlier one's (of
                                            the same problem, another program) is a duplicate
                                            and does not run; kv_eval_defaults: on */
    uint64_t seed;
    int n_sizes;                         /* 0: every size of the problem */
    char sizes[KV_JOB_MAX_SIZES][64];
    char dump_dir[PATH_MAX];             /* "" or where the workers write one call's inputs and
                                            outputs per size and rank (docs/evaluator.md) */
    /* the workers' confinement and output (sandbox.h, group_output.c) */
    int allow_unconfined;                /* start them where the kernel offers no Landlock */
    int output_cap_kib;                  /* per job, first and last KiB of output kept */
    int log_max_mib;                     /* a worker's log is rotated past this */
    int scratch_mib;                     /* each worker's scratch, and its largest file */
    uint32_t worker_uid;                 /* as root: group g runs as worker_uid + g */
    char private_dir[PATH_MAX];          /* "" or a folder the workers must not reach (the run
                                            directory) */
} kv_eval_opts;

typedef struct {
    char name[64];
    int validation;
    int checked, ok, timed;
    kv_timing ref, cand;                 /* µs per call; max over ranks of per-rank medians */
    int graph_calls;                     /* calls per timed replay; 0: timed call by call */
    char timing_note[96];                /* why graph timing fell back to calls, or "" */
    int ref_plain;                       /* the reference ran on plain memory, off the window */
    double speedup;                      /* ref / cand medians */
    double roofline_us;
    double roofline_fraction;            /* roofline / cand (baseline: / ref) */
    double floor_us;                     /* no honest time is below it (kv_roofline.floor_s) */
} kv_eval_size;

typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX];
    int baseline;                        /* reference only */
    kv_compile_result compile;           /* the candidate's */
    int classified;
    kv_class cls;
    int cell;                            /* when classified: kv_cell_index of cls (kevo/cell.h) */
    int n_sizes;
    kv_eval_size sizes[KV_JOB_MAX_SIZES];
    double speedup;                      /* geometric mean over timed sizes; 0 unless ok */
    double roofline;                     /* mean roofline fraction over timed sizes */
    kv_job_result job;
    double wall_s;
    uint64_t program;                    /* the task's id: the search's program id, or
                                            kv_evaluate's number of this source text */
    uint64_t duplicate_of;               /* KV_VERDICT_DUPLICATE: the id of the task whose
                                            compiled code this is; else 0 */
} kv_eval_report;

void kv_eval_defaults(kv_eval_opts *o, const char *source_root);
/* The options of worker group `index` on `devices` (world of them) for o. */
void kv_eval_group_opts(const kv_eval_opts *o, int index, const int *devices, kv_group_opts *go);
void kv_eval_report_free(kv_eval_report *r);

typedef struct kv_evaluator kv_evaluator;

int kv_evaluator_new(const kv_eval_opts *o, kv_evaluator **out, kv_err *err);
void kv_evaluator_free(kv_evaluator *ev);

/* Submits one task to the evaluator's queue (made on first use, with one
 * group of o->world GPUs, started when the first candidate is ready to run)
 * and waits for its report. Sources are programs: the same text again is
 * the same program, evaluated again; another text with the same SASS and
 * host code is a duplicate (o->sass_dedup). Distinct texts are numbered 1,
 * 2, ... in the order kv_evaluate first sees them (out->program; a
 * duplicate's duplicate_of is the earlier one's). Returns 0 when a report was produced (whatever
 * the verdict), -1 when kevo itself failed (no GPU, reference does not
 * compile, ...); then *out holds nothing to free. */
int kv_evaluate(kv_evaluator *ev, const kv_problem *p, const char *src, size_t len,
                kv_eval_report *out, kv_err *err);
/* The reference alone, on the same queue (no classification, no speedup). */
int kv_baseline(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err);
/* The reference against itself, on the same queue: at every size of o
 * (every size of the problem, the validation size included, when o names
 * none), on every rank, the reference as evaluations run it and again on
 * plain device memory at shifted offsets (worker/selfcheck.c), outputs
 * compared within the problem's tolerances. out->verdict is
 * KV_VERDICT_OK, or KV_VERDICT_MISMATCH with a message that starts "the
 * reference does not agree with itself at size S" and names the rank,
 * tensor, first bad index and both values; other verdicts as
 * kv_baseline's. Nothing is timed. Returns as kv_evaluate. */
int kv_selfcheck(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err);

/* The report's cell as text, "transport/fusion", into buf (KV_CELL_NAME_MAX
 * bytes); "" when it was not classified. Returns buf. */
const char *kv_eval_cell_name(const kv_eval_report *r, char *buf);

/* The report as JSON (the evidence stored with results, and --json). What
 * is read back of it is read by kv_eval_summary_decode (summary.h) alone. */
char *kv_eval_report_json(const kv_eval_report *r);

/* Seconds the evaluator's group took to restart last (0 if it never did). */
double kv_evaluator_last_restart_s(const kv_evaluator *ev);

#endif
