// expect: ok
// proc_mem.cu — in kevo_init, tries to rewrite its own code: opens /proc/self/mem for writing
// and writes a byte of kevo_run's machine code back over itself, then tries the same through
// process_vm_writev on its own pid (the way to undo the worker's NVLS trap). The worker is
// non-dumpable once it is up, so its /proc files belong to root and its uid cannot open mem;
// the system-call filter refuses process_vm_writev with EPERM. A write that gets through makes
// kevo_init say ESCAPED and fail: runtime_error instead of ok. kevo_run is a correct
// all-reduce (the byte written is the one already there).
#include "kevo/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TAG "proc_mem"

extern "C" int kevo_run(kevo_ctx *ctx);

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    int escaped = 0;
    uintptr_t code = (uintptr_t)&kevo_run;
    unsigned char same;
    memcpy(&same, (const void *)code, 1);
    int fd = open("/proc/self/mem", O_RDWR);
    if (fd >= 0) {
        if (pwrite(fd, &same, 1, (off_t)code) == 1) {
            fprintf(stderr, TAG ": ESCAPED: wrote its own code through /proc/self/mem\n");
            escaped = 1;
        }
        close(fd);
    } else {
        fprintf(stderr, TAG ": open /proc/self/mem: %s (refused, as it should be)\n",
                strerror(errno));
    }
    struct iovec local = {&same, 1}, remote = {(void *)code, 1};
    if (process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 1) {
        fprintf(stderr, TAG ": ESCAPED: wrote its own code through process_vm_writev\n");
        escaped = 1;
    } else {
        fprintf(stderr, TAG ": process_vm_writev: %s (refused, as it should be)\n",
                strerror(errno));
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
