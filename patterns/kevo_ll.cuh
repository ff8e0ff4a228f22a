// kevo_ll.cuh — the LL ("low latency") protocol for candidates and patterns: data travels in
// 8-byte words that carry their own flag, (epoch << 32) | 4 bytes of data, written with one
// 64-bit store, so the data and the flag of a word arrive together and a reader needs no
// separate flag, fence or barrier: it polls the word until the epoch is this call's.
//
// Costs twice the bytes of the data on the link, so it pays at the latency-bound sizes only.
// Receive buffers are double-buffered by the parity of the launch's epoch and zeroed once (the
// harness zeroes scratch per context). Epochs and parity come from the device
// (kevo_epoch_begin, kevo_sync.cuh), so a call replayed from a CUDA graph gets new ones; the
// word carries the epoch's low 32 bits. A sender may overwrite a buffer of parity p only once
// its reader is done with launch e - 2: guaranteed when every rank also receives from that
// reader in launch e - 1 (all-gather, reduce-scatter, all-to-all), otherwise the reader must
// acknowledge (see broadcast/ll_sm.cu).
#ifndef KEVO_PATTERNS_LL_CUH
#define KEVO_PATTERNS_LL_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#include "kevo_sync.cuh"

__device__ __forceinline__ void kevo_ll_store(uint64_t *p, uint32_t epoch, uint32_t data)
{
    const uint64_t v = (uint64_t)epoch << 32 | data;
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Waits until the word at p carries `epoch` (bounded: KEVO_WAIT_TIMEOUT_NS, then __trap) and
// returns its data. Epoch 0 (no kevo_epoch_begin) traps at once.
__device__ __forceinline__ uint32_t kevo_ll_load(const uint64_t *p, uint32_t epoch)
{
    if (epoch == 0)
        __trap();
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    if ((uint32_t)(v >> 32) == epoch)
        return (uint32_t)v;
    const unsigned long long t0 = kevo_globaltimer_ns();
    for (;;) {
        asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        if ((uint32_t)(v >> 32) == epoch)
            return (uint32_t)v;
        if (kevo_globaltimer_ns() - t0 > KEVO_WAIT_TIMEOUT_NS)
            __trap();
    }
}

// Word i of n 16-bit elements: elements 2i and 2i + 1 (0 past the end, odd n).
__device__ __forceinline__ uint32_t kevo_ll_word(const uint16_t *s, int64_t n, int64_t i)
{
    const uint32_t lo = s[2 * i];
    const uint32_t hi = 2 * i + 1 < n ? s[2 * i + 1] : 0u;
    return lo | hi << 16;
}

// Writes word w as elements 2i and 2i + 1 of n (one 4-byte store when aligned).
__device__ __forceinline__ void kevo_ll_put(uint16_t *dst, int64_t n, int64_t i, uint32_t w)
{
    uint16_t *d = dst + 2 * i;
    if (2 * i + 1 < n && ((uintptr_t)d & 3u) == 0) {
        *reinterpret_cast<uint32_t *>(d) = w;
        return;
    }
    d[0] = (uint16_t)w;
    if (2 * i + 1 < n)
        d[1] = (uint16_t)(w >> 16);
}

// The two bf16 of a word as fp32 (element 2i in the low half), and two fp32 rounded (nearest
// even) back into one word: for seeds that sum words as they arrive.
__device__ __forceinline__ float kevo_ll_lo(uint32_t w)
{
    return __uint_as_float(w << 16);
}

__device__ __forceinline__ float kevo_ll_hi(uint32_t w)
{
    return __uint_as_float(w & 0xffff0000u);
}

__device__ __forceinline__ uint32_t kevo_ll_pack(float lo, float hi)
{
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | h << 16;
}

// ---- host side ------------------------------------------------------------------------------

// Receive buffers in symmetric scratch: per epoch parity, `rows` rows of `words` LL words
// (a row per source rank, or one row for a single sender).
struct kevo_ll_bufs {
    int64_t rows, words;
    uint64_t *mine;                 // [2][rows][words]
    uint64_t *peer[KEVO_MAX_RANKS]; // every rank's
};

// kevo_init: the buffers, when a rank's data (data_bytes) is at most max_bytes and the scratch
// holds them. 1: allocated; 0: not at this size (the caller takes its other path); -1: failed.
static inline int kevo_ll_alloc(kevo_ctx *ctx, const char *who, int64_t data_bytes,
                                int64_t max_bytes, int64_t rows, int64_t words, kevo_ll_bufs *b)
{
    b->rows = rows;
    b->words = words;
    const size_t bytes = (size_t)2 * rows * words * sizeof(uint64_t);
    if (data_bytes > max_bytes || bytes > ctx->scratch_bytes_left)
        return 0;
    void *peers[KEVO_MAX_RANKS];
    if (ctx->scratch_alloc(ctx, bytes, (void **)&b->mine, peers, NULL) != 0) {
        fprintf(stderr, "%s: scratch_alloc(%zu) failed\n", who, bytes);
        return -1;
    }
    for (int q = 0; q < ctx->world && q < KEVO_MAX_RANKS; q++)
        b->peer[q] = (uint64_t *)peers[q];
    return 1;
}

// Device: this rank's receive buffer for the launch's epoch (kevo_epoch_begin), and row `row`
// of rank q's. The parity is the epoch's: the host's call_index would repeat on graph replays.
__device__ __forceinline__ uint64_t *kevo_ll_recv(const kevo_ll_bufs &b, uint64_t epoch)
{
    return b.mine + (int64_t)(epoch & 1) * b.rows * b.words;
}

__device__ __forceinline__ uint64_t *kevo_ll_send(const kevo_ll_bufs &b, uint64_t epoch, int q,
                                                  int row)
{
    return b.peer[q] + ((int64_t)(epoch & 1) * b.rows + row) * b.words;
}

// The grid of an LL kernel: one word per thread while that fits, at most `most` CTAs (all
// resident: a CTA that waits for words must not keep their sender from being scheduled).
static inline int64_t kevo_ll_grid(int64_t words, int threads, int64_t most)
{
    const int64_t grid = (words + threads - 1) / threads;
    return grid < most ? grid : most;
}

#endif
