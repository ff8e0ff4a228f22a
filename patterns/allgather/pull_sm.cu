// allgather/pull_sm.cu — all-gather (bf16) in one kernel: every CTA pulls its grid-stride share
// of every rank's x into this rank's y with 16-byte SM loads through the symmetric window.
//
// What one call does, in one kernel on ctx->stream:
//  1. Start barrier (kevo_cta_barrier, phase 0): CTA b of this rank meets CTA b of every rank.
//     A peer's x is ready once that peer has entered the call, so no peer data is read before.
//  2. Copy. Thread t owns the 16-byte vectors i = t, t + T, t + 2T, ... (T threads in the grid)
//     of *every* shard: for each i it loads vector i of all W shards (rank r + 1 first, its own
//     shard last) and stores them at y[s·N + 8i]. With W shards per index and LOADS / W indices
//     per step, LOADS 16-byte loads are in flight per thread before the first store, so one
//     round trip over NVLink covers W shards at once (latency), and all W - 1 peers are read at
//     the same time by every thread (at W = 8 every rank serves 7 readers evenly: bandwidth).
//     The own shard is the same loop reading local memory.
//     General path (N not a multiple of 8, or a pointer off 16 bytes: the validation size, where
//     shard s starts at byte 2·s·N of y): per shard, the loads stay 16-byte vectors on the source
//     (the peer side, the one that costs) after a scalar head, and the local stores are 16-, 4-
//     or 2-byte as y's alignment at that point allows; a scalar tail ends the shard.
//  3. End barrier (phase 1): a CTA arrives only after all of its loads, so when all CTAs of this
//     rank have passed it every CTA of every rank has finished reading, and this rank's x may be
//     overwritten as soon as the kernel ends.
//
// Why it should be fast: the small sizes (64 KiB, 1 MiB per rank) are latency: one launch, one
// barrier round trip, one NVLink round trip for all W shards per thread (the grid is sized so
// that every thread has one index at ≤ 1 MiB), and a second barrier. At 16–256 MiB it is
// bandwidth: 2 CTAs per SM keep about 8 MiB of loads in flight, enough for the ~370 GB/s that SM
// loads reach per direction, while the own-shard copy overlaps in HBM; both link directions are
// busy at once since every rank pulls.
//
// Synchronisation: flags are slots [phase][cta][source rank] of the signal pad holding epochs,
// st.release.sys into every rank's pad and ld.acquire.sys on the own pad, never reset, every
// wait bounded (5 s, then __trap). The epoch is the device's (kevo_epoch_begin /
// kevo_epoch_end), so a call replayed from a CUDA graph is as correct as one made from the
// host. Same grid on every rank (it depends on N,
// W, the SM count and the occupancy only), all CTAs co-resident (grid ≤ occupancy × SMs).
//
// kevo:pattern problem=allgather transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..3
// kevo:param THREADS default=256 values=128,256
// kevo:param LOADS default=8 values=4,8,16
#define CTAS_PER_SM 2
#define THREADS 256
#define LOADS 8

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

struct Args {
    const uint16_t *x[KEVO_MAX_RANKS]; // every rank's x, bf16 bits (x[rank] is this rank's)
    uint16_t *y;                       // this rank's y, W·N elements
    int64_t n;                         // N, elements per shard
    int uniform;                       // N % 8 == 0 and every pointer 16-byte aligned
    kevo_pads pads;
};

struct State {
    int occupancy; // resident CTAs per SM of the kernel
};

// dst[0, n) = src[0, n) over the threads t of nt. src is the remote side: after a scalar head it
// is read with 16-byte loads; dst (local) gets 16-, 4- or 2-byte stores as its alignment allows.
template <int U>
__device__ __forceinline__ void copy_pull(uint16_t *dst, const uint16_t *src, int64_t n, int64_t t,
                                          int64_t nt)
{
    if ((uintptr_t)src & 1u) { // not a bf16 boundary: cannot happen, but stay correct
        for (int64_t e = t; e < n; e += nt)
            dst[e] = src[e];
        return;
    }
    int64_t head = (int64_t)(((16u - ((unsigned)(uintptr_t)src & 15u)) & 15u) >> 1);
    if (head > n)
        head = n;
    for (int64_t e = t; e < head; e += nt)
        dst[e] = src[e];
    const int64_t nv = (n - head) >> 3;
    const uint4 *s4 = reinterpret_cast<const uint4 *>(src + head);
    uint16_t *d = dst + head;
    const unsigned dmis = (unsigned)(uintptr_t)d & 15u;
    if (dmis == 0) {
        uint4 *d4 = reinterpret_cast<uint4 *>(d);
        int64_t i = t;
        for (; i + (U - 1) * nt < nv; i += U * nt) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                v[u] = s4[i + u * nt];
#pragma unroll
            for (int u = 0; u < U; u++)
                d4[i + u * nt] = v[u];
        }
        for (; i < nv; i += nt)
            d4[i] = s4[i];
    } else if ((dmis & 3u) == 0) {
        for (int64_t i = t; i < nv; i += nt) {
            const uint4 v = s4[i];
            uint32_t *d32 = reinterpret_cast<uint32_t *>(d + 8 * i);
            d32[0] = v.x;
            d32[1] = v.y;
            d32[2] = v.z;
            d32[3] = v.w;
        }
    } else {
        for (int64_t i = t; i < nv; i += nt) {
            const uint4 v = s4[i];
            uint16_t *d16 = d + 8 * i;
            d16[0] = (uint16_t)v.x;
            d16[1] = (uint16_t)(v.x >> 16);
            d16[2] = (uint16_t)v.y;
            d16[3] = (uint16_t)(v.y >> 16);
            d16[4] = (uint16_t)v.z;
            d16[5] = (uint16_t)(v.z >> 16);
            d16[6] = (uint16_t)v.w;
            d16[7] = (uint16_t)(v.w >> 16);
        }
    }
    for (int64_t e = head + nv * 8 + t; e < n; e += nt)
        dst[e] = src[e];
}

// The fast path for W = 2, 4, 8 (inlined into the one kernel): vector i of all W shards per
// thread, U indices per step, all U·W loads issued before the first store.
template <int W>
__device__ __forceinline__ void gather_uniform(const Args &a, uint32_t t, uint32_t nt)
{
    constexpr int U = LOADS / W > 0 ? LOADS / W : 1;
    const uint32_t nvec = (uint32_t)(a.n >> 3); // W·nvec < 2^31: checked on the host
    const uint4 *src[W];
    uint32_t off[W]; // shard offsets in y, in vectors
#pragma unroll
    for (int j = 0; j < W; j++) {
        int s = a.pads.rank + 1 + j; // rank + 1 first, the own shard last
        if (s >= W)
            s -= W;
        src[j] = reinterpret_cast<const uint4 *>(a.x[s]);
        off[j] = (uint32_t)s * nvec;
    }
    uint4 *y4 = reinterpret_cast<uint4 *>(a.y);
    uint32_t i = t;
#pragma unroll 1
    for (; i + (U - 1) * nt < nvec; i += U * nt) {
        uint4 v[U][W];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int j = 0; j < W; j++)
                v[u][j] = src[j][i + u * nt];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int j = 0; j < W; j++)
                y4[off[j] + i + u * nt] = v[u][j];
    }
#pragma unroll 1
    for (; i < nvec; i += nt) {
        uint4 v[W];
#pragma unroll
        for (int j = 0; j < W; j++)
            v[j] = src[j][i];
#pragma unroll
        for (int j = 0; j < W; j++)
            y4[off[j] + i] = v[j];
    }
}

__global__ void __launch_bounds__(THREADS, CTAS_PER_SM) allgather_pull_sm(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0); // start: every rank's x is ready

    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world;
    if (a.uniform && W == 2) {
        gather_uniform<2>(a, (uint32_t)t, (uint32_t)nt);
    } else if (a.uniform && W == 4) {
        gather_uniform<4>(a, (uint32_t)t, (uint32_t)nt);
    } else if (a.uniform && W == 8) {
        gather_uniform<8>(a, (uint32_t)t, (uint32_t)nt);
    } else {
        for (int j = 0; j < W; j++) {
            int s = p.rank + 1 + j;
            if (s >= W)
                s -= W;
            copy_pull<2>(a.y + (int64_t)s * a.n, a.x[s], a.n, t, nt);
        }
    }

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "allgather/pull_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)allgather_pull_sm, THREADS, 0, CTAS_PER_SM,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != W * n)
        return kevo_fail(kWho, "expected bf16 x of N and y of W*N elements");

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.y = (uint16_t *)y->ptr;
    a.n = n;
    a.pads = kevo_pads_of(ctx);
    // the fast path indexes y in 32-bit vectors
    int uniform = n % 8 == 0 && (uintptr_t)y->ptr % 16 == 0 && (n / 8) * W < ((int64_t)1 << 31);
    for (int q = 0; q < W; q++) {
        a.x[q] = (const uint16_t *)x->peer[q];
        uniform = uniform && (uintptr_t)x->peer[q] % 16 == 0;
    }
    a.uniform = uniform;

    // The same grid on every rank: from N, W, the SM count and the occupancy only. One 16-byte
    // index per thread while that fits (small sizes), then as many CTAs as stay resident.
    const int64_t items = (n + 7) / 8;
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count; // occupancy <= CTAS_PER_SM
    const int64_t pad_limit = kevo_pads_max_ctas(a.pads, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    const int64_t grid =
        kevo_clamp_grid((items + THREADS - 1) / THREADS, most < pad_limit ? most : pad_limit);

    allgather_pull_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
