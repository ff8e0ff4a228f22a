// pull_sm.cu — all-to-all (bf16, equal chunks) in one kernel with 16-byte SM loads and stores
// through the symmetric window: every rank pulls chunk r of every rank's x into its own y
// (PUSH = 0), or pushes chunk q of its own x into rank q's y (PUSH = 1).
//
// What one call does (one kernel on ctx->stream, the same grid on every rank), C = N/W:
//  1. Start barrier (kevo_cta_barrier, phase 0): CTA b of this rank meets CTA b of every rank.
//     A peer's x holds this call's values, and a peer's y may be written, only once that peer
//     has entered the call; nothing of a peer is touched before this barrier.
//  2. Copy W chunks: pull: y_r[s*C ..] <- x_s[r*C ..] (x.peer[s]); push: y_s[r*C ..] <-
//     x_r[s*C ..] (y.peer[s]); the own chunk s = r is a local copy either way. When every
//     chunk is 16-byte aligned on both sides (C a multiple of 8: every timed size), the W
//     chunks are cut into groups of 32 vectors (512 bytes, one warp), and the groups are
//     dealt round-robin over the chunks, starting at chunk r: at any moment every thread
//     block streams from (or to) every peer at once, and rank r's k-th group targets peer
//     (r + k) mod W, so no peer is the target of every rank at the same time. UNROLL vectors
//     per thread are loaded before the first is stored. LOCAL_SHARE > 0 splits the grid
//     instead: that percentage of the thread blocks (at least one) copies the own chunk, the
//     others deal the W-1 peers' chunks among themselves. Dealt together, a thread's local
//     groups finish at once and its NVLink loads wait behind them, so fewer of them are in
//     flight; split, the local copy (HBM, 5x faster) hides under the peers' traffic.
//     Otherwise (the validation size:
//     C = 400012 / 200006 / 100003, chunk offsets s*C not 16-byte aligned) every chunk is
//     copied by itself: 16-byte vectors plus a scalar tail where both of its pointers are
//     aligned, one bf16 at a time where not (slow, correct; that size is not timed).
//  3. End barrier (phase 1): a CTA arrives only after all of its loads and stores (the
//     barrier's __syncthreads + st.release.sys publishes the pushed stores), so once CTA b of
//     every rank has passed it, nobody reads this rank's x or writes its y any more.
//
// Why it should be fast: one launch and two barrier round trips; at 64 KiB / 1 MiB every
// thread moves one vector (all loads in flight at once: the data costs one NVLink round trip)
// against NCCL's 11.0 / 17.4 us. At large sizes it is bound by NVLink (~370 GB/s a direction
// for SM loads or stores): (W-1)/W * 2N bytes each way, with the own chunk copied in the same
// pass (NCCL: 391 us at 256 MiB, W = 2; this kernel about 363 us).
//
// Synchronisation: peers' x are read, and peers' y written, only between the two barriers.
// Barrier flags are words [phase][cta][rank] of the signal pad holding epochs,
// st.release.sys / ld.acquire.sys (kevo_sync.cuh), never reset; every wait gives up after 5 s
// with __trap(). The epoch is the device's (kevo_epoch_begin / kevo_epoch_end), so a call
// replayed from a CUDA graph is as correct as one made from the host.
//
// kevo:pattern problem=alltoall transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=4 values=1,2,4,8
// kevo:param PUSH default=0 values=0,1
// kevo:param LOCAL_SHARE default=0 values=0,6,12,25
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 4
#define PUSH 0
#define LOCAL_SHARE 0

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "alltoall/pull_sm";
constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;

struct Args {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // chunk s: where it comes from
    __nv_bfloat16 *dst[KEVO_MAX_RANKS];       // chunk s: where it goes
    int64_t c;                                // elements per chunk
    uint32_t vec_mask;                        // bit s: src[s] and dst[s] 16-byte aligned
    int world, rank;
    kevo_pads p;
};

struct State {
    int max_grid;
};

// Every chunk aligned: groups of 32 vectors of chunks rank + first .. rank + first + n - 1
// (mod W) dealt over them, by thread blocks cta0 .. cta0 + ctas - 1.
template <int W>
__device__ __forceinline__ void copy_vec(const Args &a, uint32_t first, uint32_t n, uint32_t cta0,
                                         uint32_t ctas)
{
    const uint32_t stride = ctas * THREADS;
    const uint32_t tid = (blockIdx.x - cta0) * THREADS + threadIdx.x;
    const uint32_t nvec = (uint32_t)(a.c >> 3);
    const uint32_t groups = (nvec + 31) >> 5; // per chunk
    const uint32_t total = groups * n * 32;   // vector slots over the n chunks
    const uint32_t base = (uint32_t)a.rank + first;
    for (uint32_t k0 = tid; k0 < total; k0 += UNROLL * stride) {
        uint4 v[UNROLL];
        uint4 *d[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            d[u] = nullptr;
            const uint32_t k = k0 + u * stride;
            if (k < total) {
                const uint32_t g = k >> 5;
                const uint32_t s = (g % n + base) % W;
                const uint32_t i = (g / n) * 32 + (k & 31);
                if (i < nvec) {
                    v[u] = reinterpret_cast<const uint4 *>(a.src[s])[i];
                    d[u] = reinterpret_cast<uint4 *>(a.dst[s]) + i;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (d[u])
                *d[u] = v[u];
    }
}

template <int W> __device__ __forceinline__ void copy_all_vec(const Args &a)
{
    if constexpr (LOCAL_SHARE == 0 || W == 1) {
        copy_vec<W>(a, 0, W, 0, gridDim.x);
    } else {
        const uint32_t local = max(1u, gridDim.x * LOCAL_SHARE / 100u);
        if (gridDim.x < 2)
            copy_vec<W>(a, 0, W, 0, gridDim.x);
        else if (blockIdx.x < local)
            copy_vec<W>(a, 0, 1, 0, local);
        else
            copy_vec<W>(a, 1, W - 1, local, gridDim.x - local);
    }
    // elements after the last whole vector of each chunk (none when C is a multiple of 8)
    const uint32_t stride = gridDim.x * THREADS;
    const uint32_t tid = blockIdx.x * THREADS + threadIdx.x;
    const uint32_t nvec = (uint32_t)(a.c >> 3);
    const uint32_t t = (uint32_t)(a.c - ((int64_t)nvec << 3));
    if (t) {
        for (uint32_t e = tid; e < (uint32_t)W * t; e += stride) {
            const uint32_t s = e / t, j = (nvec << 3) + e % t;
            a.dst[s][j] = a.src[s][j];
        }
    }
}

// Misaligned chunks (validation size): each chunk by itself, vectors where both sides allow.
__device__ void copy_each(const Args &a)
{
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int64_t c = a.c;
    for (int k = 0; k < a.world; k++) {
        const int s = (a.rank + k) % a.world;
        const __nv_bfloat16 *src = a.src[s];
        __nv_bfloat16 *dst = a.dst[s];
        int64_t done = 0;
        if ((a.vec_mask >> s) & 1u) {
            const int64_t nvec = c >> 3;
            const uint4 *vs = reinterpret_cast<const uint4 *>(src);
            uint4 *vd = reinterpret_cast<uint4 *>(dst);
            for (int64_t i = tid; i < nvec; i += stride)
                vd[i] = vs[i];
            done = nvec << 3;
        }
        for (int64_t e = done + tid; e < c; e += stride)
            dst[e] = src[e];
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    alltoall_pull_sm(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    kevo_cta_barrier(p, 0); // start: peers' x hold this call's values, their y is writable

    if (a.vec_mask == (1u << a.world) - 1u) {
        switch (a.world) {
        case 1: copy_all_vec<1>(a); break;
        case 2: copy_all_vec<2>(a); break;
        case 3: copy_all_vec<3>(a); break;
        case 4: copy_all_vec<4>(a); break;
        case 5: copy_all_vec<5>(a); break;
        case 6: copy_all_vec<6>(a); break;
        case 7: copy_all_vec<7>(a); break;
        default: copy_all_vec<8>(a); break;
        }
    } else {
        copy_each(a);
    }

    kevo_cta_barrier(p, 1); // end: nobody reads this rank's x or writes its y after this
    kevo_epoch_end(p);
}

int check_tensors(const kevo_ctx *ctx, const char **why)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS) {
        *why = "bad context (tensors or world)";
        return -1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel ||
        x->numel % W != 0) {
        *why = "expected bf16 x and y of N elements, N a multiple of W";
        return -1;
    }
    if (x->numel / 8 >= ((int64_t)1 << 31)) {
        *why = "too many elements for 32-bit vector indices";
        return -1;
    }
    return 0;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)alltoall_pull_sm, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t c = x->numel / W;

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.c = c;
    a.world = W;
    a.rank = r;
    a.vec_mask = 0;
    for (int s = 0; s < W; s++) {
        if (PUSH) {
            a.src[s] = (const __nv_bfloat16 *)x->ptr + (int64_t)s * c;
            a.dst[s] = (__nv_bfloat16 *)y->peer[s] + (int64_t)r * c;
        } else {
            a.src[s] = (const __nv_bfloat16 *)x->peer[s] + (int64_t)r * c;
            a.dst[s] = (__nv_bfloat16 *)y->ptr + (int64_t)s * c;
        }
        if (kevo_aligned16(a.src[s]) && kevo_aligned16(a.dst[s]))
            a.vec_mask |= 1u << s;
    }
    a.p = kevo_pads_of(ctx);

    // Same grid on every rank (from C and W only): one vector per thread when that fits.
    const int64_t items = (int64_t)W * ((c + 7) / 8);
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((items + THREADS - 1) / THREADS, most);
    alltoall_pull_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
