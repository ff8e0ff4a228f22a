/* kernel.h — the candidate ABI: what a kevo kernel is compiled against.
 *
 * A candidate is one .cu file compiled by nvcc into a shared object and
 * loaded into every worker process (one per GPU) with dlopen. It defines,
 * with C linkage:
 *
 *   int  kevo_init(kevo_ctx *ctx);  optional; once per (problem, size); untimed;
 *                                   may allocate (scratch_alloc, cudaMalloc)
 *   int  kevo_run (kevo_ctx *ctx);  required; timed; enqueues all of its work
 *                                   on ctx->stream and returns (no host sync needed)
 *   void kevo_fini(kevo_ctx *ctx);  optional; frees what kevo_init took
 *
 * Return 0 for success; anything else is a runtime error. Every rank calls
 * the same functions in the same order with the same sizes; a rank that
 * skips a collective step makes the others wait until the deadline.
 *
 * Contract (docs/abi.md explains each point with an example):
 *  - Inputs are read-only. Outputs must be fully written by every call
 *    (they are poisoned before checked calls). Nothing outside the outputs,
 *    the scratch the candidate allocated and the signal pad may be written.
 *  - All work of a call goes on ctx->stream: the evaluator times with CUDA
 *    events on that stream and captures one call into a graph to see what it
 *    launches. Work on other streams is invisible to the timer and refused.
 *  - Tensor pointers (ptr, peer[]) may change between calls: the evaluator
 *    rotates several input/output sets so that small problems do not run
 *    from L2. Read them from ctx on every call; do not cache them in
 *    kevo_init. Their window offsets change with them.
 *  - The signal pad is zeroed once, never reset by the harness, and is the
 *    candidate's alone: flags hold monotonically increasing epochs, never
 *    reset inside a kernel.
 *  - Replay-safe (ABI 2): a call captured into a CUDA graph must stay correct
 *    when the graph is replayed any number of times. A replay repeats every
 *    host value of the capture (kernel arguments, call_index, pointers), so
 *    epochs and double-buffer parity must come from the device: counters in
 *    the signal pad that the kernels advance themselves (patterns/
 *    kevo_sync.cuh: kevo_epoch_begin / kevo_epoch_end). ctx->call_index is
 *    for host-side choices that do not affect correctness.
 *  - NVLink multicast (multimem, cuMulticast*) is refused unless the run and
 *    the machine allow it.
 */
#ifndef KEVO_KERNEL_H
#define KEVO_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define KEVO_ABI_VERSION 2

#define KEVO_MAX_RANKS 8
#define KEVO_MAX_TENSORS 8
#define KEVO_MAX_PARAMS 16
#define KEVO_MAX_DIMS 4
#define KEVO_NAME_MAX 32

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KEVO_BF16 = 0,
    KEVO_F16 = 1,
    KEVO_F32 = 2,
    KEVO_I32 = 3,
    KEVO_I64 = 4,
    KEVO_FP8_E4M3 = 5, /* one byte per element */
    KEVO_DTYPE_COUNT
} kevo_dtype;

typedef struct {
    char name[KEVO_NAME_MAX];
    kevo_dtype dtype;
    int ndim;
    int64_t shape[KEVO_MAX_DIMS]; /* row-major, contiguous */
    int64_t numel;
    size_t bytes;
    void *ptr;                  /* this rank's copy */
    void *peer[KEVO_MAX_RANKS]; /* every rank's copy, loadable and storable from
                                         this GPU (peer[rank] == ptr) */
    size_t window_offset;       /* of ptr within ctx->window; the same on every rank */
    /* A problem's reference may be handed plain device memory instead (at a
     * size whose tensors NCCL's symmetric kernels get wrong, and in kevo
     * problems check): then peer[] is all NULL and window_offset SIZE_MAX,
     * and so are those of its scratch. Candidates are always in the window. */
} kevo_tensor;

struct ncclDevComm; /* nccl_device.h (C++) gives the complete type */

typedef struct kevo_ctx kevo_ctx;

struct kevo_ctx {
    int abi_version; /* KEVO_ABI_VERSION */
    int rank, world, device;
    cudaStream_t stream; /* all work of kevo_run goes here */
    int sm_count;        /* SMs of this GPU */

    /* the problem and its size class */
    const char *problem;
    const char *size_name;
    int n_params;
    char param_names[KEVO_MAX_PARAMS][KEVO_NAME_MAX];
    int64_t param_values[KEVO_MAX_PARAMS];
    int n_inputs, n_outputs;
    kevo_tensor inputs[KEVO_MAX_TENSORS];
    kevo_tensor outputs[KEVO_MAX_TENSORS];

    /* symmetric memory: everything above and below lives in one NCCL window */
    ncclComm_t comm;                   /* host communicator (NCCL collectives) */
    ncclWindow_t window;               /* for ncclGetLsaPointer(window, offset, peer) */
    const struct ncclDevComm *devcomm; /* pass *devcomm by value to kernels */
    int lsa_barrier_count;             /* CTAs that may open an ncclLsaBarrierSession */

    uint64_t *signal; /* zeroed once, never reset by the harness */
    uint64_t *signal_peer[KEVO_MAX_RANKS];
    size_t signal_words;
    size_t signal_window_offset;
    uint64_t call_index; /* 0, 1, 2, ... per kevo_run of this ctx; a graph
                                         replay repeats it: never build epochs from it */

    /* Symmetric scratch, in kevo_init only: the same sizes in the same order
     * on every rank give the same window offsets. Zeroed. Returns 0, or -1
     * when the scratch area is exhausted. */
    int (*scratch_alloc)(kevo_ctx *ctx, size_t bytes, void **local, void *peer[KEVO_MAX_RANKS],
                         size_t *window_offset);
    size_t scratch_bytes_left;

    cublasHandle_t cublas; /* bound to ctx->stream */
    void *user;            /* the candidate's own state */
    void *harness;         /* the evaluator's; do not touch */
};

/* The value of an integer parameter of the problem, or `fallback`. */
static inline int64_t kevo_param(const kevo_ctx *ctx, const char *name, int64_t fallback)
{
    for (int i = 0; i < ctx->n_params; i++) {
        const char *a = ctx->param_names[i], *b = name;
        while (*a && *a == *b) {
            a++;
            b++;
        }
        if (*a == 0 && *b == 0)
            return ctx->param_values[i];
    }
    return fallback;
}

static inline size_t kevo_dtype_size(kevo_dtype t)
{
    switch (t) {
    case KEVO_BF16:
    case KEVO_F16: return 2;
    case KEVO_F32:
    case KEVO_I32: return 4;
    case KEVO_I64: return 8;
    case KEVO_FP8_E4M3: return 1;
    default: return 0;
    }
}

/* The entry points, as the evaluator looks them up. */
typedef int (*kevo_init_fn)(kevo_ctx *ctx);
typedef int (*kevo_run_fn)(kevo_ctx *ctx);
typedef void (*kevo_fini_fn)(kevo_ctx *ctx);

/* A problem's inputs hook (problems/<name>/inputs.cu), for inputs that a
 * distribution cannot describe (routing maps, indices):
 *   int kevo_inputs(kevo_ctx *ctx, int input, uint64_t seed);
 * fills ctx->inputs[input] on ctx->stream from seed alone (the same seed
 * gives the same values on every call); inputs before it are already
 * filled. Returns 0, or non-zero on failure. */
typedef int (*kevo_inputs_fn)(kevo_ctx *ctx, int input, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
