// cublas_ce_pipelined.cu — gemm_allreduce as a chunked pipeline: cuBLAS computes this rank's
// partial product block of rows by block of rows on ctx->stream, while a side stream pulls the
// peers' partials of the blocks already done with the copy engine and sums them into C. The
// transfers hide under the GEMM of the next blocks; only the last block's pull and sum remain.
//
// Blocks: the M rows are cut into B blocks of R rows (B = min(CHUNKS, ceil(M / MIN_ROWS)),
// R = ceil(M / B)); block i is rows [i R, min(M, (i+1) R)), contiguous in P and C (row-major).
//
// One call (call c = 1, 2, ...), W ranks; flags ready[i][q] and ack[i][q] of the signal pad,
// set by the flag kernel (kevo_pipe_flags_kernel, 1 CTA, release/acquire .sys, bounded waits):
//   ctx->stream: fork the side stream (an event); then
//     flag kernel        ack[B-1][rank] of every peer := c - 1 ("my copies of your last block
//                        of call c - 1 are done": this rank's side stream of that call has
//                        joined); then wait until ack[0][q] >= c - 1 for every peer q (every
//                        peer has copied block 0 of this rank's P of the previous call)
//   then for each block i:
//     cublasGemmEx       P[block i] = A_r[block i] . B_r (this rank's partial, bf16, fp32 acc.)
//     flag kernel        ready[i][rank] of every peer's pad := c ("my partial of block i is
//                        complete"); then, if i + 1 < B, wait until ack[i + 1][q] >= c - 1 for
//                        every peer q (block i + 1 of P is free for this call's GEMM)
//     event gemm_done    for the side stream
//   side stream, for each block i:
//     wait for gemm_done (this rank's own partial of block i)
//     flag kernel        if i > 0, ack[i - 1][rank] of every peer := c ("my copies of your
//                        block i - 1 are done"); then wait until ready[i][q] >= c for every
//                        peer q
//     W-1 cudaMemcpyAsync  P_q[block i] -> R slot of q (copy engine, over NVLink)
//     sum kernel         C[block i] = sum of the W partials in rank order, fp32, one rounding
//                        (the same bits on every rank)
//   ctx->stream: join the side stream (an event) — the call ends when the last sum has.
//
// Why it should be fast: the reference is cuBLAS then NCCL's all-reduce of the whole C, and
// cublas_oneshot_sm is cuBLAS then one SM all-reduce kernel: both wait for the whole GEMM
// before the first byte moves (at m8192, C is 128 MiB: ~590 us of NCCL, ~340 us of SM loads
// after ~2.7 ms of GEMM). Here the copy engine moves block i while the SMs compute block i+1
// (the copy engines use no SM; the sums are short, memory-bound kernels), so a call costs the
// GEMM plus one block's pull and sum (~16 MiB at m8192: ~45 us + ~10 us) plus the GEMM's loss
// from being cut into blocks. At small M (one block) it is the unfused sequence with more
// stream operations, and loses to cublas_oneshot_sm.
//
// Synchronisation, with no barrier:
//   - a peer's partial of block i is read (by this rank's copy) only after that peer's signal
//     for block i, which its stream runs after its GEMM of block i;
//   - this rank's own partial of block i is read (by its sum) after gemm_done of block i;
//   - C and R are written only by this rank's side stream, in order; A and B only read by its
//     own GEMMs;
//   - peers copy this rank's P (scratch) after this rank's call may have ended, so a block of P
//     is rewritten only after every peer has acknowledged its copy of that block from the
//     previous call: the copies of block i < B - 1 are acknowledged by the side stream's next
//     flag kernel (after the sum of block i, long before this rank's next call needs the
//     block), those of the last block by the first flag kernel of the peer's next call (its
//     side stream of the call before has joined by then). P is one buffer: double buffering
//     by call parity is impossible when a CUDA graph replays the GEMM's output pointer. With one
//     block (small M) the first flag kernel waits for every peer to have entered the call, as
//     a start barrier would; with more, its wait is for acknowledgements sent long before.
// Flags: words [block][source rank] of the signal pad (ready; ack from B x W on) holding call
// numbers, never reset. The call number comes from the device: every flag kernel takes its
// epoch with kevo_epoch_begin, on channel 0 (ctx->stream, B + 1 launches per call) or 1 (side
// stream, B per call), and derives c from it, so a call replayed from a CUDA graph is a new
// call there too (kevo_gemm_pipeline.cuh). A side stream forked from ctx->stream and joined back
// (docs/abi.md rule 4) and the sum kernel: kevo_side.cuh. The cuBLAS call: kevo_cublas.cuh. P,
// R, the blocks, the side stream's state and the flag kernel: kevo_gemm_pipeline.cuh.
//
// kevo:pattern problem=gemm_allreduce transport=ce fusion=unfused
// kevo:param CHUNKS default=8 values=2,4,8,16
// kevo:param MIN_ROWS default=256 values=64,128,256,512,1024
// kevo:param SUM_CTAS default=132 values=32,66,132,264
#define CHUNKS 8
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

constexpr const char *kWho = "gemm_allreduce/cublas_ce_pipelined";

typedef __nv_bfloat16 bf16;

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K, INT32_MAX, 0, m, n, kw);
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
    if (!kevo_gemm_pipeline_blocks(ctx, kWho, m, CHUNKS, MIN_ROWS, pl))
        return 1;
    const size_t pbytes = (size_t)(m * n) * sizeof(bf16);
    const size_t rbytes = (size_t)(W - 1) * (size_t)(pl->rows * n) * sizeof(bf16); // a block
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
        !read_params(ctx, &m, &n, &kw) || !kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, m * n))
        return 1;
    const bf16 *a = (const bf16 *)ctx->inputs[0].ptr, *b = (const bf16 *)ctx->inputs[1].ptr;
    bf16 *c = (bf16 *)ctx->outputs[0].ptr;
    bf16 *const *p = pl->p_peer;
    const int64_t nb = pl->blocks;
    const uint64_t ack = (uint64_t)nb * W; // acknowledgements [block][source rank] from here
    // flag kernels: B + 1 per call on ctx->stream (channel 0), B on the side stream (channel 1)
    const kevo_pads mp = kevo_pads_of(ctx, 0), sp = kevo_pads_of(ctx, 1);
    const uint64_t m_steps = (uint64_t)nb + 1, s_steps = (uint64_t)nb;
    cudaStream_t s = ctx->stream, side = pl->side.stream;
    cudaError_t e;

    if ((e = kevo_side_fork(pl->side, s)) != cudaSuccess)
        return fail("forking the side stream", e);
    // ctx->stream: acknowledge the copies of the previous call's last block (this rank's side
    // stream of that call has joined), then wait until block 0 of P is free
    kevo_pipe_flags_kernel<<<1, 32, 0, s>>>(kevo_pipe_step(
        mp, m_steps, KEVO_PIPE_ALL, ack + (uint64_t)(nb - 1) * W, 1, KEVO_PIPE_ALL, ack, 1));
    if (kevo_launched(kWho, "flag kernel launch") != 0)
        return 1;
    for (int64_t i = 0; i < nb; i++) {
        const int64_t r0 = i * pl->rows, rows = m - r0 < pl->rows ? m - r0 : pl->rows;
        const int64_t off = r0 * n, len = rows * n;
        const uint64_t slots = (uint64_t)i * W; // flags [block i][source rank]
        // ctx->stream: this rank's partial of block i, then "ready" to every peer and the wait
        // until block i + 1 of P is free
        if (kevo_cublas_gemm_rm(ctx, kWho, rows, n, kw, a + r0 * kw, b, p[rank] + off))
            return 1;
        kevo_pipe_flags_kernel<<<1, 32, 0, s>>>(
            kevo_pipe_step(mp, m_steps, KEVO_PIPE_ALL, slots, 0,
                           i + 1 < nb ? KEVO_PIPE_ALL : KEVO_PIPE_NONE, ack + slots + W, 1));
        if (kevo_launched(kWho, "flag kernel launch") != 0)
            return 1;
        // side stream: after the own partial, acknowledge the copies of block i - 1 and wait
        // for the peers' partials of block i, then pull them and sum
        if ((e = kevo_stream_after(pl->gemm_done, s, side)) != cudaSuccess)
            return fail("ordering the side stream after the GEMM", e);
        kevo_pipe_flags_kernel<<<1, 32, 0, side>>>(
            kevo_pipe_step(sp, s_steps, i > 0 ? KEVO_PIPE_ALL : KEVO_PIPE_NONE,
                           i > 0 ? ack + slots - W : 0, 0, KEVO_PIPE_ALL, slots, 0));
        if (kevo_launched(kWho, "flag kernel launch") != 0)
            return 1;
        kevo_sum_args sa = {};
        sa.dst = c + off;
        sa.n = len;
        int vec = kevo_aligned16(sa.dst);
        for (int q = 0; q < W; q++) {
            if (q == rank) {
                sa.src[q] = p[q] + off;
            } else {
                bf16 *slot = pl->r + (int64_t)(q < rank ? q : q - 1) * pl->rows * n;
                e = cudaMemcpyAsync(slot, p[q] + off, (size_t)len * sizeof(bf16),
                                    cudaMemcpyDeviceToDevice, side);
                if (e != cudaSuccess)
                    return fail("cudaMemcpyAsync of a peer's partial", e);
                sa.src[q] = slot;
            }
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
