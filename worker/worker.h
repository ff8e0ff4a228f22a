/* worker.h — one kevo-worker process: one GPU of a group, its NCCL
 * communicator, its symmetric window, and the job runner. */
#ifndef KEVO_WORKER_H
#define KEVO_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "protocol/job.h"
#include "worker/device.h"
#include "kevo/kernel.h"
#include "problem/problem.h"

#define KV_REPORTS 64
#define KV_SIDE_REF 0
#define KV_SIDE_CAND 1

typedef struct {
    int rank, world, device, group;
    int proto_fd;
    ncclComm_t comm;
    void *devcomm; /* ncclDevComm (device.cu) */
    int lsa_barriers;
    cudaStream_t stream; /* ctx->stream of both sides */
    cudaStream_t aux;    /* the harness's own work */
    cublasHandle_t cublas;
    int sm_count;
    size_t l2_bytes;
    /* the symmetric window, kept across jobs and grown on demand */
    void *win_base;
    size_t win_bytes;
    ncclWindow_t window;
    void *win_peers[KEVO_MAX_RANKS];
    /* plain device memory for sides placed outside the window (placement.c) */
    void *plain_base;
    size_t plain_bytes;
    int *agree_buf;               /* one int, device memory */
    kv_dev_report *reports;       /* KV_REPORTS of them, device memory */
    volatile unsigned *gate_host; /* the timing gate's flag, mapped host memory */
    unsigned *gate_dev;           /* the same flag as the device sees it */
    unsigned gate_epoch;          /* the last value written to it */
    uint64_t job_id;
    const char *phase; /* for progress messages and errors */
} kv_worker;

/* A loaded candidate (or reference). */
typedef struct {
    void *dl;
    kevo_init_fn init;
    kevo_run_fn run;
    kevo_fini_fn fini;
} kv_code;

/* Where one size's tensors live in the window. */
typedef struct {
    int slots; /* input/output sets, rotated while timing */
    size_t slot_stride;
    size_t slots_base;
    size_t in_off[KEVO_MAX_TENSORS];        /* within a slot */
    size_t out_off[2][KEVO_MAX_TENSORS];    /* per side, within a slot */
    size_t guard_off[3 * KEVO_MAX_TENSORS]; /* guard bands within a slot */
    size_t guard_len[3 * KEVO_MAX_TENSORS];
    int n_guards;
    size_t signal_off[2], signal_bytes;
    size_t scratch_off[2], scratch_bytes;
    size_t total;
    /* per side: in the window (0) or on plain memory (1), at a shift in bytes
     * (placement.c); offsets above are the same in either */
    int plain[2];
    size_t shift[2];
} kv_layout;

/* How far the self-check's plain copy of the reference is shifted: still
 * 16-byte aligned (vector loads stay legal), no longer 32- to 4096-byte. */
#define KV_SELFCHECK_SHIFT 272u

#define KV_GUARD_BYTES 4096
#define KV_SIGNAL_BYTES (64u << 10)

struct kv_size_run;

typedef struct {
    kevo_ctx ctx;
    kv_code code;
    int inited;
    size_t scratch_used;
    int index; /* KV_SIDE_REF or KV_SIDE_CAND */
    struct kv_size_run *run;
} kv_side;

/* The state of one size of one job. */
typedef struct kv_size_run {
    kv_worker *w;
    const kv_problem *problem;
    const kv_job *job;
    int size; /* index into problem->sizes */
    kv_shape in_shape[KEVO_MAX_TENSORS], out_shape[KEVO_MAX_TENSORS];
    kv_layout layout;
    kv_side side[2];
    int n_sides;                /* 1 for a baseline */
    kevo_inputs_fn inputs_hook; /* the problem's inputs.cu, or NULL */
} kv_size_run;

/* A failure of the job: the verdict and a message; `elsewhere` when this
 * rank only learned of it from another rank (the cross-rank agreement). */
typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX];
    int elsewhere;
} kv_fail;

/* worker/main.c */
void kv_worker_progress(kv_worker *w, const char *phase);

/* worker/candidate.c */
int kv_code_load(const char *path, int require_run, kv_code *c, kv_fail *f);
int kv_inputs_hook_load(const char *path, kevo_inputs_fn *out, kv_fail *f);

/* worker/window.c */
/* scratch_bytes: the run's setting (0 = default: at least 64 MiB, twice the
 * largest tensor and the problem's scratch_bytes, `problem_scratch`). */
int kv_layout_compute(const kv_problem *p, const kv_shape *in, const kv_shape *out, int n_sides,
                      size_t scratch_bytes, size_t problem_scratch, size_t l2_bytes, kv_layout *l);
int kv_window_ensure(kv_worker *w, size_t bytes, kv_fail *f);
/* Lets the window go: the first failure of NCCL's calls, the window gone
 * either way. */
ncclResult_t kv_window_release(kv_worker *w);
/* Points the tensors of both sides at slot k. */
void kv_size_run_bind_slot(kv_size_run *r, int k);

/* worker/placement.c */
/* Bytes of plain memory the layout's plain sides need (0: none). */
size_t kv_placement_plain_bytes(const kv_layout *l);
/* Where side s's copy of the layout starts: the window's base, or its
 * region of the plain arena plus its shift. */
char *kv_placement_base(const kv_worker *w, const kv_layout *l, int s);
int kv_plain_ensure(kv_worker *w, size_t bytes, kv_fail *f);
void kv_plain_release(kv_worker *w);

/* worker/job.c */
int kv_worker_run_job(kv_worker *w, const kv_job *job, kv_job_result *res);

/* Checksums taken before a call, compared after it. */
typedef struct {
    uint64_t in[2][KEVO_MAX_TENSORS]; /* per side: a plain side has its own copy */
    uint64_t ref_out[KEVO_MAX_TENSORS];
} kv_sums;

/* worker/job.c */
int kv_call_run(kv_size_run *r, int side, kv_fail *f);

/* worker/checks.c */
uint64_t kv_mix64(uint64_t z);
int kv_guards_fill(kv_size_run *r, kv_fail *f);
/* Fresh inputs for slot k from (job seed, size, draw, tensor, rank), written
 * into side 0's inputs and copied into those of a side placed elsewhere;
 * binds slot k. */
int kv_fill_inputs(kv_size_run *r, int k, uint64_t draw, cudaStream_t s, kv_fail *f);
/* Fresh inputs for slots 0 .. slots-1 from one draw (each slot its own
 * values), enqueued on s: what the timed calls run on. */
int kv_fill_inputs_slots(kv_size_run *r, int slots, uint64_t draw, cudaStream_t s, kv_fail *f);
int kv_poison_outputs(kv_size_run *r, int side, cudaStream_t s, kv_fail *f);
int kv_checksum_inputs(kv_size_run *r, kv_sums *sums, kv_fail *f);
int kv_checksum_ref_outputs(kv_size_run *r, kv_sums *sums, kv_fail *f);
/* The candidate's outputs against the reference's in the bound slot: 0 ok,
 * 1 a mismatch (described in o), -1 failure. */
int kv_check_outputs(kv_size_run *r, kv_size_outcome *o, kv_fail *f);
/* Inputs and reference outputs unchanged (when sums is given) and the guard
 * bands of slot k intact: 0, 1 or -1 as above. */
int kv_check_integrity(kv_size_run *r, int k, const kv_sums *sums, kv_size_outcome *o, kv_fail *f);
/* The timed calls' checks, enqueued on the timing stream between the calls
 * and read once at the end: every call's outputs against the reference's on
 * the same inputs (kv_timed_compare after each round of calls over slots 0 ..
 * slots-1), and the reference's outputs checksummed before and after the
 * candidate's calls (a candidate that overwrites them to match its own is
 * seen). kv_timed_checks_result: 0 all good, 1 a mismatch described in o
 * (calls: how many timed calls the checks covered), -1 failure. */
int kv_timed_checks_reset(kv_size_run *r, kv_fail *f);
int kv_timed_checksum_ref(kv_size_run *r, int slots, int after, cudaStream_t s, kv_fail *f);
int kv_timed_compare(kv_size_run *r, int slots, cudaStream_t s, kv_fail *f);
int kv_timed_checks_result(kv_size_run *r, int calls, kv_size_outcome *o, kv_fail *f);
/* This device idle, then every rank. */
int kv_quiesce(kv_size_run *r, kv_fail *f);

/* worker/dump.c: one call of every side on fresh inputs (draw 0), then the
 * inputs and each side's outputs written under job->dump_dir as
 * <size>/rank<r>/{inputs,reference,candidate}/<tensor>.bin (raw bytes). */
int kv_dump_size(kv_size_run *r, kv_fail *f);

/* worker/capture.c */
int kv_capture_candidate(kv_size_run *r, kv_job_result *res, kv_fail *f);
/* `calls` successive calls of side s on slots 0, 1, ... (round the slots)
 * captured into one graph and instantiated into *exec: 0; 1 when kevo_run
 * fails or cannot be captured (nothing made, the capture's error cleared);
 * -1 on another failure (f set). The replay trial and graph timing share it. */
int kv_capture_calls(kv_size_run *r, int s, int calls, cudaGraphExec_t *exec, kv_fail *f);

/* worker/replay.c: KV_REPLAY_CALLS candidate calls on rotated slots captured
 * into one graph, replayed KV_REPLAY_COUNT times with fresh inputs between
 * replays and one rank KV_SKEW_US late on every replay after the first; every
 * call's outputs checked. 0 ok, 1 mismatch (here or elsewhere), -1 failure. */
#define KV_REPLAY_CALLS 3
#define KV_REPLAY_COUNT 3
#define KV_SKEW_US 5000
int kv_replay_trial(kv_size_run *r, kv_size_outcome *o, kv_fail *f);

/* worker/timing.c */
void kv_summarize(double *v, int n, kv_timing *t);
int kv_time_size(kv_size_run *r, kv_size_outcome *o, double *gpu_s, kv_fail *f);

/* worker/fail.c: verdicts from CUDA and NCCL errors, cross-rank agreement */
int kv_cuda_fail(kv_fail *f, cudaError_t e, const char *what);
int kv_nccl_fail(kv_fail *f, ncclResult_t r, const char *what);
int kv_fail_set(kv_fail *f, kv_verdict v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A runtime error that another rank observed: "<what> failed on another rank". */
int kv_fail_on_other_rank(kv_fail *f, const char *what);
/* The max of every rank's status (an NCCL all-reduce on the harness stream). */
int kv_agree(kv_worker *w, int status, int *out, kv_fail *f);

#endif
