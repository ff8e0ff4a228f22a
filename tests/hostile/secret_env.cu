// expect: ok
// secret_env.cu — in kevo_init, looks for the secrets tests/gpu/test_gpu_eval.c plants in kevo's
// environment (values starting "kevo-planted-", under OPENAI_API_KEY, ANTHROPIC_API_KEY,
// AWS_SECRET_ACCESS_KEY and KEVO_PLANTED_SECRET) in its own environment, in
// /proc/<parent>/environ and in every /proc/*/environ it can read. Workers get an environment
// built from an allow-list, kevo erased the key from its own, and Landlock and the workers'
// uid keep other processes' /proc entries out of reach. A secret found makes kevo_init say
// ESCAPED and fail: runtime_error instead of ok. kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG "secret_env"

extern char **environ;

// 1 when the NUL-separated environment file at path holds a planted value.
static int planted_in(const char *path)
{
    static char buf[1 << 16];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i + 13 <= n; i++)
        if (memcmp(buf + i, "kevo-planted-", 13) == 0)
            return 1;
    return 0;
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    int escaped = 0;
    for (char **e = environ; *e; e++)
        if (strstr(*e, "kevo-planted-")) {
            fprintf(stderr, TAG ": ESCAPED: rank %d's environment holds %.40s\n", ctx->rank, *e);
            escaped = 1;
        }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
    if (planted_in(path)) {
        fprintf(stderr, TAG ": ESCAPED: read a planted secret in %s\n", path);
        escaped = 1;
    }
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%.20s/environ", de->d_name);
        if (planted_in(path)) {
            fprintf(stderr, TAG ": ESCAPED: read a planted secret in %s\n", path);
            escaped = 1;
        }
    }
    if (d)
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
