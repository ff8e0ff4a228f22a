/* worker.h — one kevo-worker process: one GPU of a group, its NCCL
 * communicator, its symmetric window, and the job runner. */
#ifndef KEVO_WORKER_H
#define KEVO_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "evaluator/job.h"
#include "evaluator/worker/device.h"
#include "kevo/kernel.h"
#include "kevo/problem.h"

#define KV_REPORTS 64
#define KV_SIDE_REF 0
#define KV_SIDE_CAND 1

typedef struct {
    int rank, world, device, group;
    int proto_fd;
    ncclComm_t comm;
    void *devcomm;               /* ncclDevComm (device.cu) */
    int lsa_barriers;
    cudaStream_t stream;         /* ctx->stream of both sides */
    cudaStream_t aux;            /* the harness's own work */
    cublasHandle_t cublas;
    int sm_count;
    size_t l2_bytes;
    /* the symmetric window, kept across jobs and grown on demand */
    void *win_base;
    size_t win_bytes;
    ncclWindow_t window;
    void *win_peers[KEVO_MAX_RANKS];
    int *agree_buf;              /* one int, device memory */
    kv_dev_report *reports;      /* KV_REPORTS of them, device memory */
    uint64_t job_id;
    const char *phase;           /* for progress messages and errors */
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
    int slots;                   /* input/output sets, rotated while timing */
    size_t slot_stride;
    size_t slots_base;
    size_t in_off[KEVO_MAX_TENSORS];          /* within a slot */
    size_t out_off[2][KEVO_MAX_TENSORS];      /* per side, within a slot */
    size_t guard_off[3 * KEVO_MAX_TENSORS];   /* guard bands within a slot */
    int n_guards;
    size_t signal_off[2], signal_bytes;
    size_t scratch_off[2], scratch_bytes;
    size_t total;
} kv_layout;

#define KV_GUARD_BYTES 4096
#define KV_SIGNAL_BYTES (64u << 10)

struct kv_size_run;

typedef struct {
    kevo_ctx ctx;
    kv_code code;
    int inited;
    size_t scratch_used;
    int index;                   /* KV_SIDE_REF or KV_SIDE_CAND */
    struct kv_size_run *run;
} kv_side;

/* The state of one size of one job. */
typedef struct kv_size_run {
    kv_worker *w;
    const kv_problem *problem;
    const kv_job *job;
    int size;                    /* index into problem->sizes */
    kv_shape in_shape[KEVO_MAX_TENSORS], out_shape[KEVO_MAX_TENSORS];
    kv_layout layout;
    kv_side side[2];
    int n_sides;                 /* 1 for a baseline */
} kv_size_run;

/* A failure of the job: the verdict and a message; `exiting` when the
 * worker must not be reused (anything but a clean ok/mismatch). */
typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX];
} kv_fail;

/* worker/main.c */
void kv_worker_progress(kv_worker *w, const char *phase);

/* worker/candidate.c */
int kv_code_load(const char *path, int require_run, kv_code *c, kv_fail *f);

/* worker/window.c */
int kv_layout_compute(const kv_problem *p, const kv_shape *in, const kv_shape *out, int n_sides,
                      size_t scratch_bytes, size_t l2_bytes, kv_layout *l);
int kv_window_ensure(kv_worker *w, size_t bytes, kv_fail *f);
void kv_window_release(kv_worker *w);
/* Points the tensors of both sides at slot k. */
void kv_size_run_bind_slot(kv_size_run *r, int k);

/* worker/job.c */
int kv_worker_run_job(kv_worker *w, const kv_job *job, kv_job_result *res);

/* worker/check.c: CUDA error helpers */
int kv_cuda_fail(kv_fail *f, cudaError_t e, const char *what);
int kv_nccl_fail(kv_fail *f, ncclResult_t r, const char *what);
int kv_fail_set(kv_fail *f, kv_verdict v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The max of every rank's status (an NCCL all-reduce on the harness stream). */
int kv_agree(kv_worker *w, int status, int *out, kv_fail *f);

#endif
