// cublas_ce_pipelined.cu — gemm_allreduce as a chunked pipeline: cuBLAS computes this rank's
// partial product block of rows by block of rows on ctx->stream, while a side stream pulls the
// peers' partials of the blocks already done with the copy engine and sums them into C. The
// transfers hide under the GEMM of the next blocks; only the last block's pull and sum remain.
//
// Blocks: the M rows are cut into B blocks of R rows (B = min(CHUNKS, ceil(M / MIN_ROWS)),
// R = ceil(M / B)); block i is rows [i R, min(M, (i+1) R)), contiguous in P and C (row-major).
//
// One call (call parity c & 1 picks the P buffer), W ranks:
//   ctx->stream: fork the side stream (an event); then for each block i:
//     cublasGemmEx       P[block i] = A_r[block i] . B_r (this rank's partial, bf16, fp32 acc.)
//     signal kernel      1 CTA: flag [i][rank] of every peer's pad := epoch (release, .sys):
//                        "my partial of block i is complete"
//     event gemm_done    for the side stream
//   side stream, for each block i:
//     wait for gemm_done (this rank's own partial of block i)
//     wait kernel        1 CTA: flag [i][q] of this rank's pad >= epoch for every peer q
//                        (acquire, .sys; bounded: traps after 5 s)
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
//   - peers read this rank's P (scratch) after this rank's call may have ended, so P is double
//     buffered by call parity: this rank's GEMM of call c + 2 starts after its call c + 1 ended,
//     which waited for every peer's signals of call c + 1, which each peer sent after its call c
//     ended (its side stream, and with it its pulls of call c, joined before).
// Flags: words [block][source rank] of the signal pad, epochs (call_index + 1), never reset.
// A side stream forked from ctx->stream and joined back (docs/abi.md rule 4), the flag kernels
// and the sum kernel: kevo_side.cuh. The cuBLAS call: kevo_cublas.cuh. The P buffers, R, the
// blocks and the side stream's state: kevo_gemm_pipeline.cuh.
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

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr const char *kWho = "gemm_allreduce cublas_ce_pipelined";

typedef __nv_bfloat16 bf16;

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K, INT32_MAX, 0, m, n, kw);
}

int fail(const char *what, cudaError_t e)
{
    fprintf(stderr, "%s: %s: %s\n", kWho, what, cudaGetErrorString(e));
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, n, kw;
    if (W < 2 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &n, &kw))
        return 1;
    kevo_gemm_pipeline *pl = (kevo_gemm_pipeline *)calloc(1, sizeof *pl);
    if (!pl) {
        fprintf(stderr, "%s: out of host memory\n", kWho);
        return 1;
    }
    ctx->user = pl; // kevo_fini frees what is made here, also after a failure
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
    free(pl);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_gemm_pipeline *pl = (const kevo_gemm_pipeline *)ctx->user;
    const int W = ctx->world, rank = ctx->rank;
    int64_t m, n, kw;
    if (!pl || !pl->gemm_done || ctx->n_inputs < 2 || ctx->n_outputs < 1 ||
        !read_params(ctx, &m, &n, &kw) ||
        !kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, m * n))
        return 1;
    const bf16 *a = (const bf16 *)ctx->inputs[0].ptr, *b = (const bf16 *)ctx->inputs[1].ptr;
    bf16 *c = (bf16 *)ctx->outputs[0].ptr;
    bf16 *const *p = pl->p_peer[ctx->call_index & 1];
    const kevo_pads pads = kevo_pads_of(ctx);
    cudaStream_t s = ctx->stream, side = pl->side.stream;
    cudaError_t e;

    if ((e = kevo_side_fork(pl->side, s)) != cudaSuccess)
        return fail("forking the side stream", e);
    for (int64_t i = 0; i < pl->blocks; i++) {
        const int64_t r0 = i * pl->rows, rows = m - r0 < pl->rows ? m - r0 : pl->rows;
        const int64_t off = r0 * n, len = rows * n;
        const uint64_t slots = (uint64_t)i * W; // flags [block i][source rank]
        // ctx->stream: this rank's partial of block i, then the signal to every peer
        if (kevo_cublas_gemm_rm(ctx, kWho, rows, n, kw, a + r0 * kw, b, p[rank] + off))
            return 1;
        kevo_signal_kernel<<<1, 32, 0, s>>>(pads, -1, slots);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return fail("signal kernel launch", e);
        // side stream: after the own partial and the peers' signals, pull theirs and sum
        if ((e = kevo_stream_after(pl->gemm_done, s, side)) != cudaSuccess)
            return fail("ordering the side stream after the GEMM", e);
        kevo_wait_kernel<<<1, 32, 0, side>>>(pads, slots);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return fail("wait kernel launch", e);
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
