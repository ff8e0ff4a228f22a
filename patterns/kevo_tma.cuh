// kevo_tma.cuh — 1-D bulk asynchronous copies (TMA, cp.async.bulk) between global memory
// (this GPU's or a peer's, through the symmetric window) and shared memory, with mbarrier
// completion, and the proxy fences they need. sm_90.
//
// Rules (PTX ISA, "cp.async.bulk" and the memory consistency model's proxies):
//  - addresses and sizes are multiples of 16 bytes;
//  - a load (global -> shared) completes on an mbarrier: one thread calls
//    kevo_mbar_expect_tx(bar, bytes) and issues the loads; every thread waits on the phase;
//  - a store (shared -> global) is tracked by bulk groups: kevo_tma_commit() after the stores,
//    kevo_tma_wait_read<N>() before shared memory is reused, kevo_tma_wait_all() before the
//    data may be published to another GPU;
//  - shared memory written by ordinary stores must be fenced (kevo_fence_proxy_async_shared())
//    before a bulk store reads it; global data written by the bulk (async) proxy is published
//    with kevo_fence_proxy_async_global() and then a release flag (kevo_sync.cuh); a reader
//    that acquired a flag and loads with TMA fences with kevo_fence_proxy_async_global() too.
#ifndef KEVO_PATTERNS_TMA_CUH
#define KEVO_PATTERNS_TMA_CUH

#include <stdint.h>

#include "kevo_sync.cuh"

__device__ __forceinline__ uint32_t kevo_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// ---- mbarrier ------------------------------------------------------------------------------

__device__ __forceinline__ void kevo_mbar_init(uint64_t *bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(kevo_smem_addr(bar)), "r"(arrivals)
                 : "memory");
}

// Makes mbarrier.init visible to the async proxy (before the first bulk copy uses it).
__device__ __forceinline__ void kevo_fence_mbar_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of bulk copies completing on this phase.
__device__ __forceinline__ void kevo_mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(kevo_smem_addr(bar)),
        "r"(bytes)
        : "memory");
}

__device__ __forceinline__ bool kevo_mbar_try_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(kevo_smem_addr(bar)), "r"(parity)
                 : "memory");
    return done != 0;
}

// Waits for the phase with this parity to complete; traps after KEVO_WAIT_TIMEOUT_NS.
__device__ __forceinline__ void kevo_mbar_wait(uint64_t *bar, uint32_t parity)
{
    if (kevo_mbar_try_wait(bar, parity))
        return;
    const unsigned long long t0 = kevo_globaltimer_ns();
    while (!kevo_mbar_try_wait(bar, parity))
        if (kevo_globaltimer_ns() - t0 > KEVO_WAIT_TIMEOUT_NS)
            __trap();
}

// ---- bulk copies ---------------------------------------------------------------------------

// global (local or peer) -> shared, completing `bytes` on bar's current phase.
__device__ __forceinline__ void kevo_tma_load(void *smem, const void *gmem, uint32_t bytes,
                                              uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" ::"r"(kevo_smem_addr(smem)),
                 "l"(gmem), "r"(bytes), "r"(kevo_smem_addr(bar))
                 : "memory");
}

// shared -> global (local or peer), in the current bulk group.
__device__ __forceinline__ void kevo_tma_store(void *gmem, const void *smem, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem),
                 "r"(kevo_smem_addr(smem)), "r"(bytes)
                 : "memory");
}

// global[i] += shared[i] for bf16 elements (an atomic add per element at the destination),
// in the current bulk group: a reduction pushed straight into a peer's buffer.
__device__ __forceinline__ void kevo_tma_reduce_add_bf16(void *gmem, const void *smem,
                                                         uint32_t bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 "
                 "[%0], [%1], %2;" ::"l"(gmem),
                 "r"(kevo_smem_addr(smem)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void kevo_tma_commit()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// At most N committed groups may still be reading their shared memory.
template <int N> __device__ __forceinline__ void kevo_tma_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Every committed group has completed its writes.
__device__ __forceinline__ void kevo_tma_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// ---- proxy fences --------------------------------------------------------------------------

__device__ __forceinline__ void kevo_fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void kevo_fence_proxy_async_global()
{
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

#endif
