// pull_sm.cu — MoE combine in one kernel, no host synchronisation: every rank works out from
// the global routing table (the same on every rank, read locally) where each of its (token,
// slot) rows lies in its owner's expert_out, pulls those rows through the symmetric window with
// 16-byte SM loads, and sums them with its gate weights in fp32.
//
// Notation: rank r (this one), W ranks, L = E/W experts per rank, T tokens per rank, k slots.
// The W*T rows of the table, in (rank s, token t) order, are cut into groups of 32 (Gt =
// ceil(T/32) per rank, NG = W*Gt in all). For every global expert e and group (s, g):
// mask[e][(s,g)] = the 32-bit set of tokens of the group routed to e, off[e][(s,g)] = the
// exclusive prefix sum of popc(mask[e][.]) over the groups, n(e) = its total. With ex[e] the
// exclusive prefix sum of n over all experts and q = e / L the owner,
//   pos(r, t, e) = ex[e] - ex[q*L] + off[e][(r, t/32)] + popc(mask[e][(r, t/32)] & below(t%32))
// (rows of q's experts before e, then the (s', t') before (r, t) routed to e).
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  0. Every CTA announces "entered call e" to CTA b of every rank (the arrival half of the
//     start barrier, slot [0][b][r]); it waits for the peers only in step 3, so the index
//     phases hide the barrier's NVLink round trip. Nothing of a peer is read before the wait.
//  1. Masks (one warp per group of the local table, grid-stride): the warp stages the group's
//     32*k ids in shared memory, each lane sets its token's bit in a shared mask per expert
//     (atomicOr), the warp writes mask[e][group] for every e. Local grid barrier.
//  2. Offsets (one warp per expert e): exclusive scan of popc(mask[e][.]) over the NG groups
//     -> off[e][.], and n(e). Local grid barrier.
//  3. Each CTA scans n into ex[] (shared), then completes the start barrier (waits for CTA b
//     of every rank). Work items are (token t, chunk of 32*UNROLL 16-byte vectors of H): lane
//     j < k computes slot j's owner, position and weight; the warp then pulls the chunk of row
//     j from owner q's expert_out for SLOTS slots at a time (SLOTS*UNROLL vectors per lane in
//     flight), accumulates w_j * row_j in fp32 in slot order j = 0..k-1 (fmaf, as the
//     reference: the same bits), rounds once and stores y. When H is not a multiple of 8 or a
//     pointer is not 16-byte aligned (the validation size, H = 203) the same items run one bf16
//     at a time.
//  4. End barrier (kevo_cta_barrier phase 1): a CTA arrives after all of its loads; once CTA b
//     of every rank has passed, no peer reads this rank's expert_out any more.
//
// Why it should be fast: no host round trip (the NCCL reference takes 60 / 103 / 394 / 713 us
// at W = 2 for T = 16 / 128 / 1024 / 2048), no gather into a staging buffer, no separate reduce
// pass: one launch, the index work in L2 overlapping the start barrier, and the rows pulled
// straight into registers and reduced there. Decode: every warp has its item's k rows in
// flight at once (the grid gives one item per warp when it fits), so the data costs about one
// NVLink round trip. Prefill: bound by NVLink loads of the k(W-1)/W remote rows per token
// (every SM pulling from every owner at once); a pre-combining variant would move fewer bytes.
//
// Synchronisation: peers' expert_out are read only between the start barrier (whose wait comes
// right before the copy loop) and the end barrier; y and the scratch are written only on this
// rank. The local grid barriers (atomicInc modulo the grid + an epoch flag, .sys fences) order
// the index phases among this rank's CTAs, all resident at once (grid <= occupancy x SMs);
// tables written by other CTAs are read with ld.global.cg. Pad flags hold epochs,
// st.release.sys / ld.acquire.sys, never reset; waits give up after 5 s. The epoch (pad flags
// and local grid barriers alike) is the device's: kevo_epoch_begin / kevo_epoch_end on channel
// 0, one launch per call on every rank, so a call replayed from a CUDA graph gets a new one.
//
// kevo:pattern problem=moe_combine transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=1 values=1,2,4
// kevo:param SLOTS default=8 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 1
#define SLOTS 8

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
constexpr int kChunkVec = 32 * UNROLL; // 16-byte vectors per item
constexpr int kChunkElems = 8 * kChunkVec;
constexpr unsigned kFull = 0xffffffffu;

#define SEED "moe_combine/pull_sm"

struct Sync {
    unsigned count[2]; // arrivals at local grid barrier i (wraps modulo the grid)
    unsigned pad_[2];
    uint64_t gen[2]; // epoch of the last completed local grid barrier i
};

struct Args {
    const __nv_bfloat16 *eo[KEVO_MAX_RANKS]; // every rank's expert_out
    const int *ids;                          // the global routing table [W*T][k] (local copy)
    const float *w;                          // this rank's weights [T][k]
    __nv_bfloat16 *y;                        // this rank's y [T][H]
    uint2 *mo;                               // scratch [E][NG]: {mask, offset}
    int *tot;                                // scratch [E]: n(e)
    Sync *sync;
    int64_t T, H;
    int E, k, L, W, rank, Gt, NG, nch;
    int vec; // 16-byte path: H % 8 == 0, every expert_out and y 16-byte aligned
    kevo_pads p;
};

struct State {
    int64_t T, H;
    int E, k, L, Gt, NG, nch, grid;
    size_t smem;
    uint2 *mo;
    int *tot;
    Sync *sync;
};

// Every CTA of this grid (this rank only) has finished what it did before; its stores are
// visible to every CTA after. The counter wraps to 0 after the last arrival (atomicInc), the
// flag holds the epoch: nothing is reset.
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

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    moe_combine_pull(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    extern __shared__ int smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t gwarp = (int64_t)blockIdx.x * kWarps + warp;
    const int64_t nwarps = (int64_t)gridDim.x * kWarps;
    const int E = a.E, k = a.k;
    unsigned *smask = reinterpret_cast<unsigned *>(smem) + warp * (E + 32 * k);
    int *sids = reinterpret_cast<int *>(smask + E);
    int *ex = smem + kWarps * (E + 32 * k);

    // 0. start barrier, arrival half: slot [phase 0][cta][rank] of every rank's pad
    const uint64_t start_slot = (uint64_t)blockIdx.x * a.W;
    if (threadIdx.x < (unsigned)a.W)
        kevo_store_release_sys(kevo_peer_pad(p, threadIdx.x) + start_slot + a.rank, p.epoch);

    // 1. masks per (expert, group) of the global table (local reads only)
    for (int64_t gi = gwarp; gi < a.NG; gi += nwarps) {
        const int s = (int)(gi / a.Gt), g = (int)(gi % a.Gt);
        const int64_t t0 = (int64_t)g * 32;
        const int ntok = (int)(a.T - t0 < 32 ? a.T - t0 : 32);
        const int *ids = a.ids + ((int64_t)s * a.T + t0) * k;
        for (int e = lane; e < E; e += 32)
            smask[e] = 0;
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
        if (lane < ntok)
            for (int j = 0; j < k; j++) {
                const int id = sids[lane * k + j];
                if (id >= 0 && id < E)
                    atomicOr(&smask[id], 1u << lane);
            }
        __syncwarp();
        for (int e = lane; e < E; e += 32)
            reinterpret_cast<unsigned *>(a.mo + (int64_t)e * a.NG + gi)[0] = smask[e];
        __syncwarp();
    }

    local_grid_barrier(a.sync, 0, p.epoch);

    // 2. offsets of each group within each expert, and the expert's row count n(e)
    for (int64_t e = gwarp; e < E; e += nwarps) {
        uint2 *row = a.mo + e * a.NG;
        const int per = (a.NG + 31) / 32;
        const int lo = lane * per < a.NG ? lane * per : a.NG;
        const int hi = lo + per < a.NG ? lo + per : a.NG;
        int sum = 0;
        for (int g = lo; g < hi; g++)
            sum += __popc(__ldcg(row + g).x);
        const int incl = warp_incl_scan(sum);
        int run = incl - sum;
        for (int g = lo; g < hi; g++) {
            const unsigned m = __ldcg(row + g).x;
            row[g] = make_uint2(m, (unsigned)run);
            run += __popc(m);
        }
        if (lane == 31)
            a.tot[e] = incl;
    }

    local_grid_barrier(a.sync, 1, p.epoch);

    // 3. ex[e] = rows of all experts before e (global order)
    if (warp == 0) {
        int carry = 0;
        for (int e0 = 0; e0 < E; e0 += 32) {
            const int e = e0 + lane;
            const int v = e < E ? __ldcg(a.tot + e) : 0;
            const int incl = warp_incl_scan(v);
            if (e < E)
                ex[e] = carry + incl - v;
            carry += __shfl_sync(kFull, incl, 31);
        }
    }
    // start barrier, waiting half: every rank's expert_out holds this call's values
    if (threadIdx.x < (unsigned)a.W)
        kevo_wait_flag(p.mine + start_slot + threadIdx.x, p.epoch);
    __syncthreads();

    const int64_t nitems = a.T * a.nch;
    for (int64_t i = gwarp; i < nitems; i += nwarps) {
        const int64_t t = i / a.nch;
        const int c = (int)(i % a.nch);
        // lane j < k: where slot j's row is, and its weight
        unsigned long long src = 0;
        float wj = 0.f;
        if (lane < k) {
            const int e = a.ids[((int64_t)a.rank * a.T + t) * k + lane];
            const int q = e / a.L;
            const int g = (int)(a.rank * a.Gt + t / 32);
            const uint2 m = __ldcg(a.mo + (int64_t)e * a.NG + g);
            const int64_t pos =
                ex[e] - ex[q * a.L] + (int)m.y + __popc(m.x & ((1u << (t & 31)) - 1u));
            src = (unsigned long long)(a.eo[q] + pos * a.H);
            wj = a.w[t * k + lane];
        }
        if (a.vec) {
            const int64_t nvec = a.H >> 3;
            const int64_t v0 = (int64_t)c * kChunkVec + lane;
            float acc[UNROLL][8];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int h = 0; h < 8; h++)
                    acc[u][h] = 0.f;
            for (int j0 = 0; j0 < k; j0 += SLOTS) {
                uint4 v[SLOTS][UNROLL];
                float wv[SLOTS];
#pragma unroll
                for (int jj = 0; jj < SLOTS; jj++) {
                    const int j = j0 + jj < k ? j0 + jj : k - 1;
                    const uint4 *row = reinterpret_cast<const uint4 *>(__shfl_sync(kFull, src, j));
                    wv[jj] = __shfl_sync(kFull, wj, j);
#pragma unroll
                    for (int u = 0; u < UNROLL; u++)
                        if (j0 + jj < k && v0 + 32 * u < nvec)
                            v[jj][u] = __ldcg(row + v0 + 32 * u); // LDG, not generic
                }
#pragma unroll
                for (int jj = 0; jj < SLOTS; jj++) {
                    if (j0 + jj < k) {
#pragma unroll
                        for (int u = 0; u < UNROLL; u++) {
                            if (v0 + 32 * u < nvec) {
                                const kevo_f32x8 f = kevo_bf16x8_to_f32(v[jj][u]);
#pragma unroll
                                for (int h = 0; h < 8; h++)
                                    acc[u][h] = fmaf(wv[jj], f.v[h], acc[u][h]);
                            }
                        }
                    }
                }
            }
            uint4 *dst = reinterpret_cast<uint4 *>(a.y + t * a.H);
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                if (v0 + 32 * u < nvec) {
                    kevo_f32x8 o;
#pragma unroll
                    for (int h = 0; h < 8; h++)
                        o.v[h] = acc[u][h];
                    dst[v0 + 32 * u] = kevo_f32x8_to_bf16(o);
                }
            }
        } else {
            // one bf16 at a time (rows not 16-byte aligned)
            const int64_t e0 = (int64_t)c * kChunkElems + lane;
            float acc[8 * UNROLL];
#pragma unroll
            for (int m = 0; m < 8 * UNROLL; m++)
                acc[m] = 0.f;
            for (int j = 0; j < k; j++) {
                const unsigned short *row =
                    reinterpret_cast<const unsigned short *>(__shfl_sync(kFull, src, j));
                const float wq = __shfl_sync(kFull, wj, j);
#pragma unroll
                for (int m = 0; m < 8 * UNROLL; m++)
                    if (e0 + 32 * m < a.H) {
                        const unsigned b = __ldcg(row + e0 + 32 * m); // bf16 bits
                        acc[m] = fmaf(wq, __uint_as_float(b << 16), acc[m]);
                    }
            }
#pragma unroll
            for (int m = 0; m < 8 * UNROLL; m++)
                if (e0 + 32 * m < a.H)
                    a.y[t * a.H + e0 + 32 * m] = __float2bfloat16_rn(acc[m]);
        }
    }

    kevo_cta_barrier(p, 1); // end: no peer reads this rank's expert_out after this
    kevo_epoch_end(p);
}

int read_params(const kevo_ctx *ctx, State *st)
{
    const int W = ctx->world;
    const int64_t T = kevo_param(ctx, "T", 0), H = kevo_param(ctx, "H", 0);
    const int64_t E = kevo_param(ctx, "E", 0), k = kevo_param(ctx, "k", 0);
    if (W < 1 || W > KEVO_MAX_RANKS || T < 1 || H < 1 || k < 1 || k > kMaxK || E < k ||
        E % W != 0 || E > 4096 || W * T * k > INT32_MAX / 2) {
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
    if (ctx->n_inputs < 3 || ctx->n_outputs < 1)
        return -1;
    const kevo_tensor *xo = &ctx->inputs[0], *ids = &ctx->inputs[1], *wt = &ctx->inputs[2];
    const kevo_tensor *y = &ctx->outputs[0];
    const int W = ctx->world;
    const int64_t C = st->k < st->L ? st->k : st->L;
    if (xo->dtype != KEVO_BF16 || ids->dtype != KEVO_I32 || wt->dtype != KEVO_F32 ||
        y->dtype != KEVO_BF16 || xo->numel != (int64_t)W * st->T * C * st->H ||
        ids->numel != (int64_t)W * st->T * st->k || wt->numel != st->T * st->k ||
        y->numel != st->T * st->H)
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
    CUDA_OK(cudaMalloc(&st->mo, (size_t)st->E * st->NG * sizeof(uint2)));
    CUDA_OK(cudaMalloc(&st->tot, (size_t)st->E * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->sync, sizeof(Sync)));
    CUDA_OK(cudaMemsetAsync(st->sync, 0, sizeof(Sync), ctx->stream));
    CUDA_OK(cudaStreamSynchronize(ctx->stream));

    st->smem = ((size_t)kWarps * (st->E + 32 * st->k) + st->E) * sizeof(int);
    if (st->smem > 48 * 1024)
        CUDA_OK(cudaFuncSetAttribute(moe_combine_pull, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)st->smem));
    int per_sm = 0;
    if (kevo_ctas_per_sm(SEED, (const void *)moe_combine_pull, THREADS, st->smem, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    // Same grid on every rank (sizes, W, SM count and pad only): one item per warp when that
    // fits, and enough warps for the index phases.
    int64_t warps = st->T * st->nch;
    if (warps < st->NG)
        warps = st->NG;
    if (warps < st->E)
        warps = st->E;
    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(SEED, "the signal pad is too small");
    const int64_t most = (int64_t)per_sm * ctx->sm_count;
    st->grid =
        (int)kevo_clamp_grid((warps + kWarps - 1) / kWarps, most < pad_limit ? most : pad_limit);
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, SEED);
    if (!st)
        return 1;
    if (!st->sync || check_tensors(ctx, st) != 0)
        return kevo_fail(SEED, "unexpected tensors (or kevo_init failed)");
    const int W = ctx->world;
    const kevo_tensor *xo = &ctx->inputs[0], *ids = &ctx->inputs[1], *wt = &ctx->inputs[2];
    const kevo_tensor *y = &ctx->outputs[0];

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    int vec = st->H % 8 == 0 && kevo_aligned16(y->ptr);
    for (int q = 0; q < W; q++) {
        a.eo[q] = (const __nv_bfloat16 *)xo->peer[q];
        vec = vec && kevo_aligned16(xo->peer[q]);
    }
    a.ids = (const int *)ids->ptr;
    a.w = (const float *)wt->ptr;
    a.y = (__nv_bfloat16 *)y->ptr;
    a.mo = st->mo;
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

    moe_combine_pull<<<(unsigned)st->grid, THREADS, st->smem, ctx->stream>>>(a);
    return kevo_launched(SEED, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    cudaFree(st->mo);
    cudaFree(st->tot);
    cudaFree(st->sync);
    kevo_state_free(ctx);
}
