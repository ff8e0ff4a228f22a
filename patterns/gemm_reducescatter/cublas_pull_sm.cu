// cublas_pull_sm.cu — gemm_reducescatter as cuBLAS + one SM reduce-scatter kernel (unfused):
// the reference's GEMM, with ncclReduceScatter replaced by a device-initiated kernel in which
// each rank pulls the peers' partials of its own rows over NVLink with 16-byte loads.
//
// One call, on ctx->stream:
//  1. cublasGemmEx (ctx->cublas, bf16 in, fp32 accumulation, bf16 out, row-major through
//     P^T = B^T A^T as the reference does) writes this rank's partial A_r.B_r for all M rows
//     into P, a symmetric scratch buffer (one: see c).
//  2. One kernel, same grid on every rank:
//     a. start barrier (kevo_cta_barrier phase 0): a peer's CTA runs after that peer's GEMM
//        (stream order), so after the barrier every rank's P of this call is complete.
//     b. rank r's rows are the contiguous range [r M/W N, (r+1) M/W N) of every P: each thread
//        sums its grid-stride share of 16-byte vectors over the W partials (rank order, fp32,
//        one rounding) into C_r; LOADS_IN_FLIGHT loads in flight per thread; a scalar tail
//        (and a scalar path when M/W N is not a multiple of 8, so that the range does not
//        start on a 16-byte boundary).
//     c. end barrier (phase 1): the readers' acknowledgement. The next call's GEMM rewrites P
//        while a slow peer may still read its rows of it. So CTA b, after its last load of a
//        peer's P, tells CTA b of every rank "done with your P" and waits until CTA b of every
//        rank has told it the same; this rank's kernel ends, and its next GEMM starts, only
//        after all of its CTAs got those acknowledgements, i.e. once every peer's CTAs are
//        done with its P. Every rank reads (its rows of) every P, so each CTA's
//        acknowledgements and the ones it waits for are exactly the flags of an end barrier
//        (kevo_cta_barrier phase 1): one flag latency at the end of the kernel, no extra
//        launch. P is no longer double-buffered by call parity: the GEMM's output pointer is a
//        host value, repeated by every replay of a CUDA graph, so the buffer cannot alternate;
//        a separate wait kernel before the GEMM would cost a launch per call instead.
//
// Why it should be fast: the GEMM is the reference's; the reduce-scatter reads exactly the
// (W-1)/W x 2MN bytes it must, with two barrier round trips and no NCCL protocol: at m64 ~3 us
// instead of ~10, at m8192 (64 MiB per rank at W = 2) ~180 us at ~370 GB/s instead of NCCL's
// ~300 us. Expected wins at every size (m8192 by a few percent: the GEMM dominates). It cannot
// overlap the GEMM (one stream): the fused seed does.
//
// Synchronisation: epochs (never reset, waits with >=, 5 s bound then __trap), taken on the
// device (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as
// correct as one made from the host; peers only read P (scratch) between the barriers; C_r is
// written by this rank only.
//
// Shared code: the cuBLAS call (kevo_cublas_gemm_rm), the symmetric scratch
// (kevo_scratch_peers) and the host checks are in kevo_cublas.cuh.
//
// kevo:pattern problem=gemm_reducescatter transport=sm fusion=unfused
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
constexpr const char *kWho = "gemm_reducescatter/cublas_pull_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *p[KEVO_MAX_RANKS]; // every rank's partial of this call [M][N]
    bf16 *c;                       // C_r [M/W][N]
    int64_t n;                     // elements of C_r (M/W * N)
    int vec;                       // n % 8 == 0 and every pointer 16-byte aligned
    kevo_pads pads;
};

template <int W> __global__ void __launch_bounds__(kThreads) reduce_scatter_partials(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0); // every rank's P of this call is complete

    const int64_t lo = (int64_t)p.rank * a.n;
    constexpr int U = LOADS_IN_FLIGHT / W > 0 ? LOADS_IN_FLIGHT / W : 1;
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t nvec = a.vec ? a.n / 8 : 0;
    const uint4 *src[W];
#pragma unroll
    for (int q = 0; q < W; q++)
        src[q] = reinterpret_cast<const uint4 *>(a.p[q] + lo);
    uint4 *dst = reinterpret_cast<uint4 *>(a.c);

    int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    for (; i + (U - 1) * stride < nvec; i += U * stride) {
        uint4 v[U][W];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int q = 0; q < W; q++)
                v[u][q] = __ldcg(src[q] + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; u++)
            dst[i + u * stride] = kevo_sum_bf16x8<W>(v[u]);
    }
    for (; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int q = 0; q < W; q++)
            v[q] = __ldcg(src[q] + i);
        dst[i] = kevo_sum_bf16x8<W>(v);
    }
    for (int64_t e = nvec * 8 + (int64_t)blockIdx.x * kThreads + threadIdx.x; e < a.n;
         e += stride) {
        float acc = __bfloat162float(a.p[0][lo + e]);
#pragma unroll
        for (int q = 1; q < W; q++)
            acc += __bfloat162float(a.p[q][lo + e]);
        a.c[e] = __float2bfloat16_rn(acc);
    }

    // done with every peer's P: the next GEMM of every rank may rewrite its P
    kevo_cta_barrier(p, 1);
    kevo_epoch_end(p);
}

typedef void (*kernel_fn)(Args);

kernel_fn pick(int w)
{
    switch (w) {
    case 1: return reduce_scatter_partials<1>;
    case 2: return reduce_scatter_partials<2>;
    case 3: return reduce_scatter_partials<3>;
    case 4: return reduce_scatter_partials<4>;
    case 5: return reduce_scatter_partials<5>;
    case 6: return reduce_scatter_partials<6>;
    case 7: return reduce_scatter_partials<7>;
    default: return reduce_scatter_partials<8>;
    }
}

struct State {
    bf16 *p_peer[KEVO_MAX_RANKS]; // every rank's P
    int grid;
};

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K | KEVO_GEMM_SPLIT_M, INT32_MAX, 0, m, n,
                            kw);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, n, kw;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &n, &kw))
        return 1;
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;

    const size_t pbytes = (size_t)(m * n) * sizeof(bf16);
    if (!kevo_scratch_peers(ctx, kWho, pbytes, st->p_peer))
        return 1;

    int occ = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)pick(W), kThreads, 0, CTAS_PER_SM, &occ) != 0)
        return 1;
    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    st->grid = (int)kevo_clamp_grid(((m / W) * n / 8 + kThreads - 1) / kThreads,
                                    resident < pad_limit ? resident : pad_limit);
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    int64_t m, n, kw;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw))
        return 1;
    const int64_t mw = m / W;
    if (!kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, mw * n))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    // P = A_r . B_r (this rank's partial, all M rows); the previous call's end barrier has
    // released P
    if (kevo_cublas_gemm_rm(ctx, kWho, m, n, kw, ta->ptr, tb->ptr, st->p_peer[ctx->rank]))
        return 1;

    Args a = {};
    a.n = mw * n;
    int vec = a.n % 8 == 0 && kevo_aligned16(tc->ptr);
    for (int q = 0; q < W; q++) {
        a.p[q] = st->p_peer[q];
        vec = vec && kevo_aligned16(a.p[q]);
    }
    a.c = (bf16 *)tc->ptr;
    a.vec = vec;
    a.pads = kevo_pads_of(ctx);
    pick(W)<<<st->grid, kThreads, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
