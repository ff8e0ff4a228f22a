// expect: refused
// driver_entry_point.cu — in kevo_init, assembles the name of a driver entry point from pieces
// at run time and looks it up with cudaGetDriverEntryPoint, as in issue 14: the name appears
// nowhere in the text, so neither the source scan for NVLink group names, nor the imports, nor
// the SASS show what it reaches. It never calls what it finds, and kevo_run is a correct
// all-reduce. The static guard refuses it before it runs: the lookup itself is the door
// (docs/evaluator.md, "Runtime lookups").
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", "cuMulti", "cast", "GetGranularity");
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
    fprintf(stderr, "driver_entry_point: %s: %s, %s\n", name, cudaGetErrorString(e),
            found == cudaDriverEntryPointSuccess && fn ? "found" : "not found");
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "driver_entry_point: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
