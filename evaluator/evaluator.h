/* evaluator.h — the evaluator's contract: the one header of evaluator/ that
 * other folders (search/, cli/, bench/) include.
 *
 * The evaluator takes a candidate's source to a verdict: it compiles it
 * (nvcc, a content-addressed cache, a pool of compilations), refuses NVLink
 * multicast where it is not allowed and runtime lookups unless allowed,
 * drops SASS seen before, runs the job on a supervised group of confined
 * worker processes (one per GPU), classifies the candidate from the
 * evidence and scores it against the problem's reference. A queue (kv_evalq)
 * runs these stages for everyone: the search drives one from its poll()
 * loop; kv_evaluate submits one task to a queue of one group and waits.
 * Beside it: checking a problem's reference (its host check, and the
 * verdicts kept in the compile cache), and what the machine offers (which
 * GPUs are NVLink peers, what confines the workers). docs/evaluator.md
 * describes the design; docs/architecture.md where each part lives.
 *
 * Conventions, for every function below unless it says otherwise:
 *   - A function returning int returns 0 on success and -1 on an error of
 *     kevo itself (out of memory, a system call, the toolchain), with err
 *     filled (common/err.h): what failed and where. A candidate that fails
 *     (does not compile, crashes, hangs, computes wrong) is not an error: it
 *     is a report with its verdict. KV_NOTFOUND (common/err.h) is "none",
 *     never an error.
 *   - After -1 an out-parameter holds nothing to free, except where it says
 *     otherwise. What a struct owns (pointers marked "owned") is freed by
 *     its _free function, which accepts a zeroed struct; the _free and
 *     _close functions of handles accept NULL.
 *   - Strings and problems passed in are copied or must outlive only the
 *     call, except where it says "outlives".
 *   - Nothing here is thread-safe: one thread uses one evaluator, queue or
 *     compile pool. The workers and compilers are child processes; a caller
 *     that forks must not hold a queue across the fork. */
#ifndef KEVO_EVALUATOR_H
#define KEVO_EVALUATOR_H

#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/cell.h"
#include "common/err.h"
#include "common/sha256.h"
#include "common/stage.h"
#include "problem/problem.h"
#include "protocol/job.h"

/* ---- compiling (compile/) ------------------------------------------------- */

/* A compiled candidate lives in <cache>/<key>/: cand.so, cand.sass
 * (cuobjdump -sass), cand.ptx (cuobjdump -ptx), imports.txt (undefined
 * dynamic symbols), report.txt (nvcc's stderr: ptxas register/spill lines,
 * warnings). key = SHA-256 of source + flags + nvcc version + ABI version +
 * the text of kernel.h and the pattern headers. An entry is published whole
 * (renamed into place) or not at all; entries are never modified. */

/* The address space (RLIMIT_AS) of each compile step: nvcc and every child
 * it starts (cicc, ptxas, the host compiler, the linker) and cuobjdump. A
 * compiler that swallows an endless include (`#include "/dev/zero"` by a
 * macro) fails with "out of memory" in seconds instead of growing without
 * bound. kevo's candidates need under 256 MiB; heavy template code a few
 * GiB. */
#define KV_COMPILE_MEM_MAX ((size_t)4 << 30)

typedef struct {
    char nvcc[PATH_MAX];         /* nvcc to run ("" = find on PATH or /usr/local/cuda) */
    char arch[32];               /* e.g. "sm_90a" ("" = ask the device, else sm_90a) */
    char include_dir[PATH_MAX];  /* holds kevo/kernel.h */
    char patterns_dir[PATH_MAX]; /* holds the pattern headers */
    char cache_dir[PATH_MAX];
    double timeout_s; /* per compilation */
    size_t mem_max;   /* address space of a compile step; 0 = KV_COMPILE_MEM_MAX */
    int jobs;         /* concurrent compilations; 0 = cores */
} kv_compile_opts;

typedef enum {
    KV_COMPILE_OK,
    KV_COMPILE_ERROR, /* nvcc rejected the source */
    KV_COMPILE_TIMEOUT,
    KV_COMPILE_FAILED, /* kevo could not run the toolchain (not the candidate's fault) */
} kv_compile_status;

typedef struct {
    kv_compile_status status;
    int cached; /* served from the cache */
    char key[KV_SHA256_HEX_LEN];
    char dir[PATH_MAX]; /* <cache>/<key> */
    char so_path[PATH_MAX];
    char *errors;                      /* trimmed compiler errors with line numbers; owned */
    char *report;                      /* ptxas resource report (registers, spills); owned */
    char *sass;                        /* owned; NULL unless loaded */
    char *ptx;                         /* owned; NULL unless loaded */
    char *imports;                     /* owned; one symbol per line */
    char sass_hash[KV_SHA256_HEX_LEN]; /* the dedup key: the SASS without addresses, and
                                         * the host code (compile/sass_hash.c) */
    double seconds;                    /* wall time of the compilation (0 if cached) */
} kv_compile_result;

/* Frees what r owns and zeroes those pointers; the files under r->dir stay. */
void kv_compile_result_free(kv_compile_result *r);

/* Fills o with defaults relative to the source tree root (include/,
 * patterns/; the cache $KEVO_CACHE_DIR, else $XDG_CACHE_HOME/kevo, else
 * ~/.cache/kevo). Never fails; a path too long is cut, and then fails
 * where it is used. */
void kv_compile_defaults(kv_compile_opts *o, const char *source_root);

/* Compiles one source synchronously (through the cache) into *r, which the
 * caller frees with kv_compile_result_free. Returns 0 when a result was
 * produced (whatever its status: a source nvcc rejects is KV_COMPILE_ERROR
 * with r->errors), -1 when kevo itself failed (r then holds nothing). */
int kv_compile(const kv_compile_opts *o, const char *src, size_t len, kv_compile_result *r,
               kv_err *err);

/* The pool: submit sources, then poll/wait for results; compilations run as
 * child processes in their own process groups, killed at their timeout. */
typedef struct kv_compile_pool kv_compile_pool;

/* A pool of o->jobs compilations at once (o is copied). -1: out of memory,
 * no cache directory, or the cache cannot be made (err names it). */
int kv_compile_pool_new(const kv_compile_opts *o, kv_compile_pool **out, kv_err *err);
/* Kills what is still running, reaps it, frees results not taken. NULL is fine. */
void kv_compile_pool_free(kv_compile_pool *p);
/* Queues a source (copied); *ticket identifies its result. -1: out of memory. */
int kv_compile_submit(kv_compile_pool *p, const char *src, size_t len, uint64_t *ticket,
                      kv_err *err);
/* Starts queued work and reaps finished work without blocking; returns the
 * number of results ready, or -1 when a child cannot be started or reaped. */
int kv_compile_poll(kv_compile_pool *p, kv_err *err);
/* Takes one ready result (0; the caller owns *r), or KV_NOTFOUND if none is
 * ready (*r untouched). */
int kv_compile_take(kv_compile_pool *p, uint64_t *ticket, kv_compile_result *r);
/* Blocks until every submitted source has a result (then take them). 0, or
 * -1 as kv_compile_poll, or when poll() fails. */
int kv_compile_wait_all(kv_compile_pool *p, kv_err *err);
/* The file descriptors to poll for progress (the running children's stderr
 * pipes), at most cap of them into fds; returns how many. */
int kv_compile_pollfds(kv_compile_pool *p, int *fds, int cap);

/* ---- the report of one evaluation ------------------------------------------ */

/* The most GPUs in one worker group. */
#define KV_GROUP_MAX_WORLD 8

/* How a size is timed (docs/abi.md, "Timing"): replays of captured
 * calls, as a CUDA-graph user runs them, or calls one by one from the host. */
typedef enum { KV_TIMING_GRAPH = 0, KV_TIMING_CALL = 1 } kv_timing_mode;
extern const char *const kv_timing_names[]; /* "graph", "call", NULL */
/* The mode named s: 0 and *out, or -1 (*out untouched; err-less). */
int kv_timing_parse(const char *s, kv_timing_mode *out);

/* A candidate's behaviour cell and what shows it, read from evidence (the
 * SASS and PTX, the dynamic imports, the launch graph of one captured
 * kevo_run; checks/classify.c), never from what a mutator claims. */
typedef struct {
    kv_transport transport;
    kv_fusion fusion;
    int uses_nvls;        /* multimem / cuMulticast found anywhere */
    int uses_tma;         /* bulk or tensor async copies in SASS/PTX */
    int uses_copy_engine; /* memcpy imports or memcpy nodes */
    int has_kernels;      /* SASS has functions, or the graph launched kernels */
    char *evidence_json;  /* what was found and where; owned */
} kv_class;

/* Frees c->evidence_json and zeroes it. */
void kv_class_free(kv_class *c);

/* One size of an evaluation. */
typedef struct {
    char name[64];
    int validation;
    int checked, ok, timed;
    kv_timing ref, cand;  /* µs per call; max over ranks of per-rank medians */
    int graph_calls;      /* calls per timed replay; 0: timed call by call */
    char timing_note[96]; /* why graph timing fell back to calls, or "" */
    int ref_plain;        /* the reference ran on plain memory, off the window */
    double speedup;       /* ref / cand medians */
    double roofline_us;
    double roofline_fraction; /* roofline / cand (baseline: / ref) */
    double floor_us;          /* no honest time is below it (kv_roofline.floor_s) */
} kv_eval_size;

/* What one evaluation found. Owns compile's and cls's pointers: freed by
 * kv_eval_report_free. */
typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX];
    int baseline;              /* reference only */
    kv_compile_result compile; /* the candidate's */
    int classified;
    kv_class cls;
    int cell; /* when classified: kv_cell_index of cls (common/cell.h) */
    int n_sizes;
    kv_eval_size sizes[KV_JOB_MAX_SIZES];
    double speedup;  /* geometric mean over timed sizes; 0 unless ok */
    double roofline; /* mean roofline fraction over timed sizes */
    kv_job_result job;
    double wall_s;
    uint64_t program;      /* the task's id: the search's program id, or
                                            kv_evaluate's number of this source text */
    uint64_t duplicate_of; /* KV_VERDICT_DUPLICATE: the id of the task whose
                                            compiled code this is; else 0 */
} kv_eval_report;

/* Frees what r owns (its compile result, its class) and zeroes them. */
void kv_eval_report_free(kv_eval_report *r);

/* The report's cell as text, "transport/fusion", into buf (KV_CELL_NAME_MAX
 * bytes); "" when it was not classified. Returns buf. */
const char *kv_eval_cell_name(const kv_eval_report *r, char *buf);

/* The report as JSON (the evidence stored with results, and --json):
 * malloc'ed, the caller frees it; NULL when out of memory. What is read back
 * of it is read by kv_eval_summary_decode alone. */
char *kv_eval_report_json(const kv_eval_report *r);

/* ---- evaluating one candidate ------------------------------------------------ */

typedef struct {
    char worker_path[PATH_MAX];
    char log_dir[PATH_MAX];
    kv_compile_opts compile;
    int world;
    int n_devices; /* 0: devices 0 .. world-1 */
    int devices[KV_GROUP_MAX_WORLD];
    int trials, warmup, iters;
    double warmup_ms;      /* a side's warm-up also ends after this long */
    kv_timing_mode timing; /* kv_eval_defaults: KV_TIMING_GRAPH */
    double job_timeout_s;
    double start_timeout_s;
    int recycle_every;         /* restart the workers after this many jobs (0: never) */
    int allow_nvls;            /* the run's permission; the machine must allow it too */
    int allow_runtime_lookups; /* run candidates that look up driver entry points, load
                                            code or start processes (checks/runtime_lookups.h) */
    int sass_dedup;            /* a candidate whose SASS equals an earlier one's (of
                                            the same problem, another program) is a duplicate
                                            and does not run; kv_eval_defaults: on */
    uint64_t seed;
    int n_sizes; /* 0: every size of the problem */
    char sizes[KV_JOB_MAX_SIZES][64];
    char dump_dir[PATH_MAX]; /* "" or where the workers write one call's inputs and
                                            outputs per size and rank (docs/evaluator.md) */
    /* the workers' confinement and output (confine/sandbox.h, group/group_output.c) */
    int allow_unconfined;       /* start them where the kernel offers no Landlock */
    int output_cap_kib;         /* per job, first and last KiB of output kept */
    int log_max_mib;            /* a worker's log is rotated past this */
    int scratch_mib;            /* each worker's scratch, and its largest file */
    uint32_t worker_uid;        /* as root: group g runs as worker_uid + g */
    char private_dir[PATH_MAX]; /* "" or a folder the workers must not reach (the run
                                            directory) */
} kv_eval_opts;

/* Fills o with kevo's defaults (kv_compile_defaults for o->compile); the
 * caller sets worker_path and log_dir. Never fails. */
void kv_eval_defaults(kv_eval_opts *o, const char *source_root);

typedef struct kv_evaluator kv_evaluator;

/* An evaluator with options o (copied); nothing starts until the first
 * task. -1: out of memory. Freed by kv_evaluator_free. */
int kv_evaluator_new(const kv_eval_opts *o, kv_evaluator **out, kv_err *err);
/* Stops its workers and compilations (killed, reaped) and frees it. NULL is fine. */
void kv_evaluator_free(kv_evaluator *ev);

/* Submits one task to the evaluator's queue (made on first use, with one
 * group of o->world GPUs, started when the first candidate is ready to run)
 * and waits for its report. Sources are programs: the same text again is
 * the same program, evaluated again; another text with the same SASS and
 * host code is a duplicate (o->sass_dedup). Distinct texts are numbered 1,
 * 2, ... in the order kv_evaluate first sees them (out->program; a
 * duplicate's duplicate_of is the earlier one's). p must outlive the call.
 * Returns 0 when a report was produced (whatever the verdict; the caller
 * frees it with kv_eval_report_free), -1 when kevo itself failed (no GPU,
 * the reference does not compile, a group that cannot start, ...); then
 * *out holds nothing to free, and the next call makes a new queue. */
int kv_evaluate(kv_evaluator *ev, const kv_problem *p, const char *src, size_t len,
                kv_eval_report *out, kv_err *err);
/* The reference alone, on the same queue (no classification, no speedup).
 * Returns as kv_evaluate. */
int kv_baseline(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err);
/* The reference against itself, on the same queue: at every size of o
 * (every size of the problem, the validation size included, when o names
 * none), on every rank, the reference as evaluations run it and again on
 * plain device memory at shifted offsets (worker/placement.c), outputs
 * compared within the problem's tolerances. out->verdict is
 * KV_VERDICT_OK, or KV_VERDICT_MISMATCH with a message that starts "the
 * reference does not agree with itself at size S" and names the rank,
 * tensor, first bad index and both values; other verdicts as
 * kv_baseline's. Nothing is timed. Returns as kv_evaluate. */
int kv_selfcheck(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err);

/* Seconds the evaluator's group took to restart last (0 if it never did). */
double kv_evaluator_last_restart_s(const kv_evaluator *ev);

/* ---- the queue (evalq.c; the search's tests: tests/support/fake_evalq.c) ------------- */

/* An evaluator as a queue: tasks in, reports out, driven by the caller's
 * poll() loop. kv_evalq_gpu_new's runs tasks on GPU groups (a compile pool
 * running ahead, then a job per task); the search's tests drive the same
 * loop with a deterministic fake behind the same operations. */
typedef struct {
    uint64_t id;               /* the caller's: the program (the same id again: the same
                                   source, never a duplicate of itself) */
    const kv_problem *problem; /* outlives the task */
    const char *src;           /* copied by submit */
    size_t len;
    kv_stage stage; /* KV_STAGE_SEED, _SCREEN, _FULL or _REMEASURE: the protocol */
    int baseline;   /* the reference alone; src is ignored (kv_baseline) */
    int selfcheck;  /* the reference against itself on plain memory (kv_selfcheck);
                                   implies baseline: src is ignored */
} kv_eval_task;

typedef struct {
    uint64_t id;
    kv_stage stage;
    kv_eval_report report; /* owned by the taker (kv_eval_report_free) */
    double group_s;        /* how long it held a GPU group (0: it never ran) */
} kv_eval_done;

typedef struct {
    /* Accepts t when capacity() > 0: 0, or -1 (out of memory; the GPU queue,
     * on a problem's first task: its reference or inputs hook does not
     * compile, or the toolchain fails). */
    int (*submit)(void *self, const kv_eval_task *t, kv_err *err);
    int (*capacity)(void *self);  /* tasks submit accepts now */
    int (*in_flight)(void *self); /* submitted, not yet taken */
    /* The fds to poll (at most cap) and, in *timeout_ms, the time until it
     * next needs a step (left as it is when it needs none); returns how many
     * fds. */
    int (*pollfds)(void *self, struct pollfd *fds, int cap, int *timeout_ms);
    int (*step)(void *self, kv_err *err); /* after poll: advance; -1 only on kevo's own failure */
    int (*take)(void *self, kv_eval_done *out); /* 0 (the caller owns out->report), or
                                                   KV_NOTFOUND */
    int (*groups)(void *self);                  /* GPU groups behind it */
    double (*busy_s)(void *self);               /* group-seconds spent running jobs so far */
    void (*destroy)(void *self); /* kills what is in flight, frees reports not taken */
} kv_evalq_ops;

typedef struct {
    const kv_evalq_ops *ops;
    void *self;
} kv_evalq;

#define KV_EVALQ_MAX_GROUPS 16

typedef struct {
    kv_eval_opts full;   /* the protocol of every stage but screening; the world, worker,
                               logs, compile options and confinement of every group */
    kv_eval_opts screen; /* the protocol of KV_STAGE_SCREEN */
    int n_groups;        /* given groups, checked to be NVLink peers; 0: from the topology */
    int groups[KV_EVALQ_MAX_GROUPS][KV_GROUP_MAX_WORLD];
    const char *groups_name; /* names a given group in errors ("gpu_groups": "gpu_groups[1]: ...");
                               NULL: not named; outlives the call only */
    int max_groups;          /* with n_groups 0: at most this many disjoint groups */
    int on_demand;           /* form and start the groups when a task first needs one, and fail
                               (not restart again) when one cannot start: kv_evaluate's use.
                               0: at once, restarting a group that dies: the search's */
} kv_evalq_gpu_opts;

/* The queue on this node's GPUs, into *out (destroyed with
 * out->ops->destroy(out->self)). -1 when the topology cannot be read (the
 * worker's --doctor fails), a given group is not NVLink peers (named by
 * groups_name), no group of the world can be formed, the compile pool or a
 * group cannot be made (unless on_demand), or memory runs out. */
int kv_evalq_gpu_new(const kv_evalq_gpu_opts *o, kv_evalq *out, kv_err *err);

/* Seconds the first group of a queue made by kv_evalq_gpu_new took to
 * restart last (0 if it never did or does not exist). */
double kv_evalq_gpu_last_restart_s(const kv_evalq *q);

/* ---- an evaluation's summary (summary.c) ------------------------------------- */

/* What an evaluation found, typed, for those who show it (the LLM prompt's
 * feedback on a parent): the verdict, the evaluator's message (a compiler's
 * errors, a mismatch location), the compiler's resource report and the
 * cell. Made from a report, or decoded from the evidence the archive keeps
 * with a program (kv_eval_report_json's text): kv_eval_summary_decode is the
 * one place that reads that text back. */
typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX]; /* "" when there is none */
    int cell;                     /* kv_cell index (common/cell.h); -1: not classified */
    char *compile_report;         /* ptxas' resource report; owned; NULL: none */
} kv_eval_summary;

/* The summary of a report just made. 0, or -1 (out of memory; *out then
 * holds nothing to free). Freed by kv_eval_summary_free. */
int kv_eval_summary_of(const kv_eval_report *r, kv_eval_summary *out, kv_err *err);
/* The summary of stored evidence (NULL: an empty summary, verdict
 * KV_VERDICT_OK, no cell). 0, or -1 when the text is not the evidence's JSON;
 * *out then holds nothing to free. */
int kv_eval_summary_decode(const char *evidence, kv_eval_summary *out, kv_err *err);
void kv_eval_summary_free(kv_eval_summary *s);

/* ---- a problem's host check (checks/hostcheck*.c) ----------------------------- */

/* A problem's check.c (the API of include/kevo/check.h): compiled with the
 * system C compiler into the compile cache, loaded with dlopen, called for
 * every rank of one call, and the outputs compared with what it expects.
 * Host-side only: the worker neither links it nor needs a C compiler. The
 * comparison (tolerances, NaN, the first bad element) is kv_hostcheck_run's,
 * the one place kevo compares outputs with a host computation.
 * docs/problems.md, "The host check", has the format. */

/* kv_hostcheck_run's results besides 0 (every element within tolerance) and
 * -1 (an error: kv_err says which problem, size, rank and file). */
#define KV_HOSTCHECK_MISMATCH 1 /* some element is not */
#define KV_HOSTCHECK_SKIPPED 2  /* the check does not run at this size (KEVO_CHECK_SKIP) */

/* Every rank's tensors of one call, on the host. kv_host_call_init allocates
 * zeroed buffers for every input and output of every rank (owned by the
 * struct, freed by kv_host_call_free); callers fill them. */
typedef struct {
    const kv_problem *p; /* not owned; outlives the struct */
    int size;            /* index into p->sizes */
    int world;
    kv_shape in_shape[KEVO_MAX_TENSORS];
    kv_shape out_shape[KEVO_MAX_TENSORS];
    void *in[KEVO_MAX_RANKS][KEVO_MAX_TENSORS];  /* raw bytes in the tensor's dtype */
    void *out[KEVO_MAX_RANKS][KEVO_MAX_TENSORS]; /* what the code under test wrote */
} kv_host_call;

/* 0, or -1 (no such size, W outside 1..KEVO_MAX_RANKS, a shape that does
 * not evaluate, out of memory; d then holds nothing to free). */
int kv_host_call_init(kv_host_call *d, const kv_problem *p, int size, int world, kv_err *err);
void kv_host_call_free(kv_host_call *d);

/* Reads what a dump (kv_eval_opts.dump_dir; kevo eval and kevo baseline
 * --dump) holds of d's size into d (made by kv_host_call_init): every
 * rank's inputs, <dir>/<size>/rank<r>/inputs/<tensor>.bin, and the outputs
 * of `side` ("reference" or "candidate"), <dir>/<size>/rank<r>/<side>/<tensor>.bin.
 * Each file must be a regular file of exactly the tensor's bytes. Returns
 * 0, or -1 naming the file (missing, unreadable, or of another size: "...:
 * N bytes, expected M"); d's buffers are then partly filled. */
int kv_host_call_load_dump(kv_host_call *d, const char *dir, const char *side, kv_err *err);

/* What the check expects of one rank's outputs: want[j][i] and tol[j][i] for
 * i < valid[j]. Owned; freed by kv_host_expect_free. */
typedef struct {
    int n_outputs;
    double *want[KEVO_MAX_TENSORS];
    double *tol[KEVO_MAX_TENSORS];
    int64_t valid[KEVO_MAX_TENSORS];
} kv_host_expect;

void kv_host_expect_free(kv_host_expect *e);

/* A loaded check; opaque. */
typedef struct kv_hostcheck kv_hostcheck;

/* Compiles p's check.c with the C compiler ($KEVO_CC, else cc on $PATH)
 * into o->cache_dir/hostcheck/<key>.so, unless that is there already (key:
 * SHA-256 of the source, its path, the flags, the compiler and its
 * --version, and include/kevo/check.h under o->include_dir), then loads it.
 * Uses o->include_dir, o->cache_dir and o->timeout_s only. Returns 0, or -1
 * naming the file: the compiler's messages (with the lines) when it does
 * not compile, the function when it is not defined. A problem without
 * check.c is an error too (p->check is ""). p outlives *out; freed by
 * kv_hostcheck_close. */
int kv_hostcheck_open(const kv_compile_opts *o, const kv_problem *p, kv_hostcheck **out,
                      kv_err *err);
/* Unloads it. NULL is fine. */
void kv_hostcheck_close(kv_hostcheck *hc);
/* The shared object that was loaded (valid while hc is open), and whether
 * it came from the cache. */
const char *kv_hostcheck_so(const kv_hostcheck *hc);
int kv_hostcheck_cached(const kv_hostcheck *hc);

/* How long one kv_hostcheck_run may take before its child is stopped. */
#define KV_HOSTCHECK_TIMEOUT_S 900.0
void kv_hostcheck_set_timeout(kv_hostcheck *hc, double seconds);

/* Calls the check for one rank of d (d->p must be the problem hc was opened
 * for), in this process: fills e (freed by kv_host_expect_free). Returns 0,
 * KV_HOSTCHECK_SKIPPED (e empty), or -1 naming the problem, size, W, rank
 * and file with the check's reason. */
int kv_hostcheck_expect(const kv_hostcheck *hc, const kv_host_call *d, int rank, kv_host_expect *e,
                        kv_err *err);

/* The outcome of comparing every rank's outputs with the check. */
typedef struct {
    int64_t checked, failed; /* elements, over every rank */
    double worst_ratio;      /* max over passing elements of |got - want| / tol */
    /* the first failing element (rank order, then output, then index) */
    int bad_rank, bad_output; /* -1 when none failed */
    int64_t bad_index;        /* flat */
    double got, want, tol;
    char first[512]; /* it in words, "" when none: "rank 1, y[3, 7]: got ..." */
    double seconds;  /* spent in the check */
} kv_hostcheck_outcome;

/* The host side of checking one call: given every rank's inputs and
 * outputs of one size at world d->world, runs the check for every rank
 * and compares. The check runs in a child process (fork), so that one that
 * crashes, exits or never returns costs this call, not kevo: it gets -1
 * naming the rank it was at and how it ended ("kevo_check crashed (signal
 * 11, Segmentation fault)"), or, past the timeout (KV_HOSTCHECK_TIMEOUT_S,
 * kv_hostcheck_set_timeout), is killed ("did not finish within N s").
 * Call it from a process with one thread. Returns 0 (all within
 * tolerance), KV_HOSTCHECK_MISMATCH, KV_HOSTCHECK_SKIPPED, or -1 (the check
 * failed, or memory ran out; err says where). */
int kv_hostcheck_run(const kv_hostcheck *hc, const kv_host_call *d, kv_hostcheck_outcome *out,
                     kv_err *err);

/* ---- the kept verdicts of reference checks (checks/reference_verdicts.c) ------ */

/* A problem's reference is checked once per version of the files that
 * decide what it does. `kevo problems check P` (cli/cmd_problems_check.c)
 * runs the whole check: the self-check (kv_selfcheck: the reference as
 * evaluations run it against itself on plain memory), where the problem
 * ships check.c the host check of one dumped call at every size that fits,
 * and the reference timed (kv_baseline) against each size's floor: faster
 * than the floor, the problem's cost model is wrong. A run's start
 * (search/check_references.c) runs the self-check of every problem whose
 * verdict is not kept, and skips a problem whose reference failed.
 *
 * A verdict lives in <cache_dir>/problemcheck/<key>.json (cache_dir: the
 * compile cache's, kv_compile_opts.cache_dir), key = kv_pcheck_key's. Only
 * what the reference's code decides is kept: a pass, or a disagreement
 * (with itself, or with the host check). A reference that crashed, hung or
 * did not run is not a verdict on its code and is not kept. Entries are
 * written whole or not at all (a temporary file renamed into place); one
 * that cannot be read or does not parse as such an entry is treated as
 * absent, with a warning naming the file, never as a pass. docs/problems.md,
 * "Checking a problem", describes the file. */

/* The version of the check: a new one makes every kept verdict stale.
 * 2: the reference timed against its floor. */
#define KV_PCHECK_VERSION 2
/* The host check runs at sizes whose tensors (inputs and outputs, every
 * rank) total at most this many bytes: they are held in host memory. */
#define KV_PCHECK_HOST_MAX_BYTES ((uint64_t)256 << 20)

typedef enum {
    KV_PCHECK_NOT_RUN = 0, /* not run (at this size, or at all) */
    KV_PCHECK_PASS,
    KV_PCHECK_FAIL,
    KV_PCHECK_SKIPPED, /* the host check does not run at this size (KEVO_CHECK_SKIP) */
} kv_pcheck_result;

/* "not_run", "ok", "fail", "skipped": the words of the stored entry. */
const char *kv_pcheck_result_name(kv_pcheck_result r);

/* One size of the problem. */
typedef struct {
    char name[KV_PROBLEM_NAME_MAX];
    int validation;
    kv_pcheck_result self;             /* the self-check at this size */
    int ref_plain;                     /* evaluations run the reference on plain memory here */
    kv_pcheck_result host;             /* the host check at this size */
    int host_too_large;                /* not run: its tensors pass KV_PCHECK_HOST_MAX_BYTES */
    int64_t host_checked, host_failed; /* elements over every rank */
    double host_worst;                 /* worst |got - want| / tolerance of a passing element */
} kv_pcheck_size;

/* The verdict on one problem's reference at one world size. Plain data:
 * nothing to free. */
typedef struct {
    char problem[KV_PROBLEM_NAME_MAX];
    int world;
    int ok;                       /* 1: everything that ran passed */
    char message[KV_JOB_MSG_MAX]; /* the first failure, as the report or check said
                                    it; "" when ok */
    kv_pcheck_result self;        /* PASS or FAIL */
    kv_pcheck_result host;        /* NOT_RUN (no check.c, or a run's start checked the
                                    reference against itself only), PASS or FAIL */
    kv_pcheck_result floor;       /* the reference timed against each size's floor (the
                                    verdict implausible, docs/evaluator.md): NOT_RUN (a
                                    run's start does not time it), PASS or FAIL */
    int n_sizes;
    kv_pcheck_size sizes[KV_PROBLEM_MAX_SIZES];
    int64_t checked_at; /* seconds since the epoch; kv_pcheck_put sets it when 0 */
} kv_pcheck;

/* The key of p's verdict at world W into key: the SHA-256, in hex, of
 * KV_PCHECK_VERSION, W, and the name, length and bytes of each of
 * problem.json, reference.cu, inputs.cu and check.c that p has (a file
 * added, removed or changed gives another key). Returns 0, or -1 naming the
 * file that cannot be read. */
int kv_pcheck_key(const kv_problem *p, int world, char key[KV_SHA256_HEX_LEN], kv_err *err);

/* A fresh verdict of p at W from a self-check's report (kv_selfcheck, or a
 * task with .selfcheck set): every size of p named, the self-check's
 * outcome and placement at those the report has, ok for KV_VERDICT_OK,
 * failed with the report's message for KV_VERDICT_MISMATCH. Returns 0, or
 * -1 (c untouched) for any other verdict: the reference did not run to the
 * end, which is no verdict to keep; err then says "the reference of P
 * failed its self-check: <verdict>: <message>". */
int kv_pcheck_from_report(kv_pcheck *c, const kv_problem *p, int world, const kv_eval_report *r,
                          kv_err *err);

/* Reads the verdict kept under key in cache_dir into *out: 0, or
 * KV_NOTFOUND (*out zeroed) when there is none, and also when the entry
 * cannot be read or is not an entry of this key (damaged, cut short,
 * another version, members that contradict each other): then warn (may be
 * NULL) receives "<file>: <what is wrong>; checking again" and the entry is
 * left for kv_pcheck_put to replace. -1 only when the path is too long. */
int kv_pcheck_get(const char *cache_dir, const char *key, kv_pcheck *out,
                  void (*warn)(const char *msg, void *ctx), void *ctx, kv_err *err);

/* Keeps c under key in cache_dir (making <cache_dir>/problemcheck/ when
 * needed), replacing what was there: readers see the old entry or the whole
 * new one (kv_write_file_atomic). Sets c->checked_at to now when it is 0.
 * Returns 0, or -1 naming the file or folder that could not be written. */
int kv_pcheck_put(const char *cache_dir, const char *key, kv_pcheck *c, kv_err *err);

/* c as the JSON object kept in the entry (with key), for kevo problems
 * check --json; NULL when out of memory. The caller owns it (cJSON_Delete). */
cJSON *kv_pcheck_json(const kv_pcheck *c, const char *key);

/* The path of key's entry in cache_dir into out (PATH_MAX bytes): 0, or -1
 * when too long. */
int kv_pcheck_path(const char *cache_dir, const char *key, char *out, kv_err *err);

/* ---- the machine: which GPUs may form a group (group/topology.c) -------------- */

/* Every pair of a group must be NVLink peers (load/store access and native
 * atomics between them), as `kevo-worker --doctor` reports them. */
#define KV_TOPO_MAX_GPUS 16

typedef struct {
    int n;                                                  /* GPUs visible */
    unsigned char peer[KV_TOPO_MAX_GPUS][KV_TOPO_MAX_GPUS]; /* 1: NVLink peers */
} kv_topology;

/* Reads the JSON printed by `kevo-worker --doctor`, strictly
 * (kv_proto_doctor_from_json). -1 when it is not such a report (err names
 * the member) or names a GPU beyond KV_TOPO_MAX_GPUS. */
int kv_topology_parse(const char *doctor_json, kv_topology *t, kv_err *err);
/* Runs `<worker> --doctor` and parses what it prints. -1 when the worker
 * cannot be started or fails (err has what it said), or as kv_topology_parse. */
int kv_topology_probe(const char *worker_path, kv_topology *t, kv_err *err);

/* 0 when every pair of devs[0..w) are peers; otherwise -1 with a message
 * naming the first pair that is not (or a device that does not exist, or
 * one named twice). */
int kv_topology_check_group(const kv_topology *t, const int *devs, int w, kv_err *err);

/* Splits the GPUs into as many disjoint groups of `world` mutual peers as
 * possible (at most max_groups), lowest device numbers first. Returns the
 * number of groups (0 when none can be formed). Never fails. */
int kv_topology_groups(const kv_topology *t, int world, int max_groups,
                       int groups[][KV_GROUP_MAX_WORLD]);

/* ---- the machine: what confines the workers (confine/sandbox.c) --------------- */

/* What this kernel and process offer. */
typedef struct {
    int landlock_abi; /* 0: no Landlock (the kernel lacks it, or it is disabled) */
    int root;         /* kevo runs with effective uid 0: workers get their own uid */
    int mount_ns;     /* a private tmpfs scratch can be mounted (root only) */
    int net_ns;       /* a network namespace per group can be made (root only) */
} kv_sandbox_support;

/* Asks the kernel (forks a child to try the namespaces). Never fails: what
 * cannot be probed is reported as missing. */
void kv_sandbox_probe(kv_sandbox_support *s);

/* One paragraph for kevo doctor and the start of a run, into out (cut at
 * cap): what confines the workers here, and loudly what does not. */
void kv_sandbox_describe(const kv_sandbox_support *s, int allow_unconfined, char *out, size_t cap);
/* One line on the workers' network, into out (cut at cap): a namespace per
 * group, or loudly NOT ISOLATED (kevo not root). */
void kv_sandbox_describe_network(const kv_sandbox_support *s, char *out, size_t cap);

#endif
