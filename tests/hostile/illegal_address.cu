// expect: runtime_error
// illegal_address.cu — a kernel stores to address 0x10, which is mapped nowhere.
// The captured call records the launch without running it; the first checked call runs it and
// the GPU raises cudaErrorIllegalAddress, a sticky error: the worker's cudaStreamSynchronize on
// ctx->stream returns it and the job ends as "runtime_error" (every rank faults alike, so no
// rank is left waiting). The worker is not trusted afterwards and is restarted.
#include "kevo/kernel.h"

#include <stdint.h>

__global__ void poke(int *where)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *(volatile int *)where = 1;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    poke<<<1, 32, 0, ctx->stream>>>(reinterpret_cast<int *>((uintptr_t)0x10));
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
