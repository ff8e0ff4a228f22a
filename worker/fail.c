/* fail.c — turning CUDA and NCCL errors into verdicts, and cross-rank agreement. */
#include <stdarg.h>
#include <stdio.h>

#include "worker/worker.h"

int kv_fail_set(kv_fail *f, kv_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    f->verdict = v;
    f->elsewhere = 0;
    return -1;
}

int kv_fail_on_other_rank(kv_fail *f, const char *what)
{
    kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s failed on another rank", what);
    f->elsewhere = 1;
    return -1;
}

int kv_cuda_fail(kv_fail *f, cudaError_t e, const char *what)
{
    return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s: CUDA error %s (%s)", what,
                       cudaGetErrorName(e), cudaGetErrorString(e));
}

int kv_nccl_fail(kv_fail *f, ncclResult_t r, const char *what)
{
    return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s: NCCL error %d (%s)", what, (int)r,
                       ncclGetErrorString(r));
}

int kv_agree(kv_worker *w, int status, int *out, kv_fail *f)
{
    cudaError_t e =
        cudaMemcpyAsync(w->agree_buf, &status, sizeof status, cudaMemcpyHostToDevice, w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "agreement (copy)");
    ncclResult_t r =
        ncclAllReduce(w->agree_buf, w->agree_buf, 1, ncclInt32, ncclMax, w->comm, w->aux);
    if (r != ncclSuccess)
        return kv_nccl_fail(f, r, "agreement (ncclAllReduce)");
    e = cudaMemcpyAsync(out, w->agree_buf, sizeof *out, cudaMemcpyDeviceToHost, w->aux);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "agreement (sync)");
    return 0;
}
