// cublas_pull_sm.cu — gemm_reducescatter as cuBLAS + one SM reduce-scatter kernel (unfused):
// the reference's GEMM, with ncclReduceScatter replaced by a device-initiated kernel in which
// each rank pulls the peers' partials of its own rows over NVLink with 16-byte loads.
//
// One call, on ctx->stream:
//  1. cublasGemmEx (ctx->cublas, bf16 in, fp32 accumulation, bf16 out, row-major through
//     P^T = B^T A^T as the reference does) writes this rank's partial A_r.B_r for all M rows
//     into P, a symmetric scratch buffer (two, used by call parity, when the scratch holds
//     both).
//  2. One kernel, same grid on every rank:
//     a. start barrier (kevo_cta_barrier phase 0): a peer's CTA runs after that peer's GEMM
//        (stream order), so after the barrier every rank's P of this call is complete.
//     b. rank r's rows are the contiguous range [r M/W N, (r+1) M/W N) of every P: each thread
//        sums its grid-stride share of 16-byte vectors over the W partials (rank order, fp32,
//        one rounding) into C_r; LOADS_IN_FLIGHT loads in flight per thread; a scalar tail
//        (and a scalar path when M/W N is not a multiple of 8, so that the range does not
//        start on a 16-byte boundary).
//     c. end barrier (phase 1) only with a single P buffer (the next call's GEMM must not
//        overwrite P while a slow peer still reads it). With two, a rank reaches the GEMM of
//        call c + 2 (which rewrites call c's buffer) only after call c + 1's start barrier,
//        which every peer reaches only after finishing call c. (The captured call 0 never
//        runs; executed calls 1, 2, 3, ... alternate buffers.)
//
// Why it should be fast: the GEMM is the reference's; the reduce-scatter reads exactly the
// (W-1)/W x 2MN bytes it must, with one barrier round trip and no NCCL protocol: at m64 ~3 us
// instead of ~10, at m8192 (64 MiB per rank at W = 2) ~180 us at ~370 GB/s instead of NCCL's
// ~300 us. Expected wins at every size (m8192 by a few percent: the GEMM dominates). It cannot
// overlap the GEMM (one stream): the fused seed does.
//
// Synchronisation: epochs (call_index + 1, never reset, waits with >=, 5 s bound then __trap);
// peers only read P (scratch) between the barriers; C_r is written by this rank only.
//
// Shared code: the cuBLAS call (kevo_cublas_gemm_rm), the parity P buffers
// (kevo_scratch_sets) and the host checks are in kevo_cublas.cuh.
//
// kevo:pattern problem=gemm_reducescatter transport=sm fusion=unfused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param LOADS_IN_FLIGHT default=8 values=2,4,8,16
#define CTAS_PER_SM 2
#define LOADS_IN_FLIGHT 8

#include "kevo/kernel.h"
#include "kevo_cublas.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256;
constexpr const char *kWho = "gemm_reducescatter cublas_pull_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *p[KEVO_MAX_RANKS]; // every rank's partial of this call [M][N]
    bf16 *c;                       // C_r [M/W][N]
    int64_t n;                     // elements of C_r (M/W * N)
    int vec;                       // n % 8 == 0 and every pointer 16-byte aligned
    int end_barrier;
    kevo_pads pads;
};

template <int W>
__global__ void __launch_bounds__(kThreads) reduce_scatter_partials(const Args a)
{
    kevo_cta_barrier(a.pads, 0); // every rank's P of this call is complete

    const int64_t lo = (int64_t)a.pads.rank * a.n;
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

    if (a.end_barrier)
        kevo_cta_barrier(a.pads, 1);
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
    bf16 *p_peer[2][KEVO_MAX_RANKS];
    int nbuf;
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
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "%s: out of host memory\n", kWho);
        return 1;
    }
    ctx->user = st;

    const size_t pbytes = (size_t)(m * n) * sizeof(bf16);
    // two P buffers when they fit (equal on every rank: same sizes, same scratch area)
    st->nbuf = kevo_scratch_sets(ctx, kWho, pbytes, st->p_peer);
    if (st->nbuf < 1)
        return 1;

    int occ = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, pick(W), kThreads, 0);
    if (e != cudaSuccess || occ < 1) {
        fprintf(stderr, "%s: occupancy: %s\n", kWho, cudaGetErrorString(e));
        return 1;
    }
    const int64_t resident = (int64_t)(occ < CTAS_PER_SM ? occ : CTAS_PER_SM) * ctx->sm_count;
    kevo_pads pads = kevo_pads_of(ctx);
    int64_t grid = ((m / W) * n / 8 + kThreads - 1) / kThreads;
    if (grid > resident)
        grid = resident;
    if (grid > kevo_pads_max_ctas(pads, 2))
        grid = kevo_pads_max_ctas(pads, 2);
    if (grid < 1)
        grid = 1;
    st->grid = (int)grid;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const int W = ctx->world;
    int64_t m, n, kw;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw))
        return 1;
    const int64_t mw = m / W;
    if (!kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, mw * n))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];
    const int buf = st->nbuf == 2 ? (int)(ctx->call_index & 1) : 0;

    // P = A_r . B_r (this rank's partial, all M rows)
    if (kevo_cublas_gemm_rm(ctx, kWho, m, n, kw, ta->ptr, tb->ptr, st->p_peer[buf][ctx->rank]))
        return 1;

    Args a = {};
    a.n = mw * n;
    int vec = a.n % 8 == 0 && kevo_aligned16(tc->ptr);
    for (int q = 0; q < W; q++) {
        a.p[q] = st->p_peer[buf][q];
        vec = vec && kevo_aligned16(a.p[q]);
    }
    a.c = (bf16 *)tc->ptr;
    a.vec = vec;
    a.end_barrier = st->nbuf == 1;
    a.pads = kevo_pads_of(ctx);
    pick(W)<<<st->grid, kThreads, 0, ctx->stream>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: launch: %s\n", kWho, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
