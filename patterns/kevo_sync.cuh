// kevo_sync.cuh — cross-GPU flags and barriers on the signal pad, for candidates and patterns.
//
// The signal pad (ctx->signal, every rank's at ctx->signal_peer[q]) is zeroed once and never
// reset by the harness. Flags hold epochs: call c of kevo_run uses epoch c + 1
// (ctx->call_index + 1), so values only grow and no flag is ever reset inside a kernel — a
// fast rank already in call c + 1 cannot be confused with a slow one still in call c.
//
// Ordering: a writer publishes with st.release.sys after its data stores (and after a
// __syncthreads() that orders the other threads' stores before it); a reader acquires with
// ld.acquire.sys and then __syncthreads() before touching the data. Only .sys scope orders
// against other GPUs (.gpu fences and __threadfence() do not).
//
// Every wait is bounded (KEVO_WAIT_TIMEOUT_NS, default 5 s) and ends in __trap(): a peer that
// never arrives becomes a runtime error on this rank, not a hang that costs the deadline.
#ifndef KEVO_PATTERNS_SYNC_CUH
#define KEVO_PATTERNS_SYNC_CUH

#include <stdint.h>

#include "kevo/kernel.h"

#ifndef KEVO_WAIT_TIMEOUT_NS
#define KEVO_WAIT_TIMEOUT_NS 5000000000ull
#endif

// Everything a kernel needs to signal and wait: pass it by value.
struct kevo_pads {
    uint64_t *mine;                    // this rank's pad
    uint64_t *peer[KEVO_MAX_RANKS];    // every rank's pad (peer[rank] == mine)
    uint64_t words;                    // 64-bit flags in one pad
    uint64_t epoch;                    // ctx->call_index + 1
    int rank, world;
};

// Host: the pads of this call. Read it on every kevo_run (the epoch changes).
static inline kevo_pads kevo_pads_of(const kevo_ctx *ctx)
{
    kevo_pads p = {};
    p.mine = ctx->signal;
    for (int q = 0; q < ctx->world && q < KEVO_MAX_RANKS; q++)
        p.peer[q] = ctx->signal_peer[q];
    p.words = ctx->signal_words;
    p.epoch = ctx->call_index + 1;
    p.rank = ctx->rank;
    p.world = ctx->world;
    return p;
}

// Host: how many CTAs a grid may have so that `phases` CTA barriers fit in the pad
// (kevo_cta_barrier uses phases x grid x world flags, after `first` flags kept for other use).
static inline int64_t kevo_pads_max_ctas(const kevo_pads &p, int phases, uint64_t first = 0)
{
    if (p.words <= first || phases < 1 || p.world < 1)
        return 0;
    return (int64_t)((p.words - first) / ((uint64_t)phases * (uint64_t)p.world));
}

__device__ __forceinline__ unsigned long long kevo_globaltimer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void kevo_store_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t kevo_load_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Waits until *flag >= epoch (acquire), at most KEVO_WAIT_TIMEOUT_NS, then traps.
__device__ __forceinline__ void kevo_wait_flag(const uint64_t *flag, uint64_t epoch)
{
    if (kevo_load_acquire_sys(flag) >= epoch)
        return;
    const unsigned long long t0 = kevo_globaltimer_ns();
    while (kevo_load_acquire_sys(flag) < epoch)
        if (kevo_globaltimer_ns() - t0 > KEVO_WAIT_TIMEOUT_NS)
            __trap();
}

// Point to point: sets flag `slot` of rank q's pad to this call's epoch (release: the caller's
// earlier stores, and those ordered before it by a __syncthreads(), are visible to whoever
// acquires it).
__device__ __forceinline__ void kevo_signal(const kevo_pads &p, int q, uint64_t slot)
{
    kevo_store_release_sys(p.peer[q] + slot, p.epoch);
}

// Waits for flag `slot` of this rank's pad to reach this call's epoch.
__device__ __forceinline__ void kevo_wait(const kevo_pads &p, uint64_t slot)
{
    kevo_wait_flag(p.mine + slot, p.epoch);
}

// CTA blockIdx.x of this rank meets CTA blockIdx.x of every rank: after it, everything each
// of those CTAs did before it (loads included) is done and its stores are visible. `phase`
// (0, 1, ...) gives each barrier of a kernel its own flags: phase x gridDim.x x world flags
// from `first` on. The grid must be the same on every rank, and all of its CTAs resident at
// once (size it with kevo_pads_max_ctas and the occupancy).
__device__ __forceinline__ void kevo_cta_barrier(const kevo_pads &p, int phase, uint64_t first = 0)
{
    __syncthreads();
    if (threadIdx.x < (unsigned)p.world) {
        const int q = threadIdx.x;
        const uint64_t slot = first + ((uint64_t)phase * gridDim.x + blockIdx.x) * p.world;
        kevo_store_release_sys(p.peer[q] + slot + p.rank, p.epoch); // to rank q: arrived
        kevo_wait_flag(p.mine + slot + q, p.epoch);                  // from rank q
    }
    __syncthreads();
}

#endif
