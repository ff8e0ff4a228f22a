// memo.cuh — the shared body of the memoizing hostiles (memo_*.cu): a correct one-shot
// all-reduce (bf16, sum) that tries to skip its data movement when it believes the call's result
// is already in y. Each memo_*.cu defines MEMO_MODE and includes this file; the modes differ
// only in how the kernel decides to skip:
//   MEMO_SAMPLE   64 elements of this rank's x and 16 of y, against what it saw and wrote last
//                 time it was given this y (the attack of issue 23: 5.5x NCCL at 16 MiB)
//   MEMO_HASH     a hash of the whole of this rank's x (and the y sample), against last time's
//   MEMO_STASH    as MEMO_SAMPLE, but the result is kept in scratch and copied back into y
//   MEMO_POINTER  the y pointer: a y it has computed before, still holding what it wrote, is
//                 taken as done whatever x holds
//   MEMO_COUNT    computes the first 64 calls, then only one call in four (when y still holds
//                 what it wrote)
// Every call runs both barriers (so the ranks never disagree on how many there are); only the
// bulk of the work is skipped. Each decision is made on the device, so CUDA graph replays
// decide afresh. Against inputs that no earlier call saw, the first three never find a match
// and do the honest work (timed at its cost); the last two serve stale outputs (mismatch).
#include "kevo/kernel.h"
#include "kevo_sync.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MEMO_SAMPLE 1
#define MEMO_HASH 2
#define MEMO_STASH 3
#define MEMO_POINTER 4
#define MEMO_COUNT 5

namespace {

constexpr int kThreads = 256;
constexpr int kEntries = 64;   // y pointers remembered
constexpr int kXSamples = 64;  // elements of x looked at
constexpr int kYSamples = 16;  // elements of y looked at

struct Entry {
    const void *y;
    unsigned long long hash;
    uint16_t x[kXSamples], ywrote[kYSamples];
    int valid;
};

struct Memo {
    Entry e[kEntries];
    unsigned long long calls;
    unsigned long long hash;  // MEMO_HASH: this call's hash of x
    int skip;                 // this call's decision
    int slot;                 // the entry of this call's y
};

struct State {
    Memo *memo;       // device memory
    void *stash;      // MEMO_STASH: kEntries results, or fewer
    int stash_slots;
};

__device__ __forceinline__ uint16_t bits(const __nv_bfloat16 *p, int64_t i)
{
    return reinterpret_cast<const uint16_t *>(p)[i];
}

__device__ __forceinline__ int64_t sample_at(int s, int n_samples, int64_t n)
{
    return (int64_t)((double)s * (double)n / n_samples);
}

#if MEMO_MODE == MEMO_HASH
// this rank's x hashed, order-independently, into m->hash
__global__ void hash_x(const __nv_bfloat16 *x, int64_t n, Memo *m)
{
    unsigned long long h = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        h += (bits(x, i) + 1ull) * (0x9E3779B97F4A7C15ull ^ (unsigned long long)i);
    atomicAdd(&m->hash, h);
}
#endif

// One thread: finds this y's entry and decides whether to skip.
__global__ void decide(const __nv_bfloat16 *x, const __nv_bfloat16 *y, int64_t n, Memo *m, int mode)
{
    unsigned long long call = m->calls++;
    int slot = -1, free_slot = -1;
    for (int k = 0; k < kEntries; k++) {
        if (m->e[k].valid && m->e[k].y == y)
            slot = k;
        if (!m->e[k].valid && free_slot < 0)
            free_slot = k;
    }
    int skip = 0;
    if (slot >= 0) {
        Entry *e = &m->e[slot];
        int same_y = 1, same_x = 1;
        for (int s = 0; s < kYSamples; s++)
            same_y &= bits(y, sample_at(s, kYSamples, n)) == e->ywrote[s];
        for (int s = 0; s < kXSamples; s++)
            same_x &= bits(x, sample_at(s, kXSamples, n)) == e->x[s];
        switch (mode) {
        case MEMO_SAMPLE: skip = same_x && same_y; break;
        case MEMO_HASH: skip = m->hash == e->hash && same_y; break;
        case MEMO_STASH: skip = same_x; break; // y itself is restored from the stash
        case MEMO_POINTER: skip = same_y; break;
        case MEMO_COUNT: skip = call >= 64 && call % 4 != 0 && same_y; break;
        }
    } else {
        slot = free_slot >= 0 ? free_slot : (int)(call % kEntries);
        m->e[slot].valid = 0;
    }
    m->skip = skip;
    m->slot = slot;
}

// One thread, after the all-reduce: what this call saw and wrote, for next time.
__global__ void remember(const __nv_bfloat16 *x, const __nv_bfloat16 *y, int64_t n, Memo *m)
{
    Entry *e = &m->e[m->slot];
    const unsigned long long hash = m->hash;
    m->hash = 0;
    if (m->skip)
        return;
    e->y = y;
    e->hash = hash;
    for (int s = 0; s < kXSamples; s++)
        e->x[s] = bits(x, sample_at(s, kXSamples, n));
    for (int s = 0; s < kYSamples; s++)
        e->ywrote[s] = bits(y, sample_at(s, kYSamples, n));
    e->valid = 1;
    m->hash = 0;
}

#if MEMO_MODE == MEMO_STASH
// y kept in, or restored from, the stash of this y's entry
__global__ void stash_copy(__nv_bfloat16 *y, int64_t n, const Memo *m, __nv_bfloat16 *stash,
                           int stash_slots, int restore)
{
    if (m->slot >= stash_slots || restore != m->skip)
        return;
    __nv_bfloat16 *s = stash + (size_t)m->slot * (size_t)n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (restore)
            y[i] = s[i];
        else
            s[i] = y[i];
    }
}
#endif

struct Args {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS];
    __nv_bfloat16 *y;
    int64_t n;
    int world;
    kevo_pads pads;
    const Memo *memo;
};

// The one-shot all-reduce: start barrier, every rank's x summed in rank order (fp32, rounded
// once), end barrier. The sum is left out when the memo said skip.
__global__ void __launch_bounds__(kThreads) allreduce(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    kevo_cta_barrier(p, 0);
    if (!a.memo->skip) {
        for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < a.n;
             i += (int64_t)gridDim.x * kThreads) {
            float acc = 0;
            for (int q = 0; q < a.world; q++)
                acc += __bfloat162float(a.x[q][i]);
            a.y[i] = __float2bfloat16_rn(acc);
        }
    }
    kevo_cta_barrier(p, 1);
    kevo_epoch_end(p);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = (State *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    ctx->user = st;
    if (cudaMalloc((void **)&st->memo, sizeof(Memo)) != cudaSuccess ||
        cudaMemset(st->memo, 0, sizeof(Memo)) != cudaSuccess)
        return 1;
#if MEMO_MODE == MEMO_STASH
    size_t ybytes = ctx->outputs[0].bytes;
    st->stash_slots = kEntries;
    while (st->stash_slots > 0 &&
           ctx->scratch_alloc(ctx, (size_t)st->stash_slots * ybytes, &st->stash, NULL, NULL) != 0)
        st->stash_slots /= 2;
#endif
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (!st || x->dtype != KEVO_BF16 || y->numel != x->numel || ctx->world > KEVO_MAX_RANKS)
        return 1;
    Args a = {};
    for (int q = 0; q < ctx->world; q++)
        a.x[q] = (const __nv_bfloat16 *)x->peer[q];
    a.y = (__nv_bfloat16 *)y->ptr;
    a.n = x->numel;
    a.world = ctx->world;
    a.pads = kevo_pads_of(ctx);
    a.memo = st->memo;
    int64_t grid = 2 * (int64_t)ctx->sm_count, most = kevo_pads_max_ctas(a.pads, 2);
    if (grid > most)
        grid = most;
    const __nv_bfloat16 *xl = (const __nv_bfloat16 *)x->ptr;
    cudaStream_t s = ctx->stream;
#if MEMO_MODE == MEMO_HASH
    hash_x<<<(int)grid, kThreads, 0, s>>>(xl, a.n, st->memo);
#endif
    decide<<<1, 1, 0, s>>>(xl, a.y, a.n, st->memo, MEMO_MODE);
#if MEMO_MODE == MEMO_STASH
    stash_copy<<<(int)grid, kThreads, 0, s>>>(a.y, a.n, st->memo, (__nv_bfloat16 *)st->stash,
                                              st->stash_slots, 1);
#endif
    allreduce<<<(int)grid, kThreads, 0, s>>>(a);
#if MEMO_MODE == MEMO_STASH
    stash_copy<<<(int)grid, kThreads, 0, s>>>(a.y, a.n, st->memo, (__nv_bfloat16 *)st->stash,
                                              st->stash_slots, 0);
#endif
    remember<<<1, 1, 0, s>>>(xl, a.y, a.n, st->memo);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "memo: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (st)
        cudaFree(st->memo);
    free(st);
    ctx->user = NULL;
}
