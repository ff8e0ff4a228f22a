// kevo_sync.cuh — cross-GPU flags and barriers on the signal pad, for candidates and patterns.
//
// The signal pad (ctx->signal, every rank's at ctx->signal_peer[q]) is zeroed once and never
// reset by the harness. Flags hold epochs, so values only grow and no flag is ever reset inside
// a kernel: a fast rank already in launch e + 1 cannot be confused with a slow one in launch e.
//
// Epochs come from the device (ABI 2). A call captured into a CUDA graph is replayed with the
// host values it had when captured, so an epoch computed on the host (ctx->call_index + 1)
// would repeat on every replay and the second replay's waits would pass on the first one's
// flags. Instead the last 2 x KEVO_EPOCH_CHANNELS words of the pad are epoch channels: word 0
// of a channel holds the epoch of its last finished launch, word 1 counts the CTAs of the
// running launch that have finished. A kernel takes its epoch with kevo_epoch_begin (the
// channel's value + 1, the same for all of its CTAs) and hands it on with kevo_epoch_end (the
// last CTA to finish writes it back). Every rank launches the same kernels in the same order,
// so a channel's epochs agree across ranks launch by launch.
//
// Rules: every CTA of a launch that called kevo_epoch_begin reaches kevo_epoch_end (no early
// return past it); kernels that may run at the same time (on side streams) use different
// channels; a flag signalled with one channel's epoch is waited for with an epoch that advances
// the same way (the same number of launches per call on both channels).
//
// Ordering: a writer publishes with st.release.sys after its data stores (and after a
// __syncthreads() that orders the other threads' stores before it); a reader acquires with
// ld.acquire.sys and then __syncthreads() before touching the data. Only .sys scope orders
// against other GPUs (.gpu fences and __threadfence() do not).
//
// Every wait is bounded (KEVO_WAIT_TIMEOUT_NS, default 5 s) and ends in __trap(): a peer that
// never arrives becomes a runtime error on this rank, not a hang that costs the deadline. A
// wait for epoch 0 (kevo_epoch_begin forgotten) traps at once.
#ifndef KEVO_PATTERNS_SYNC_CUH
#define KEVO_PATTERNS_SYNC_CUH

#include <stdint.h>

#include "kevo/kernel.h"

#ifndef KEVO_WAIT_TIMEOUT_NS
#define KEVO_WAIT_TIMEOUT_NS 5000000000ull
#endif

#define KEVO_EPOCH_CHANNELS 8

// Everything a kernel needs to signal and wait: pass it by value, and take the launch's copy
// with kevo_epoch_begin inside the kernel.
struct kevo_pads {
    uint64_t *mine;                 // this rank's pad
    uint64_t *peer[KEVO_MAX_RANKS]; // every rank's pad (peer[rank] == mine)
    uint64_t words;                 // flags in one pad (the epoch channels excluded)
    uint64_t *channel;              // this rank's epoch channel: [0] epoch, [1] CTAs done
    uint64_t epoch;                 // 0 on the host; the launch's epoch after kevo_epoch_begin
    int rank, world;
};

// Host: the pads, with epoch channel `channel` (0 .. KEVO_EPOCH_CHANNELS - 1). The pointers do
// not change between calls; the epoch is the device's.
static inline kevo_pads kevo_pads_of(const kevo_ctx *ctx, int channel = 0)
{
    kevo_pads p = {};
    const uint64_t reserved = 2 * KEVO_EPOCH_CHANNELS;
    if (ctx->signal_words <= reserved || channel < 0 || channel >= KEVO_EPOCH_CHANNELS)
        return p; // no channel: kevo_epoch_begin traps
    p.mine = ctx->signal;
    for (int q = 0; q < ctx->world && q < KEVO_MAX_RANKS; q++)
        p.peer[q] = ctx->signal_peer[q];
    p.words = ctx->signal_words - reserved;
    p.channel = ctx->signal + p.words + 2 * (uint64_t)channel;
    p.rank = ctx->rank;
    p.world = ctx->world;
    return p;
}

// Device, every thread, before any signal or wait: the pads with this launch's epoch. The
// channel does not change until every CTA of the launch has reached kevo_epoch_end, so all of
// them read the same value.
__device__ __forceinline__ kevo_pads kevo_epoch_begin(const kevo_pads &p)
{
    if (!p.channel)
        __trap();
    kevo_pads l = p;
    l.epoch = *(volatile const uint64_t *)p.channel + 1;
    return l;
}

// Device, every thread of every CTA, after its last signal and wait: the last CTA to get here
// makes this launch's epoch the channel's (the next launch, later on the stream, reads it).
__device__ __forceinline__ void kevo_epoch_end(const kevo_pads &p)
{
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned long long ctas = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
        if (atomicAdd((unsigned long long *)(p.channel + 1), 1ull) == ctas - 1) {
            *(volatile uint64_t *)(p.channel + 1) = 0;
            *(volatile uint64_t *)p.channel = p.epoch;
        }
    }
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

// Waits until *flag >= epoch (acquire), at most KEVO_WAIT_TIMEOUT_NS, then traps; epoch 0 (no
// kevo_epoch_begin) traps at once.
__device__ __forceinline__ void kevo_wait_flag(const uint64_t *flag, uint64_t epoch)
{
    if (epoch == 0)
        __trap();
    if (kevo_load_acquire_sys(flag) >= epoch)
        return;
    const unsigned long long t0 = kevo_globaltimer_ns();
    while (kevo_load_acquire_sys(flag) < epoch)
        if (kevo_globaltimer_ns() - t0 > KEVO_WAIT_TIMEOUT_NS)
            __trap();
}

// Rank q's pad, chosen without indexing p.peer by a run-time value: a launch's copy of the
// pads (kevo_epoch_begin) lives in registers, and an array indexed by a register would move
// it to local memory in every thread (a stack frame, and stores at every kernel's entry).
__device__ __forceinline__ uint64_t *kevo_peer_pad(const kevo_pads &p, int q)
{
    uint64_t *pad = p.peer[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            pad = p.peer[i];
    return pad;
}

// Point to point: sets flag `slot` of rank q's pad to this launch's epoch (release: the caller's
// earlier stores, and those ordered before it by a __syncthreads(), are visible to whoever
// acquires it).
__device__ __forceinline__ void kevo_signal(const kevo_pads &p, int q, uint64_t slot)
{
    if (p.epoch == 0)
        __trap();
    kevo_store_release_sys(kevo_peer_pad(p, q) + slot, p.epoch);
}

// Waits for flag `slot` of this rank's pad to reach this launch's epoch.
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
        if (p.epoch == 0)
            __trap();
        kevo_store_release_sys(kevo_peer_pad(p, q) + slot + p.rank, p.epoch); // to q: arrived
        kevo_wait_flag(p.mine + slot + q, p.epoch);                           // from rank q
    }
    __syncthreads();
}

#endif
