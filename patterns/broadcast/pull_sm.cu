// broadcast/pull_sm.cu — broadcast (bf16, root 0) in one kernel with 16-byte SM loads and
// stores through the symmetric window: every rank pulls x_0 into its own y; at W > 2 (TREE = 1)
// the pull is split so that rank 0's link carries each byte once.
//
// What one call does, in one kernel on ctx->stream:
//  1. Start barrier (kevo_cta_barrier, phase 0): CTA b of this rank meets CTA b of every rank.
//     Rank 0's x is ready once rank 0 has entered the call; a peer's y may be written once that
//     peer has entered it (its y was poisoned or read by the caller before).
//  2. Copy, by role:
//     - rank 0 copies its own x into its y (local HBM);
//     - W = 2, or TREE = 0: every other rank pulls all of x_0 into its y, LOADS 16-byte loads in
//       flight per thread before the first store;
//     - W > 2 and TREE = 1: the 16-byte vectors of x_0 are cut into W - 1 slices; rank q ≥ 1
//       pulls slice q - 1 from rank 0 and stores every vector it loaded into its own y and into
//       the y of every other rank ≥ 1 (W - 2 remote stores). Rank 0 then sends 2N bytes in all
//       (not (W - 1)·2N), every rank ≥ 1 receives 2N and sends (W - 2)/(W - 1)·2N: the
//       roofline's traffic, in one kernel, with no barrier between the two hops (the value goes
//       from the load register straight to all destinations).
//     The elements after the last whole vector (N odd) are copied by every rank into its own y
//     with scalar loads of x_0; with a pointer off 16 bytes everything takes that scalar path.
//  3. End barrier (phase 1): a CTA arrives after all of its loads and stores; once every CTA of
//     this rank has passed it, every CTA of every rank has finished reading x_0 and writing into
//     this rank's y, so the caller may overwrite x and read y when the kernel ends.
//
// Why it should be fast: ≤ 1 MiB is latency: one launch, one barrier round trip, one NVLink
// round trip (the grid gives every thread one 16-byte index), a second barrier; NCCL's ring
// broadcast takes 9–17 µs there. At 16–256 MiB and W = 2 rank 1's pull runs at the SM load rate
// (~370 GB/s) while rank 0's local copy overlaps; at W > 2 the split keeps every link at 2N.
//
// Synchronisation: flags are slots [phase][cta][source rank] of the signal pad holding the
// launch's epoch (the device's: kevo_epoch_begin / kevo_epoch_end, so a call replayed from a
// CUDA graph gets a new one), st.release.sys into every rank's pad, ld.acquire.sys on the own
// pad, never reset, waits bounded (5 s, then __trap). The release of the end barrier follows a
// __syncthreads() after every thread's remote stores, so what rank q acquires covers them. Same
// grid on every rank (from N, W, the SM count and the occupancy), all CTAs co-resident.
//
// kevo:pattern problem=broadcast transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..3
// kevo:param THREADS default=256 values=128,256
// kevo:param LOADS default=4 values=1,2,4,8
// kevo:param TREE default=1 values=0,1
#define CTAS_PER_SM 2
#define THREADS 256
#define LOADS 4
#define TREE 1

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "broadcast/pull_sm";

struct Args {
    const uint16_t *x0;          // rank 0's x (bf16 bits), through the window
    uint16_t *y[KEVO_MAX_RANKS]; // every rank's y (y[rank] is this rank's)
    int64_t n;                   // elements
    int vector;                  // x_0 and every y 16-byte aligned
    kevo_pads pads;
};

struct State {
    int occupancy;
};

// d[i] = s[i] for i in [lo, hi) over the threads t of nt, U vectors in flight per thread.
__device__ __forceinline__ void copy_vectors(uint4 *d, const uint4 *s, int64_t lo, int64_t hi,
                                             int64_t t, int64_t nt)
{
    constexpr int U = LOADS;
    int64_t i = lo + t;
#pragma unroll 1
    for (; i + (U - 1) * nt < hi; i += U * nt) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            v[u] = s[i + u * nt];
#pragma unroll
        for (int u = 0; u < U; u++)
            d[i + u * nt] = v[u];
    }
#pragma unroll 1
    for (; i < hi; i += nt)
        d[i] = s[i];
}

// Slice [lo, hi) of x_0's vectors into the y of every rank ≥ 1 (this one's first).
__device__ __forceinline__ void scatter_vectors(const Args &a, int64_t lo, int64_t hi, int64_t t,
                                                int64_t nt)
{
    constexpr int U = LOADS;
    const int W = a.pads.world, me = a.pads.rank;
    const uint4 *s = reinterpret_cast<const uint4 *>(a.x0);
    int64_t i = lo + t;
#pragma unroll 1
    for (; i + (U - 1) * nt < hi; i += U * nt) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            v[u] = s[i + u * nt];
#pragma unroll 1
        for (int k = 0; k < W - 1; k++) { // k = 0 is this rank; then the others, rotated
            int p = me + k;
            if (p >= W)
                p -= W - 1;
            uint4 *d = reinterpret_cast<uint4 *>(a.y[p]);
#pragma unroll
            for (int u = 0; u < U; u++)
                d[i + u * nt] = v[u];
        }
    }
#pragma unroll 1
    for (; i < hi; i += nt) {
        const uint4 v = s[i];
#pragma unroll 1
        for (int k = 0; k < W - 1; k++) {
            int p = me + k;
            if (p >= W)
                p -= W - 1;
            reinterpret_cast<uint4 *>(a.y[p])[i] = v;
        }
    }
}

__global__ void __launch_bounds__(THREADS, CTAS_PER_SM) broadcast_pull_sm(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0); // start: x_0 ready, every y writable

    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world, me = p.rank;
    const int64_t nvec = a.vector ? a.n >> 3 : 0;
    uint16_t *y = a.y[me];

    if (me == 0 || W <= 2 || !TREE) {
        copy_vectors(reinterpret_cast<uint4 *>(y), reinterpret_cast<const uint4 *>(a.x0), 0, nvec,
                     t, nt);
    } else {
        const int64_t lo = nvec * (me - 1) / (W - 1), hi = nvec * me / (W - 1);
        scatter_vectors(a, lo, hi, t, nt);
    }
    // the elements after the last whole vector (all of them when not vectorised)
    for (int64_t e = nvec * 8 + t; e < a.n; e += nt)
        y[e] = a.x0[e];

    kevo_cta_barrier(p, 1); // end: x_0 read and every write into this y done
    kevo_epoch_end(p);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)broadcast_pull_sm, THREADS, 0, INT_MAX,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != n)
        return kevo_fail(kWho, "expected bf16 x and y of N elements");

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.x0 = (const uint16_t *)x->peer[0];
    a.n = n;
    a.pads = kevo_pads_of(ctx);
    int vector = (uintptr_t)x->peer[0] % 16 == 0;
    for (int q = 0; q < W; q++) {
        a.y[q] = (uint16_t *)y->peer[q];
        vector = vector && (uintptr_t)y->peer[q] % 16 == 0;
    }
    a.vector = vector;

    // The same grid on every rank: from N, W, the SM count and the occupancy only; one 16-byte
    // index per thread while that fits.
    const int64_t items = (n + 7) / 8;
    const int per_sm = st->occupancy < CTAS_PER_SM ? st->occupancy : CTAS_PER_SM;
    const int64_t most = (int64_t)per_sm * ctx->sm_count;
    const int64_t pad_limit = kevo_pads_max_ctas(a.pads, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    const int64_t grid =
        kevo_clamp_grid((items + THREADS - 1) / THREADS, most < pad_limit ? most : pad_limit);

    broadcast_pull_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
