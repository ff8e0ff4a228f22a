// cublas_ce_pipelined.cu — gemm_reducescatter as a chunked pipeline: cuBLAS computes this
// rank's partial product on ctx->stream in the order the peers need it (the rows of rank r+1
// first, ..., its own rows last), signalling each block of a peer's rows as it completes, while
// a side stream pulls the peers' partials of this rank's rows with the copy engine as they
// arrive and sums them, block by block, with its own partial once that is computed.
//
// Rows: rank d owns the M/W rows [d M/W, (d+1) M/W) of the output, cut into B blocks of R rows
// (B = min(CHUNKS, ceil((M/W) / MIN_ROWS)), R = ceil((M/W) / B)); block j of rank d's rows is
// contiguous in P (row-major, M x N) and block j of C_d is rows [j R, ...) of C_d.
//
// One call (call c = 1, 2, ...), W ranks, in this host order; flags ready[j][q] and ack[j][q]
// of the signal pad, set by the flag kernel (kevo_pipe_flags_kernel, 1 CTA, release/acquire
// .sys, bounded waits):
//   ctx->stream: fork the side stream (an event); a flag kernel: wait until ack[0][d] >= c - 1
//                for d = rank+1 (that peer has copied block 0 of its rows from this rank's P
//                in the previous call)
//   ctx->stream, for d = rank+1, rank+2, ... (mod W), for each block j: cublasGemmEx
//                P[rows of block j of rank d] = A_r[those rows] . B_r, then a flag kernel:
//                ready[j][rank] of d's pad := c; then wait until the peer of the next such
//                GEMM has acknowledged its copy of that block from the previous call
//                (ack[j'][d'] >= c - 1)
//   side stream, for each block j of this rank's rows: a flag kernel (if j > 0:
//                ack[j - 1][rank] of every peer := c, "my copies of your block j - 1 are
//                done"; then wait until ready[j][q] >= c for every peer q), then W-1
//                cudaMemcpyAsync of peer q's partial of that block into R (copy engine, over
//                NVLink); after the last block a flag kernel: ack[B - 1][rank] of every
//                peer := c
//   ctx->stream, for each block j of its own rows: cublasGemmEx, then on the side stream
//                (after this GEMM): sum kernel C_r[block j] = the W partials in rank order,
//                fp32, one rounding
//   ctx->stream: join the side stream (an event) — the call ends when the last sum has.
//
// Why it should be fast: the reference (cuBLAS, then ncclReduceScatter) and cublas_pull_sm
// (cuBLAS, then one SM kernel) wait for the whole GEMM before moving a byte. Here a peer's
// partials of this rank's rows are computed first, so their pull (64 MiB at m8192, W = 2:
// ~170 us on the copy engine, no SM) hides under the GEMM of the other rows, and the sums of
// this rank's blocks hide under the GEMM of its next block: a call costs the GEMM, cut into
// blocks, plus one block's sum. At small M (one block per rank) it is the unfused sequence with
// more stream operations.
//
// Synchronisation, with no barrier:
//   - a peer's partial of a block is copied only after that peer's signal for it, which its
//     stream runs after that block's GEMM; this rank's own partial of block j is summed after
//     its GEMM (stream order through an event); C_r and R are written only by this rank's side
//     stream, in order; A and B are read only by its own GEMMs;
//   - peers copy their rows of this rank's P (scratch) after this rank's call may have ended,
//     so the GEMM of rank d's block j rewrites P only after d has acknowledged its copy of that
//     block from the previous call. The acknowledgements come from d's side stream right
//     after its copies (block j - 1 with the wait for block j; the last block from a flag
//     kernel of its own, which runs while the side stream would otherwise wait for this
//     rank's own-rows GEMMs), so a GEMM of call c waits at most for the end of a peer's call
//     c - 1, never for a barrier. P is one buffer: double buffering by call parity is
//     impossible when a CUDA graph replays the GEMM's output pointer.
// Flags: words [block][source rank] of the signal pad (ready; ack from B x W on) holding call
// numbers, never reset. The call number comes from the device: every flag kernel takes its
// epoch with kevo_epoch_begin, on channel 0 (ctx->stream, (W-1) B + 1 launches per call) or 1
// (side stream, B + 1 per call), and derives c from it, so a call replayed from a CUDA graph is
// a new call there too (kevo_gemm_pipeline.cuh). The side stream and the sum kernel:
// kevo_side.cuh (docs/abi.md rule 4). The cuBLAS call: kevo_cublas.cuh. P, R, the blocks, the
// side stream's state and the flag kernel: kevo_gemm_pipeline.cuh.
//
// kevo:pattern problem=gemm_reducescatter transport=ce fusion=unfused
// kevo:param CHUNKS default=4 values=1,2,4,8
// kevo:param MIN_ROWS default=256 values=64,128,256,512,1024
// kevo:param SUM_CTAS default=132 values=32,66,132,264
#define CHUNKS 4
#define MIN_ROWS 256
#define SUM_CTAS 132

#include "kevo/kernel.h"
#include "kevo_gemm_pipeline.cuh"
#include "kevo_host.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "gemm_reducescatter/cublas_ce_pipelined";

typedef __nv_bfloat16 bf16;

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K | KEVO_GEMM_SPLIT_M, INT32_MAX, 0, m, n,
                            kw);
}

int fail(const char *what, cudaError_t e)
{
    return kevo_fail(kWho, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, n, kw;
    if (W < 2 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &n, &kw))
        return 1;
    // kevo_fini frees what is made here, also after a failure
    kevo_gemm_pipeline *pl = kevo_state_new<kevo_gemm_pipeline>(ctx, kWho);
    if (!pl)
        return 1;
    if (!kevo_gemm_pipeline_blocks(ctx, kWho, m / W, CHUNKS, MIN_ROWS, pl))
        return 1;
    const size_t pbytes = (size_t)(m * n) * sizeof(bf16);
    const size_t rbytes = (size_t)(W - 1) * (size_t)(m / W * n) * sizeof(bf16); // all own rows
    return kevo_gemm_pipeline_alloc(ctx, kWho, pbytes, rbytes, pl) ? 0 : 1;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_gemm_pipeline *pl = (kevo_gemm_pipeline *)ctx->user;
    if (!pl)
        return;
    kevo_gemm_pipeline_destroy(pl);
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_gemm_pipeline *pl = kevo_state_of<kevo_gemm_pipeline>(ctx, kWho);
    const int W = ctx->world, rank = ctx->rank;
    int64_t m, n, kw;
    if (!pl || !pl->gemm_done || ctx->n_inputs < 2 || ctx->n_outputs < 1 ||
        !read_params(ctx, &m, &n, &kw) ||
        !kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, m / W * n))
        return 1;
    const int64_t mr = m / W;
    const bf16 *a = (const bf16 *)ctx->inputs[0].ptr, *b = (const bf16 *)ctx->inputs[1].ptr;
    bf16 *c = (bf16 *)ctx->outputs[0].ptr;
    bf16 *const *p = pl->p_peer;
    const int64_t nb = pl->blocks;
    const uint64_t ack = (uint64_t)nb * W; // acknowledgements [block][source rank] from here
    // flag kernels: (W-1) B + 1 per call on ctx->stream (channel 0), B + 1 on the side stream
    // (channel 1)
    const kevo_pads mp = kevo_pads_of(ctx, 0), sp = kevo_pads_of(ctx, 1);
    const uint64_t m_steps = (uint64_t)(W - 1) * nb + 1, s_steps = (uint64_t)nb + 1;
    cudaStream_t s = ctx->stream, side = pl->side.stream;
    cudaError_t e;

    if ((e = kevo_side_fork(pl->side, s)) != cudaSuccess)
        return fail("forking the side stream", e);
    // ctx->stream: the first GEMM rewrites rank+1's block 0: wait for its acknowledgement
    kevo_pipe_flags_kernel<<<1, 32, 0, s>>>(
        kevo_pipe_step(mp, m_steps, KEVO_PIPE_NONE, 0, 0, (rank + 1) % W, ack, 1));
    if (kevo_launched(kWho, "flag kernel launch") != 0)
        return 1;
    // ctx->stream: the partials of rank+1's rows, rank+2's, ..., each block signalled to its
    // owner, each flag kernel then waiting until the next GEMM's block of P is free. They come
    // first in host order too: CUDA may run two streams through one hardware queue
    // (kevo_side.cuh), so a wait kernel enqueued before them could hold them up while the peers
    // wait for their signals.
    for (int k = 1; k < W; k++) {
        const int d = (rank + k) % W;
        for (int64_t j = 0; j < nb; j++) {
            const int64_t r0 = j * pl->rows, rows = mr - r0 < pl->rows ? mr - r0 : pl->rows;
            const int64_t g0 = d * mr + r0; // first row of the block in P and A
            if (kevo_cublas_gemm_rm(ctx, kWho, rows, n, kw, a + g0 * kw, b, p[rank] + g0 * n))
                return 1;
            // the next GEMM of a peer's block: (d, j + 1), else (d + 1, 0), else none
            const bool last_of_d = j + 1 == nb, last = last_of_d && k + 1 == W;
            const int next_d = last ? KEVO_PIPE_NONE : last_of_d ? (d + 1) % W : d;
            const uint64_t next_j = last_of_d ? 0 : (uint64_t)j + 1;
            kevo_pipe_flags_kernel<<<1, 32, 0, s>>>(
                kevo_pipe_step(mp, m_steps, d, (uint64_t)j * W, 0, next_d, ack + next_j * W, 1));
            if (kevo_launched(kWho, "flag kernel launch") != 0)
                return 1;
        }
    }
    // side stream: the peers' partials of this rank's rows, block by block as they are
    // signalled, each flag kernel acknowledging the copies of the block before
    for (int64_t j = 0; j < nb; j++) {
        const int64_t r0 = j * pl->rows, rows = mr - r0 < pl->rows ? mr - r0 : pl->rows;
        kevo_pipe_flags_kernel<<<1, 32, 0, side>>>(kevo_pipe_step(
            sp, s_steps, j > 0 ? KEVO_PIPE_ALL : KEVO_PIPE_NONE,
            j > 0 ? ack + (uint64_t)(j - 1) * W : 0, 0, KEVO_PIPE_ALL, (uint64_t)j * W, 0));
        if (kevo_launched(kWho, "flag kernel launch") != 0)
            return 1;
        for (int q = 0; q < W; q++) {
            if (q == rank)
                continue;
            bf16 *slot = pl->r + ((int64_t)(q < rank ? q : q - 1) * mr + r0) * n;
            e = cudaMemcpyAsync(slot, p[q] + (rank * mr + r0) * n,
                                (size_t)(rows * n) * sizeof(bf16), cudaMemcpyDeviceToDevice, side);
            if (e != cudaSuccess)
                return fail("cudaMemcpyAsync of a peer's partial", e);
        }
    }
    // side stream: acknowledge the copies of the last block (while it would otherwise wait for
    // the own rows' GEMMs)
    kevo_pipe_flags_kernel<<<1, 32, 0, side>>>(kevo_pipe_step(
        sp, s_steps, KEVO_PIPE_ALL, ack + (uint64_t)(nb - 1) * W, 0, KEVO_PIPE_NONE, 0, 0));
    if (kevo_launched(kWho, "flag kernel launch") != 0)
        return 1;
    // ctx->stream: this rank's own rows, each block summed on the side stream after its GEMM
    for (int64_t j = 0; j < pl->blocks; j++) {
        const int64_t r0 = j * pl->rows, rows = mr - r0 < pl->rows ? mr - r0 : pl->rows;
        const int64_t g0 = rank * mr + r0;
        if (kevo_cublas_gemm_rm(ctx, kWho, rows, n, kw, a + g0 * kw, b, p[rank] + g0 * n))
            return 1;
        if ((e = kevo_stream_after(pl->gemm_done, s, side)) != cudaSuccess)
            return fail("ordering the side stream after the GEMM", e);
        kevo_sum_args sa = {};
        sa.dst = c + r0 * n;
        sa.n = rows * n;
        int vec = kevo_aligned16(sa.dst);
        for (int q = 0; q < W; q++) {
            sa.src[q] =
                q == rank ? p[q] + g0 * n : pl->r + ((int64_t)(q < rank ? q : q - 1) * mr + r0) * n;
            vec = vec && kevo_aligned16(sa.src[q]);
        }
        sa.vec = vec;
        if ((e = kevo_sum_launch(W, sa, SUM_CTAS, side)) != cudaSuccess)
            return fail("sum kernel launch", e);
    }
    if ((e = kevo_side_join(pl->side, s)) != cudaSuccess)
        return fail("joining the side stream", e);
    return 0;
}
