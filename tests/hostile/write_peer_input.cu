// expect: mismatch
// write_peer_input.cu — computes y correctly (ncclAllReduce), then flips the sign bit of the
// first element of the next rank's x through ctx->inputs[0].peer[(rank + 1) % W]. Inputs are
// read-only on every rank, the peers' included: the next rank's input checksum no longer
// matches after the call (or, if the store raced with that rank's reads, its y is wrong too),
// the ranks agree that one of them failed, and the job is a "mismatch".
#include "kevo/kernel.h"

#include <stdint.h>
#include <stdio.h>

__global__ void flip_sign(uint16_t *p)
{
    if (threadIdx.x == 0)
        *p ^= 0x8000u;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "write_peer_input: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    int next = (ctx->rank + 1) % ctx->world;
    flip_sign<<<1, 32, 0, ctx->stream>>>((uint16_t *)x->peer[next]);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
