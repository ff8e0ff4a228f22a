// kevo_gemm_pipeline.cuh — the state and the flag kernel of the GEMM seeds that pipeline cuBLAS
// with copy-engine transfers (patterns/{gemm_allreduce,gemm_reducescatter}/cublas_ce_pipelined.cu):
// this rank's partial products P, which the peers pull after this rank's call may have ended, so
// that each block of P is rewritten only once every peer has acknowledged its copy of it; the
// private slots R those pulls land in; the blocks of rows the GEMM is cut into; the side stream
// and the event that orders it after a block's GEMM; and kevo_pipe_flags_kernel, the one-CTA
// kernel that signals and waits for their flags.
//
// P is a single buffer. It used to be double-buffered by call parity, but the GEMM's output
// pointer is a host value, which a CUDA graph replays unchanged, so the device cannot alternate
// it: the seeds acknowledge instead (a reader's copy of a block is done -> the writer may rewrite
// that block), with kevo_pipe_flags_kernel on both streams.
#ifndef KEVO_PATTERNS_GEMM_PIPELINE_CUH
#define KEVO_PATTERNS_GEMM_PIPELINE_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#include "kevo_cublas.cuh"
#include "kevo_side.cuh"
#include "kevo_sync.cuh"

struct kevo_gemm_pipeline {
    __nv_bfloat16 *p_peer[KEVO_MAX_RANKS]; // P, every rank's
    __nv_bfloat16 *r;                      // this rank's slots for the pulled partials
    int64_t rows, blocks;                  // rows per block, blocks
    kevo_side side;
    cudaEvent_t gemm_done;
};

// kevo_init, first: `total` rows cut into min(chunks, ceil(total / min_rows)) blocks of equal
// size (the last one shorter); the signal pad must hold two flags per block and rank (the
// block's data flags [block][rank] and acknowledgements [blocks + block][rank]).
static inline int kevo_gemm_pipeline_blocks(const kevo_ctx *ctx, const char *who, int64_t total,
                                            int64_t chunks, int64_t min_rows,
                                            kevo_gemm_pipeline *pl)
{
    int64_t blocks = (total + min_rows - 1) / min_rows;
    blocks = blocks < chunks ? blocks : chunks;
    blocks = blocks > 0 ? blocks : 1;
    pl->rows = (total + blocks - 1) / blocks;
    pl->blocks = (total + pl->rows - 1) / pl->rows;
    if ((uint64_t)2 * pl->blocks * (uint64_t)ctx->world > kevo_pads_of(ctx).words) {
        fprintf(stderr, "%s: the signal pad is too small\n", who);
        return 0;
    }
    return 1;
}

// kevo_init, then: P of pbytes (every rank's), R of rbytes (this rank's), the side stream and
// gemm_done. The sizes are the same on every rank, so is the outcome. Returns 1, or 0 after a
// message; kevo_gemm_pipeline_destroy frees what was made either way.
static inline int kevo_gemm_pipeline_alloc(kevo_ctx *ctx, const char *who, size_t pbytes,
                                           size_t rbytes, kevo_gemm_pipeline *pl)
{
    const size_t need = pbytes + 256 + rbytes + 256;
    if (ctx->scratch_bytes_left < need) {
        fprintf(stderr, "%s: scratch too small (%zu bytes left, %zu needed)\n", who,
                ctx->scratch_bytes_left, need);
        return 0;
    }
    __nv_bfloat16 *r_peer[KEVO_MAX_RANKS];
    if (!kevo_scratch_peers(ctx, who, pbytes, pl->p_peer) ||
        !kevo_scratch_peers(ctx, who, rbytes, r_peer))
        return 0;
    pl->r = r_peer[ctx->rank];
    cudaError_t e = kevo_side_create(&pl->side);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&pl->gemm_done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: creating the side stream and its events: %s\n", who,
                cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

// kevo_fini: the stream and the events (the scratch belongs to the harness).
static inline void kevo_gemm_pipeline_destroy(kevo_gemm_pipeline *pl)
{
    if (pl->gemm_done)
        cudaEventDestroy(pl->gemm_done);
    pl->gemm_done = NULL;
    kevo_side_destroy(&pl->side);
}

// ---- the pipeline's flags ----------------------------------------------------------------------
//
// The signals and the waits that pair up here come from kernels launched a different number of
// times per call (a GEMM block's "ready" and the copy it releases; a copy's acknowledgement and
// the next call's GEMM of that block), so their launches' epochs differ: a flag holds the number
// of a CALL instead. Each launch takes its epoch on the device (kevo_epoch_begin, so a call
// replayed from a CUDA graph counts as a new call) from a channel that exactly `per_call`
// launches of kevo_pipe_flags_kernel advance in every call, and nothing else: its call is then
// c = (epoch - 1) / per_call + 1, the same on every rank. Flags only grow and are never reset.
// Every rank launches the same sequence, and the ctx->stream and side-stream launches use two
// different channels (they run at the same time: kevo_side.cuh).

enum { KEVO_PIPE_ALL = -1, KEVO_PIPE_NONE = -2 };

struct kevo_pipe_flags {
    kevo_pads pads; // the channel: per_call launches of this kernel in every call
    uint64_t per_call;
    uint64_t sig_slot;  // signal: flag sig_slot + (this rank) of the peer's pad ...
    int sig_to;         // ... of peer sig_to, of every peer (KEVO_PIPE_ALL) or none
    int sig_lag;        // ... := c - sig_lag (0: this call, 1: the previous one)
    uint64_t wait_slot; // then wait: flag wait_slot + q of this rank's pad >= c - wait_lag
    int wait_for;       // for peer q = wait_for, every peer q (KEVO_PIPE_ALL) or none
    int wait_lag;
};

// One CTA of 32 threads, after this stream's earlier work (whose results the signal publishes:
// release, .sys): thread q signals peer q, then waits for peer q (acquire, .sys; bounded:
// traps after KEVO_WAIT_TIMEOUT_NS), so what this stream runs next may use, or overwrite, what
// that peer released with its flag. A value c - lag of 0 (the first call, for lag 1) is neither
// signalled nor waited for.
__global__ void __launch_bounds__(32) kevo_pipe_flags_kernel(const kevo_pipe_flags f)
{
    const kevo_pads p = kevo_epoch_begin(f.pads);
    const uint64_t call = (p.epoch - 1) / f.per_call + 1;
    const int q = threadIdx.x;
    if (q < p.world && q != p.rank) {
        if ((f.sig_to == KEVO_PIPE_ALL || f.sig_to == q) && call > (uint64_t)f.sig_lag)
            kevo_store_release_sys(kevo_peer_pad(p, q) + f.sig_slot + p.rank, call - f.sig_lag);
        if ((f.wait_for == KEVO_PIPE_ALL || f.wait_for == q) && call > (uint64_t)f.wait_lag)
            kevo_wait_flag(p.mine + f.wait_slot + q, call - f.wait_lag);
    }
    kevo_epoch_end(p);
}

// Host: the arguments of one launch (pads of the launch's channel, per_call launches per call).
static inline kevo_pipe_flags kevo_pipe_step(const kevo_pads &pads, uint64_t per_call, int sig_to,
                                             uint64_t sig_slot, int sig_lag, int wait_for,
                                             uint64_t wait_slot, int wait_lag)
{
    kevo_pipe_flags f;
    f.pads = pads;
    f.per_call = per_call;
    f.sig_slot = sig_slot;
    f.sig_to = sig_to;
    f.sig_lag = sig_lag;
    f.wait_slot = wait_slot;
    f.wait_for = wait_for;
    f.wait_lag = wait_lag;
    return f;
}

#endif
