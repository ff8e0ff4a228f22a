// cublas_oneshot_sm.cu — gemm_allreduce as cuBLAS + one SM all-reduce kernel (unfused): the
// reference's GEMM, with NCCL's all-reduce replaced by a device-initiated one-shot (or, for
// large C at W >= 4, two-shot) kernel that pulls the peers' partials over NVLink with 16-byte
// loads.
//
// One call, on ctx->stream:
//  1. cublasGemmEx (ctx->cublas, bf16 in, fp32 accumulation, bf16 out, row-major through
//     C^T = B^T A^T as the reference does) writes this rank's partial A_r.B_r into P, a
//     symmetric scratch buffer (one: see c).
//  2. One kernel, same grid on every rank:
//     a. start barrier (kevo_cta_barrier phase 0): CTA b meets CTA b of every rank. A peer's
//        CTA runs only after that peer's GEMM finished (stream order), so after the barrier
//        every rank's P of this call is complete and visible (release/acquire, .sys).
//     b. one-shot (W = 2, or C at most ONESHOT_MAX_KB): every thread sums its grid-stride
//        share of 16-byte vectors of all W partials (rank order, fp32, one rounding: the same
//        bits on every rank) and writes its own C. Two-shot (larger C at W >= 4): rank r sums
//        the r-th 1/W slice and stores it into every rank's C, so each link carries
//        2 (W-1)/W x |C| instead of (W-1) x |C|.
//        C is one contiguous M x N array and the all-reduce is elementwise, so row alignment
//        does not matter: a vector body and a scalar tail (M N need not be a multiple of 8).
//     c. end barrier (phase 1): the readers' acknowledgement. The next call's GEMM rewrites P
//        while a slow peer may still read it (and, two-shot, peers store into this rank's C).
//        So CTA b, after its last load of a peer's P (and last store into a peer's C), tells
//        CTA b of every rank "done with your P" and waits until CTA b of every rank has told it
//        the same; this rank's kernel ends, and its next GEMM starts, only after all of its
//        CTAs got those acknowledgements, i.e. once every peer's CTAs are done with its P.
//        Every rank reads every P, so each CTA's acknowledgements and the ones it waits for
//        are exactly the flags of an end barrier (kevo_cta_barrier phase 1): one flag latency
//        at the end of the kernel, no extra launch. P is no longer double-buffered by call
//        parity: the GEMM's output pointer is a host value, repeated by every replay of a
//        CUDA graph, so the buffer cannot alternate; a separate wait kernel before the GEMM
//        would cost a launch per call instead of one latency.
//
// Why it should be fast: the GEMM is cuBLAS (the same as the reference), so the win is the
// all-reduce: one kernel with two barrier round trips (start and end) instead of
// NCCL's protocol, 16-byte loads from many CTAs. NCCL needs ~16 us for a 512 KiB all-reduce and
// ~70-80 us for 16 MiB; this one should take ~4-6 us and ~50 us. Expected wins: m64 (26 us ->
// ~14 us), m1024, and m8192 by the gap between NCCL's 128 MiB all-reduce (~590 us at W = 2)
// and SM loads at ~370 GB/s (~360 us). It cannot overlap the GEMM (one stream); the fused
// seed does that.
//
// Synchronisation: the start barrier orders every peer's GEMM output before any load of it,
// the end barrier every peer's loads of P (and stores into C) before this rank's next GEMM;
// flags are epochs (never reset, waits with >=), taken on the device (kevo_epoch_begin /
// kevo_epoch_end), so a call replayed from a CUDA graph is as correct as one made from the
// host; every wait is bounded (5 s, then __trap). Peers only read P (scratch) and, in
// two-shot, store into C inside the barriers.
//
// Shared code: the cuBLAS call (kevo_cublas_gemm_rm), the symmetric scratch
// (kevo_scratch_peers) and the host checks are in kevo_cublas.cuh.
//
// kevo:pattern problem=gemm_allreduce transport=sm fusion=unfused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param LOADS_IN_FLIGHT default=8 values=2,4,8,16
// kevo:param ONESHOT_MAX_KB default=4096 values=256,1024,4096,16384,65536,1048576
#define CTAS_PER_SM 2
#define LOADS_IN_FLIGHT 8
#define ONESHOT_MAX_KB 4096

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
constexpr const char *kWho = "gemm_allreduce/cublas_oneshot_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *p[KEVO_MAX_RANKS]; // every rank's partial of this call
    bf16 *c[KEVO_MAX_RANKS];       // every rank's C
    int64_t n;                     // M * N elements
    int64_t chunk;                 // two-shot slice (multiple of 8)
    int vec;                       // every pointer 16-byte aligned
    kevo_pads pads;
};

template <int W, bool TWO>
__global__ void __launch_bounds__(kThreads) allreduce_partials(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0); // every rank's P of this call is complete

    const int rank = p.rank;
    int64_t lo = 0, hi = a.n;
    if (TWO) {
        lo = (int64_t)rank * a.chunk;
        if (lo > a.n)
            lo = a.n;
        hi = lo + a.chunk < a.n ? lo + a.chunk : a.n;
    }
    constexpr int U = LOADS_IN_FLIGHT / W > 0 ? LOADS_IN_FLIGHT / W : 1;
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t nvec = a.vec ? (hi - lo) / 8 : 0;
    const uint4 *src[W];
#pragma unroll
    for (int q = 0; q < W; q++)
        src[q] = reinterpret_cast<const uint4 *>(a.p[q] + lo);

    auto put = [&](int64_t i, const uint4 &v) {
        if (TWO) {
#pragma unroll
            for (int q = 0; q < W; q++)
                reinterpret_cast<uint4 *>(a.c[q] + lo)[i] = v;
        } else {
            reinterpret_cast<uint4 *>(a.c[rank] + lo)[i] = v;
        }
    };

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
            put(i + u * stride, kevo_sum_bf16x8<W>(v[u]));
    }
    for (; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int q = 0; q < W; q++)
            v[q] = __ldcg(src[q] + i);
        put(i, kevo_sum_bf16x8<W>(v));
    }
    // scalar tail (everything when a pointer is not 16-byte aligned)
    for (int64_t e = lo + nvec * 8 + (int64_t)blockIdx.x * kThreads + threadIdx.x; e < hi;
         e += stride) {
        float acc = __bfloat162float(a.p[0][e]);
#pragma unroll
        for (int q = 1; q < W; q++)
            acc += __bfloat162float(a.p[q][e]);
        const bf16 r = __float2bfloat16_rn(acc);
        if (TWO) {
#pragma unroll
            for (int q = 0; q < W; q++)
                a.c[q][e] = r;
        } else {
            a.c[rank][e] = r;
        }
    }

    // done with every peer's P (and C): the next GEMM of every rank may rewrite its P
    kevo_cta_barrier(p, 1);
    kevo_epoch_end(p);
}

typedef void (*kernel_fn)(Args);

template <int W> kernel_fn pick_w(bool two)
{
    return two ? allreduce_partials<W, true> : allreduce_partials<W, false>;
}

kernel_fn pick(int w, bool two)
{
    switch (w) {
    case 1: return pick_w<1>(two);
    case 2: return pick_w<2>(two);
    case 3: return pick_w<3>(two);
    case 4: return pick_w<4>(two);
    case 5: return pick_w<5>(two);
    case 6: return pick_w<6>(two);
    case 7: return pick_w<7>(two);
    default: return pick_w<8>(two);
    }
}

struct State {
    bf16 *p_peer[KEVO_MAX_RANKS]; // every rank's P
    int two;
    int grid;
    int64_t chunk;
};

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K, INT32_MAX, 0, m, n, kw);
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

    st->two = W > 2 && pbytes > (size_t)ONESHOT_MAX_KB * 1024;
    const int64_t total = m * n;
    st->chunk = ((total + W - 1) / W + 7) / 8 * 8;
    const int64_t work = st->two ? st->chunk : total;
    int occ = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)pick(W, st->two != 0), kThreads, 0, CTAS_PER_SM,
                         &occ) != 0)
        return 1;
    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    st->grid = (int)kevo_clamp_grid((work / 8 + kThreads - 1) / kThreads,
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
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw) ||
        !kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, m * n))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    // P = A_r . B_r (this rank's partial); the previous call's end barrier has released P
    if (kevo_cublas_gemm_rm(ctx, kWho, m, n, kw, ta->ptr, tb->ptr, st->p_peer[ctx->rank]))
        return 1;

    Args a = {};
    int vec = 1;
    for (int q = 0; q < W; q++) {
        a.p[q] = st->p_peer[q];
        a.c[q] = (bf16 *)tc->peer[q];
        vec = vec && kevo_aligned16(a.p[q]) && kevo_aligned16(a.c[q]);
    }
    a.n = m * n;
    a.chunk = st->chunk;
    a.vec = vec;
    a.pads = kevo_pads_of(ctx);
    pick(W, st->two != 0)<<<st->grid, kThreads, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
