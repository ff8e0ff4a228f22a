// expect: ok
// flood_output.cu — in its first kevo_init, every rank writes 1 GiB to stdout and 1 GiB to
// stderr, then computes a correct all-reduce. The supervisor drains each worker's output
// through a pipe and keeps only the first and the last evaluation.worker_output_kib of each
// job in the worker's log, with a line saying how much was cut: the flood costs time, never
// the disk. The GPU test checks the logs' growth after it.
#include "kevo/kernel.h"

#include <stdio.h>
#include <string.h>

#define TAG "flood_output"

extern "C" int kevo_init(kevo_ctx *ctx)
{
    static int flooded;
    if (flooded++)
        return 0;
    static char line[1 << 16];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    for (size_t done = 0; done < ((size_t)1 << 30); done += sizeof line) {
        if (fwrite(line, 1, sizeof line, stdout) != sizeof line ||
            fwrite(line, 1, sizeof line, stderr) != sizeof line)
            return 1;
    }
    fflush(stdout);
    fprintf(stderr, TAG ": rank %d wrote 2 GiB\n", ctx->rank);
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s: ncclAllReduce: %s\n", TAG, ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
