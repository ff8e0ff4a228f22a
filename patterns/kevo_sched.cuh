// kevo_sched.cuh — the device primitives that programs generated from a schedule
// (docs/schedules.md, mutate/schedule_gen.c) are built from: the partition of a move among the
// CTAs and threads of a grid, copies and bf16 sums by SM vectors, a grid-wide cross-rank
// barrier, per-chunk flags, LL and LL128 sends and receives, a TMA pipeline through shared
// memory, and fp8 (e4m3) block quantisation. Hand-written candidates may use them too.
//
// Moves. A phase is a list of moves; a move is a byte range copied (or, for sums, W ranges
// summed) from one place to another, possibly on another rank. Every move is cut into *units*
// of V bytes (the SM width: 4, 8 or 16) counted from the start of the range, whatever the
// pointers' alignment: unit i is bytes [i*V, (i+1)*V) (the last one may be short). Who
// processes unit i depends only on the range's length, V, the chunk and the grid
// (kevo_sched_for_units), never on a pointer, so two phases that partition ranges of the same
// length with the same V and chunk give every unit to the same CTA on every rank. That is what
// makes sync=cta valid (CTA b of the next phase reads only what CTA b of every rank wrote).
//   chunk 0: the grid's threads stride over the units (thread t takes t, t + T, ...);
//   chunk c > 0: the range is cut into chunks of c bytes, chunk k belongs to CTA k mod G and
//            the CTA's threads stride over its units.
// A thread keeps U units (`inflight`) of loads in flight before it stores any. A unit whose
// pointers are all V-aligned moves with one V-byte access each side; otherwise it moves with
// the widest access that every pointer's alignment allows (down to bytes: fp8 slices start at
// odd byte offsets at the validation size, bf16 blocks at odd element offsets); a short last
// unit moves byte by byte. Misaligned ranges only occur at the (untimed) validation size.
//
// Sums: bf16 elements, accumulated in fp32 in rank order 0, 1, ..., W-1 starting from rank 0's
// value (no 0 + x: -0 stays -0) and rounded once (kevo_vec.cuh), so every rank gets the same
// bits and, at W = 2, the reference's. U / W units per thread are in flight (W loads each).
//
// Synchronisation rules (kevo_sync.cuh): flags hold epochs taken on the device with
// kevo_epoch_begin / kevo_epoch_end (a CUDA graph replay gets new ones), values only grow and
// no flag is ever reset; a writer publishes with st.release.sys after a __syncthreads() that
// orders its CTA's stores; a reader acquires with ld.acquire.sys then __syncthreads(); every
// wait is bounded by KEVO_WAIT_TIMEOUT_NS and then __trap()s. Barriers need every CTA of the
// grid resident at once and the same grid on every rank.
#ifndef KEVO_PATTERNS_SCHED_CUH
#define KEVO_PATTERNS_SCHED_CUH

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kevo_ll.cuh"
#include "kevo_sync.cuh"
#include "kevo_tma.cuh"
#include "kevo_vec.cuh"

// ---- peers and pointers ------------------------------------------------------------------------

#define KEVO_SCHED_RING 0
#define KEVO_SCHED_REV 1
#define KEVO_SCHED_XOR 2

// The peer of step k (0 .. W-1; step 0 is this rank) under an order: ring r + k, rev r - k,
// xor r ^ k. xor needs W a power of 2; at another W it runs ring (the runtime fallback).
__host__ __device__ __forceinline__ int kevo_sched_peer(int order, int r, int k, int W)
{
    if (order == KEVO_SCHED_XOR && (W & (W - 1)) == 0)
        return r ^ k;
    if (order == KEVO_SCHED_REV)
        return (r - k + W) % W;
    return (r + k) % W;
}

// a[q] chosen without indexing by a run-time value (a kernel's argument arrays would move to
// local memory, see kevo_peer_pad).
template <class T>
__host__ __device__ __forceinline__ T kevo_sched_pick(const T (&a)[KEVO_MAX_RANKS], int q)
{
    T v = a[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            v = a[i];
    return v;
}

// The largest power of 2, at most 16, that divides every address or-ed into bits.
__device__ __forceinline__ int kevo_sched_align(uintptr_t bits)
{
    const unsigned low = (unsigned)bits & 15u;
    return low == 0 ? 16 : (int)(low & (0u - low));
}

// ---- partition ----------------------------------------------------------------------------------

// f(first, step, count): units first, first + step, ..., count of them (count <= U).
template <int U, class F>
__device__ __forceinline__ void kevo_sched_stride(int64_t i, int64_t step, int64_t end, F &f)
{
#pragma unroll 1
    for (; i + (U - 1) * step < end; i += U * step)
        f(i, step, U);
    if (i < end)
        f(i, step, (int)((end - 1 - i) / step + 1));
}

// Per-chunk hooks of a chunked partition: the whole CTA runs h.before(c) before its threads
// take chunk c (the chunk's index in the range) and h.after(c) after (sync=chunk's flags).
struct kevo_sched_nohook {
    __device__ __forceinline__ void before(int64_t) const
    {
    }
    __device__ __forceinline__ void after(int64_t) const
    {
    }
};

// sync=chunk: flag [part][c] (nch flags a part) from `base` in every rank's pad. The writer of
// chunk c of part `part` raises it on every rank once the CTA's stores of the chunk are done
// (after a __syncthreads(), threads q < W release to rank q, as kevo_cta_barrier does); the
// reader waits for it on its own pad before its threads read the chunk. Flags hold the
// launch's epoch (never reset); on = 0 (the flags did not fit the pad: a grid barrier runs
// instead) makes both no-ops.
struct kevo_sched_flags {
    kevo_pads p;
    uint64_t base;
    int64_t nch;
    int part;
    int wait, signal;
    __device__ __forceinline__ void before(int64_t c) const
    {
        if (!wait)
            return;
        if (threadIdx.x == 0)
            kevo_wait(p, base + (uint64_t)((int64_t)part * nch + c));
        __syncthreads();
    }
    __device__ __forceinline__ void after(int64_t c) const
    {
        if (!signal)
            return;
        __syncthreads();
        if (threadIdx.x < (unsigned)p.world)
            kevo_signal(p, (int)threadIdx.x, base + (uint64_t)((int64_t)part * nch + c));
    }
};

// This thread's units of [0, units): chunk_units 0 strides the whole grid over them; otherwise
// chunk k (chunk_units units) belongs to CTA k mod gridDim.x, whose threads stride over it
// (the CTA runs h's hooks around each of its chunks).
template <int U, class F, class H = kevo_sched_nohook>
__device__ __forceinline__ void kevo_sched_for_units(int64_t units, int64_t chunk_units, F &&f,
                                                     const H &h = H())
{
    if (chunk_units <= 0) {
        kevo_sched_stride<U>((int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                             (int64_t)gridDim.x * blockDim.x, units, f);
        return;
    }
#pragma unroll 1
    for (int64_t lo = (int64_t)blockIdx.x * chunk_units; lo < units;
         lo += (int64_t)gridDim.x * chunk_units) {
        const int64_t end = units - lo < chunk_units ? units : lo + chunk_units;
        h.before(lo / chunk_units);
        kevo_sched_stride<U>(lo + threadIdx.x, (int64_t)blockDim.x, end, f);
        h.after(lo / chunk_units);
    }
}

// ---- units --------------------------------------------------------------------------------------

template <int V> struct kevo_unit {
    uint32_t w[V / 4];
};

// Unit i of a range of `bytes` at p, every address a multiple of al (1 .. 16); a short last
// unit is read byte by byte and padded with zeros.
template <int V>
__device__ __forceinline__ kevo_unit<V> kevo_sched_load(const uint8_t *base, int64_t bytes,
                                                        int64_t i, int al)
{
    kevo_unit<V> u;
    const uint8_t *p = base + i * V;
    const int64_t left = bytes - i * V;
    if (left >= V && al >= V) {
        if constexpr (V == 16) {
            const uint4 v = *reinterpret_cast<const uint4 *>(p);
            u.w[0] = v.x, u.w[1] = v.y, u.w[2] = v.z, u.w[3] = v.w;
        } else if constexpr (V == 8) {
            const uint2 v = *reinterpret_cast<const uint2 *>(p);
            u.w[0] = v.x, u.w[1] = v.y;
        } else {
            u.w[0] = *reinterpret_cast<const uint32_t *>(p);
        }
    } else if (left >= V && al >= 4) {
#pragma unroll
        for (int k = 0; k < V / 4; k++)
            u.w[k] = reinterpret_cast<const uint32_t *>(p)[k];
    } else if (left >= V && al >= 2) {
        const uint16_t *h = reinterpret_cast<const uint16_t *>(p);
#pragma unroll
        for (int k = 0; k < V / 4; k++)
            u.w[k] = (uint32_t)h[2 * k] | (uint32_t)h[2 * k + 1] << 16;
    } else {
#pragma unroll
        for (int k = 0; k < V / 4; k++)
            u.w[k] = 0;
#pragma unroll
        for (int b = 0; b < V; b++)
            if (b < left)
                u.w[b >> 2] |= (uint32_t)p[b] << (8 * (b & 3));
    }
    return u;
}

// Stores unit i (only the bytes inside the range for a short last unit).
template <int V>
__device__ __forceinline__ void kevo_sched_store(uint8_t *base, int64_t bytes, int64_t i, int al,
                                                 const kevo_unit<V> &u)
{
    uint8_t *p = base + i * V;
    const int64_t left = bytes - i * V;
    if (left >= V && al >= V) {
        if constexpr (V == 16)
            *reinterpret_cast<uint4 *>(p) = make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]);
        else if constexpr (V == 8)
            *reinterpret_cast<uint2 *>(p) = make_uint2(u.w[0], u.w[1]);
        else
            *reinterpret_cast<uint32_t *>(p) = u.w[0];
    } else if (left >= V && al >= 4) {
#pragma unroll
        for (int k = 0; k < V / 4; k++)
            reinterpret_cast<uint32_t *>(p)[k] = u.w[k];
    } else if (left >= V && al >= 2) {
        uint16_t *h = reinterpret_cast<uint16_t *>(p);
#pragma unroll
        for (int k = 0; k < V / 4; k++) {
            h[2 * k] = (uint16_t)u.w[k];
            h[2 * k + 1] = (uint16_t)(u.w[k] >> 16);
        }
    } else {
#pragma unroll
        for (int b = 0; b < V; b++)
            if (b < left)
                p[b] = (uint8_t)(u.w[b >> 2] >> (8 * (b & 3)));
    }
}

// ---- copy and sum -------------------------------------------------------------------------------

// dst[0, bytes) = src[0, bytes), this thread's units (see the partition above).
template <int V, int U, class H = kevo_sched_nohook>
__device__ __forceinline__ void kevo_sched_copy(uint8_t *dst, const uint8_t *src, int64_t bytes,
                                                int64_t chunk, const H &h = H())
{
    static_assert(V == 4 || V == 8 || V == 16, "V: 4, 8 or 16 bytes");
    if (bytes <= 0)
        return;
    const int al = kevo_sched_align((uintptr_t)dst | (uintptr_t)src);
    kevo_sched_for_units<U>((bytes + V - 1) / V, chunk / V,
                            [&](int64_t i, int64_t step, int n) {
                                kevo_unit<V> v[U];
#pragma unroll
                                for (int u = 0; u < U; u++)
                                    if (u < n)
                                        v[u] = kevo_sched_load<V>(src, bytes, i + u * step, al);
#pragma unroll
                                for (int u = 0; u < U; u++)
                                    if (u < n)
                                        kevo_sched_store<V>(dst, bytes, i + u * step, al, v[u]);
                            },
                            h);
}

// The sum over s of W bf16 units, in rank order, rounded once.
template <int W, int V>
__device__ __forceinline__ kevo_unit<V> kevo_sched_sum_unit(const kevo_unit<V> (&v)[W])
{
    float acc[V / 2];
#pragma unroll
    for (int k = 0; k < V / 4; k++) {
        acc[2 * k] = kevo_ll_lo(v[0].w[k]);
        acc[2 * k + 1] = kevo_ll_hi(v[0].w[k]);
    }
#pragma unroll
    for (int s = 1; s < W; s++)
#pragma unroll
        for (int k = 0; k < V / 4; k++) {
            acc[2 * k] += kevo_ll_lo(v[s].w[k]);
            acc[2 * k + 1] += kevo_ll_hi(v[s].w[k]);
        }
    kevo_unit<V> o;
#pragma unroll
    for (int k = 0; k < V / 4; k++)
        o.w[k] = kevo_ll_pack(acc[2 * k], acc[2 * k + 1]);
    return o;
}

// dst[d][0, bytes) = sum over s in 0..W-1 of src[s][0, bytes) as bf16, for d < D. U / W units
// per thread in flight (each W loads).
template <int W, int D, int V, int U, class H = kevo_sched_nohook>
__device__ __forceinline__ void kevo_sched_sum(uint8_t *const (&dst)[D],
                                               const uint8_t *const (&src)[W], int64_t bytes,
                                               int64_t chunk, const H &h = H())
{
    static_assert(V == 4 || V == 8 || V == 16, "V: 4, 8 or 16 bytes");
    constexpr int US = U / W > 0 ? U / W : 1;
    if (bytes <= 0)
        return;
    uintptr_t bits = 0;
#pragma unroll
    for (int s = 0; s < W; s++)
        bits |= (uintptr_t)src[s];
#pragma unroll
    for (int d = 0; d < D; d++)
        bits |= (uintptr_t)dst[d];
    const int al = kevo_sched_align(bits);
    kevo_sched_for_units<US>(
        (bytes + V - 1) / V, chunk / V,
        [&](int64_t i, int64_t step, int n) {
            kevo_unit<V> v[US][W];
#pragma unroll
            for (int u = 0; u < US; u++)
                if (u < n)
#pragma unroll
                    for (int s = 0; s < W; s++)
                        v[u][s] = kevo_sched_load<V>(src[s], bytes, i + u * step, al);
#pragma unroll
            for (int u = 0; u < US; u++)
                if (u < n) {
                    const kevo_unit<V> o = kevo_sched_sum_unit<W, V>(v[u]);
#pragma unroll
                    for (int d = 0; d < D; d++)
                        kevo_sched_store<V>(dst[d], bytes, i + u * step, al, o);
                }
        },
        h);
}

// ---- NVLS (multimem) ----------------------------------------------------------------------------
// mc: a multicast address (ncclGetLsaMultimemPointer); every pointer 16-byte aligned and bytes a
// multiple of 16 (the caller falls back to the SM primitives otherwise). Units of 16 bytes, the
// partition of kevo_sched_copy<16, U> (same chunk): sync=cta meets SM16 phases. The switch sums
// bf16 pairs in fp32 and rounds once (its order of summation is its own).
__device__ __forceinline__ uint4 kevo_sched_mm_ld_sum(const uint8_t *mc)
{
    uint4 v;
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%0, %1, %2, %3}, "
                 "[%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(mc)
                 : "memory");
    return v;
}

__device__ __forceinline__ void kevo_sched_mm_st(uint8_t *mc, const uint4 &v)
{
    asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mc),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// dst[0, bytes) = the sum over every rank of src_mc's bytes; dst_mc: dst is a multicast address
// too (every rank gets the sum), else this rank's own memory.
template <int U>
__device__ __forceinline__ void kevo_sched_nvls_sum(uint8_t *dst, int dst_mc, const uint8_t *src_mc,
                                                    int64_t bytes, int64_t chunk)
{
    if (bytes <= 0)
        return;
    kevo_sched_for_units<U>(bytes / 16, chunk / 16, [&](int64_t i, int64_t step, int n) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n)
                v[u] = kevo_sched_mm_ld_sum(src_mc + (i + u * step) * 16);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n) {
                uint8_t *d = dst + (i + u * step) * 16;
                if (dst_mc)
                    kevo_sched_mm_st(d, v[u]);
                else
                    *reinterpret_cast<uint4 *>(d) = v[u];
            }
    });
    __threadfence_system(); // the multimem stores before the barrier's release
}

// dst_mc[0, bytes) = src[0, bytes) on every rank at once (one multimem store per unit).
template <int U>
__device__ __forceinline__ void kevo_sched_nvls_store(uint8_t *dst_mc, const uint8_t *src,
                                                      int64_t bytes, int64_t chunk)
{
    if (bytes <= 0)
        return;
    kevo_sched_for_units<U>(bytes / 16, chunk / 16, [&](int64_t i, int64_t step, int n) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n)
                v[u] = *reinterpret_cast<const uint4 *>(src + (i + u * step) * 16);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n)
                kevo_sched_mm_st(dst_mc + (i + u * step) * 16, v[u]);
    });
    __threadfence_system();
}

// ---- barriers and flags -------------------------------------------------------------------------

// Every CTA of every rank: after it, everything any CTA of any rank did before it is done and
// visible. Pad words [first, first + 1 + W): [first] counts this rank's arrivals (it grows by
// gridDim.x per launch and is never reset: the CTA that finds count % G == G - 1 is the last
// of its launch), [first + 1 + q] holds rank q's epoch. The last CTA of a rank releases the
// rank's arrival to every rank (after a system fence that orders, through the counter, the
// stores of every CTA of the rank); each CTA's threads q < W then wait for rank q. All CTAs of
// the grid must be resident at once. One barrier per slot per launch.
__device__ __forceinline__ void kevo_sched_grid_barrier(const kevo_pads &p, uint64_t first)
{
    __syncthreads();
    if (p.epoch == 0)
        __trap();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.sys;" ::: "memory");
        const unsigned long long old = atomicAdd((unsigned long long *)(p.mine + first), 1ull);
        if (old % gridDim.x == gridDim.x - 1) {
            asm volatile("fence.acq_rel.sys;" ::: "memory");
            for (int q = 0; q < p.world; q++)
                kevo_store_release_sys(kevo_peer_pad(p, q) + first + 1 + p.rank, p.epoch);
        }
    }
    if (threadIdx.x < (unsigned)p.world)
        kevo_wait_flag(p.mine + first + 1 + threadIdx.x, p.epoch);
    __syncthreads();
}

// Words a grid barrier takes in the pad.
__host__ __device__ __forceinline__ uint64_t kevo_sched_grid_barrier_words(int world)
{
    return 1 + (uint64_t)world;
}

// Per-chunk flags: the writer of a chunk raises flag `slot` of rank q once its CTA's stores of
// the chunk are done (the __syncthreads() orders the other threads' stores before thread 0's
// release); the reader waits for it before reading the chunk.
__device__ __forceinline__ void kevo_sched_chunk_signal(const kevo_pads &p, int q, uint64_t slot)
{
    __syncthreads();
    if (threadIdx.x == 0)
        kevo_signal(p, q, slot);
}

__device__ __forceinline__ void kevo_sched_chunk_wait(const kevo_pads &p, uint64_t slot)
{
    if (threadIdx.x == 0)
        kevo_wait(p, slot);
    __syncthreads();
}

// ---- LL: 4 bytes and the epoch per 8-byte word (kevo_ll.cuh) -------------------------------------

// Word i of a byte range (bytes [4i, 4i + 4), zero past the end), any alignment.
__device__ __forceinline__ uint32_t kevo_sched_word(const uint8_t *src, int64_t bytes, int64_t i)
{
    const uint8_t *p = src + 4 * i;
    const int64_t left = bytes - 4 * i;
    if (left >= 4 && ((uintptr_t)p & 3u) == 0)
        return *reinterpret_cast<const uint32_t *>(p);
    if (left >= 4 && ((uintptr_t)p & 1u) == 0)
        return (uint32_t) reinterpret_cast<const uint16_t *>(p)[0] |
               (uint32_t) reinterpret_cast<const uint16_t *>(p)[1] << 16;
    uint32_t w = 0;
#pragma unroll
    for (int b = 0; b < 4; b++)
        if (b < left)
            w |= (uint32_t)p[b] << (8 * b);
    return w;
}

__device__ __forceinline__ void kevo_sched_put_word(uint8_t *dst, int64_t bytes, int64_t i,
                                                    uint32_t w)
{
    uint8_t *p = dst + 4 * i;
    const int64_t left = bytes - 4 * i;
    if (left >= 4 && ((uintptr_t)p & 3u) == 0) {
        *reinterpret_cast<uint32_t *>(p) = w;
        return;
    }
    if (left >= 4 && ((uintptr_t)p & 1u) == 0) {
        reinterpret_cast<uint16_t *>(p)[0] = (uint16_t)w;
        reinterpret_cast<uint16_t *>(p)[1] = (uint16_t)(w >> 16);
        return;
    }
#pragma unroll
    for (int b = 0; b < 4; b++)
        if (b < left)
            p[b] = (uint8_t)(w >> (8 * b));
}

// LL words of a range: ceil(bytes / 4).
__host__ __device__ __forceinline__ int64_t kevo_sched_ll_words(int64_t bytes)
{
    return (bytes + 3) / 4;
}

// Sends src[0, bytes) as LL words into row (a peer's receive row of this launch's parity,
// kevo_ll_send). U words per thread per batch.
template <int U, class H = kevo_sched_nohook>
__device__ __forceinline__ void kevo_sched_ll_send(uint64_t *row, const uint8_t *src, int64_t bytes,
                                                   uint32_t epoch, int64_t chunk, const H &h = H())
{
    kevo_sched_for_units<U>(
        kevo_sched_ll_words(bytes), chunk / 4,
        [&](int64_t i, int64_t step, int n) {
            uint32_t w[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (u < n)
                    w[u] = kevo_sched_word(src, bytes, i + u * step);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (u < n)
                    kevo_ll_store(row + i + u * step, epoch, w[u]);
        },
        h);
}

// Polls the words of row (this rank's receive row, kevo_ll_recv) and writes them to dst.
template <int U>
__device__ __forceinline__ void kevo_sched_ll_recv(uint8_t *dst, const uint64_t *row, int64_t bytes,
                                                   uint32_t epoch, int64_t chunk)
{
    kevo_sched_for_units<U>(
        kevo_sched_ll_words(bytes), chunk / 4, [&](int64_t i, int64_t step, int n) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (u < n)
                    kevo_sched_put_word(dst, bytes, i + u * step,
                                        kevo_ll_load(row + i + u * step, epoch));
        });
}

// dst = the bf16 sum over s of rank s's words, in rank order: this rank's (r) read from own,
// the others polled from rows[s * row_words ...].
template <int W, int U, class H = kevo_sched_nohook>
__device__ __forceinline__ void kevo_sched_ll_recv_sum(uint8_t *dst, const uint8_t *own,
                                                       const uint64_t *rows, int64_t row_words,
                                                       int r, int64_t bytes, uint32_t epoch,
                                                       int64_t chunk, const H &h = H())
{
    kevo_sched_for_units<U>(
        kevo_sched_ll_words(bytes), chunk / 4,
        [&](int64_t i, int64_t step, int n) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (u >= n)
                    continue;
                const int64_t j = i + u * step;
                float lo = 0.0f, hi = 0.0f;
#pragma unroll
                for (int s = 0; s < W; s++) {
                    const uint32_t w = s == r
                                           ? kevo_sched_word(own, bytes, j)
                                           : kevo_ll_load(rows + (int64_t)s * row_words + j, epoch);
                    lo = s ? lo + kevo_ll_lo(w) : kevo_ll_lo(w); // no 0 + x: -0 stays -0
                    hi = s ? hi + kevo_ll_hi(w) : kevo_ll_hi(w);
                }
                kevo_sched_put_word(dst, bytes, j, kevo_ll_pack(lo, hi));
            }
        },
        h);
}

// ---- LL128: 128-byte lines, 120 bytes of data and an 8-byte flag ---------------------------------
//
// A line is 16 words; 8 lanes of a warp carry one: lane j < 7 bytes [16j, 16j + 16) of the
// line's 120 data bytes, lane 7 the last 8 data bytes and the flag (word 15). Writer: every
// lane stores its data, __syncwarp(), then lane 7 stores the flag (the epoch) with
// st.release.sys. Reader: lane 7 polls the flag with ld.acquire.sys (bounded), __syncwarp(),
// then every lane reads its data (volatile: not from a stale L1 line). A warp handles 4 lines
// at a time; loops are warp-uniform (the whole warp calls these). Buffers are double-buffered
// by the epoch's parity like LL's (kevo_ll_bufs with 16 words a line), and the same reuse rule
// holds.

#define KEVO_LL128_DATA 120

__host__ __device__ __forceinline__ int64_t kevo_sched_ll128_lines(int64_t bytes)
{
    return (bytes + KEVO_LL128_DATA - 1) / KEVO_LL128_DATA;
}

// Lane-piece `j` (0..7) of line l of a range: byte offset and length (16, 8 for lane 7).
__device__ __forceinline__ void kevo_sched_ll128_piece(int64_t l, int j, int64_t &off, int &len)
{
    off = l * KEVO_LL128_DATA + 16 * j;
    len = j < 7 ? 16 : 8;
}

__device__ __forceinline__ void kevo_sched_ll128_send(uint64_t *lines, const uint8_t *src,
                                                      int64_t bytes, uint64_t epoch)
{
    const int lane = threadIdx.x & 31, g = lane >> 3, j = lane & 7;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t n = kevo_sched_ll128_lines(bytes);
#pragma unroll 1
    for (int64_t l0 = warp * 4; l0 < n; l0 += warps * 4) { // warp-uniform
        const int64_t l = l0 + g;
        if (l < n) {
            int64_t off;
            int len;
            kevo_sched_ll128_piece(l, j, off, len);
            uint32_t w[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                w[k] = 4 * k < len ? kevo_sched_word(src + off, bytes - off, k) : 0u;
            uint64_t *line = lines + l * 16 + 2 * j;
            if (j < 7)
                asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line),
                             "l"((uint64_t)w[1] << 32 | w[0]), "l"((uint64_t)w[3] << 32 | w[2])
                             : "memory");
            else
                asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(line),
                             "l"((uint64_t)w[1] << 32 | w[0])
                             : "memory");
        }
        __syncwarp();
        if (l < n && j == 7)
            kevo_store_release_sys(lines + l * 16 + 15, epoch);
    }
}

__device__ __forceinline__ void kevo_sched_ll128_recv(uint8_t *dst, const uint64_t *lines,
                                                      int64_t bytes, uint64_t epoch)
{
    const int lane = threadIdx.x & 31, g = lane >> 3, j = lane & 7;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t n = kevo_sched_ll128_lines(bytes);
#pragma unroll 1
    for (int64_t l0 = warp * 4; l0 < n; l0 += warps * 4) { // warp-uniform
        const int64_t l = l0 + g;
        if (l < n && j == 7)
            kevo_wait_flag(lines + l * 16 + 15, epoch);
        __syncwarp();
        if (l < n) {
            int64_t off;
            int len;
            kevo_sched_ll128_piece(l, j, off, len);
            const uint64_t *line = lines + l * 16 + 2 * j;
            uint64_t a = 0, b = 0;
            if (j < 7)
                asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                             : "=l"(a), "=l"(b)
                             : "l"(line)
                             : "memory");
            else
                asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(a) : "l"(line) : "memory");
            const uint32_t w[4] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b,
                                   (uint32_t)(b >> 32)};
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (4 * k < len)
                    kevo_sched_put_word(dst + off, bytes - off, k, w[k]);
        }
    }
}

// dst = the bf16 sum over s of rank s's bytes, in rank order from rank 0's value (no 0 + x),
// rounded once: this rank's (r) read from own, the others from the LL128 lines of row s
// (rows + s * row_words), as kevo_sched_ll128_recv reads them. The whole warp calls it.
template <int W>
__device__ __forceinline__ void kevo_sched_ll128_recv_sum(uint8_t *dst, const uint8_t *own,
                                                          const uint64_t *rows, int64_t row_words,
                                                          int r, int64_t bytes, uint64_t epoch)
{
    const int lane = threadIdx.x & 31, g = lane >> 3, j = lane & 7;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t n = kevo_sched_ll128_lines(bytes);
#pragma unroll 1
    for (int64_t l0 = warp * 4; l0 < n; l0 += warps * 4) { // warp-uniform
        const int64_t l = l0 + g;
        int64_t off = 0;
        int len = 0;
        if (l < n)
            kevo_sched_ll128_piece(l, j, off, len);
        float acc[8];
#pragma unroll
        for (int s = 0; s < W; s++) {
            uint32_t w[4] = {0u, 0u, 0u, 0u};
            if (s == r) {
                if (l < n)
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        w[k] = 4 * k < len ? kevo_sched_word(own + off, bytes - off, k) : 0u;
            } else {
                const uint64_t *line = rows + (int64_t)s * row_words + l * 16 + 2 * j;
                if (l < n && j == 7)
                    kevo_wait_flag(rows + (int64_t)s * row_words + l * 16 + 15, epoch);
                __syncwarp();
                if (l < n) {
                    uint64_t a = 0, b = 0;
                    if (j < 7)
                        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                                     : "=l"(a), "=l"(b)
                                     : "l"(line)
                                     : "memory");
                    else
                        asm volatile("ld.volatile.global.u64 %0, [%1];"
                                     : "=l"(a)
                                     : "l"(line)
                                     : "memory");
                    w[0] = (uint32_t)a, w[1] = (uint32_t)(a >> 32);
                    w[2] = (uint32_t)b, w[3] = (uint32_t)(b >> 32);
                }
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                acc[2 * k] = s ? acc[2 * k] + kevo_ll_lo(w[k]) : kevo_ll_lo(w[k]);
                acc[2 * k + 1] = s ? acc[2 * k + 1] + kevo_ll_hi(w[k]) : kevo_ll_hi(w[k]);
            }
        }
        if (l < n)
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (4 * k < len)
                    kevo_sched_put_word(dst + off, bytes - off, k,
                                        kevo_ll_pack(acc[2 * k], acc[2 * k + 1]));
    }
}

// ---- TMA: bulk copies through shared memory (kevo_tma.cuh) ---------------------------------------
//
// A pipeline of `stages` stages of `tile` bytes of dynamic shared memory per CTA, one mbarrier
// per stage (initialised once per kernel by kevo_sched_tma_init). Tiles follow the chunked
// partition: tile k of a range belongs to CTA k mod G, so a TMA phase and an SM phase with
// chunk = tile give every byte to the same CTA. Bulk copies need 16-byte aligned addresses and
// sizes: a range whose pointers are not aligned runs the SM copy (V = 16, chunk = tile); the
// last bytes after the last 16-byte multiple go by SM stores of the CTA that owns their tile.
// The mbarriers' phase parities live in shared memory between pipelines (every thread tracks
// its own copy inside one).

struct kevo_sched_tma {
    uint8_t *smem;    // stages x tile bytes, dynamic shared memory
    uint64_t *bar;    // stages mbarriers
    uint32_t *parity; // in shared memory: bit s = the parity of stage s's next completion
    int64_t tile;
    int stages;
};

// Every thread, once per kernel before the first pipeline (the next __syncthreads() — the
// start barrier's — publishes the initialisation).
__device__ __forceinline__ void kevo_sched_tma_init(const kevo_sched_tma &t)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < t.stages; s++)
            kevo_mbar_init(&t.bar[s], 1);
        *t.parity = 0;
        kevo_fence_mbar_init();
    }
}

// Thread 0, after a barrier's acquire and before its bulk copies read peers' data.
__device__ __forceinline__ void kevo_sched_tma_acquire()
{
    if (threadIdx.x == 0)
        kevo_fence_proxy_async_global();
}

// Thread 0, after a phase's bulk stores and before a barrier publishes them: every bulk group
// completed, ordered before the generic proxy's release.
__device__ __forceinline__ void kevo_sched_tma_release()
{
    if (threadIdx.x == 0) {
        kevo_tma_wait_all();
        kevo_fence_proxy_async_global();
        asm volatile("fence.acq_rel.sys;" ::: "memory");
    }
}

__device__ __forceinline__ uint32_t kevo_sched_tma_bytes(int64_t body, int64_t pos, int64_t tile)
{
    return (uint32_t)(body - pos < tile ? body - pos : tile);
}

// dst[0, bytes) = src[0, bytes) through the pipeline: thread 0 of each CTA loads its tiles
// into the stages and stores them out (the store of tile k overlaps the loads of the next
// stages - 1 tiles); the CTA's other threads copy the last bytes. Every thread calls it.
__device__ __forceinline__ void kevo_sched_tma_copy(const kevo_sched_tma &t, uint8_t *dst,
                                                    const uint8_t *src, int64_t bytes)
{
    if (bytes <= 0)
        return;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15u) != 0) {
        kevo_sched_copy<16, 4>(dst, src, bytes, t.tile);
        return;
    }
    const int64_t body = bytes & ~(int64_t)15, G = gridDim.x, b = blockIdx.x;
    if (threadIdx.x == 0 && body > 0) {
        uint32_t par = *t.parity;
        const int64_t tiles = (body + t.tile - 1) / t.tile;
        const int64_t kc = tiles > b ? (tiles - b + G - 1) / G : 0;
        int64_t kl = 0;
        for (; kl < t.stages && kl < kc; kl++) {
            const int64_t pos = (b + kl * G) * t.tile;
            const uint32_t n = kevo_sched_tma_bytes(body, pos, t.tile);
            kevo_mbar_expect_tx(&t.bar[kl], n);
            kevo_tma_load(t.smem + kl * t.tile, src + pos, n, &t.bar[kl]);
        }
        for (int64_t k = 0; k < kc; k++) {
            const int s = (int)(k % t.stages);
            kevo_mbar_wait(&t.bar[s], (par >> s) & 1u);
            par ^= 1u << s;
            const int64_t pos = (b + k * G) * t.tile;
            kevo_tma_store(dst + pos, t.smem + s * t.tile, kevo_sched_tma_bytes(body, pos, t.tile));
            kevo_tma_commit();
            if (t.stages == 1 && kl < kc) { // one stage: refill it once this store has read it
                kevo_tma_wait_read<0>();
                const int64_t lpos = (b + kl * G) * t.tile;
                const uint32_t n = kevo_sched_tma_bytes(body, lpos, t.tile);
                kevo_mbar_expect_tx(&t.bar[0], n);
                kevo_tma_load(t.smem, src + lpos, n, &t.bar[0]);
                kl++;
            } else if (k >= 1 && kl < kc) { // refill the stage of tile k - 1 with tile kl
                kevo_tma_wait_read<1>();
                const int rs = (int)((k - 1) % t.stages);
                const int64_t lpos = (b + kl * G) * t.tile;
                const uint32_t n = kevo_sched_tma_bytes(body, lpos, t.tile);
                kevo_mbar_expect_tx(&t.bar[rs], n);
                kevo_tma_load(t.smem + rs * t.tile, src + lpos, n, &t.bar[rs]);
                kl++;
            }
        }
        kevo_tma_wait_read<0>(); // the stages are free for the next pipeline
        *t.parity = par;
    }
    // the last bytes, by the CTA that owns their tile
    if (body < bytes && (body / t.tile) % G == b)
        for (int64_t e = body + threadIdx.x; e < bytes; e += blockDim.x)
            dst[e] = src[e];
}

// dst[0, bytes) = the bf16 sum of src[0..W-1][0, bytes): tile k (tile bytes) of the range
// belongs to CTA k mod G, which takes it in W steps of tile / W bytes; a step loads the W
// sources' pieces into one stage (tile bytes) with bulk copies, then every thread sums its
// 16-byte vectors of the stage and stores them (SM stores). Every thread calls it.
template <int W>
__device__ __forceinline__ void kevo_sched_tma_sum(const kevo_sched_tma &t, uint8_t *dst,
                                                   const uint8_t *const (&src)[W], int64_t bytes)
{
    if (bytes <= 0)
        return;
    uintptr_t bits = (uintptr_t)dst;
#pragma unroll
    for (int s = 0; s < W; s++)
        bits |= (uintptr_t)src[s];
    uint8_t *const d1[1] = {dst};
    if ((bits & 15u) != 0) {
        kevo_sched_sum<W, 1, 16, 4>(d1, src, bytes, t.tile);
        return;
    }
    const int64_t body = bytes & ~(int64_t)15, G = gridDim.x, b = blockIdx.x;
    const int64_t sub = t.tile / W;               // a multiple of 16 (tile >= 4 KiB, W <= 8)
    const int64_t steps = (body + sub - 1) / sub; // over the whole range
    const int64_t tiles = (steps + W - 1) / W;
    const int64_t kc = tiles > b ? (tiles - b + G - 1) / G : 0;
    int64_t items = kc * W; // this CTA's steps
    if (kc > 0 && b + (kc - 1) * G == tiles - 1)
        items -= tiles * W - steps; // its last tile is the range's last one
    __syncthreads(); // the parity of the previous pipeline (thread 0's) is in shared memory
    uint32_t par = *t.parity;
    auto pos_of = [&](int64_t m) { return ((b + (m / W) * G) * W + m % W) * sub; };
    auto issue = [&](int64_t m) {
        const int s = (int)(m % t.stages);
        const int64_t pos = pos_of(m);
        const uint32_t n = kevo_sched_tma_bytes(body, pos, sub);
        kevo_mbar_expect_tx(&t.bar[s], n * W);
#pragma unroll
        for (int q = 0; q < W; q++)
            kevo_tma_load(t.smem + s * t.tile + q * sub, src[q] + pos, n, &t.bar[s]);
    };
    if (threadIdx.x == 0)
        for (int64_t m = 0; m < t.stages && m < items; m++)
            issue(m);
    for (int64_t m = 0; m < items; m++) {
        const int s = (int)(m % t.stages);
        kevo_mbar_wait(&t.bar[s], (par >> s) & 1u);
        par ^= 1u << s;
        const int64_t pos = pos_of(m);
        const int64_t n = kevo_sched_tma_bytes(body, pos, sub);
        const uint8_t *stage = t.smem + s * t.tile;
        for (int64_t v = threadIdx.x; v < n / 16; v += blockDim.x) {
            uint4 in[W];
#pragma unroll
            for (int q = 0; q < W; q++)
                in[q] = reinterpret_cast<const uint4 *>(stage + q * sub)[v];
            reinterpret_cast<uint4 *>(dst + pos)[v] = kevo_sum_bf16x8<W>(in);
        }
        __syncthreads(); // every thread is done with the stage
        if (threadIdx.x == 0 && m + t.stages < items)
            issue(m + t.stages);
    }
    if (threadIdx.x == 0)
        *t.parity = par;
    // the last elements, by the CTA that owns their tile
    if (body < bytes && (body / t.tile) % G == b) {
        for (int64_t e = body / 2 + threadIdx.x; e < bytes / 2; e += blockDim.x) {
            const uint16_t *s0 = reinterpret_cast<const uint16_t *>(src[0]);
            float acc = __uint_as_float((uint32_t)s0[e] << 16);
#pragma unroll
            for (int q = 1; q < W; q++)
                acc +=
                    __uint_as_float((uint32_t) reinterpret_cast<const uint16_t *>(src[q])[e] << 16);
            reinterpret_cast<__nv_bfloat16 *>(dst)[e] = __float2bfloat16_rn(acc);
        }
    }
}

// ---- fp8 e4m3 block quantisation (problems/fp8_allgather/problem.json) ---------------------------
//
// Blocks of 128 elements, one fp32 scale each: amax = max |x|, s = amax == 0 ? 1 : amax / 448
// (__fdiv_rn), q = e4m3 of __fdiv_rn(x, s) (round to nearest even, saturating: the
// cvt.rn.satfinite.e4m3x2.f32 of __nv_cvt_float2_to_fp8x2), bit for bit the reference's.
// A thread quantises a piece of 16 elements; the 8 lanes of a warp's quarter share a block
// (their amax meets by shuffles), so loops over pieces are warp-uniform.

struct kevo_sched_q16 {
    uint32_t w[4]; // 16 e4m3 bytes
    float s;       // the block's scale
};

// Piece `piece` (elements [16 piece, 16 piece + 16) of n) of x; all 32 lanes call together.
__device__ __forceinline__ kevo_sched_q16 kevo_sched_quant16(const __nv_bfloat16 *x, int64_t n,
                                                             int64_t piece)
{
    float v[16];
    const int64_t first = piece * 16;
    if (first + 16 <= n && kevo_aligned16(x + first) && kevo_aligned16(x + first + 8)) {
        const uint4 *xv = reinterpret_cast<const uint4 *>(x + first);
        const kevo_f32x8 lo = kevo_bf16x8_to_f32(xv[0]);
        const kevo_f32x8 hi = kevo_bf16x8_to_f32(xv[1]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            v[k] = lo.v[k];
            v[8 + k] = hi.v[k];
        }
    } else {
#pragma unroll
        for (int k = 0; k < 16; k++)
            v[k] = first + k < n ? __bfloat162float(x[first + k]) : 0.0f;
    }
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; k++)
        amax = fmaxf(amax, fabsf(v[k]));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    kevo_sched_q16 r;
    r.s = amax == 0.0f ? 1.0f : __fdiv_rn(amax, 448.0f);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t p0 = __nv_cvt_float2_to_fp8x2(
            make_float2(__fdiv_rn(v[4 * k], r.s), __fdiv_rn(v[4 * k + 1], r.s)), __NV_SATFINITE,
            __NV_E4M3);
        const uint32_t p1 = __nv_cvt_float2_to_fp8x2(
            make_float2(__fdiv_rn(v[4 * k + 2], r.s), __fdiv_rn(v[4 * k + 3], r.s)), __NV_SATFINITE,
            __NV_E4M3);
        r.w[k] = p0 | p1 << 16;
    }
    return r;
}

// Quantises x[0, n) (a rank's shard) into q[0, n) and scales[0, ceil(n / 128)) (the shard's
// slices, on any rank: fused into a push when they are a peer's), q stored V bytes at a time
// where aligned, byte by byte elsewhere and in the short last block. Pieces follow the
// partition in units of 16 elements (chunk in elements of q, i.e. bytes); every thread calls.
template <int V>
__device__ __forceinline__ void kevo_sched_quant(const __nv_bfloat16 *x, int64_t n, uint8_t *q,
                                                 float *scales, int64_t chunk)
{
    const int lane = threadIdx.x & 31;
    const int64_t pieces = (n + 127) / 128 * 8;
    auto one = [&](int64_t i) { // warp-uniform: i - lane is the warp's first piece
        if (i - lane >= pieces)
            return;
        const kevo_sched_q16 r = kevo_sched_quant16(x, n, i < pieces ? i : pieces - 1);
        if (i >= pieces)
            return;
        const int64_t first = i * 16;
        uint8_t *d = q + first;
        if (first + 16 <= n && ((uintptr_t)d & (V - 1)) == 0) {
            kevo_unit<16> u;
#pragma unroll
            for (int k = 0; k < 4; k++)
                u.w[k] = r.w[k];
            kevo_sched_store<16>(d, 16, 0, V, u);
        } else {
#pragma unroll
            for (int e = 0; e < 16; e++)
                if (first + e < n)
                    d[e] = (uint8_t)(r.w[e >> 2] >> (8 * (e & 3)));
        }
        if ((i & 7) == 0)
            scales[i >> 3] = r.s;
    };
    // pieces are strided with warp-uniform bounds: the last warp's lanes past the end still
    // take part in the shuffles (they quantise a repeated piece and store nothing)
    const int64_t up = (pieces + 31) / 32 * 32;
    if (chunk <= 0) {
        const int64_t nt = (int64_t)gridDim.x * blockDim.x;
#pragma unroll 1
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < up; i += nt)
            one(i);
        return;
    }
    const int64_t cp = chunk / 16; // pieces per chunk, a multiple of 32
#pragma unroll 1
    for (int64_t lo = (int64_t)blockIdx.x * cp; lo < pieces; lo += (int64_t)gridDim.x * cp)
#pragma unroll 1
        for (int64_t i = lo + threadIdx.x; i < lo + cp && i < up; i += blockDim.x)
            one(i);
}

#endif
