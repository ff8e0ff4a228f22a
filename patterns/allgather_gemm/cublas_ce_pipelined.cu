// cublas_ce_pipelined.cu — allgather_gemm as a pipeline: the copy engine gathers the peers' rows
// of A on a side stream while cuBLAS multiplies this rank's own rows on ctx->stream; each peer's
// block is multiplied as soon as it has arrived. The gather hides under the GEMM of the own rows.
//
// One call, W ranks, M/W rows of A per rank (A_s: rows [s M/W, (s+1) M/W) of the logical A):
//   ctx->stream  start barrier (1-CTA kernel, phase 0): every peer has entered the call, so its
//                A holds this call's values; then fork the side stream (an event)
//   side stream  for q = rank+1, rank+2, ... (mod W), for each of CHUNKS parts of A_q's rows:
//                cudaMemcpyAsync of the part -> G slot of q (copy engine, over NVLink), then the
//                event pulled[q][part]
//   ctx->stream  cublasGemmEx C_r[own rows] = A_r . B_r; then for q = rank+1, ..., for each
//                part: wait for pulled[q][part], cublasGemmEx C_r[rows of the part] = G . B_r
//   ctx->stream  end barrier (1-CTA kernel, phase 1): every peer's copies from this rank's A
//                are done (they came before its end barrier on its joined streams)
//
// Why it should be fast: the reference (ncclAllGather, then cuBLAS) and cublas_pull_sm (one SM
// gather kernel, then cuBLAS) move all of A before the GEMM starts (64 MiB to receive at m8192,
// W = 2: ~170-290 us). Here the gather runs on the copy engine (no SM) under the GEMM of the
// own rows (~1/W of ~2.7 ms at m8192), so a call costs the GEMM cut into W row blocks plus two
// barriers. At small M the W GEMMs and the stream transitions cost more than they hide.
//
// Synchronisation: peers' A are read (by this rank's copies) only after the start barrier, and
// before the end barrier (the side stream is joined through the events of the last GEMMs'
// waits, all before it), so a rank's inputs are no longer read by anyone once its end barrier
// has passed. G (private scratch) is written by this rank's side stream and read by its GEMMs
// after pulled[q]; the next call's copies come after this call's end barrier. Flags: words
// [phase][source rank] of the signal pad, epochs, never reset, bounded waits. The two barrier
// kernels take their epochs on the device (kevo_epoch_begin / kevo_epoch_end, channel 0: the
// start barrier one epoch, the end barrier the next, on every rank), so a call replayed from a
// CUDA graph is as correct as one made from the host. The side stream and the barrier kernel:
// kevo_side.cuh (docs/abi.md rule 4). The cuBLAS call: kevo_cublas.cuh.
//
// CHUNKS > 1 lets the GEMM of a peer's first rows start before all of its rows have arrived:
// useless at W = 2 (the own rows' GEMM hides the whole pull), meant for larger W, where the own
// rows are 1/W of the work and the pulls of W-1 blocks may outlast them.
//
// kevo:pattern problem=allgather_gemm transport=ce fusion=unfused
// kevo:param CHUNKS default=1 values=1,2,4
#define CHUNKS 1
#include "kevo/kernel.h"
#include "kevo_cublas.cuh"
#include "kevo_host.cuh"
#include "kevo_side.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "allgather_gemm/cublas_ce_pipelined";

typedef __nv_bfloat16 bf16;

struct State {
    bf16 *g; // W-1 slots of M/W x K, this rank's
    kevo_side side;
    cudaEvent_t pulled[KEVO_MAX_RANKS][CHUNKS]; // by source rank and part
};

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *nw, int64_t *k)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_N | KEVO_GEMM_SPLIT_M, INT32_MAX, 0, m, nw,
                            k);
}

int fail(const char *what, cudaError_t e)
{
    return kevo_fail(kWho, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, nw, k;
    if (W < 2 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &nw, &k))
        return 1;
    if (kevo_pads_max_ctas(kevo_pads_of(ctx), 2) < 1) // one CTA, phases 0 and 1
        return kevo_fail(kWho, "the signal pad is too small");
    State *st = kevo_state_new<State>(ctx, kWho); // kevo_fini frees it, also after a failure
    if (!st)
        return 1;
    bf16 *g_peer[KEVO_MAX_RANKS];
    if (!kevo_scratch_peers(ctx, kWho, (size_t)(W - 1) * (size_t)(m / W * k) * sizeof(bf16),
                            g_peer))
        return 1;
    st->g = g_peer[ctx->rank];
    cudaError_t e = kevo_side_create(&st->side);
    for (int q = 0; q < W; q++)
        for (int c = 0; e == cudaSuccess && c < CHUNKS; c++)
            e = cudaEventCreateWithFlags(&st->pulled[q][c], cudaEventDisableTiming);
    return e == cudaSuccess ? 0 : fail("creating the side stream and its events", e);
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    for (int q = 0; q < KEVO_MAX_RANKS; q++)
        for (int c = 0; c < CHUNKS; c++)
            if (st->pulled[q][c])
                cudaEventDestroy(st->pulled[q][c]);
    kevo_side_destroy(&st->side);
    kevo_state_free(ctx); // the scratch belongs to the harness
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world, rank = ctx->rank;
    int64_t m, nw, k;
    if (!st || !st->pulled[W - 1][CHUNKS - 1] || ctx->n_inputs < 2 || ctx->n_outputs < 1 ||
        !read_params(ctx, &m, &nw, &k) ||
        !kevo_gemm_tensors_ok(ctx, kWho, m / W * k, k * nw, m * nw))
        return 1;
    const int64_t mr = m / W, part = (mr + CHUNKS - 1) / CHUNKS; // rows of a part
    const kevo_tensor *ta = &ctx->inputs[0];
    const bf16 *b = (const bf16 *)ctx->inputs[1].ptr;
    bf16 *c = (bf16 *)ctx->outputs[0].ptr;
    const kevo_pads pads = kevo_pads_of(ctx);
    cudaStream_t s = ctx->stream, side = st->side.stream;
    cudaError_t e;

    kevo_barrier_kernel<<<1, 32, 0, s>>>(pads, 0); // every peer's A is ready after it
    if (kevo_launched(kWho, "start barrier launch") != 0)
        return 1;
    if ((e = kevo_side_fork(st->side, s)) != cudaSuccess)
        return fail("forking the side stream", e);
    for (int i = 1; i < W; i++) {
        const int q = (rank + i) % W;
        for (int64_t r0 = 0, pi = 0; r0 < mr; r0 += part, pi++) {
            const int64_t rows = mr - r0 < part ? mr - r0 : part;
            bf16 *dst = st->g + ((int64_t)(i - 1) * mr + r0) * k;
            e = cudaMemcpyAsync(dst, (const bf16 *)ta->peer[q] + r0 * k,
                                (size_t)(rows * k) * sizeof(bf16), cudaMemcpyDeviceToDevice, side);
            if (e != cudaSuccess)
                return fail("cudaMemcpyAsync of a peer's A", e);
            if ((e = cudaEventRecord(st->pulled[q][pi], side)) != cudaSuccess)
                return fail("recording pulled", e);
        }
    }
    if (kevo_cublas_gemm_rm(ctx, kWho, mr, nw, k, ta->ptr, b, c + rank * mr * nw))
        return 1;
    for (int i = 1; i < W; i++) {
        const int q = (rank + i) % W;
        for (int64_t r0 = 0, pi = 0; r0 < mr; r0 += part, pi++) {
            const int64_t rows = mr - r0 < part ? mr - r0 : part;
            if ((e = cudaStreamWaitEvent(s, st->pulled[q][pi], 0)) != cudaSuccess)
                return fail("waiting for a peer's rows", e);
            if (kevo_cublas_gemm_rm(ctx, kWho, rows, nw, k,
                                    st->g + ((int64_t)(i - 1) * mr + r0) * k, b,
                                    c + (q * mr + r0) * nw))
                return 1;
        }
    }
    // the waits above joined the side stream; the end barrier follows every copy
    kevo_barrier_kernel<<<1, 32, 0, s>>>(pads, 1);
    return kevo_launched(kWho, "end barrier launch");
}
