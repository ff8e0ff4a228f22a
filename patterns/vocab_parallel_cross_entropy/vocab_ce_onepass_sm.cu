// vocab_ce_onepass_sm.cu — vocabulary-parallel cross-entropy in one kernel and one pass over
// the logits: online softmax per (row, chunk), the fp32 partials pushed into every rank's
// symmetric scratch, one flag per CTA, then every rank combines all rows itself.
//
// What one call does (one kernel on ctx->stream, same grid on every rank):
//  1. Work units. Row t of this rank's logits [T, V/W] is cut into SPLIT chunks of CH columns
//     (CH a multiple of 8); unit u = t*SPLIT + c. SPLIT = max(1, grid / T), so decode-sized T
//     still spreads over the whole GPU, and a large T gets whole rows per unit. CTA b owns the
//     units [b*U, (b+1)*U) (U = ceil(T*SPLIT / grid_max)).
//  2. Per unit, the CTA reads its columns once (16-byte loads, UNROLL in flight per thread,
//     a scalar head and tail where the row does not start 16-byte aligned, as in the
//     validation size), keeps a per-thread online softmax (m, s) in fp32 (one rescale per
//     UNROLL*8 values, __expf), and reduces it over the CTA. The target logit is taken if
//     this rank holds column targets[t] and it lies in this chunk (by the thread that loaded
//     it, after the stream: no dependent load delays the loop), else 0 (exactly one unit of
//     all ranks holds it, so summing the g's is exact).
//  3. Thread q < W pushes the unit's (m, s, g) as one float4 into rank q's scratch, slot
//     [parity][t][this rank][c]. After its last unit, thread q sets flag b*W + rank of rank
//     q's signal pad to the epoch (st.release.sys, kevo_signal: the same thread made the
//     pushes, so they are ordered before the flag).
//  4. CTA b combines the rows whose first unit it owns: it waits for the flags of the CTAs
//     that produced those rows (the same CTA numbers on every rank: same grid), on every rank,
//     then one warp per row merges the W*SPLIT partials (max, rescaled sum, summed g) and
//     writes loss[t] = log(S) + M - g. Every rank does this for every row.
//
// Why it should be fast: the reference reads the logits twice and makes two all-reduces and
// three launches (34.9 us at T = 16, W = 2). Here the logits are read once (HBM-bound:
// 2*T*V/W bytes), and the exchange is W float4 stores per unit plus one flag round trip,
// hidden behind other CTAs' reading at large T. T = 16: about one 16-byte load per thread,
// then ~2-3 us of exchange; T = 2048: ~250 MiB read at HBM speed (~70 us at W = 2).
//
// Synchronisation: no peer's input is read (only this rank's logits and targets), so no start
// or end barrier: a late peer only delays the flags this rank waits for. Partials live in
// scratch slot parity = epoch & 1: a rank writes parity p in launch e+2 only after finishing
// launch e+1, which needed every peer's launch-(e+1) flags, set by kernels that started after
// the peers' launch-e kernels (which read parity p) had completed. The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end on channel 0, one launch per call on every rank): it
// advances with every executed launch, a call replayed from a CUDA graph included, so two
// consecutive launches always have opposite parities. Flags hold epochs, never reset; every
// wait is bounded (5 s, then __trap). Slots are read with ld.global.cg (L2) after the acquire.
//
// kevo:pattern problem=vocab_parallel_cross_entropy transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=512 values=256,512,1024
// kevo:param UNROLL default=4 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 512
#define UNROLL 4

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kMinBlocks = CTAS_PER_SM * THREADS <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int kWarps = THREADS / 32;
constexpr int kMinChunk = 256;             // columns: smaller chunks only add partials
constexpr uint32_t kNegInf2 = 0xff80ff80u; // two bf16 -inf

struct Args {
    const __nv_bfloat16 *logits;   // [T, n], this rank
    const int32_t *targets;        // [T]
    float *loss;                   // [T]
    float4 *slots[KEVO_MAX_RANKS]; // every rank's scratch: [2][T][W][SPLIT]
    int64_t n;                     // columns of this rank (V/W)
    int64_t lo;                    // first global column of this rank
    int64_t chunk;                 // columns per unit (multiple of 8)
    uint32_t T, split, U, units;
    kevo_pads p;
};

struct State {
    int max_grid;     // co-resident CTAs, bounded by the pad
    int64_t T, split; // the scratch was sized for these
    float4 *slots[KEVO_MAX_RANKS];
};

struct MS {
    float m, s;
};

__device__ __forceinline__ MS merge(MS a, MS b)
{
    const float M = fmaxf(a.m, b.m);
    if (M == -INFINITY)
        return {M, 0.0f};
    return {M, a.s * __expf(a.m - M) + b.s * __expf(b.m - M)};
}

// Folds k values into the running (m, s).
template <int K> __device__ __forceinline__ void fold(MS &r, const float (&v)[K])
{
    float mx = v[0];
#pragma unroll
    for (int i = 1; i < K; i++)
        mx = fmaxf(mx, v[i]);
    if (mx > r.m) {
        r.s *= __expf(r.m - mx); // r.m = -inf gives 0 * 0
        r.m = mx;
    }
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < K; i++)
        acc += __expf(v[i] - r.m);
    r.s += acc;
}

__device__ __forceinline__ MS warp_merge(MS r)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MS other;
        other.m = __shfl_xor_sync(0xffffffffu, r.m, o);
        other.s = __shfl_xor_sync(0xffffffffu, r.s, o);
        r = merge(r, other);
    }
    return r;
}

// (m, s) of columns [c0, c1) of one row, reduced over the CTA; valid in thread 0. When the
// target column tcol lies in [c0, c1), the thread that loaded it re-reads it (an L1 hit) into
// *gsm, visible to thread 0 on return: no dependent load in front of the streaming loop.
__device__ MS chunk_ms(const __nv_bfloat16 *row, int64_t c0, int64_t c1, int64_t tcol, MS *part,
                       float *gsm)
{
    MS r = {-INFINITY, 0.0f};
    if (c1 > c0) {
        const __nv_bfloat16 *p = row + c0;
        const int64_t len = c1 - c0;
        int64_t head = (int64_t)(((16u - ((uintptr_t)p & 15u)) & 15u) >> 1); // to 16 bytes
        if (head > len)
            head = len;
        const int64_t nvec = (len - head) >> 3;
        const uint4 *v = reinterpret_cast<const uint4 *>(p + head);
        // UNROLL loads in flight per thread; the slots past the end read as -inf (exp 0).
        // The first slot of a batch is always inside, so the running max stays finite.
        for (int64_t i = threadIdx.x; i < nvec; i += (int64_t)UNROLL * THREADS) {
            uint4 u[UNROLL];
#pragma unroll
            for (int k = 0; k < UNROLL; k++)
                u[k] = i + k * THREADS < nvec ? v[i + k * THREADS]
                                              : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
            float f[UNROLL * 8];
#pragma unroll
            for (int k = 0; k < UNROLL; k++) {
                const kevo_f32x8 x = kevo_bf16x8_to_f32(u[k]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    f[k * 8 + j] = x.v[j];
            }
            fold<UNROLL * 8>(r, f);
        }
        // head and tail, one bf16 at a time
        const int64_t tail0 = head + nvec * 8, rest = head + (len - tail0);
        for (int64_t e = threadIdx.x; e < rest; e += THREADS) {
            const int64_t col = e < head ? e : tail0 + (e - head);
            const float f[1] = {__bfloat162float(p[col])};
            fold<1>(r, f);
        }
        const int64_t rel = tcol - c0; // the target, relative to p
        if (rel >= 0 && rel < len) {
            const int64_t idx = rel >= head && rel < tail0
                                    ? (rel - head) >> 3 // its vector
                                    : (rel < head ? rel : head + (rel - tail0));
            if (idx % THREADS == threadIdx.x)
                *gsm = __bfloat162float(p[rel]);
        }
    }
    r = warp_merge(r);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0)
        part[warp] = r;
    __syncthreads();
    if (warp == 0) {
        r = lane < kWarps ? part[lane] : MS{-INFINITY, 0.0f};
        r = warp_merge(r);
    }
    return r;
}

// Step 4 for rows [t_lo, t_hi): wait for the flags of the CTAs that produced them, on every
// rank, then merge their partials (parity par) into loss.
__device__ __forceinline__ void combine(const Args &a, const kevo_pads &p, uint32_t t_lo,
                                        uint32_t t_hi, uint32_t par)
{
    const uint32_t W = (uint32_t)p.world, me = (uint32_t)p.rank;
    const uint32_t b_first = t_lo * a.split / a.U, b_last = (t_hi * a.split - 1) / a.U;
    const uint32_t nflags = (b_last - b_first + 1) * W;
    for (uint32_t i = threadIdx.x; i < nflags; i += THREADS)
        kevo_wait(p, (uint64_t)(b_first + i / W) * W + i % W);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float4 *mine = a.slots[me];
    const uint32_t per_row = W * a.split;
    for (uint32_t t = t_lo + warp; t < t_hi; t += kWarps) {
        const float4 *row = mine + ((uint64_t)par * a.T + t) * per_row;
        MS r = {-INFINITY, 0.0f};
        float g = 0.0f;
        for (uint32_t j = lane; j < per_row; j += 32) {
            const float4 v = __ldcg(row + j);
            r = merge(r, MS{v.x, v.y});
            g += v.z;
        }
        r = warp_merge(r);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            g += __shfl_xor_sync(0xffffffffu, g, o);
        if (lane == 0)
            a.loss[t] = (logf(r.s) + r.m) - g;
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks) vocab_ce_onepass(const Args a)
{
    __shared__ MS part[kWarps];
    __shared__ float4 result;
    __shared__ float gsm; // the target's logit, when this unit holds it
    const kevo_pads p = kevo_epoch_begin(a.p);
    const uint32_t b = blockIdx.x, W = (uint32_t)p.world, me = (uint32_t)p.rank;
    const uint32_t par = (uint32_t)(p.epoch & 1);
    const uint32_t u_begin = b * a.U;
    const uint32_t u_end = u_begin + a.U < a.units ? u_begin + a.U : a.units;

    // 1-3: partials of this CTA's units, pushed to every rank
    for (uint32_t u = u_begin; u < u_end; u++) {
        const uint32_t t = u / a.split, c = u - t * a.split;
        const int64_t c0 = (int64_t)c * a.chunk < a.n ? (int64_t)c * a.chunk : a.n;
        const int64_t c1 = c0 + a.chunk < a.n ? c0 + a.chunk : a.n;
        const __nv_bfloat16 *row = a.logits + (int64_t)t * a.n;
        const int64_t tcol = (int64_t)a.targets[t] - a.lo; // used only after the loads
        const MS r = chunk_ms(row, c0, c1, tcol, part, &gsm);
        if (threadIdx.x == 0)
            result = make_float4(r.m, r.s, tcol >= c0 && tcol < c1 ? gsm : 0.0f, 0.0f);
        __syncthreads();
        if (threadIdx.x < W) {
            const uint64_t slot = (((uint64_t)par * a.T + t) * W + me) * a.split + c;
            a.slots[threadIdx.x][slot] = result;
        }
        __syncthreads(); // part and result are reused by the next unit
    }
    if (threadIdx.x < W)
        kevo_signal(p, (int)threadIdx.x, (uint64_t)b * W + me); // after this thread's pushes

    // 4: combine the rows whose first unit is in this CTA (none: straight to kevo_epoch_end)
    const uint32_t t_lo = (u_begin + a.split - 1) / a.split;
    uint32_t t_hi = (u_end + a.split - 1) / a.split;
    if (t_hi > a.T)
        t_hi = a.T;
    if (t_lo < t_hi)
        combine(a, p, t_lo, t_hi, par);
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "vocab_parallel_cross_entropy/vocab_ce_onepass_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    const int64_t T = kevo_param(ctx, "T", 0), V = kevo_param(ctx, "V", 0);
    if (T < 1 || V < 1 || W < 1 || W > KEVO_MAX_RANKS || V % W)
        return kevo_fail(kWho, "bad sizes T=%lld V=%lld W=%d", (long long)T, (long long)V, W);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)vocab_ce_onepass, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    int64_t g = (int64_t)per_sm * ctx->sm_count;
    const kevo_pads p = kevo_pads_of(ctx);
    const int64_t pad_limit = kevo_pads_max_ctas(p, 1); // one flag per (CTA, rank)
    if (g > pad_limit)
        g = pad_limit;
    if (g < 1)
        return kevo_fail(kWho, "no CTA fits (occupancy %d, signal pad)", per_sm);
    st->max_grid = (int)g;
    // Same figures on every rank, so the same SPLIT and the same scratch offsets.
    const int64_t n = V / W;
    int64_t split = g / T;
    const int64_t most = (n + kMinChunk - 1) / kMinChunk;
    if (split > most)
        split = most;
    if (split < 1)
        split = 1;
    st->T = T;
    st->split = split;
    const size_t bytes = 2 * (size_t)T * W * split * sizeof(float4);
    void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, bytes, &local, peer, NULL) != 0)
        return kevo_fail(kWho, "%zu bytes of symmetric scratch exhausted", bytes);
    for (int q = 0; q < W; q++)
        st->slots[q] = (float4 *)peer[q];
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    const int64_t T = kevo_param(ctx, "T", 0), V = kevo_param(ctx, "V", 0);
    if (!st)
        return 1;
    if (ctx->n_inputs < 2 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS || T != st->T ||
        V % W)
        return kevo_fail(kWho, "bad context");
    const kevo_tensor *lg = &ctx->inputs[0], *tg = &ctx->inputs[1], *loss = &ctx->outputs[0];
    const int64_t n = V / W;
    if (lg->dtype != KEVO_BF16 || tg->dtype != KEVO_I32 || loss->dtype != KEVO_F32 ||
        lg->numel != T * n || tg->numel != T || loss->numel != T)
        return kevo_fail(kWho, "unexpected tensors");
    Args a = {};
    a.logits = (const __nv_bfloat16 *)lg->ptr;
    a.targets = (const int32_t *)tg->ptr;
    a.loss = (float *)loss->ptr;
    for (int q = 0; q < W; q++)
        a.slots[q] = st->slots[q];
    a.n = n;
    a.lo = (int64_t)ctx->rank * n;
    const int64_t split = st->split;
    a.chunk = ((n + split - 1) / split + 7) / 8 * 8;
    const int64_t units = T * split;
    const int64_t U = (units + st->max_grid - 1) / st->max_grid;
    const int64_t grid = (units + U - 1) / U;
    if (units >= ((int64_t)1 << 31))
        return kevo_fail(kWho, "T=%lld is too large", (long long)T);
    a.T = (uint32_t)T;
    a.split = (uint32_t)split;
    a.U = (uint32_t)U;
    a.units = (uint32_t)units;
    a.p = kevo_pads_of(ctx);
    vocab_ce_onepass<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx); // the scratch is the harness's
}
