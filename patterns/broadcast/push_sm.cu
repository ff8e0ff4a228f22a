// broadcast/push_sm.cu — broadcast (bf16, root 0) pushed by rank 0 into every peer's symmetric
// scratch with 16-byte SM stores, one release flag per chunk instead of one per word: the
// link carries the data once (the LL seed, ll_sm, sends every 4-byte word inside an 8-byte
// store with its epoch, twice the bytes), and there is no barrier round trip.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  Scratch (kevo_init, ctx->scratch_alloc, symmetric): two halves of N elements (rounded up),
//  one per parity of the launch's epoch (epoch & 1, chosen in the kernel). CTA b owns elements
//  [b*P, (b+1)*P) of the vector, cut into steps of THREADS * STEP_VECS vectors.
//  Rank 0, CTA b: waits until CTA b of every peer has acknowledged launch e - 2 (the last
//  launch that used this parity's half: the root receives nothing, so without this it could
//  run two launches ahead and overwrite a half a slow peer still reads; in steady state the
//  flag is long set and the wait costs one load). Then, step by step: every thread loads its
//  STEP_VECS vectors of x and stores them into its own y and into every peer's half;
//  __syncthreads(); thread q releases data flag [b] of rank q's pad := (epoch << 16) + step + 1.
//  Rank q > 0, CTA b: step by step, thread 0 waits (acquire, bounded) for data flag [b] to
//  reach (epoch << 16) + step + 1, __syncthreads(), and the CTA copies that step from its
//  scratch half into y. After its last step: __syncthreads(), ack flag [b][q] of rank 0's pad
//  := epoch (release).
//
// Above PUSH_MAX_KIB, or when the scratch cannot hold the two halves: start barrier, the
// peers pull x_0 into y (16-byte loads), end barrier (the large sizes' protocol of pull_sm).
//
// Why it should be fast, and where: at 1 MiB the root sends 1 MiB once (2.8 us at the
// 370 GB/s of SM stores) and each peer learns of each chunk in one one-way trip; against the
// measured floors (empty kernel 4.45 us, one-way trip ~2.4 us) that is ~10 us, where NCCL
// takes ~17 us and ll_sm 11.9 us. At 64 KiB it should match ll_sm (one trip either way). At
// W > 2 the root sends (W-1) copies, so at large sizes the pull (or a chain) wins.
//
// Synchronisation (why nobody reads stale data or data being overwritten):
//  - peers never read rank 0's x and nobody writes another rank's y, so x and y need no
//    barrier (ABI rules 6 and 7); scratch halves alternate by the parity of the launch's epoch;
//  - a peer reads step j of launch e only after acquiring e << 16 | (j+1), released by the
//    root after that step's stores (__syncthreads + st.release.sys);
//  - rank 0 rewrites half e & 1 only in launch e + 2, after acquiring every peer's ack of
//    launch e for its CTA, released after that peer CTA's last read of the half;
//  - epochs come from the device (kevo_epoch_begin / kevo_epoch_end): they count the kernel's
//    launches, one per call on every rank, so they agree across ranks and the halves alternate
//    by launches actually run, also when a call is replayed from a CUDA graph (whose kernel
//    arguments, the halves' base pointers included, repeat unchanged);
//  - flag values only grow (epochs, (epoch << 16) + step; at most 65534 steps per CTA) and are
//    never reset; every wait gives up after 5 s with __trap().
//
// kevo:pattern problem=broadcast transport=sm fusion=fused
// kevo:param THREADS default=512 values=256,512
// kevo:param STEP_VECS default=2 values=1,2,4,8
// kevo:param CTAS_PER_SM default=1 range=1..2
// kevo:param PUSH_MAX_KIB default=16384 values=1024,16384,262144
#define THREADS 512
#define STEP_VECS 2
#define CTAS_PER_SM 1
#define PUSH_MAX_KIB 16384

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "broadcast/push_sm";
constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int64_t kHalfAlign = 64; // elements: each half starts 128-byte aligned

struct Args {
    const uint16_t *src;            // rank 0: its x; peers: x_0 (pull) or their half 0 (push)
    uint16_t *y;                    // this rank's y
    uint16_t *send[KEVO_MAX_RANKS]; // rank 0, push: peer q's half 0
    int64_t half;                   // elements per half (half 1 = half 0 + half)
    int64_t n, per, sub;            // elements: all, per CTA, per step
    int vec;                        // src, y and every send 16-byte aligned
    int push;                       // 0: pull between two barriers
    kevo_pads p;
};

struct State {
    uint16_t *scratch[KEVO_MAX_RANKS]; // every rank's scratch: two halves of `half` elements
    int64_t half;
    int push;
    int max_grid;
};

// Elements [off, off + len) of src into this rank's y and, with W > 1 (rank 0 pushing), into
// every peer's half (send[q] + par: par picks the half, a multiple of 64 elements): every
// thread's STEP_VECS 16-byte vectors loaded before they are stored (when vec), then the
// elements after the last whole vector. The destinations are read from the kernel's
// parameters at each store, not held in registers.
template <int W>
__device__ __forceinline__ void copy_step(const Args &a, const uint16_t *src, int64_t par,
                                          int64_t off, int64_t len)
{
    int64_t done = 0;
    if (a.vec) {
        const int64_t nv = len >> 3;
        const uint4 *s = reinterpret_cast<const uint4 *>(src + off);
        for (int64_t i0 = threadIdx.x; i0 < nv; i0 += (int64_t)STEP_VECS * THREADS) {
            uint4 v[STEP_VECS];
#pragma unroll
            for (int u = 0; u < STEP_VECS; u++)
                if (i0 + u * THREADS < nv)
                    v[u] = s[i0 + u * THREADS];
#pragma unroll
            for (int u = 0; u < STEP_VECS; u++) {
                const int64_t i = i0 + u * THREADS;
                if (i >= nv)
                    continue;
                reinterpret_cast<uint4 *>(a.y + off)[i] = v[u];
#pragma unroll
                for (int q = 1; q < W; q++)
                    reinterpret_cast<uint4 *>(a.send[q] + par + off)[i] = v[u];
            }
        }
        done = nv << 3;
    }
    for (int64_t e = done + threadIdx.x; e < len; e += THREADS) {
        const uint16_t v = src[off + e];
        a.y[off + e] = v;
#pragma unroll
        for (int q = 1; q < W; q++)
            a.send[q][par + off + e] = v;
    }
}

// Flag words of CTA b: phase 0 row (acks [b][q] on rank 0), phase 1 row (data flag [b] at
// word 0 on the peers); the pull barriers use the same two phases.
__device__ __forceinline__ uint64_t ack_row(const kevo_pads &p)
{
    return (uint64_t)blockIdx.x * p.world;
}

__device__ __forceinline__ uint64_t data_word(const kevo_pads &p)
{
    return ((uint64_t)gridDim.x + blockIdx.x) * p.world;
}

// par: this launch's half (elements), from the parity of its epoch.
template <int W>
__device__ __forceinline__ void root_cta(const Args &a, const kevo_pads &p, int64_t par, int64_t e0,
                                         int64_t e1)
{
    const uint64_t base = p.epoch << 16;
    if (p.epoch > 2 && threadIdx.x > 0 && threadIdx.x < (unsigned)W)
        kevo_wait_flag(p.mine + ack_row(p) + threadIdx.x, p.epoch - 2);
    __syncthreads(); // no store into a half before its last reader let go of it
    uint64_t j = 0;
    for (int64_t off = e0; off < e1; off += a.sub, j++) {
        copy_step<W>(a, a.src, par, off, e1 - off < a.sub ? e1 - off : a.sub);
        __syncthreads(); // every store of this step comes before its flags
        if (threadIdx.x > 0 && threadIdx.x < (unsigned)W)
            kevo_store_release_sys(kevo_peer_pad(p, threadIdx.x) + data_word(p), base + j + 1);
    }
}

__device__ __forceinline__ void peer_cta(const Args &a, const kevo_pads &p, int64_t par, int64_t e0,
                                         int64_t e1)
{
    const uint64_t base = p.epoch << 16;
    uint64_t j = 0;
    for (int64_t off = e0; off < e1; off += a.sub, j++) {
        if (threadIdx.x == 0)
            kevo_wait_flag(p.mine + data_word(p), base + j + 1);
        __syncthreads(); // what thread 0 acquired, for the whole CTA
        copy_step<1>(a, a.src + par, 0, off, e1 - off < a.sub ? e1 - off : a.sub);
    }
    __syncthreads(); // the whole CTA is done with this parity's half
    if (threadIdx.x == 0)
        kevo_store_release_sys(p.peer[0] + ack_row(p) + p.rank, p.epoch);
}

// Large sizes: everyone copies its range of x_0 (the root its own x) between two barriers.
__device__ __forceinline__ void pull_cta(const Args &a, const kevo_pads &p, int64_t e0, int64_t e1)
{
    kevo_cta_barrier(p, 0); // rank 0's x holds this call's values
    for (int64_t off = e0; off < e1; off += a.sub)
        copy_step<1>(a, a.src, 0, off, e1 - off < a.sub ? e1 - off : a.sub);
    kevo_cta_barrier(p, 1); // nobody reads rank 0's x any more
}

template <int W>
__device__ __forceinline__ void run_cta(const Args &a, const kevo_pads &p, int64_t e0, int64_t e1)
{
    const int64_t par = (int64_t)(p.epoch & 1) * a.half; // this launch's half
    if (!a.push)
        pull_cta(a, p, e0, e1);
    else if (p.rank == 0)
        root_cta<W>(a, p, par, e0, e1);
    else
        peer_cta(a, p, par, e0, e1);
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    broadcast_push_sm(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    const int64_t e0 = (int64_t)blockIdx.x * a.per < a.n ? (int64_t)blockIdx.x * a.per : a.n;
    const int64_t e1 = e0 + a.per < a.n ? e0 + a.per : a.n;
    switch (p.world) {
    case 2: run_cta<2>(a, p, e0, e1); break;
    case 3: run_cta<3>(a, p, e0, e1); break;
    case 4: run_cta<4>(a, p, e0, e1); break;
    case 5: run_cta<5>(a, p, e0, e1); break;
    case 6: run_cta<6>(a, p, e0, e1); break;
    case 7: run_cta<7>(a, p, e0, e1); break;
    default: run_cta<8>(a, p, e0, e1); break;
    }
    kevo_epoch_end(p);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    const int64_t n = kevo_param(ctx, "N", 0);
    if (W < 2 || W > KEVO_MAX_RANKS || n < 1)
        return kevo_fail(kWho, "bad context (world %d, N %lld)", W, (long long)n);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)broadcast_push_sm, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    // both halves, the same size on every rank (so the offsets match), or the pull
    st->half = (n + kHalfAlign - 1) / kHalfAlign * kHalfAlign;
    const size_t bytes = 2 * (size_t)st->half * sizeof(uint16_t);
    st->push = 2 * n <= (int64_t)PUSH_MAX_KIB * 1024 && bytes <= ctx->scratch_bytes_left;
    if (st->push) {
        void *peer[KEVO_MAX_RANKS] = {0};
        if (ctx->scratch_alloc(ctx, bytes, NULL, peer, NULL) != 0)
            return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", bytes);
        for (int q = 0; q < W; q++)
            st->scratch[q] = (uint16_t *)peer[q];
    }
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return kevo_fail(kWho, "bad context (no tensors)");
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != n)
        return kevo_fail(kWho, "expected bf16 x and y of N elements");
    // Tensor pointers change between calls: read them from ctx every time. The scratch
    // pointers are half 0's; the kernel adds the half of its epoch's parity (a multiple of 64
    // elements, so the alignment checked here holds for both halves).
    Args a = {};
    a.n = n;
    a.y = (uint16_t *)y->ptr;
    a.push = st->push;
    a.half = st->half;
    a.p = kevo_pads_of(ctx);
    bool vec = kevo_aligned16(a.y);
    if (r == 0) {
        a.src = (const uint16_t *)x->ptr;
        for (int q = 1; q < W && st->push; q++) {
            a.send[q] = st->scratch[q];
            vec = vec && kevo_aligned16(a.send[q]);
        }
    } else {
        a.src = st->push ? st->scratch[r] : (const uint16_t *)x->peer[0];
    }
    a.vec = vec && kevo_aligned16(a.src);

    // The same grid and ranges on every rank (from N and the SM count): CTA b of every rank
    // handles the same elements, and its flags pair them. All of it resident (the pull's
    // barriers), within the pad's two phases of W words per CTA.
    const int64_t nvec = (n + 7) / 8;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t grid = kevo_clamp_grid((nvec + THREADS - 1) / THREADS,
                                         st->max_grid < pad_limit ? st->max_grid : pad_limit);
    a.per = (nvec + grid - 1) / grid * 8;
    a.sub = (int64_t)THREADS * STEP_VECS * 8;
    if ((a.per + a.sub - 1) / a.sub >= ((int64_t)1 << 16) - 1)
        return kevo_fail(kWho, "too many steps per CTA");
    broadcast_push_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx); // the scratch belongs to the harness
}
