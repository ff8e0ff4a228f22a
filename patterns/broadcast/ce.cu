// broadcast/ce.cu — broadcast (bf16, root 0) whose peer traffic goes through the copy engines
// (cudaMemcpyAsync between symmetric buffers), with small SM kernels for the flags.
//
// Two schedules, chosen from W and TREE only (so the same on every rank):
//
// Pull (W = 2, or TREE = 0). All on ctx->stream:
//   start kernel   1 CTA: kevo_cta_barrier phase 0 (slots [0, W)): everyone entered the call
//   rank q ≥ 1     cudaMemcpyAsync(y + lo, x_0 + lo) for the first N - S elements, in CHUNKS
//                  pieces (x_0 through ctx->inputs[0].peer[0])
//   end kernel     G CTAs; on rank 0 only they work: odd CTAs copy x_0 into rank 0's own y
//                  (local), even CTAs push the last S elements of x_0 into every other rank's y
//                  with 16-byte SM stores (S = SM_SHARE/64 of N: the copy engine alone reaches
//                  ~397 GB/s of the link's ~478, SM stores running beside it can use the rest);
//                  then kevo_cta_barrier with its own slots on every rank.
//   Rank 0's local copy runs on rank 0's stream while rank q's copy engine pulls: they overlap.
//
// Tree (W > 2 and TREE = 1): the scatter-and-forward schedule of the cost model, so that rank 0
// sends each byte once and every rank receives 2N. x_0 is cut into C chunks (C = CHUNKS, fewer
// when a block would be under 1 MiB), each chunk into W - 1 blocks; block (c, q) belongs to q.
//   start kernel   as above
//   rank 0         for each chunk c: cudaMemcpyAsync x_0[block (c, q)] -> y_q[block (c, q)] for
//                  q = 1 .. W-1 (pushes), then a 1-CTA kernel that sets flag W + c in every
//                  rank's pad (release)
//   rank q ≥ 1     for each chunk c: a 1-CTA kernel that waits for flag W + c (acquire), then
//                  cudaMemcpyAsync y_q[block (c, q)] -> y_p[block (c, q)] for every p ≠ q, rank
//                  0 included (so rank 0 needs no local copy)
//   end kernel     1 CTA: kevo_cta_barrier
//   Rank 0's copies of chunk c + 1 overlap the forwards of chunk c on the other ranks' streams:
//   about (1 + 1/C)·2N at the copy engine's rate per rank, plus 2C small kernels.
//
// Why it should be fast: at 16–256 MiB the copy engine is the fastest mover measured (397 GB/s
// per direction) and needs no SMs; NCCL's ring broadcast reaches 70% of the roofline at
// 256 MiB (796 µs at W = 2, where the pull schedule should take about 2N/397 GB/s ≈ 676 µs,
// less with the SM share). This seed is for the large sizes; small ones pay the graph nodes.
//
// Synchronisation: the start barrier completes before any copy (stream order), so x_0 is ready
// and every y may be written. A copy that finished before a kernel started (stream order) is
// complete when that kernel releases its flag, so a rank that acquired flag W + c reads block
// (c, q) whole. Every rank arrives at the end barrier after all of its copies and SM stores;
// once this rank's end kernel is done, nobody reads x_0 or writes this rank's y any more.
// Flags hold epochs, never reset, release/acquire at .sys scope, waits bounded (5 s, then
// __trap). Slots: [0, W) start, [W, W + CHUNKS) chunk flags, then the end barrier.
// Epochs are the device's (kevo_epoch_begin / kevo_epoch_end), all on channel 0 and
// ctx->stream: every kernel launch advances the channel once, so a call replayed from a CUDA
// graph gets new epochs. A signal and its wait agree because every rank launches the same
// number of flag kernels in the same order: start, one per chunk (rank 0 a signal kernel, the
// others a wait kernel), end; so rank 0's signal of chunk c and rank q's wait for it are both
// the (c + 2)-th launch of the call. The copies have no buffer of their own (x_0 -> y), so
// nothing alternates from call to call.
//
// kevo:pattern problem=broadcast transport=ce fusion=unfused
// kevo:param CHUNKS default=8 values=1,2,4,8,16,32
// kevo:param SM_SHARE default=8 range=0..32
// kevo:param TREE default=1 values=0,1
#define CHUNKS 8
#define SM_SHARE 8
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

constexpr const char *kWho = "broadcast/ce";
constexpr int kThreads = 256;                        // end kernel
constexpr int kCtasPerSm = 2;                        // end kernel, at most
constexpr int64_t kAlign = 2048;                     // elements (4 KiB): copy boundaries
constexpr int64_t kMinBlockBytes = (int64_t)1 << 20; // tree: smallest block worth a memcpy

struct State {
    int occupancy; // end kernel CTAs per SM
};

struct FlagArgs {
    kevo_pads pads;
    uint64_t slot;
};

struct EndArgs {
    const uint16_t *x0;          // rank 0's x (bf16 bits)
    uint16_t *y[KEVO_MAX_RANKS]; // every rank's y
    int64_t n;                   // elements
    int64_t sm_lo;               // pull schedule: rank 0 pushes [sm_lo, n) with SMs
    int work;                    // rank 0 of the pull schedule: local copy and pushes
    kevo_pads pads;
    uint64_t first; // first slot of the end barrier
};

// dst[0, n) = src[0, n) over the threads t of nt. dst is the side kept in 16-byte stores (the
// remote one when pushing); src is read with 16-, 4- or 2-byte loads as its alignment allows.
template <int U>
__device__ __forceinline__ void copy_push(uint16_t *dst, const uint16_t *src, int64_t n, int64_t t,
                                          int64_t nt)
{
    if ((uintptr_t)dst & 1u) {
        for (int64_t e = t; e < n; e += nt)
            dst[e] = src[e];
        return;
    }
    int64_t head = (int64_t)(((16u - ((unsigned)(uintptr_t)dst & 15u)) & 15u) >> 1);
    if (head > n)
        head = n;
    for (int64_t e = t; e < head; e += nt)
        dst[e] = src[e];
    const int64_t nv = (n - head) >> 3;
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + head);
    const uint16_t *s = src + head;
    const unsigned smis = (unsigned)(uintptr_t)s & 15u;
    if (smis == 0) {
        const uint4 *s4 = reinterpret_cast<const uint4 *>(s);
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
    } else if ((smis & 3u) == 0) {
        for (int64_t i = t; i < nv; i += nt) {
            const uint32_t *s32 = reinterpret_cast<const uint32_t *>(s + 8 * i);
            d4[i] = make_uint4(s32[0], s32[1], s32[2], s32[3]);
        }
    } else {
        for (int64_t i = t; i < nv; i += nt) {
            const uint16_t *s16 = s + 8 * i;
            d4[i] = make_uint4((uint32_t)s16[0] | (uint32_t)s16[1] << 16,
                               (uint32_t)s16[2] | (uint32_t)s16[3] << 16,
                               (uint32_t)s16[4] | (uint32_t)s16[5] << 16,
                               (uint32_t)s16[6] | (uint32_t)s16[7] << 16);
        }
    }
    for (int64_t e = head + nv * 8 + t; e < n; e += nt)
        dst[e] = src[e];
}

// 1 CTA: every rank has entered this call (slots [0, W)).
__global__ void __launch_bounds__(32) broadcast_ce_start(const __grid_constant__ FlagArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0, 0);
    kevo_epoch_end(p);
}

// Rank 0, tree: the blocks of one chunk are in every y: flag a.slot := epoch on every rank ≥ 1.
__global__ void __launch_bounds__(32) broadcast_ce_signal(const __grid_constant__ FlagArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int q = threadIdx.x;
    if (q >= 1 && q < p.world)
        kevo_signal(p, q, a.slot);
    kevo_epoch_end(p);
}

// Rank q ≥ 1, tree: wait until rank 0 has flagged the chunk.
__global__ void __launch_bounds__(32) broadcast_ce_wait(const __grid_constant__ FlagArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    if (threadIdx.x == 0)
        kevo_wait(p, a.slot);
    kevo_epoch_end(p);
}

__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    broadcast_ce_end(const __grid_constant__ EndArgs a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    if (a.work) {
        const int W = p.world;
        const bool remote = a.sm_lo < a.n && W > 1;
        const bool split = remote && gridDim.x >= 2;
        const bool do_remote = remote && (!split || (blockIdx.x & 1) == 0);
        const bool do_local = !split || (blockIdx.x & 1) == 1;
        const unsigned role_cta = split ? blockIdx.x >> 1 : blockIdx.x;
        const unsigned role_ctas =
            split ? ((blockIdx.x & 1) ? gridDim.x >> 1 : (gridDim.x + 1) >> 1) : gridDim.x;
        const int64_t t = (int64_t)role_cta * kThreads + threadIdx.x;
        const int64_t nt = (int64_t)role_ctas * kThreads;
        if (do_remote)
            for (int q = 1; q < W; q++)
                copy_push<4>(a.y[q] + a.sm_lo, a.x0 + a.sm_lo, a.n - a.sm_lo, t, nt);
        if (do_local)
            copy_push<4>(a.y[0], a.x0, a.n, t, nt);
    }
    kevo_cta_barrier(p, 0, a.first); // end: every copy into every y is done
    kevo_epoch_end(p);
}

int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return kevo_fail(kWho, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)broadcast_ce_end, kThreads, 0, INT_MAX,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world, me = ctx->rank;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != n)
        return kevo_fail(kWho, "expected bf16 x and y of N elements");
    cudaStream_t s = ctx->stream;
    const kevo_pads pads = kevo_pads_of(ctx);
    const uint64_t end_first = (uint64_t)W + CHUNKS;

    // Tensor pointers change between calls: read them from ctx every time.
    const uint16_t *x0 = (const uint16_t *)x->peer[0];
    uint16_t *yq[KEVO_MAX_RANKS];
    for (int q = 0; q < W; q++)
        yq[q] = (uint16_t *)y->peer[q];

    FlagArgs f = {};
    f.pads = pads;
    broadcast_ce_start<<<1, 32, 0, s>>>(f);
    if (kevo_launched(kWho, "start kernel"))
        return 1;

    EndArgs a = {};
    a.x0 = x0;
    a.n = n;
    a.pads = pads;
    a.first = end_first;
    for (int q = 0; q < W; q++)
        a.y[q] = yq[q];
    int64_t grid = 1;

    if (W > 2 && TREE) {
        // chunks of W - 1 blocks, the same on every rank
        int64_t chunks = n * 2 / ((int64_t)(W - 1) * kMinBlockBytes);
        if (chunks > CHUNKS)
            chunks = CHUNKS;
        if (chunks < 1)
            chunks = 1;
        const int64_t blocks = chunks * (W - 1);
        const int64_t blen = ((n + blocks - 1) / blocks + kAlign - 1) / kAlign * kAlign;
        for (int64_t c = 0; c < chunks; c++) {
            f.slot = (uint64_t)W + (uint64_t)c;
            if (me == 0) {
                for (int q = 1; q < W; q++) {
                    const int64_t lo = (c * (W - 1) + (q - 1)) * blen;
                    const int64_t hi = lo + blen < n ? lo + blen : n;
                    if (hi > lo && check(cudaMemcpyAsync(yq[q] + lo, x0 + lo, (size_t)(hi - lo) * 2,
                                                         cudaMemcpyDeviceToDevice, s),
                                         "cudaMemcpyAsync (scatter)"))
                        return 1;
                }
                broadcast_ce_signal<<<1, 32, 0, s>>>(f);
                if (kevo_launched(kWho, "signal kernel"))
                    return 1;
            } else {
                broadcast_ce_wait<<<1, 32, 0, s>>>(f);
                if (kevo_launched(kWho, "wait kernel"))
                    return 1;
                const int64_t lo = (c * (W - 1) + (me - 1)) * blen;
                const int64_t hi = lo + blen < n ? lo + blen : n;
                for (int j = 1; j < W && hi > lo; j++) {
                    const int p = (me + j) % W;
                    if (check(cudaMemcpyAsync(yq[p] + lo, yq[me] + lo, (size_t)(hi - lo) * 2,
                                              cudaMemcpyDeviceToDevice, s),
                              "cudaMemcpyAsync (forward)"))
                        return 1;
                }
            }
        }
        a.work = 0;
        a.sm_lo = n;
    } else {
        int64_t sm_len = W > 1 ? n * SM_SHARE / 64 / kAlign * kAlign : 0;
        if (sm_len > n)
            sm_len = n;
        const int64_t ce_len = n - sm_len;
        if (me != 0) {
            for (int c = 0; c < CHUNKS; c++) {
                const int64_t lo = c == 0 ? 0 : ce_len * c / CHUNKS / kAlign * kAlign;
                const int64_t hi =
                    c + 1 == CHUNKS ? ce_len : ce_len * (c + 1) / CHUNKS / kAlign * kAlign;
                if (hi > lo && check(cudaMemcpyAsync(yq[me] + lo, x0 + lo, (size_t)(hi - lo) * 2,
                                                     cudaMemcpyDeviceToDevice, s),
                                     "cudaMemcpyAsync (pull)"))
                    return 1;
            }
        }
        a.work = me == 0;
        a.sm_lo = ce_len;
        // the same grid on every rank: one 16-byte vector per thread and role, within residency
        const int64_t items = (n + 7) / 8;
        grid = (items + kThreads - 1) / kThreads * (sm_len > 0 ? 2 : 1);
        const int per_sm = st->occupancy < kCtasPerSm ? st->occupancy : kCtasPerSm;
        if (grid > (int64_t)per_sm * ctx->sm_count)
            grid = (int64_t)per_sm * ctx->sm_count;
    }
    const int64_t pad_limit = kevo_pads_max_ctas(pads, 1, end_first);
    if (grid > pad_limit)
        grid = pad_limit;
    if (grid < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    broadcast_ce_end<<<(unsigned)grid, kThreads, 0, s>>>(a);
    return kevo_launched(kWho, "end kernel");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
