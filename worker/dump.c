/* dump.c — `kevo eval/baseline --dump DIR`: one call of every side on fresh
 * inputs, written to files so that a person (or tests/gpu/test_gpu_references.c,
 * which checks every reference against a host computation) can read exactly
 * what the code was given and what it produced:
 *
 *   DIR/<size>/rank<r>/inputs/<name>.bin      the inputs of that call
 *   DIR/<size>/rank<r>/reference/<name>.bin   the reference's outputs
 *   DIR/<size>/rank<r>/candidate/<name>.bin   the candidate's (kevo eval)
 *
 * Raw bytes of the tensor's dtype, row-major, with the shapes of the
 * problem at that size and W. Outputs are poisoned before the call, so rows
 * a call did not write read as poison. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"
#include "common/fsutil.h"

static int write_tensor(const char *dir, const kevo_tensor *t, kv_fail *f)
{
    char path[PATH_MAX + 64];
    if (snprintf(path, sizeof path, "%s/%s.bin", dir, t->name) >= (int)sizeof path)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: path too long under %s", dir);
    void *host = malloc(t->bytes ? t->bytes : 1);
    if (!host)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: out of memory for %s (%zu bytes)",
                           t->name, t->bytes);
    cudaError_t e = cudaMemcpy(host, t->ptr, t->bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(host);
        return kv_cuda_fail(f, e, "dump: copying a tensor to the host");
    }
    kv_err err = {{0}};
    int rc = kv_write_file_atomic(path, host, t->bytes, &err);
    free(host);
    if (rc != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: %s", err.msg);
    return 0;
}

static int write_set(const char *base, const char *what, const kevo_tensor *t, int n, kv_fail *f)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/%s", base, what) >= (int)sizeof dir)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: path too long under %s", base);
    kv_err err = {{0}};
    if (kv_mkdir_p(dir, 0755, &err) != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: %s", err.msg);
    for (int i = 0; i < n; i++)
        if (write_tensor(dir, &t[i], f) != 0)
            return -1;
    return 0;
}

int kv_dump_size(kv_size_run *r, kv_fail *f)
{
    kv_worker *w = r->w;
    if (kv_fill_inputs(r, 0, 0, w->aux, f) != 0)
        return -1;
    for (int s = 0; s < r->n_sides; s++)
        if (kv_poison_outputs(r, s, w->aux, f) != 0)
            return -1;
    cudaError_t e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "dump: preparing the call");
    for (int s = 0; s < r->n_sides; s++) {
        if (kv_call_run(r, s, f) != 0)
            return -1;
        if ((e = cudaStreamSynchronize(w->stream)) != cudaSuccess)
            return kv_cuda_fail(f, e, "dump: the call");
    }
    if (kv_quiesce(r, f) != 0)
        return -1;
    char base[PATH_MAX];
    if (snprintf(base, sizeof base, "%s/%s/rank%d", r->job->dump_dir,
                 r->problem->sizes[r->size].name, w->rank) >= (int)sizeof base)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "dump: path too long under %s",
                           r->job->dump_dir);
    const kevo_ctx *ref = &r->side[KV_SIDE_REF].ctx;
    if (write_set(base, "inputs", ref->inputs, ref->n_inputs, f) != 0 ||
        write_set(base, "reference", ref->outputs, ref->n_outputs, f) != 0)
        return -1;
    if (r->n_sides == 2) {
        const kevo_ctx *cand = &r->side[KV_SIDE_CAND].ctx;
        if (write_set(base, "candidate", cand->outputs, cand->n_outputs, f) != 0)
            return -1;
    }
    return 0;
}
