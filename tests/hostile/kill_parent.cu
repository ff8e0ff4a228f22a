// expect: ok
// kill_parent.cu — in kevo_init, every rank sends SIGKILL to its parent, the supervisor (in a
// search, kevo run itself). Confined workers cannot signal outside their Landlock domain
// (ABI >= 6), and as root they run under a uid of their own. If the signal were delivered, the
// supervisor would die and the test with it; kill's error is printed and the call goes on to
// a correct all-reduce.
#include "kevo/kernel.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG "kill_parent"

extern "C" int kevo_init(kevo_ctx *ctx)
{
    pid_t parent = getppid();
    if (kill(parent, SIGKILL) == 0) {
        fprintf(stderr, TAG ": ESCAPED: rank %d killed its parent %d\n", ctx->rank, (int)parent);
        return 1;
    }
    fprintf(stderr, TAG ": kill(%d, SIGKILL): %s\n", (int)parent, strerror(errno));
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
