// expect: ok
// parent_fds.cu — in kevo_init (rank 0), walks /proc/<parent>/fd, the files its supervisor holds
// open (in a search: the archive, the event log, the worker logs), and writes 64 KiB of junk
// over the start of every one it can open for writing, as the candidate in issue 14 did to a
// running search's archive. Confined workers cannot: Landlock keeps them out of another
// domain's /proc entries and out of every path but their own scratch, and as root they run
// under their own uid. If any write gets through, kevo_init says ESCAPED and fails, so the
// verdict is runtime_error instead of ok; kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG "parent_fds"

extern "C" int kevo_init(kevo_ctx *ctx)
{
    if (ctx->rank != 0)
        return 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)getppid());
    DIR *d = opendir(dir);
    if (!d) {
        perror(TAG ": opendir of the parent's fds (refused, as it should be)");
        return 0;
    }
    static char junk[65536];
    memset(junk, 0x5a, sizeof junk);
    int escaped = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            continue;
        if (pwrite(fd, junk, sizeof junk, 0) > 0) {
            fprintf(stderr, TAG ": ESCAPED: wrote junk into the parent's fd %s\n", e->d_name);
            escaped = 1;
        }
        close(fd);
    }
    closedir(d);
    return escaped;
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
