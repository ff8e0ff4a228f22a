// expect: runtime_error
// thread_bomb.cu — in kevo_init, starts threads that sleep forever until the system refuses one
// (at most 100,000): a fork bomb made of threads, which the static guard cannot refuse (fork
// itself is refused: fork_bomb.cu). Confined workers run with RLIMIT_NPROC, which binds even
// where kevo runs as root because the workers then have a uid of their own: pthread_create
// fails with EAGAIN once the uid runs RLIMIT_NPROC tasks; kevo_init says how many it got and
// returns 1 (runtime_error), and the group is killed and restarted, threads and all. Unbounded
// (or refused for any other reason), it returns 0, which the test reads as ok: the wrong verdict.
#include "kevo/kernel.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG "thread_bomb"

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    /* small, but room for the static TLS of CUDA's libraries (a 64 KiB stack is EINVAL) */
    pthread_attr_setstacksize(&a, 1 << 20);
    int n = 0, rc = 0;
    for (; n < 100000; n++) {
        pthread_t t;
        if ((rc = pthread_create(&t, &a, sleeper, NULL)) != 0)
            break;
        pthread_detach(t);
    }
    pthread_attr_destroy(&a);
    fprintf(stderr, TAG ": rank %d started %d threads; then: %s\n", ctx->rank, n,
            rc ? strerror(rc) : "stopped at its own limit (NOT bounded)");
    return rc == EAGAIN; /* only the limit's refusal is the verdict the test expects */
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
