// reference.cu of empty_kernel — one empty kernel per call, nothing else: what remains of a
// call's time is the timer's own floor (a launch from the host per call, or a kernel node of a
// replayed graph). y is not written; kevo baseline only times the reference.
#include "kevo/kernel.h"

namespace
{
__global__ void empty_kernel()
{
}
} // namespace

extern "C" int kevo_run(kevo_ctx *ctx)
{
    empty_kernel<<<1, 32, 0, ctx->stream>>>();
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
