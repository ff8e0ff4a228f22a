// expect: refused
// fork_bomb.cu — in kevo_init, forks until the system refuses, every child sleeping forever.
// The static guard refuses a candidate that starts processes (fork, exec, posix_spawn, ...)
// before it runs (docs/evaluator.md, "Runtime lookups"); thread_bomb.cu is the bomb that gets
// past it and meets RLIMIT_NPROC instead.
#include "kevo/kernel.h"

#include <stdio.h>
#include <unistd.h>

#define TAG "fork_bomb"

extern "C" int kevo_init(kevo_ctx *ctx)
{
    int n = 0;
    while (n < 100000) {
        pid_t p = fork();
        if (p < 0)
            break;
        if (p == 0)
            for (;;)
                pause();
        n++;
    }
    fprintf(stderr, TAG ": rank %d forked %d children\n", ctx->rank, n);
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
