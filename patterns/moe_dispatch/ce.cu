// ce.cu — MoE token dispatch whose peer traffic goes through the copy engines, graph-capturable
// and without host synchronisation. The row counts are device values, so a copy of exactly the
// needed rows cannot be enqueued (cudaMemcpyAsync takes host sizes); instead every rank copies
// each peer's WHOLE x (a fixed T*H bf16, known on the host) into a staging slot of its own
// symmetric scratch, and one local kernel builds the index and scatters the rows from there.
// Under uniform routing a token is wanted by a given remote rank with probability
// 1 - C(E-L, k)/C(E, k): 0.996 at W = 2 (the whole x is what must cross anyway), 0.90 at W = 4,
// 0.66 at W = 8 (then 1.5x the needed bytes cross, at the copy engine's 397 GB/s instead of SM
// loads' 370 GB/s, with no SM spent on NVLink).
//
// One call, all on ctx->stream:
//   start kernel         1 CTA: kevo_cta_barrier phase 0 (flags 0 .. W-1): every rank has
//                        entered the call, so its x and topk_ids hold this call's values.
//   W-1 cudaMemcpyAsync  x_s (x.peer[s], T*H bf16) -> staging slot of s, for s = r+1, r+2, ...
//                        (mod W: at any moment the ranks read from different peers).
//   index+scatter kernel (the same grid on every rank):
//     1. masks per (local expert, group of 32 tokens) from every rank's topk_ids, read with
//        SM loads through the symmetric window (T*k ints per rank: too small to be worth a
//        copy each), and tok_l[(s,t)][j] = the local expert of slot j or -1;
//        local grid barrier; then CTA 0 tells every rank "done reading your data" (flags
//        W .. 2W-1): the copies of the peers' x finished before this kernel started (stream
//        order), and every CTA has finished reading the peers' topk_ids;
//     2. offsets per local expert (exclusive scan over the groups), counts; local grid barrier;
//     3. each CTA scans counts into base[]; items (token, chunk of 32*UNROLL 16-byte vectors):
//        a warp reads the chunk once from the staging slot (or this rank's own x) and stores
//        it into every local expert group that wants the token, at
//        base[l] + off[l][group] + popc(mask[l][group] & lanes below the token);
//     4. CTA 0 waits until every rank has said "done reading": after this kernel nobody reads
//        this rank's x or topk_ids, so the caller may overwrite them.
//   The scalar path (H not a multiple of 8 or a pointer not 16-byte aligned: the validation
//   size) copies one bf16 at a time.
//
// Why it should be fast: against the NCCL reference (85 / 126 / 400 / 711 us at W = 2, T = 16
// / 128 / 1024 / 2048) it has no host sync, no count exchange and no pack/unpack buffers; the
// remote bytes move at the copy engine's rate while no SM is busy, then the scatter is one
// local pass (read the staged rows, write T*k rows: HBM-bound). Decode sizes pay W-1 copy
// launches and three nodes; the SM seed (pull_sm.cu) should win there.
//
// Synchronisation: peers' x are read only by copies enqueued after the start kernel and before
// the scatter kernel, whose CTA 0 signals "done" only after them (stream order) and after every
// CTA has read the peers' topk_ids (local grid barrier); the kernel ends only when every rank
// has signalled. Staging, outputs and the index scratch are written only on this rank, and
// reused by the next call only after this one (stream order): single buffers, no parity. Flags
// hold epochs, st.release.sys / ld.acquire.sys, never reset; every wait traps after 5 s. Both
// kernels take their epochs on the device (kevo_epoch_begin / kevo_epoch_end, channel 0): two
// launches per call on every rank in the same order, so the start kernel's epochs and the
// scatter kernel's agree across ranks launch by launch (each on its own flags), and a call
// replayed from a CUDA graph gets new ones.
// The local grid barriers: atomicInc modulo the grid + an epoch flag, .sys fences; every CTA
// of the scatter kernel is resident (grid <= occupancy x SMs).
//
// kevo:pattern problem=moe_dispatch transport=ce fusion=unfused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=4 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 4

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

constexpr int kWarps = THREADS / 32;
constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int kMaxK = 32;              // slots per token: one lane each
constexpr int kChunkVec = 32 * UNROLL; // 16-byte vectors per copy item
constexpr int kChunkElems = 8 * kChunkVec;
constexpr unsigned kFull = 0xffffffffu;

#define SEED "moe_dispatch/ce"

struct Sync {
    unsigned count[2]; // arrivals at local grid barrier i (wraps modulo the grid)
    unsigned pad_[2];
    uint64_t gen[2]; // epoch of the last completed local grid barrier i
};

struct Args {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS]; // rank s's rows: staging slot (own x for s = r)
    const int *ids[KEVO_MAX_RANKS];         // every rank's topk_ids
    __nv_bfloat16 *recv;                    // this rank's recv_x
    int *counts;                            // this rank's counts
    uint2 *mo;                              // scratch [L][NG]: {mask, offset}
    int *tok_l;                             // scratch [W*T][k]: local expert of slot j or -1
    int *tot;                               // scratch [L]: rows of local expert l
    Sync *sync;
    int64_t T, H;
    int E, k, L, W, rank, Gt, NG, nch;
    int vec; // 16-byte path: H % 8 == 0, x, staging and recv_x 16-byte aligned
    kevo_pads p;
};

struct State {
    int64_t T, H;
    int E, k, L, Gt, NG, nch, grid;
    size_t smem;
    uint2 *mo;
    int *tok_l, *tot;
    Sync *sync;
    __nv_bfloat16 *staging; // W-1 slots of T*H bf16 (symmetric scratch, this rank's copy)
};

// Every CTA of this grid (this rank only) has finished what it did before; its stores are
// visible to every CTA after. Thread 0 of each CTA: fence, atomicInc (wraps to 0 after the last
// arrival, so the counter is ready for the next call); the last one publishes the epoch.
__device__ __forceinline__ void local_grid_barrier(Sync *s, int i, uint64_t epoch)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        const unsigned old = atomicInc(&s->count[i], gridDim.x - 1);
        if (old == gridDim.x - 1) {
            __threadfence_system();
            kevo_store_release_sys(&s->gen[i], epoch);
        } else {
            kevo_wait_flag(&s->gen[i], epoch);
        }
    }
    __syncthreads();
}

// Inclusive warp scan of v.
__device__ __forceinline__ int warp_incl_scan(int v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(kFull, v, o);
        if (lane >= o)
            v += n;
    }
    return v;
}

// Copy item i -> (source rank s, token t, chunk c); tokens interleaved over the sources.
__device__ __forceinline__ void item_of(const Args &a, int64_t i, int *s, int64_t *t, int *c)
{
    *c = (int)(i % a.nch);
    const int64_t u = i / a.nch;
    *s = (int)((a.rank + u % a.W) % a.W);
    *t = u / a.W;
}

__device__ __forceinline__ void load_chunk_vec(const Args &a, int s, int64_t t, int c,
                                               uint4 (&v)[UNROLL])
{
    const int lane = threadIdx.x & 31;
    const uint4 *src = reinterpret_cast<const uint4 *>(a.x[s] + t * a.H);
    const int64_t nvec = a.H >> 3;
    const int64_t v0 = (int64_t)c * kChunkVec + lane;
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
        if (v0 + 32 * u < nvec)
            v[u] = src[v0 + 32 * u];
}

// 1 CTA: the start barrier (flags 0 .. W-1).
__global__ void start_kernel(const __grid_constant__ kevo_pads pads)
{
    const kevo_pads p = kevo_epoch_begin(pads);
    kevo_cta_barrier(p, 0);
    kevo_epoch_end(p);
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    moe_dispatch_scatter(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    extern __shared__ int smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t gwarp = (int64_t)blockIdx.x * kWarps + warp;
    const int64_t nwarps = (int64_t)gridDim.x * kWarps;
    const int L = a.L, k = a.k;
    unsigned *smask = reinterpret_cast<unsigned *>(smem) + warp * (L + 32 * k);
    int *sids = reinterpret_cast<int *>(smask + L);
    int *base_sh = smem + kWarps * (L + 32 * k);

    const int64_t nitems = (int64_t)a.W * a.T * a.nch;

    // 1. masks per (local expert, group) and the local expert of every slot
    for (int64_t gi = gwarp; gi < a.NG; gi += nwarps) {
        const int s = (int)(gi / a.Gt), g = (int)(gi % a.Gt);
        const int64_t t0 = (int64_t)g * 32;
        const int ntok = (int)(a.T - t0 < 32 ? a.T - t0 : 32);
        const int *ids = a.ids[s] + t0 * k;
        for (int l = lane; l < L; l += 32)
            smask[l] = 0;
        const int n = ntok * k;
        for (int i0 = 0; i0 < n; i0 += 32 * 8) {
            int v[8];
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int i = i0 + m * 32 + lane;
                v[m] = i < n ? ids[i] : -1;
            }
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int i = i0 + m * 32 + lane;
                if (i < n)
                    sids[i] = v[m];
            }
        }
        __syncwarp();
        if (lane < ntok) {
            int *out = a.tok_l + ((int64_t)s * a.T + t0 + lane) * k;
            for (int j = 0; j < k; j++) {
                const int id = sids[lane * k + j];
                int l = -1;
                if (id >= 0 && id < a.E && id / L == a.rank) {
                    l = id - a.rank * L;
                    atomicOr(&smask[l], 1u << lane);
                }
                out[j] = l;
            }
        }
        __syncwarp();
        for (int l = lane; l < L; l += 32)
            reinterpret_cast<unsigned *>(a.mo + (int64_t)l * a.NG + gi)[0] = smask[l];
        __syncwarp();
    }

    local_grid_barrier(a.sync, 0, p.epoch);
    // every CTA has read the peers' topk_ids, and the copies of their x are done: tell them
    if (blockIdx.x == 0 && threadIdx.x < (unsigned)a.W)
        kevo_store_release_sys(kevo_peer_pad(p, threadIdx.x) + a.W + a.rank, p.epoch);

    // 2. offsets of each group within each local expert, and the expert's row count
    for (int64_t l = gwarp; l < L; l += nwarps) {
        uint2 *row = a.mo + l * a.NG;
        const int per = (a.NG + 31) / 32;
        const int lo = lane * per < a.NG ? lane * per : a.NG;
        const int hi = lo + per < a.NG ? lo + per : a.NG;
        int sum = 0;
        for (int g = lo; g < hi; g++)
            sum += __popc(__ldcg(row + g).x);
        const int incl = warp_incl_scan(sum);
        const int total = __shfl_sync(kFull, incl, 31);
        int run = incl - sum;
        for (int g = lo; g < hi; g++) {
            const unsigned m = __ldcg(row + g).x;
            row[g] = make_uint2(m, (unsigned)run);
            run += __popc(m);
        }
        if (lane == 0) {
            a.tot[l] = total;
            a.counts[l] = total;
        }
    }

    local_grid_barrier(a.sync, 1, p.epoch);

    // 3. base[l] = rows of the experts before l; then the copy items
    if (warp == 0) {
        int carry = 0;
        for (int l0 = 0; l0 < L; l0 += 32) {
            const int l = l0 + lane;
            const int v = l < L ? __ldcg(a.tot + l) : 0;
            const int incl = warp_incl_scan(v);
            if (l < L)
                base_sh[l] = carry + incl - v;
            carry += __shfl_sync(kFull, incl, 31);
        }
    }
    __syncthreads();

    for (int64_t i = gwarp; i < nitems; i += nwarps) {
        int s, c;
        int64_t t;
        item_of(a, i, &s, &t, &c);
        const int64_t tok = (int64_t)s * a.T + t;
        const int l = lane < k ? __ldcg(a.tok_l + tok * k + lane) : -1;
        const unsigned want = __ballot_sync(kFull, l >= 0);
        if (want == 0)
            continue; // no expert of this rank: nothing to copy
        uint4 v[UNROLL];
        if (a.vec)
            load_chunk_vec(a, s, t, c, v);
        int dest = -1;
        if (l >= 0) {
            const int g = (int)(s * a.Gt + t / 32);
            const uint2 m = __ldcg(a.mo + (int64_t)l * a.NG + g);
            dest = base_sh[l] + (int)m.y + __popc(m.x & ((1u << (t & 31)) - 1u));
        }
        if (a.vec) {
            const int64_t nvec = a.H >> 3;
            const int64_t v0 = (int64_t)c * kChunkVec + lane;
            for (unsigned w = want; w; w &= w - 1) {
                const int d = __shfl_sync(kFull, dest, __ffs(w) - 1);
                uint4 *dst = reinterpret_cast<uint4 *>(a.recv + (int64_t)d * a.H);
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    if (v0 + 32 * u < nvec)
                        dst[v0 + 32 * u] = v[u];
            }
        } else {
            // one bf16 at a time (rows not 16-byte aligned)
            const unsigned short *src = reinterpret_cast<const unsigned short *>(a.x[s] + t * a.H);
            const int64_t e0 = (int64_t)c * kChunkElems + lane;
            unsigned short e[8 * UNROLL];
#pragma unroll
            for (int m = 0; m < 8 * UNROLL; m++)
                e[m] = e0 + 32 * m < a.H ? src[e0 + 32 * m] : (unsigned short)0;
            for (unsigned w = want; w; w &= w - 1) {
                const int d = __shfl_sync(kFull, dest, __ffs(w) - 1);
                unsigned short *dst = reinterpret_cast<unsigned short *>(a.recv + (int64_t)d * a.H);
#pragma unroll
                for (int m = 0; m < 8 * UNROLL; m++)
                    if (e0 + 32 * m < a.H)
                        dst[e0 + 32 * m] = e[m];
            }
        }
    }

    // end: every rank has finished reading this rank's x and topk_ids
    if (blockIdx.x == 0 && threadIdx.x < (unsigned)a.W)
        kevo_wait_flag(p.mine + a.W + threadIdx.x, p.epoch);
    kevo_epoch_end(p);
}

int read_params(const kevo_ctx *ctx, State *st)
{
    const int W = ctx->world;
    const int64_t T = kevo_param(ctx, "T", 0), H = kevo_param(ctx, "H", 0);
    const int64_t E = kevo_param(ctx, "E", 0), k = kevo_param(ctx, "k", 0);
    if (W < 1 || W > KEVO_MAX_RANKS || T < 1 || H < 1 || k < 1 || k > kMaxK || E < k ||
        E % W != 0 || E > (1 << 20) || W * T * k > INT32_MAX / 2) {
        kevo_fail(SEED, "unsupported parameters T=%lld H=%lld E=%lld k=%lld W=%d", (long long)T,
                  (long long)H, (long long)E, (long long)k, W);
        return -1;
    }
    st->T = T;
    st->H = H;
    st->E = (int)E;
    st->k = (int)k;
    st->L = (int)(E / W);
    st->Gt = (int)((T + 31) / 32);
    st->NG = W * st->Gt;
    st->nch = (int)((H + kChunkElems - 1) / kChunkElems);
    return 0;
}

int check_tensors(const kevo_ctx *ctx, const State *st)
{
    if (ctx->n_inputs < 2 || ctx->n_outputs < 2)
        return -1;
    const kevo_tensor *x = &ctx->inputs[0], *ids = &ctx->inputs[1];
    const kevo_tensor *rx = &ctx->outputs[0], *cnt = &ctx->outputs[1];
    const int64_t C = st->k < st->L ? st->k : st->L;
    if (x->dtype != KEVO_BF16 || ids->dtype != KEVO_I32 || rx->dtype != KEVO_BF16 ||
        cnt->dtype != KEVO_I32 || x->numel != st->T * st->H || ids->numel != st->T * st->k ||
        rx->numel != (int64_t)ctx->world * st->T * C * st->H || cnt->numel != st->L)
        return -1;
    return 0;
}

#define CUDA_OK(call)                                                        \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess)                                               \
            return kevo_fail(SEED, "%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, SEED);
    if (!st)
        return 1;
    if (read_params(ctx, st) != 0)
        return 1;
    if (check_tensors(ctx, st) != 0)
        return kevo_fail(SEED, "unexpected tensors");
    const int W = ctx->world;
    if (W > 1) {
        // staging: W-1 slots of T*H bf16, in the symmetric window like the peers' x
        const size_t bytes = (size_t)(W - 1) * st->T * st->H * sizeof(__nv_bfloat16);
        void *local = NULL, *peer[KEVO_MAX_RANKS];
        if (ctx->scratch_alloc(ctx, bytes, &local, peer, NULL) != 0)
            return kevo_fail(SEED, "scratch_alloc of %zu bytes failed (%zu left)", bytes,
                             ctx->scratch_bytes_left);
        st->staging = (__nv_bfloat16 *)local;
    }
    CUDA_OK(cudaMalloc(&st->mo, (size_t)st->L * st->NG * sizeof(uint2)));
    CUDA_OK(cudaMalloc(&st->tok_l, (size_t)W * st->T * st->k * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->tot, (size_t)st->L * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->sync, sizeof(Sync)));
    CUDA_OK(cudaMemsetAsync(st->sync, 0, sizeof(Sync), ctx->stream));
    CUDA_OK(cudaStreamSynchronize(ctx->stream));

    st->smem = ((size_t)kWarps * (st->L + 32 * st->k) + st->L) * sizeof(int);
    if (st->smem > 48 * 1024)
        CUDA_OK(cudaFuncSetAttribute(moe_dispatch_scatter,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)st->smem));
    int per_sm = 0;
    if (kevo_ctas_per_sm(SEED, (const void *)moe_dispatch_scatter, THREADS, st->smem, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    // Same grid on every rank: from the sizes, W, the SM count and the pad only. Enough warps
    // for one copy item each when that fits, and for the index phases.
    int64_t warps = (int64_t)W * st->T * st->nch;
    if (warps < st->NG)
        warps = st->NG;
    if (warps < st->L)
        warps = st->L;
    if (kevo_pads_of(ctx).words < (uint64_t)2 * W) // flags 0 .. 2W-1, and the epoch channels
        return kevo_fail(SEED, "the signal pad is too small");
    st->grid = (int)kevo_clamp_grid((warps + kWarps - 1) / kWarps, (int64_t)per_sm * ctx->sm_count);
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, SEED);
    if (!st)
        return 1;
    if (!st->sync || (ctx->world > 1 && !st->staging) || check_tensors(ctx, st) != 0)
        return kevo_fail(SEED, "unexpected tensors (or kevo_init failed)");
    const int W = ctx->world;
    const kevo_tensor *x = &ctx->inputs[0], *ids = &ctx->inputs[1];
    const kevo_tensor *rx = &ctx->outputs[0], *cnt = &ctx->outputs[1];

    // Tensor pointers change between calls: read them from ctx every time.
    const int r = ctx->rank;
    const int64_t slot = st->T * st->H; // elements per staging slot
    Args a = {};
    int vec = st->H % 8 == 0 && kevo_aligned16(rx->ptr);
    for (int q = 0; q < W; q++) {
        // rank q's rows: slot (q - r - 1) mod W of the staging, this rank's own x for q = r
        a.x[q] = q == r ? (const __nv_bfloat16 *)x->ptr
                        : st->staging + (int64_t)((q - r - 1 + W) % W) * slot;
        a.ids[q] = (const int *)ids->peer[q];
        vec = vec && kevo_aligned16(a.x[q]);
    }
    a.recv = (__nv_bfloat16 *)rx->ptr;
    a.counts = (int *)cnt->ptr;
    a.mo = st->mo;
    a.tok_l = st->tok_l;
    a.tot = st->tot;
    a.sync = st->sync;
    a.T = st->T;
    a.H = st->H;
    a.E = st->E;
    a.k = st->k;
    a.L = st->L;
    a.W = W;
    a.rank = ctx->rank;
    a.Gt = st->Gt;
    a.NG = st->NG;
    a.nch = st->nch;
    a.vec = vec;
    a.p = kevo_pads_of(ctx);

    // start barrier: the peers' x and topk_ids hold this call's values after it
    start_kernel<<<1, 32, 0, ctx->stream>>>(a.p);
    if (kevo_launched(SEED, "start kernel launch") != 0)
        return 1;
    // the peers' whole x, by the copy engines (fixed sizes: capturable)
    for (int i = 1; i < W; i++) {
        const int q = (r + i) % W;
        const cudaError_t e =
            cudaMemcpyAsync((void *)a.x[q], x->peer[q], (size_t)slot * sizeof(__nv_bfloat16),
                            cudaMemcpyDeviceToDevice, ctx->stream);
        if (e != cudaSuccess)
            return kevo_fail(SEED, "cudaMemcpyAsync from rank %d: %s", q, cudaGetErrorString(e));
    }
    moe_dispatch_scatter<<<(unsigned)st->grid, THREADS, st->smem, ctx->stream>>>(a);
    return kevo_launched(SEED, "scatter kernel launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    cudaFree(st->mo);
    cudaFree(st->tok_l);
    cudaFree(st->tot);
    cudaFree(st->sync);
    kevo_state_free(ctx);
}
