// cublas_pull_sm.cu — allgather_gemm as one SM all-gather kernel + cuBLAS (unfused): NCCL's
// all-gather replaced by a device-initiated kernel in which every rank pulls the peers' rows of
// A over NVLink with 16-byte loads into a private M x K buffer, then the reference's GEMM.
//
// One call, on ctx->stream:
//  1. One kernel, same grid on every rank:
//     a. start barrier (kevo_cta_barrier phase 0): CTA b meets CTA b of every rank; a peer
//        that has entered this call has its A ready.
//     b. every thread copies its grid-stride share of 16-byte vectors of each rank's A_s
//        (through ctx->inputs[0].peer[s]; this rank's own block too, a local copy that runs
//        beside the NVLink pulls) to G + s M/W K, LOADS_IN_FLIGHT loads in flight, peers in
//        the order rank+1, rank+2, ... so that the ranks do not all read the same peer first.
//        A_s and the blocks of G are contiguous, so this is a flat copy per block: vector body
//        and scalar tail, or scalar copies when M/W K is not a multiple of 8 (blocks of G then
//        do not start on 16-byte boundaries).
//     c. end barrier (phase 1): every peer has finished reading this rank's A before it
//        returns (its inputs may be overwritten as soon as its stream is done).
//  2. cublasGemmEx (ctx->cublas, bf16 in, fp32 accumulation, bf16 out, row-major through
//     C^T = B^T G^T as the reference does) multiplies G by B_r into C_r.
//
// Why it should be fast: the GEMM is the reference's; the gather is one kernel with two
// barrier round trips and no NCCL protocol: at m64 ~4 us instead of ~10, at m8192 (64 MiB to
// receive at W = 2) ~180 us at ~370 GB/s instead of NCCL's ~290 us. Expected wins at every
// size (m8192 by a few percent: the GEMM dominates). It cannot overlap the GEMM (one stream):
// the fused seed does.
//
// Synchronisation: epochs (never reset, waits with >=, 5 s bound then __trap), taken on the
// device (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as
// correct as one made from the host; peers' inputs are read only between the start and the
// end barrier; G is private and read by the GEMM that follows on the same stream.
//
// Shared code: the cuBLAS call (kevo_cublas_gemm_rm) and the host checks are in kevo_cublas.cuh.
//
// kevo:pattern problem=allgather_gemm transport=sm fusion=unfused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param LOADS_IN_FLIGHT default=8 values=2,4,8,16
#define CTAS_PER_SM 2
#define LOADS_IN_FLIGHT 8

#include "kevo/kernel.h"
#include "kevo_cublas.cuh"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 256;
constexpr const char *kWho = "allgather_gemm/cublas_pull_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *a[KEVO_MAX_RANKS]; // every rank's A_s [M/W][K]
    bf16 *g;                       // gathered A [M][K] (private)
    int64_t blk;                   // elements per block (M/W * K)
    int vec;                       // blk % 8 == 0 and every pointer 16-byte aligned
    kevo_pads pads;
};

__global__ void __launch_bounds__(kThreads) gather_rows(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0); // every peer's A is ready

    const int W = p.world, rank = p.rank;
    constexpr int U = LOADS_IN_FLIGHT;
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t first = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    const int64_t nvec = a.vec ? a.blk / 8 : 0;
    for (int j = 1; j <= W; j++) {
        const int s = (rank + j) % W; // this rank's own block last
        const uint4 *src = reinterpret_cast<const uint4 *>(a.a[s]);
        uint4 *dst = reinterpret_cast<uint4 *>(a.g + (int64_t)s * a.blk);
        int64_t i = first;
        for (; i + (U - 1) * stride < nvec; i += U * stride) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                v[u] = src[i + u * stride];
#pragma unroll
            for (int u = 0; u < U; u++)
                dst[i + u * stride] = v[u];
        }
        for (; i < nvec; i += stride)
            dst[i] = src[i];
        for (int64_t e = nvec * 8 + first; e < a.blk; e += stride)
            a.g[(int64_t)s * a.blk + e] = a.a[s][e];
    }

    kevo_cta_barrier(p, 1); // no peer reads this rank's A after it returns
    kevo_epoch_end(p);
}

struct State {
    bf16 *g;
    int grid;
};

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *nw, int64_t *k)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_N | KEVO_GEMM_SPLIT_M, INT32_MAX, 0, m, nw,
                            k);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, nw, k;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &nw, &k))
        return 1;
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    cudaError_t e = cudaMalloc(&st->g, (size_t)(m * k) * sizeof(bf16));
    if (e != cudaSuccess)
        return kevo_fail(kWho, "cudaMalloc of the gathered A: %s", cudaGetErrorString(e));
    int occ = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)gather_rows, kThreads, 0, CTAS_PER_SM, &occ) != 0)
        return 1;
    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    st->grid = (int)kevo_clamp_grid(((m / W) * k / 8 + kThreads - 1) / kThreads,
                                    resident < pad_limit ? resident : pad_limit);
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    kevo_free_checked(kWho, st->g, "gathered A");
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    int64_t m, nw, k;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &nw, &k))
        return 1;
    const int64_t mw = m / W;
    if (!kevo_gemm_tensors_ok(ctx, kWho, mw * k, k * nw, m * nw))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    Args a = {};
    a.g = st->g;
    a.blk = mw * k;
    int vec = a.blk % 8 == 0 && kevo_aligned16(st->g);
    for (int q = 0; q < W; q++) {
        a.a[q] = (const bf16 *)ta->peer[q];
        vec = vec && kevo_aligned16(ta->peer[q]);
    }
    a.vec = vec;
    a.pads = kevo_pads_of(ctx);
    gather_rows<<<st->grid, kThreads, 0, ctx->stream>>>(a);
    if (kevo_launched(kWho, "launch") != 0)
        return 1;

    // C_r = G . B_r
    return kevo_cublas_gemm_rm(ctx, kWho, m, nw, k, st->g, tb->ptr, tc->ptr);
}
