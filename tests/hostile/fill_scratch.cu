// expect: ok
// fill_scratch.cu — in its first kevo_init, every rank writes 64 MiB files into its working
// directory until a write fails (at most 64 GiB), as a candidate that dumps data in a loop
// would. A confined worker's working directory is its scratch, a private tmpfs of
// evaluation.scratch_mib: the writes stop with ENOSPC there, and the disk never sees them. If
// 64 GiB get written, kevo_init says ESCAPED and fails (runtime_error instead of ok). The
// files go with the worker's mount namespace when it exits.
#include "kevo/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG "fill_scratch"

extern "C" int kevo_init(kevo_ctx *ctx)
{
    static int filled;
    if (filled++)
        return 0;
    signal(SIGXFSZ, SIG_IGN); /* a file past RLIMIT_FSIZE: EFBIG, not a kill */
    static char block[1 << 20];
    memset(block, 0x42, sizeof block);
    long long written = 0;
    int err = 0;
    for (int f = 0; f < 1024 && !err; f++) {
        char name[64];
        snprintf(name, sizeof name, "fill-%d.bin", f);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            err = errno;
            break;
        }
        for (int i = 0; i < 64; i++) {
            ssize_t w = write(fd, block, sizeof block);
            if (w < 0) {
                err = errno;
                break;
            }
            written += w;
        }
        close(fd);
    }
    fprintf(stderr, TAG ": rank %d wrote %lld MiB, then: %s\n", ctx->rank, written >> 20,
            err ? strerror(err) : "its own limit");
    if (!err) {
        fprintf(stderr, TAG ": ESCAPED: 64 GiB written without a refusal\n");
        return 1;
    }
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
