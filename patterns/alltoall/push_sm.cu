// push_sm.cu — all-to-all (bf16, equal chunks) in one kernel with no barrier round trip: every
// rank pushes chunk q of its x into rank q's symmetric scratch with 16-byte SM stores and
// raises a flag; every rank waits for the flags of the chunks addressed to it and copies them
// from its scratch into y.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank), C = N/W:
//  Scratch (kevo_init, ctx->scratch_alloc, symmetric): two halves, one per parity of the
//  launch's epoch (epoch & 1, chosen in the kernel), each with W-1 slots of C elements; on
//  rank q, slot (s - q - 1) mod W of a half holds the chunk rank s sent it. CTA b owns
//  elements [b*P, (b+1)*P) of every chunk (P from C and the grid), cut into steps of SUB
//  elements (THREADS * STEP_VECS vectors).
//  For each step j of CTA b:
//   1. Push: for every peer q (all W-1 loads of a vector in flight before its stores), copy
//      x[q*C + step] into slot r of rank q's scratch half. __syncthreads(), then thread q
//      writes flag [b][r] of rank q's pad := (epoch << 16) + j + 1 with st.release.sys
//      (epoch: the device's, kevo_epoch_begin).
//   2. Own chunk: y[r*C + step] <- x[r*C + step], a local copy, while the flags travel.
//   3. Receive the previous step j-1: thread s waits (ld.acquire.sys, bounded) until flag
//      [b][s] of this rank's pad reaches (epoch << 16) + j, __syncthreads(), then every
//      thread copies its vectors of every peer's slot into y[s*C + step]. Steps overlap:
//      step j's pushes are in flight while step j-1 is copied out.
//  Elements after the last whole vector, and whole chunks whose offsets are not 16-byte
//  aligned (validation size: C = 400012 / 200006 / 100003), go one bf16 at a time (slow,
//  correct; that size is not timed).
//
// Why it should be fast: at small sizes (64 KiB, 1 MiB) the pull kernels pay a start barrier,
// a load round trip and an end barrier; this one pays one store-then-flag one-way trip and no
// end barrier (nobody ever reads this rank's memory), against NCCL's 11.0 / 17.4 us. At large
// sizes it is bound by NVLink SM stores (~370 GB/s) plus an extra local copy (scratch -> y)
// that mostly overlaps; the pull and TMA seeds are the ones for 256 MiB.
//
// Synchronisation (why nobody reads stale data or data being overwritten):
//  - peers never read this rank's x or y and write only its scratch and pad, so x and y need
//    no start or end barrier (ABI rules 6 and 7); scratch is double buffered by the parity of
//    the launch's epoch;
//  - the data of step j of launch e is read only after flag e << 16 | (j+1) was acquired, and
//    that flag is released after the data's stores (__syncthreads + st.release.sys);
//  - half e & 1 is rewritten by a sender only in launch e + 2. A sender in launch e + 2 has
//    finished launch e + 1, in which CTA b waited for this rank's CTA b's pushes of launch
//    e + 1, which this rank makes only after its kernel of launch e (and so its reads of half
//    e & 1) completed (stream order);
//  - epochs come from the device (kevo_epoch_begin / kevo_epoch_end): they count the kernel's
//    launches, one per call on every rank, so they agree across ranks and the halves alternate
//    by launches actually run, also when a call is replayed from a CUDA graph (whose kernel
//    arguments, the halves' base pointers included, repeat unchanged);
//  - flag values only grow ((epoch << 16) + step, never reset); every wait gives up after 5 s
//    with __trap().
//
// kevo:pattern problem=alltoall transport=sm fusion=fused
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

constexpr const char *kWho = "alltoall/push_sm";
constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int64_t kSlotAlign = 64; // elements: slots start 128-byte aligned

struct Args {
    const __nv_bfloat16 *psrc[KEVO_MAX_RANKS]; // push: x + q*C
    __nv_bfloat16 *pdst[KEVO_MAX_RANKS];       // push: rank q's slot for this rank, half 0
    const __nv_bfloat16 *rsrc[KEVO_MAX_RANKS]; // receive: this rank's slot of s, half 0 (s = r:
                                               // x + r*C)
    __nv_bfloat16 *rdst[KEVO_MAX_RANKS];       // receive: y + s*C
    int64_t half; // elements per scratch half (half 1 = half 0's slots + half)
    int64_t c;    // elements per chunk
    int64_t per;  // elements per CTA (a multiple of 8)
    int64_t sub;  // elements per step (a multiple of 8)
    int push_vec; // every psrc and pdst 16-byte aligned
    int recv_vec; // every rsrc and rdst of a peer 16-byte aligned
    int own_vec;  // x + r*C and y + r*C 16-byte aligned
    int world, rank;
    kevo_pads p;
};

struct State {
    __nv_bfloat16 *scratch_peer[KEVO_MAX_RANKS]; // every rank's scratch (both halves)
    int64_t slot;                                // elements between slots
    int max_grid;
};

// Copy elements [off, off + len) of the W-1 chunks (src[q] + soff, dst[q] + doff) for q = r+1,
// ..., r+W-1 (mod W), the W-1 loads of a vector issued before their stores. soff and doff
// (elements, multiples of 64) pick the scratch half on the scratch side, 0 on the other.
template <int W>
__device__ __forceinline__ void copy_peers(const __nv_bfloat16 *const *srcs, int64_t soff,
                                           __nv_bfloat16 *const *dsts, int64_t doff, int r, int vec,
                                           int64_t off, int64_t len)
{
    constexpr int P = W > 1 ? W - 1 : 1;
    // at most 8 vectors (16-byte loads) in flight per thread beyond UNROLL = 1: more spills
    constexpr int U = P * UNROLL <= 8 ? UNROLL : (8 / P > 0 ? 8 / P : 1);
    int64_t done = 0;
    if (vec) {
        const int64_t nv = len >> 3;
        const uint4 *src[P];
        uint4 *dst[P];
#pragma unroll
        for (int k = 1; k < W; k++) {
            const int q = (r + k) % W;
            src[k - 1] = reinterpret_cast<const uint4 *>(srcs[q] + soff + off);
            dst[k - 1] = reinterpret_cast<uint4 *>(dsts[q] + doff + off);
        }
        int64_t i = threadIdx.x;
        for (; i + (U - 1) * THREADS < nv; i += U * THREADS) {
            uint4 v[U][P];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int k = 0; k < W - 1; k++)
                    v[u][k] = src[k][i + u * THREADS];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int k = 0; k < W - 1; k++)
                    dst[k][i + u * THREADS] = v[u][k];
        }
        for (; i < nv; i += THREADS) {
            uint4 v[P];
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
            dsts[q][doff + off + e] = srcs[q][soff + off + e];
        }
    }
}

// This rank's own chunk, elements [off, off + len): a local copy.
__device__ __forceinline__ void copy_own(const Args &a, int64_t off, int64_t len)
{
    const __nv_bfloat16 *src = a.rsrc[a.rank] + off;
    __nv_bfloat16 *dst = a.rdst[a.rank] + off;
    int64_t done = 0;
    if (a.own_vec) {
        const int64_t nv = len >> 3;
        const uint4 *s = reinterpret_cast<const uint4 *>(src);
        uint4 *d = reinterpret_cast<uint4 *>(dst);
        for (int64_t i = threadIdx.x; i < nv; i += THREADS)
            d[i] = s[i];
        done = nv << 3;
    }
    for (int64_t e = done + threadIdx.x; e < len; e += THREADS)
        dst[e] = src[e];
}

template <int W> __device__ __forceinline__ void run_cta(const Args &a, const kevo_pads &p)
{
    const int r = a.rank;
    const int64_t par = (int64_t)(p.epoch & 1) * a.half; // this launch's scratch half
    const int64_t e0 = (int64_t)blockIdx.x * a.per;
    const int64_t e1 = e0 + a.per < a.c ? e0 + a.per : a.c;
    const int64_t len = e1 > e0 ? e1 - e0 : 0;
    const int64_t nsub = (len + a.sub - 1) / a.sub;
    const uint64_t base = p.epoch << 16;
    const uint64_t flags = (uint64_t)blockIdx.x * W; // [cta][source rank]
    const int t = threadIdx.x;
    for (int64_t j = 0; j <= nsub; j++) {
        if (j < nsub) {
            const int64_t off = e0 + j * a.sub;
            const int64_t n = e1 - off < a.sub ? e1 - off : a.sub;
            copy_peers<W>(a.psrc, 0, a.pdst, par, r, a.push_vec, off, n);
            __syncthreads(); // every push of this step comes before the flags
            if (t < W && t != r)
                kevo_store_release_sys(kevo_peer_pad(p, t) + flags + r, base + (uint64_t)j + 1);
            copy_own(a, off, n);
        }
        if (j >= 1) {
            if (t < W && t != r)
                kevo_wait_flag(p.mine + flags + t, base + (uint64_t)j);
            __syncthreads(); // what threads 0..W-1 acquired, for the whole CTA
            const int64_t off = e0 + (j - 1) * a.sub;
            const int64_t n = e1 - off < a.sub ? e1 - off : a.sub;
            copy_peers<W>(a.rsrc, par, a.rdst, 0, r, a.recv_vec, off, n);
        }
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    alltoall_push_sm(const __grid_constant__ Args a)
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel ||
        x->numel % W != 0) {
        *why = "expected bf16 x and y of N elements, N a multiple of W";
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
    if (kevo_ctas_per_sm(kWho, (const void *)alltoall_push_sm, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;

    const int W = ctx->world;
    const int64_t c = ctx->inputs[0].numel / W;
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
    const int64_t c = x->numel / W;
    const int64_t half = (int64_t)(W - 1) * st->slot; // elements per parity half

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.c = c;
    a.half = half;
    a.world = W;
    a.rank = r;
    bool push_vec = true, recv_vec = true;
    for (int q = 0; q < W; q++) {
        a.rdst[q] = (__nv_bfloat16 *)y->ptr + (int64_t)q * c;
        if (q == r) {
            a.rsrc[q] = (const __nv_bfloat16 *)x->ptr + (int64_t)r * c;
            continue;
        }
        // this rank's slot at rank q, and rank q's slot here, in half 0 (the kernel adds the
        // half of its epoch's parity: `half` is a multiple of 64 elements, so the alignment
        // checked here holds for both halves)
        const int64_t at_q = (int64_t)((r - q - 1 + W) % W) * st->slot;
        const int64_t here = (int64_t)((q - r - 1 + W) % W) * st->slot;
        a.psrc[q] = (const __nv_bfloat16 *)x->ptr + (int64_t)q * c;
        a.pdst[q] = st->scratch_peer[q] + at_q;
        a.rsrc[q] = st->scratch_peer[r] + here;
        push_vec = push_vec && kevo_aligned16(a.psrc[q]) && kevo_aligned16(a.pdst[q]);
        recv_vec = recv_vec && kevo_aligned16(a.rsrc[q]) && kevo_aligned16(a.rdst[q]);
    }
    a.push_vec = push_vec;
    a.recv_vec = recv_vec;
    a.own_vec = kevo_aligned16(a.rsrc[r]) && kevo_aligned16(a.rdst[r]);
    a.p = kevo_pads_of(ctx);

    // Same grid and ranges on every rank (from C, W and the SM count): CTA b of every rank
    // moves the same elements of every chunk, and flag [b][s] pairs them.
    const int64_t nvec = (c + 7) / 8;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 1);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    int64_t most = nvec < st->max_grid ? nvec : st->max_grid;
    if (most > pad_limit)
        most = pad_limit;
    const int64_t grid = kevo_clamp_grid(((int64_t)W * nvec + THREADS - 1) / THREADS, most);
    a.per = (nvec + grid - 1) / grid * 8;
    a.sub = (int64_t)THREADS * STEP_VECS * 8;
    if ((a.per + a.sub - 1) / a.sub >= ((int64_t)1 << 16) - 1)
        return kevo_fail(kWho, "too many steps per CTA");
    alltoall_push_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx); // the scratch belongs to the harness
}
