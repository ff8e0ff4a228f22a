// precombine_push_sm.cu — MoE combine in one kernel, no host synchronisation, pre-combining at
// the owner: each rank sums, for every token of every rank, the weighted outputs of its own
// experts for that token into one bf16 partial (fp32 accumulation, one rounding) and pushes
// the partial with 16-byte SM stores into the token's rank; each rank then adds the partials
// it received. One row per (token, owner) crosses NVLink instead of one per (token, expert):
// 0.99 instead of 4 rows per token at W = 2, 4.6 instead of 7 at W = 8.
//
// Notation: rank r (this one), W ranks, L = E/W experts per rank, T tokens per rank, k slots.
// The W*T rows of the global routing table (the same on every rank, read locally), in
// (rank s, token t) order, are cut into groups of 32 (Gt = ceil(T/32) per rank, NG = W*Gt).
// For every expert e and group: mask[e][group] = the tokens of the group routed to e,
// off[e][group] = the exclusive prefix sum of popc(mask[e][.]) over the groups, n(e) = its
// total; ex[e] = the exclusive prefix sum of n over all experts. For e owned by q = e / L,
//   pos(s, t, e) = ex[e] - ex[q*L] + off[e][(s, t/32)] + popc(mask[e][(s, t/32)] & below(t%32)).
// recv (symmetric scratch, [T][W][H] bf16 on every rank): recv_s[t][q] is owner q's partial
// for token t of rank s.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  0. Arrival half of the start barrier (slot [0][b][r] of every rank's pad); the wait comes
//     after the index phases, before anything of a peer is touched.
//  1. Masks (one warp per group) and 2. offsets (one warp per expert), each followed by a
//     local grid barrier, as in pull_sm.cu; then every CTA scans n into ex[] (shared).
//  3. Wait for the start barrier: every rank has entered this call (its weights hold this
//     call's values, and it has finished the previous call, so nobody still reads its recv).
//  4. Pre-combine and push. Items are (token (s, t), chunk of 32*UNROLL vectors), sources
//     interleaved (item u -> s = (r + u) mod W) so that every peer receives at once. Lanes
//     j < k find the slots of (s, t) whose expert this rank owns (if none: skip), their rows
//     in this rank's expert_out and their weights (loaded from rank s's weights, in flight
//     with the row loads); the warp accumulates w_j * row_j in fp32 in slot order, SLOTS rows
//     at a time, rounds once and stores the chunk into recv_s[t][r] (a peer store; local when
//     s = r).
//  5. Mid barrier: a local grid barrier (every CTA of this rank has pushed; .sys fences), then
//     kevo_cta_barrier phase 1 with every rank: once CTA b has passed it, every CTA of every
//     rank has finished step 4, so all partials meant for this rank are in its recv, and no
//     peer reads this rank's weights any more.
//  6. Sum: items (token t, chunk); the owners holding t's experts are read from the table
//     (the OR over the slots of 1 << owner); their partials recv_r[t][q] are added in owner
//     order in fp32 (local L2/HBM reads), rounded once, stored to y.
// No end barrier is needed: after step 5 nobody touches this rank's inputs, and a peer writes
// this rank's recv again only after the start barrier of the next call, which this rank
// reaches only once this kernel has finished reading recv.
//
// Why it should be fast: besides no host sync, no staging and one launch (the NCCL reference
// takes 60 / 103 / 394 / 713 us at W = 2, T = 16 / 128 / 1024 / 2048), it moves the fewest
// NVLink bytes: at W = 2 about T rows each way instead of 4T (the pull seed is NVLink-bound at
// ~4T rows), so prefill becomes bound by this rank's HBM reads of its T*k expert rows
// (~230 MB at T = 2048), with the pushes overlapping them. At decode sizes it pays one more
// barrier round trip than the pull seed.
//
// Synchronisation: peers' weights are read and peers' recv written only between the start
// barrier and the mid barrier; recv is read by its owner only after the mid barrier; the local
// grid barriers (atomicInc modulo the grid + an epoch flag, .sys fences) order the phases
// among this rank's CTAs (all resident: grid <= occupancy x SMs); data written by other CTAs or
// other GPUs is read with ld.global.cg. Pad flags hold epochs, st.release.sys /
// ld.acquire.sys, never reset; every wait gives up after 5 s with __trap(). The epoch (pad
// flags and local grid barriers alike) is the device's: kevo_epoch_begin / kevo_epoch_end on
// channel 0, one launch per call on every rank, so a call replayed from a CUDA graph gets a new
// one; recv is a single buffer, guarded by the start barrier as described above.
// Rounding: one bf16 rounding per owner partial, which the problem's tolerance admits.
//
// kevo:pattern problem=moe_combine transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=2 values=1,2
// kevo:param SLOTS default=4 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 2
#define SLOTS 4

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

#define SEED "moe_combine/precombine_push_sm"

struct Sync {
    unsigned count[3]; // arrivals at local grid barrier i (wraps modulo the grid)
    unsigned pad_;
    uint64_t gen[3]; // epoch of the last completed local grid barrier i
};

struct Args {
    const __nv_bfloat16 *eo;             // this rank's expert_out
    const int *ids;                      // the global routing table [W*T][k] (local copy)
    const float *w[KEVO_MAX_RANKS];      // every rank's weights [T][k]
    __nv_bfloat16 *recv[KEVO_MAX_RANKS]; // every rank's recv [T][W][H] (symmetric scratch)
    __nv_bfloat16 *y;                    // this rank's y [T][H]
    uint2 *mo;                           // scratch [E][NG]: {mask, offset}
    int *tot;                            // scratch [E]: n(e)
    Sync *sync;
    int64_t T, H;
    int E, k, L, W, rank, Gt, NG, nch;
    int vec; // 16-byte path: H % 8 == 0, expert_out, every recv and y 16-byte aligned
    kevo_pads p;
};

struct State {
    int64_t T, H;
    int E, k, L, Gt, NG, nch, grid;
    size_t smem;
    uint2 *mo;
    int *tot;
    Sync *sync;
    void *recv_peer[KEVO_MAX_RANKS]; // symmetric scratch: fixed for the context
};

// Every CTA of this grid (this rank only) has finished what it did before; its stores (to
// this GPU or a peer) are ordered before whatever any CTA does after. The counter wraps to 0
// after the last arrival (atomicInc), the flag holds the epoch: nothing is reset.
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

// acc[u] += w * 8 bf16 of v[u] (fp32)
__device__ __forceinline__ void fma_rows(float (&acc)[UNROLL][8], const uint4 (&v)[UNROLL], float w,
                                         int64_t v0, int64_t nvec)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        if (v0 + 32 * u < nvec) {
            const kevo_f32x8 f = kevo_bf16x8_to_f32(v[u]);
#pragma unroll
            for (int h = 0; h < 8; h++)
                acc[u][h] = fmaf(w, f.v[h], acc[u][h]);
        }
    }
}

__device__ __forceinline__ void store_rows(__nv_bfloat16 *row, const float (&acc)[UNROLL][8],
                                           int64_t v0, int64_t nvec)
{
    uint4 *dst = reinterpret_cast<uint4 *>(row);
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
}

// The weighted sum over the lanes set in `rows` (in lane order) of the chunk of row src (lane
// j's pointer) times wj (lane j's weight), rounded once, stored at dst. Warp-uniform `rows`.
// Rows are loaded with ld.global.cg: through L2 only (recv is written by other GPUs during
// the kernel), and as global loads (the pointers come from shuffles: plain C++ loads would be
// generic ones).
__device__ __forceinline__ void weighted_chunk(const Args &a, unsigned rows, unsigned long long src,
                                               float wj, int c, __nv_bfloat16 *dst)
{
    const int lane = threadIdx.x & 31;
    if (a.vec) {
        const int64_t nvec = a.H >> 3;
        const int64_t v0 = (int64_t)c * kChunkVec + lane;
        float acc[UNROLL][8];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int h = 0; h < 8; h++)
                acc[u][h] = 0.f;
        for (unsigned rem = rows; rem;) {
            uint4 v[SLOTS][UNROLL];
            float wv[SLOTS];
            bool ok[SLOTS];
#pragma unroll
            for (int jj = 0; jj < SLOTS; jj++) {
                ok[jj] = rem != 0;
                const int j = ok[jj] ? __ffs(rem) - 1 : 0;
                rem &= rem - 1;
                const uint4 *row = reinterpret_cast<const uint4 *>(__shfl_sync(kFull, src, j));
                wv[jj] = __shfl_sync(kFull, wj, j);
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    if (ok[jj] && v0 + 32 * u < nvec)
                        v[jj][u] = __ldcg(row + v0 + 32 * u);
            }
#pragma unroll
            for (int jj = 0; jj < SLOTS; jj++)
                if (ok[jj])
                    fma_rows(acc, v[jj], wv[jj], v0, nvec);
        }
        store_rows(dst, acc, v0, nvec);
    } else {
        // one bf16 at a time (rows not 16-byte aligned)
        const int64_t e0 = (int64_t)c * kChunkElems + lane;
        float acc[8 * UNROLL];
#pragma unroll
        for (int m = 0; m < 8 * UNROLL; m++)
            acc[m] = 0.f;
        for (unsigned rem = rows; rem; rem &= rem - 1) {
            const int j = __ffs(rem) - 1;
            const unsigned short *row =
                reinterpret_cast<const unsigned short *>(__shfl_sync(kFull, src, j));
            const float wq = __shfl_sync(kFull, wj, j);
#pragma unroll
            for (int m = 0; m < 8 * UNROLL; m++) {
                if (e0 + 32 * m < a.H) {
                    const unsigned short b = __ldcg(row + e0 + 32 * m);
                    acc[m] = fmaf(wq, __uint_as_float((unsigned)b << 16), acc[m]);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < 8 * UNROLL; m++)
            if (e0 + 32 * m < a.H)
                dst[e0 + 32 * m] = __float2bfloat16_rn(acc[m]);
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    moe_combine_precombine(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    extern __shared__ int smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t gwarp = (int64_t)blockIdx.x * kWarps + warp;
    const int64_t nwarps = (int64_t)gridDim.x * kWarps;
    const int E = a.E, k = a.k, W = a.W, r = a.rank;
    unsigned *smask = reinterpret_cast<unsigned *>(smem) + warp * (E + 32 * k);
    int *sids = reinterpret_cast<int *>(smask + E);
    int *ex = smem + kWarps * (E + 32 * k);

    // 0. start barrier, arrival half: slot [phase 0][cta][rank] of every rank's pad
    const uint64_t start_slot = (uint64_t)blockIdx.x * W;
    if (threadIdx.x < (unsigned)W)
        kevo_store_release_sys(kevo_peer_pad(p, threadIdx.x) + start_slot + r, p.epoch);

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

    // 2. offsets of each group within each expert, and n(e)
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
    // 3. start barrier, waiting half
    if (threadIdx.x < (unsigned)W)
        kevo_wait_flag(p.mine + start_slot + threadIdx.x, p.epoch);
    __syncthreads();

    // 4. pre-combine this rank's experts' rows for every token of every rank, push the partial
    const int64_t nA = (int64_t)W * a.T * a.nch;
    for (int64_t i = gwarp; i < nA; i += nwarps) {
        const int c = (int)(i % a.nch);
        const int64_t u = i / a.nch;
        const int s = (int)((r + u % W) % W);
        const int64_t t = u / W;
        bool mine = false;
        unsigned long long src = 0;
        float wj = 0.f;
        if (lane < k) {
            const int e = a.ids[((int64_t)s * a.T + t) * k + lane];
            mine = e >= r * a.L && e < (r + 1) * a.L;
            if (mine) {
                wj = a.w[s][t * k + lane]; // rank s's weight, in flight with the rows
                const int g = (int)(s * a.Gt + t / 32);
                const uint2 m = __ldcg(a.mo + (int64_t)e * a.NG + g);
                const int64_t pos =
                    ex[e] - ex[r * a.L] + (int)m.y + __popc(m.x & ((1u << (t & 31)) - 1u));
                src = (unsigned long long)(a.eo + pos * a.H);
            }
        }
        const unsigned rows = __ballot_sync(kFull, mine);
        if (rows == 0)
            continue; // no expert of this rank for this token
        weighted_chunk(a, rows, src, wj, c, a.recv[s] + (t * W + r) * a.H);
    }

    // 5. mid barrier: every rank's partials for this rank are in place
    local_grid_barrier(a.sync, 2, p.epoch);
    kevo_cta_barrier(p, 1);

    // 6. y[t] = sum over the owners of t's experts of their partials (fp32, owner order)
    const int64_t nB = a.T * a.nch;
    for (int64_t i = gwarp; i < nB; i += nwarps) {
        const int64_t t = i / a.nch;
        const int c = (int)(i % a.nch);
        unsigned bit = 0;
        if (lane < k) {
            const int e = a.ids[((int64_t)r * a.T + t) * k + lane];
            if (e >= 0 && e < E)
                bit = 1u << (e / a.L);
        }
        const unsigned owners = __reduce_or_sync(kFull, bit);
        // lane q < W: the partial of owner q, weight 1
        const unsigned long long src =
            lane < W ? (unsigned long long)(a.recv[r] + (t * W + lane) * a.H) : 0ull;
        weighted_chunk(a, owners, src, 1.f, c, a.y + t * a.H);
    }
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
    const int W = ctx->world;
    // recv: [T][W][H] bf16 on every rank, in the symmetric window (peers store into it)
    const size_t recv_bytes = (size_t)st->T * W * st->H * sizeof(__nv_bfloat16);
    void *local = NULL;
    if (ctx->scratch_alloc(ctx, recv_bytes, &local, st->recv_peer, NULL) != 0)
        return kevo_fail(SEED, "scratch_alloc of %zu bytes failed (%zu left)", recv_bytes,
                         ctx->scratch_bytes_left);
    CUDA_OK(cudaMalloc(&st->mo, (size_t)st->E * st->NG * sizeof(uint2)));
    CUDA_OK(cudaMalloc(&st->tot, (size_t)st->E * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->sync, sizeof(Sync)));
    CUDA_OK(cudaMemsetAsync(st->sync, 0, sizeof(Sync), ctx->stream));
    CUDA_OK(cudaStreamSynchronize(ctx->stream));

    st->smem = ((size_t)kWarps * (st->E + 32 * st->k) + st->E) * sizeof(int);
    if (st->smem > 48 * 1024)
        CUDA_OK(cudaFuncSetAttribute(moe_combine_precombine,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)st->smem));
    int per_sm = 0;
    if (kevo_ctas_per_sm(SEED, (const void *)moe_combine_precombine, THREADS, st->smem, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    // Same grid on every rank (sizes, W, SM count and pad only): one pre-combine item per warp
    // when that fits, and enough warps for the index phases.
    int64_t warps = (int64_t)W * st->T * st->nch;
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
    int vec = st->H % 8 == 0 && kevo_aligned16(y->ptr) && kevo_aligned16(xo->ptr);
    for (int q = 0; q < W; q++) {
        a.w[q] = (const float *)wt->peer[q];
        a.recv[q] = (__nv_bfloat16 *)st->recv_peer[q];
        vec = vec && kevo_aligned16(st->recv_peer[q]);
    }
    a.eo = (const __nv_bfloat16 *)xo->ptr;
    a.ids = (const int *)ids->ptr;
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

    moe_combine_precombine<<<(unsigned)st->grid, THREADS, st->smem, ctx->stream>>>(a);
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
