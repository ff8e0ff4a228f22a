/* placement.c — where each side's tensors and scratch live: in the
 * symmetric window (window.c), or in plain device memory outside it.
 *
 * NCCL's collectives take their symmetric kernels when both buffers lie in a
 * symmetric window. NCCL 2.28.3's symmetric all-gather, reduce-scatter and
 * all-reduce return wrong elements when a buffer, or a rank's block inside
 * one, does not start on a 16-byte boundary (bench/nccl_offsets.cu found
 * it; docs/problems.md, "NCCL on the window", has the cases). kevo starts
 * every tensor on a 4 KiB boundary, but a rank's block inside a tensor is
 * the problem's: so at a size where some tensor's bytes are not a multiple
 * of 16 x W (kv_shapes_ref_plain, problem.h), the reference runs on plain
 * memory, where NCCL takes its regular kernels, right at every offset.
 * Elsewhere it stays in the window, where NCCL is fastest. A self-check job
 * (kv_job.selfcheck) runs the reference again as the candidate side, on
 * plain memory shifted by KV_SELFCHECK_SHIFT bytes.
 *
 * A plain side is a copy of the window's slot layout in its own region of
 * the plain arena: region s starts at s * (layout total + 4 KiB), plus the
 * side's shift. It has no peers (peer[] NULL, window_offset SIZE_MAX), its
 * own copy of the inputs, filled with the window's, and guard bands of its
 * own, checked with the window's (checks.c). */
#include <stdint.h>

#include "worker/worker.h"

#define REGION_GAP 4096u

static size_t region_bytes(const kv_layout *l)
{
    return l->total + REGION_GAP;
}

size_t kv_placement_plain_bytes(const kv_layout *l)
{
    size_t need = 0;
    for (int s = 0; s < 2; s++)
        if (l->plain[s])
            need = (size_t)(s + 1) * region_bytes(l);
    return need;
}

char *kv_placement_base(const kv_worker *w, const kv_layout *l, int s)
{
    if (!l->plain[s])
        return w->win_base;
    return (char *)w->plain_base + (size_t)s * region_bytes(l) + l->shift[s];
}

int kv_plain_ensure(kv_worker *w, size_t bytes, kv_fail *f)
{
    if (bytes == 0 || w->plain_bytes >= bytes)
        return 0;
    kv_plain_release(w);
    cudaError_t e = cudaMalloc(&w->plain_base, bytes);
    if (e != cudaSuccess) {
        w->plain_base = NULL;
        return kv_cuda_fail(f, e, "allocating plain device memory for the reference");
    }
    w->plain_bytes = bytes;
    return 0;
}

void kv_plain_release(kv_worker *w)
{
    if (w->plain_base)
        (void)cudaFree(w->plain_base);
    w->plain_base = NULL;
    w->plain_bytes = 0;
}
