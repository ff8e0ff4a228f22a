// expect: ok
// run_dir.cu — in kevo_init (rank 0), looks for the run directory where a user would keep it:
// from the working directory the search was started in ($PWD, /proc/<parent>/cwd) and from its
// own working directory upwards, every runs/<name>/archive.mdb, and overwrites the start of
// each one it can open for writing. Confined workers start in their own scratch (a private
// tmpfs), without PWD in their environment, and Landlock denies every path outside the
// system's files, the group's inbox and the scratch. If any write gets through, kevo_init says
// ESCAPED and fails (runtime_error instead of ok); kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG "run_dir"

static int attack(const char *base)
{
    char runs[4200];
    snprintf(runs, sizeof runs, "%s/runs", base);
    DIR *d = opendir(runs);
    if (!d) {
        fprintf(stderr, TAG ": %s: cannot list it\n", runs);
        return 0;
    }
    int escaped = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[4600];
        snprintf(path, sizeof path, "%s/%s/archive.mdb", runs, e->d_name);
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            continue;
        static const char junk[4096] = "kevo hostile candidate";
        if (pwrite(fd, junk, sizeof junk, 0) > 0) {
            fprintf(stderr, TAG ": ESCAPED: wrote into %s\n", path);
            escaped = 1;
        }
        close(fd);
    }
    closedir(d);
    return escaped;
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    if (ctx->rank != 0)
        return 0;
    int escaped = 0;
    const char *pwd = getenv("PWD");
    if (pwd)
        escaped |= attack(pwd);
    char link[64], cwd[4096];
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)getppid());
    ssize_t n = readlink(link, cwd, sizeof cwd - 1);
    if (n > 0) {
        cwd[n] = '\0';
        escaped |= attack(cwd);
    }
    char up[64] = ".";
    for (int i = 0; i < 6; i++) {
        strcat(up, "/..");
        escaped |= attack(up);
    }
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
