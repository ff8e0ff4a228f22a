// allgather/ce.cu — all-gather (bf16) whose peer traffic goes through the copy engines: every
// rank pulls each peer's x into its own y with cudaMemcpyAsync, and one SM kernel at the end
// copies the own shard (and, optionally, a tail share of every peer shard) while it meets the
// other ranks for the end barrier.
//
// One call, all on ctx->stream (graph-capturable: no host sync, no allocation, one stream):
//   start kernel   1 CTA: kevo_cta_barrier phase 0 (slots [0, W)): every rank has entered the
//                  call, so every peer's x is ready to be copied
//   copies         the first N - S elements of every peer's shard (S = the SM share below),
//                  cut into CHUNKS pieces; piece c of every peer before piece c + 1, peers in
//                  the order rank + 1, rank + 2, ... so that at W > 2 every rank is read by a
//                  different rank at a time: cudaMemcpyAsync(y + s·N + lo, x.peer[s] + lo)
//   end kernel     G CTAs: odd CTAs copy the own shard x -> y[rank·N ...] (local HBM); even CTAs
//                  pull the last S elements of every peer shard with 16-byte SM loads; then
//                  kevo_cta_barrier phase 0 with its own slots (from W on)
//
// Why it should be fast: at 16–256 MiB the copy engine moves a peer shard at ~397 GB/s (the best
// measured link rate, above the ~370 GB/s of SM loads) with no SM involved, every rank pulling
// at once so both link directions work. On one stream the own-shard copy (2N bytes each way in
// HBM, ~136 µs at 256 MiB) cannot overlap a memcpy; it overlaps the SM share instead: with
// SM_SHARE/64 of every peer shard pulled by SMs in the same kernel as the local copy, the call
// costs about (1 - f)·N/397 GB/s + max(local copy, f·N/370 GB/s) instead of N/397 + local
// (f ≈ 0.19 balances them at W = 2: SM_SHARE ≈ 12). Small sizes pay three graph nodes and the
// memcpy launch latency: this seed is for the large sizes.
//
// Synchronisation: the start barrier is a kernel that completes before the copies start
// (stream order), so no peer x is read before its owner has entered the call. Every rank
// arrives at the end barrier only after all of its copies (stream order) and all of its SM
// loads (the __syncthreads() before the release); once this rank's end kernel is done, every CTA
// of every rank has arrived, so nobody reads this rank's x any more. Flags: epochs, never
// reset, release/acquire at .sys scope, every wait bounded (5 s). Both kernels take their
// epochs on the device (kevo_epoch_begin / kevo_epoch_end, channel 0: the start kernel one
// epoch, the end kernel the next), so a call replayed from a CUDA graph is as correct as one
// made from the host.
// The end kernel's grid is the same on every rank (from N, W, the SM count and the occupancy).
//
// kevo:pattern problem=allgather transport=ce fusion=unfused
// kevo:param CHUNKS default=1 values=1,2,4,8
// kevo:param SM_SHARE default=12 range=0..32
// kevo:param CTAS_PER_SM default=2 range=1..3
#define CHUNKS 1
#define SM_SHARE 12
#define CTAS_PER_SM 2

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 256;    // end kernel
constexpr int64_t kAlign = 2048; // elements (4 KiB): copy boundaries

struct State {
    int occupancy; // end kernel CTAs per SM
};

struct EndArgs {
    const uint16_t *x[KEVO_MAX_RANKS]; // every rank's x (bf16 bits)
    uint16_t *y;                       // this rank's y
    int64_t n;                         // elements per shard
    int64_t sm_lo;                     // peer shards: [sm_lo, n) is pulled by this kernel
    kevo_pads pads;
};

// dst[0, n) = src[0, n) over the threads t of nt. src is the side to keep in 16-byte loads (the
// remote one when pulling); dst gets 16-, 4- or 2-byte stores as its alignment allows.
template <int U>
__device__ __forceinline__ void copy_pull(uint16_t *dst, const uint16_t *src, int64_t n, int64_t t,
                                          int64_t nt)
{
    if ((uintptr_t)src & 1u) {
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
#pragma unroll 1
        for (; i + (U - 1) * nt < nv; i += U * nt) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                v[u] = s4[i + u * nt];
#pragma unroll
            for (int u = 0; u < U; u++)
                d4[i + u * nt] = v[u];
        }
#pragma unroll 1
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

struct StartArgs {
    kevo_pads pads;
};

// 1 CTA: every rank has entered this call (slots [0, W)).
__global__ void __launch_bounds__(32) allgather_ce_start(const __grid_constant__ StartArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0, 0);
    kevo_epoch_end(p);
}

__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) allgather_ce_end(const EndArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int W = p.world, me = p.rank;
    const bool remote = a.sm_lo < a.n && W > 1;
    // roles: with remote work and at least 2 CTAs, even CTAs pull, odd CTAs copy locally
    const bool split = remote && gridDim.x >= 2;
    const bool do_remote = remote && (!split || (blockIdx.x & 1) == 0);
    const bool do_local = !split || (blockIdx.x & 1) == 1;
    const unsigned role_cta = split ? blockIdx.x >> 1 : blockIdx.x;
    const unsigned role_ctas =
        split ? ((blockIdx.x & 1) ? gridDim.x >> 1 : (gridDim.x + 1) >> 1) : gridDim.x;
    const int64_t t = (int64_t)role_cta * kThreads + threadIdx.x;
    const int64_t nt = (int64_t)role_ctas * kThreads;

    if (do_remote) {
        for (int j = 1; j < W; j++) {
            int s = me + j;
            if (s >= W)
                s -= W;
            copy_pull<4>(a.y + (int64_t)s * a.n + a.sm_lo, a.x[s] + a.sm_lo, a.n - a.sm_lo, t, nt);
        }
    }
    if (do_local)
        copy_pull<4>(a.y + (int64_t)me * a.n, a.x[me], a.n, t, nt);

    // end: every rank's copies and SM loads are done (slots from W on)
    kevo_cta_barrier(p, 0, (uint64_t)W);
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "allgather/ce";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)allgather_ce_end, kThreads, 0, CTAS_PER_SM,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world, me = ctx->rank;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != W * n)
        return kevo_fail(kWho, "expected bf16 x of N and y of W*N elements");
    cudaStream_t s = ctx->stream;
    const kevo_pads pads = kevo_pads_of(ctx);

    // The split between copy engine and SMs, the same on every rank.
    int64_t sm_len = W > 1 ? n * SM_SHARE / 64 / kAlign * kAlign : 0;
    if (sm_len > n)
        sm_len = n;
    const int64_t ce_len = n - sm_len;

    allgather_ce_start<<<1, 32, 0, s>>>(StartArgs{pads});
    if (kevo_launched(kWho, "start kernel") != 0)
        return 1;

    // Tensor pointers change between calls: read them from ctx every time.
    uint16_t *yl = (uint16_t *)y->ptr;
    for (int c = 0; c < CHUNKS; c++) {
        int64_t lo = c == 0 ? 0 : ce_len * c / CHUNKS / kAlign * kAlign;
        int64_t hi = c + 1 == CHUNKS ? ce_len : ce_len * (c + 1) / CHUNKS / kAlign * kAlign;
        if (hi <= lo)
            continue;
        for (int j = 1; j < W; j++) {
            const int q = (me + j) % W;
            const cudaError_t e =
                cudaMemcpyAsync(yl + (int64_t)q * n + lo, (const uint16_t *)x->peer[q] + lo,
                                (size_t)(hi - lo) * sizeof(uint16_t), cudaMemcpyDeviceToDevice, s);
            if (e != cudaSuccess)
                return kevo_fail(kWho, "cudaMemcpyAsync from rank %d: %s", q,
                                 cudaGetErrorString(e));
        }
    }

    EndArgs a = {};
    a.y = yl;
    a.n = n;
    a.sm_lo = ce_len;
    a.pads = pads;
    for (int q = 0; q < W; q++)
        a.x[q] = (const uint16_t *)x->peer[q];

    // Grid: enough CTAs for one 16-byte vector of the own shard per thread (twice that when the
    // CTAs split into two roles), at most what stays resident and what the pad holds.
    const int64_t items = (n + 7) / 8;
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count; // occupancy <= CTAS_PER_SM
    const int64_t pad_limit = kevo_pads_max_ctas(pads, 1, (uint64_t)W);
    if (pad_limit < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    const int64_t grid = kevo_clamp_grid((items + kThreads - 1) / kThreads * (sm_len > 0 ? 2 : 1),
                                         most < pad_limit ? most : pad_limit);
    allgather_ce_end<<<(unsigned)grid, kThreads, 0, s>>>(a);
    return kevo_launched(kWho, "end kernel");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
