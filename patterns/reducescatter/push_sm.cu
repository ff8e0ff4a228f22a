// push_sm.cu — reduce-scatter (bf16, sum) in one kernel with no barrier round trip: every rank
// pushes block q of its x into rank q's symmetric scratch with 16-byte SM stores and raises a
// flag; every rank waits for the flags of its own block and sums it locally.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank), C = N/W:
//  Scratch (kevo_init, ctx->scratch_alloc, symmetric): two halves, one per parity of the
//  launch's epoch (epoch & 1, chosen in the kernel), each with W-1 slots of C elements; on
//  rank q, slot (s - q - 1) mod W of a half holds what rank s sent. CTA b owns elements
//  [b*P, (b+1)*P) of the block (P from C and the grid), cut into steps of SUB elements
//  (THREADS * STEP_VECS vectors).
//  For each step j of CTA b:
//   1. Push: for every peer q (all W-1 loads of a vector in flight before its stores), copy
//      this rank's x[q*C + step] into slot r of rank q's scratch half (y.peer-style pointer
//      from scratch_alloc). __syncthreads(), then thread q writes flag [b][r] of rank q's pad
//      := (epoch << 16) + j + 1 with st.release.sys (the launch's epoch: kevo_epoch_begin).
//   2. Sum the previous step j-1: thread s waits (ld.acquire.sys, bounded) until flag [b][s]
//      of this rank's pad reaches (epoch << 16) + j, __syncthreads(), then every thread sums
//      its vectors in rank order 0..W-1 in fp32, this rank's own block read in place from x
//      and the peers' from the scratch half, rounds once (kevo_sum_bf16x8: at W = 2 bit for
//      bit the reference) and stores to y. Steps overlap: step j's pushes are in flight while
//      step j-1 is summed.
//  Elements after the last whole vector, and everything when a block of x is not 16-byte
//  aligned (validation size: C = 400012 / 200006 / 100003), go one bf16 at a time (slow,
//  correct; that size is not timed).
//
// Why it should be fast: at small sizes (64 KiB, 1 MiB) the pull kernels pay a start barrier
// (one-way flag latency after the last arrival), a load round trip and an end barrier; this one
// pays one store-then-flag one-way trip and no end barrier at all (nobody ever reads this
// rank's memory). At large sizes it is bound by NVLink SM stores (~370 GB/s) plus the part of
// the local sum that does not overlap; the pull and TMA seeds are the ones for 256 MiB.
//
// Synchronisation (why nobody reads stale data or data being overwritten):
//  - peers never read this rank's x or y, and write only its scratch and pad, so no start or
//    end barrier is needed for the tensors (ABI rules 6 and 7 concern x and y; scratch may be
//    double buffered by the epoch's parity instead);
//  - epochs come from the device (kevo_epoch_begin / kevo_epoch_end, channel 0, one launch
//    per call on every rank), so launch e has epoch e on every rank, and a call replayed from
//    a CUDA graph gets the next epoch and the other half, as one made from the host does;
//  - the data of step j of launch e is read only after flag e << 16 | (j+1) was acquired,
//    and that flag is released after the data's stores (__syncthreads + st.release.sys);
//  - half e & 1 is rewritten by a sender only in launch e + 2. A sender in launch e + 2 has
//    finished launch e + 1, in which CTA b waited for this rank's CTA b's pushes of launch
//    e + 1, which this rank's kernel of launch e + 1 makes only after its kernel of launch e
//    (and so its reads of half e & 1) completed (stream order);
//  - flag values only grow ((epoch << 16) + step, never reset), so a flag already raised for
//    launch e + 1 also satisfies a wait of launch e, whose data is then complete too;
//  - every wait gives up after 5 s with __trap().
//
// kevo:pattern problem=reducescatter transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=2 values=1,2,4
// kevo:param STEP_VECS default=8 values=1,2,4,8,16,32,1024
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 2
#define STEP_VECS 8

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

constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int64_t kSlotAlign = 64; // elements: slots start 128-byte aligned

struct Args {
    const __nv_bfloat16 *psrc[KEVO_MAX_RANKS];    // push: x + q*C (q = peer)
    __nv_bfloat16 *pdst[2][KEVO_MAX_RANKS];       // push, per half: rank q's slot for this rank
    const __nv_bfloat16 *rsrc[2][KEVO_MAX_RANKS]; // sum, per half: own block (s = r) or this
                                                  // rank's slot of s
    __nv_bfloat16 *y;
    int64_t c;    // elements of the block
    int64_t per;  // elements per CTA (a multiple of 8)
    int64_t sub;  // elements per step (a multiple of 8)
    int push_vec; // every psrc 16-byte aligned (pdst always are)
    int sum_vec;  // every rsrc and y 16-byte aligned
    int world, rank;
    kevo_pads p;
};

struct State {
    __nv_bfloat16 *scratch_peer[KEVO_MAX_RANKS]; // every rank's scratch (both halves)
    int64_t slot;                                // elements between slots
    int max_grid;
};

// Push elements [off, off + len) of this CTA to every peer (the W-1 loads of a vector first).
template <int W>
__device__ __forceinline__ void push_step(const Args &a, int par, int64_t off, int64_t len)
{
    const int r = a.rank;
    int64_t done = 0;
    if (a.push_vec) {
        const int64_t nv = len >> 3;
        const uint4 *src[W > 1 ? W - 1 : 1];
        uint4 *dst[W > 1 ? W - 1 : 1];
#pragma unroll
        for (int k = 1; k < W; k++) {
            const int q = (r + k) % W;
            src[k - 1] = reinterpret_cast<const uint4 *>(a.psrc[q] + off);
            dst[k - 1] = reinterpret_cast<uint4 *>(a.pdst[par][q] + off);
        }
        int64_t i = threadIdx.x;
        for (; i + (UNROLL - 1) * THREADS < nv; i += UNROLL * THREADS) {
            uint4 v[UNROLL][W > 1 ? W - 1 : 1];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int k = 0; k < W - 1; k++)
                    v[u][k] = src[k][i + u * THREADS];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int k = 0; k < W - 1; k++)
                    dst[k][i + u * THREADS] = v[u][k];
        }
        for (; i < nv; i += THREADS) {
            uint4 v[W > 1 ? W - 1 : 1];
#pragma unroll
            for (int k = 0; k < W - 1; k++)
                v[k] = src[k][i];
#pragma unroll
            for (int k = 0; k < W - 1; k++)
                dst[k][i] = v[k];
        }
        done = nv << 3;
    }
    for (int64_t e = done + threadIdx.x; e < len; e += THREADS) {
#pragma unroll
        for (int k = 1; k < W; k++) {
            const int q = (r + k) % W;
            a.pdst[par][q][off + e] = a.psrc[q][off + e];
        }
    }
}

// Sum elements [off, off + len) of this CTA over the ranks into y.
template <int W>
__device__ __forceinline__ void sum_step(const Args &a, int par, int64_t off, int64_t len)
{
    int64_t done = 0;
    if (a.sum_vec) {
        const int64_t nv = len >> 3;
        const uint4 *src[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            src[s] = reinterpret_cast<const uint4 *>(a.rsrc[par][s] + off);
        uint4 *y = reinterpret_cast<uint4 *>(a.y + off);
        int64_t i = threadIdx.x;
        for (; i + (UNROLL - 1) * THREADS < nv; i += UNROLL * THREADS) {
            uint4 v[UNROLL][W];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[u][s] = src[s][i + u * THREADS];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                y[i + u * THREADS] = kevo_sum_bf16x8<W>(v[u]);
        }
        for (; i < nv; i += THREADS) {
            uint4 v[W];
#pragma unroll
            for (int s = 0; s < W; s++)
                v[s] = src[s][i];
            y[i] = kevo_sum_bf16x8<W>(v);
        }
        done = nv << 3;
    }
    for (int64_t e = done + threadIdx.x; e < len; e += THREADS) {
        float acc = __bfloat162float(a.rsrc[par][0][off + e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.rsrc[par][s][off + e]);
        a.y[off + e] = __float2bfloat16_rn(acc);
    }
}

template <int W> __device__ __forceinline__ void run_cta(const Args &a, const kevo_pads &p)
{
    const int r = a.rank;
    const int64_t e0 = (int64_t)blockIdx.x * a.per;
    const int64_t e1 = e0 + a.per < a.c ? e0 + a.per : a.c;
    const int64_t len = e1 > e0 ? e1 - e0 : 0;
    const int64_t nsub = (len + a.sub - 1) / a.sub;
    const uint64_t base = p.epoch << 16;
    const int par = (int)(p.epoch & 1);              // the half of this launch
    const uint64_t flags = (uint64_t)blockIdx.x * W; // [cta][source rank]
    const int t = threadIdx.x;
    for (int64_t j = 0; j <= nsub; j++) {
        if (j < nsub) {
            const int64_t off = e0 + j * a.sub;
            push_step<W>(a, par, off, e1 - off < a.sub ? e1 - off : a.sub);
            __syncthreads(); // every push of this step comes before the flags
            if (t < W && t != r)
                kevo_store_release_sys(kevo_peer_pad(p, t) + flags + r, base + (uint64_t)j + 1);
        }
        if (j >= 1) {
            if (t < W && t != r)
                kevo_wait_flag(p.mine + flags + t, base + (uint64_t)j);
            __syncthreads(); // what threads 0..W-1 acquired, for the whole CTA
            const int64_t off = e0 + (j - 1) * a.sub;
            sum_step<W>(a, par, off, e1 - off < a.sub ? e1 - off : a.sub);
        }
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    reducescatter_push_sm(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    switch (a.world) {
    case 1: run_cta<1>(a, p); break;
    case 2: run_cta<2>(a, p); break;
    case 3: run_cta<3>(a, p); break;
    case 4: run_cta<4>(a, p); break;
    case 5: run_cta<5>(a, p); break;
    case 6: run_cta<6>(a, p); break;
    case 7: run_cta<7>(a, p); break;
    default: run_cta<8>(a, p); break;
    }
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel * W) {
        *why = "expected bf16 x of N and y of N/W elements";
        return -1;
    }
    return 0;
}

} // namespace

constexpr const char *kWho = "reducescatter/push_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)reducescatter_push_sm, THREADS, 0, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;

    const int W = ctx->world;
    const int64_t c = ctx->outputs[0].numel;
    st->slot = (c + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    if (W > 1 && st->slot > 0) {
        // two halves of W-1 slots; the same size on every rank, so the offsets match
        const size_t bytes = 2 * (size_t)(W - 1) * (size_t)st->slot * sizeof(__nv_bfloat16);
        if (bytes > ctx->scratch_bytes_left)
            return kevo_fail(kWho, "needs %zu bytes of scratch, %zu left", bytes,
                             ctx->scratch_bytes_left);
        void *peer[KEVO_MAX_RANKS] = {0};
        if (ctx->scratch_alloc(ctx, bytes, NULL, peer, NULL) != 0)
            return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", bytes);
        for (int q = 0; q < W; q++)
            st->scratch_peer[q] = (__nv_bfloat16 *)peer[q];
    }
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
    const int64_t c = y->numel;
    const int64_t half = (int64_t)(W - 1) * st->slot; // elements per half

    // Tensor pointers change between calls: read them from ctx every time. Both halves'
    // pointers go to the kernel, which takes the one of its epoch's parity.
    Args a = {};
    a.y = (__nv_bfloat16 *)y->ptr;
    a.c = c;
    a.world = W;
    a.rank = r;
    bool push_vec = true, sum_vec = kevo_aligned16(y->ptr);
    for (int q = 0; q < W; q++) {
        for (int h = 0; h < 2; h++) {
            if (q == r) {
                a.rsrc[h][q] = (const __nv_bfloat16 *)x->ptr + (int64_t)r * c;
            } else {
                // this rank's slot at rank q, and rank q's slot here
                const int64_t at_q = (int64_t)((r - q - 1 + W) % W) * st->slot;
                const int64_t here = (int64_t)((q - r - 1 + W) % W) * st->slot;
                a.psrc[q] = (const __nv_bfloat16 *)x->ptr + (int64_t)q * c;
                a.pdst[h][q] = st->scratch_peer[q] + h * half + at_q;
                a.rsrc[h][q] = st->scratch_peer[r] + h * half + here;
                push_vec = push_vec && kevo_aligned16(a.psrc[q]) && kevo_aligned16(a.pdst[h][q]);
            }
            sum_vec = sum_vec && kevo_aligned16(a.rsrc[h][q]);
        }
    }
    a.push_vec = push_vec;
    a.sum_vec = sum_vec;
    a.p = kevo_pads_of(ctx);

    // Same grid and ranges on every rank (from C, W and the SM count): CTA b of every rank
    // pushes and sums the same elements, and flag [b][s] pairs them.
    const int64_t nvec = (c + 7) / 8;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 1);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t grid = kevo_clamp_grid((nvec + THREADS - 1) / THREADS,
                                         st->max_grid < pad_limit ? st->max_grid : pad_limit);
    a.per = (nvec + grid - 1) / grid * 8;
    a.sub = (int64_t)THREADS * STEP_VECS * 8;
    if ((a.per + a.sub - 1) / a.sub >= ((int64_t)1 << 16) - 1)
        return kevo_fail(kWho, "too many steps per CTA");
    reducescatter_push_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx); // the scratch belongs to the harness
}
