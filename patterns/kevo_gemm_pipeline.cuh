// kevo_gemm_pipeline.cuh — the host state of the GEMM seeds that pipeline cuBLAS with copy-engine
// transfers (patterns/{gemm_allreduce,gemm_reducescatter}/cublas_ce_pipelined.cu): this rank's
// partial products P, double buffered by call parity because the peers pull them after this
// rank's call may have ended; the private slots R those pulls land in; the blocks of rows the
// GEMM is cut into; the side stream and the event that orders it after a block's GEMM.
#ifndef KEVO_PATTERNS_GEMM_PIPELINE_CUH
#define KEVO_PATTERNS_GEMM_PIPELINE_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#include "kevo_cublas.cuh"
#include "kevo_side.cuh"

struct kevo_gemm_pipeline {
    __nv_bfloat16 *p_peer[2][KEVO_MAX_RANKS]; // P buffers by call parity, every rank's
    __nv_bfloat16 *r;                         // this rank's slots for the pulled partials
    int64_t rows, blocks;                     // rows per block, blocks
    kevo_side side;
    cudaEvent_t gemm_done;
};

// kevo_init, first: `total` rows cut into min(chunks, ceil(total / min_rows)) blocks of equal
// size (the last one shorter); the signal pad must hold a flag per block and rank.
static inline int kevo_gemm_pipeline_blocks(const kevo_ctx *ctx, const char *who, int64_t total,
                                            int64_t chunks, int64_t min_rows,
                                            kevo_gemm_pipeline *pl)
{
    int64_t blocks = (total + min_rows - 1) / min_rows;
    blocks = blocks < chunks ? blocks : chunks;
    blocks = blocks > 0 ? blocks : 1;
    pl->rows = (total + blocks - 1) / blocks;
    pl->blocks = (total + pl->rows - 1) / pl->rows;
    if ((uint64_t)pl->blocks * (uint64_t)ctx->world > ctx->signal_words) {
        fprintf(stderr, "%s: the signal pad is too small\n", who);
        return 0;
    }
    return 1;
}

// kevo_init, then: two P buffers of pbytes (every rank's), R of rbytes (this rank's), the side
// stream and gemm_done. The sizes are the same on every rank, so is the outcome. Returns 1, or 0
// after a message; kevo_gemm_pipeline_destroy frees what was made either way.
static inline int kevo_gemm_pipeline_alloc(kevo_ctx *ctx, const char *who, size_t pbytes,
                                           size_t rbytes, kevo_gemm_pipeline *pl)
{
    const size_t need = 2 * (pbytes + 256) + rbytes + 256;
    if (ctx->scratch_bytes_left < need) {
        fprintf(stderr, "%s: scratch too small (%zu bytes left, %zu needed)\n", who,
                ctx->scratch_bytes_left, need);
        return 0;
    }
    __nv_bfloat16 *r_peer[KEVO_MAX_RANKS];
    if (kevo_scratch_sets(ctx, who, pbytes, pl->p_peer) != 2 ||
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

#endif
